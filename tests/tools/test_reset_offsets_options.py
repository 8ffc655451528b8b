"""``consumer-groups --reset-offsets``: every reset spec, scope and execution option kafka-consumer-groups has."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cli import kafkalite
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.tools.consumer_groups import parse_duration, parse_reset_plan, parse_topic_scope, run

CONFIG = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
L0 = TopicPartition("logs", 0)


@pytest.fixture()
def cluster(tmp_path):
    """orders: 2 partitions of 20 records, one every 500 ms of virtual time; logs: 1 partition of 4.
    Group "app" committed orders 15 and 5 and has stopped (Empty); group "live" still has a member."""
    c = Cluster(brokers=3, seed=2, dir=tmp_path / "cluster", config=CONFIG)
    c.create_topic("orders", 2, 3)
    c.create_topic("logs", 1, 3)
    producer = c.producer(acks="all")
    for i in range(40):
        producer.send("orders", b"v%d" % i, partition=i % 2)
        c.run_for(500)
    for i in range(4):
        producer.send("logs", b"l%d" % i, partition=0)
    producer.flush()
    assert c.run_until(producer.idle, 30_000)
    for group in ("app", "live"):
        consumer = c.consumer(group + "-1", config={"group.id": group, "auto.offset.reset": "earliest",
                                                    "enable.auto.commit": False})  # fmt: skip
        consumer.subscribe(["orders"])
        while consumer.assignment() != {T0, T1}:
            consumer.poll(100)
        consumer.commit_sync({T0: 15, T1: 5})
        if group == "app":
            consumer.close()
    c.run_for(100)
    yield c
    c.close()


def offsets(out: str) -> list[tuple[str, int, int]]:
    """(topic, partition, new offset) from the plan table."""
    rows = [line.split() for line in out.splitlines()]
    return [(r[1], int(r[2]), int(r[3])) for r in rows if len(r) == 4 and r[2].isdigit()]


def test_to_offset_dry_run_commits_nothing_and_execute_commits_clamped(cluster) -> None:
    out = run(cluster, "--reset-offsets --group app --all-topics --to-offset 8 --dry-run")
    assert "Dry run" in out and offsets(out) == [("orders", 0, 8), ("orders", 1, 8)], out
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}
    out = run(cluster, "--reset-offsets --group app --all-topics --to-offset 8 --execute")
    assert "Dry run" not in out and cluster.group_offsets("app") == {T0: 8, T1: 8}
    run(cluster, "--reset-offsets --group app --all-topics --to-offset 1000 --execute")
    assert cluster.group_offsets("app") == {T0: 20, T1: 20}  # past the high watermark: the high watermark
    run(cluster, "--reset-offsets --group app --all-topics --to-offset -7 --execute")
    assert cluster.group_offsets("app") == {T0: 0, T1: 0}  # below the log start: the log start


def test_to_current_keeps_committed_and_takes_the_end_where_none(cluster) -> None:
    out = run(cluster, "--reset-offsets --group app --topic orders --topic logs --to-current --execute")
    assert offsets(out) == [("logs", 0, 4), ("orders", 0, 15), ("orders", 1, 5)], out
    assert cluster.group_offsets("app") == {T0: 15, T1: 5, L0: 4}


def test_by_duration_counts_back_from_the_clusters_clock(cluster) -> None:
    part = cluster.replica(cluster.leader("orders", 0), "orders", 0)
    ts = list(part.log.iter_records())[7].timestamp
    # Half way back to the record before (1000 ms earlier): the request's own time moves the clock a little.
    back = cluster.net.now_ms() - ts + 500
    out = run(
        cluster,
        f"--reset-offsets --group app --topic orders:0 --by-duration PT{back // 1000}.{back % 1000:03d}S",
    )
    assert offsets(out) == [("orders", 0, 7)], out
    out = run(cluster, "--reset-offsets --group app --all-topics --by-duration P365D")
    assert offsets(out) == [("orders", 0, 0), ("orders", 1, 0)], out  # before every record: the start
    out = run(cluster, "--reset-offsets --group app --all-topics --by-duration PT0S")
    assert offsets(out) == [("orders", 0, 20), ("orders", 1, 20)], out  # none that late: the end
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}


def test_from_file_and_export_round_trip(cluster, tmp_path) -> None:
    exported = run(cluster, "--reset-offsets --group app --all-topics --shift-by 2 --export --dry-run")
    assert exported == "orders,0,17\norders,1,7\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.replace("orders,1,7", "orders,1,99") + "logs,0,-3\n")
    out = run(cluster, f"--reset-offsets --group app --from-file {plan} --dry-run")
    assert offsets(out) == [("logs", 0, 0), ("orders", 0, 17), ("orders", 1, 20)], out  # clamped
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}
    run(cluster, f"--reset-offsets --group app --from-file {plan} --execute")
    assert cluster.group_offsets("app") == {T0: 17, T1: 20, L0: 0}


def test_bad_csv_duration_datetime_and_topic_name_the_option(cluster, tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("orders,0,5\norders,zero,5\n")
    with pytest.raises(click.ClickException, match="--from-file line 2"):
        run(cluster, f"--reset-offsets --group app --from-file {bad} --dry-run")
    other = tmp_path / "other.csv"
    other.write_text("someone,orders,0,5\n")
    with pytest.raises(click.ClickException, match="No reset plan for group app"):
        run(cluster, f"--reset-offsets --group app --from-file {other} --dry-run")
    with pytest.raises(click.ClickException, match="--by-duration"):
        run(cluster, "--reset-offsets --group app --all-topics --by-duration 3h --dry-run")
    with pytest.raises(click.ClickException, match="--to-datetime"):
        run(cluster, "--reset-offsets --group app --all-topics --to-datetime yesterday --dry-run")
    with pytest.raises(click.ClickException, match="Invalid partition 'x'"):
        run(cluster, "--reset-offsets --group app --topic orders:x --to-earliest --dry-run")
    with pytest.raises(click.ClickException, match="has no partition 9"):
        run(cluster, "--reset-offsets --group app --topic orders:0,9 --to-earliest --dry-run")
    with pytest.raises(click.ClickException, match="'nope' does not exist"):
        run(cluster, "--reset-offsets --group app --topic nope --to-earliest --dry-run")
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}


def test_scope_and_spec_rules(cluster) -> None:
    out = run(cluster, "--reset-offsets --group app --topic orders:1 --to-earliest --execute")
    assert offsets(out) == [("orders", 1, 0)] and cluster.group_offsets("app") == {T0: 15, T1: 0}
    with pytest.raises(click.UsageError, match="--all-topics, --topic"):
        run(cluster, "--reset-offsets --group app --to-earliest")
    with pytest.raises(click.UsageError, match="--to-earliest can't be used with --to-offset"):
        run(cluster, "--reset-offsets --group app --all-topics --to-earliest --to-offset 3")
    with pytest.raises(click.UsageError, match="--by-duration"):  # the error lists every spec
        run(cluster, "--reset-offsets --group app --all-topics")
    with pytest.raises(click.UsageError, match="one of --execute and --dry-run"):
        run(cluster, "--reset-offsets --group app --all-topics --to-latest --execute --dry-run")


def test_no_dry_run_or_execute_warns_and_does_a_dry_run(cluster) -> None:
    result = CliRunner().invoke(
        kafkalite.commands["consumer-groups"],
        ["--reset-offsets", "--group", "app", "--all-topics", "--to-latest"],
        obj=cluster,
    )
    assert result.exit_code == 0, result.output
    assert "--execute option is missing" in result.stderr and "Dry run" in result.stdout
    quiet = CliRunner().invoke(
        kafkalite.commands["consumer-groups"],
        ["--reset-offsets", "--group", "app", "--all-topics", "--to-latest", "--dry-run"],
        obj=cluster,
    )
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}


def test_active_group_refused_and_all_groups_resets_the_rest(cluster) -> None:
    with pytest.raises(
        click.ClickException, match="group 'live' is inactive, but the current state is Stable"
    ):
        run(cluster, "--reset-offsets --group live --all-topics --to-offset 2 --execute")
    assert cluster.group_offsets("live") == {T0: 15, T1: 5}
    with pytest.raises(click.ClickException, match="inactive"):
        run(cluster, "--reset-offsets --all-groups --all-topics --to-offset 2 --execute")
    assert cluster.group_offsets("live") == {T0: 15, T1: 5}
    assert cluster.group_offsets("app") == {T0: 2, T1: 2}  # the stopped group was reset all the same
    with pytest.raises(click.ClickException, match="'live' is inactive"):  # even a dry run, as in Kafka
        run(cluster, "--reset-offsets --group live --all-topics --to-offset 2 --dry-run")
    result = CliRunner().invoke(
        kafkalite.commands["consumer-groups"],
        ["--reset-offsets", "--all-groups", "--all-topics", "--to-current", "--export", "--dry-run"],
        obj=cluster,
    )
    assert result.stdout == "app,orders,0,2\napp,orders,1,2\n", result.output  # several groups: group first
    assert "'live' is inactive" in result.stderr and result.exit_code == 1


def test_directory_mode_takes_the_same_options(cluster, tmp_path) -> None:
    cluster.checkpoint_high_watermarks()
    d = str(cluster.dir)
    out = CliRunner().invoke(kafkalite, ["consumer-groups", "--cluster-dir", d, "--reset-offsets", "--group",
                                         "app", "--topic", "orders:0", "--to-offset", "99", "--export"])  # fmt: skip
    assert out.exit_code == 0 and out.stdout == "orders,0,20\n", out.output


@given(st.integers(0, 400), st.integers(0, 30), st.integers(0, 90), st.integers(0, 90), st.integers(0, 999))
def test_parse_duration_reads_iso_8601(days, hours, minutes, seconds, millis) -> None:
    text = f"P{days}DT{hours}H{minutes}M{seconds}.{millis:03d}S"
    want = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + millis
    assert parse_duration(text) == want
    assert parse_duration("-" + text.lower()) == -want


def test_parse_duration_rejects_what_java_rejects() -> None:
    assert parse_duration("PT1H30M") == 5_400_000 and parse_duration("P2D") == 172_800_000
    assert parse_duration("PT-1.5S") == -1500
    for bad in ("P", "PT", "P1Y", "1H", "PT1H2", "P1DT", ""):
        with pytest.raises(ValueError, match="--by-duration"):
            parse_duration(bad)


def test_parse_helpers() -> None:
    assert parse_reset_plan("t,0,5\nt,1,6\n", ["g"]) == {
        "g": {TopicPartition("t", 0): 5, TopicPartition("t", 1): 6}
    }
    assert parse_reset_plan("g,t,0,5\nh,t,0,6\n", ["g", "h"]) == {
        "g": {TopicPartition("t", 0): 5},
        "h": {TopicPartition("t", 0): 6},
    }
    assert parse_topic_scope(["a:2,0", "b"], lambda t: [0, 1, 2] if t == "a" else [0, 1]) == [
        TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="expected topic name and partitions"):
        parse_topic_scope(["a:"], lambda t: [0])
