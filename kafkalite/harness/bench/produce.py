"""How fast does the whole produce path run: ``Producer.send`` -> accumulator -> batch encoding ->
simulated network -> broker -> ``Log.append`` (-> followers' fetches) -> response -> producer?

Two cases on an in-process ``Cluster`` (no sockets, virtual time):

(a) 1 broker, a topic with 1 partition, ``acks=1``;
(b) 3 brokers, replication factor 3, ``min.insync.replicas=2``, ``acks=all``, ``enable.idempotence=false``;
(c) as (b) with the idempotent producer (Kafka's default for acks=all): producer id, sequences, and the
    leader's per-batch sequence check and duplicate lookup.

The producer keeps Kafka's defaults for ``batch.size`` (16384) and ``linger.ms`` (5, Kafka 4.0; KIP-1030)
and turns off kafkalite's per-send history, which a real producer does not keep. The application offers
``offer_per_ms`` records per simulated millisecond (1000: a virtual 1M records/s) and, like
``KafkaProducer.send`` blocking on a full ``buffer.memory``, waits (runs the simulation) while more than
``buffer.memory`` bytes of records are unacknowledged. The clock is wall time from the first timed send
until every record is acknowledged; topic creation and a warm-up send (metadata) are not timed, and the
garbage of earlier runs is collected (``gc.collect``) before the clock starts, so that neither case pays
for the other's teardown.
Everything but the wall-clock readings is deterministic for a given seed.

The leader checks every record of every produced batch before appending it (``storage.log_validator``,
Kafka's LogValidator). Its cost is inside the three cases, and timed there: each run swaps in a wrapper
that times every call with ``time.perf_counter`` (in situ, with the caches as the rest of the produce
path leaves them), shown per batch and as a share of each case's wall time. It is also timed on its
own, over and over on one batch like case (a)'s, which keeps everything hot and so reads lower.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalite.harness.bench._report import JsonResult, Throughput, per_s
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.records import build_batch, build_values_batch
from kafkalite.records.batch import valid_header_fields
from kafkalite.storage import log as storage_log
from kafkalite.storage.log_validator import validate_records

TARGET_RATIO = 0.6
TARGET_IDEMPOTENT_RATIO = 0.9
TOPIC = "bench"
# Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap Machines)", 2014:
# one producer thread, no replication, 100-byte records.
KAFKA_2014_RECORDS_PER_S = 821_557
KAFKA_2014_MB_PER_S = 78.3
# The same post, one producer thread, 3x synchronous replication (acks=-1 then): the cost of waiting for
# every replica, measured on Kafka itself.
KAFKA_2014_SYNC_RECORDS_PER_S = 421_823
KAFKA_2014_SYNC_MB_PER_S = 40.2
KAFKA_2014_SYNC_RATIO = KAFKA_2014_SYNC_RECORDS_PER_S / KAFKA_2014_RECORDS_PER_S

PRODUCER_CONFIG: dict[str, Any] = {
    "batch.size": 16384,  # Kafka's default
    "linger.ms": 5,  # Kafka 4.0's default
    "buffer.memory": 33_554_432,  # Kafka's default: how far the application may run ahead
    "kafkalite.history.enabled": False,
}


@dataclass
class CaseResult(Throughput):
    """One timed run: ``records`` records of ``record_size`` bytes, all acknowledged or not."""

    name: str
    brokers: int
    replication_factor: int
    acks: str
    records: int
    record_size: int
    seconds: float
    acknowledged: int
    errors: int
    high_watermark: int
    sim_events: int
    sim_ms: int
    batches: int
    requests: int
    validation_seconds: float = 0.0  # in the leader's record validation, timed inside the run
    validations: int = 0  # calls of it: one per batch appended by a leader
    partitions: int = 1  # of the topic the records went to

    @property
    def validation_us(self) -> float:
        """Microseconds per call of the leader's record validation, in situ."""
        return self.validation_seconds / self.validations * 1e6 if self.validations else 0.0

    @property
    def validation_share(self) -> float:
        """Fraction of the wall time spent in the leader's record validation."""
        return self.validation_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def events_per_s(self) -> float:
        return per_s(self.sim_events, self.seconds)

    @property
    def all_acknowledged(self) -> bool:
        return self.acknowledged == self.records and self.errors == 0

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "events_per_s": self.events_per_s,
            "all_acknowledged": self.all_acknowledged,
            "validation_us": self.validation_us,
            "validation_share": self.validation_share,
        }


