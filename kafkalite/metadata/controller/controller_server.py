"""``ControllerServer``: a controller node on the simulator, a ``RaftNode`` voter whose state machine is
a ``QuorumController``.

Raft traffic goes to the Raft client; the brokers' controller requests (a ``RequestEnvelope`` holding a
BrokerRegistration, BrokerHeartbeat, AlterPartition or AllocateProducerIds request, or an admin request a
broker forwards: CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs, CreateAcls,
DeleteAcls, AlterUserScramCredentials, ElectLeaders, Alter- and ListPartitionReassignments) go to the
controller, which answers with a ``ResponseEnvelope`` once its records are committed;
a forwarded DescribeQuorum is answered at once by the Raft client.
A crash loses the controller with the process; a restart replays the log into a new one. Each start
checks the log dir's ``meta.properties`` first (``kafkalite storage format``) and reads the records its
``bootstrap.checkpoint`` holds for the first active controller to write (``--add-scram``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kafkalite.errors import NotLeaderOrFollowerError
from kafkalite.metadata.bootstrap import read_bootstrap
from kafkalite.metadata.controller.controller_metrics import ControllerMetrics
from kafkalite.metadata.controller.quorum_controller import (
    CONTROLLER_REQUESTS,
    ControllerSettings,
    QuorumController,
)
from kafkalite.metadata.controller.replication_control import ReplicaPlacer
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.snapshot_generator import SnapshotGenerator
from kafkalite.net.deadline_timer import DeadlineTimer
from kafkalite.protocol.envelope import RequestEnvelope
from kafkalite.protocol.raft import (
    DescribeQuorumPartitionResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from kafkalite.raft import EpochState, QuorumConfig, RaftNode
from kafkalite.raft.kafka_raft_client import METADATA_TP
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.storage.meta_properties import verify_dirs

_TICK = "controller"


def _not_leader() -> DescribeQuorumResponse:
    part = DescribeQuorumPartitionResponse(tp=METADATA_TP, error_code=NotLeaderOrFollowerError.code)
    return DescribeQuorumResponse(partitions=(part,))


class ControllerServer(RaftNode):
    def __init__(
        self,
        config: QuorumConfig,
        log_dir: str | Path,
        settings: ControllerSettings,
        placer: ReplicaPlacer,
        *,
        on_transition: Callable[[int, EpochState], None] | None = None,
        on_image: Callable[[int, MetadataImage], None] | None = None,
        log_config: MetadataLogConfig | None = None,
    ) -> None:
        super().__init__(
            config,
            log_dir,
            make_listener=self._new_controller,
            on_transition=self._transition,
            log_config=log_config,
        )
        self.settings = settings
        self.placer = placer
        self.user_transition = on_transition
        self.on_image = on_image
        """Called with (node id, committed image) after each committed batch: for checkers."""
        self.controller: QuorumController | None = None
        self.metrics: ControllerMetrics | None = None  # this incarnation's (None while down)
        self._tick = DeadlineTimer(self.set_timer, self.cancel_timer, _TICK)

    def _new_controller(self) -> QuorumController:
        rng = random.Random(f"controller/{self.node_id}/{self.net.now_ms()}/{self.rng.random()}")
        self.controller = QuorumController(self.node_id, self.settings, self.placer, rng)
        if self.on_image is not None:
            self.controller.on_commit = lambda image, hook=self.on_image: hook(self.node_id, image)
        self.controller.snapshot_generator = SnapshotGenerator(
            self.log_config or MetadataLogConfig(), self._emit_snapshot, self.net.now_ms
        )
        return self.controller

    def _emit_snapshot(self, snapshot_id: Any, records: Any, last_contained_timestamp: int) -> bool:
        c = self.client
        return c is not None and c.create_snapshot(
            snapshot_id, records, last_contained_timestamp, self.now_ms()
        )

    def _start(self, now_ms: int) -> None:
        # A process start: refuse a log dir that is unformatted or formatted for another cluster or node.
        verify_dirs([self.log_dir], self.node_id, cluster_id=self.settings.cluster_id, require_formatted=True)
        boot = tuple(read_bootstrap(self.log_dir))
        if boot:
            self.settings = replace(self.settings, bootstrap_records=boot)
        super()._start(now_ms)
        self.metrics = ControllerMetrics(self.now_ms, lambda: self.controller)
        assert self.controller is not None and self.client is not None
        self.controller.attach(self.client)
        self._drive(now_ms)

    def _transition(self, node: int, state: EpochState) -> None:
        if self.controller is not None:
            self.controller.on_transition(state)
        if self.user_transition is not None:
            self.user_transition(node, state)

    # ------------------------------------------------------------------------------ simulator
    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, RequestEnvelope):
            if isinstance(msg.request, DescribeQuorumRequest):
                # a broker forwards it (kafka-metadata-quorum --bootstrap-server); only the leader answers
                # it with the quorum, the others with NOT_LEADER_OR_FOLLOWER, so the broker tries again
                c = self.client
                self.send(src, msg.reply(c.describe_quorum(msg.request) if c is not None else _not_leader()))
            elif self.controller is not None and isinstance(msg.request, CONTROLLER_REQUESTS):
                self.controller.handle_request(
                    msg.request, now_ms, lambda resp, src=src, env=msg: self.send(src, env.reply(resp))
                )
        else:
            super().on_message(src, msg, now_ms)
        self._drive(now_ms)

    def on_timer(self, token: Any, now_ms: int) -> None:
        if token == _TICK:
            self._tick.fired()
        else:
            super().on_timer(token, now_ms)
        self._drive(now_ms)

    def on_crash(self) -> None:
        super().on_crash()
        self.controller = None
        self.metrics = None
        self._tick.forget()  # the timers died with the node

    def _drive(self, now_ms: int) -> None:
        c = self.controller
        if c is None:
            return
        c.poll(now_ms)
        # Activation waits on the high watermark, which moves only while the Raft client handles a message
        # or a poll, and each of those ends here: no extra timer is needed for it.
        self._tick.arm(c.next_deadline_ms(), now_ms)
