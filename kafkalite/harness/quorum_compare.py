"""ISR vs majority quorum, measured: one fault-schedule generator, two replication schemes, one simulator.

The seeds' question is why Kafka replicates data partitions with an in-sync replica set (acks=all waits
for every ISR member; f+1 replicas survive f failures) and not with a majority quorum (the leader waits
for a majority; 2f+1 replicas survive f), which is what KRaft's ``__cluster_metadata`` log uses. Here both
run under the same seeded faults and the same writer, and four things are counted:

* **acknowledged writes lost**: a write the client saw acknowledged that is absent from the final log
  once everything healed (the history checker's ``lost``, ``kafkalite.harness.checker``);
* **time unavailable**: the writer issues one write every ``interval_ms`` while the faults last
  (``[0, duration_ms)`` from the schedule's start). A write is *unavailable* when it is not acknowledged
  within ``deadline_ms`` of being issued (retries included: the ISR producer retries on its own, the
  quorum writer re-appends at the new leader). Time unavailable = ``interval_ms`` x the number of
  unavailable writes: the stretch of the fault window during which a write issued then could not commit
  within the deadline. It is zero when every failover is shorter than the deadline;
* **commit latency p50/p99** in a fault-free run where one follower is *slow*: every link between it
  and the other replicas adds ``slow_ms`` each way (its links to the client and ZooKeeper are left
  alone). ISR: the producer's send to acknowledgement (acks=all: the whole ISR has fetched it).
  Quorum: the leader's append to the high watermark passing it (a majority has it); the writer calls
  the leader directly, so the quorum's figures lack the client's round trip (2 ms here);
* **replicas needed**: per scheme, how many failures it tolerates while still accepting writes and
  without losing an acknowledged write, by construction (ISR: rf - min.insync.replicas and rf - 1 with
  clean election; quorum of n: (n - 1) // 2 for both).

The generator (``fault_schedule``) draws, from ``seed`` and ``f`` alone, when faults start, what kind
they are (crash then restart, pause then resume, a cut link, sometimes one way, then heal) and how long
they last; a second stream picks the victims among the scheme's replicas. At most ``f`` faults are open
at any instant (a cut counts as one), so a scheme built to survive ``f`` failures is never asked more.
The same seed gives the same timeline of faults on every scheme with the same replica count.

Crashes: the ISR side is ``kafkalite.harness.faults.run_schedule`` (a ZooKeeper-mode cluster, one
partition, the producer with ``acks``), so a crash loses the page cache with probability 0.5 but only
inside the envelope in which Kafka promises durability (see that module: every replica in sync, no
other fault open). The quorum side always loses the page cache on a crash, and loses nothing by it:
KRaft fsyncs the log before a record counts towards the high watermark.

Timeouts are Kafka's defaults scaled down so a few seconds of simulated time hold several failovers:
the ISR cluster uses ``faults.BROKER_CONFIG`` (``zookeeper.session.timeout.ms`` 1500 = 18 s / 12,
``replica.lag.time.max.ms`` 1000), the quorum ``controller.quorum.*`` / 10 (election 100 ms, fetch
timeout 200 ms). Failure detection therefore keeps the ratio Kafka ships with (ZooKeeper session vs
quorum election timeout), and the unavailability figures follow it.

Everything is simulated time, so every figure is deterministic per seed (the same on any machine).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.send_history import SendRecord
from kafkalite.harness.checker import ReadRecord, check_history
from kafkalite.harness.faults import TOPIC, run_schedule
from kafkalite.host.cluster import Cluster
from kafkalite.net.sim import Fault, FaultSchedule, SimNetwork
from kafkalite.raft import Batch, QuorumConfig, RaftNode

METADATA_TOPIC = "__cluster_metadata"
ISR = "isr"
QUORUM = "quorum"

# controller.quorum.* defaults / 10 (see the module docstring); retry backoff is Kafka's own 20 ms.
RAFT_TIMEOUTS: dict[str, int] = dict(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    election_backoff_max_ms=100,
    request_timeout_ms=200,
    retry_backoff_ms=20,
    fetch_max_wait_ms=50,
)
DURATION_MS = 3000  # the fault window
INTERVAL_MS = 30  # one write every 30 ms: 100 writes in the window
DEADLINE_MS = 500  # a write not acknowledged within this counts as unavailable
SLOW_MS = 20  # the slow replica's extra delay per message, each way
SLOW_RUN_MS = 1500  # length of the fault-free slow-replica run
REQUEST_TIMEOUT_MS = 2500  # the quorum writer re-appends an uncommitted write after this (as the producer)
LATENCY_SEEDS = 20  # fault-free latency runs per scheme (the first seeds)
SETTLE_MS = 60_000  # after healing, how long a run may take to acknowledge every write


@dataclass(frozen=True)
class Scheme:
    """One replication scheme: ISR (``replicas`` = replication factor) or a majority quorum of voters."""

    kind: str
    replicas: int
    min_insync: int = 1
    acks: str | int = "all"
    unclean: bool = False

    def __post_init__(self) -> None:
        if self.kind not in (ISR, QUORUM):
            raise ValueError(f"kind must be {ISR!r} or {QUORUM!r}, got {self.kind!r}")
        if not 1 <= self.replicas <= (3 if self.kind == ISR else 9):
            raise ValueError(f"replicas out of range for {self.kind}: {self.replicas}")
        if self.kind == ISR and not 1 <= self.min_insync <= self.replicas:
            raise ValueError(f"min.insync.replicas must be in 1..{self.replicas}, got {self.min_insync}")

    @property
    def name(self) -> str:
        if self.kind == QUORUM:
            return f"quorum n={self.replicas}"
        extra = ("" if self.acks == "all" else f" acks={self.acks}") + (" unclean" if self.unclean else "")
        return f"ISR rf={self.replicas} min.insync={self.min_insync}{extra}"

    @property
    def tolerates_for_writes(self) -> int:
        """Failures under which writes are still acknowledged (once failover is over)."""
        if self.kind == QUORUM:
            return (self.replicas - 1) // 2
        return self.replicas - self.min_insync if self.acks == "all" else self.replicas - 1

    @property
    def tolerates_without_loss(self) -> int:
        """Failures an acknowledged write survives (ISR: clean election, acks=all; else none)."""
        if self.kind == QUORUM:
            return (self.replicas - 1) // 2
        return self.replicas - 1 if self.acks == "all" and not self.unclean else 0


def isr(replicas: int, min_insync: int, acks: str | int = "all", unclean: bool = False) -> Scheme:
    return Scheme(ISR, replicas, min_insync, acks, unclean)


def quorum(voters: int) -> Scheme:
    return Scheme(QUORUM, voters)


# For each f, ISR with f+1 replicas (min.insync 1 keeps writes going, f+1 stops them on any fault), ISR
# with 3 replicas and Kafka's recommended min.insync=2, and the quorum of 2f+1.
SCHEMES: dict[int, tuple[Scheme, ...]] = {
    1: (isr(2, 1), isr(2, 2), isr(3, 2), quorum(3)),
    2: (isr(3, 1), quorum(5)),
}


def fault_schedule(
    seed: int,
    replicas: Sequence[int],
    f: int,
    duration_ms: int = DURATION_MS,
    *,
    kinds: Sequence[str] = ("crash", "pause", "cut"),
    gap_ms: tuple[int, int] = (100, 700),
    fault_ms: tuple[int, int] = (100, 1200),
    one_way_ratio: float = 0.3,
) -> FaultSchedule:
    """At most ``f`` open faults at any instant over ``replicas``, each ended by ``duration_ms``.

    Timing, kinds and lengths come from one stream seeded by ``seed`` alone; victims from a second one,
    so schemes of different sizes see the same timeline. A fault whose kind has no free victim (every
    replica already crashed or paused) is skipped.
    """
    if f < 1:
        raise ValueError(f"f must be >= 1, got {f}")
    unknown = set(kinds) - {"crash", "pause", "cut"}
    if unknown or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of crash, pause, cut (got {sorted(kinds)})")
    nodes = list(replicas)
    when = random.Random(f"quorum-compare/{seed}")
    who = random.Random(f"quorum-compare/{seed}/victims/{len(nodes)}")
    kinds = sorted(kinds)
    faults: list[Fault] = []
    active: list[tuple[int, str, Any]] = []  # (end, kind, node or frozenset pair)
    t = 0
    while True:
        t += when.randint(*gap_ms)
        if t >= duration_ms:
            break
        kind = when.choice(kinds)
        end = min(t + when.randint(*fault_ms), duration_ms)
        one_way = when.random() < one_way_ratio
        active = [a for a in active if a[0] > t]
        if len(active) >= f:
            continue
        busy = {a[2] for a in active if a[1] != "cut"}
        free = [n for n in nodes if n not in busy]
        if kind in ("crash", "pause"):
            if not free:
                continue
            n = who.choice(free)
            stop = "restart" if kind == "crash" else "resume"
            faults += [Fault(t, kind, (n,)), Fault(end, stop, (n,))]
            active.append((end, kind, n))
        else:
            cut = {a[2] for a in active if a[1] == "cut"}
            pairs = [frozenset((a, b)) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
            pairs = [p for p in pairs if p not in cut]
            if not pairs:
                continue
            a, b = sorted(who.choice(pairs))
            faults += [Fault(t, "cut", (a, b, one_way)), Fault(end, "heal", (a, b))]
            active.append((end, "cut", frozenset((a, b))))
    faults.sort(key=lambda x: x.time_ms)  # stable: an end stays before a start at the same instant
    return FaultSchedule(tuple(faults), seed)


@dataclass
class RunResult:
    """One run of one scheme: acknowledged writes lost, unavailable time, commit latencies."""

    scheme: Scheme
    seed: int
    writes: int
    acked: int
    lost: int
    unavailable_ms: int
    latencies: list[int] = field(default_factory=list)
    converged: bool = True


def unavailable_ms(
    timeline: Sequence[tuple[int, int | None]], window_ms: int, interval_ms: int, deadline_ms: int
) -> int:
    """``interval_ms`` x the writes issued in ``[0, window_ms)`` not acknowledged within ``deadline_ms``."""
    late = sum(
        1 for sent, acked in timeline if sent < window_ms and (acked is None or acked - sent > deadline_ms)
    )
    return late * interval_ms


def _slow_links(net: SimNetwork, slow: int, others: Sequence[int], extra_ms: int) -> None:
    for o in others:
        if o != slow:
            net.delay(slow, o, extra_ms)


def _slow_follower(replicas: Sequence[int], leader: int | None) -> int:
    """The highest-numbered replica that is not the leader (the leader is never the slow one)."""
    return max(r for r in replicas if r != leader)


# ------------------------------------------------------------------------------------------------ ISR


def run_isr(
    scheme: Scheme,
    seed: int,
    schedule: FaultSchedule | None,
    *,
    duration_ms: int = DURATION_MS,
    interval_ms: int = INTERVAL_MS,
    deadline_ms: int = DEADLINE_MS,
    slow_ms: int = 0,
) -> RunResult:
    """One partition replicated by ISR on ``run_schedule``'s cluster; ``schedule=None`` runs no faults."""
    n = scheme.replicas

    def slow(cluster: Cluster) -> None:
        if slow_ms:
            ids = sorted(cluster.brokers)
            _slow_links(cluster.net, _slow_follower(ids, cluster.leader(TOPIC, 0)), ids, slow_ms)

    r = run_schedule(
        seed,
        brokers=n,
        partitions=1,
        records=duration_ms // interval_ms,
        duration_ms=duration_ms,
        acks=scheme.acks,
        min_insync=scheme.min_insync,
        unclean=scheme.unclean,
        schedule=schedule if schedule is not None else FaultSchedule(()),
        setup=slow,
        timeline=True,
    )
    return RunResult(
        scheme,
        seed,
        writes=len(r.timeline),
        acked=r.acked,
        lost=len(r.report.lost),
        unavailable_ms=unavailable_ms(r.timeline, duration_ms, interval_ms, deadline_ms),
        latencies=[a - s for s, a in r.timeline if a is not None],
        converged=r.converged,
    )


