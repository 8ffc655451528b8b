"""``kafkalite reassign-partitions``: Kafka's kafka-reassign-partitions against running brokers (generate,
execute with a log dir named on the new broker, verify, list, cancel), and its checks of the JSON."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkalite.cli import kafkalite
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol import TopicPartition
from kafkalite.tools import reassign_partitions as tool

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture(scope="module")
def three_brokers():
    with BackgroundServer(3, log_dirs_per_broker=2, config={"zookeeper.session.timeout.ms": 1500}) as srv:
        srv.create_topic("t", 2, 2)
        yield srv


def _run(srv: BackgroundServer, *args: str):
    return CliRunner().invoke(
        kafkalite, ["reassign-partitions", "--bootstrap-server", srv.bootstrap_servers, *args]
    )


def _plan(tmp_path, partitions: list[dict], name: str = "plan.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def _replicas(srv: BackgroundServer) -> dict[TopicPartition, list[int]]:
    with AdminClient(srv.bootstrap_servers) as admin:
        return tool._current(admin, ["t"])


def _wait_verified(srv: BackgroundServer, plan: str) -> str:
    deadline = time.time() + 30
    while True:
        out = _run(srv, "--verify", "--reassignment-json-file", plan).output
        if "still in progress" not in out or time.time() > deadline:
            return out
        time.sleep(0.2)


def test_generate_proposes_the_topics_over_the_brokers_listed(three_brokers, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
    r = _run(three_brokers, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "Current partition replica assignment", r.output
    assert lines[3] == "Proposed partition reassignment configuration", r.output
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    now = _replicas(three_brokers)
    assert [(p["topic"], p["partition"], p["replicas"]) for p in current["partitions"]] == [
        ("t", tp.partition, now[tp]) for tp in (TP0, TP1)
    ]
    for p in proposed["partitions"]:
        assert sorted(p["replicas"]) == [2, 3], f"{p} is not on brokers 2 and 3 only"
        assert p["log_dirs"] == ["any", "any"], p
    assert _replicas(three_brokers) == now, "--generate changed the cluster"


def test_execute_moves_a_partition_and_its_records_and_verify_says_so(three_brokers, tmp_path):
    producer = Producer({"bootstrap.servers": three_brokers.bootstrap_servers, "acks": "all"})
    for i in range(50):
        producer.produce("t", value=f"r{i}".encode(), partition=0)
    assert producer.flush(20) == 0, "records left unacknowledged"
    del producer  # librdkafka's threads stop now, not after the brokers do
    before = _replicas(three_brokers)[TP0]
    target = [b for b in (3, 2, 1) if b not in before][:1] + before[:1]
    newcomer = target[0]
    with AdminClient(three_brokers.bootstrap_servers) as admin:
        dirs = [d["log_dir"] for d in admin.describe_log_dirs(newcomer)["results"]]
    plan = _plan(tmp_path, [
        {"topic": "t", "partition": 0, "replicas": target, "log_dirs": [dirs[1], "any"]}])  # fmt: skip
    r = _run(three_brokers, "--execute", "--reassignment-json-file", plan)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[:2] == ["Current partition replica assignment", ""], r.output
    assert json.loads(lines[2])["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": before, "log_dirs": ["any"] * len(before)}
    ]
    assert lines[3:5] == ["", "Save this to use as the --reassignment-json-file option during rollback"]
    assert lines[5] == "Successfully started partition reassignment for t-0", r.output
    assert lines[6] == (
        f"Successfully started moving log directory to {dirs[1]} for replica t-0 with broker {newcomer} "
    ), r.output

    out = _wait_verified(three_brokers, plan)
    assert out.splitlines()[:2] == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is completed.",
    ], out
    deadline = time.time() + 30
    while "completed successfully" not in out and time.time() < deadline:
        time.sleep(0.2)
        out = _run(three_brokers, "--verify", "--reassignment-json-file", plan).output
    assert f"Reassignment of replica t-0-{newcomer} completed successfully." in out, out
    assert _replicas(three_brokers)[TP0] == target
    assert _run(three_brokers, "--list").output == "No partition reassignments found.\n"

    consumer = Consumer({"bootstrap.servers": three_brokers.bootstrap_servers, "group.id": "after-move",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([CkTopicPartition("t", 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < 50 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    consumer.close()
    assert got == [f"r{i}" for i in range(50)], f"after the move the partition holds {got[:5]}..."


def test_verify_names_a_partition_whose_replicas_differ_and_nothing_moves(three_brokers, tmp_path):
    now = _replicas(three_brokers)[TP1]
    other = [b for b in (1, 2, 3) if b not in now][:1] + now[:1]
    plan = _plan(tmp_path, [{"topic": "t", "partition": 1, "replicas": other}])
    r = _run(three_brokers, "--verify", "--reassignment-json-file", plan)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[1] == (
        f"There is no active reassignment of partition t-1, but replica set is "
        f"{','.join(map(str, now))} rather than {','.join(map(str, other))}."
    ), r.output
    r = _run(three_brokers, "--cancel", "--reassignment-json-file", plan)
    assert r.output.splitlines() == [
        "None of the specified partition reassignments are active.",
        "None of the specified partition moves are active.",
    ], r.output


def test_execute_refuses_an_unknown_broker_and_a_missing_partition(three_brokers, tmp_path):
    r = _run(three_brokers, "--execute", "--reassignment-json-file",
             _plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1, 9]}]))  # fmt: skip
    assert r.exit_code == 1 and r.output == "Unknown broker id 9\n", r.output
    r = _run(three_brokers, "--execute", "--reassignment-json-file",
             _plan(tmp_path, [{"topic": "t", "partition": 7, "replicas": [1, 2]}]))  # fmt: skip
    assert r.exit_code == 1 and r.output == "Unable to find partition: t-7\n", r.output


def test_the_action_and_its_arguments_are_checked_first(three_brokers):
    r = _run(three_brokers, "--verify", "--list")
    assert r.exit_code == 2 and "exactly one action: --generate, --execute, --verify" in r.output
    r = _run(three_brokers, "--verify")
    assert r.exit_code == 2 and 'Missing required argument "[reassignment-json-file]"' in r.output
    r = _run(three_brokers, "--generate", "--broker-list", "1")
    assert r.exit_code == 2 and "topics-to-move-json-file" in r.output


# ------------------------------------------------------------------------- the JSON, without a cluster


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ([], "Partition reassignment list cannot be empty"),
        ([{"topic": "t", "partition": 0, "replicas": []}], "Partition replica list cannot be empty"),
        (
            [
                {"topic": "t", "partition": 0, "replicas": [1]},
                {"topic": "t", "partition": 0, "replicas": [2]},
            ],
            "Partition reassignment contains duplicate topic partitions: t-0",
        ),
        (
            [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}],
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1",
        ),
    ],
)
def test_a_bad_plan_is_refused_with_kafkas_message(partitions, message):
    with pytest.raises(tool.ReassignmentError) as e:
        tool.parse_plan(json.dumps({"version": 1, "partitions": partitions}))
    assert str(e.value) == message


def test_a_plan_keeps_the_dirs_it_names_and_writes_back_the_same_json():
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[2,1],"log_dirs":["/d/b","any"]}]}'
    )
    plan = tool.parse_plan(text)
    assert plan.partitions == {TP1: [2, 1]}
    assert plan.log_dirs == {(2, TP1): "/d/b"}
    assert tool.reassignment_json(plan.partitions, plan.log_dirs) == text
    with pytest.raises(ValueError, match="Not supported version field value 2"):
        tool.parse_plan('{"version":2,"partitions":[]}')
    with pytest.raises(tool.ReassignmentError, match=r"duplicate entries: \['a'\]"):
        tool.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')


class _Busy:
    """An admin with a reassignment in progress and nothing else."""

    def list_partition_reassignments(self, partitions=None):
        return {TP0: ([1, 2, 3], [3], [1])}


def test_execute_refuses_while_another_reassignment_runs_and_list_shows_it():
    plan = tool.parse_plan('{"partitions":[{"topic":"t","partition":1,"replicas":[1]}]}')
    with pytest.raises(tool.ReassignmentError) as e:
        tool.execute(_Busy(), plan)
    assert str(e.value).startswith("Cannot execute because there is an existing partition assignment.")
    assert tool.list_reassignments(_Busy()) == (
        "Current partition reassignments:\nt-0: replicas: 1,2,3. adding: 3. removing: 1."
    )


class _Late:
    """An admin whose replica reaches its new broker only on the third AlterReplicaLogDirs."""

    def __init__(self) -> None:
        self.calls = 0

    def alter_replica_log_dirs(self, broker, targets):
        self.calls += 1
        return dict.fromkeys(targets, 0 if self.calls >= 3 else tool.REPLICA_NOT_AVAILABLE)


def test_a_log_dir_move_is_retried_until_the_replica_exists_or_the_timeout():
    late = _Late()
    lines = tool._start_moves(late, {(3, TP0): "/d/a"}, 5.0, sleep=lambda s: None)
    assert late.calls == 3
    assert lines == ["Successfully started moving log directory to /d/a for replica t-0 with broker 3 "]
    now = iter(range(100))
    with pytest.raises(tool.ReassignmentError) as e:
        tool._start_moves(_Late(), {(3, TP0): "/d/a"}, 1.0, sleep=lambda s: None, clock=lambda: next(now))
    assert str(e.value) == "Timed out before log directory move could be started for: t-0-3"
