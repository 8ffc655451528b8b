"""Offsets kept in an external database beside the output (Kafka's "storing offsets outside Kafka").

A consumer whose output goes to a database can write that output and "how far I have read" in one
database transaction. When it starts, or when a rebalance hands it a partition, it seeks to the offsets the
database holds instead of the group's committed offsets. A crash anywhere then leaves either the whole
transaction (those records are not read again) or none of it (they are read again and written once): every
input record lands in the output exactly once, without Kafka transactions.

The naive versions keep the offsets in Kafka and commit them apart from the output:

* ``commit-after``: write the output, then commit to Kafka. A crash in between reads the batch again, so
  its rows are written twice (at-least-once: duplicates).
* ``commit-before``: commit to Kafka, then write the output. A crash in between skips a batch that was
  never written (at-most-once: losses).

``run_external_offsets(seed, mode, directory)`` runs one seeded application on a one-broker cluster: it
consumes a topic into an SQLite file, crashing at random points of random batches (the consumer dies
without leaving its group; the SQLite connection closes with its transaction uncommitted, which is what a
dead process leaves: SQLite's journal rolls it back), restarting each time, until it has read to the end.
The report counts each input record's rows in the output.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalite.client.consumer_coordinator import ConsumerRebalanceListener
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

__all__ = ["MODES", "CRASH_POINTS", "ExternalOffsetsReport", "OutputStore", "run_external_offsets"]

MODES = ("sqlite", "commit-after", "commit-before")
# Where a batch can die, in each mode's order of work.
CRASH_POINTS: dict[str, tuple[str, ...]] = {
    "sqlite": ("after-poll", "mid-transaction", "before-kafka-commit"),
    "commit-after": ("after-poll", "mid-transaction", "before-kafka-commit"),
    "commit-before": ("after-poll", "after-kafka-commit", "mid-transaction"),
}
TOPIC = "payments"
MEMBER_CONFIG: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "max.poll.records": 15,
    "session.timeout.ms": 3000,  # a crashed member's partitions move after 3 virtual seconds
    "heartbeat.interval.ms": 500,
}
BROKER_CONFIG: dict[str, Any] = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,  # one broker
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}


class Crash(Exception):
    """The application's process dies here."""


class OutputStore:
    """The application's SQLite database: its output rows and, per partition, the next offset to read."""

    def __init__(self, path: str | Path) -> None:
        # Autocommit mode: transactions are the explicit BEGIN ... COMMIT below, nothing implicit.
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS output (topic TEXT, partition INTEGER, offset INTEGER, value BLOB)"
        )
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS offsets (topic TEXT, partition INTEGER, next_offset INTEGER, "
            "PRIMARY KEY (topic, partition))"
        )

    def offsets(self) -> dict[TopicPartition, int]:
        rows = self.db.execute("SELECT topic, partition, next_offset FROM offsets")
        return {TopicPartition(t, p): o for t, p, o in rows}

    def write(
        self,
        records: list[tuple[TopicPartition, int, bytes]],
        next_offsets: dict[TopicPartition, int] | None,
        crash: Callable[[str], None],
    ) -> None:
        """One transaction: the rows, then (when given) the next offsets. ``crash("mid-transaction")`` may
        end the process after the rows, before COMMIT."""
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT INTO output VALUES (?, ?, ?, ?)", [(tp.topic, tp.partition, o, v) for tp, o, v in records]
        )
        crash("mid-transaction")
        if next_offsets:
            self.db.executemany(
                "INSERT INTO offsets VALUES (?, ?, ?) ON CONFLICT (topic, partition) "
                "DO UPDATE SET next_offset = excluded.next_offset",
                [(tp.topic, tp.partition, o) for tp, o in next_offsets.items()],
            )
        self.db.execute("COMMIT")

    def output_offsets(self) -> list[tuple[str, int, int]]:
        return list(self.db.execute("SELECT topic, partition, offset FROM output"))

    def close(self) -> None:
        """Close without committing: an open transaction is dropped, as a dead process's would be."""
        self.db.close()


class _SeekToStoredOffsets(ConsumerRebalanceListener):
    """On assignment, position each partition at the database's next offset (where it has one); partitions
    it has none for start where the group's committed offset or ``auto.offset.reset`` says."""

    def __init__(self, store: OutputStore) -> None:
        self.store = store
        self.consumer: Any = None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        stored = self.store.offsets()
        for tp in sorted(partitions):
            if tp in stored:
                self.consumer.seek(tp, stored[tp])


