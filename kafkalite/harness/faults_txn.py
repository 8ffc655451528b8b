"""The transactional copy workload under seeded fault schedules (what Kafka's own transactions system
test does): an application reads ``in`` with ``isolation.level=read_committed`` and, per poll, writes the
records to ``out`` and the group's offsets in one transaction. Brokers crash, pause and lose links
meanwhile (``kafkalite.harness.faults.build_schedule``). The application does what Kafka's documentation asks of
one: on a retriable failure it aborts and rewinds to the committed offsets; when fenced, it starts a new
producer with the same transactional id.

The verdict: a read_committed read of ``out`` holds every input record exactly once (no loss, no
duplicate, no record of an aborted transaction), and the committed offsets cover the whole input.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafkalite.errors import KafkaError, ProducerFencedError
from kafkalite.harness.faults import BROKER_CONFIG, _bind, build_schedule, heal_everything
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

GROUP = "copy"
TXN_ID = "copier"
TXN_BROKER_CONFIG: dict[str, Any] = {
    **BROKER_CONFIG,
    # Fewer state partitions than Kafka's 50 keep each run short; the placement rule is the same.
    "transaction.state.log.num.partitions": 5,
    "offsets.topic.num.partitions": 5,
}


@dataclass
class TxnRunResult:
    seed: int
    inputs: int
    copied: Counter = field(default_factory=Counter)
    missing: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    unexpected: list[bytes] = field(default_factory=list)
    committed_offsets: int = 0
    transactions: int = 0
    aborted: int = 0
    producers: int = 1
    finished: bool = False
    schedule: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.finished
            and not self.missing
            and not self.duplicated
            and not self.unexpected
            and self.committed_offsets == self.inputs
        )

    def __str__(self) -> str:
        state = "ok" if self.ok else "VIOLATION"
        return (
            f"seed {self.seed}: {state}; {self.inputs} inputs, {sum(self.copied.values())} read back, "
            f"missing {len(self.missing)}, duplicated {len(self.duplicated)}, unexpected {len(self.unexpected)}, "
            f"offsets {self.committed_offsets}, {self.transactions} transactions ({self.aborted} aborted), "
            f"{self.producers} producer(s), finished={self.finished}"
        )


def run_txn_schedule(
    seed: int,
    *,
    records: int = 60,
    duration_ms: int = 3000,
    kinds: tuple[str, ...] = ("crash", "pause", "cut"),
    budget_ms: int = 240_000,
) -> TxnRunResult:
    cluster = Cluster(brokers=3, seed=seed, config=TXN_BROKER_CONFIG)
    result = TxnRunResult(seed, records)
    try:
        for topic in ("in", "out"):
            cluster.create_topic(topic, 3, 3, config={"min.insync.replicas": 2})
        feeder = cluster.producer("feeder", linger_ms=0)
        for i in range(records):
            feeder.send("in", f"v{i:04d}".encode(), key=str(i).encode())
        feeder.flush()
        if not cluster.run_until(feeder.idle, 30_000):
            raise RuntimeError("the input could not be written")
        inputs = [f"v{i:04d}".encode() for i in range(records)]

        sched = build_schedule(seed, 3, duration_ms, kinds)
        result.schedule = str(sched)
        start = cluster.net.now_ms()
        for f in sched:
            cluster.net.at(start + f.time_ms, _bind(getattr(cluster.net, f.action), *f.args))
        _copy(cluster, result, records, start + budget_ms)
        heal_everything(cluster)
        cluster.run_for(5000)
        out = _read_committed(cluster, "out")
        result.copied = Counter(out)
        want = set(inputs)
        result.missing = [v for v in inputs if result.copied[v.upper()] == 0]
        result.duplicated = sorted(v for v, n in result.copied.items() if n > 1)
        result.unexpected = sorted(v for v in result.copied if v.upper() != v or v.lower() not in want)
        result.committed_offsets = sum(cluster.group_offsets(GROUP).values())
        return result
    finally:
        cluster.close()


def _new_producer(cluster: Cluster, n: int) -> Any:
    p = cluster.producer(f"copier-{n}", transactional_id=TXN_ID, linger_ms=0, request_timeout_ms=2500)
    p.init_transactions()
    return p


def _copy(cluster: Cluster, result: TxnRunResult, records: int, deadline: int) -> None:
    consumer = cluster.consumer(
        "copy-app", group_id=GROUP, isolation_level="read_committed", auto_offset_reset="earliest",
        enable_auto_commit=False, max_poll_records=5, request_timeout_ms=5000,
        # A JoinGroup waits up to the rebalance timeout (max.poll.interval.ms) + 5 s for its answer, and a
        # crashed coordinator never answers in the simulator: keep that wait short.
        max_poll_interval_ms=10_000, session_timeout_ms=6000, heartbeat_interval_ms=1000,
    )  # fmt: skip
    consumer.subscribe(["in"])
    producer = None
    while cluster.net.now_ms() < deadline:
        try:
            if producer is None:
                producer = _new_producer(cluster, result.producers)
            if _done(cluster, records):
                result.finished = True
                break
            batch = consumer.poll(300)
            records_read = [r for recs in batch.values() for r in recs]
            if not records_read:
                continue
            producer.begin_transaction()
            result.transactions += 1
            try:
                for r in records_read:
                    producer.send("out", r.value.upper())
                offsets = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
                producer.send_offsets_to_transaction(offsets, GROUP)
                producer.commit_transaction()
            except ProducerFencedError:
                raise
            except KafkaError:
                result.aborted += 1
                try:
                    producer.abort_transaction()
                except KafkaError:
                    producer = None  # start over with a new producer (it aborts whatever is left)
                _rewind(cluster, consumer, batch)
        except ProducerFencedError:
            producer = None
            result.producers += 1
            _rewind(cluster, consumer, {})
        except KafkaError as e:
            cluster.net.log("copy-app", "copy_error", error=repr(e))
            _rewind(cluster, consumer, {})
    consumer.close()


def _done(cluster: Cluster, records: int) -> bool:
    try:
        return sum(cluster.group_offsets(GROUP).values()) >= records
    except KafkaError:
        return False


def _rewind(cluster: Cluster, consumer: Any, batch: dict) -> None:
    """Back to the committed offsets: what the aborted transaction read will be read again."""
    try:
        committed = cluster.group_offsets(GROUP)
    except KafkaError:
        committed = {}
    for tp in consumer.assignment():
        consumer.seek(tp, committed.get(tp, 0))


def _read_committed(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = cluster.consumer(isolation_level="read_committed", auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    out: list[bytes] = []
    for _ in range(30):
        for recs in consumer.poll(200).values():
            out += [r.value for r in recs]
    consumer.close()
    return out
