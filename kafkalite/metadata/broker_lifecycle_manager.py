"""``BrokerLifecycleManager``: a KRaft broker's registration and heartbeats (KIP-631), as Kafka's.

The broker registers with a new incarnation id each time its process starts, then heartbeats every
``broker.heartbeat.interval.ms`` with the metadata offset it has replayed; the controller unfences it once
that offset reaches its registration, and fences it when heartbeats stop for ``broker.session.timeout.ms``.
Requests go to the active controller (the metadata quorum's leader, which the broker knows as an
observer) or, when it knows none or the one it asked said NOT_CONTROLLER or did not answer, to the next
voter in turn. A controller that failed so is not asked again, and one that answered is kept, until the
quorum names another leader: after the active controller dies the broker's observer may name the dead
one for seconds, and going back to it for every other heartbeat let the session on the new controller
run out.

With JBOD (KIP-858) the registration names the broker's log dirs (their ``meta.properties``
directory.id) and every heartbeat the dirs that failed since the process started; a dir failing sends a
heartbeat at once, so the controller moves the leaderships of the partitions in it without waiting. A
dir no heartbeat answer acknowledged within ``log.dir.failure.timeout.ms`` is fatal (``on_fatal``): the
broker halts rather than keep leaders the controller believes are healthy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kafkalite.errors import NotControllerError, StaleBrokerEpochError
from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope

RETRY_BACKOFF_MS = 100
FENCED_HEARTBEAT_MS = 50
"""A fenced broker heartbeats this often, so it is unfenced soon after it catches up."""


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        listeners: Sequence[Listener],
        *,
        rng: Any,
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], Any]], int],
        cancel_timer: Callable[[int], Any],
        controllers: Callable[[], tuple[int | None, Sequence[int]]],
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int = 2000,
        rack: str | None = None,
        log: Callable[..., Any] | None = None,
        log_dirs: Callable[[], Sequence[uuid.UUID]] = tuple,
        offline_dirs: Callable[[], Sequence[uuid.UUID]] = tuple,
        dir_failure_timeout_ms: int = 30_000,
        on_fatal: Callable[[str], Any] | None = None,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listeners = tuple(listeners)
        self.rack = rack
        self.incarnation_id = uuid.UUID(int=rng.getrandbits(128))
        self._send, self._set_timer, self._cancel_timer = send, set_timer, cancel_timer
        self._controllers = controllers
        self._metadata_offset = metadata_offset
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._log = log or (lambda *a, **k: None)
        self._log_dirs, self._offline_dirs = log_dirs, offline_dirs
        """The broker's online log dir ids (registered) and failed ones (sent in every heartbeat)."""
        self._dirs_changed = False
        """A dir failed after the heartbeat in flight was sent: send another as soon as it is answered."""
        self.dir_failure_timeout_ms = dir_failure_timeout_ms
        self._on_fatal = on_fatal
        self.acked_offline_dirs: set[uuid.UUID] = set()
        """Failed dirs a heartbeat answer acknowledged (the controller has acted on them)."""
        self._dir_timers: dict[uuid.UUID, int] = {}
        self.broker_epoch = -1
        self.previous_broker_epoch = previous_broker_epoch
        """The epoch this broker had when it last shut down cleanly, -1 after a crash (KIP-966)."""
        self.fenced = True
        self._shutdown_done: Callable[[], Any] | None = None
        """Set while a controlled shutdown waits for the controller's go (heartbeats say want_shut_down)."""
        self._cid = 0
        self._inflight: tuple[int, Any] | None = None
        self._sent: Any = None
        self._timer: int | None = None
        self._rotate = 0
        self._last_dst: int | None = None
        self._failed: set[int] = set()
        """Controllers that failed us (no answer, NOT_CONTROLLER) since the quorum last named a leader."""
        self._answered: int | None = None
        """The controller that last answered as the active one: asked again while the leader is the same."""
        self._named: int | None = None
        """The last leader the quorum named: ``_failed`` and ``_answered`` were reset when it was."""

    # ------------------------------------------------------------------------------------ driving
    def start(self) -> None:
        self._schedule(0)

    def begin_controlled_shutdown(self, on_done: Callable[[], Any]) -> None:
        """Heartbeat with want_shut_down until the controller, having moved every leadership off this
        broker, answers should_shut_down; then ``on_done``. An unregistered broker is done at once."""
        if self.broker_epoch < 0:
            on_done()
            return
        self._shutdown_done = on_done
        self._schedule(0)

    def heartbeat_now(self) -> None:
        """A log dir failed: tell the controller now (Kafka's ``propagateDirectoryFailure``); a broker
        not registered yet sends it with its first heartbeat."""
        self._dirs_changed = True
        for d in self._offline_dirs():
            if d not in self._dir_timers:
                self._dir_timers[d] = self._set_timer(
                    self.dir_failure_timeout_ms, lambda _now, d=d: self._dir_deadline(d)
                )
        if self.broker_epoch >= 0 and self._inflight is None:
            self._schedule(0)

    def _dir_deadline(self, dir: uuid.UUID) -> None:
        if dir in self.acked_offline_dirs or self._on_fatal is None:
            return
        self._log("log_dir_failure_unacknowledged", broker=self.broker_id, dir=str(dir))
        self._on_fatal(f"Shutting down because couldn't communicate offline log dir {dir} with controllers")

    def stop(self) -> None:
        if self._timer is not None:
            self._cancel_timer(self._timer)
        self._timer = None
        for t in self._dir_timers.values():
            self._cancel_timer(t)
        self._dir_timers.clear()
        self._inflight = None

    def _schedule(self, delay_ms: int) -> None:
        if self._timer is not None:
            self._cancel_timer(self._timer)
        self._timer = self._set_timer(delay_ms, self._communicate)

    def _controller(self) -> int:
        leader, voters = self._controllers()
        if leader is None or leader < 0:
            leader = None
        # A newly named leader outweighs what we learnt by asking. Naming none is no news: an observer
        # whose leader went quiet names none until it finds the next one.
        if leader is not None and leader != self._named:
            self._named, self._failed, self._answered = leader, set(), None
        if self._answered is not None:
            return self._answered
        if leader is not None and leader not in self._failed:
            return leader
        others = [v for v in voters if v not in self._failed]
        if not others:  # every voter failed once: go round them all again
            self._failed.clear()
            others = list(voters)
        self._rotate += 1
        return others[self._rotate % len(others)]

    def _failed_by(self, dst: Any) -> None:
        self._failed.add(dst)
        if self._answered == dst:
            self._answered = None

    def _communicate(self, _now: int) -> None:
        self._timer = None
        if self._inflight is not None:  # the last request went unanswered
            self._failed_by(self._last_dst)
        dst = self._controller()
        if self.broker_epoch < 0:
            req: Any = BrokerRegistrationRequest(
                broker_id=self.broker_id,
                cluster_id=self.cluster_id,
                incarnation_id=self.incarnation_id,
                listeners=self.listeners,
                rack=self.rack,
                log_dirs=tuple(sorted(self._log_dirs())),
                previous_broker_epoch=self.previous_broker_epoch,
            )
        else:
            self._dirs_changed = False
            req = BrokerHeartbeatRequest(
                broker_id=self.broker_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self._metadata_offset(),
                want_shut_down=self._shutdown_done is not None,
                offline_log_dirs=tuple(sorted(self._offline_dirs())),
            )
        self._cid += 1
        self._inflight = (self._cid, req)
        self._sent = req
        self._last_dst = dst
        self._send(dst, RequestEnvelope(self._cid, f"broker-{self.broker_id}", req))
        # No answer within the interval: ask again (the next time, another controller).
        self._schedule(max(self.heartbeat_interval_ms, RETRY_BACKOFF_MS))

    def on_response(self, src: Any, env: ResponseEnvelope) -> bool:
        """An answer to a registration or heartbeat; False if it is not one of ours."""
        resp = env.response
        if not isinstance(resp, BrokerRegistrationResponse | BrokerHeartbeatResponse):
            return False
        if self._inflight is None or self._inflight[0] != env.correlation_id:
            return True  # an answer to a request given up on
        self._inflight = None
        if resp.error_code != NO_ERROR:
            if resp.error_code == StaleBrokerEpochError.code:
                self.broker_epoch = -1  # the controller lost our registration: register again
            if resp.error_code == NotControllerError.code:
                self._failed_by(src)
            else:  # the active controller itself refused: the next request goes to it again
                self._answered = src
            self._schedule(RETRY_BACKOFF_MS)
            return True
        self._answered = src
        if isinstance(resp, BrokerHeartbeatResponse) and isinstance(self._sent, BrokerHeartbeatRequest):
            self.acked_offline_dirs.update(self._sent.offline_log_dirs)
        if isinstance(resp, BrokerRegistrationResponse):
            self.broker_epoch = resp.broker_epoch
            self._log("broker_registered", broker=self.broker_id, broker_epoch=self.broker_epoch)
            self._schedule(0)
        else:
            if self.fenced != resp.is_fenced:
                self._log("broker_fenced" if resp.is_fenced else "broker_unfenced", broker=self.broker_id)
            self.fenced = resp.is_fenced
            done = self._shutdown_done
            if done is not None and resp.should_shut_down:
                self._shutdown_done = None
                self._log("controlled_shutdown_done", broker=self.broker_id)
                self.stop()
                done()
                return True
            waiting = self.fenced or done is not None
            if self._dirs_changed:
                self._schedule(0)
            else:
                self._schedule(FENCED_HEARTBEAT_MS if waiting else self.heartbeat_interval_ms)
        return True


__all__ = ["BrokerLifecycleManager"]
