"""Brokers apply retention and compaction on their own (``LogManager``), below the high watermark."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.clock import ManualClock
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.records import build_batch
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.cleaner import LogCleaner

HOUSEKEEPING = {"log.retention.check.interval.ms": 1000, "log.cleaner.backoff.ms": 1000}


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(brokers=3, seed=3, config=HOUSEKEEPING)


def _produce(cluster: Cluster, topic: str, items: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = cluster.producer(acks="all", linger_ms=0, batch_size=512)
    futures = [producer.send(topic, value, key=key) for key, value in items]
    assert cluster.run_until(lambda: all(f.done() for f in futures), 60_000)
    assert all(f.exception() is None for f in futures)


def test_retention_deletes_old_segments_on_every_replica(cluster: Cluster) -> None:
    cluster.create_topic(
        "clicks", 1, 3, config={"segment.bytes": 1024, "retention.ms": 5000, "file.delete.delay.ms": 0}
    )
    _produce(cluster, "clicks", [(None, b"x" * 100) for _ in range(60)])
    before = {b: cluster.replica(b, "clicks", 0).log.log_start_offset for b in cluster.brokers}
    assert before == {1: 0, 2: 0, 3: 0}
    cluster.run_for(8000)  # older than retention.ms, and a retention check ran since
    starts = {b: cluster.replica(b, "clicks", 0).log.log_start_offset for b in cluster.brokers}
    assert starts[cluster.leader("clicks", 0)] > 0
    # Every replica deleted everything but its active segment; the log end stays where it was.
    for b in cluster.brokers:
        log = cluster.replica(b, "clicks", 0).log
        assert len(log.segments) == 1 and log.log_end_offset == 60
        assert log.log_start_offset == log.segments[0].base_offset
    assert cluster.events("log_retention")


def test_consumer_behind_retention_resets_per_auto_offset_reset(cluster: Cluster) -> None:
    cluster.create_topic(
        "clicks", 1, 3, config={"segment.bytes": 1024, "retention.ms": 5000, "file.delete.delay.ms": 0}
    )
    _produce(cluster, "clicks", [(None, b"y" * 100) for _ in range(60)])
    cluster.run_for(8000)
    start = cluster.replica(cluster.leader("clicks", 0), "clicks", 0).log.log_start_offset
    assert start > 0
    tp = TopicPartition("clicks", 0)
    consumer = cluster.consumer(auto_offset_reset="earliest")
    consumer.assign([tp])
    consumer.seek(tp, 0)  # deleted by retention: OFFSET_OUT_OF_RANGE, then earliest
    got: list[int] = []
    for _ in range(20):
        got += [r.offset for r in consumer.poll(500).get(tp, [])]
        if got and got[-1] == 59:
            break
    assert got == list(range(start, 60))


def test_compacted_topic_is_cleaned_by_the_brokers(cluster: Cluster) -> None:
    cluster.create_topic(
        "prices",
        1,
        3,
        config={"cleanup.policy": "compact", "segment.bytes": 2048, "min.cleanable.dirty.ratio": 0.1},
    )
    keys = [f"k{i % 5}".encode() for i in range(200)]
    _produce(cluster, "prices", [(k, f"v{i}".encode()) for i, k in enumerate(keys)])
    cluster.run_for(3000)
    last = {k: f"v{i}".encode() for i, k in enumerate(keys)}
    for b in cluster.brokers:
        part = cluster.replica(b, "prices", 0)
        records = list(part.log.iter_records(None, part.log.log_end_offset))
        assert len(records) < 200, f"broker {b} did not compact"
        latest = {r.key: r.value for r in records}
        assert latest == last  # the newest value of every key survives
    assert cluster.events("log_cleaned")


def test_cleaner_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    config = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": 200})
    log = Log.open(tmp_path / "t-0", config=config, clock=clock)
    for i in range(12):
        log.append(build_batch([(b"k", f"v{i}".encode())], timestamp=clock.now_ms()))
    assert len(log.segments) > 3
    cleaner = LogCleaner()
    _, end_all = cleaner.cleanable_range(log)
    hw = log.segments[2].base_offset + 1  # inside the third segment
    _, end_hw = cleaner.cleanable_range(log, high_watermark=hw)
    assert end_hw == log.segments[2].base_offset < end_all
    cleaner.clean(log, high_watermark=hw)
    # Nothing at or above the HW's segment was touched: its records are all still there.
    kept = [r.offset for r in log.iter_records(log.segments[2].base_offset, log.log_end_offset)]
    assert kept == list(range(log.segments[2].base_offset, 12))
    log.close()
