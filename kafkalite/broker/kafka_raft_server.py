"""``KafkaRaftServer``: a combined KRaft node, ``process.roles=broker,controller``, on the simulator.

As Kafka's ``KafkaRaftServer`` in combined mode, one node runs a ``BrokerServer`` and a controller that
share one node id and one Raft client over one ``__cluster_metadata`` log (``metadata.log.dir``): the node
is a voter of the quorum, its ``QuorumController`` writes the metadata records while its Raft state is the
leader's, and its broker replays the same committed log it replicates (Kafka's ``SharedServer``: one log,
one metadata loader, one snapshot generator). A crash takes both roles down; a restart brings both back.

The simulator gives a node one address, where Kafka gives the controller a listener of its own (named in
``controller.listener.names``, never advertised to clients). The two are told apart by the request: the
ones only a controller serves (BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds)
and the admin requests a broker's ``ForwardingManager`` forwards go to the controller; a client's admin
request goes to the broker, which forwards it to the active controller, possibly itself.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafkalite.broker.broker_server import BrokerServer
from kafkalite.broker.forwarding_manager import FORWARDED, FORWARDING_CLIENT_SUFFIX
from kafkalite.metadata.bootstrap import read_bootstrap
from kafkalite.metadata.controller.controller_metrics import quorum_controller_gauges
from kafkalite.metadata.controller.quorum_controller import (
    CONTROLLER_REQUESTS,
    ControllerSettings,
    QuorumController,
)
from kafkalite.metadata.controller.replication_control import ReplicaPlacer
from kafkalite.net.deadline_timer import DeadlineTimer
from kafkalite.protocol.envelope import RequestEnvelope
from kafkalite.raft.epoch_state import EpochState
from kafkalite.raft.metadata_log import Batch
from kafkalite.raft.snapshot import SnapshotReader

PROCESS_ROLES = ("broker", "controller")


class _SharedListener:
    """Hands each committed batch and loaded snapshot of the one Raft client to the controller first (its
    waiting requests complete), then to the broker's loader."""

    def __init__(self, *listeners: Any) -> None:
        self.listeners = listeners

    def handle_commit(self, batch: Batch) -> None:
        for listener in self.listeners:
            listener.handle_commit(batch)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        for listener in self.listeners:
            listener.handle_load_snapshot(reader)


class KafkaRaftServer(BrokerServer):
    """A broker that is also a voter running the quorum controller; ``quorum_controller`` is None while
    the node is down. ``settings`` and ``placer`` are the controller's, as ``ControllerServer`` takes them."""

    process_roles = PROCESS_ROLES

    def __init__(
        self,
        node_id: int,
        log_dir: Any,
        config: Any = None,
        *,
        settings: ControllerSettings,
        placer: ReplicaPlacer,
        on_transition: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(node_id, log_dir, config, **kwargs)
        if node_id not in self.quorum_config.voters:
            raise ValueError(f"a combined node is a voter: {node_id} is not in {self.quorum_config.voters}")
        self.settings = settings
        self.placer = placer
        self.user_transition = on_transition
        self.quorum_controller: QuorumController | None = None
        self._ctl_timer = DeadlineTimer(self.set_timer, self.cancel_timer, self._controller_tick)

    # ------------------------------------------------------------------------------ life cycle
    def _metadata_listener(self) -> Any:
        # As ControllerServer's start: the bootstrap records (--add-scram) come from the metadata log dir.
        boot = tuple(read_bootstrap(self.metadata_log_dir))
        if boot:
            self.settings = replace(self.settings, bootstrap_records=boot)
        rng = self.net.node_rng(f"{self.node_id!r}/controller/{self.net.now_ms()}")
        # No snapshot generator of its own: the loader's snapshots the one shared log.
        self.quorum_controller = QuorumController(self.broker_id, self.settings, self.placer, rng)
        assert self.loader is not None
        return _SharedListener(self.quorum_controller, self.loader)

    def _raft_transition(self, node: int, state: EpochState) -> None:
        if self.quorum_controller is not None:
            self.quorum_controller.on_transition(state)
        if self.user_transition is not None:
            self.user_transition(node, state)

    def startup(self) -> None:
        super().startup()
        assert self.quorum_controller is not None and self.raft is not None and self.metrics is not None
        self.quorum_controller.attach(self.raft)
        quorum_controller_gauges(self.metrics.registry, lambda: self.quorum_controller)
        self._drive(self.now_ms())

    def shutdown(self) -> None:
        """Clean shutdown of both roles: a Raft leader first resigns (EndQuorumEpoch), so the other voters
        elect a successor at once instead of after the fetch timeout, as Kafka's client does."""
        if self.raft is not None:
            self.raft.resign(self.now_ms())
        if self.quorum_controller is not None and self.quorum_controller.is_active:
            self.quorum_controller.renounce()  # its waiting requests get NOT_CONTROLLER and go elsewhere
        self._drop_controller()
        super().shutdown()

    def on_crash(self) -> None:
        self._drop_controller()  # a dead process answers nothing: its waiting requests time out
        super().on_crash()

    def _drop_controller(self) -> None:
        self.quorum_controller = None
        if self.net.is_up(self.node_id):
            self._ctl_timer.cancel()
        else:
            self._ctl_timer.forget()

    # ------------------------------------------------------------------------------- messages
    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, RequestEnvelope) and _for_controller(msg):
            if self.quorum_controller is not None:
                self.quorum_controller.handle_request(
                    msg.request, now_ms, lambda resp, src=src, env=msg: self.send(src, env.reply(resp))
                )
        else:
            super().on_message(src, msg, now_ms)
        self._drive(now_ms)

    def _raft_poll(self, now_ms: int) -> None:
        super()._raft_poll(now_ms)
        self._drive(now_ms)

    def _drive(self, now_ms: int) -> None:
        """Poll the controller (activation, its deadlines) and keep one timer at its next deadline."""
        c = self.quorum_controller
        if c is None:
            return
        c.poll(now_ms)
        self._ctl_timer.arm(c.next_deadline_ms(), now_ms)

    def _controller_tick(self, now_ms: int) -> None:
        self._ctl_timer.fired()
        self._drive(now_ms)


def _for_controller(env: RequestEnvelope) -> bool:
    """A request for the controller's listener: one only controllers serve, or one a broker forwards."""
    if not isinstance(env.request, CONTROLLER_REQUESTS):
        return False
    return not isinstance(env.request, FORWARDED) or env.client_id.endswith(FORWARDING_CLIENT_SUFFIX)


__all__ = ["PROCESS_ROLES", "KafkaRaftServer"]
