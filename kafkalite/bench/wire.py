"""``kafkalite bench wire``: real clients against kafkalite's TCP brokers, beside the loopback ceiling.

Cases, each with a confluent-kafka (librdkafka) client and ``record_size``-byte records:

(a) producer, acks=1, one broker;
(b) producer, acks=all (idempotent, librdkafka's choice here), three brokers, replication factor 3;
(c) consumer reading what (a) wrote, from the beginning, without a group;
with ``security`` (SSL, SASL_PLAINTEXT or SASL_SSL), on the same broker in the same run:
(d) the producer of (a) and (e) the consumer of (c) over a listener of that protocol (SASL: PLAIN user;
TLS: throw-away certificates), and the ratio of each to its PLAINTEXT twin (target >= 0.6).

The ceiling is this machine's TCP loopback moving the same number of bytes through one connection in the
same run (a sender thread writing 1 MiB chunks, the main thread reading them): no Kafka client or broker
can be faster than the bytes themselves.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafkalite.bench._report import JsonResult, Throughput

TARGET_PRODUCE = 300_000
TARGET_CONSUME = 500_000
TARGET_SECURITY_RATIO = 0.6


@dataclass
class WireCase(Throughput):
    name: str
    records: int
    record_size: int
    seconds: float
    errors: int = 0


@dataclass
class WireBenchResult(JsonResult):
    cases: list[WireCase]
    loopback_mb_per_s: float
    notes: list[str] = field(default_factory=list)
    security_ratios: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "cases": [
                {**c.__dict__, "records_per_s": c.records_per_s, "mb_per_s": c.mb_per_s} for c in self.cases
            ],
            "loopback_mb_per_s": self.loopback_mb_per_s,
            "targets": {
                "produce_acks1_records_per_s": TARGET_PRODUCE,
                "consume_records_per_s": TARGET_CONSUME,
            },
            "security_ratios": self.security_ratios,
            "notes": self.notes,
        }

    def table(self) -> str:
        lines = [
            f"{'case':<44} {'records/s':>11} {'MB/s':>7} {'of loopback':>11} {'errors':>6}",
        ]
        for c in self.cases:
            share = c.mb_per_s / self.loopback_mb_per_s if self.loopback_mb_per_s else 0.0
            lines.append(
                f"{c.name:<44} {c.records_per_s:>11,.0f} {c.mb_per_s:>7.1f} {share:>11.4f} {c.errors:>6}"
            )
        lines.append(f"TCP loopback ceiling (same bytes, one connection): {self.loopback_mb_per_s:,.0f} MB/s")
        lines.append(
            f"targets: produce acks=1 >= {TARGET_PRODUCE:,} records/s, consume >= {TARGET_CONSUME:,} records/s"
        )
        for name, ratio in self.security_ratios.items():
            lines.append(f"{name}: {ratio:.3f} of PLAINTEXT (target >= {TARGET_SECURITY_RATIO})")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def loopback_mb_per_s(nbytes: int) -> float:
    """Move ``nbytes`` through one loopback TCP connection; MB/s."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    chunk = bytes(1 << 20)

    def send() -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            left = nbytes
            while left > 0:
                n = min(left, len(chunk))
                s.sendall(chunk[:n])
                left -= n

    t = threading.Thread(target=send)
    conn = None
    try:
        t0 = time.perf_counter()
        t.start()
        conn, _ = srv.accept()
        got = 0
        buf = bytearray(1 << 20)
        while got < nbytes:
            n = conn.recv_into(buf)
            if not n:
                break
            got += n
        seconds = time.perf_counter() - t0
    finally:
        t.join()
        if conn is not None:
            conn.close()
        srv.close()
    return got / seconds / 1e6


def _produce(bootstrap: str, topic: str, records: int, value: bytes, config: dict[str, Any]) -> WireCase:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000, **config})
    errors = [0]

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    p.produce(topic, value, on_delivery=done)  # warm-up: metadata, producer id
    p.flush(30)
    t0 = time.perf_counter()
    produce = p.produce
    for i in range(records):
        while True:
            try:
                produce(topic, value, on_delivery=done)
                break
            except BufferError:
                p.poll(0.001)
        if i & 0x3FF == 0:
            p.poll(0)
    left = p.flush(120)
    seconds = time.perf_counter() - t0
    acks = config.get("acks", "1")
    return WireCase(f"produce acks={acks}", records, len(value), seconds, errors[0] + left)


