"""The group-membership half of a consumer's group client: Kafka's ``AbstractCoordinator``.

It finds the group coordinator (FindCoordinator to any broker), runs the join/sync state machine
(JoinGroup, then SyncGroup; ``MemberState``), heartbeats every ``heartbeat.interval.ms``, watches the
session (no heartbeat answer for ``session.timeout.ms``: the coordinator is presumed gone) and the
``max.poll.interval.ms`` deadline (the application stopped polling: leave the group), and leaves
(LeaveGroup). What the members agree on is not its business: ``ConsumerCoordinator`` (the subclass)
gives the join metadata, computes the assignment as the leader, decodes what SyncGroup returns and does
the offset commits. The module docstring of ``consumer_coordinator`` tells the whole story.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.api import CoordinatorType
from kafkalite.protocol.group import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from kafkalite.client.consumer import Consumer

__all__ = ["AbstractCoordinator", "MemberState"]

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000  # Kafka's AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE

_NONE = 0
_UNKNOWN_MEMBER = UnknownMemberIdError.code
_ILLEGAL_GENERATION = IllegalGenerationError.code
_REBALANCING = RebalanceInProgressError.code
_FENCED = FencedInstanceIdError.code
_MEMBER_ID_REQUIRED = MemberIdRequiredError.code
_LOADING = CoordinatorLoadInProgressError.code
_COORDINATOR_GONE = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})


class MemberState(Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


class AbstractCoordinator:
    """Membership of one group: coordinator discovery, join/sync, heartbeats, leaving.

    A subclass supplies ``PROTOCOL_TYPE`` and the hooks ``_metadata`` (the JoinGroup protocols),
    ``_on_leader_elected`` / ``_perform_assignment`` (the leader's SyncGroup), ``_decode_assignment`` (what
    SyncGroup returned: an object with ``partitions``, kept in ``_pending_assignment`` until the application
    takes it), ``_wants_coordinator`` and ``_background_work`` (what else runs once a coordinator is known).
    """

    PROTOCOL_TYPE = ""

    def __init__(self, consumer: Consumer) -> None:
        cfg = consumer.config
        assert cfg.group_id is not None
        self.c = consumer
        self.group_id: str = cfg.group_id
        self.group_instance_id = cfg.group_instance_id
        # membership
        self.coordinator: int | None = None
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.member_id = UNKNOWN_MEMBER_ID
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.subscribed = False  # the member takes part in group management (subscribe mode)
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self._prepared = False  # on_join_prepare ran: JoinGroup/SyncGroup may go out
        self._join_inflight = False
        self._sync_inflight = False
        self._join_retry_at = 0
        self._pending_assignment: Any = None  # SyncGroup's answer, until the application takes it
        self._leader_wait: tuple[JoinGroupResponse, int] | None = None  # waiting for metadata
        # coordinator discovery
        self._find_inflight = False
        self._find_retry_at = 0
        # heartbeats
        self._hb_inflight = False
        self._next_hb = 0
        self._last_hb_recv = 0
        self._last_poll = 0
        self.fatal: Exception | None = None
        self._leave_answered = True

    # =============================================================================== hooks
    def _metadata(self) -> tuple[JoinGroupProtocol, ...]:
        raise NotImplementedError

    def _on_leader_elected(self, resp: JoinGroupResponse, now: int) -> None:
        raise NotImplementedError

    def _perform_assignment(self, resp: JoinGroupResponse, now: int) -> None:
        raise NotImplementedError

    def _decode_assignment(self, data: bytes | None) -> Any:
        """SyncGroup's assignment bytes, decoded; raises ``ValueError`` when they do not parse."""
        raise NotImplementedError

    def _wants_coordinator(self) -> bool:
        return self.subscribed

    def _background_work(self, node: int, now: int, wake: list[int]) -> None:
        """Called by ``run`` after the heartbeat while coordinator ``node`` is known."""

    # =============================================================================== small helpers
    @property
    def cfg(self) -> Any:
        return self.c.config

    def _now(self) -> int:
        return self.c.net._now

    def _log(self, event: str, **fields: Any) -> None:
        self.c.log(event, group=self.group_id, **fields)

    def _metric(self, key: str, n: int = 1) -> None:
        m = self.c._metrics
        m[key] = m.get(key, 0) + n

    def stable_generation(self) -> int | None:
        return self.generation if self.state is MemberState.STABLE else None

    def rebalance_in_progress(self) -> bool:
        return self._prepared or self.state in (
            MemberState.PREPARING_REBALANCE,
            MemberState.COMPLETING_REBALANCE,
        )

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            self.rejoin_needed = True
            self.rejoin_reason = reason
            self._log("consumer_rebalance_requested", member=self.member_id, reason=reason)

    def mark_coordinator_unknown(self, why: str) -> None:
        if self.coordinator is None:
            return
        old, self.coordinator = self.coordinator, None
        self._log("consumer_coordinator_lost", broker=old, reason=why)
        self.c._fail_group_requests(old)

    def _reset_generation(self, why: str, reset_member_id: bool) -> None:
        self._log("consumer_generation_reset", member=self.member_id, generation=self.generation, reason=why)
        self.generation = NO_GENERATION
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        self._prepared = False  # run on_join_prepare again: it reports the partitions as lost
        self._pending_assignment = None
        self._leader_wait = None
        self.rejoin_needed = True
        self.rejoin_reason = why

    # ------------------------------------------------------------------------ LeaveGroup
    def maybe_leave_group(self, reason: str) -> bool:
        """LeaveGroup for a dynamic member that is in the group; a static member only forgets its
        generation (KIP-345: its instance id keeps its place until the session times out). True if sent."""
        sent = False
        if (
            self.group_instance_id is None
            and self.coordinator is not None
            and self.state is not MemberState.UNJOINED
            and self.member_id != UNKNOWN_MEMBER_ID
        ):
            req = LeaveGroupRequest(
                group_id=self.group_id, members=(MemberIdentity(member_id=self.member_id, reason=reason),)
            )
            sent = self.c._send_group(
                self.coordinator, req, self._now(), self._on_leave, self.cfg.request_timeout_ms
            )
            self._log("consumer_left", member=self.member_id, generation=self.generation, reason=reason)
        self._reset_generation(f"left the group: {reason}", reset_member_id=True)
        self._leave_answered = not sent
        return sent

    def _on_leave(self, resp: Any, now: int) -> None:
        self._leave_answered = True

    # =============================================================================== background
    def run(self, now: int, wake: list[int]) -> None:
        """Everything the heartbeat thread and the network callbacks do; called from the consumer's loop."""
        if self.fatal is not None:
            return
        if self.coordinator is None:
            if self._wants_coordinator():
                self._find_coordinator(now, wake)
            return
        node = self.coordinator
        joining = self._join_inflight or self._sync_inflight or self._leader_wait
        if self._prepared and not joining and self._pending_assignment is None:
            if now >= self._join_retry_at:
                self._send_join(node, now)
            else:
                wake.append(self._join_retry_at)
        if self._leader_wait is not None:
            resp, version = self._leader_wait
            if self.c.metadata.version > version and not self.c.metadata.need_update:
                self._leader_wait = None
                self._perform_assignment(resp, now)
        self._heartbeat(node, now, wake)
        if self.coordinator is None:
            return
        self._background_work(node, now, wake)

    # ------------------------------------------------------------------------ FindCoordinator
    def _find_target(self, now: int) -> int | None:
        """The broker to ask: Kafka picks the least loaded node; the first one not backing off here."""
        nodes = list(self.c.metadata.nodes())
        rng = self.c._rng
        start = rng.randrange(len(nodes)) if rng is not None else 0
        for node in nodes[start:] + nodes[:start]:
            if self.c._node_backoff.get(node, 0) <= now:
                return node
        return None

    def _find_coordinator(self, now: int, wake: list[int]) -> None:
        if self._find_inflight:
            return
        if now < self._find_retry_at:
            wake.append(self._find_retry_at)
            return
        node = self._find_target(now)
        if node is None:
            self._find_retry_at = now + self.cfg.retry_backoff_ms
            wake.append(self._find_retry_at)
            return
        req = FindCoordinatorRequest(key=self.group_id, key_type=CoordinatorType.GROUP)
        if self.c._send_group(node, req, now, self._on_find, self.cfg.request_timeout_ms):
            self._find_inflight = True
        else:
            self._find_retry_at = now + self.cfg.retry_backoff_ms
            wake.append(self._find_retry_at)

    def _on_find(self, resp: Any, now: int) -> None:
        self._find_inflight = False
        if isinstance(resp, FindCoordinatorResponse) and resp.error_code == _NONE and resp.node_id >= 0:
            self.coordinator = resp.node_id
            self.c._node_backoff.pop(resp.node_id, None)
            self._log("consumer_coordinator", broker=resp.node_id, member=self.member_id)
            # The client-side session clock restarts with a new coordinator (Kafka resets it too).
            self._last_hb_recv = now
            return
        code = getattr(resp, "error_code", None)
        self._find_retry_at = now + self.cfg.retry_backoff_ms
        self._log("consumer_coordinator_not_found", error=code)

    # ------------------------------------------------------------------------ JoinGroup / SyncGroup
    def _send_join(self, node: int, now: int) -> None:
        req = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.cfg.session_timeout_ms,
            rebalance_timeout_ms=self.cfg.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self.PROTOCOL_TYPE,
            protocols=self._metadata(),
            reason=self.rejoin_reason,
        )
        timeout = max(
            self.cfg.request_timeout_ms, self.cfg.max_poll_interval_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS
        )
        if self.c._send_group(node, req, now, self._on_join, timeout):
            self._join_inflight = True
            self.state = MemberState.PREPARING_REBALANCE
        else:
            self._join_retry_at = now + self.cfg.retry_backoff_ms

    def _on_join(self, resp: Any, now: int) -> None:
        self._join_inflight = False
        if resp is None:
            self.mark_coordinator_unknown("JoinGroup got no answer")
            return
        assert isinstance(resp, JoinGroupResponse)
        code = resp.error_code
        if self.state is not MemberState.PREPARING_REBALANCE:
            return  # left the group (poll timeout, close) while the join waited
        if code == _NONE:
            if resp.protocol_type not in (None, self.PROTOCOL_TYPE):
                self._fail(
                    error_for_code(23)(f"protocol type {resp.protocol_type!r} is not {self.PROTOCOL_TYPE!r}")
                )  # type: ignore[misc]
                return
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol_name = resp.protocol_name
            self.leader_id = resp.leader
            self.state = MemberState.COMPLETING_REBALANCE
            self._metric("join-total")
            self._log("consumer_joined", member=self.member_id, generation=self.generation,
                      leader=resp.leader == self.member_id, assignor=resp.protocol_name,
                      members=len(resp.members))  # fmt: skip
            # Heartbeats may go while the sync is under way; the session clock starts now.
            self._last_hb_recv = now
            self._next_hb = now + self.cfg.heartbeat_interval_ms
            if resp.leader == self.member_id:
                self._on_leader_elected(resp, now)  # sends the SyncGroup, now or once metadata is fresh
            else:
                self._send_sync(now, ())
            return
        self.state = MemberState.UNJOINED
        if code == _MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            self._join_retry_at = 0
        elif code == _UNKNOWN_MEMBER:
            self.member_id = UNKNOWN_MEMBER_ID
            self.generation = NO_GENERATION
            self._join_retry_at = 0
        elif code in (_LOADING, _REBALANCING):
            self._join_retry_at = now + self.cfg.retry_backoff_ms
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"JoinGroup: {_err_name(code)}")
        else:
            self._fail(_error(code, f"JoinGroup for group {self.group_id} failed"))
        self.c._kick()

    def _send_sync(self, now: int, assignments: tuple[SyncGroupAssignment, ...]) -> None:
        if self.coordinator is None:
            self.state = MemberState.UNJOINED
            return
        req = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self.PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        if self.c._send_group(self.coordinator, req, now, self._on_sync, self.cfg.request_timeout_ms):
            self._sync_inflight = True
        else:
            self.state = MemberState.UNJOINED
            self._join_retry_at = now + self.cfg.retry_backoff_ms

    def _on_sync(self, resp: Any, now: int) -> None:
        self._sync_inflight = False
        if self.state is not MemberState.COMPLETING_REBALANCE:
            return
        if resp is None:
            self.state = MemberState.UNJOINED
            self.mark_coordinator_unknown("SyncGroup got no answer")
            return
        assert isinstance(resp, SyncGroupResponse)
        code = resp.error_code
        if code == _NONE:
            try:
                assignment = self._decode_assignment(resp.assignment)
            except ValueError as e:
                self._fail(KafkaError(f"undecodable assignment: {e}"))
                return
            self.state = MemberState.STABLE
            self._pending_assignment = assignment
            self._last_hb_recv = now
            self._next_hb = now + self.cfg.heartbeat_interval_ms
            self._log("consumer_synced", member=self.member_id, generation=self.generation,
                      partitions=_names(assignment.partitions))  # fmt: skip
            return
        self.state = MemberState.UNJOINED
        if code == _REBALANCING:
            self._join_retry_at = 0  # rejoin at once, same generation (still prepared)
        elif code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            self._reset_generation(f"SyncGroup: {_err_name(code)}", reset_member_id=code == _UNKNOWN_MEMBER)
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"SyncGroup: {_err_name(code)}")
        else:
            self._fail(_error(code, f"SyncGroup for group {self.group_id} failed"))
        self.c._kick()

    # ------------------------------------------------------------------------ heartbeats
    def _heartbeat(self, node: int, now: int, wake: list[int]) -> None:
        if self.state not in (MemberState.STABLE, MemberState.COMPLETING_REBALANCE):
            return
        cfg = self.cfg
        if self.c._polling:
            self._last_poll = now  # a poll blocked in the network counts as polling (Kafka's poll loop)
        if now - self._last_poll > cfg.max_poll_interval_ms and self.subscribed:
            self._log("consumer_poll_timeout", member=self.member_id, generation=self.generation,
                      last_poll_ms=self._last_poll, max_poll_interval_ms=cfg.max_poll_interval_ms)  # fmt: skip
            self.maybe_leave_group(
                "consumer poll timeout has expired: the time between poll() calls exceeded max.poll.interval.ms"
            )
            return
        if now - self._last_hb_recv > cfg.session_timeout_ms:
            self.mark_coordinator_unknown("no heartbeat answer within session.timeout.ms")
            return
        wake.append(self._last_poll + cfg.max_poll_interval_ms + 1)
        wake.append(self._last_hb_recv + cfg.session_timeout_ms + 1)
        if self._hb_inflight:
            return
        if now >= self._next_hb:
            req = HeartbeatRequest(
                group_id=self.group_id,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.group_instance_id,
            )
            gen, mid = self.generation, self.member_id
            if self.c._send_group(node, req, now, lambda r, t: self._on_heartbeat(r, t, gen, mid),
                                  cfg.request_timeout_ms):  # fmt: skip
                self._hb_inflight = True
                self._metric("heartbeat-total")
            self._next_hb = now + cfg.heartbeat_interval_ms
        wake.append(self._next_hb)

    def _on_heartbeat(self, resp: Any, now: int, gen: int, mid: str) -> None:
        self._hb_inflight = False
        if resp is None:
            self.mark_coordinator_unknown("heartbeat got no answer")
            return
        code = resp.error_code
        unchanged = gen == self.generation and mid == self.member_id
        if code == _NONE:
            self._last_hb_recv = now
        elif code == _REBALANCING:
            self._last_hb_recv = now
            if self.state is MemberState.STABLE and unchanged and not self._prepared:
                self.request_rejoin("group is rebalancing (heartbeat answered REBALANCE_IN_PROGRESS)")
        elif code in (_ILLEGAL_GENERATION, _UNKNOWN_MEMBER):
            if unchanged:
                self._reset_generation(
                    f"heartbeat: {_err_name(code)}", reset_member_id=code == _UNKNOWN_MEMBER
                )
        elif code == _FENCED:
            if unchanged:
                self._fail(FencedInstanceIdError(f"group.instance.id {self.group_instance_id} was fenced by "
                                                 "a newer member with the same instance id"))  # fmt: skip
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"heartbeat: {_err_name(code)}")
        else:
            self._fail(_error(code, "heartbeat failed"))
        self.c._kick()

    def _fail(self, err: Exception) -> None:
        self._log("consumer_fatal", member=self.member_id, error=repr(err))
        self.fatal = err


def _names(tps: Iterable[TopicPartition]) -> list[str]:
    return sorted(str(tp) for tp in tps)


def _err_name(code: int) -> str:
    cls = error_for_code(code)
    return cls.name if cls is not None and cls is not KafkaError else str(code)


def _error(code: int, what: str) -> KafkaError:
    cls = error_for_code(code) or KafkaError
    return cls(what)
