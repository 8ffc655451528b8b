"""The consumer's pull side on a real simulated Cluster: fetching, positions, offsets, long polling, faults."""

from __future__ import annotations

import pytest

from kafkalite.client.consumer import (
    Consumer,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
)
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.errors import InvalidConfigError, OffsetOutOfRangeError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(brokers=3, seed=7, config={"zookeeper.session.timeout.ms": 6000})


def produce(cluster: Cluster, values, partition=None, topic="t", **kw) -> list:
    producer = kw.pop("producer", None) or cluster.producer(linger_ms=0)
    futures = [producer.send(topic, v, partition=partition, **kw) for v in values]
    assert cluster.run_until(lambda: all(f.done() for f in futures), 20_000)
    return [f.result() for f in futures]


def drain(consumer: Consumer, want: int, rounds: int = 50) -> dict[TopicPartition, list]:
    got: dict[TopicPartition, list] = {}
    for _ in range(rounds):
        if sum(len(v) for v in got.values()) >= want:
            break
        for tp, recs in consumer.poll(1000).items():
            got.setdefault(tp, []).extend(recs)
    return got


def vals(recs) -> list[bytes]:
    return [r.value for r in recs]


def test_config_defaults_and_validation() -> None:
    cfg = ConsumerConfig.from_props({})
    assert (cfg.fetch_min_bytes, cfg.fetch_max_wait_ms, cfg.fetch_max_bytes) == (1, 500, 52_428_800)
    assert (cfg.max_partition_fetch_bytes, cfg.max_poll_records, cfg.auto_offset_reset) == (
        1_048_576,
        500,
        "latest",
    )
    assert (cfg.request_timeout_ms, cfg.retry_backoff_ms, cfg["isolation.level"]) == (
        30_000,
        100,
        "read_uncommitted",
    )
    assert (
        ConsumerConfig.from_props({"max_poll_records": "7", "auto.offset.reset": "Earliest"}).max_poll_records
        == 7
    )
    with pytest.raises(InvalidConfigError, match="auto.offset.reset"):
        ConsumerConfig.from_props({"auto.offset.reset": "smallest"})
    assert (
        ConsumerConfig.from_props({"isolation.level": "read_committed"})["isolation.level"]
        == "read_committed"
    )
    with pytest.raises(InvalidConfigError, match="isolation.level"):
        ConsumerConfig.from_props({"isolation.level": "committed"})
    with pytest.raises(InvalidConfigError, match="max.poll.records"):
        ConsumerConfig.from_props({"max.poll.records": 0})
    with pytest.raises(InvalidConfigError, match="unknown consumer config"):
        ConsumerConfig.from_props({"fetch.wait": 1})


def test_reads_everything_in_order_per_partition(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=3, replication_factor=3)
    producer = cluster.producer(linger_ms=2)
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    futures = []
    for i in range(300):
        v = f"v{i}".encode()
        futures.append(producer.send("t", v, key=f"k{i % 17}".encode()))
    assert cluster.run_until(lambda: all(f.done() for f in futures), 20_000)
    for f, i in zip(futures, range(300), strict=True):
        sent[f.result().partition].append(f"v{i}".encode())
    consumer = cluster.consumer(auto_offset_reset="earliest")
    tps = [TopicPartition("t", p) for p in range(3)]
    consumer.assign(tps)
    assert consumer.assignment() == set(tps)
    got = drain(consumer, 300)
    for p in range(3):
        tp = TopicPartition("t", p)
        assert vals(got.get(tp, [])) == sent[p]
        assert [r.offset for r in got.get(tp, [])] == list(range(len(sent[p])))
        assert consumer.position(tp) == len(sent[p])
    assert consumer.poll(100) == {}


def test_only_records_below_high_watermark(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=3)
    producer = cluster.producer(acks=1, linger_ms=0)
    produce(cluster, [b"a", b"b"], partition=0, producer=producer)
    consumer = cluster.consumer(auto_offset_reset="earliest")
    consumer.assign([TP0])
    assert vals(drain(consumer, 2)[TP0]) == [b"a", b"b"]
    leader = cluster.leader("t", 0)
    followers = [b for b in cluster.replicas("t", 0) if b != leader]
    for b in followers:
        cluster.pause(b)
    fut = producer.send("t", b"c", partition=0)
    assert cluster.run_until(fut.done, 5_000)
    assert cluster.log_end_offsets("t", 0)[leader] == 3
    assert cluster.high_watermark("t", 0) == 2
    assert consumer.poll(2_000) == {}  # written on the leader, not replicated: not visible
    assert consumer.position(TP0) == 2
    for b in followers:
        cluster.resume(b)
    got = consumer.poll(5_000)
    assert vals(got[TP0]) == [b"c"] and got[TP0][0].offset == 2


