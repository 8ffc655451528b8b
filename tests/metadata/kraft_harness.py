"""A KRaft metadata quorum on the simulator: three ControllerServers and observer brokers that register,
heartbeat and replay the log, plus the checker of the safety rules over what every node replayed."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from kafkalite.metadata.broker_lifecycle_manager import BrokerLifecycleManager
from kafkalite.metadata.controller import ControllerSettings
from kafkalite.metadata.controller.controller_server import ControllerServer
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.metadata_loader import MetadataLoader
from kafkalite.metadata.placement import assign_replicas
from kafkalite.metadata.snapshot_generator import SnapshotGenerator
from kafkalite.net.sim import SimNetwork
from kafkalite.protocol.broker_lifecycle import Listener
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope
from kafkalite.raft import Batch, LeaderState, QuorumConfig, RaftNode
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.storage.meta_properties import format_dirs
from tests.raft.harness import FAST, scratch_dir

CONTROLLERS = (1, 2, 3)
CLUSTER_ID = "J8qXRwI-Qyi2G0guFTiuYw"
HEARTBEAT_MS = 200
SESSION_MS = 900
# Snapshot every ~2 KiB of committed metadata, and keep only the latest snapshot and the log after it
# (retention 0), with 4 KiB segments so the segments a snapshot covers are deleted: a run of a few
# seconds snapshots, truncates and sends lagging nodes to FetchSnapshot several times.
SMALL_SNAPSHOTS = MetadataLogConfig(
    max_record_bytes_between_snapshots=2048, retention_bytes=0, segment_bytes=4096, segment_min_bytes=1024
)
SNAPSHOT_CHUNK = 512


@dataclass
class Checker:
    """What every node replayed, and the rules it broke."""

    leaders: dict[int, set[int]] = field(default_factory=dict)
    committed: dict[int, bytes | None] = field(default_factory=dict)
    images: dict[int, MetadataImage] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    snapshots_loaded: int = 0

    def on_transition(self, node: int, state: Any) -> None:
        if isinstance(state, LeaderState):
            got = self.leaders.setdefault(state.epoch, set())
            got.add(node)
            if len(got) > 1:
                self.violations.append(f"two leaders in epoch {state.epoch}: {sorted(got)}")

    def on_batch(self, node: int, batch: Batch) -> None:
        for i, value in enumerate(batch.records):
            off = batch.base_offset + i
            if self.committed.setdefault(off, value) != value:
                self.violations.append(f"node {node}: committed record at offset {off} differs")

    def on_image(self, node: int, image: MetadataImage) -> None:
        first = self.images.setdefault(image.offset, image)
        if first is image:
            self.violations += [f"offset {image.offset}: {v}" for v in image_invariants(image)]
        elif first != image:
            self.violations.append(f"node {node}: image at offset {image.offset} differs from another node's")


def image_invariants(image: MetadataImage) -> list[str]:
    """Kafka's rules for a committed image: an ISR is never empty, a leader is in its ISR and unfenced,
    and a fenced broker is in no ISR but one it is the last member of (then leaderless). With KIP-966's
    ELR on, an ISR may empty (the partition is then leaderless) and the ELR is disjoint from the ISR;
    with it off, the ELR fields stay empty."""
    out = []
    elr_on = image.features.get("eligible.leader.replicas.version", 0) >= 1
    for t in image.topics.values():
        for p, part in t.partitions.items():
            if not part.isr and not (elr_on and part.leader == -1):
                out.append(f"{t.name}-{p}: empty ISR")
            if set(part.elr) & set(part.isr) or not set(part.elr) <= set(part.replicas):
                out.append(f"{t.name}-{p}: ELR {part.elr} overlaps the ISR or leaves the replicas")
            if not elr_on and (part.elr or part.last_known_elr):
                out.append(f"{t.name}-{p}: ELR fields set with the feature off ({part})")
            if part.leader != -1:
                reg = image.brokers.get(part.leader)
                if part.leader not in part.isr or reg is None or reg.fenced:
                    out.append(f"{t.name}-{p}: leader {part.leader} is not an unfenced ISR member ({part})")
            for r in part.isr:
                reg = image.brokers.get(r)
                if reg is not None and reg.fenced and (len(part.isr) > 1 or part.leader != -1):
                    out.append(f"{t.name}-{p}: fenced broker {r} in the ISR {part.isr}")
    return out


class _Checked:
    """Wraps a RaftListener so the checker sees each batch and the image after it."""

    def __init__(self, node: int, inner: Any, image_of: Any, checker: Checker) -> None:
        self.node, self.inner, self.image_of, self.checker = node, inner, image_of, checker

    def handle_commit(self, batch: Batch) -> None:
        self.checker.on_batch(self.node, batch)
        self.inner.handle_commit(batch)
        self.checker.on_image(self.node, self.image_of())

    def handle_load_snapshot(self, reader: Any) -> None:
        # The image a snapshot rebuilds must equal the image every node replayed at its offset.
        self.checker.snapshots_loaded += 1
        self.inner.handle_load_snapshot(reader)
        self.checker.on_image(self.node, self.image_of())


class CheckedController(ControllerServer):
    def __init__(self, *a: Any, checker: Checker, **k: Any) -> None:
        super().__init__(*a, **k)
        self.checker = checker
        self.make_listener = self._checked

    def _checked(self) -> Any:
        ctl = self._new_controller()
        return _Checked(self.node_id, ctl, lambda: ctl.committed, self.checker)


class ObserverBroker(RaftNode):
    """A broker's metadata side only: an observer of the quorum, registered and heartbeating."""

    def __init__(
        self,
        config: QuorumConfig,
        log_dir: str,
        checker: Checker,
        log_config: MetadataLogConfig | None = None,
    ) -> None:
        super().__init__(config, log_dir, make_listener=self._new_loader, log_config=log_config)
        self.checker = checker
        self.loader: MetadataLoader | None = None
        self.lifecycle: BrokerLifecycleManager | None = None

    def _new_loader(self) -> Any:
        self.loader = loader = MetadataLoader()
        loader.snapshot_generator = SnapshotGenerator(
            self.log_config or MetadataLogConfig(),
            lambda sid, records, ts: self.client.create_snapshot(sid, records, ts, self.now_ms()),
            self.net.now_ms,
        )
        return _Checked(self.node_id, loader, lambda: loader.image, self.checker)

    def _start(self, now_ms: int) -> None:
        super()._start(now_ms)
        client = self.client
        self.lifecycle = BrokerLifecycleManager(
            self.node_id,
            CLUSTER_ID,
            (Listener(name="PLAINTEXT", host=f"b{self.node_id}", port=9092),),
            rng=self.net.node_rng(f"{self.node_id}/incarnation/{now_ms}"),
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            controllers=lambda: (client.quorum.leader_id, self.config.voters),
            metadata_offset=lambda: self.loader.image.offset,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        self.lifecycle.start()

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, ResponseEnvelope):
            if self.lifecycle is not None:
                self.lifecycle.on_response(src, msg)
            return
        super().on_message(src, msg, now_ms)

    def on_crash(self) -> None:
        super().on_crash()
        self.lifecycle = None


