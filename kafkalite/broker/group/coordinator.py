"""The group coordinator's membership state machine: Kafka's classic group protocol, sans-I/O.

One ``GroupCoordinator`` holds every group a broker coordinates. Handlers take a request and a
``respond(response)`` callable; JoinGroup and SyncGroup may answer later (they are delayed operations, as in
Kafka's join purgatory), the others answer before returning. Time comes from ``clock``, waiting from
``set_timer(delay_ms, callback) -> id`` / ``cancel_timer(id)``; nothing here sleeps or reads the wall clock.

States (Kafka's ``GroupMetadata``): ``Empty`` -> ``PreparingRebalance`` (members (re)join; the join completes
when every known member has rejoined or the rebalance timeout passes, and those that did not rejoin are
removed) -> ``CompletingRebalance`` (a new generation: the leader got every member's subscription and computes
the assignment) -> ``Stable`` (the leader's SyncGroup handed each member its share). A join of a new member, a
leave, a session expiry or a changed subscription sends the group back to ``PreparingRebalance``.
``Dead`` is a group this coordinator no longer owns (``unload_group``).

Offsets are the ``offset_manager``'s (manager.py, Kafka's ``OffsetMetadataManager``): the coordinator checks
an OffsetCommit, TxnOffsetCommit or OffsetFetch against the group (member, generation, state) and hands it
over. With a ``store`` (the broker's ``GroupMetadataManager``) offsets are written to ``__consumer_offsets``
first and applied and answered once the append is acknowledged; the leader's assignment is written before
SyncGroup answers and the group turns Stable; a group that becomes Empty is written too. Without a store
(unit tests) every write succeeds at once. ``on_commit(group_id, offsets)`` is called after a commit is
applied. Group state itself (members, generations, offsets, transitions) is ``GroupMetadata``'s
(member.py).

What stays here is the rebalance protocol: JoinGroup (new, known and static members, KIP-394's member id
round trip, KIP-345's static rejoin), the delayed join with its initial delay, SyncGroup, heartbeats and
session expiry, LeaveGroup, and the groups' arrival and departure with this broker's leadership. At about
830 lines it is above the ~600 aimed at: in Kafka, too, these transitions are one class
(``GroupCoordinator.scala``), each step reading and changing the same group under one lock, and cutting it
further would split one state machine across files rather than follow a seam.

Every state change is logged as ``group_state`` (group, state, generation, plus the reason); membership
changes as ``group_join`` / ``group_leave`` / ``group_member_expired`` / ``group_member_removed`` /
``group_member_fenced``; a completed join as ``group_generation`` and a completed sync as ``group_assignment``.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.broker.group.consumer_protocol import ConsumerGroupProtocol
from kafkalite.broker.group.manager import GroupStore, OffsetMetadataManager
from kafkalite.broker.group.member import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from kafkalite.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkalite.protocol.api import NO_ERROR, PartitionError, TopicPartition
from kafkalite.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkalite.protocol.group import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkalite.protocol.txn import TxnOffsetCommitRequest, TxnOffsetCommitResponse

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
UNKNOWN_MEMBER_ID = ""

_NONE = NO_ERROR
_UNKNOWN_MEMBER = UnknownMemberIdError.code
_ILLEGAL_GENERATION = IllegalGenerationError.code
_REBALANCING = RebalanceInProgressError.code
_FENCED = FencedInstanceIdError.code
_INCONSISTENT = InconsistentGroupProtocolError.code
_COORDINATOR_NA = CoordinatorNotAvailableError.code

Respond = Callable[[Any], None]

# Kafka name -> (field, default)
_CONFIG_KEYS: dict[str, tuple[str, int]] = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 3000),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 6000),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1_800_000),
    "group.max.size": ("max_size", 2**31 - 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 4096),
}


@dataclass(frozen=True)
class GroupConfig:
    """The broker keys the classic group coordinator reads, with Kafka's defaults."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def coerce(cls, config: Any) -> GroupConfig:
        """A ``GroupConfig``, a mapping of Kafka keys (or field names), a ``BrokerConfig`` or None."""
        if isinstance(config, GroupConfig):
            return config
        if config is None:
            return cls()
        kwargs: dict[str, int] = {}
        if isinstance(config, Mapping):
            for key, (fname, _default) in _CONFIG_KEYS.items():
                if key in config:
                    kwargs[fname] = int(config[key])
                elif fname in config:
                    kwargs[fname] = int(config[fname])
            return cls(**kwargs)
        props = config.to_props() if hasattr(config, "to_props") else {}
        return cls.coerce(props)


