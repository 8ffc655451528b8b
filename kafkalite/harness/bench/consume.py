"""How fast does the consume path run: FetchRequest -> broker reads segment bytes -> simulated network ->
consumer decodes the batches (CRC checked, ``check.crcs=true``) -> ``poll`` hands out records?

One in-process ``Cluster`` (1 broker, no sockets, virtual time) holds a topic of ``partitions`` partitions
filled beforehand by a producer (not timed). Then, each on its own clock (wall time, ``perf_counter``):

(a) one consumer, ``assign()`` of every partition, polling from the beginning until it has every record;
(b) a group of ``group_size`` consumers (``subscribe`` with ``group.id``) on the same topic, polled in turn
    until together they have every record; the join and first assignment come before the clock starts;
(c) the baseline measured in the same run: the same segment files read and decoded directly with
    ``kafkalite.records`` (``iter_batches`` + ``decode_batches`` over each file, with the CRC check: the
    decoder the consumer itself uses), no broker, no network, no consumer bookkeeping. (a) / (c) says
    what the consumer machinery costs on top of decoding.

Everything runs in one Python process, so the group's three consumers share one core: (b) measures the
overhead of the group protocol and of splitting the fetches, not a parallel speed-up.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalite.client.consumer import Consumer
from kafkalite.harness.bench._report import JsonResult, Throughput
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.records import decode_batches, iter_batches

TOPIC = "bench-consume"
GROUP_ID = "bench-group"
# Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap Machines)", 2014:
# one consumer thread, 100-byte messages, from a 6-partition topic replicated 3 times.
KAFKA_2014_RECORDS_PER_S = 940_521
KAFKA_2014_MB_PER_S = 89.7

FILL_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "1",
    "batch.size": 16384,
    "linger.ms": 5,
    "kafkalite.history.enabled": False,
}


@dataclass
class ConsumeCase(Throughput):
    """One timed case: ``records`` records of ``record_size`` value bytes read by ``consumers`` clients."""

    name: str
    consumers: int
    records: int
    record_size: int
    seconds: float
    bytes_read: int = 0
    fetches: int = 0
    sim_ms: int = 0
    per_consumer: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {**asdict(self), "records_per_s": self.records_per_s, "mb_per_s": self.mb_per_s}


@dataclass
class ConsumeBenchResult(JsonResult):
    records: int
    record_size: int
    partitions: int
    baseline: ConsumeCase
    single: ConsumeCase
    group: ConsumeCase | None
    notes: list[str] = field(default_factory=list)

    @property
    def single_vs_baseline(self) -> float:
        """One consumer's throughput over raw decoding (1.0 would mean the consumer costs nothing)."""
        return self.single.records_per_s / self.baseline.records_per_s

    def to_dict(self) -> dict:
        return {
            "records": self.records,
            "record_size": self.record_size,
            "partitions": self.partitions,
            "baseline": self.baseline.to_dict(),
            "single": self.single.to_dict(),
            "group": None if self.group is None else self.group.to_dict(),
            "single_vs_baseline": self.single_vs_baseline,
            "kafka_2014": {"records_per_s": KAFKA_2014_RECORDS_PER_S, "mb_per_s": KAFKA_2014_MB_PER_S},
            "notes": self.notes,
        }

    def table(self) -> str:
        lines = [
            f"kafkalite consume benchmark: {self.records:,} records of {self.record_size} B on "
            f"{self.partitions} partitions, in-process simulated cluster (1 broker)",
            f"{'case':<40} {'seconds':>8} {'records/s':>11} {'MB/s':>7} {'per consumer':>16}",
        ]
        for c in (self.baseline, self.single, self.group):
            if c is None:
                continue
            split = "/".join(str(n) for n in c.per_consumer) if c.per_consumer else "-"
            lines.append(
                f"{c.name:<40} {c.seconds:>8.3f} {c.records_per_s:>11,.0f} {c.mb_per_s:>7.1f} {split:>16}"
            )
        lines.append(f"one consumer / raw decoding  {self.single_vs_baseline:5.2f}")
        lines.append(
            f"context: Kafka 2014 benchmark, one consumer thread: {KAFKA_2014_RECORDS_PER_S:,} records/s "
            f"({KAFKA_2014_MB_PER_S} MB/s) over real sockets and disks, JVM"
        )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def fill_topic(cluster: Any, records: int, record_size: int, partitions: int) -> None:
    """Create the topic and produce ``records`` values, dealt to the partitions in turn (not timed)."""
    if records < 1 or record_size < 0 or partitions < 1:
        raise ValueError("records and partitions must be >= 1, record_size >= 0")
    cluster.create_topic(TOPIC, partitions, 1)
    producer = cluster.producer("bench-filler", config=FILL_PRODUCER_CONFIG)
    value = bytes(i & 0xFF for i in range(record_size))
    sent = 0
    while sent < records:
        n = min(5000, records - sent)
        for i in range(sent, sent + n):
            producer.send(TOPIC, value, partition=i % partitions)
        sent += n
        cluster.run_for(5)
    producer.flush()
    if not cluster.run_until(producer.idle, 600_000):
        raise RuntimeError("the filling producer did not finish within 600 simulated seconds")
    if producer.metrics["record-error-total"]:
        raise RuntimeError(f"{producer.metrics['record-error-total']} records failed while filling")
    total = sum(cluster.high_watermark(TOPIC, p) for p in range(partitions))
    if total != records:
        raise RuntimeError(f"the topic holds {total} records, expected {records}")


