"""End-to-end latency as Kafka's 2014 benchmark measured it: one record at a time, from the producer's
send until the consumer has it, against three kafkalite brokers (TCP, one process) with real clients.

Kafka's tool of the time (``kafka.tools.TestEndToEndLatency``) sent a record, waited for the consumer
to return it, and only then sent the next; it reported the 50th, 99th and 99.9th percentiles, which
Jay Kreps' post gives as 2, 3 and 14 ms on three machines. Here the producer is librdkafka (through
confluent-kafka) with ``linger.ms=0`` as in that tool and ``acks=all``, the consumer a librdkafka
group member; the topic has one partition, three replicas and ``min.insync.replicas=2``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kafkalite.harness.bench._report import JsonResult

KAFKA_2014_MS = (2.0, 3.0, 14.0)  # p50, p99, p99.9 of Kreps' 2014 end-to-end latency run
PERCENTILES = (50.0, 99.0, 99.9)
TOPIC = "latency"


def percentile(sorted_ms: list[float], q: float) -> float:
    """The ``q``-th percentile of already sorted values, linearly interpolated (numpy's default)."""
    if not sorted_ms:
        raise ValueError("no samples")
    pos = (len(sorted_ms) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


@dataclass
class LatencyRun:
    """One run: every record's end-to-end time in ms, in send order."""

    samples_ms: list[float]

    @property
    def percentiles(self) -> tuple[float, float, float]:
        s = sorted(self.samples_ms)
        p50, p99, p999 = (percentile(s, q) for q in PERCENTILES)
        return p50, p99, p999

    def line(self) -> str:
        p50, p99, p999 = self.percentiles
        return (
            f"{len(self.samples_ms):,} records: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
            f"p99.9 {p999:.2f} ms, max {max(self.samples_ms):.2f} ms"
        )


@dataclass
class LatencyResult(JsonResult):
    runs: list[LatencyRun]
    producer_config: dict[str, Any]
    consumer_config: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def pooled(self) -> LatencyRun:
        """Every run's samples together."""
        return LatencyRun([x for r in self.runs for x in r.samples_ms])

    def to_dict(self) -> dict:
        return {
            "runs": [
                dict(zip(("p50_ms", "p99_ms", "p999_ms"), r.percentiles, strict=True)) for r in self.runs
            ],
            "pooled": dict(zip(("p50_ms", "p99_ms", "p999_ms"), self.pooled.percentiles, strict=True)),
            "kafka_2014_ms": dict(zip(("p50_ms", "p99_ms", "p999_ms"), KAFKA_2014_MS, strict=True)),
            "producer_config": self.producer_config,
            "consumer_config": self.consumer_config,
            "notes": self.notes,
        }

    def table(self) -> str:
        lines = [
            "kafkalite end-to-end latency: one record at a time, producer send -> consumer poll, "
            "3 brokers (one process), RF=3, min.insync.replicas=2",
            f"producer: {self.producer_config}",
            f"consumer: {self.consumer_config}",
        ]
        lines += [f"run {i}: {r.line()}" for i, r in enumerate(self.runs, 1)]
        if len(self.runs) > 1:
            lines.append(f"all runs: {self.pooled.line()}")
        k = KAFKA_2014_MS
        lines.append(f"Kafka 2014 (three machines): p50 {k[0]:g} ms, p99 {k[1]:g} ms, p99.9 {k[2]:g} ms")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def measure(
    bootstrap: str,
    samples: int,
    producer_config: dict[str, Any],
    consumer_config: dict[str, Any],
    *,
    warmup: int = 20,
) -> LatencyRun:
    """Send ``samples`` records one at a time to ``TOPIC`` at ``bootstrap`` (after ``warmup`` untimed
    ones) and time each until the consumer returns it."""
    from confluent_kafka import Consumer, Producer  # deferred: an optional client

    producer = Producer({"bootstrap.servers": bootstrap, **producer_config})
    consumer = Consumer({"bootstrap.servers": bootstrap, **consumer_config})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            consumer.poll(0.1)
            if time.monotonic() > deadline:
                raise RuntimeError("the consumer got no partition within 60 s")
        out = []
        for i in range(warmup + samples):
            value = str(i).encode()
            t0 = time.perf_counter()
            producer.produce(TOPIC, value=value)
            producer.poll(0)
            msg = None
            while msg is None or msg.error():
                msg = consumer.poll(1.0)
            elapsed = time.perf_counter() - t0
            if msg.value() != value:
                raise RuntimeError(f"record {i} came back as {msg.value()!r}")
            if i >= warmup:
                out.append(elapsed * 1000)
        return LatencyRun(out)
    finally:
        consumer.close()
        producer.flush(10)
        del producer  # librdkafka's threads stop now, before the brokers do


PRODUCER_CONFIG: dict[str, Any] = {"acks": "all", "linger.ms": 0}
CONSUMER_CONFIG: dict[str, Any] = {
    "group.id": "latency",
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 100,
}


def run_latency_bench(
    samples: int = 1000,
    *,
    runs: int = 1,
    producer_config: dict[str, Any] | None = None,
    consumer_config: dict[str, Any] | None = None,
) -> LatencyResult:
    """``runs`` runs of ``samples`` records, each against a fresh three-broker ``BackgroundServer``."""
    from kafkalite.host.server import BackgroundServer  # deferred: starts nothing at import

    if samples < 1 or runs < 1:
        raise ValueError("samples and runs must be >= 1")
    pcfg = {**PRODUCER_CONFIG, **(producer_config or {})}
    ccfg = {**CONSUMER_CONFIG, **(consumer_config or {})}
    done = []
    for _ in range(runs):
        with BackgroundServer(3) as three:
            three.create_topic(TOPIC, 1, 3, **{"min.insync.replicas": 2})
            done.append(measure(three.bootstrap_servers, samples, pcfg, ccfg))
    notes = [
        "wall time on one machine: client and brokers share its cores, so a loaded machine shows in the tail",
    ]
    return LatencyResult(done, pcfg, ccfg, notes)


__all__ = [
    "KAFKA_2014_MS",
    "LatencyResult",
    "LatencyRun",
    "measure",
    "percentile",
    "run_latency_bench",
]