class GroupCoordinator:
    """Every group one broker coordinates. See the module docstring."""

    def __init__(
        self,
        clock: Any,
        set_timer: Callable[[int, Callable[[int], None]], int],
        cancel_timer: Callable[[int], Any],
        log_event: Callable[..., None],
        config: Any = None,
        *,
        on_commit: Callable[[str, dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
        member_id_seed: int = 0,
        store: GroupStore | None = None,
        topics: Callable[[], Mapping[str, int]] | None = None,
        topic_ids: Callable[[str], uuid.UUID] | None = None,
    ) -> None:
        self.clock = clock
        self._set_timer_fn = set_timer
        self._cancel_timer_fn = cancel_timer
        self._log_event = log_event
        self.config = GroupConfig.coerce(config)
        self.on_commit = on_commit
        self.store = store
        """Where offsets and group records are written; the broker's ``GroupMetadataManager`` puts itself here."""
        self.offset_manager = OffsetMetadataManager(self)
        self.groups: dict[str, GroupMetadata] = {}
        self._timers: set[int] = set()
        self._pending_timers: dict[tuple[str, str], int] = {}
        """(group, member id) -> expiry timer of a member id handed out with MEMBER_ID_REQUIRED."""
        self._rng = random.Random(member_id_seed)
        self.consumer = ConsumerGroupProtocol(self, config, topics, topic_ids)
        """The consumer groups of KIP-848's protocol (ConsumerGroupHeartbeat); ``topics`` gives them the
        partition count of each topic, ``topic_ids`` each topic's id."""

    # ============================================================================= plumbing
    @property
    def offsets(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Committed offsets by group id (a view built from the groups)."""
        return {gid: dict(g.offsets) for gid, g in self.groups.items() if g.offsets}

    def _event(self, event: str, **fields: Any) -> None:
        self._log_event(event, **fields)

    def _set_timer(self, delay_ms: int, callback: Callable[[], None]) -> int:
        holder: list[int] = []

        def fire(_now_ms: int) -> None:
            if holder[0] in self._timers:
                self._timers.discard(holder[0])
                callback()

        tid = self._set_timer_fn(max(0, delay_ms), fire)
        holder.append(tid)
        self._timers.add(tid)
        return tid

    def _cancel_timer(self, tid: int | None) -> None:
        if tid is not None and tid in self._timers:
            self._timers.discard(tid)
            self._cancel_timer_fn(tid)

    def _new_member_id(self, group: GroupMetadata, client_id: str) -> str:
        while True:
            mid = f"{client_id or 'member'}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"
            if mid not in group.members and mid not in group.pending_members:
                return mid

    def _transition(self, group: GroupMetadata, state: GroupState, reason: str = "") -> None:
        group.transition_to(state, self.clock.now_ms())
        self._event(
            "group_state",
            group=group.group_id,
            state=state.value,
            generation=group.generation_id,
            reason=reason,
            members=len(group.members),
        )

    def _member_event(self, event: str, group: GroupMetadata, member_id: str, **fields: Any) -> None:
        """A membership event (``group_join``, ``group_member_removed``, ...) naming the generation."""
        self._event(event, group=group.group_id, member=member_id, **fields, generation=group.generation_id)

    def group_state(self, group_id: str) -> str:
        g = self.groups.get(group_id)
        return GroupState.DEAD.value if g is None else g.state.value

    # ============================================================================= JoinGroup
    def handle_join_group(
        self, req: JoinGroupRequest, respond: Respond, *, client_id: str = "", client_host: str = ""
    ) -> None:
        def error(code: int, member_id: str = req.member_id) -> None:
            respond(JoinGroupResponse(error_code=code, member_id=member_id))

        if not req.group_id:
            return error(InvalidGroupIdError.code)
        if not (
            self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            return error(InvalidSessionTimeoutError.code)
        protocols = tuple((p.name, p.metadata) for p in req.protocols)
        modern = self.consumer.groups.get(req.group_id)
        if modern is not None:
            if modern.members:
                # A classic member of a live consumer group (a group in the middle of an online migration).
                self.consumer.classic.join(modern, req, respond, client_id, client_host)
                return
            # An empty consumer group becomes a classic one, as Kafka always allows; its offsets stay.
            self.consumer.delete_empty_group(req.group_id)
        group = self.groups.get(req.group_id)
        if req.member_id == UNKNOWN_MEMBER_ID:
            if group is None:
                group = self.groups[req.group_id] = GroupMetadata(req.group_id)
            return self._join_unknown_member(group, req, protocols, respond, client_id, client_host)
        if group is None:
            return error(_UNKNOWN_MEMBER)
        return self._join_current_member(group, req, protocols, respond, client_id, client_host)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.is_(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.is_awaiting_join) or group.num_awaiting_join() < self.config.max_size
        return group.has(member_id) or len(group.members) < self.config.max_size

    def _join_unknown_member(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        respond: Respond,
        client_id: str,
        client_host: str,
    ) -> None:
        if group.is_(GroupState.DEAD):
            respond(JoinGroupResponse(error_code=_COORDINATOR_NA))
            return
        if not group.supports_protocols(req.protocol_type, protocols):
            respond(JoinGroupResponse(error_code=_INCONSISTENT))
            return
        new_id = self._new_member_id(group, client_id)
        if req.group_instance_id is not None and group.static_member_id(req.group_instance_id) is not None:
            self._static_member_rejoin(group, req, protocols, new_id, respond)
            return
        if not self._accept_joining_member(group, new_id):
            respond(JoinGroupResponse(error_code=GroupMaxSizeReachedError.code))
            return
        if req.group_instance_id is None:
            # KIP-394: hand out the id, and count the member as expected in the rebalance from now on.
            group.pending_members.add(new_id)
            self._schedule_pending_expiry(group, new_id, req.session_timeout_ms)
            self._event("group_member_id_required", group=group.group_id, member=new_id)
            respond(JoinGroupResponse(error_code=MemberIdRequiredError.code, member_id=new_id))
            return
        self._add_member_and_rebalance(group, req, protocols, new_id, respond, client_id, client_host)

    def _join_current_member(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        respond: Respond,
        client_id: str = "",
        client_host: str = "",
    ) -> None:
        mid = req.member_id

        def error(code: int) -> None:
            respond(JoinGroupResponse(error_code=code, member_id=mid))

        if group.is_(GroupState.DEAD):
            return error(_COORDINATOR_NA)
        if not group.supports_protocols(req.protocol_type, protocols):
            return error(_INCONSISTENT)
        if mid in group.pending_members:
            if req.group_instance_id is not None:  # static members never get a pending id
                return error(_UNKNOWN_MEMBER)
            if not self._accept_joining_member(group, mid):
                group.pending_members.discard(mid)
                self._cancel_pending_expiry(group, mid)
                self._check_join(group)
                return error(GroupMaxSizeReachedError.code)
            group.pending_members.discard(mid)
            self._cancel_pending_expiry(group, mid)
            self._add_member_and_rebalance(group, req, protocols, mid, respond, client_id, client_host)
            return
        if group.is_static_member_fenced(req.group_instance_id, mid):
            return error(_FENCED)
        if not group.has(mid):
            return error(_UNKNOWN_MEMBER)
        if not self._accept_joining_member(group, mid):
            return error(GroupMaxSizeReachedError.code)
        member = group.members[mid]
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, protocols, respond)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # A retried join of the generation just formed: answer it again.
                respond(self._join_response(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, protocols, respond)
        elif group.is_(GroupState.STABLE):
            if group.is_leader(mid) or not member.matches(protocols):
                # The leader rejoining (e.g. new topics match its pattern) or a changed subscription.
                self._update_member_and_rebalance(group, member, req, protocols, respond)
            else:
                respond(self._join_response(group, member, with_members=False))
        else:  # Empty
            error(_UNKNOWN_MEMBER)

    def _join_response(
        self, group: GroupMetadata, member: MemberMetadata, with_members: bool = True
    ) -> JoinGroupResponse:
        members: tuple[JoinGroupMember, ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(
                JoinGroupMember(member_id=m, group_instance_id=i, metadata=md)
                for m, i, md in group.current_member_metadata()
            )
        return JoinGroupResponse(
            error_code=_NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        member_id: str,
        respond: Respond,
        client_id: str,
        client_host: str,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=protocols,
            awaiting_join=respond,
            is_new=True,
        )
        # During the initial delay of an Empty group, every new member extends the wait (InitialDelayedJoin).
        if group.is_(GroupState.PREPARING_REBALANCE) and group.join_initial_delay:
            group.new_member_added = True
        group.add(member)
        self._member_event("group_join", group, member_id, instance=req.group_instance_id, new=True)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")
        self._check_join(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        respond: Respond,
    ) -> None:
        # A retried join while the first still waits: the newest wins; the older one is told to retry.
        retry = JoinGroupResponse(error_code=_REBALANCING, member_id=member.member_id)
        group.update_member(
            member, protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond, retry
        )
        self._member_event(
            "group_join", group, member.member_id, instance=member.group_instance_id, new=False
        )
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._check_join(group)

    def _static_member_rejoin(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        new_id: str,
        respond: Respond,
    ) -> None:
        """KIP-345: a static member restarted; its new member id replaces the old one, which is fenced."""
        instance = req.group_instance_id
        assert instance is not None
        old_id = group.static_members[instance]
        member = group.members[old_id]
        member.answer_join(JoinGroupResponse(error_code=_FENCED, member_id=old_id))
        member.answer_sync(SyncGroupResponse(error_code=_FENCED))
        group.replace_static_member(instance, old_id, new_id)
        self._event(
            "group_member_fenced", group=group.group_id, member=old_id, replaced_by=new_id, instance=instance
        )
        # A restarted consumer's subscription bytes differ (e.g. its owned-partitions generation is reset),
        # so, as in Kafka, only a change of the group's selected protocol forces a rebalance.
        old_protocols = member.protocols
        member.protocols = protocols
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            member.session_timeout_ms = req.session_timeout_ms
            self._event(
                "group_join",
                group=group.group_id,
                member=new_id,
                instance=instance,
                new=False,
                generation=group.generation_id,
                rebalance=False,
            )
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            resp = self._join_response(group, member)
            if group.is_leader(new_id):
                # KIP-814: the leader keeps the current assignment rather than computing a new one.
                resp = dataclasses.replace(resp, skip_assignment=True, leader_before_rejoin=old_id)

            def stored(code: int) -> None:
                # The new member id must be on the log before it is used, or a new coordinator would fence it.
                if code != _NONE and group.members.get(new_id) is member:
                    member.protocols = old_protocols
                    group.replace_static_member(instance, new_id, old_id)
                    self._event("group_member_reverted", group=group.group_id, member=new_id, restored=old_id)
                    respond(JoinGroupResponse(error_code=code, member_id=UNKNOWN_MEMBER_ID))
                    return
                respond(resp)

            if self.store is None:
                respond(resp)
            else:
                self.store.store_group(
                    group, {m.member_id: m.assignment for m in group.members.values()}, stored
                )
            return
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        self._update_member_and_rebalance(group, member, req, protocols, respond)

    # ------------------------------------------------------------------ rebalance (the delayed join)
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, _REBALANCING)
        self._cancel_timer(group.sync_timer)
        group.sync_timer = None
        group.pending_sync_members.clear()
        self._cancel_timer(group.join_timer)
        if group.is_(GroupState.EMPTY):
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms for more members, restarting the
            # delay while new members keep coming, up to the rebalance timeout.
            delay = self.config.initial_rebalance_delay_ms
            group.join_initial_delay = True
            group.new_member_added = False
            group.join_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self._set_timer(delay, lambda: self._expire_initial_join(group))
        else:
            group.join_initial_delay = False
            group.join_timer = self._set_timer(
                group.rebalance_timeout_ms(), lambda: self._complete_join(group)
            )
        self._transition(group, GroupState.PREPARING_REBALANCE, reason)
        self._check_join(group)  # tryCompleteElseWatch: e.g. the last member left, nobody to wait for

    def _expire_initial_join(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.new_member_added and group.join_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.join_remaining_ms)
            group.join_remaining_ms = max(group.join_remaining_ms - delay, 0)
            group.join_timer = self._set_timer(delay, lambda: self._expire_initial_join(group))
            return
        self._complete_join(group)

    def _check_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: done once every known member has rejoined (not during the initial delay)."""
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and not group.join_initial_delay
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        self._cancel_timer(group.join_timer)
        group.join_timer = None
        group.join_initial_delay = False
        # Dynamic members that did not rejoin in time are removed; static ones stay until their session ends.
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._cancel_timer(m.heartbeat_timer)
                group.remove(m.member_id)
                self._member_event(
                    "group_member_removed",
                    group,
                    m.member_id,
                    reason="did not rejoin before the rebalance timeout",
                )
        for pending in list(group.pending_members):
            self._cancel_pending_expiry(group, pending)
        group.pending_members.clear()
        # Keep the leader if it rejoined; else the first member that did (Kafka's maybeElectNewJoinedLeader).
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that did not rejoin are left: wait for their sessions to end.
            group.join_timer = self._set_timer(
                group.rebalance_timeout_ms(), lambda: self._complete_join(group)
            )
            return
        group.init_next_generation()
        if group.members:
            self._transition(group, GroupState.COMPLETING_REBALANCE, "all members joined")
            self._event(
                "group_generation",
                group=group.group_id,
                generation=group.generation_id,
                leader=group.leader_id,
                protocol=group.protocol_name,
                members=list(group.members),
            )
            for m in group.members.values():
                if m.awaiting_join is not None:
                    m.is_new = False
                    m.answer_join(self._join_response(group, m))
                    self._schedule_heartbeat(group, m, m.session_timeout_ms)
            group.pending_sync_members = set(group.members)
            group.sync_timer = self._set_timer(
                group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(group)
            )
        else:
            self._transition(group, GroupState.EMPTY, "no members")
            if self.store is None:
                return
            # Written so a new coordinator knows the generation; failure only logs (as in Kafka).
            gid, gen = group.group_id, group.generation_id
            self.store.store_group(
                group,
                {},
                lambda code: (
                    code == _NONE or self._event("group_store_failed", group=gid, generation=gen, error=code)
                ),
            )

    def _expire_pending_sync(self, group: GroupMetadata) -> None:
        """Members of the new generation that never sent SyncGroup are removed (Kafka's pending sync)."""
        group.sync_timer = None
        if (
            not group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or not group.pending_sync_members
        ):
            return
        for mid in sorted(group.pending_sync_members):
            m = group.members.get(mid)
            if m is not None:
                self._cancel_timer(m.heartbeat_timer)
                m.answer_join(JoinGroupResponse(error_code=_UNKNOWN_MEMBER, member_id=mid))
                group.remove(mid)
                self._member_event(
                    "group_member_removed", group, mid, reason="no SyncGroup before the rebalance timeout"
                )
        group.pending_sync_members.clear()
        self._prepare_rebalance_or_empty(group, "members did not sync")

    def _prepare_rebalance_or_empty(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, code: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            m.answer_sync(SyncGroupResponse(error_code=code))

    # ------------------------------------------------------------------ heartbeats / session expiry
    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        self._cancel_timer(member.heartbeat_timer)
        member.heartbeat_timer = self._set_timer(
            timeout_ms, lambda: self._expire_heartbeat(group, member.member_id, member)
        )

    def _expire_heartbeat(self, group: GroupMetadata, member_id: str, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            # A member waiting on a rebalance counts as alive; the rebalance timeout governs it.
            return
        self._event(
            "group_member_expired",
            group=group.group_id,
            member=member.member_id,
            instance=member.group_instance_id,
            generation=group.generation_id,
            session_timeout_ms=member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member, "session timeout")

    def _schedule_pending_expiry(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        tid = self._set_timer(timeout_ms, lambda: self._expire_pending(group, member_id))
        self._pending_timers[(group.group_id, member_id)] = tid

    def _cancel_pending_expiry(self, group: GroupMetadata, member_id: str) -> None:
        self._cancel_timer(self._pending_timers.pop((group.group_id, member_id), None))

    def _expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        self._pending_timers.pop((group.group_id, member_id), None)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._event("group_member_expired", group=group.group_id, member=member_id, pending=True)
            self._check_join(group)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        self._cancel_timer(member.heartbeat_timer)
        member.heartbeat_timer = None
        member.answer_join(JoinGroupResponse(error_code=_UNKNOWN_MEMBER, member_id=member.member_id))
        member.answer_sync(SyncGroupResponse(error_code=_UNKNOWN_MEMBER))
        group.remove(member.member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)
        elif group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} removed ({reason})")

    # ============================================================================= SyncGroup
    def handle_sync_group(self, req: SyncGroupRequest, respond: Respond) -> None:
        modern = self.consumer.groups.get(req.group_id)
        if modern is not None:
            self.consumer.classic.sync(modern, req, respond)
            return
        group = self.groups.get(req.group_id)
        if group is None:
            respond(SyncGroupResponse(error_code=_UNKNOWN_MEMBER))
            return
        if group.is_(GroupState.DEAD):
            respond(SyncGroupResponse(error_code=_COORDINATOR_NA))
            return
        if group.is_static_member_fenced(req.group_instance_id, req.member_id):
            respond(SyncGroupResponse(error_code=_FENCED))
            return
        if not group.has(req.member_id):
            respond(SyncGroupResponse(error_code=_UNKNOWN_MEMBER))
            return
        if req.generation_id != group.generation_id:
            respond(SyncGroupResponse(error_code=_ILLEGAL_GENERATION))
            return
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            respond(SyncGroupResponse(error_code=_INCONSISTENT))
            return
        member = group.members[req.member_id]
        if group.is_(GroupState.EMPTY):
            respond(SyncGroupResponse(error_code=_UNKNOWN_MEMBER))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            respond(SyncGroupResponse(error_code=_REBALANCING))
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            member.awaiting_sync = respond
            self._remove_pending_sync(group, member.member_id)
            if group.is_leader(member.member_id):
                given = {a.member_id: a.assignment for a in req.assignments}
                assignment = {mid: given.get(mid, b"") for mid in group.members}
                generation = group.generation_id

                def stored(code: int) -> None:
                    # The group may have moved on while the append waited for the ISR.
                    if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
                        return
                    if code != _NONE:
                        self._event(
                            "group_store_failed", group=group.group_id, generation=generation, error=code
                        )
                        self._reset_and_propagate_assignment_error(group, code)
                        self._prepare_rebalance_or_empty(group, "storing the assignment failed")
                        return
                    self._complete_sync(group, assignment)

                if self.store is None:
                    stored(_NONE)
                else:
                    self.store.store_group(group, assignment, stored)
        else:  # Stable: answer with the member's current share
            self._remove_pending_sync(group, member.member_id)
            respond(self._sync_response(group, member))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _complete_sync(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self._transition(group, GroupState.STABLE, "leader sent the assignment")
        self._event(
            "group_assignment",
            group=group.group_id,
            generation=group.generation_id,
            leader=group.leader_id,
            assignment={m.member_id: m.assignment for m in group.members.values()},
        )
        for m in group.members.values():
            if m.answer_sync(self._sync_response(group, m)):
                self._schedule_heartbeat(group, m, m.session_timeout_ms)

    def _sync_response(self, group: GroupMetadata, member: MemberMetadata) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=_NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

    def _remove_pending_sync(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel_timer(group.sync_timer)
            group.sync_timer = None

    # ============================================================================= ConsumerGroupHeartbeat
    def handle_consumer_group_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        respond: Respond,
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> None:
        """KIP-848's consumer group protocol (consumer_protocol.py)."""
        self.consumer.handle_heartbeat(req, respond, client_id=client_id, client_host=client_host)

    # ============================================================================= Heartbeat
    def handle_heartbeat(self, req: HeartbeatRequest, respond: Respond) -> None:
        modern = self.consumer.groups.get(req.group_id)
        if modern is not None:
            self.consumer.classic.heartbeat(modern, req, respond)
            return
        respond(HeartbeatResponse(error_code=self._heartbeat(req)))

    def _heartbeat(self, req: HeartbeatRequest) -> int:
        group = self.groups.get(req.group_id)
        if group is None:
            return _UNKNOWN_MEMBER
        if group.is_(GroupState.DEAD):
            return _COORDINATOR_NA
        if group.is_static_member_fenced(req.group_instance_id, req.member_id):
            return _FENCED
        if not group.has(req.member_id):
            return _UNKNOWN_MEMBER
        if req.generation_id != group.generation_id:
            return _ILLEGAL_GENERATION
        member = group.members[req.member_id]
        if group.is_(GroupState.EMPTY):
            return _UNKNOWN_MEMBER
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return _REBALANCING
        return _NONE  # Stable, or CompletingRebalance (members may heartbeat before they sync)

    # ============================================================================= LeaveGroup
    def handle_leave_group(self, req: LeaveGroupRequest, respond: Respond) -> None:
        modern = self.consumer.groups.get(req.group_id)
        if modern is not None:
            self.consumer.classic.leave(modern, req, respond)
            return
        group = self.groups.get(req.group_id)
        if group is not None and group.is_(GroupState.DEAD):
            respond(LeaveGroupResponse(error_code=_COORDINATOR_NA))
            return
        out = []
        for ident in req.members:
            code = (
                _UNKNOWN_MEMBER
                if group is None
                else self._leave_one(group, ident.member_id, ident.group_instance_id, ident.reason)
            )
            out.append(
                LeaveGroupMemberResponse(
                    member_id=ident.member_id, group_instance_id=ident.group_instance_id, error_code=code
                )
            )
        respond(LeaveGroupResponse(members=tuple(out)))

    def _leave_one(
        self, group: GroupMetadata, member_id: str, instance: str | None, reason: str | None
    ) -> int:
        if member_id == UNKNOWN_MEMBER_ID and instance is not None:
            member_id = group.static_member_id(instance) or ""
        elif group.is_static_member_fenced(instance, member_id):
            return _FENCED
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel_pending_expiry(group, member_id)
            self._event("group_leave", group=group.group_id, member=member_id, pending=True, reason=reason)
            self._check_join(group)
            return _NONE
        member = group.members.get(member_id)
        if member is None:
            return _UNKNOWN_MEMBER
        self._event(
            "group_leave",
            group=group.group_id,
            member=member_id,
            instance=member.group_instance_id,
            generation=group.generation_id,
            reason=reason,
        )
        self._remove_member_and_update_group(group, member, f"left: {reason or 'LeaveGroup'}")
        return _NONE

    # ============================================================================= offsets (checked here, stored by the store)
    def handle_offset_commit(self, req: OffsetCommitRequest, respond: Respond) -> None:
        def answer(codes: Mapping[TopicPartition, int]) -> None:
            parts = tuple(PartitionError(tp=p.tp, error_code=codes[p.tp]) for p in req.partitions)
            respond(OffsetCommitResponse(partitions=parts))

        code = self._validate_commit(req)
        if code != _NONE:
            answer({p.tp: code for p in req.partitions})
            return
        group = self.groups[req.group_id]
        self.offset_manager.commit_offsets(group, req.member_id, req.generation_id, req.partitions, answer)

    def _validate_commit(self, req: OffsetCommitRequest) -> int:
        if not req.group_id:
            return InvalidGroupIdError.code
        consumer = self._validate_consumer_group_commit(req, transactional=False)
        if consumer is not None:
            return consumer
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id < 0:
                # A consumer outside the group protocol (assign(), not subscribe()) commits to a new group.
                self.groups[req.group_id] = GroupMetadata(req.group_id)
                return _NONE
            return _ILLEGAL_GENERATION
        if group.is_(GroupState.DEAD):
            return _COORDINATOR_NA
        if group.is_static_member_fenced(req.group_instance_id, req.member_id):
            return _FENCED
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            return _NONE
        if not group.has(req.member_id):
            return _UNKNOWN_MEMBER
        if req.generation_id != group.generation_id:
            return _ILLEGAL_GENERATION
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return _REBALANCING
        member = group.members[req.member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return _NONE

    def _validate_consumer_group_commit(
        self, req: OffsetCommitRequest | TxnOffsetCommitRequest, *, transactional: bool
    ) -> int | None:
        """The error of a (Txn)OffsetCommit to a KIP-848 consumer group, checked against its members
        (None: ``req.group_id`` is no consumer group). Its offsets live on a memberless classic group record,
        made here when the commit is accepted."""
        code = self.consumer.validate_offset_commit(
            req.group_id,
            req.member_id,
            req.group_instance_id,
            req.generation_id,
            transactional=transactional,
            modern=getattr(req, "modern", True),
        )
        if code is None:
            return None
        holder = self.groups.get(req.group_id)
        if holder is not None and holder.is_(GroupState.DEAD):
            return _COORDINATOR_NA
        if code == _NONE and holder is None:
            self.groups[req.group_id] = GroupMetadata(req.group_id)
        return code

    def handle_txn_offset_commit(self, req: TxnOffsetCommitRequest, respond: Respond) -> None:
        """Offsets written inside a producer's transaction (``OffsetMetadataManager.commit_txn_offsets``)."""

        def answer(code: int) -> None:
            parts = tuple(PartitionError(tp=p.tp, error_code=code) for p in req.partitions)
            respond(TxnOffsetCommitResponse(partitions=parts))

        if not req.group_id:
            answer(InvalidGroupIdError.code)
            return
        consumer = self._validate_consumer_group_commit(req, transactional=True)
        if consumer is not None:
            if consumer != _NONE:
                answer(consumer)
            else:
                self.offset_manager.commit_txn_offsets(
                    self.groups[req.group_id], (req.producer_id, req.producer_epoch), req.partitions, answer
                )
            return
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                answer(_ILLEGAL_GENERATION)  # a member of a group this coordinator does not have
                return
            group = self.groups[req.group_id] = GroupMetadata(req.group_id)
        code = self._validate_classic_txn_commit(group, req)
        if code != _NONE:
            answer(code)
            return
        self.offset_manager.commit_txn_offsets(
            group, (req.producer_id, req.producer_epoch), req.partitions, answer
        )

    def _validate_classic_txn_commit(self, group: GroupMetadata, req: TxnOffsetCommitRequest) -> int:
        """A classic group's TxnOffsetCommit check (Kafka's ClassicGroup.validateOffsetCommit, transactional):
        the group's state is not enforced, and a request without group metadata (before v3) is taken."""
        if group.is_(GroupState.DEAD):
            return _COORDINATOR_NA
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            return _NONE
        if req.generation_id < 0 and not req.member_id and req.group_instance_id is None:
            return _NONE
        if req.group_instance_id is not None and group.static_member_id(req.group_instance_id) is None:
            return _UNKNOWN_MEMBER
        if group.is_static_member_fenced(req.group_instance_id, req.member_id):
            return _FENCED
        if not group.has(req.member_id):
            return _UNKNOWN_MEMBER
        if req.generation_id != group.generation_id:
            return _ILLEGAL_GENERATION
        return _NONE

    def handle_offset_fetch(self, req: OffsetFetchRequest, respond: Respond) -> None:
        group = self.groups.get(req.group_id)
        if group is not None and group.is_(GroupState.DEAD):
            respond(OffsetFetchResponse(error_code=NotCoordinatorError.code))
            return
        respond(OffsetFetchResponse(partitions=self.offset_manager.fetch_offsets(group, req.partitions)))

    # ============================================================================= Describe / List
    def handle_describe_groups(self, req: DescribeGroupsRequest, respond: Respond) -> None:
        respond(DescribeGroupsResponse(groups=tuple(self._describe(gid) for gid in req.groups)))

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer.groups:
            # DescribeGroups (up to v5) knows classic groups only: a consumer-type group looks Dead, as in
            # Kafka; ConsumerGroupDescribe is its describe.
            return DescribedGroup(group_id=group_id, group_state=GroupState.DEAD.value)
        return group.summary()

    def handle_list_groups(self, req: ListGroupsRequest, respond: Respond) -> None:
        """Classic and consumer-type groups with their state and type; each filter's case is ignored, and an
        unknown type matches nothing (Kafka parses it to UNKNOWN)."""
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        listed = [
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )  # fmt: skip
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD) and g.group_id not in self.consumer.groups
        ]
        listed += [
            ListedGroup(
                group_id=g.group_id,
                protocol_type="consumer",
                group_state=g.state().value,
                group_type="consumer",
            )  # fmt: skip
            for g in self.consumer.groups.values()
        ]
        out = tuple(
            g
            for g in sorted(listed, key=lambda g: g.group_id)
            if (not states or g.group_state.lower() in states) and (not types or g.group_type in types)
        )
        respond(ListGroupsResponse(groups=out))

    # ============================================================================= emigration
    def _stop_members(self, group: GroupMetadata, error_code: int) -> None:
        """The classic group stops here: its timers stop and every waiting JoinGroup and SyncGroup is
        answered with ``error_code``."""
        self._cancel_timer(group.join_timer)
        self._cancel_timer(group.sync_timer)
        for mid in list(group.pending_members):
            self._cancel_pending_expiry(group, mid)
        for m in group.members.values():
            self._cancel_timer(m.heartbeat_timer)
            m.answer_join(JoinGroupResponse(error_code=error_code, member_id=m.member_id))
            m.answer_sync(SyncGroupResponse(error_code=error_code))

    def unload_group(self, group_id: str) -> None:
        """This broker stopped leading the group's ``__consumer_offsets`` partition: the group is Dead here and
        waiting members are told NOT_COORDINATOR (they find the new coordinator). A consumer group of the
        same id is unloaded too."""
        self.consumer.unload_group(group_id)
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self._stop_members(group, NotCoordinatorError.code)
        self._transition(group, GroupState.DEAD, "unloaded")

    def shutdown(self) -> None:
        """The broker stops: every timer is cancelled and every group forgotten (nothing is answered)."""
        self.consumer.shutdown()
        for tid in list(self._timers):
            self._cancel_timer(tid)
        self._pending_timers.clear()
        self.groups.clear()

    def delete_group(self, group_id: str) -> int:
        """Kafka's DeleteGroups for one group this coordinator serves: only an Empty group goes (Dead); its
        offsets are the offset manager's to remove. Returns the error code."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return GroupIdNotFoundError.code
        if not group.is_(GroupState.EMPTY):
            return NonEmptyGroupError.code
        self.remove_group(group, "deleted")
        return NO_ERROR

    def remove_group(self, group: GroupMetadata, reason: str) -> None:
        """The group leaves this coordinator for good (deleted, or Empty with nothing left): Dead."""
        self._cancel_timer(group.join_timer)
        del self.groups[group.group_id]
        self._transition(group, GroupState.DEAD, reason)

    # ============================================================================= online migration
    def detach_classic_group(self, group_id: str) -> None:
        """The classic group becomes a consumer group (online upgrade): its waiting JoinGroup and SyncGroup
        requests are answered REBALANCE_IN_PROGRESS (the members rejoin the consumer group), its timers stop,
        and a memberless group keeps only its offsets, as for every consumer group."""
        group = self.groups.get(group_id)
        if group is None:
            return
        self._stop_members(group, _REBALANCING)
        holder = GroupMetadata(group_id, offsets=group.offsets, pending_txn_offsets=group.pending_txn_offsets)
        self.groups[group_id] = holder

    def adopt_classic_group(self, group: GroupMetadata, reason: str) -> None:
        """A consumer group became ``group`` (online downgrade): it takes over the offsets, its record is
        written, its members' sessions start, and a rebalance begins, as in Kafka's convertToClassicGroup."""
        holder = self.groups.get(group.group_id)
        if holder is not None:
            group.offsets = holder.offsets
            group.pending_txn_offsets = holder.pending_txn_offsets
        self.groups[group.group_id] = group
        if self.store is not None:
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            self.store.store_group(group, assignment, lambda _code: None)
        for m in group.members.values():
            self._schedule_heartbeat(group, m, m.session_timeout_ms)
        self._prepare_rebalance(group, reason)

    # ============================================================================= immigration
    def load_group(self, group: GroupMetadata) -> None:
        """Install a group read back from ``__consumer_offsets`` (this broker became its coordinator).

        Members of a loaded group get a fresh session timer, as Kafka does: those still alive keep
        heartbeating to the new coordinator in the same generation; the others expire and trigger a
        rebalance. A group already present here (loaded before) is kept as it is."""
        if group.group_id in self.groups:
            return
        self.groups[group.group_id] = group
        self._event(
            "group_loaded",
            group=group.group_id,
            state=group.state.value,
            generation=group.generation_id,
            members=list(group.members),
            offsets={str(tp): om.offset for tp, om in sorted(group.offsets.items())},
        )
        for m in group.members.values():
            self._schedule_heartbeat(group, m, m.session_timeout_ms)


__all__ = ["NEW_MEMBER_JOIN_TIMEOUT_MS", "GroupConfig", "GroupCoordinator", "GroupStore"]