class Client:
    """Sends controller requests from the simulated network (node ``"admin"``) and keeps the answers."""

    def __init__(self, net: SimNetwork) -> None:
        self.net = net
        self.answers: dict[int, Any] = {}
        self._cid = 0
        net.add_node("admin", self)

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, ResponseEnvelope):
            self.answers[msg.correlation_id] = msg.response

    def send(self, dst: int, req: Any) -> int:
        self._cid += 1
        self.net.send("admin", dst, RequestEnvelope(self._cid, "admin", req))
        return self._cid


class KRaftQuorum:
    def __init__(
        self,
        seed: int,
        brokers: tuple[int, ...] = (101, 102, 103),
        root: str | None = None,
        log_config: MetadataLogConfig | None = None,
        settings: dict[str, Any] | None = None,
        **raft,
    ) -> None:
        self.root = root or scratch_dir()
        self.net = SimNetwork(seed=seed, latency_ms=1, jitter_ms=3, log_messages="none")
        self.checker = Checker()
        cfg = QuorumConfig(voters=CONTROLLERS, **{**FAST, **raft})
        settings = ControllerSettings(CLUSTER_ID, broker_session_timeout_ms=SESSION_MS, **(settings or {}))
        for n in CONTROLLERS:
            format_dirs([os.path.join(self.root, f"controller-{n}")], CLUSTER_ID, n, ignore_formatted=True)
        self.controllers = {
            n: self.net.add_node(
                n,
                CheckedController(
                    cfg,
                    os.path.join(self.root, f"controller-{n}"),
                    settings,
                    assign_replicas,
                    on_transition=self.checker.on_transition,
                    checker=self.checker,
                    log_config=log_config,
                ),
            )
            for n in CONTROLLERS
        }
        self.brokers = {
            b: self.net.add_node(
                b, ObserverBroker(cfg, os.path.join(self.root, f"broker-{b}"), self.checker, log_config)
            )
            for b in brokers
        }
        self.client = Client(self.net)

    def active(self) -> ControllerServer | None:
        live = [c for c in self.controllers.values() if c.controller is not None and c.controller.is_active]
        return max(live, key=lambda c: c.controller.active_epoch) if live else None

    def request(self, req: Any, timeout_ms: int = 5000) -> Any:
        """Send ``req`` to the active controller, retrying elsewhere until an answer without
        NOT_CONTROLLER comes."""
        deadline = self.net.now_ms() + timeout_ms
        while self.net.now_ms() < deadline:
            if not self.net.run_until(lambda: self.active() is not None, deadline - self.net.now_ms()):
                break
            cid = self.client.send(self.active().node_id, req)
            self.net.run_until(lambda cid=cid: cid in self.client.answers, 1000)
            resp = self.client.answers.get(cid)
            if resp is not None and _error(resp) != 41:
                return resp
        raise AssertionError(f"no answer to {req!r} within {timeout_ms} ms")

    def image(self) -> MetadataImage:
        act = self.active()
        assert act is not None
        return act.controller.committed

    def close(self) -> None:
        for n in [*self.controllers.values(), *self.brokers.values()]:
            if n.client is not None:
                n.client.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _error(resp: Any) -> int:
    code = getattr(resp, "error_code", 0)
    if code:
        return code
    for t in getattr(resp, "topics", ()):
        if t.error_code:
            return t.error_code
    return 0