def _consume(
    bootstrap: str, topic: str, partitions: int, records: int, record_size: int, config: dict | None = None
) -> WireCase:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-wire",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            **(config or {}),
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    consume = c.consume
    while got < records and time.perf_counter() < deadline:
        got += len(consume(100_000, 0.5))
    seconds = time.perf_counter() - t0
    # Error events arrive as messages too, so ``got`` alone could overcount: the consumer's positions
    # say how many records it really read (checked here, off the per-record path).
    read = sum(tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]))
    errors = got - read
    c.close()
    return WireCase("consume from the beginning (no group)", read, record_size, seconds, errors)


def _secured(protocol: str, directory: str) -> tuple[dict, dict]:
    """Broker settings for a second listener speaking ``protocol``, and a client's settings for it."""
    from kafkalite.security.certs import make_certificates

    protocol = protocol.upper()
    if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"--security is SSL, SASL_PLAINTEXT or SASL_SSL, got {protocol!r}")
    broker: dict[str, Any] = {"listeners": f"PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:0"}
    client: dict[str, Any] = {"security.protocol": protocol}
    if "SSL" in protocol:
        pem = make_certificates(directory, ())
        broker |= {"ssl.keystore.location": str(pem["broker"])}
        client |= {"ssl.ca.location": str(pem["ca"])}
    if protocol.startswith("SASL"):
        broker["sasl.jaas.config"] = 'PlainLoginModule required user_bench="bench-secret";'
        client |= {"sasl.mechanism": "PLAIN", "sasl.username": "bench", "sasl.password": "bench-secret"}
    return broker, client


def run_wire_bench(
    records: int = 500_000, record_size: int = 100, security: str | None = None
) -> WireBenchResult:
    import tempfile

    from kafkalite.wire.server import BackgroundServer

    value = bytes(i & 0xFF for i in range(record_size))
    cases = []
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-") as tmp:
        broker_cfg, client_cfg = _secured(security, tmp) if security else ({}, {})
        with BackgroundServer(1, config=broker_cfg) as one:
            one.create_topic("bench", 1, 1)
            case = _produce(one.bootstrap_servers, "bench", records, value, {"acks": "1"})
            case.name = "(a) producer acks=1, 1 broker"
            cases.append(case)
            consumed = _consume(one.bootstrap_servers, "bench", 1, records + 1, record_size)
            consumed.name = "(c) consumer, 1 broker"
            cases.append(consumed)
            if security:
                one.create_topic("bench-secure", 1, 1)
                boot = one.server.bootstrap(security)
                sec = _produce(boot, "bench-secure", records, value, {"acks": "1", **client_cfg})
                sec.name = f"(d) producer acks=1, 1 broker, {security.upper()}"
                cases.append(sec)
                sec_c = _consume(boot, "bench", 1, records + 1, record_size, client_cfg)
                sec_c.name = f"(e) consumer, 1 broker, {security.upper()}"
                cases.append(sec_c)
                ratios[f"produce over {security.upper()}"] = sec.records_per_s / case.records_per_s
                ratios[f"consume over {security.upper()}"] = sec_c.records_per_s / consumed.records_per_s
    with BackgroundServer(3) as three:
        three.create_topic("bench", 1, 3, **{"min.insync.replicas": 2})
        case = _produce(three.bootstrap_servers, "bench", records, value, {"acks": "all"})
        case.name = "(b) producer acks=all idempotent, 3 brokers RF=3"
        cases.append(case)
    ceiling = loopback_mb_per_s(records * record_size)
    notes = [
        "one asyncio loop per server process drives every broker of the cluster (brokers share a process)",
        "wall time from the first timed send until every record is acknowledged (producers) or read",
    ]
    return WireBenchResult(cases, ceiling, notes, ratios)