# --------------------------------------------------------------------------------------------- quorum


class _Replayed:
    """A voter's state machine: the committed records it replayed, and the first commit of each write."""

    def __init__(self, net: SimNetwork, first_commit: dict[bytes, tuple[int, int]]) -> None:
        self.net = net
        self.first_commit = first_commit
        self.items: list[ReadRecord] = []

    def handle_commit(self, batch: Batch) -> None:
        for i, value in enumerate(batch.records):
            if value is None or not value.startswith(b"w"):
                continue
            offset = batch.base_offset + i
            self.items.append(ReadRecord(offset, value))
            # The leader's high watermark moves first; a follower or a replay after restart sees it later.
            self.first_commit.setdefault(value, (self.net.now_ms(), offset))


@dataclass
class _Write:
    value: bytes
    issued: int
    attempt: tuple[int, int, int] | None = None  # (node, epoch, appended at)


class _QuorumRun:
    """Voters 1..n as ``RaftNode``s on one ``SimNetwork``, and a writer appending at the leader."""

    def __init__(self, scheme: Scheme, seed: int, root: str) -> None:
        self.net = SimNetwork(seed, latency_ms=1, log_messages="none")
        self.voters = tuple(range(1, scheme.replicas + 1))
        self.first_commit: dict[bytes, tuple[int, int]] = {}
        cfg = QuorumConfig(voters=self.voters, **RAFT_TIMEOUTS)
        self.nodes: dict[int, RaftNode] = {}
        for v in self.voters:
            node = RaftNode(
                cfg,
                os.path.join(root, f"node-{v}"),
                make_listener=lambda: _Replayed(self.net, self.first_commit),
            )
            self.nodes[v] = self.net.add_node(v, node)
        self.writes: list[_Write] = []

    def leader(self) -> RaftNode | None:
        """The live, unpaused node that is leader in the highest epoch (what a client would find)."""
        live = [
            n
            for n in self.nodes.values()
            if n.client is not None and not self.net.is_paused(n.node_id) and n.client.quorum.is_leader()
        ]
        return max(live, key=lambda n: n.client.epoch) if live else None

    def issue(self, i: int) -> None:
        self.writes.append(_Write(b"w%d" % i, self.net.now_ms()))
        self.tick()

    def tick(self) -> None:
        """Append every write neither committed nor waiting on a leader that still holds its epoch."""
        now = self.net.now_ms()
        leader = self.leader()
        for w in self.writes:
            if w.value in self.first_commit:
                continue
            if w.attempt is not None:
                node, epoch, at = w.attempt
                c = self.nodes[node].client
                alive = c is not None and c.quorum.is_leader() and c.epoch == epoch
                if alive and now - at < REQUEST_TIMEOUT_MS:
                    continue
            if leader is not None:
                leader.client.append([w.value], now)
                w.attempt = (leader.node_id, leader.client.epoch, now)

    def pending(self) -> bool:
        return any(w.value not in self.first_commit for w in self.writes)

    def in_sync(self) -> bool:
        leader = self.leader()
        if leader is None or self.pending():
            return False
        end = leader.client.log.end_offset
        return all(n.client is not None and n.client.high_watermark == end for n in self.nodes.values())

    def close(self) -> None:
        for n in self.nodes.values():
            if n.client is not None:
                n.client.close()


