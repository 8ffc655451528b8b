"""``kafkalite log-dirs``: Kafka's kafka-log-dirs --describe against running brokers with two log dirs each,
and --alter, the log_dirs half of a kafka-reassign-partitions JSON."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol import TopicPartition
from kafkalite.tools.log_dirs import parse_log_dir_moves


@pytest.fixture(scope="module")
def two_brokers():
    with BackgroundServer(2, log_dirs_per_broker=2, config={"zookeeper.session.timeout.ms": 1500}) as srv:
        srv.create_topic("t", 2, 2)
        srv.create_topic("u", 1, 1)
        yield srv


def _run(*args: str):
    return CliRunner().invoke(kafkalite, ["log-dirs", *args])


def _doc(output: str) -> dict:
    lines = output.splitlines()
    assert lines[0] == "Querying brokers for log directories information", output
    assert lines[1].startswith("Received log directory information from brokers "), output
    return json.loads(lines[2])


def test_describe_prints_kafkas_json_for_the_brokers_and_topics_asked(two_brokers):
    r = _run("--bootstrap-server", two_brokers.bootstrap_servers, "--describe")
    assert r.exit_code == 0, r.output
    doc = _doc(r.output)
    assert list(doc) == ["brokers", "version"] and doc["version"] == 1
    assert [b["broker"] for b in doc["brokers"]] == [1, 2]
    for b in doc["brokers"]:
        assert len(b["logDirs"]) == 2
        for d in b["logDirs"]:
            assert list(d) == ["partitions", "error", "logDir"] and d["error"] is None
            for p in d["partitions"]:
                assert list(p) == ["partition", "size", "offsetLag", "isFuture"]
    names = {p["partition"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]}
    assert {"t-0", "t-1", "u-0"} <= names
    r = _run("--bootstrap-server", two_brokers.bootstrap_servers, "--describe", "--broker-list", "2",
             "--topic-list", "t")  # fmt: skip
    doc = _doc(r.output)
    assert r.output.splitlines()[1].endswith("brokers 2")
    assert [b["broker"] for b in doc["brokers"]] == [2]
    assert {p["partition"] for d in doc["brokers"][0]["logDirs"] for p in d["partitions"]} == {"t-0", "t-1"}


def test_describe_refuses_a_broker_that_does_not_exist(two_brokers):
    r = _run("--bootstrap-server", two_brokers.bootstrap_servers, "--describe", "--broker-list", "1,9")
    assert r.exit_code == 1
    assert "The given brokers do not exist from --broker-list: 9. Current existent brokers: 1,2" in r.output


def test_alter_moves_a_replica_to_the_dir_its_reassignment_json_names(two_brokers, tmp_path):
    doc = _doc(
        _run("--bootstrap-server", two_brokers.bootstrap_servers, "--describe", "--broker-list", "1").output
    )
    dirs = doc["brokers"][0]["logDirs"]
    here = next(d["logDir"] for d in dirs if any(p["partition"] == "t-0" for p in d["partitions"]))
    there = next(d["logDir"] for d in dirs if d["logDir"] != here)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": [there, "any"]}]}))  # fmt: skip
    r = _run(
        "--bootstrap-server", two_brokers.bootstrap_servers, "--alter", "--reassignment-json-file", str(plan)
    )
    assert r.exit_code == 0, r.output
    assert r.output == f"Moving replica t-0 on broker 1 to {there}: started\n"
    deadline = time.time() + 20
    while True:
        doc = _doc(_run("--bootstrap-server", two_brokers.bootstrap_servers, "--describe", "--broker-list", "1",
                        "--topic-list", "t").output)  # fmt: skip
        where = {(p["partition"], p["isFuture"]): d["logDir"] for d in doc["brokers"][0]["logDirs"]
                 for p in d["partitions"]}  # fmt: skip
        if where.get(("t-0", False)) == there and ("t-0", True) not in where:
            break
        assert time.time() < deadline, where
        time.sleep(0.1)
    # a replica on a broker that does not hold one is a reassignment, which --alter refuses
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "u", "partition": 0, "replicas": [1, 2], "log_dirs": [there, there]}]}))  # fmt: skip
    r = _run(
        "--bootstrap-server", two_brokers.bootstrap_servers, "--alter", "--reassignment-json-file", str(plan)
    )
    assert r.exit_code == 1 and "holds no replica of u-0" in r.output, r.output


def test_a_reassignment_json_is_read_as_kafka_reads_it():
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["/a", "any", "/b"]},
        {"topic": "t", "partition": 1, "replicas": [1, 2]},
    ]})  # fmt: skip
    assert parse_log_dir_moves(text) == {(1, TopicPartition("t", 0)): "/a", (3, TopicPartition("t", 0)): "/b"}
    with pytest.raises(ValueError, match="log_dirs has 1 entries for 2 replicas"):
        parse_log_dir_moves('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["/a"]}]}')
    with pytest.raises(ValueError, match="does not parse"):
        parse_log_dir_moves("{")
    with pytest.raises(ValueError, match="needs topic, partition and replicas"):
        parse_log_dir_moves('{"partitions":[{"topic":"t"}]}')


def test_exactly_one_action_is_asked_for():
    r = _run("--bootstrap-server", "127.0.0.1:1")
    assert r.exit_code == 2 and "exactly one of --describe, --alter" in r.output
    r = _run("--bootstrap-server", "127.0.0.1:1", "--alter")
    assert r.exit_code == 2 and "--alter needs --reassignment-json-file" in r.output
