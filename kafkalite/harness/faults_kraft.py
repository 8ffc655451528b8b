"""Seeded fault runs on a KRaft cluster: the ``faults`` run with controllers instead of ZooKeeper.

``run_kraft_schedule(seed)`` builds a ``KRaftCluster`` (3 controllers, 3 brokers), a steady acks=all
producer and one random schedule over both kinds of node, then checks the history (no acknowledged
record lost, none changed) and the metadata (``MetadataChecker``: one Raft leader per epoch, every
node's image equal at each offset, every broker on the controller's image once healed). The envelope is the ZooKeeper run's (see ``faults``): at most one broker and
one controller crashed, one node paused, one link cut at a time. A broker crash loses its unflushed bytes
only when no other fault touching a broker is open and every partition has its full ISR at that instant, and until that
broker is back in every ISR no other fault starts. Otherwise Kafka loses acked data too: seed 297 had a
broker lose its tail while another was paused and a third cut from the controller; both intact replicas
were fenced while the crashed broker's old session still looked alive, which left it the last ISR member
(the gap KIP-966's eligible leader replicas close). A controller crash always loses its page cache: the
metadata log is fsynced on every append, so there is nothing to lose, which is what the run checks.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import dataclass, field
from typing import Any

from kafkalite.harness.checker import check_history
from kafkalite.harness.faults import (
    PRODUCER_CONFIG,
    TOPIC,
    FaultRunResult,
    _bind,
    _maybe_written_ids,
    converged,
)
from kafkalite.host.kraft_cluster import CONTROLLER_BASE, KRaftCluster
from kafkalite.metadata.image import MetadataImage
from kafkalite.net.sim import Fault, FaultSchedule
from kafkalite.raft import LeaderState
from kafkalite.raft.metadata_log import MetadataLogConfig

# Short timeouts so a few seconds of virtual time hold several failovers (Kafka's: 2 s / 9 s heartbeat
# and session, 1 s / 2 s election and fetch timeouts).
BROKER_CONFIG: dict[str, Any] = {
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
    "controller.socket.timeout.ms": 3000,
    "replica.socket.timeout.ms": 3000,
    "auto.leader.rebalance.enable": False,
}
QUORUM: dict[str, Any] = {
    "election_timeout_ms": 300,
    "fetch_timeout_ms": 600,
    "election_backoff_max_ms": 300,
    "request_timeout_ms": 500,
    "fetch_max_wait_ms": 100,
}
HEARTBEAT_MS = 200
SESSION_MS = 1500


def build_kraft_schedule(
    seed: int,
    brokers: int,
    controllers: int,
    duration_ms: int,
    kinds: tuple[str, ...],
    combined: bool = False,
) -> FaultSchedule:
    """Crashes/pauses over brokers, crashes over controllers, cuts over every link, merged. ``combined``:
    the controllers are brokers ``1..controllers``, so a controller crash takes a broker down too."""
    bids = list(range(1, brokers + 1))
    cids = [(0 if combined else CONTROLLER_BASE) + i for i in range(1, controllers + 1)]
    faults: list[Fault] = []
    node_kinds = tuple(k for k in kinds if k in ("crash", "pause"))
    if node_kinds:
        faults += FaultSchedule.random(seed, bids, duration_ms, kinds=node_kinds).faults
    if "crash" in kinds:
        faults += FaultSchedule.random(seed * 31 + 7, cids, duration_ms, kinds=("crash",)).faults
    if "cut" in kinds:
        nodes = sorted({*bids, *cids})
        faults += FaultSchedule.random(seed * 7919 + 1, nodes, duration_ms, kinds=("cut",)).faults
    faults.sort(key=lambda f: f.time_ms)
    return FaultSchedule(tuple(faults), seed)


def _in_sync(c: KRaftCluster, partitions: int) -> bool:
    for p in range(partitions):
        reps = c.replicas(TOPIC, p)
        if len(c.isr(TOPIC, p)) != len(reps):
            return False
        hw = c.high_watermark(TOPIC, p)
        leos = c.log_end_offsets(TOPIC, p)
        if hw is None or len(leos) != len(reps) or min(leos.values()) < hw:
            return False
    return True


@dataclass
class MetadataChecker:
    """Raft's and KRaft's safety rules over every node of a run: at most one leader per epoch, and every
    node's image after the batch ending at an offset equal to every other node's there."""

    leaders: dict[int, set[int]] = field(default_factory=dict)
    images: dict[int, MetadataImage] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def on_transition(self, node: int, state: Any) -> None:
        if isinstance(state, LeaderState):
            got = self.leaders.setdefault(state.epoch, set())
            got.add(node)
            if len(got) > 1:
                self.violations.append(f"two leaders in epoch {state.epoch}: {sorted(got)}")

    def on_image(self, node: int, image: MetadataImage) -> None:
        first = self.images.setdefault(image.offset, image)
        if first != image:
            self.violations.append(
                f"node {node}: the image at offset {image.offset} differs from another node's"
            )


@dataclass
class KRaftFaultRunResult(FaultRunResult):
    metadata_violations: list[str] = field(default_factory=list)
    epochs: int = 0
    snapshot_loads: int = 0
    """Metadata snapshots the live nodes' Raft clients loaded (KIP-630), at start or after FetchSnapshot."""

    @property
    def ok(self) -> bool:
        return super().ok and not self.metadata_violations


