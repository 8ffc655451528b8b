"""A confluent-kafka (librdkafka) consume-transform-produce loop with ``group.protocol=consumer`` against
kafkalite's TCP broker: TxnOffsetCommit v3 carries the consumer's group metadata (member id, member epoch),
which the group coordinator checks, so offsets from a member that has left are refused."""

from __future__ import annotations

import time

import pytest

from kafkalite.host.server import BackgroundServer
from tests import hostile

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def server():
    config = {"group.consumer.heartbeat.interval.ms": 300, "group.initial.rebalance.delay.ms": 0}
    with BackgroundServer(1, config=config) as srv:
        srv.create_topic("txin", 2, 1)
        srv.create_topic("txout", 2, 1)
        yield srv


def test_txn_offset_commit_v3_is_served(server) -> None:
    import socket

    host, port = next(iter(server.server.addresses.values()))
    with socket.create_connection((host, port), timeout=10) as s:
        answer = hostile.call(s, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert served[28] == (0, 3), "TxnOffsetCommit up to v3 (KIP-447's group metadata)"


def test_confluent_copies_with_a_consumer_protocol_member_and_a_left_member_is_refused(server) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    feeder = Producer({"bootstrap.servers": server.bootstrap_servers, "acks": "all"})
    inputs = [f"v{i:02d}".encode() for i in range(20)]
    for i, v in enumerate(inputs):
        feeder.produce("txin", v, partition=i % 2)
    assert feeder.flush(30) == 0

    consumer = Consumer({
        "bootstrap.servers": server.bootstrap_servers, "group.id": "txcopy", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe(["txin"])
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "transactional.id": "txcopier"})
    producer.init_transactions(30)
    copied = 0
    deadline = time.time() + 60
    while copied < len(inputs) and time.time() < deadline:
        msgs = [m for m in consumer.consume(10, 0.5) if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("txout", m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        copied += len(msgs)
    assert copied == len(inputs)
    committed = consumer.committed([TopicPartition("txin", p) for p in range(2)], 30)
    assert sorted(tp.offset for tp in committed) == [10, 10], committed

    # The member leaves; a transaction still carrying its group metadata cannot commit offsets.
    left = consumer.consumer_group_metadata()
    consumer.close()
    producer.begin_transaction()
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([TopicPartition("txin", 0, 3)], left, 30)
    err = refused.value.args[0]
    assert err.name() == "UNKNOWN_MEMBER_ID" and err.txn_requires_abort(), err
    producer.abort_transaction(30)

    reader = Consumer({
        "bootstrap.servers": server.bootstrap_servers, "group.id": "txread", "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })  # fmt: skip
    reader.assign([TopicPartition("txout", p, 0) for p in range(2)])
    out: list[bytes] = []
    deadline = time.time() + 20
    while len(out) < len(inputs) and time.time() < deadline:
        out += [m.value() for m in reader.consume(100, 0.5) if m.error() is None]
    reader.close()
    assert sorted(out) == sorted(v.upper() for v in inputs)
