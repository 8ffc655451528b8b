"""``kafkalite bench wire``: real clients against kafkalite's TCP brokers, beside the loopback ceiling.

Cases, each with a confluent-kafka (librdkafka) client and ``record_size``-byte records:

(a) producer, acks=1, one broker;
(b) producer, acks=all (idempotent, librdkafka's choice here), three brokers, replication factor 3;
(c) consumer reading what (a) wrote, from the beginning, without a group;
with ``security`` (SSL, SASL_PLAINTEXT or SASL_SSL), on the same broker in the same run:
(d) the producer of (a) and (e) the consumer of (c) over a listener of that protocol (SASL: PLAIN user;
TLS: throw-away certificates), and the ratio of each to its PLAINTEXT twin (target >= 0.6).

(f) the broker serving fetches to a bare client that reads the response bytes and decodes nothing, first
with ``sendfile`` (zero copy), then with the records copied through Python, on the same data in the same
run: MB/s each and their ratio.

The ceiling is this machine's TCP loopback moving the same number of bytes through one connection in the
same run (a sender thread writing 1 MiB chunks, the main thread reading them): no Kafka client or broker
can be faster than the bytes themselves.
"""

from __future__ import annotations

import resource
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalite.harness.bench._report import JsonResult, Throughput
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol.codec.header import encode_request
from kafkalite.security.certs import make_certificates

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
    fetch_serving: dict[str, FetchServing] = field(default_factory=dict)

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
            "fetch_serving": {mode: asdict(f) for mode, f in self.fetch_serving.items()},
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
        serve = self.fetch_serving
        if serve:
            zc, cp = serve["sendfile"], serve["copied"]
            lines.append(
                f"(f) broker serving fetches to a bare client: zero copy {zc.mb_per_s / cp.mb_per_s:.2f}x"
            )
            for mode, f in serve.items():
                broker = (
                    "" if f.broker_cpu_ms_per_fetch is None else f" ({f.broker_cpu_ms_per_fetch:.1f} broker)"
                )
                lines.append(
                    f"    {mode:>8}: {f.mb_per_s:,.0f} MB/s, {f.cpu_ms_per_fetch:.1f} ms CPU{broker} and "
                    f"{f.faults_per_fetch:,.0f} page faults per fetch"
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


def send_all(
    producer: Any,
    topic: str,
    value: bytes,
    records: int,
    on_delivery: Callable[[Any, Any], None],
    every_1024: Callable[[], None] | None = None,
) -> None:
    """Hand ``records`` copies of ``value`` to a confluent-kafka ``producer``, waiting out a full local
    queue; every 1,024 records it serves delivery callbacks and calls ``every_1024`` (which may raise)."""
    produce, poll = producer.produce, producer.poll
    for i in range(records):
        while True:
            try:
                produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.001)
        if i & 0x3FF == 0:
            poll(0)
            if every_1024 is not None:
                every_1024()


def produce_case(bootstrap: str, topic: str, records: int, value: bytes, config: dict[str, Any]) -> WireCase:
    """Send ``records`` copies of ``value`` to ``topic`` with confluent-kafka (``config`` over the bench's
    batching settings) after one warm-up record, and time them until the last is acknowledged."""
    from confluent_kafka import Producer  # optional: only this bench's peer client

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000, **config})
    errors = [0]

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    p.produce(topic, value, on_delivery=done)  # warm-up: metadata, producer id
    p.flush(30)
    t0 = time.perf_counter()
    send_all(p, topic, value, records, done)
    left = p.flush(120)
    seconds = time.perf_counter() - t0
    acks = config.get("acks", "1")
    return WireCase(f"produce acks={acks}", records, len(value), seconds, errors[0] + left)


@dataclass
class FetchServing:
    """A broker's fetch serving rate, and what this process spent per fetch meanwhile: minor page faults
    and CPU time (user + system, the client's reading included); with the broker's thread known, that
    thread's own CPU time per fetch, which the client's reading does not blur."""

    mb_per_s: float
    faults_per_fetch: float
    cpu_ms_per_fetch: float
    broker_cpu_ms_per_fetch: float | None = None


def _thread_cpu_s(ident: int | None) -> float:
    return 0.0 if ident is None else time.clock_gettime(time.pthread_getcpuclockid(ident))