def _nodes(key: tuple) -> tuple:
    who = key[1]
    return tuple(who) if isinstance(who, frozenset) else (who,)


def run_kraft_schedule(
    seed: int,
    *,
    brokers: int = 3,
    controllers: int = 3,
    partitions: int = 3,
    records: int = 80,
    duration_ms: int = 3000,
    kinds: tuple[str, ...] = ("crash", "pause", "cut"),
    min_insync: int = 2,
    lose_unflushed: float = 1.0,
    converge_ms: int = 60_000,
    log_config: MetadataLogConfig | None = None,
    combined: bool = False,
) -> KRaftFaultRunResult:
    """One seeded run; see the module docstring for what the schedule may do. ``log_config``: the
    metadata log's snapshot and retention settings (a small threshold snapshots under the faults).
    ``combined``: Kafka's combined mode, the controllers on brokers ``1..controllers``; a crash of one of
    those is a broker crash as well, so at most one of them is down at a time."""
    # tmpfs when there is one: every metadata append is fsynced, and a run makes hundreds.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    tmp = tempfile.TemporaryDirectory(prefix="kafkalite-kraft-faults-", dir=shm)
    checker = MetadataChecker()
    c = KRaftCluster(
        dir=tmp.name,
        on_transition=checker.on_transition,
        on_image=checker.on_image,
        brokers=brokers,
        controllers=controllers,
        seed=seed,
        config=BROKER_CONFIG,
        quorum=QUORUM,
        heartbeat_interval_ms=HEARTBEAT_MS,
        session_timeout_ms=SESSION_MS,
        log_config=log_config,
        combined=combined,
    )
    try:
        c.create_topic(TOPIC, partitions, min(3, brokers), config={"min.insync.replicas": min_insync})
        producer = c.producer("producer-1", config={**PRODUCER_CONFIG, "acks": "all"})
        sched = build_kraft_schedule(seed, brokers, controllers, duration_ms, kinds, combined)
        coin = random.Random(seed ^ 0x5EED)
        start = c.net.now_ms()
        lossy_crashes: list[int] = []
        notes: list[str] = []
        down: set[Any] = set()

        state: dict[str, Any] = {"lossy": None}  # the broker that lost its tail, until it has caught up
        skipped: set[tuple] = set()  # starts left out while a lossy crash is unresolved; their ends too
        active: set[tuple] = set()  # faults started and not ended yet
        start_of = {"restart": "crash", "resume": "pause", "heal": "cut"}

        def key(action: str, args: tuple) -> tuple:
            return (action, frozenset(args[:2]) if action in ("cut", "heal") else args[0])

        def act(f: Fault, lucky: bool) -> None:
            if f.action in start_of:
                k = key(start_of[f.action], f.args)
                if k in skipped:
                    skipped.discard(k)
                    return
                active.discard(k)
                if f.action == "restart":
                    if f.args[0] not in down:
                        return
                    down.discard(f.args[0])
                getattr(c.net, f.action)(*f.args)
                return
            lossy = state["lossy"]
            if (
                lossy is not None
                and c.net.is_up(lossy)
                and c.brokers[lossy].registered
                and _in_sync(c, partitions)
            ):
                state["lossy"] = lossy = None
            if lossy is not None:
                # A second fault now could leave the broker that lost its tail the only ISR member.
                skipped.add(key(f.action, f.args))
                notes.append(f"{c.net.now_ms() - start:>8} ms  skipped {f.action} {f.args}")
                return
            if f.action != "crash":
                active.add(key(f.action, f.args))
                getattr(c.net, f.action)(*f.args)
                return
            node = f.args[0]
            is_broker = node in c.brokers
            if any((n in c.brokers) == is_broker for n in down):
                skipped.add(key("crash", f.args))
                notes.append(f"{c.net.now_ms() - start:>8} ms  skipped crash {node}")
                return  # one broker and one controller down at a time at most
            down.add(node)
            # Faults that touch a broker: those can take the intact replicas out of the ISR. A controller
            # crash or a cut between controllers cannot (another controller carries on).
            others = {k for k in active if any(n in c.brokers for n in _nodes(k))}
            active.add(key("crash", f.args))
            if is_broker:
                lose = lucky and not others and _in_sync(c, partitions)
                if lose:
                    lossy_crashes.append(node)
                    state["lossy"] = node
                notes.append(f"{c.net.now_ms() - start:>8} ms  crash broker {node} lose_unflushed={lose}")
                c.crash(node, lose_unflushed=lose)
            else:
                notes.append(f"{c.net.now_ms() - start:>8} ms  crash controller {node}")
                c.net.crash(node)

        for f in sched:
            lucky = f.action == "crash" and coin.random() < lose_unflushed
            c.net.at(start + f.time_ms, _bind(act, f, lucky))
        step = max(1, duration_ms // max(1, records))
        for i in range(records):
            producer.send(TOPIC, f"r{i}".encode(), key=str(i).encode())
            c.run_for(step)
        c.run_for(max(0, start + duration_ms - c.net.now_ms()) + 1)
        c.net.heal_all()
        for n in sorted({*c.controllers, *c.brokers}):
            if c.net.is_paused(n):
                c.net.resume(n)
            if not c.net.is_up(n):
                c.net.restart(n)
        producer.flush()

        def settled() -> bool:
            # the data converged, and every broker replays exactly the controller's committed image
            if not converged(c, producer, partitions):  # type: ignore[arg-type]
                return False
            images = c.broker_images()
            return len(images) == brokers and all(i == c.image() for i in images.values())

        ok = c.run_until(settled, converge_ms)
        reads = {(TOPIC, p): recs for p, recs in c.read_all(TOPIC).items()}
        replicas = {(TOPIC, p): c.replica_logs(TOPIC, p) for p in range(partitions)}
        hws = {(TOPIC, p): hw for p in range(partitions) if (hw := c.high_watermark(TOPIC, p)) is not None}
        report = check_history(producer.history, reads, replicas=replicas, high_watermarks=hws)
        # a combined node's one Raft client is both its controller's and its broker's: count it once
        rafts = [*(x.client for x in c.controllers.values()), *(b.raft for b in c.brokers.values())]
        unique = {id(r): r for r in rafts if r is not None}
        return KRaftFaultRunResult(
            metadata_violations=list(checker.violations),
            epochs=len(checker.leaders),
            snapshot_loads=sum(r.stats.snapshots_loaded for r in unique.values()),
            seed=seed,
            report=report,
            schedule="\n".join([str(sched), *notes]),
            counts=report.counts,
            converged=ok,
            virtual_ms=c.net.now_ms(),
            events=c.net.stats.events,
            sends=report.sends,
            acked=report.acked,
            lossy_crashes=lossy_crashes,
            retried=_maybe_written_ids(producer),
            idempotent=producer.config.idempotence,
        )
    finally:
        c.close()
        tmp.cleanup()


__all__ = ["KRaftFaultRunResult", "MetadataChecker", "build_kraft_schedule", "run_kraft_schedule"]