def run_quorum(
    scheme: Scheme,
    seed: int,
    schedule: FaultSchedule | None,
    *,
    duration_ms: int = DURATION_MS,
    interval_ms: int = INTERVAL_MS,
    deadline_ms: int = DEADLINE_MS,
    slow_ms: int = 0,
    settle_ms: int = SETTLE_MS,
) -> RunResult:
    """A log replicated by KRaft's Raft over ``scheme.replicas`` voters; ``schedule=None`` runs no faults."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None  # thousands of runs fsync their logs
    root = tempfile.mkdtemp(prefix="kafkalite-quorum-", dir=base)
    q = _QuorumRun(scheme, seed, root)
    net = q.net
    try:
        net.run_until(lambda: q.leader() is not None, 10_000)  # the first election, as topic creation
        if slow_ms:
            leader = q.leader()
            _slow_links(net, _slow_follower(q.voters, leader and leader.node_id), q.voters, slow_ms)
        start = net.now_ms()
        if schedule is not None:
            schedule.apply(net, start)
        records = duration_ms // interval_ms
        for i in range(records):
            net.at(start + i * interval_ms, lambda i=i: q.issue(i))

        def ticking() -> None:  # the writer's retry loop, every retry backoff while writes are open
            q.tick()
            if q.pending() or net.now_ms() < start + duration_ms:
                net.after(RAFT_TIMEOUTS["retry_backoff_ms"], ticking)

        net.at(start, ticking)
        net.run_for(duration_ms + 1)
        net.heal_all()
        for v in q.voters:  # every fault ends by duration_ms; make sure
            net.restart(v)
            net.resume(v)
        ok = net.run_until(q.in_sync, settle_ms)

        sends, timeline = [], []
        for i, w in enumerate(q.writes):
            done = q.first_commit.get(w.value)
            if done is None:
                sends.append(SendRecord.failed(w.value, METADATA_TOPIC, 0, "NOT_COMMITTED", seq=i))
                timeline.append((w.issued - start, None))
            else:
                sends.append(SendRecord.acked(w.value, METADATA_TOPIC, 0, done[1], seq=i))
                timeline.append((w.issued - start, done[0] - start))
        leader = q.leader()
        tp = (METADATA_TOPIC, 0)
        reads = {tp: leader.listener.items if leader is not None else []}
        replicas = {tp: {v: n.listener.items for v, n in q.nodes.items() if n.listener is not None}}
        report = check_history(sends, reads, replicas=replicas)
        return RunResult(
            scheme,
            seed,
            writes=len(q.writes),
            acked=report.acked,
            lost=len(report.lost),
            unavailable_ms=unavailable_ms(timeline, duration_ms, interval_ms, deadline_ms),
            latencies=[a - s for s, a in timeline if a is not None],
            converged=ok,
        )
    finally:
        q.close()
        shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------------------------- comparison


def run_faults(scheme: Scheme, seed: int, f: int, **kw: Any) -> RunResult:
    """``scheme`` under ``fault_schedule(seed, its replicas, f)``."""
    sched = fault_schedule(seed, range(1, scheme.replicas + 1), f, kw.get("duration_ms", DURATION_MS))
    run = run_isr if scheme.kind == ISR else run_quorum
    return run(scheme, seed, sched, **kw)


def run_slow(scheme: Scheme, seed: int, slow_ms: int = SLOW_MS, duration_ms: int = SLOW_RUN_MS) -> RunResult:
    """``scheme`` with no faults and one slow follower (``slow_ms=0``: the healthy baseline)."""
    run = run_isr if scheme.kind == ISR else run_quorum
    return run(scheme, seed, None, duration_ms=duration_ms, slow_ms=slow_ms)


def percentile(values: Sequence[int], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return float(ordered[k])


@dataclass
class Row:
    """A scheme's totals over every seed at one ``f``."""

    f: int
    scheme: Scheme
    seeds: int = 0
    writes: int = 0
    acked: int = 0
    lost: int = 0
    seeds_with_loss: int = 0
    unavailable_ms: int = 0
    not_converged: list[int] = field(default_factory=list)
    healthy: list[int] = field(default_factory=list)
    slow: list[int] = field(default_factory=list)

    def add_faults(self, r: RunResult) -> None:
        self.seeds += 1
        self.writes += r.writes
        self.acked += r.acked
        self.lost += r.lost
        self.seeds_with_loss += r.lost > 0
        self.unavailable_ms += r.unavailable_ms
        if not r.converged:
            self.not_converged.append(r.seed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "f": self.f,
            "scheme": self.scheme.name,
            "kind": self.scheme.kind,
            "replicas": self.scheme.replicas,
            "min_insync": self.scheme.min_insync if self.scheme.kind == ISR else None,
            "tolerates_for_writes": self.scheme.tolerates_for_writes,
            "tolerates_without_loss": self.scheme.tolerates_without_loss,
            "seeds": self.seeds,
            "writes": self.writes,
            "acked": self.acked,
            "acked_lost": self.lost,
            "seeds_with_loss": self.seeds_with_loss,
            "unavailable_ms_per_run": self.unavailable_ms / self.seeds if self.seeds else 0.0,
            "unavailable_fraction": self.unavailable_ms / (self.seeds * DURATION_MS) if self.seeds else 0.0,
            "latency_healthy_p50_ms": percentile(self.healthy, 50) if self.healthy else None,
            "latency_healthy_p99_ms": percentile(self.healthy, 99) if self.healthy else None,
            "latency_slow_p50_ms": percentile(self.slow, 50) if self.slow else None,
            "latency_slow_p99_ms": percentile(self.slow, 99) if self.slow else None,
            "not_converged": self.not_converged,
        }


