"""Seeded fault runs: a 3-broker cluster, a steady producer, a random fault schedule, then the checker.

``run_schedule(seed)`` is the unit of the safety tests and of ``kafkalite bench faults``: the same seed
always gives the same schedule, the same history and the same report.

What the schedule may do, and why that is the envelope inside which Kafka promises no acked loss:

* Crashes and pauses hit brokers only (never ZooKeeper), at most one broker crashed and one paused at a
  time; cuts hit broker<->broker and broker<->zk links (one pair at a time, sometimes one way). A pause
  longer than ``zookeeper.session.timeout.ms`` makes a zombie: the broker wakes up still believing it
  leads. Every fault ends by ``duration_ms``.
* A crash may lose the bytes never fsynced (``lose_unflushed``). With Kafka's flush defaults nothing is
  fsynced per write: durability of acks=all comes from replication, i.e. an acked record sits on every
  ISR member (at least ``min.insync.replicas``). So it survives as long as not every replica holding it
  loses it. A crash therefore loses unflushed bytes only when, at that instant, every partition has its
  full ISR in ZooKeeper: the two other replicas then hold every acked record on a disk that is not lost
  (other crashes never lose bytes, and only one broker is crashed at a time). When the ISR has shrunk
  (say to the leader alone, after a pause), losing that leader's page cache loses acked data in real
  Kafka too (the gap KIP-966 closes), so the schedule does not go there; the crash happens without loss.
"""

from __future__ import annotations

import errno
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalite.coordination.zk_node import ZK_NODE_ID
from kafkalite.harness.checker import DUPLICATE, REORDERED, Anomaly, CheckReport, check_history
from kafkalite.host.cluster import Cluster
from kafkalite.net.sim import Fault, FaultSchedule
from kafkalite.protocol import TopicPartition
from kafkalite.records import iter_batches
from kafkalite.storage.file_ops import OS_FILE_OPS, DiskFaults

TOPIC = "faults"

# Short timeouts so a few seconds of virtual time hold several failovers (Kafka's defaults are 18 s / 30 s).
BROKER_CONFIG: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 1500,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
    "replica.high.watermark.checkpoint.interval.ms": 500,
    "controller.socket.timeout.ms": 3000,
    "replica.socket.timeout.ms": 3000,
    # Preferred-leader rebalancing would add leader moves nobody asked for; keep failovers readable.
    "auto.leader.rebalance.enable": False,
}
PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 1,
    "request.timeout.ms": 2500,
    "delivery.timeout.ms": 60_000,
    "retry.backoff.ms": 50,
    "metadata.max.age.ms": 2000,
}


@dataclass
class FaultRunResult:
    """What one seeded run produced: the checker's report plus enough to replay and explain it."""

    seed: int
    report: CheckReport
    schedule: str
    counts: dict[str, int]
    converged: bool
    virtual_ms: int
    events: int
    sends: int
    acked: int
    lossy_crashes: list[int] = field(default_factory=list)
    retried: frozenset = frozenset()
    idempotent: bool = False
    disk_faults: int = 0  # file operations that failed on purpose (disk modes)
    dirs_offline: int = 0  # log dirs taken offline by them
    corrupt_batches: int = 0  # batches damaged on purpose (disk="corrupt")
    # With ``timeline=True``: per record in send order, (sent, acked or None) in ms since the schedule's start.
    timeline: tuple[tuple[int, int | None], ...] = ()

    @property
    def violations(self) -> list[Anomaly]:
        """The report's violations. Without idempotence, duplicates of records the producer had to resend
        after an attempt that may have been written are Kafka's documented behaviour and left out; with
        it, every duplicate counts, and so does a record out of send order within its partition."""
        if self.idempotent:
            return list(self.report.violations) + self.report.of_kind(REORDERED)
        return [a for a in self.report.violations if not (a.kind == DUPLICATE and a.id in self.retried)]

    @property
    def retry_duplicates(self) -> int:
        return sum(1 for a in self.report.duplicates if a.id in self.retried)

    @property
    def ok(self) -> bool:
        return self.converged and not self.violations

    def __str__(self) -> str:
        state = "ok" if self.ok else ("NOT CONVERGED " if not self.converged else "") + "VIOLATION"
        lines = [f"seed {self.seed}: {state}; {self.report.summary()}"]
        lines += [f"  {a}" for a in self.violations[:20]]
        return "\n".join([*lines, self.schedule])


