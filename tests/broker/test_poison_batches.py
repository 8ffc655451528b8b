"""Poison batches end to end: a batch with a valid CRC but malformed records is refused by the leader of
a replicated partition (nothing appended anywhere, nothing replicated), the producers after it are
acknowledged, and consumers (kafkalite's in the simulator; confluent-kafka and kafka-python over TCP)
read every acknowledged record. Before the leader validated records, such a batch was acknowledged and
replicated, and confluent-kafka silently stopped reading at it.

Only public interfaces are used here, so the same tests run against a kafkalite without the validation.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol import ProducePartition, ProduceRequest, TopicPartition
from kafkalite.protocol.codec.header import decode_response, encode_request
from tests.poison_helpers import poison_batches

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

INVALID_RECORD, CORRUPT_MESSAGE = 87, 2
TP = TopicPartition("t", 0)
# One of each kind for the slower runs; the simulator takes them all.
OVER_TCP = [
    "length varint past the end",
    "lastOffsetDelta beyond the count",
    "offset deltas swapped",
    "trailing bytes",
    "gzip bomb",
    "lz4 with a bad inner record",
]


# ----- the simulator: a 3-broker cluster, kafkalite's own clients ------------------------------------------
@pytest.mark.parametrize("name", list(poison_batches()))
def test_a_replicated_partition_refuses_a_poison_batch_and_keeps_serving(name):
    with Cluster(brokers=3, seed=5) as c:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        _produce(c, [b"a", b"b"])
        leader = c.leader("t", 0)
        answer = c.request(
            leader,
            ProduceRequest(acks=-1, partitions=(ProducePartition(tp=TP, records=poison_batches()[name]),)),
        ).partitions[0]
        assert answer.error_code == INVALID_RECORD, answer
        assert answer.error_message and "batch at position 0" in answer.error_message
        c.run_for(500)  # followers fetch whatever the leader has
        assert [b.rm.partition(TP).log_end_offset for b in c.brokers.values()] == [2, 2, 2]
        _produce(c, [b"c", b"d"])
        assert _consume(c, 4) == [b"a", b"b", b"c", b"d"]


def test_an_unreadable_compressed_payload_answers_corrupt_message():
    from tests.poison_helpers import raw_batch

    with Cluster(brokers=1, seed=5) as c:
        c.create_topic("t", 1, 1)
        bad = raw_batch(b"", 2, codec=1, payload=b"\x1f\x8b\x08\x00 then garbage")
        answer = c.request(
            c.leader("t", 0), ProduceRequest(acks=1, partitions=(ProducePartition(tp=TP, records=bad),))
        ).partitions[0]
        assert answer.error_code == CORRUPT_MESSAGE and "gzip" in answer.error_message


def _produce(c: Cluster, values: list[bytes]) -> None:
    producer = c.producer(acks="all", linger_ms=0)
    futs = [producer.send("t", v, partition=0) for v in values]
    assert c.run_until(lambda: all(f.done() for f in futs), 30_000)
    assert all(f.exception() is None for f in futs)


def _consume(c: Cluster, n: int) -> list[bytes]:
    consumer = c.consumer(auto_offset_reset="earliest")
    consumer.assign([TP])
    got: list[bytes] = []
    for _ in range(20):
        for recs in consumer.poll(200).values():
            got += [r.value for r in recs]
        if len(got) >= n:
            break
    consumer.close()
    return got


# ----- over TCP: raw Produce v8 with the poison, real clients around it -----------------------------------
@pytest.fixture(scope="module")
def three_brokers():
    with BackgroundServer(3) as srv:
        yield srv


def _raw_produce(srv: BackgroundServer, topic: str, batch: bytes) -> dict:
    """Produce v8 with ``batch`` to the leader of ``topic``-0, as a client library would send it."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": srv.bootstrap_servers}).list_topics(topic, timeout=10)
    broker = md.brokers[md.topics[topic].partitions[0].leader]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        s.sendall(encode_request(0, 8, 7, "poison-test", body))
        (size,) = struct.unpack(">i", _recv(s, 4))
        _corr, resp = decode_response(0, 8, _recv(s, size))
    return resp["responses"][0]["partition_responses"][0]


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


@pytest.mark.parametrize("name", OVER_TCP)
def test_real_clients_read_every_acknowledged_record_around_a_refused_poison_batch(three_brokers, name):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    srv = three_brokers
    topic = "p-" + name.replace(" ", "-")
    srv.create_topic(topic, 1, 3, **{"min.insync.replicas": 2})
    p = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all", "linger.ms": 1})
    errors: list = []

    def send(values: list[bytes]) -> None:
        for v in values:
            p.produce(topic, v, partition=0, on_delivery=lambda e, m: errors.append(e) if e else None)
        assert p.flush(30) == 0 and errors == []

    before = [b"before-%d" % i for i in range(50)]
    after = [b"after-%d" % i for i in range(50)]
    send(before)
    answer = _raw_produce(srv, topic, poison_batches()[name])
    assert answer["error_code"] == INVALID_RECORD, answer
    assert answer["error_message"] and "batch at position 0" in answer["error_message"]
    send(after)

    c = Consumer(
        {"bootstrap.servers": srv.bootstrap_servers, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    assert c.get_watermark_offsets(CTP(topic, 0), timeout=10) == (0, 100)
    c.assign([CTP(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.time() + 20
    while len(got) < 100 and time.time() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == before + after

    k = KafkaConsumer(
        bootstrap_servers=srv.bootstrap_servers, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    k.assign([KTP(topic, 0)])
    assert [m.value for m in k] == before + after
    k.close()
