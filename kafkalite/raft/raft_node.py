"""``RaftNode``: a ``KafkaRaftClient`` on the simulator, one process with a log directory of its own.

A crash loses the process and whatever the disk never got (``Log.crash(lose_unflushed=True)``); a restart
is a new process: a new client over the same directory, reading ``quorum-state`` and the log back, and a
new state machine (from ``make_listener``) that replays the log as the high watermark comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalite.net.sim import BaseNode
from kafkalite.raft.epoch_state import NEVER, EpochState
from kafkalite.raft.kafka_raft_client import KafkaRaftClient, RaftListener
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.raft.quorum_config import QuorumConfig


class RaftNode(BaseNode):
    """A quorum member on ``SimNetwork``; ``client`` is None while it is down."""

    def __init__(
        self,
        config: QuorumConfig,
        log_dir: str | Path,
        *,
        make_listener: Callable[[], RaftListener] | None = None,
        on_transition: Callable[[int, EpochState], None] | None = None,
        log_config: MetadataLogConfig | None = None,
    ) -> None:
        self.config = config
        self.log_config = log_config
        self.log_dir = Path(log_dir)
        self.make_listener = make_listener
        self.on_transition = on_transition
        self.client: KafkaRaftClient | None = None
        self.listener: RaftListener | None = None
        self._timer: int | None = None
        self._timer_at = NEVER

    def bind(self, net, node_id) -> None:
        super().bind(net, node_id)
        self.rng = net.node_rng(node_id)
        self._start(net.now_ms())

    def _start(self, now_ms: int) -> None:
        self.listener = self.make_listener() if self.make_listener else None
        self.client = KafkaRaftClient(
            self.node_id,
            self.config,
            self.log_dir,
            self,
            self.rng,
            self.net.clock,
            listener=self.listener,
            on_transition=self.on_transition,
            log_config=self.log_config,
        )
        self.client.start(now_ms)

    # ------------------------------------------------------------------------- NetworkChannel
    def wakeup_at(self, time_ms: int) -> None:
        if time_ms == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self.cancel_timer(self._timer)
            self._timer = None
        self._timer_at = time_ms
        if time_ms < NEVER:
            self._timer = self.set_timer(max(0, time_ms - self.now_ms()), "poll")

    # ------------------------------------------------------------------------------ simulator
    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if self.client is not None:
            self.client.handle(src, msg, now_ms)

    def on_timer(self, token: Any, now_ms: int) -> None:
        self._timer = None
        self._timer_at = NEVER
        if self.client is not None:
            self.client.poll(now_ms)

    def on_crash(self) -> None:
        if self.client is not None:
            self.client.crash()
        self.client = None
        self.listener = None
        self._timer = None
        self._timer_at = NEVER

    def on_restart(self, now_ms: int) -> None:
        self._start(now_ms)
