"""DescribeLogDirs and AlterReplicaLogDirs over Kafka's wire protocol, from kafka-python's admin client
(confluent-kafka's AdminClient has neither call), and the ACLs the listener checks for them."""

from __future__ import annotations

import time

from kafkalite.host.server import BackgroundServer
from kafkalite.security import gate
from kafkalite.security.acl import CLUSTER_NAME, Operation, ResourceType


def _dirs_of(described: list[dict], broker: int, topic: str, partition: int) -> list[tuple[str, bool]]:
    (entry,) = [e for e in described if e["broker"] == broker]
    return [
        (d["log_dir"], p["is_future_key"])
        for d in entry["log_dirs"]
        for t in d["topics"]
        if t["name"] == topic
        for p in t["partitions"]
        if p["partition_index"] == partition
    ]


def test_kafka_python_describes_log_dirs_and_moves_a_replica_between_them():
    from kafka import KafkaConsumer, KafkaProducer, TopicPartitionReplica
    from kafka.admin import KafkaAdminClient
    from kafka.errors import LogDirNotFoundError, NoError

    with BackgroundServer(2, log_dirs_per_broker=2, config={"zookeeper.session.timeout.ms": 1500}) as srv:
        srv.create_topic("t", 2, 2)
        producer = KafkaProducer(bootstrap_servers=srv.bootstrap_servers, acks="all")
        for i in range(200):
            producer.send("t", b"v%d" % i, partition=0)
        producer.flush()
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap_servers)
        try:
            described = admin.describe_log_dirs()
            assert sorted(e["broker"] for e in described) == [1, 2]
            for e in described:
                assert len(e["log_dirs"]) == 2 and all(d["error_code"] == 0 for d in e["log_dirs"])
                assert all(d["total_bytes"] > 0 for d in e["log_dirs"]), "v4: the volume's size"
            ((here, future),) = _dirs_of(described, 1, "t", 0)
            assert not future
            (there,) = [d["log_dir"] for e in described if e["broker"] == 1 for d in e["log_dirs"]
                        if d["log_dir"] != here]  # fmt: skip
            answer = admin.alter_replica_log_dirs(
                {TopicPartitionReplica("t", 0, 1): there, TopicPartitionReplica("t", 0, 2): "/no/such/dir"}
            )
            assert answer == {
                TopicPartitionReplica("t", 0, 1): NoError,
                TopicPartitionReplica("t", 0, 2): LogDirNotFoundError,
            }
            for i in range(200, 300):  # appends go on during the move
                producer.send("t", b"v%d" % i, partition=0)
            producer.flush()
            deadline = time.time() + 20
            while _dirs_of(admin.describe_log_dirs({"t": [0]}), 1, "t", 0) != [(there, False)]:
                assert time.time() < deadline, admin.describe_log_dirs({"t": [0]})
                time.sleep(0.1)
        finally:
            admin.close()
            producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=srv.bootstrap_servers, auto_offset_reset="earliest", consumer_timeout_ms=3000
        )
        from kafka import TopicPartition

        consumer.assign([TopicPartition("t", 0)])
        got = [m.value for m in consumer]
        consumer.close()
        assert got == [b"v%d" % i for i in range(300)]


def test_describe_log_dirs_needs_describe_and_alter_replica_log_dirs_alter_on_the_cluster():
    def deny(op, rtype, name):
        return not (rtype == ResourceType.CLUSTER and name == CLUSTER_NAME)

    assert gate.check(35, {"topics": None}, deny, lambda: False) == (
        None,
        None,
        {"error_code": 31, "results": []},
    )
    body = {"dirs": [{"path": "/d1", "topics": [{"name": "t", "partitions": [0, 1]}]}]}
    fwd, _merge, whole = gate.check(34, body, deny, lambda: False)
    assert fwd is None and whole == {
        "throttle_time_ms": 0,
        "results": [
            {
                "topic_name": "t",
                "partitions": [
                    {"partition_index": 0, "error_code": 31},
                    {"partition_index": 1, "error_code": 31},
                ],
            }
        ],
    }
    allowed = {(Operation.DESCRIBE, 35), (Operation.ALTER, 34)}
    for op, key in allowed:
        ok = lambda o, t, n, op=op: o == op and t == ResourceType.CLUSTER  # noqa: E731
        assert gate.check(key, body, ok, lambda: False)[0] == body