def run_schedule(
    seed: int,
    *,
    duration_ms: int = 4000,
    liveness_ms: int = 8000,
    log_config: MetadataLogConfig | None = SMALL_SNAPSHOTS,
) -> tuple[KRaftQuorum, list[str]]:
    """One seeded run: controllers and brokers crash (losing their page cache), pause and are cut off
    while an admin creates topics and leaders shrink ISRs, and every node snapshots its image and drops
    the log it covers (``log_config``); then everything heals. Returns the quorum and the rules broken
    (safety during the run, a snapshot's image equal to the replayed one at its offset; after it, an
    active controller, every broker unfenced and replaying the same image as the controller)."""
    import random

    from kafkalite.net.sim import FaultSchedule
    from kafkalite.protocol.controller import AlterPartitionItem, AlterPartitionRequest
    from kafkalite.protocol.metadata import CreatableTopic, CreateTopicsRequest
    from kafkalite.protocol.topic_partition import TopicPartition

    q = KRaftQuorum(seed, log_config=log_config, fetch_snapshot_max_bytes=SNAPSHOT_CHUNK)
    net, rng = q.net, random.Random(f"kraft-faults/{seed}")
    nodes = [*CONTROLLERS, *q.brokers]
    FaultSchedule.random(
        seed,
        nodes,
        duration_ms,
        max_crashed=1,
        max_paused=1,
        max_cuts=2,
        gap_ms=(100, 600),
        fault_ms=(100, 1500),
    ).apply(net)

    def create(i: int) -> None:
        act = q.active()
        if act is not None:
            t = CreatableTopic(
                name=f"t{i}", num_partitions=rng.randint(1, 3), replication_factor=rng.randint(1, 3)
            )
            q.client.send(act.node_id, CreateTopicsRequest(topics=(t,)))

    def shrink() -> None:
        act = q.active()
        if act is None:
            return
        img = act.controller.image
        parts = [
            (t.name, p, part)
            for t in img.topics.values()
            for p, part in t.partitions.items()
            if len(part.isr) > 1
        ]
        if not parts:
            return
        name, p, part = rng.choice(sorted(parts, key=lambda x: (x[0], x[1])))
        isr = tuple(r for r in part.isr if r == part.leader or rng.random() < 0.5)
        item = AlterPartitionItem(
            tp=TopicPartition(name, p),
            leader_epoch=part.leader_epoch,
            new_isr=isr,
            partition_epoch=part.partition_epoch,
        )
        q.client.send(act.node_id, AlterPartitionRequest(broker_id=part.leader, partitions=(item,)))

    for i, t in enumerate(range(200, duration_ms, 300)):
        net.at(t, lambda i=i: create(i))
        net.at(t + 150, shrink)
    try:
        net.run_for(duration_ms)
        net.heal_all()
        for n in nodes:
            net.restart(n)
            net.resume(n)
        problems = list(q.checker.violations)

        def settled() -> bool:
            act = q.active()
            if act is None:
                return False
            img = act.controller.committed
            return img.unfenced_brokers() == sorted(q.brokers) and all(
                b.loader is not None and b.loader.image.offset == img.offset for b in q.brokers.values()
            )

        if not net.run_until(settled, liveness_ms):
            problems.append(f"not settled within {liveness_ms} ms after healing (active: {q.active()})")
        else:
            img = q.active().controller.committed
            for b in q.brokers.values():
                if b.loader.image != img:
                    problems.append(
                        f"broker {b.node_id}'s image differs from the controller's at {img.offset}"
                    )
        problems += [v for v in q.checker.violations if v not in problems]
        return q, problems
    except Exception as e:  # noqa: BLE001 - report it with the seed
        import traceback

        return q, [*q.checker.violations, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"]


class ManualTimers:
    """set_timer / cancel_timer over a hand-moved clock; ``sent`` collects what a test's send puts there."""

    def __init__(self) -> None:
        self.now, self.due, self.sent, self._id = 0, {}, [], 0

    def set(self, delay: int, fn) -> int:
        self._id += 1
        self.due[self._id] = (self.now + delay, fn)
        return self._id

    def cancel(self, tid: int) -> None:
        self.due.pop(tid, None)

    def advance(self, ms: int) -> None:
        end = self.now + ms
        while True:
            ready = sorted((t, i) for i, (t, _) in self.due.items() if t <= end)
            if not ready:
                break
            t, i = ready[0]
            self.now = t
            _, fn = self.due.pop(i)
            fn(t)
        self.now = end