def fetch_serving(
    bootstrap: str,
    topic: str,
    rounds: int = 40,
    max_bytes: int = 10_485_760,
    broker_thread: int | None = None,
) -> FetchServing:
    """Fetch the first ``max_bytes`` of partition 0 of ``topic`` ``rounds`` times on one connection,
    reading each response into a reused buffer and decoding nothing: the broker's serving rate.

    The faults are this process's (``getrusage``), so they are the broker's own only when it runs in
    this process (``BackgroundServer``); the client reads into one buffer and takes none per fetch. A
    copy through fresh memory pays a fault per 4 KiB page, which is often most of the copy's cost.
    ``broker_thread`` (``BackgroundServer.thread_ident``) adds the CPU time of the broker's thread alone:
    on two cores the client's reading runs beside it and is the same in both modes."""

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}]}
    ]}  # fmt: skip
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total = 0
    with socket.create_connection((host, int(port))) as s:
        before = resource.getrusage(resource.RUSAGE_SELF)
        broker_before = _thread_cpu_s(broker_thread)
        t0 = time.perf_counter()
        for corr in range(rounds):
            s.sendall(encode_request(1, 11, corr, "bench", body))
            head = s.recv(4, socket.MSG_WAITALL)
            left = int.from_bytes(head, "big")
            total += left + 4
            while left:
                n = s.recv_into(view, min(left, len(buf)))
                if not n:
                    raise ConnectionError("broker closed the connection mid-response")
                left -= n
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        broker_cpu = _thread_cpu_s(broker_thread) - broker_before
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return FetchServing(
        total / seconds / 1e6,
        (after.ru_minflt - before.ru_minflt) / rounds,
        cpu * 1000 / rounds,
        None if broker_thread is None else broker_cpu * 1000 / rounds,
    )


def consume_case(
    bootstrap: str, topic: str, partitions: int, records: int, record_size: int, config: dict | None = None
) -> WireCase:
    """Read ``records`` records of ``topic`` from offset 0 of each of its ``partitions`` with confluent-kafka,
    without a group, and time them; errors count what the consumer's positions do not confirm."""
    from confluent_kafka import Consumer, TopicPartition  # optional: only this bench's peer client

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-wire",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            # librdkafka pauses a partition's fetching for 1 s whenever its queue holds more than
            # queued.min.messages; a reader that drains as fast as it can would sit out those pauses
            "fetch.queue.backoff.ms": 10,
            **(config or {}),
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    consume = c.consume
    while got < records and time.perf_counter() < deadline:
        # consume(n, timeout) waits for all n or the timeout: never ask for more than is left
        got += len(consume(min(10_000, records - got), 0.5))
    seconds = time.perf_counter() - t0
    # Error events arrive as messages too, so ``got`` alone could overcount: the consumer's positions
    # say how many records it really read (checked here, off the per-record path).
    read = sum(tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]))
    errors = got - read
    c.close()
    return WireCase("consume from the beginning (no group)", read, record_size, seconds, errors)


def _secured(protocol: str, directory: str) -> tuple[dict, dict]:
    """Broker settings for a second listener speaking ``protocol``, and a client's settings for it."""
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

    value = bytes(i & 0xFF for i in range(record_size))
    cases = []
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-") as tmp:
        broker_cfg, client_cfg = _secured(security, tmp) if security else ({}, {})
        with BackgroundServer(1, config=broker_cfg) as one:
            one.create_topic("bench", 1, 1)
            case = produce_case(one.bootstrap_servers, "bench", records, value, {"acks": "1"})
            case.name = "(a) producer acks=1, 1 broker"
            cases.append(case)
            consumed = consume_case(one.bootstrap_servers, "bench", 1, records + 1, record_size)
            consumed.name = "(c) consumer, 1 broker"
            cases.append(consumed)
            serve = {}
            for mode in ("sendfile", "copied"):
                one.server.zero_copy = mode == "sendfile"  # read by each new connection
                serve[mode] = fetch_serving(one.bootstrap_servers, "bench", broker_thread=one.thread_ident)
            one.server.zero_copy = True
            if security:
                one.create_topic("bench-secure", 1, 1)
                boot = one.server.bootstrap(security)
                sec = produce_case(boot, "bench-secure", records, value, {"acks": "1", **client_cfg})
                sec.name = f"(d) producer acks=1, 1 broker, {security.upper()}"
                cases.append(sec)
                sec_c = consume_case(boot, "bench", 1, records + 1, record_size, client_cfg)
                sec_c.name = f"(e) consumer, 1 broker, {security.upper()}"
                cases.append(sec_c)
                ratios[f"produce over {security.upper()}"] = sec.records_per_s / case.records_per_s
                ratios[f"consume over {security.upper()}"] = sec_c.records_per_s / consumed.records_per_s
    with BackgroundServer(3) as three:
        three.create_topic("bench", 1, 3, **{"min.insync.replicas": 2})
        case = produce_case(three.bootstrap_servers, "bench", records, value, {"acks": "all"})
        case.name = "(b) producer acks=all idempotent, 3 brokers RF=3"
        cases.append(case)
    ceiling = loopback_mb_per_s(records * record_size)
    notes = [
        "one asyncio loop per server process drives every broker of the cluster (brokers share a process)",
        "wall time from the first timed send until every record is acknowledged (producers) or read",
        "(f) copied reads each fetch's records once and hands them to the socket unframed; over loopback "
        "the kernel copies every byte to the client either way, so the two modes come out close (the "
        "storage chapter's socket pair shows sendfile alone); page faults count fresh memory taken",
    ]
    return WireBenchResult(cases, ceiling, notes, ratios, serve)