def build_schedule(seed: int, brokers: int, duration_ms: int, kinds: tuple[str, ...]) -> FaultSchedule:
    """Crashes/pauses over the brokers and cuts over broker<->broker and broker<->zk links, merged."""
    ids = list(range(1, brokers + 1))
    faults: list[Fault] = []
    node_kinds = tuple(k for k in kinds if k in ("crash", "pause"))
    if node_kinds:
        faults += FaultSchedule.random(seed, ids, duration_ms, kinds=node_kinds).faults
    if "cut" in kinds:
        # A second stream (own seed) so cuts overlap crashes and pauses instead of replacing them.
        cuts = FaultSchedule.random(seed * 7919 + 1, [*ids, ZK_NODE_ID], duration_ms, kinds=("cut",))
        faults += cuts.faults
    faults.sort(key=lambda f: f.time_ms)  # stable: ends stay before starts at the same instant
    return FaultSchedule(tuple(faults), seed)


def _in_sync(cluster: Cluster, partitions: int, brokers: int) -> bool:
    """Every partition has its full ISR in ZooKeeper and every replica's LEO reached the leader's HW.
    ZooKeeper's ISR alone can be stale (a broker that just restarted is still listed), hence the LEOs."""
    for p in range(partitions):
        if len(cluster.isr(TOPIC, p)) != min(3, brokers):
            return False
        hw = cluster.high_watermark(TOPIC, p)
        leos = cluster.log_end_offsets(TOPIC, p)
        if hw is None or len(leos) != min(3, brokers) or min(leos.values()) < hw:
            return False
    return True


def _pair_ends(sched: FaultSchedule) -> dict[int, int]:
    """Map each end action's index to its start's index (restart->crash, resume->pause, heal->cut)."""
    start_of = {"restart": "crash", "resume": "pause", "heal": "cut"}
    open_: dict[tuple, int] = {}
    out: dict[int, int] = {}
    for i, f in enumerate(sched):
        key_args = (
            f.args[:1] if f.action in ("crash", "pause", "restart", "resume") else frozenset(f.args[:2])
        )
        if f.action in start_of:
            j = open_.pop((start_of[f.action], key_args), None)
            if j is not None:
                out[i] = j
        else:
            open_[(f.action, key_args)] = i
    return out


def converged(cluster: Cluster, producer: Any, partitions: int) -> bool:
    """Every partition led by a live leader that knows it, ISR full, all replicas at the HW, producer idle."""
    if not producer.idle():
        return False
    for p in range(partitions):
        if not cluster._partition_ready(TOPIC, p):
            return False
        if len(cluster.isr(TOPIC, p)) != len(cluster.replicas(TOPIC, p)):
            return False
        hw = cluster.high_watermark(TOPIC, p)
        leos = cluster.log_end_offsets(TOPIC, p)
        if len(leos) != len(cluster.replicas(TOPIC, p)) or set(leos.values()) != {hw}:
            return False
    return True


