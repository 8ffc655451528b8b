"""Getting events into topics: through a ``Cluster``'s producer, or straight into partition logs.

An event is ``Event(key, value, timestamp_ms)``. Two ways in:

- ``produce_events(cluster, topic, events)``: the real path. A ``Producer`` on the cluster's simulated
  network sends every event (partition by murmur2 of the key, as Kafka's producer does), the leaders
  append, the followers fetch, and the call returns once every record is below the high watermark.
- ``write_events(dir, topic, partitions, events)``: the fast path for experiments that need only files.
  Events are grouped into record batches per partition (same partition choice for keyed events) and
  appended to ``dir/<topic>-<partition>`` logs directly: no broker, no network, no replication.

Both show a tqdm progress bar on long runs (``progress=None`` means: only from ``PROGRESS_FROM`` events).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kafkalite.client.partitioner import partition_for_key
from kafkalite.clock import ManualClock
from kafkalite.config.base import parse_choice
from kafkalite.coordination import paths
from kafkalite.coordination.store import NoNode
from kafkalite.records import build_batch
from kafkalite.records.compression import Compression
from kafkalite.storage import Log

__all__ = [
    "PROGRESS_FROM",
    "DatasetError",
    "Event",
    "LoadReport",
    "produce_events",
    "write_events",
]

PROGRESS_FROM = 500_000  # events: below this a progress bar is more noise than help

# The producer settings for bulk loading: bigger batches than Kafka's 16 KiB default mean fewer requests
# per record, which is what a bulk loader would configure too. History off: it would hold every send.
BULK_PRODUCER_CONFIG: dict[str, Any] = {
    "batch.size": 262_144,
    "linger.ms": 5,
    "kafkalite.history.enabled": False,
}
SENDS_PER_SIM_MS = 2_000  # the application offers this many events per simulated millisecond
MAX_UNACKED = 200_000  # like a full buffer.memory: wait for acknowledgements beyond this backlog


class DatasetError(ValueError):
    """A data set or loader was asked for something it does not have (names the valid choices)."""


class Event(NamedTuple):
    """One record to produce: serialized key (or None), serialized value, CreateTime timestamp."""

    key: bytes | None
    value: bytes
    timestamp_ms: int


@dataclass
class LoadReport:
    """What a load wrote: records per partition (offsets taken), and the wall time it took."""

    topic: str
    partitions: int
    records: int
    per_partition: dict[int, int]
    bytes: int
    seconds: float
    path: str = "producer"  # "producer" (through a cluster) or "logs" (straight into partition logs)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


def _progress(total: int | None, progress: bool | None, desc: str) -> Any:
    from tqdm.auto import tqdm  # deferred: only for a progress bar

    show = progress if progress is not None else (total or 0) >= PROGRESS_FROM
    return tqdm(total=total, desc=desc, unit="rec", unit_scale=True, disable=not show, mininterval=0.5)


def _codec(name: str) -> Compression:
    codecs = tuple(c.name.lower() for c in Compression)
    return Compression[parse_choice("compression", name, codecs).upper()]


def _check_partitions(partitions: int) -> None:
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise DatasetError(f"partitions must be an integer >= 1, got {partitions!r}")


def produce_events(
    cluster: Any,
    topic: str,
    events: Iterable[Event],
    *,
    partitions: int | None = None,
    replication_factor: int = 1,
    topic_config: Mapping[str, Any] | None = None,
    acks: str | int = "all",
    producer_config: Mapping[str, Any] | None = None,
    total: int | None = None,
    progress: bool | None = None,
    timeout_ms: int = 600_000,
) -> LoadReport:
    """Produce ``events`` into ``topic`` of ``cluster`` and wait until all are committed (below the HW).

    With ``partitions`` the topic is created first (``replication_factor`` replicas, ``topic_config``);
    without, it must exist. Raises ``RuntimeError`` if any send fails or the HW does not reach the end.
    """
    if partitions is not None:
        _check_partitions(partitions)
        cluster.create_topic(topic, partitions, replication_factor, config=dict(topic_config or {}))
    n_parts = _partition_count(cluster, topic)
    if total is None and hasattr(events, "__len__"):
        total = len(events)  # type: ignore[arg-type]
    config = {**BULK_PRODUCER_CONFIG, **(producer_config or {}), "acks": acks}
    producer = cluster.producer(config=config)
    net = cluster.net
    before = {p: _leader_leo(cluster, topic, p) for p in range(n_parts)}
    send = producer.send
    sent = 0
    nbytes = 0
    # Oldest-first futures, one per chunk: a cheap way to see how far acknowledgements have got.
    marks: deque = deque()
    t0 = time.perf_counter()
    with _progress(total, progress, f"produce {topic}") as bar:
        for key, value, ts in events:
            fut = send(topic, value, key=key, timestamp=ts)
            sent += 1
            nbytes += len(value) + (len(key) if key else 0)
            if sent % SENDS_PER_SIM_MS == 0:
                marks.append(fut)
                net.run_for(1)
                while len(marks) * SENDS_PER_SIM_MS > MAX_UNACKED and not marks[0].done():
                    net.run_for(1)
                while marks and marks[0].done():
                    marks.popleft()
                bar.update(SENDS_PER_SIM_MS)
        producer.flush()
        if not cluster.run_until(producer.idle, timeout_ms):
            raise RuntimeError(
                f"producing into {topic!r}: not every record was acknowledged in {timeout_ms} ms"
            )
        bar.update(sent - bar.n)
    errors = producer.metrics["record-error-total"]
    if errors:
        raise RuntimeError(f"producing into {topic!r}: {errors} of {sent} records failed")
    ends = {p: _leader_leo(cluster, topic, p) for p in range(n_parts)}
    committed = cluster.run_until(
        lambda: all(cluster.high_watermark(topic, p) == ends[p] for p in range(n_parts)), timeout_ms
    )
    if not committed:
        raise RuntimeError(f"producing into {topic!r}: the high watermark did not reach the log end")
    seconds = time.perf_counter() - t0
    producer.close()
    per_partition = {p: ends[p] - before[p] for p in range(n_parts)}
    if sum(per_partition.values()) != sent:
        raise RuntimeError(
            f"producing into {topic!r}: sent {sent} records but the logs grew by {sum(per_partition.values())}"
        )
    return LoadReport(topic, n_parts, sent, per_partition, nbytes, seconds, "producer")


def _partition_count(cluster: Any, topic: str) -> int:
    try:
        data, _ = cluster.store.get(paths.topic_path(topic))
    except NoNode:
        raise DatasetError(f"topic {topic!r} does not exist: pass partitions=N to create it") from None
    return len(paths.TopicAssignment.decode(data).partitions)


def _leader_leo(cluster: Any, topic: str, partition: int) -> int:
    leader = cluster.leader(topic, partition)
    part = None if leader is None else cluster.replica(leader, topic, partition)
    if part is None:
        raise RuntimeError(f"{topic}-{partition} has no live leader")
    return part.log_end_offset


def write_events(
    dir: str | Path,
    topic: str,
    partitions: int,
    events: Iterable[Event],
    *,
    records_per_batch: int = 1_000,
    log_config: Mapping[str, Any] | None = None,
    total: int | None = None,
    progress: bool | None = None,
    compression: str = "none",
) -> LoadReport:
    """Append ``events`` to the logs ``dir/<topic>-<p>`` as record batches; no cluster involved.

    A keyed event goes to ``murmur2(key) % partitions`` (what Kafka's producer would pick); events without
    a key fill one batch per partition in turn. Existing logs are appended to. ``compression`` is a
    ``compression.type`` codec name (none, gzip, snappy, lz4, zstd) applied to every batch, as a producer
    with that setting would.
    """
    _check_partitions(partitions)
    if records_per_batch < 1:
        raise DatasetError(f"records_per_batch must be >= 1, got {records_per_batch!r}")
    codec = _codec(compression)
    if total is None and hasattr(events, "__len__"):
        total = len(events)  # type: ignore[arg-type]
    root = Path(dir)
    # Appends are stamped with CreateTime from the events; the clock only serves log housekeeping.
    clock = ManualClock()
    logs = [Log.open(root / f"{topic}-{p}", dict(log_config or {}), clock=clock) for p in range(partitions)]
    before = [log.log_end_offset for log in logs]
    pending: list[list[tuple[bytes | None, bytes]]] = [[] for _ in range(partitions)]
    stamps: list[list[int]] = [[] for _ in range(partitions)]
    cache: dict[bytes, int] = {}
    rr = 0
    sent = 0
    nbytes = 0

    def flush(p: int) -> None:
        if pending[p]:
            logs[p].append(build_batch(pending[p], timestamp=stamps[p], compression=codec))
            pending[p], stamps[p] = [], []

    t0 = time.perf_counter()
    try:
        with _progress(total, progress, f"write {topic}") as bar:
            for key, value, ts in events:
                if key is None:
                    p = rr
                    if len(pending[p]) + 1 >= records_per_batch:
                        rr = (rr + 1) % partitions
                else:
                    p = cache.get(key)
                    if p is None:
                        p = cache[key] = partition_for_key(key, partitions)
                pending[p].append((key, value))
                stamps[p].append(ts)
                if len(pending[p]) >= records_per_batch:
                    flush(p)
                sent += 1
                nbytes += len(value) + (len(key) if key else 0)
                if sent % 50_000 == 0:
                    bar.update(50_000)
            for p in range(partitions):
                flush(p)
            bar.update(sent - bar.n)
        per_partition = {p: logs[p].log_end_offset - before[p] for p in range(partitions)}
    finally:
        for log in logs:
            log.close()
    seconds = time.perf_counter() - t0
    return LoadReport(topic, partitions, sent, per_partition, nbytes, seconds, "logs")