def compare(
    seeds: int,
    start: int = 0,
    fs: Sequence[int] = (1, 2),
    slow_ms: int = SLOW_MS,
    schemes: dict[int, Sequence[Scheme]] | None = None,
    latency_seeds: int = LATENCY_SEEDS,
) -> list[Row]:
    """Every scheme of each ``f`` over seeds ``start .. start+seeds-1``: a faults run per seed, and a
    healthy and a slow-follower run for the first ``latency_seeds`` of them (fault-free runs differ
    little from seed to seed)."""
    rows = []
    for f in fs:
        for scheme in (schemes or SCHEMES)[f]:
            row = Row(f, scheme)
            for seed in range(start, start + seeds):
                row.add_faults(run_faults(scheme, seed, f))
                if seed < start + latency_seeds:
                    row.healthy += run_slow(scheme, seed, 0).latencies
                    row.slow += run_slow(scheme, seed, slow_ms).latencies
            rows.append(row)
    return rows


def format_table(rows: Sequence[Row], seeds: int, start: int, slow_ms: int = SLOW_MS) -> str:
    """The comparison as plain text, with what each column means."""
    head = (
        f"{'f':>1} {'scheme':<27} {'repl':>4} {'tol w/l':>7} {'acked':>7} {'lost':>5} {'seeds':>5} "
        f"{'unavail ms/run':>14} {'p50':>5} {'p99':>5} {'slow p50':>8} {'slow p99':>8}"
    )
    lines = [
        f"ISR vs majority quorum: seeds {start}..{start + seeds - 1}, simulated time (deterministic per seed)",
        head,
        "-" * len(head),
    ]
    for row in rows:
        d = row.to_dict()
        tol = f"{d['tolerates_for_writes']}/{d['tolerates_without_loss']}"
        ms = [_ms(d[f"latency_{k}_ms"]) for k in ("healthy_p50", "healthy_p99", "slow_p50", "slow_p99")]
        lines.append(
            f"{row.f:>1} {row.scheme.name:<27} {row.scheme.replicas:>4} {tol:>7} {row.acked:>7} {row.lost:>5} "
            f"{row.seeds_with_loss:>5} {d['unavailable_ms_per_run']:>14.0f} {ms[0]:>5} {ms[1]:>5} {ms[2]:>8} {ms[3]:>8}"
            + (f"  not converged: {row.not_converged}" if row.not_converged else "")
        )
    lines += [
        "",
        "repl: replicas; tol w/l: failures tolerated while writes continue / without losing an acked write;",
        "lost: acknowledged writes missing after healing (seeds: runs with any); unavail: writes issued during",
        f"the {DURATION_MS} ms of faults (one per {INTERVAL_MS} ms) not acked within {DEADLINE_MS} ms, "
        f"x {INTERVAL_MS} ms; p50/p99: commit latency (ms)",
        f"with no faults; slow: the same with one follower {slow_ms} ms slower each way on its replica links.",
    ]
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def rows_to_dict(rows: Sequence[Row], seeds: int, start: int, slow_ms: int = SLOW_MS) -> dict[str, Any]:
    return {
        "seeds": seeds,
        "start": start,
        "simulated": True,
        "duration_ms": DURATION_MS,
        "interval_ms": INTERVAL_MS,
        "deadline_ms": DEADLINE_MS,
        "slow_ms": slow_ms,
        "rows": [r.to_dict() for r in rows],
    }


__all__ = [
    "ISR",
    "QUORUM",
    "SCHEMES",
    "Row",
    "RunResult",
    "Scheme",
    "compare",
    "fault_schedule",
    "format_table",
    "isr",
    "percentile",
    "quorum",
    "rows_to_dict",
    "run_faults",
    "run_isr",
    "run_quorum",
    "run_slow",
    "unavailable_ms",
]
