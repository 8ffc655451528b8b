"""Controller failover, ZooKeeper mode vs KRaft, as the partition count grows.

KIP-500's case for KRaft: a ZooKeeper-mode controller that takes over must first read the state of every
partition from ZooKeeper (one znode each) before it can act, and a leader election writes one znode per
partition, so failover grows with the partition count; a KRaft standby controller already holds the
metadata in memory (it replicates ``__cluster_metadata``), so it needs only a Raft election. This module
measures both modes on the same simulator, for two victims, the same way in both modes:

* ``controller``: the active controller dies (a crash). ZooKeeper mode: the controller is a broker that
  hosts no replicas (``Cluster(4)``, replicas on brokers 2..4), so only the controller role moves; KRaft:
  the active node of a three-node quorum, beside three brokers.
* ``broker``: a broker that leads a third of the partitions dies (never the controller). Every partition
  it led needs a new leader in both modes.

A run is done when the cluster has a live controller, every partition has a live leader in the source of
truth (ZooKeeper's state znodes / the active controller's committed image), and every live broker knows
both (its metadata cache / its replayed image agrees on every leader and on the controller). Reported:
``detect_ms`` (the crash until the new controller is elected, or until the dead broker's ZooKeeper
session expired / it was fenced), ``sim_ms`` (the crash until done, simulated) and ``total_ms``.

The seed matters in one place: after a KRaft controller dies, each broker (an observer of the quorum)
finds the new leader by sending Fetch to a voter picked at random, and each pick of the dead one costs
the fetch's long poll (500 ms) plus ``controller.quorum.request.timeout.ms`` (2 s) before the next. So
the KRaft controller failover ranges from ~4.5 s to over 15 s across seeds (at any partition count),
while ZooKeeper mode's brokers are told by the new controller. ``compare`` runs several seeds and
``format_table`` shows the median and the range.

What the simulator does not charge, and how it is charged here. kafkalite's ZooKeeper calls are
in-process (``ZkLink``) and take no simulated time, so ``sim_ms`` alone would show a ZooKeeper-mode
failover as free whatever the partition count. Each run therefore counts the ZooKeeper requests the
controllers issue after the crash (``ZkRequestCounter``, reads and writes apart) and charges them the way
Kafka's controller sends them: pipelined, at most ``zookeeper.max.in.flight.requests`` (Kafka's default
10) unacknowledged at a time, each a round trip over the simulator's link to ``"zk"`` (2 x
``latency_ms``). So ``zk_ms = ceil(reads / 10) * rtt + ceil(writes / 10) * rtt`` and ``total_ms = sim_ms
+ zk_ms``. That is a lower bound: it leaves out ZooKeeper's own per-request work, the controller's
per-partition CPU and the LeaderAndIsr request sizes. KRaft's ``total_ms`` is its ``sim_ms``: its
records move as batches over the simulated Raft, and the per-record cost (append, replay) is not
charged either, which is exactly where its line would bend at large sizes (see the book's KRaft chapter).

Sizes, and the metadata-only mode. A simulated replica normally has a real data log: a directory, a
segment and its indexes, checkpoints, several open files each, and its follower fetches every 500 ms.
At 1,000 partitions (3,000 replicas) that is ~10,000 file descriptors in one process and most of a
run's wall time; 10,000 partitions do not fit in this machine's 20,000 descriptors at all. Nothing is
produced in a failover run, so the data logs only ever hold nothing. ``metadata_only=True`` runs the
same clusters with ``kafkalite.replica.metadata.only``: each replica's log is a ``MetadataOnlyLog`` (no
directory, no file, offsets 0, leader epochs in memory) and followers do not fetch. Everything the
comparison measures is unchanged and real: the controllers, ZooKeeper's state znodes, LeaderAndIsr and
UpdateMetadata, KRaft's records, their replication over Raft and every broker's replay, and the
elections. What it leaves out cannot matter to these runs: with nothing produced every follower is at
its leader's log end (0), where Kafka keeps it in the ISR however long ago it fetched; the one thing a
follower's fetches could change is a dead follower's ISR membership after ``replica.lag.time.max.ms``
(30 s), so ``run`` refuses a metadata-only run that lasted that long. A test checks that both modes give
the same figures at small sizes. ``compare`` simulates sizes up to ``data_logs_up_to`` with data logs
and larger ones metadata-only, every size up to 100,000 (``kafkalite bench failover`` prints each run's
wall time; 100,000 partitions take minutes a run).

``model`` still extrapolates from two simulated calibration sizes, for the book and for sizes above
``simulate_up_to``: detection and the rest of ``sim_ms`` do not depend on the partition count (a test
checks that), and the ZooKeeper request counts are linear in it (one state znode read per partition on
failover, one state znode write per re-elected partition; a test checks that at a third size). The
larger sizes are several topics of ``TOPIC_PARTITIONS``; the two reads per extra topic (its assignment
and its config) are left out of the line: 38 reads, 8 ms, at 100,000 partitions.

Timeouts are Kafka's defaults: ``zookeeper.session.timeout.ms`` 18000, ``broker.session.timeout.ms``
9000 with a heartbeat every 2000, ``controller.quorum.election.timeout.ms`` 1000 and
``controller.quorum.fetch.timeout.ms`` 2000.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.host.cluster import Cluster
from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.protocol import TopicPartition

ZK, KRAFT = "zk", "kraft"
CONTROLLER, BROKER = "controller", "broker"
# Partitions per topic: a topic and its partitions must fit in one metadata operation (KRaft's
# 10,000-record bound, which kafkalite's ZooKeeper-mode controller applies too), so larger sizes are
# several topics of this many partitions.
TOPIC_PARTITIONS = 5_000
ZK_MAX_IN_FLIGHT_REQUESTS = 10  # Kafka's zookeeper.max.in.flight.requests default
ZK_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms default
TIMEOUT_MS = 120_000  # a run that is not done this long after the crash fails
CALIBRATE = (30, 60)  # the two simulated sizes ``model`` extrapolates from
SIMULATE_UP_TO = 100_000  # the bench simulates sizes up to this, models the larger ones
DATA_LOGS_UP_TO = 1000  # the bench gives replicas data logs up to this size, metadata-only above
METADATA_ONLY = "kafkalite.replica.metadata.only"
# A follower that stops fetching leaves the ISR this long after its last fetch (Kafka's default
# replica.lag.time.max.ms); metadata-only replicas never fetch, so a run must end before (see run()).
REPLICA_LAG_TIME_MAX_MS = BrokerConfig.coerce({}).replica_lag_time_max_ms
LATENCY_MS = 1  # one way, every link (the clusters' default); a ZooKeeper round trip is twice this


class ZkRequestCounter:
    """Stands in for a controller's ``ZkLink`` and counts the requests that pass through it."""

    READS = frozenset({"get", "get_children", "exists"})
    WRITES = frozenset({"create", "set", "delete", "multi"})

    def __init__(self, link: Any) -> None:
        self.link = link
        self.reads = 0
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.link, name)
        if name not in self.READS and name not in self.WRITES:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            if name in self.READS:
                self.reads += 1
            else:
                self.writes += 1
            return attr(*args, **kwargs)

        return counted