@dataclass
class ExternalOffsetsReport:
    mode: str
    seed: int
    records: int
    crashes: list[str]
    copies: Counter[tuple[str, int, int]]
    """How many output rows each input record (topic, partition, offset) has; absent: none."""

    @property
    def duplicated(self) -> int:
        return sum(1 for n in self.copies.values() if n > 1)

    @property
    def lost(self) -> int:
        return self.records - len(self.copies)

    @property
    def exactly_once(self) -> bool:
        return self.lost == 0 and self.duplicated == 0


def run_external_offsets(
    seed: int,
    mode: str,
    directory: str | Path,
    *,
    records: int = 300,
    partitions: int = 3,
    crash_probability: float = 0.3,
    max_crashes: int = 6,
) -> ExternalOffsetsReport:
    """Consume ``records`` records of a ``partitions``-partition topic into SQLite under ``directory``, the
    ``mode`` way (one of ``MODES``), crashing with ``crash_probability`` per batch (at most ``max_crashes``
    times) at a random point of ``CRASH_POINTS[mode]``, restarting after each crash."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    rng = random.Random(seed)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(brokers=1, seed=seed, dir=directory / "cluster", config=BROKER_CONFIG)
    try:
        cluster.create_topic(TOPIC, partitions, 1)
        producer = cluster.producer(acks="all")
        for i in range(records):
            producer.send(TOPIC, b"payment-%d" % i, key=b"k%d" % rng.randrange(1000))
        producer.flush()
        if not cluster.run_until(producer.idle, 30_000):
            raise RuntimeError("the input records were not all acknowledged")
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        ends = cluster.offset_bounds(tps)
        crashes: list[str] = []
        incarnation = 0
        while True:
            incarnation += 1
            done = _run_once(cluster, mode, directory / "app.db", incarnation, rng, tps, ends, crashes,
                             crash_probability if len(crashes) < max_crashes else 0.0)  # fmt: skip
            if done:
                break
        store = OutputStore(directory / "app.db")
        try:
            copies = Counter(store.output_offsets())
        finally:
            store.close()
        return ExternalOffsetsReport(mode, seed, records, crashes, copies)
    finally:
        cluster.close()


def _run_once(
    cluster: Any,
    mode: str,
    db_path: Path,
    incarnation: int,
    rng: random.Random,
    tps: list[TopicPartition],
    ends: dict[TopicPartition, tuple[int, int]],
    crashes: list[str],
    crash_probability: float,
) -> bool:
    """One process lifetime: True when it has read everything, False when it crashed."""
    name = f"app-{incarnation}"
    consumer = cluster.consumer(name, config={**MEMBER_CONFIG, "group.id": "payments-app"})
    store = OutputStore(db_path)
    if mode == "sqlite":
        listener = _SeekToStoredOffsets(store)
        listener.consumer = consumer
        consumer.subscribe([TOPIC], listener=listener)
    else:
        consumer.subscribe([TOPIC])
    try:
        idle_polls = 0
        while True:
            batch = consumer.poll(200)
            rows = [(tp, r.offset, r.value) for tp, recs in sorted(batch.items()) for r in recs]
            if not rows:
                idle_polls += 1
                caught_up = consumer.assignment() == set(tps) and all(
                    consumer.position(tp) >= ends[tp][1] for tp in tps
                )
                if caught_up and _finished(cluster, mode, store, tps, ends):
                    consumer.close()
                    return True
                if idle_polls > 300:
                    raise RuntimeError(f"{name} stopped making progress (assigned {consumer.assignment()})")
                continue
            idle_polls = 0
            point = rng.choice(CRASH_POINTS[mode]) if rng.random() < crash_probability else None

            def crash(here: str, point: str | None = point) -> None:
                if here == point:
                    crashes.append(f"{name} {here}")
                    raise Crash(here)

            next_offsets = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
            crash("after-poll")
            if mode == "sqlite":
                store.write(rows, next_offsets, crash)
                crash("before-kafka-commit")
                consumer.commit_sync(next_offsets)  # only for tools' lag; restarts ignore it
            elif mode == "commit-after":
                store.write(rows, None, crash)
                crash("before-kafka-commit")
                consumer.commit_sync(next_offsets)
            else:
                consumer.commit_sync(next_offsets)
                crash("after-kafka-commit")
                store.write(rows, None, crash)
    except Crash:
        cluster.net.crash(name)  # no LeaveGroup, no last commit: the process is gone
        return False
    finally:
        store.close()


def _finished(
    cluster: Any, mode: str, store: OutputStore, tps: list[TopicPartition], ends: dict[Any, tuple[int, int]]
) -> bool:
    """Caught up: the offsets that a restart would use are at the end of every partition."""
    kept = store.offsets() if mode == "sqlite" else cluster.group_offsets("payments-app")
    return all(kept.get(tp, 0) >= ends[tp][1] for tp in tps)