def test_long_poll_waits_then_returns_when_data_arrives(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    consumer = cluster.consumer(fetch_max_wait_ms=500)
    consumer.assign([TP0])
    assert consumer.position(TP0) == 0  # latest on an empty log
    fetches = consumer.metrics["fetch-total"]
    t0 = cluster.net.now_ms()
    assert consumer.poll(2_000) == {}
    assert cluster.net.now_ms() - t0 == 2_000
    # The broker held each fetch ~fetch.max.wait.ms: a handful of requests, not a busy loop.
    assert 3 <= consumer.metrics["fetch-total"] - fetches <= 6
    producer = cluster.producer(linger_ms=0)
    cluster.net.after(300, lambda: producer.send("t", b"late", partition=0))
    t1 = cluster.net.now_ms()
    got = consumer.poll(10_000)
    assert vals(got[TP0]) == [b"late"]
    assert 300 <= cluster.net.now_ms() - t1 < 350  # returned as soon as the record was committed


def test_seek_position_beginning_end(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, [f"v{i}".encode() for i in range(10)], partition=0)
    consumer = cluster.consumer()
    consumer.assign([TP0])
    assert consumer.position(TP0) == 10  # auto.offset.reset=latest
    consumer.seek(TP0, 4)
    assert consumer.position(TP0) == 4
    got = consumer.poll(1_000)
    assert [r.offset for r in got[TP0]] == list(range(4, 10))  # front of the batch skipped
    assert consumer.position(TP0) == 10
    consumer.seek_to_beginning([TP0])
    assert consumer.position(TP0) == 0
    assert vals(consumer.poll(1_000)[TP0]) == [f"v{i}".encode() for i in range(10)]
    consumer.seek(TP0, 2)
    consumer.seek_to_end([TP0])
    assert consumer.position(TP0) == 10
    assert consumer.beginning_offsets([TP0]) == {TP0: 0}
    assert consumer.end_offsets([TP0]) == {TP0: 10}
    with pytest.raises(IllegalStateError, match="No current assignment"):
        consumer.seek(TP1, 0)
    with pytest.raises(ValueError):
        consumer.seek(TP0, -1)


def test_seek_discards_buffered_records(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, [f"v{i}".encode() for i in range(10)], partition=0)
    consumer = cluster.consumer(auto_offset_reset="earliest", max_poll_records=3)
    consumer.assign([TP0])
    assert [r.offset for r in consumer.poll(1_000)[TP0]] == [0, 1, 2]
    consumer.seek(TP0, 8)
    assert [r.offset for r in consumer.poll(1_000)[TP0]] == [8, 9]


def test_offsets_for_times(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    producer = cluster.producer(linger_ms=0)
    futures = [
        producer.send("t", f"v{i}".encode(), partition=0, timestamp=1_000 * (i + 1)) for i in range(10)
    ]
    assert cluster.run_until(lambda: all(f.done() for f in futures), 10_000)
    consumer = cluster.consumer()
    res = consumer.offsets_for_times({TP0: 2_500, TP1: 0})
    assert res[TP0] is not None and (res[TP0].offset, res[TP0].timestamp) == (2, 3_000)
    assert isinstance(res[TP0], OffsetAndTimestamp)
    assert res[TP1] is None  # empty partition
    assert consumer.offsets_for_times({TP0: 1_000})[TP0].offset == 0
    assert consumer.offsets_for_times({TP0: 10_001})[TP0] is None
    with pytest.raises(ValueError):
        consumer.offsets_for_times({TP0: -5})
    consumer.assign([TP0])
    consumer.seek(TP0, res[TP0].offset)
    assert vals(consumer.poll(1_000)[TP0]) == [f"v{i}".encode() for i in range(2, 10)]


def test_max_poll_records_caps_and_buffers(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, [f"v{i}".encode() for i in range(20)], partition=0)
    consumer = cluster.consumer(auto_offset_reset="earliest", max_poll_records=7)
    consumer.assign([TP0])
    first = consumer.poll(1_000)[TP0]
    fetches = consumer.metrics["fetch-total"]
    second = consumer.poll(1_000)[TP0]
    assert consumer.metrics["fetch-total"] == fetches  # served from the buffer, no new fetch
    third = consumer.poll(1_000)[TP0]
    assert [len(first), len(second), len(third)] == [7, 7, 6]
    assert [r.offset for r in first + second + third] == list(range(20))


def test_pause_and_resume(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    produce(cluster, [b"a0", b"a1"], partition=0)
    produce(cluster, [b"b0", b"b1"], partition=1)
    consumer = cluster.consumer(auto_offset_reset="earliest")
    consumer.assign([TP0, TP1])
    consumer.pause([TP1])
    assert consumer.paused() == {TP1}
    got = drain(consumer, 2)
    assert set(got) == {TP0} and vals(got[TP0]) == [b"a0", b"a1"]
    assert consumer.poll(1_000) == {}
    assert consumer.position(TP1) == 0
    consumer.resume([TP1])
    assert consumer.paused() == set()
    assert vals(consumer.poll(1_000)[TP1]) == [b"b0", b"b1"]


def test_auto_offset_reset_policies(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, [b"old"], partition=0)
    earliest = cluster.consumer(auto_offset_reset="earliest")
    latest = cluster.consumer(auto_offset_reset="latest")
    none = cluster.consumer(auto_offset_reset="none")
    for c in (earliest, latest, none):
        c.assign([TP0])
    assert vals(earliest.poll(1_000)[TP0]) == [b"old"]
    assert latest.position(TP0) == 1
    with pytest.raises(NoOffsetForPartitionError, match="t-0"):
        none.poll(100)
    with pytest.raises(NoOffsetForPartitionError):
        none.position(TP0)
    produce(cluster, [b"new"], partition=0)
    assert vals(latest.poll(1_000)[TP0]) == [b"new"]
    none.seek(TP0, 0)
    assert vals(drain(none, 2)[TP0]) == [b"old", b"new"]


def test_offset_out_of_range(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, [f"v{i}".encode() for i in range(5)], partition=0)
    earliest = cluster.consumer(auto_offset_reset="earliest")
    latest = cluster.consumer(auto_offset_reset="latest")
    none = cluster.consumer(auto_offset_reset="none")
    for c in (earliest, latest, none):
        c.assign([TP0])
        c.seek(TP0, 100)  # past the log end: OFFSET_OUT_OF_RANGE
    assert [r.offset for r in earliest.poll(2_000)[TP0]] == [0, 1, 2, 3, 4]
    assert earliest.metrics["offset-reset-total"] == 1
    assert latest.poll(1_000) == {}
    assert latest.position(TP0) == 5
    with pytest.raises(OffsetOutOfRangeError, match="t-0"):
        none.poll(1_000)


def test_offset_out_of_range_after_retention(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1, config={"segment.bytes": 400})
    producer = cluster.producer(linger_ms=0, max_in_flight_requests_per_connection=1)
    for i in range(30):  # one record per batch, so several segments
        produce(cluster, [f"value-{i:03d}".encode()], partition=0, producer=producer)
    consumer = cluster.consumer(auto_offset_reset="earliest")
    consumer.assign([TP0])
    consumer.seek(TP0, 0)
    # Retention deletes the oldest segments under the consumer's position.
    part = cluster.replica(cluster.leader("t", 0), "t", 0)
    part.log.delete_records(part.log.segments[-2].base_offset)
    start = part.log.log_start_offset
    assert start > 0
    got = drain(consumer, 30 - start)
    assert got[TP0][0].offset == start
    assert [r.offset for r in got[TP0]] == list(range(start, 30))
    assert consumer.metrics["offset-reset-total"] == 1


def test_poll_without_assignment_raises(cluster: Cluster) -> None:
    consumer = cluster.consumer()
    with pytest.raises(IllegalStateError, match="not subscribed"):
        consumer.poll(10)


def test_leader_crash_during_consumption(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", linger_ms=0)
    consumer = cluster.consumer(auto_offset_reset="earliest", request_timeout_ms=3_000)
    consumer.assign([TP0])
    consumed: list = []
    futures = []
    old = cluster.leader("t", 0)
    for i in range(200):
        futures.append(producer.send("t", f"v{i}".encode(), partition=0))
        for recs in consumer.poll(2).values():
            consumed.extend(recs)
        cluster.run_for(3)
        if i == 80:
            cluster.crash(old)
    assert cluster.run_until(lambda: all(f.done() for f in futures), 60_000)
    new = cluster.leader("t", 0)
    assert new is not None and new != old
    hw = cluster.high_watermark("t", 0)
    for _ in range(30):
        if len(consumed) >= hw:
            break
        for recs in consumer.poll(1_000).values():
            consumed.extend(recs)
    committed = cluster.read_all("t")[0]
    assert [r.offset for r in consumed] == list(range(hw))  # nothing skipped, nothing twice
    assert [r.value for r in consumed] == [r.value for r in committed]
    acked = {f.result().offset for f in futures if f.done() and f.exception() is None}
    assert acked <= {r.offset for r in consumed}
    assert consumer.metrics["metadata-request-total"] > 1  # it found the new leader