def zk_charge_ms(reads: int, writes: int, rtt_ms: int, in_flight: int = ZK_MAX_IN_FLIGHT_REQUESTS) -> int:
    """Time for ``reads`` then ``writes`` pipelined ``in_flight`` at a time, one round trip per window."""
    return (math.ceil(reads / in_flight) + math.ceil(writes / in_flight)) * rtt_ms


@dataclass(frozen=True)
class FailoverResult:
    """One failover: the mode, the victim, the partition count and where its figures come from."""

    mode: str
    victim: str
    partitions: int
    detect_ms: int
    sim_ms: int
    zk_reads: int = 0
    zk_writes: int = 0
    zk_ms: int = 0
    source: str = "simulated"
    seed: int = 0
    metadata_only: bool = False
    leaders: str = ""  # digest of every partition's leader when done (``_digest``); "" when modelled
    wall_s: float = field(default=0.0, compare=False)  # the run's wall time, machine-dependent

    @property
    def total_ms(self) -> int:
        return self.sim_ms + self.zk_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_ms": self.total_ms}


def _scratch() -> tempfile.TemporaryDirectory:
    """Where a run's logs go: memory (``/dev/shm``) when there is one. The runs measure simulated time,
    which fsync does not touch, and fsync on a disk was 2/3 of their wall time."""
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix="kafkalite-failover-", dir=where)


