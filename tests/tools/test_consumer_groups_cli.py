"""``kafkalite consumer-groups``: describe, list and reset offsets, in-process and on a cluster directory."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.tools.consumer_groups import (
    GroupNotEmptyError,
    OffsetsDirectory,
    describe_group,
    format_describe,
    format_reset,
    list_groups,
    parse_datetime,
    plan_reset,
    reset_offsets,
)

CONFIG = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.fixture()
def cluster(tmp_path):
    """Two partitions of 20 records; group "app" (one member, still running) committed 15 and 5."""
    c = Cluster(brokers=3, seed=2, dir=tmp_path / "cluster", config=CONFIG)
    c.create_topic("orders", 2, 3)
    producer = c.producer(acks="all")
    for i in range(40):
        producer.send("orders", b"v%d" % i, partition=i % 2)
    producer.flush()
    assert c.run_until(producer.idle, 30_000)
    consumer = c.consumer("app-1", config={"group.id": "app", "auto.offset.reset": "earliest",
                                           "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["orders"])
    while consumer.assignment() != {T0, T1}:
        consumer.poll(100)
    consumer.commit_sync({T0: 15, T1: 5})
    c.member = consumer
    yield c
    c.close()


def test_describe_in_process(cluster) -> None:
    state, rows = describe_group(cluster, "app")
    assert state == "Stable"
    assert [(r.partition, r.current_offset, r.log_end_offset, r.lag) for r in rows] == [
        (0, 15, 20, 5),
        (1, 5, 20, 15),
    ]
    assert {r.consumer_id for r in rows} == {cluster.member.member_id}
    text = format_describe(state, rows)
    header = text.splitlines()[0].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]  # fmt: skip
    assert text.splitlines()[1].split()[:6] == ["app", "orders", "0", "15", "20", "5"]
    assert list_groups(cluster) == ["app"]


def test_describe_shows_client_id_and_host(cluster) -> None:
    _state, rows = describe_group(cluster, "app")
    assert {r.client_id for r in rows} == {"app-1"} and {r.host for r in rows} == {"/app-1"}


def test_reset_dry_run_changes_nothing_and_only_an_empty_group_is_reset(cluster) -> None:
    for execute in (False, True):  # Kafka refuses a group with members even for a dry run
        with pytest.raises(GroupNotEmptyError, match="inactive, but the current state is Stable"):
            reset_offsets(cluster, "app", ["orders"], "to_earliest", execute=execute)
    cluster.member.close()  # leaves the group: now it is Empty
    cluster.run_for(100)
    rows = reset_offsets(cluster, "app", ["orders"], "to_earliest")
    assert [r.new_offset for r in rows] == [0, 0] and [r.current_offset for r in rows] == [15, 5]
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}
    rows = reset_offsets(cluster, "app", None, "shift_by", -10, execute=True)
    assert [r.new_offset for r in rows] == [5, 0]  # 5 - 10 is clamped to the log start
    assert cluster.group_offsets("app") == {T0: 5, T1: 0}
    reset_offsets(cluster, "app", None, "to_latest", execute=True)
    assert cluster.group_offsets("app") == {T0: 20, T1: 20}
    state, rows = describe_group(cluster, "app")
    assert state == "Empty" and all(r.lag == 0 and r.consumer_id == "-" for r in rows)
    assert "no active members" in format_describe(state, rows)


def test_reset_to_datetime(cluster) -> None:
    cluster.member.close()
    cluster.run_for(100)
    part = cluster.replica(cluster.leader("orders", 0), "orders", 0)
    records = list(part.log.iter_records())
    ts = records[7].timestamp
    rows = reset_offsets(cluster, "app", ["orders"], "to_datetime", ts)
    first = next(r.offset for r in records if r.timestamp >= ts)
    assert rows[0].new_offset == first
    rows = reset_offsets(cluster, "app", ["orders"], "to_datetime", 10**13)  # after every record: the end
    assert [r.new_offset for r in rows] == [20, 20]


def test_plan_reset_rules() -> None:
    bounds = {T0: (3, 10)}
    assert plan_reset("g", {T0: 5}, bounds, "shift_by", 100)[0].new_offset == 10
    assert plan_reset("g", {T0: None}, bounds, "shift_by", 2)[0].new_offset == 5
    assert plan_reset("g", {T0: 5}, bounds, "to_datetime", by_time={T0: None})[0].new_offset == 10
    with pytest.raises(ValueError, match="reset mode"):
        plan_reset("g", {}, bounds, "to_middle")
    with pytest.raises(ValueError, match="integer"):
        plan_reset("g", {T0: 5}, bounds, "shift_by", "3")
    assert parse_datetime("1970-01-01T00:00:01.500") == 1500
    with pytest.raises(ValueError, match="to-datetime"):
        parse_datetime("yesterday")
    assert format_reset(plan_reset("g", {T0: 5}, bounds, "to_latest"), False).startswith("Dry run")


def test_directory_mode_matches_the_live_answers(cluster) -> None:
    live_state, live_rows = describe_group(cluster, "app")
    cluster.checkpoint_high_watermarks()
    found = OffsetsDirectory(cluster.dir)
    assert found.groups() == ["app"]
    state, rows = found.describe("app")
    assert [(r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in rows] == [
        (r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in live_rows
    ]
    assert [r.new_offset for r in found.plan_reset("app", None, "shift_by", 3)] == [18, 8]


def test_cli_on_a_cluster_directory(cluster) -> None:
    cluster.checkpoint_high_watermarks()
    d = str(cluster.dir)
    run = CliRunner().invoke
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--list"])
    assert out.exit_code == 0 and out.output.split() == ["app"], out.output
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--describe", "--group", "app"])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert lines[0].startswith("GROUP") and lines[1].split()[:6] == ["app", "orders", "0", "15", "20", "5"]
    out = run(
        kafkalite,
        [
            "consumer-groups",
            "--cluster-dir",
            d,
            "--reset-offsets",
            "--group",
            "app",
            "--all-topics",
            "--to-latest",
        ],
    )
    assert out.exit_code == 0 and "Dry run" in out.output and out.output.strip().endswith("20"), out.output
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--reset-offsets", "--group", "app",
                          "--all-topics", "--to-earliest", "--execute"])  # fmt: skip
    assert out.exit_code == 2 and "running cluster" in out.output
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--describe", "--group", "nope"])
    assert out.exit_code == 1 and "does not exist" in out.output
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--describe"])
    assert out.exit_code == 2 and "--group" in out.output
    out = run(kafkalite, ["consumer-groups", "--cluster-dir", d, "--reset-offsets", "--group", "app",
                          "--all-topics"])  # fmt: skip
    assert out.exit_code == 2 and "--to-earliest" in out.output


def test_the_command_line_on_a_live_cluster_executes_resets(cluster) -> None:
    import click

    from kafkalite.tools.consumer_groups import run

    assert run(cluster, "--list").split() == ["app"]
    described = run(cluster, ["--describe", "--group", "app"])
    assert described.strip() == format_describe(*describe_group(cluster, "app")).strip()
    with pytest.raises(click.ClickException, match="inactive"):  # a member is still in the group
        run(cluster, "--reset-offsets --group app --all-topics --to-earliest --execute")
    assert cluster.group_offsets("app") == {T0: 15, T1: 5}
    cluster.member.close()  # leaves: the group is Empty
    out = run(cluster, "--reset-offsets --group app --all-topics --shift-by -3 --execute")
    assert "Dry run" not in out
    assert cluster.group_offsets("app") == {T0: 12, T1: 2}
    with pytest.raises(click.UsageError, match="cluster-dir"):
        run(cluster, "--list --cluster-dir " + str(cluster.dir))