class _ValidationClock:
    """Times every call of the leader's record validation while it is entered, by swapping a timing
    wrapper in for the ``validate_records`` that ``Log`` calls."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def __enter__(self) -> _ValidationClock:
        self._module, self._inner = storage_log, storage_log.validate_records
        inner, clock = self._inner, time.perf_counter

        def timed(*args, **kwargs):
            t0 = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += clock() - t0
                self.calls += 1

        storage_log.validate_records = timed
        return self

    def __exit__(self, *exc) -> None:
        self._module.validate_records = self._inner


@dataclass
class ValidationCost:
    """The leader's record validation of one batch like case (a)'s, timed on its own (hot)."""

    records_per_batch: int
    batch_bytes: int
    us_per_batch: float

    def share(self, case: CaseResult) -> float:
        """Fraction of the case's wall time its batches spend in validation (one leader validates)."""
        return self.us_per_batch * 1e-6 * case.batches / case.seconds if case.seconds > 0 else 0.0


def measure_validation(
    record_size: int, records_per_batch: int, *, number: int = 500, repeat: int = 5
) -> ValidationCost:
    """Best-of-``repeat`` time of ``validate_records`` on a producer-built batch, in µs per batch."""
    n = max(1, records_per_batch)
    value = bytes(i & 0xFF for i in range(record_size))
    now = 1_700_000_000_000
    batch = build_values_batch([value] * n, [now + i // 50 for i in range(n)])
    if batch is None:  # values too large for the fast encoder
        batch = build_batch([(None, value)] * n, timestamp=now)
    fields = valid_header_fields(batch)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            validate_records(batch, 0, fields, "bench-0")
        best = min(best, time.perf_counter() - t0)
    return ValidationCost(n, len(batch), best / number * 1e6)


@dataclass
class ProduceBenchResult(JsonResult):
    single: CaseResult
    replicated: CaseResult
    producer_config: dict[str, Any]
    offer_per_ms: int
    notes: list[str] = field(default_factory=list)
    idempotent: CaseResult | None = None
    validation: ValidationCost | None = None
    rounds: list[tuple[float, ...]] = field(default_factory=list)
    """Each round's seconds, in case order (a, b[, c]): the runs of one round ran back to back."""

    def _paired(self, slow: int, fast: int) -> list[float]:
        return sorted(r[fast] / r[slow] for r in self.rounds if len(r) > slow)

    @property
    def paired_ratio(self) -> float | None:
        """The median over rounds of acks=all throughput over acks=1 in the same round (None without
        rounds). Runs of one round share the machine's state of the moment, so this ratio moves less from
        one invocation to the next than the ratio of the best runs, which may come from different rounds."""
        return _median(self._paired(1, 0))

    @property
    def paired_idempotent_ratio(self) -> float | None:
        """As ``paired_ratio``, idempotent acks=all over plain acks=all."""
        return _median(self._paired(2, 1))

    @property
    def idempotent_ratio(self) -> float | None:
        """Idempotent acks=all throughput over plain acks=all, both with 3 replicas."""
        if self.idempotent is None:
            return None
        return self.idempotent.records_per_s / self.replicated.records_per_s

    @property
    def ratio(self) -> float:
        """acks=all (3 replicas) throughput over acks=1 (1 broker)."""
        return self.replicated.records_per_s / self.single.records_per_s

    def to_dict(self) -> dict:
        return {
            "single": self.single.to_dict(),
            "replicated": self.replicated.to_dict(),
            "ratio": self.ratio,
            "target_ratio": TARGET_RATIO,
            "idempotent": None if self.idempotent is None else self.idempotent.to_dict(),
            "idempotent_ratio": self.idempotent_ratio,
            "paired_ratio": self.paired_ratio,
            "paired_idempotent_ratio": self.paired_idempotent_ratio,
            "rounds_seconds": [list(r) for r in self.rounds],
            "target_idempotent_ratio": TARGET_IDEMPOTENT_RATIO,
            "producer_config": self.producer_config,
            "offer_per_ms": self.offer_per_ms,
            "kafka_2014": {"records_per_s": KAFKA_2014_RECORDS_PER_S, "mb_per_s": KAFKA_2014_MB_PER_S},
            "kafka_2014_sync_replication": {
                "records_per_s": KAFKA_2014_SYNC_RECORDS_PER_S,
                "mb_per_s": KAFKA_2014_SYNC_MB_PER_S,
                "ratio": KAFKA_2014_SYNC_RATIO,
            },
            "validation_in_situ": {
                c.name: {
                    "us_per_batch": c.validation_us,
                    "share": c.validation_share,
                    "batches": c.validations,
                }
                for c in (self.single, self.replicated, self.idempotent)
                if c is not None
            },
            "validation": None  # alone and hot: lower than in situ
            if self.validation is None
            else {
                **asdict(self.validation),
                "share_of_single": self.validation.share(self.single),
                "share_of_replicated": self.validation.share(self.replicated),
                "share_of_idempotent": None
                if self.idempotent is None
                else self.validation.share(self.idempotent),
            },
            "notes": self.notes,
        }

    @staticmethod
    def _ratio_line(label: str, best: float, paired: list[float], target: float) -> str:
        """The ratio's line: judged on the median of the rounds' own ratios when there are rounds."""
        judged = _median(paired) if paired else best
        verdict = "ok" if judged >= target else "below target"
        line = f"{label}  best runs {best:5.3f}"
        if paired:
            line += (
                f"; per round: median {judged:5.3f}, {paired[0]:.3f} to {paired[-1]:.3f} over {len(paired)}"
            )
        return f"{line}  (target >= {target}: {verdict})"

    def table(self) -> str:
        s = self.single
        cfg = self.producer_config
        lines = [
            f"kafkalite produce benchmark: {s.records:,} records of {s.record_size} B, one producer, "
            f"in-process simulated cluster",
            f"producer: batch.size={cfg['batch.size']} linger.ms={cfg['linger.ms']} "
            f"buffer.memory={cfg['buffer.memory']}; offered {self.offer_per_ms} records per simulated ms",
            f"{'case':<28} {'seconds':>8} {'records/s':>11} {'MB/s':>7} {'sim events/s':>13} {'acked':>9}",
        ]
        cases = [self.single, self.replicated] + ([self.idempotent] if self.idempotent else [])
        for c in cases:
            acked = "all" if c.all_acknowledged else f"{c.acknowledged}"
            lines.append(
                f"{c.name:<28} {c.seconds:>8.3f} {c.records_per_s:>11,.0f} {c.mb_per_s:>7.1f} "
                f"{c.events_per_s:>13,.0f} {acked:>9}"
            )
        lines.append(self._ratio_line("acks=all / acks=1", self.ratio, self._paired(1, 0), TARGET_RATIO))
        if self.idempotent_ratio is not None:
            lines.append(self._ratio_line(
                "idempotent acks=all / acks=all", self.idempotent_ratio, self._paired(2, 1),
                TARGET_IDEMPOTENT_RATIO,
            ))  # fmt: skip
        in_situ = "; ".join(
            f"{c.name.split(')')[0]}) {c.validation_us:.1f} µs per batch, "
            f"{c.validation_share * 100:.1f}% of its wall time"
            for c in cases
        )
        lines.append(f"leader record validation, in situ (timed inside each run): {in_situ}")
        v = self.validation
        if v is not None:
            lines.append(
                f"leader record validation, alone and hot (one batch of {v.records_per_batch} records, "
                f"{v.batch_bytes:,} B, validated over and over): {v.us_per_batch:.1f} µs per batch"
            )
        lines.append(
            f"context: Kafka 2014 benchmark, one producer thread, no replication: "
            f"{KAFKA_2014_RECORDS_PER_S:,} records/s ({KAFKA_2014_MB_PER_S} MB/s) over real sockets and disks"
        )
        lines.append(
            f"context: the same benchmark with 3x synchronous replication: {KAFKA_2014_SYNC_RECORDS_PER_S:,} "
            f"records/s ({KAFKA_2014_SYNC_MB_PER_S} MB/s), "
            f"{KAFKA_2014_SYNC_RATIO:.2f} of no replication"
        )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_case(
    records: int = 100_000,
    record_size: int = 100,
    *,
    brokers: int = 1,
    replication_factor: int = 1,
    acks: str = "1",
    min_insync_replicas: int = 1,
    producer_config: dict[str, Any] | None = None,
    offer_per_ms: int = 1000,
    seed: int = 0,
    name: str | None = None,
    partitions: int = 1,
    round_robin: bool = False,
    log_root: str | None = None,
) -> CaseResult:
    """Produce ``records`` records to a fresh cluster and time it until every one is acknowledged.

    The topic has ``partitions`` partitions. Records carry no key and the producer's default
    partitioner places them (sticky: it fills one partition's batch before it moves on), unless
    ``round_robin``: then record ``i`` names partition ``i % partitions``, as evenly spread keys
    would place it. The cluster's logs go to a fresh directory under ``log_root`` (None: the system's
    temporary directory); ``/dev/shm`` keeps a disk that other jobs share from setting the pace."""
    if records < 1 or record_size < 0 or offer_per_ms < 1 or partitions < 1:
        raise ValueError("records, offer_per_ms and partitions must be >= 1, record_size >= 0")
    cfg = {**PRODUCER_CONFIG, **(producer_config or {}), "acks": acks}
    value = bytes(i & 0xFF for i in range(record_size))
    with (
        tempfile.TemporaryDirectory(prefix="kafkalite-bench-", dir=log_root) as home,
        Cluster(brokers=brokers, seed=seed, dir=home) as cluster,
    ):
        cluster.create_topic(
            TOPIC, partitions, replication_factor, config={"min.insync.replicas": min_insync_replicas}
        )
        producer = cluster.producer("bench-producer", config=cfg)
        net = cluster.net
        warm = producer.send(TOPIC, value)  # metadata round trip, not timed
        if not cluster.run_until(warm.done, 30_000) or warm.exception() is not None:
            raise RuntimeError(f"warm-up send failed: {warm!r}")
        parts = [
            cluster.brokers[cluster.leader(TOPIC, p)].rm.partition(TopicPartition(TOPIC, p))
            for p in range(partitions)
        ]
        part = parts[0]
        # Unacknowledged records allowed before send() "blocks", from buffer.memory and the record size.
        window = max(1, cfg["buffer.memory"] // (record_size + 11))  # 11: the producer's per-record estimate
        base = sum(p.log_end_offset for p in parts)
        if partitions > 1:

            def taken() -> int:
                return sum(p.log_end_offset for p in parts) - base

        else:

            def taken() -> int:  # the common case, without the sum
                return part.log_end_offset - base

        events0, sim0 = net.stats.events, net._now
        send = producer.send
        # Garbage left by the previous run (its whole cluster) is collected now, not inside this timing.
        gc.collect()
        with _ValidationClock() as validation:
            t0 = time.perf_counter()
            sent = 0
            while sent < records:
                # Block like a full buffer.memory: wait until the leader has taken enough of the backlog.
                while sent - taken() > window:
                    net.run_for(1)
                n = min(offer_per_ms, records - sent)
                if round_robin:
                    for i in range(sent, sent + n):
                        send(TOPIC, value, partition=i % partitions)
                else:
                    for _ in range(n):
                        send(TOPIC, value)
                sent += n
                net.run_for(1)
            producer.flush()
            done = cluster.run_until(producer.idle, 600_000)
            seconds = time.perf_counter() - t0
        if not done:
            raise RuntimeError("the producer did not finish within 600 simulated seconds")
        errors = producer.metrics["record-error-total"]
        return CaseResult(
            name=name or f"{brokers} broker(s) RF={replication_factor} acks={acks}",
            brokers=brokers,
            replication_factor=replication_factor,
            acks=acks,
            records=records,
            record_size=record_size,
            seconds=seconds,
            # Idle means every batch completed; a batch either succeeded or counted its records as errors.
            acknowledged=producer.metrics["record-send-total"] - 1 - errors,
            errors=errors,
            high_watermark=sum(p.high_watermark for p in parts) - base,
            sim_events=net.stats.events - events0,
            sim_ms=net._now - sim0,
            batches=producer.metrics["batch-total"] - 1,
            requests=producer.metrics["request-total"],
            validation_seconds=validation.seconds,
            validations=validation.calls,
            partitions=partitions,
        )


def run_produce_bench(
    records: int = 1_000_000,
    record_size: int = 100,
    *,
    producer_config: dict[str, Any] | None = None,
    offer_per_ms: int = 1000,
    seed: int = 0,
    repeats: int = 3,
) -> ProduceBenchResult:
    """Case (a) 1 broker acks=1, case (b) 3 brokers RF=3 acks=all (min.insync.replicas=2) without
    idempotence and case (c) the same with it, each the fastest of ``repeats`` runs. The runs alternate
    a, b, c, a, b, c, ... so that a slow spell of the machine hits every case rather than one."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    cfg = {**PRODUCER_CONFIG, **(producer_config or {})}
    singles: list[CaseResult] = []
    replicateds: list[CaseResult] = []
    idempotents: list[CaseResult] = []
    for _ in range(repeats):
        singles.append(run_case(
            records, record_size, producer_config=cfg, offer_per_ms=offer_per_ms, seed=seed,
            name="(a) 1 broker, acks=1",
        ))  # fmt: skip
        replicateds.append(run_case(
            records, record_size, brokers=3, replication_factor=3, acks="all", min_insync_replicas=2,
            producer_config={**cfg, "enable.idempotence": False}, offer_per_ms=offer_per_ms, seed=seed,
            name="(b) 3 brokers RF=3, acks=all",
        ))  # fmt: skip
        idempotents.append(run_case(
            records, record_size, brokers=3, replication_factor=3, acks="all", min_insync_replicas=2,
            producer_config={**cfg, "enable.idempotence": True}, offer_per_ms=offer_per_ms, seed=seed,
            name="(c) as (b), idempotent",
        ))  # fmt: skip
    rounds = [
        (a.seconds, b.seconds, c.seconds) for a, b, c in zip(singles, replicateds, idempotents, strict=True)
    ]
    single = min(singles, key=lambda c: c.seconds)
    replicated = min(replicateds, key=lambda c: c.seconds)
    idempotent = min(idempotents, key=lambda c: c.seconds)
    validation = measure_validation(record_size, round(single.records / max(1, single.batches)))
    notes = [
        "wall time from the first timed send until every record is acknowledged; includes the simulated "
        "brokers' work (Log.append on real files, replication fetches), not socket or disk latency",
        f"best of {repeats} runs per case, run alternately; a ratio is judged on the median of its rounds' "
        "own ratios (the runs of a round ran back to back)",
        "in situ validation times include the timing wrapper's own calls, about two perf_counter "
        "readings per batch",
    ]
    for c in (single, replicated, idempotent):
        if not c.all_acknowledged or c.high_watermark != c.records:
            notes.append(
                f"{c.name}: {c.acknowledged} acknowledged, {c.errors} errors, "
                f"{c.high_watermark} in the log (expected {c.records})"
            )
    return ProduceBenchResult(single, replicated, cfg, offer_per_ms, notes, idempotent, validation, rounds)
