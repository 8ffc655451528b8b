"""Members that speak the classic protocol inside a KIP-848 consumer group (Kafka's
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and ``classicGroupLeaveToConsumerGroup``): a group in the middle of
an online migration (migration.py) serves JoinGroup, SyncGroup, Heartbeat and LeaveGroup from its classic
members by translating them to the consumer group's state; every change is written as the group's records
before the answer, as for a ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafkalite.broker.group.consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState
from kafkalite.broker.group.migration import (
    MigrationError,
    decode_subscription,
    encode_assignment,
    owned_partitions,
    supports_classic_protocols,
    waiting_on_unreleased,
)
from kafkalite.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.consumer_group_records import ClassicMemberMetadata
from kafkalite.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from kafkalite.protocol.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from kafkalite.broker.group.consumer_protocol import ConsumerGroupProtocol

Respond = Callable[[Any], None]


class _Refuse(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ClassicMembers:
    """The classic APIs of one coordinator's consumer groups. See the module docstring."""

    def __init__(self, protocol: ConsumerGroupProtocol) -> None:
        self.p = protocol
        self._join_timers: dict[tuple[str, str], int] = {}
        self._sync_timers: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------------------------- members
    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` plus the classic-protocol check."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _Refuse(UnknownMemberIdError.code)
        else:
            holder = group.static_members.get(instance_id)
            member = group.members.get(holder) if holder is not None else None
            if member is None:
                raise _Refuse(UnknownMemberIdError.code)
            if member.member_id != member_id:
                raise _Refuse(FencedInstanceIdError.code)
        if not member.uses_classic_protocol:
            raise _Refuse(UnknownMemberIdError.code)
        return member

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        return (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased(group, member)
            )
        )

    # ------------------------------------------------------------------------------------- JoinGroup
    def join(self, group: ConsumerGroup, req: JoinGroupRequest, respond: Respond, client_id: str,
             client_host: str) -> None:  # fmt: skip
        def error(code: int, member_id: str = req.member_id) -> None:
            respond(JoinGroupResponse(error_code=code, member_id=member_id))

        protocols = tuple((p.name, p.metadata) for p in req.protocols)
        member_id = req.member_id or str(uuid.UUID(int=self.p._rng.getrandbits(128), version=4))
        if member_id not in group.members and len(group.members) >= self.p.config.max_size:
            return error(GroupMaxSizeReachedError.code)
        if not supports_classic_protocols(group, req.protocol_type, {n for n, _ in protocols}):
            return error(InconsistentGroupProtocolError.code)
        if not req.member_id and req.group_instance_id is None:
            # KIP-394: a dynamic member learns its id first, then joins with it.
            return error(MemberIdRequiredError.code, member_id)
        try:
            sub = decode_subscription(protocols)
            member = self._joining_member(group, req, member_id)
        except MigrationError:
            return error(InconsistentGroupProtocolError.code)
        except _Refuse as e:
            return error(e.code)
        updated = replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=None,
            subscribed_topic_names=frozenset(sub.topics),
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, protocols),
        )
        p = self.p
        changed = updated.member_id not in group.members or (
            updated.subscribed_topic_names != member.subscribed_topic_names
        )
        p._update_member(group, updated, changed, classic=True)
        reconciled = p._reconcile(group, updated, owned_partitions(sub))
        self.cancel(self._join_timers, group, reconciled.member_id)
        response = JoinGroupResponse(
            member_id=reconciled.member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
        )
        p._event("consumer_group_classic_join", group=group.group_id, member=reconciled.member_id,
                 epoch=reconciled.member_epoch, state=reconciled.state.value)  # fmt: skip

        def written(code: int) -> None:
            if code != NO_ERROR:
                return error(code)
            if p.groups.get(group.group_id) is group and reconciled.member_id in group.members:
                p._schedule_session_timeout(group, reconciled.member_id)
                self._schedule(self._sync_timers, group, reconciled.member_id, req.rebalance_timeout_ms,
                               "the member failed to sync within timeout", replace_existing=True)  # fmt: skip
            respond(response)

        p.write_group(group.group_id, written)

    def _joining_member(
        self, group: ConsumerGroup, req: JoinGroupRequest, member_id: str
    ) -> ConsumerGroupMember:
        if req.group_instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return ConsumerGroupMember(member_id)
            if not member.uses_classic_protocol:
                raise _Refuse(UnknownMemberIdError.code)
            return member
        holder_id = group.static_members.get(req.group_instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if holder is None:
            return ConsumerGroupMember(member_id, instance_id=req.group_instance_id)
        if holder.member_id == member_id:
            return holder
        if req.member_id:
            raise _Refuse(FencedInstanceIdError.code)
        # A static member restarted: the new id takes over the old one's partitions and target.
        self.p._cancel(self.p._session_timers, group, holder.member_id)
        self.p._cancel(self.p._rebalance_timers, group, holder.member_id)
        self.cancel_all(group, holder.member_id)
        return group.replace_static_member(holder, member_id)

    # ------------------------------------------------------------------------------------- SyncGroup
    def sync(self, group: ConsumerGroup, req: SyncGroupRequest, respond: Respond) -> None:
        try:
            member = self._member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise _Refuse(IllegalGenerationError.code)
            assert member.classic is not None
            names = {n for n, _ in member.classic.supported_protocols}
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name not in names
            ):
                raise _Refuse(InconsistentGroupProtocolError.code)
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._schedule(self._join_timers, group, member.member_id, member.rebalance_timeout_ms,
                               "the classic member failed to join within the rebalance timeout")  # fmt: skip
                raise _Refuse(RebalanceInProgressError.code)
        except _Refuse as e:
            respond(SyncGroupResponse(error_code=e.code))
            return
        self.cancel(self._sync_timers, group, member.member_id)
        self.p._schedule_session_timeout(group, member.member_id)
        respond(
            SyncGroupResponse(
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=req.protocol_name or member.classic.supported_protocols[0][0],
                assignment=encode_assignment(member),
            )
        )

    # ------------------------------------------------------------------------------------- Heartbeat
    def heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest, respond: Respond) -> None:
        try:
            member = self._member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise _Refuse(IllegalGenerationError.code)
        except _Refuse as e:
            respond(HeartbeatResponse(error_code=e.code))
            return
        self.p._schedule_session_timeout(group, member.member_id)
        code = NO_ERROR
        if self._must_rejoin(group, member):
            code = RebalanceInProgressError.code
            self._schedule(self._join_timers, group, member.member_id, member.rebalance_timeout_ms,
                           "the classic member failed to join within the rebalance timeout")  # fmt: skip
        respond(HeartbeatResponse(error_code=code))

    # ------------------------------------------------------------------------------------- LeaveGroup
    def leave(self, group: ConsumerGroup, req: LeaveGroupRequest, respond: Respond) -> None:
        out = []
        for ident in req.members:
            member_id = ident.member_id
            try:
                if ident.group_instance_id is None:
                    member = self._member(group, member_id, None)
                else:
                    holder = group.static_members.get(ident.group_instance_id)
                    member = group.members.get(holder) if holder is not None else None
                    if member is None:
                        raise _Refuse(UnknownMemberIdError.code)
                    if member_id and member.member_id != member_id:
                        raise _Refuse(FencedInstanceIdError.code)
                    if not member.uses_classic_protocol:
                        raise _Refuse(UnknownMemberIdError.code)
                    member_id = member.member_id
                code = NO_ERROR
            except _Refuse as e:
                code = e.code
            out.append(LeaveGroupMemberResponse(member_id=member_id, group_instance_id=ident.group_instance_id,
                                                error_code=code))  # fmt: skip
            if code == NO_ERROR and self.p.groups.get(group.group_id) is group:
                self.p.fence_member(group, member_id, f"left: {ident.reason or 'LeaveGroup'}")
        response = LeaveGroupResponse(members=tuple(out))
        self.p.write_group(
            group.group_id,
            lambda code: respond(response if code == NO_ERROR else LeaveGroupResponse(error_code=code)),
        )

    # ------------------------------------------------------------------------------------- timers
    def _schedule(self, timers: dict[tuple[str, str], int], group: ConsumerGroup, member_id: str,
                  delay_ms: int, reason: str, replace_existing: bool = False) -> None:  # fmt: skip
        key = (group.group_id, member_id)
        if key in timers:
            if not replace_existing:
                return  # Kafka's scheduleIfAbsent
            self.cancel(timers, group, member_id)

        def expire() -> None:
            timers.pop(key, None)
            if self.p.groups.get(group.group_id) is group and member_id in group.members:
                self.p.fence_member(group, member_id, reason)
                self.p.write_group(group.group_id)

        timers[key] = self.p.coordinator._set_timer(delay_ms, expire)

    def cancel(self, timers: dict[tuple[str, str], int], group: ConsumerGroup, member_id: str) -> None:
        self.p.coordinator._cancel_timer(timers.pop((group.group_id, member_id), None))

    def cancel_all(self, group: ConsumerGroup, member_id: str) -> None:
        self.cancel(self._join_timers, group, member_id)
        self.cancel(self._sync_timers, group, member_id)

    def shutdown(self) -> None:
        for timers in (self._join_timers, self._sync_timers):
            for tid in timers.values():
                self.p.coordinator._cancel_timer(tid)
            timers.clear()


__all__ = ["ClassicMembers"]