def run_schedule(
    seed: int,
    *,
    brokers: int = 3,
    partitions: int = 3,
    records: int = 80,
    duration_ms: int = 3000,
    kinds: tuple[str, ...] = ("crash", "pause", "cut"),
    acks: str | int = "all",
    min_insync: int = 2,
    unclean: bool = False,
    lose_unflushed: bool | float = 0.5,
    truncate_by_leader_epoch: bool = True,
    schedule: FaultSchedule | None = None,
    converge_ms: int = 60_000,
    broker_config: dict[str, Any] | None = None,
    idempotence: bool | None = None,
    disk: str | None = None,
    setup: Callable[[Cluster], None] | None = None,
    timeline: bool = False,
) -> FaultRunResult:
    """One seeded run; see the module docstring for what the schedule may do.

    ``lose_unflushed``: probability (or True/False) that a scheduled crash loses unflushed bytes, applied
    only when every partition has its full ISR at that instant. ``schedule`` replaces the random one.
    ``idempotence`` sets ``enable.idempotence`` (None: the producer's default, which is on for acks=all).
    ``disk`` adds one seeded disk fault on one broker (see ``schedule_disk_fault``): ``"enospc"`` (its
    disk fills), ``"eio"`` (its disk fails) or ``"corrupt"`` (a batch of a closed segment rots while it
    is down; the other faults are left out then, so the damaged replica never leads again).
    ``setup`` runs once the topic and producer exist, before the schedule starts (e.g. to slow a link).
    ``timeline`` records when each record was sent and acknowledged (a send callback; off by default so
    the producer keeps the path every other run takes).
    """
    if disk is not None and disk not in DISK_MODES:
        raise ValueError(f"disk must be one of {DISK_MODES}, got {disk!r}")
    config = {
        **BROKER_CONFIG,
        "kafkalite.truncate.by.leader.epoch": truncate_by_leader_epoch,
        **({"log.segment.bytes": 512} if disk == "corrupt" else {}),
        **(broker_config or {}),
    }
    faults = DiskFaults() if disk in ("enospc", "eio") else None
    if disk == "corrupt" and schedule is None:
        kinds = ()
    cluster = Cluster(brokers=brokers, seed=seed, config=config, file_ops=faults or OS_FILE_OPS)
    try:
        rf = min(3, brokers)
        cluster.create_topic(
            TOPIC,
            partitions,
            rf,
            config={"min.insync.replicas": min_insync, "unclean.leader.election.enable": unclean},
        )
        producer_config = {**PRODUCER_CONFIG, "acks": acks}
        if idempotence is not None:
            producer_config["enable.idempotence"] = idempotence
        producer = cluster.producer("producer-1", config=producer_config)
        if setup is not None:
            setup(cluster)
        sched = schedule if schedule is not None else build_schedule(seed, brokers, duration_ms, kinds)
        p_lose = float(lose_unflushed)
        coin = random.Random(seed ^ 0x5EED)
        lossy: list[int] = []
        notes: list[str] = []
        start = cluster.net.now_ms()
        active: set[int] = set()  # indexes of started faults whose end has not run
        skipped: set[int] = set()  # starts suppressed while a lossy crash is unresolved (ends skipped too)
        ends = _pair_ends(sched)
        state: dict[str, Any] = {"lossy": None}  # broker that lost its tail and has not caught up yet

        def caught_up(b: int) -> bool:
            """``b`` is back, registered, in every ISR and at every leader's HW: it holds the acked data."""
            if not cluster.net.is_up(b) or not cluster.brokers[b].registered:
                return False
            return _in_sync(cluster, partitions, brokers)

        def act(i: int, f: Fault, lucky: bool) -> None:
            if i in ends:  # an end action: undo only what really started
                j = ends[i]
                if j in skipped:
                    return
                active.discard(j)
                getattr(cluster.net, f.action)(*f.args)
                return
            if state["lossy"] is not None and caught_up(state["lossy"]):
                state["lossy"] = None
            if state["lossy"] is not None:
                skipped.add(i)  # a second fault now could leave no intact replica in the ISR
                notes.append(f"{cluster.net.now_ms() - start:>8} ms  skipped {f.action} {f.args}")
                return
            active.add(i)
            if f.action != "crash":
                getattr(cluster.net, f.action)(*f.args)
                return
            b = f.args[0]
            lose = lucky and len(active) == 1 and _in_sync(cluster, partitions, brokers)
            if lose:
                lossy.append(b)
                state["lossy"] = b
            notes.append(f"{cluster.net.now_ms() - start:>8} ms  crash {b} lose_unflushed={lose}")
            cluster.crash(b, lose_unflushed=lose)

        for i, f in enumerate(sched):
            lucky = f.action == "crash" and coin.random() < p_lose
            cluster.net.at(start + f.time_ms, _bind(act, i, f, lucky))
        corrupted: list[int] = []
        disk_notes: list[str] = []
        if disk is not None:
            schedule_disk_fault(cluster, disk, seed, start, duration_ms, faults, corrupted, disk_notes)

        step = max(1, duration_ms // max(1, records))
        times: list[list[int | None]] = []
        for i in range(records):
            if timeline:
                times.append([cluster.net.now_ms() - start, None])
                producer.send(
                    TOPIC,
                    f"r{i}".encode(),
                    key=str(i).encode(),
                    callback=_acked_at(cluster, start, times[-1]),
                )
            else:
                producer.send(TOPIC, f"r{i}".encode(), key=str(i).encode())
            cluster.run_for(step)
        cluster.run_for(max(0, start + duration_ms - cluster.net.now_ms()) + 1)
        # The schedule ends every fault by duration_ms; make sure nothing is left down anyway. A full disk
        # is freed first, so the broker it stopped starts again with every dir.
        if faults is not None:
            faults.clear()
        heal_everything(cluster)
        producer.flush()
        ok = cluster.run_until(lambda: converged(cluster, producer, partitions), converge_ms)

        reads = {(TOPIC, p): recs for p, recs in cluster.read_all(TOPIC).items()}
        replicas = {(TOPIC, p): cluster.replica_logs(TOPIC, p) for p in range(partitions)}
        hws = {}
        for p in range(partitions):
            hw = cluster.high_watermark(TOPIC, p)
            if hw is not None:
                hws[(TOPIC, p)] = hw
        history = producer.history
        report = check_history(history, reads, replicas=replicas, high_watermarks=hws)
        text = "\n".join(
            [
                str(sched),
                *(["lossy crashes:", *notes] if notes else []),
                *(["disk:", *disk_notes] if disk_notes else []),
            ]
        )
        return FaultRunResult(
            seed=seed,
            report=report,
            schedule=text,
            counts=report.counts,
            converged=ok,
            virtual_ms=cluster.net.now_ms(),
            events=cluster.net.stats.events,
            sends=report.sends,
            acked=report.acked,
            lossy_crashes=lossy,
            retried=_maybe_written_ids(producer),
            idempotent=producer.config.idempotence,
            disk_faults=len(faults.failures) if faults is not None else 0,
            dirs_offline=len(cluster.net.events("log_dir_offline")),
            corrupt_batches=len(corrupted),
            timeline=tuple((sent, acked) for sent, acked in times),
        )
    finally:
        cluster.close()


DISK_MODES = ("enospc", "eio", "corrupt")


def schedule_disk_fault(
    cluster: Cluster,
    mode: str,
    seed: int,
    start: int,
    duration_ms: int,
    faults: DiskFaults | None,
    corrupted: list[int],
    notes: list[str],
) -> None:
    """One seeded disk fault on one broker, between 20% and 50% of the run: its disk fills after a few
    KiB (``enospc``, the write crossing the limit torn as a filling disk tears it), or fails from its
    Nth file operation (``eio``); both last until the end of the run. ``corrupt`` stops the broker,
    flips a byte inside one batch in the middle of a closed segment of each of its partitions, and starts
    it again 300 ms later."""
    rng = random.Random(seed * 31 + 0xD15C)
    victim = rng.randint(1, len(cluster.brokers))
    at = start + rng.randint(duration_ms // 4, duration_ms // 2)
    home = cluster.dir / f"broker-{victim}"
    if mode in ("enospc", "eio"):
        assert faults is not None
        if mode == "enospc":
            room = rng.randint(0, 1024)
            what = f"disk of broker {victim} full after {room} more bytes"
            plan = {"error": errno.ENOSPC, "after_bytes": room}
        else:
            nth = rng.randint(1, 12)
            what = f"disk of broker {victim} failing (EIO) from its file operation #{nth}"
            plan = {"error": errno.EIO, "on_call": nth}

        def fill() -> None:
            notes.append(f"{cluster.net.now_ms() - start:>8} ms  {what}")
            faults.fail(under=home, **plan)

        cluster.net.at(at, fill)
        return

    def rot() -> None:
        if not cluster.net.is_up(victim):
            return
        cluster.crash(victim)
        for part in sorted(home.glob(f"{TOPIC}-*")):
            off = corrupt_closed_segment(part, rng)
            if off is not None:
                corrupted.append(off)
                notes.append(
                    f"{cluster.net.now_ms() - start:>8} ms  broker {victim}: {part.name} batch {off} rots"
                )
        cluster.net.at(cluster.net.now_ms() + 300, lambda: cluster.restart(victim))

    cluster.net.at(at, rot)


def corrupt_closed_segment(partition_dir: Path, rng: random.Random) -> int | None:
    """Flip one byte inside a batch in the middle of the partition's first closed segment (what bit rot
    does); returns that batch's base offset, None when the partition has no closed segment yet."""
    logs = sorted(partition_dir.glob("*.log"))
    if len(logs) < 2:
        return None
    data = bytearray(logs[0].read_bytes())
    batches = list(iter_batches(data))
    if not batches:
        return None
    pos, h = batches[len(batches) // 2]
    data[pos + 61 + rng.randrange(h.batch_length + 12 - 61)] ^= 0xFF  # past the header: only the CRC sees
    logs[0].write_bytes(bytes(data))
    return h.base_offset


def heal_everything(cluster: Cluster) -> None:
    """Heal every link, resume every paused broker and restart every crashed one."""
    cluster.net.heal_all()
    for b in cluster.brokers:
        if cluster.net.is_paused(b):
            cluster.net.resume(b)
        if not cluster.net.is_up(b):
            cluster.restart(b)


def _maybe_written_ids(producer: Any) -> frozenset:
    """Ids of records whose batch was sent more than once: any earlier attempt may have landed (even one
    answered NOT_LEADER_OR_FOLLOWER, when the leader stepped down after appending). Read-only use of the
    producer's batch list, as its ``history`` does; a record sent once and read twice stays a violation."""
    ids = set()
    for batch in getattr(producer, "_batches", ()):
        if getattr(batch, "attempts", 0) > 1 or getattr(batch, "maybe_written", False):
            ids.update(rec[1] for rec in batch.records)
    return frozenset(ids)


def _acked_at(cluster: Cluster, start: int, slot: list[int | None]) -> Callable[[Any, Any], None]:
    """A send callback that notes in ``slot[1]`` when the record was acknowledged (errors leave None)."""

    def done(_metadata: Any, error: Any) -> None:
        if error is None:
            slot[1] = cluster.net.now_ms() - start

    return done


def _bind(fn: Any, *args: Any) -> Any:
    return lambda: fn(*args)


__all__ = [
    "DISK_MODES",
    "FaultRunResult",
    "TopicPartition",
    "build_schedule",
    "converged",
    "run_schedule",
    "schedule_disk_fault",
]