def _assignment(partitions: int, brokers: Sequence[int]) -> dict[int, list[int]]:
    """Three replicas each, leaders spread round robin over ``brokers``."""
    n = len(brokers)
    return {p: [brokers[(p + i) % n] for i in range(3)] for p in range(partitions)}


def _create(cluster: Any, partitions: int, brokers: Sequence[int]) -> list[TopicPartition]:
    """Topics ``t0``, ``t1``, .. of up to ``TOPIC_PARTITIONS`` partitions each, ``partitions`` in all."""
    tps: list[TopicPartition] = []
    for i, start in enumerate(range(0, partitions, TOPIC_PARTITIONS)):
        count = min(TOPIC_PARTITIONS, partitions - start)
        cluster.create_topic(f"t{i}", count, 3, replica_assignment=_assignment(count, brokers))
        tps += [TopicPartition(f"t{i}", p) for p in range(count)]
    return tps


def _digest(leaders: Iterable[tuple[TopicPartition, int | None]]) -> str:
    """A short fingerprint of who leads what, so runs can be compared without storing 100,000 leaders."""
    h = hashlib.sha256()
    for tp, leader in leaders:
        h.update(f"{tp.topic}/{tp.partition}={leader};".encode())
    return h.hexdigest()[:16]


def _run_phases(cluster: Any, detected: Callable[[], bool], done: Callable[[], bool]) -> tuple[int, int]:
    t0 = cluster.net.now_ms()
    if not cluster.run_until(detected, TIMEOUT_MS):
        raise RuntimeError("the failure was never detected")
    t1 = cluster.net.now_ms()
    if not cluster.run_until(done, TIMEOUT_MS):
        raise RuntimeError("not every partition has a live leader known to every broker")
    return t1 - t0, cluster.net.now_ms() - t0