BASELINE_BATCHES = 64  # ~1 MiB of 16 KiB batches: the consumer's fetch.max.bytes per partition


def decode_baseline(cluster: Any, partitions: int, record_size: int) -> ConsumeCase:
    """Read every segment file of the topic and decode all records with ``kafkalite.records`` directly."""
    paths = []
    for p in range(partitions):
        part = cluster.replica(cluster.leader(TOPIC, p), TOPIC, p)
        part.log.flush()
        paths.extend(seg.log_path for seg in part.log.segments)
    t0 = time.perf_counter()
    n = size = 0
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        size += len(data)
        positions = [pos for pos, header in iter_batches(data) if not header.is_control]
        for i in range(0, len(positions), BASELINE_BATCHES):  # about a fetch's worth at a time
            n += len(decode_batches(data, positions[i : i + BASELINE_BATCHES], verify_crc=True))
    seconds = time.perf_counter() - t0
    return ConsumeCase("(c) raw decoding (kafkalite.records)", 0, n, record_size, seconds, bytes_read=size)


def consume_single(cluster: Any, records: int, partitions: int, record_size: int) -> ConsumeCase:
    """Case (a): one consumer assigned every partition, from offset 0, until it has every record."""
    consumer = cluster.consumer("bench-single", config={"auto.offset.reset": "earliest"})
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    net = cluster.net
    sim0 = net.now_ms()
    got = 0
    t0 = time.perf_counter()
    while got < records:
        batch = consumer.poll(1000)
        if not batch:
            break
        got += sum(len(v) for v in batch.values())
    seconds = time.perf_counter() - t0
    m = consumer.metrics
    consumer.close()
    return ConsumeCase(
        "(a) one consumer, assign()", 1, got, record_size, seconds,
        bytes_read=m["bytes-consumed-total"], fetches=m["fetch-total"], sim_ms=net.now_ms() - sim0,
        per_consumer=[got],
    )  # fmt: skip


def group_supported() -> bool:
    """True once ``Consumer.subscribe`` exists (group membership)."""
    return hasattr(Consumer, "subscribe")


def consume_group(
    cluster: Any, records: int, record_size: int, group_size: int, *, timeout_ms: int = 120_000
) -> ConsumeCase:
    """Case (b): ``group_size`` consumers of one group, joined and assigned before the clock starts."""
    members = [
        cluster.consumer(
            f"bench-member-{i}",
            config={"group.id": GROUP_ID, "auto.offset.reset": "earliest", "enable.auto.commit": False},
        )
        for i in range(group_size)
    ]
    for c in members:
        c.subscribe([TOPIC])
    counts = [0] * group_size
    # Join: poll everyone (records already returned count) until each member holds partitions.
    deadline = cluster.net.now_ms() + timeout_ms
    while not all(c.assignment() for c in members):
        if cluster.net.now_ms() > deadline:
            raise RuntimeError("the group did not assign every member within the timeout")
        for i, c in enumerate(members):
            counts[i] += sum(len(v) for v in c.poll(50).values())
    net = cluster.net
    sim0 = net.now_ms()
    t0 = time.perf_counter()
    idle_rounds = 0
    while sum(counts) < records and idle_rounds < 50:
        progressed = False
        for i, c in enumerate(members):
            n = sum(len(v) for v in c.poll(0 if progressed else 100).values())
            counts[i] += n
            progressed = progressed or n > 0
        idle_rounds = 0 if progressed else idle_rounds + 1
    seconds = time.perf_counter() - t0
    fetched = sum(c.metrics["bytes-consumed-total"] for c in members)
    fetches = sum(c.metrics["fetch-total"] for c in members)
    for c in members:
        c.close()
    return ConsumeCase(
        f"(b) group of {group_size}, subscribe()", group_size, sum(counts), record_size, seconds,
        bytes_read=fetched, fetches=fetches, sim_ms=net.now_ms() - sim0, per_consumer=counts,
    )  # fmt: skip


def run_consume_bench(
    records: int = 1_000_000,
    record_size: int = 100,
    *,
    partitions: int = 6,
    group_size: int = 3,
    seed: int = 0,
    group: bool = True,
) -> ConsumeBenchResult:
    """Fill a topic, then time the baseline, one consumer and (if available) a group of consumers."""
    if group_size < 1:
        raise ValueError("group_size must be >= 1")
    notes = [
        "wall time of the poll loop only; includes the simulated broker's reads of real segment files, "
        "not socket or disk latency; one Python thread runs broker and consumers",
    ]
    # One broker: the offsets topic must fit on it (Kafka's single-broker sample config does the same).
    config = {"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 5}
    with Cluster(brokers=1, seed=seed, config=config) as cluster:
        fill_topic(cluster, records, record_size, partitions)
        baseline = decode_baseline(cluster, partitions, record_size)
        single = consume_single(cluster, records, partitions, record_size)
        grp = None
        if group and group_supported():
            grp = consume_group(cluster, records, record_size, group_size)
        elif group:
            notes.append("group case skipped: Consumer.subscribe is not available in this build")
    for c in (baseline, single, grp):
        if c is not None and c.records != records:
            notes.append(f"{c.name}: read {c.records} records, expected {records}")
    return ConsumeBenchResult(records, record_size, partitions, baseline, single, grp, notes)