def run_zk(partitions: int, victim: str, *, seed: int = 0, metadata_only: bool = False) -> FailoverResult:
    """ZooKeeper mode: four brokers, broker 1 the controller, replicas on brokers 2..4; kill ``victim``."""
    config = {"zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS, METADATA_ONLY: metadata_only}
    with _scratch() as tmp, Cluster(4, seed=seed, dir=tmp, latency_ms=LATENCY_MS, config=config) as c:
        first = c.controller()
        hosts = [b for b in sorted(c.brokers) if b != first]
        tps = _create(c, partitions, hosts)
        dead = first if victim == CONTROLLER else hosts[0]
        old_epoch = c.controller_epoch()
        counters = []
        for b, node in c.brokers.items():
            if b != dead:
                node.controller.zk = ZkRequestCounter(node.controller.zk)
                counters.append(node.controller.zk)
        c.crash(dead)

        def detected() -> bool:
            if victim == CONTROLLER:
                return c.controller() not in (None, dead) and c.controller_epoch() > old_epoch
            return c.store.exists(paths.broker_path(dead)) is None

        def done() -> bool:
            ctrl = c.controller()
            if ctrl is None or ctrl == dead:
                return False
            caches = [c.brokers[b].cache for b in c.brokers if b != dead and c.net.is_up(b)]
            if any(cache.controller_id != ctrl for cache in caches):
                return False
            # The brokers' caches first (dict lookups), ZooKeeper (a znode read and decode each) only
            # once they agree: this runs after every simulated event.
            first, others = caches[0], caches[1:]
            for tp in tps:
                leader = first.leader(tp)
                if leader < 0 or leader == dead or any(o.leader(tp) != leader for o in others):
                    return False
            return all(c.leader(*tp) == first.leader(tp) for tp in tps)

        detect_ms, sim_ms = _run_phases(c, detected, done)
        reads = sum(k.reads for k in counters)
        writes = sum(k.writes for k in counters)
        zk_ms = zk_charge_ms(reads, writes, 2 * LATENCY_MS)
        return FailoverResult(
            ZK,
            victim,
            partitions,
            detect_ms,
            sim_ms,
            reads,
            writes,
            zk_ms,
            seed=seed,
            metadata_only=metadata_only,
            leaders=_digest((tp, c.leader(*tp)) for tp in tps),
        )


def run_kraft(partitions: int, victim: str, *, seed: int = 0, metadata_only: bool = False) -> FailoverResult:
    """KRaft mode: three controllers, three brokers hosting every replica; kill ``victim``."""
    config = {METADATA_ONLY: metadata_only}
    with (
        _scratch() as tmp,
        KRaftCluster(3, 3, seed=seed, dir=tmp, latency_ms=LATENCY_MS, config=config) as k,
    ):
        hosts = sorted(k.brokers)
        tps = _create(k, partitions, hosts)
        first = k.controller()
        dead = first if victim == CONTROLLER else hosts[0]
        k.net.crash(dead)

        def detected() -> bool:
            if victim == CONTROLLER:
                return k.controller() not in (None, dead)
            act = k.active_controller()
            return act is not None and dead not in act.controller.committed.unfenced_brokers()

        def done() -> bool:
            act = k.active_controller()
            if act is None or act.node_id == dead:
                return False
            img = act.controller.committed
            leaders = {}
            for tp in tps:
                reg = img.partition(*tp)
                if reg is None or reg.leader < 0 or reg.leader == dead:
                    return False
                leaders[tp] = reg.leader
            for b, node in k.brokers.items():
                if b == dead or not k.net.is_up(b):
                    continue
                if node.controller_id() != act.node_id or node.loader is None:
                    return False
                bimg = node.loader.image
                for tp, leader in leaders.items():
                    reg = bimg.partition(*tp)
                    if reg is None or reg.leader != leader:
                        return False
            return True

        detect_ms, sim_ms = _run_phases(k, detected, done)
        img = k.active_controller().controller.committed
        return FailoverResult(
            KRAFT,
            victim,
            partitions,
            detect_ms,
            sim_ms,
            seed=seed,
            metadata_only=metadata_only,
            leaders=_digest((tp, img.partition(*tp).leader) for tp in tps),
        )


def run(
    mode: str, partitions: int, victim: str, *, seed: int = 0, metadata_only: bool = False
) -> FailoverResult:
    """Simulate one failover of ``mode`` (``zk`` or ``kraft``) with ``partitions`` partitions;
    ``metadata_only``: replicas without data logs (see the module's docstring)."""
    if victim not in (CONTROLLER, BROKER):
        raise ValueError(f"victim must be {CONTROLLER!r} or {BROKER!r}, got {victim!r}")
    if partitions < 3:
        raise ValueError(f"partitions must be at least 3 (one led by each host), got {partitions}")
    if mode not in (ZK, KRAFT):
        raise ValueError(f"mode must be {ZK!r} or {KRAFT!r}, got {mode!r}")
    started = time.perf_counter()
    r = (run_zk if mode == ZK else run_kraft)(partitions, victim, seed=seed, metadata_only=metadata_only)
    if metadata_only and r.sim_ms >= REPLICA_LAG_TIME_MAX_MS:
        # With data logs, a dead follower still in some ISR would be dropped by its leader from here
        # on; metadata-only replicas do not track fetches, so the two modes could part ways.
        raise RuntimeError(
            f"a metadata-only run must end within replica.lag.time.max.ms ({REPLICA_LAG_TIME_MAX_MS} ms) "
            f"of the crash, this one took {r.sim_ms} ms: run it with data logs"
        )
    return dataclasses.replace(r, wall_s=round(time.perf_counter() - started, 2))


def _linear(x1: int, y1: int, x2: int, y2: int, x: int) -> int:
    slope = (y2 - y1) / (x2 - x1)
    return max(0, round(y1 + slope * (x - x1)))


def model(low: FailoverResult, high: FailoverResult, partitions: int) -> FailoverResult:
    """Extrapolate to ``partitions`` from two simulated runs of one mode, victim and seed: ``sim_ms`` and
    ``detect_ms`` as at the larger calibration size, the ZooKeeper request counts on the line through
    both."""
    if (low.mode, low.victim, low.seed) != (
        high.mode,
        high.victim,
        high.seed,
    ) or low.partitions >= high.partitions:
        raise ValueError("model needs two runs of one mode, victim and seed, the second at more partitions")
    reads = _linear(low.partitions, low.zk_reads, high.partitions, high.zk_reads, partitions)
    writes = _linear(low.partitions, low.zk_writes, high.partitions, high.zk_writes, partitions)
    zk_ms = zk_charge_ms(reads, writes, 2 * LATENCY_MS) if high.mode == ZK else 0
    return FailoverResult(
        high.mode,
        high.victim,
        partitions,
        high.detect_ms,
        high.sim_ms,
        reads,
        writes,
        zk_ms,
        "model",
        high.seed,
    )


def compare(
    sizes: Iterable[int],
    victims: Sequence[str] = (CONTROLLER, BROKER),
    *,
    simulate_up_to: int = SIMULATE_UP_TO,
    data_logs_up_to: int = DATA_LOGS_UP_TO,
    calibrate: tuple[int, int] = CALIBRATE,
    seeds: Iterable[int] = (0,),
    on_run: Callable[[FailoverResult], None] | None = None,
) -> list[FailoverResult]:
    """Both modes, each victim, size and seed: simulated up to ``simulate_up_to`` partitions (with data
    logs up to ``data_logs_up_to``, metadata-only above), modelled above from that seed's two calibration
    runs. ``on_run`` sees each simulated size's result as it comes (the bench prints its wall time)."""
    out: list[FailoverResult] = []
    sizes = sorted(set(sizes))
    for victim in victims:
        for mode in (ZK, KRAFT):
            for seed in seeds:
                cal: tuple[FailoverResult, FailoverResult] | None = None
                for n in sizes:
                    if n <= simulate_up_to:
                        r = run(mode, n, victim, seed=seed, metadata_only=n > data_logs_up_to)
                        if on_run is not None:
                            on_run(r)
                        out.append(r)
                        continue
                    if cal is None:
                        cal = (
                            run(mode, calibrate[0], victim, seed=seed),
                            run(mode, calibrate[1], victim, seed=seed),
                        )
                    out.append(model(*cal, n))
    return out


def _spread(values: Sequence[int]) -> str:
    """The median, and the range when the seeds disagree."""
    mid = sorted(values)[len(values) // 2]
    lo, hi = min(values), max(values)
    return f"{mid:,}" if lo == hi else f"{mid:,} ({lo:,}-{hi:,})"


def _source(r: FailoverResult) -> str:
    return "simulated, metadata-only" if r.metadata_only else r.source


def format_table(rows: Sequence[FailoverResult], calibrate: tuple[int, int] = CALIBRATE) -> str:
    """One line per victim and size: ZooKeeper-mode ms vs KRaft ms (median over the seeds, with the
    range when they differ), the ZooKeeper requests charged, and where the figures come from."""
    groups: dict[tuple[str, int, str], list[FailoverResult]] = {}
    for r in rows:
        groups.setdefault((r.victim, r.partitions, r.mode), []).append(r)
    keys = sorted({(r.victim, r.partitions) for r in rows}, key=lambda k: (k[0] != CONTROLLER, k[1]))
    seeds = sorted({r.seed for r in rows})
    table = [
        (
            "victim",
            "partitions",
            "zk ms",
            "zk detect ms",
            "zk I/O ms",
            "zk reqs r/w",
            "kraft ms",
            "kraft detect ms",
            "source",
        )
    ]
    for victim, n in keys:
        z, k = groups.get((victim, n, ZK)), groups.get((victim, n, KRAFT))
        if not z or not k:
            continue
        table.append(
            (
                victim,
                f"{n:,}",
                _spread([r.total_ms for r in z]),
                _spread([r.detect_ms for r in z]),
                _spread([r.zk_ms for r in z]),
                f"{z[0].zk_reads:,}/{z[0].zk_writes:,}",
                _spread([r.total_ms for r in k]),
                _spread([r.detect_ms for r in k]),
                _source(z[0]),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        "time until every partition has a live leader known to every broker, after a crash "
        f"(simulated ms, median of seeds {seeds[0]}..{seeds[-1]}, range in brackets)",
        *(
            "  ".join(
                c.ljust(w) if i in (0, 8) else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in table
        ),
        f"zk I/O: ZooKeeper requests pipelined {ZK_MAX_IN_FLIGHT_REQUESTS} in flight, one simulated "
        "round trip per window; metadata-only: replicas without data logs or fetches (nothing is "
        "produced); model: extrapolated from each seed's simulated runs at "
        f"{calibrate[0]} and {calibrate[1]} partitions",
    ]
    return "\n".join(line.rstrip() for line in lines)


def to_json(rows: Sequence[FailoverResult]) -> str:
    return json.dumps([r.to_dict() for r in rows], indent=2)


def from_json(text: str) -> list[FailoverResult]:
    return [FailoverResult(**{k: v for k, v in d.items() if k != "total_ms"}) for d in json.loads(text)]
