"""The group coordinator's side of KIP-848's consumer group protocol (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` and its timers), sans-I/O.

One ConsumerGroupHeartbeat does everything a member needs: it joins (epoch 0), reports the member's
subscription and owned partitions, and gets back the member's epoch and, when it changed, its assignment.
Each heartbeat: (1) checks the member and its epoch (FENCED_MEMBER_EPOCH for an epoch the coordinator did not
give it, except the previous one with nothing beyond the current assignment, as when a response was lost);
(2) bumps the group epoch if the member is new, its subscription changed or a subscribed topic's partition
count did; (3) recomputes the target assignment with the server assignor when the group epoch is ahead of
it; (4) moves the member one reconciliation step towards its target (``consumer_group.reconcile``); (5)
restarts its session timer (``group.consumer.session.timeout.ms``).

A member that does not give up revoked partitions within its rebalance timeout is fenced, as is one whose
session expires; a fenced member is removed, its partitions are free at once, and the group epoch bumps.
Epoch -1 leaves; a static member (instance id) leaving with -2 keeps its place and partitions until its
session expires, and a rejoin under the same instance id takes them over (UNRELEASED_INSTANCE_ID while the
previous holder has not left).

OffsetCommit for a consumer group (``validate_offset_commit``) follows OffsetCommit v9: the request's
generation id is the member epoch, which must equal the member's current one (STALE_MEMBER_EPOCH otherwise);
a commit with epoch -1 and no member id is taken only while the group has no members.

A group converts when it is empty, as Kafka always allows: a JoinGroup to an empty consumer group makes it
classic, a heartbeat to an empty classic group makes it a consumer group (committed offsets stay). A group
with members converts online under ``group.consumer.migration.policy`` (migration.py): a joining heartbeat
upgrades a classic group, whose members then go on as classic members of the consumer group
(classic_members.py), and the group turns classic again when its last consumer-protocol member leaves.

Topics are named by their ids (KIP-516) as the broker's metadata cache has them (``topic_ids``), the ones
its Metadata answers carry; without a cache (unit tests) an id derived from the name stands in
(``topic_id``).

Every change to a group is written to its ``__consumer_offsets`` partition as Kafka's consumer group
records (consumer_group_records.py: only the records whose value changed, tombstones for what went) and
the heartbeat is answered once the append is acknowledged. A coordinator that loads the partition
rebuilds the groups from them (``load_group``): epochs, target assignment, each member's epoch, state,
assigned and pending partitions and subscription, with every member's session timer restarted (and the
rebalance timer of one still revoking), as Kafka's ``onLoaded`` does; the members keep heartbeating with
their epochs and nothing rebalances.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from kafkalite.broker.group.assignor import ASSIGNORS, assignor_names
from kafkalite.broker.group.classic_members import ClassicMembers
from kafkalite.broker.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    GroupPartition,
    MemberState,
    flatten,
    nest,
    reconcile,
)
from kafkalite.broker.group.consumer_group_records import Image, group_image, image_changes
from kafkalite.broker.group.migration import (
    MigrationError,
    MigrationPolicy,
    can_downgrade,
    can_upgrade,
    from_classic,
    to_classic,
)
from kafkalite.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupAssignment,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribeMember,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
    DescribedAssignment,
    DescribedTopicPartitions,
)
from kafkalite.protocol.metadata import NO_TOPIC_ID, topic_id
from kafkalite.protocol.offsets_schema import encode_group_metadata_key

if TYPE_CHECKING:
    from kafkalite.broker.group.coordinator import GroupCoordinator
    from kafkalite.broker.group.member import GroupMetadata

_UNSUPPORTED_VERSION = 35  # Kafka's UNSUPPORTED_VERSION


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The broker keys of the consumer group protocol, with Kafka's defaults."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL

    @classmethod
    def coerce(cls, config: Any) -> ConsumerGroupConfig:
        """From a ``ConsumerGroupConfig``, a mapping of Kafka keys, an object with ``to_props`` or None."""
        if isinstance(config, ConsumerGroupConfig):
            return config
        props = (
            config
            if isinstance(config, Mapping)
            else (config.to_props() if hasattr(config, "to_props") else {})
        )
        kw: dict[str, Any] = {}
        for key, name in (
            ("group.consumer.session.timeout.ms", "session_timeout_ms"),
            ("group.consumer.heartbeat.interval.ms", "heartbeat_interval_ms"),
            ("group.consumer.max.size", "max_size"),
        ):
            if key in props:
                kw[name] = int(props[key])
        if "group.consumer.assignors" in props:
            kw["assignors"] = assignor_names(props["group.consumer.assignors"])
        if "group.consumer.migration.policy" in props:
            kw["migration_policy"] = MigrationPolicy.parse(props["group.consumer.migration.policy"])
        return cls(**kw)


class _Reject(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class ConsumerGroupProtocol:
    """The consumer groups of one coordinator. See the module docstring."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        config: Any = None,
        topics: Callable[[], Mapping[str, int]] | None = None,
        topic_ids: Callable[[str], uuid.UUID] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.config = ConsumerGroupConfig.coerce(config)
        self.topics = topics or (lambda: {})
        """Partition count by topic name: the metadata the assignors see."""
        self.topic_id = topic_ids or topic_id
        """A topic's id by name (the zero id for one the metadata does not know)."""
        self.groups: dict[str, ConsumerGroup] = {}
        self._session_timers: dict[tuple[str, str], int] = {}
        self._rebalance_timers: dict[tuple[str, str], int] = {}
        self._rng = coordinator._rng
        self._written: dict[str, Image] = {}
        """Each group's records as last appended to ``__consumer_offsets`` (what the next write diffs)."""
        self._write_seq: dict[str, int] = {}
        self._encoded: dict[str, dict[Any, Any]] = {}
        """Per group, the encoded records of its members and targets (``group_image``'s cache)."""
        self._prefix: dict[str, list[tuple[bytes, bytes | None]]] = {}
        """Records the next write of a group starts with (the tombstone of the classic group it replaced)."""
        self.classic = ClassicMembers(self)
        """JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members inside consumer groups."""
        """Writes issued per group: a failed heartbeat is reverted only if it was the last one."""

    def _event(self, event: str, **fields: Any) -> None:
        self.coordinator._event(event, **fields)

    # ============================================================================= the heartbeat
    def handle_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        respond: Callable[[ConsumerGroupHeartbeatResponse], None],
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> None:
        before = self.groups.get(req.group_id)
        snapshot = None if before is None else _copy(before)
        try:
            response = self._heartbeat(req, client_id, client_host)
        except _Reject as e:
            self._event("consumer_group_rejected", group=req.group_id, member=req.member_id, error=e.code,
                        reason=e.message)  # fmt: skip
            respond(ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message))
            return
        seq = self._write_seq.get(req.group_id, 0) + 1

        def written(code: int) -> None:
            if code == NO_ERROR:
                respond(response)
                return
            if self._write_seq.get(req.group_id) == seq:
                self._revert(req.group_id, before, snapshot)
            respond(ConsumerGroupHeartbeatResponse(error_code=code, error_message="Writing the group's "
                    "records to __consumer_offsets failed."))  # fmt: skip

        self.write_group(req.group_id, written)

    def _revert(self, group_id: str, before: ConsumerGroup | None, snapshot: ConsumerGroup | None) -> None:
        """Undo a heartbeat whose records were not written (no later write was issued): the group is as
        before it, as Kafka's coordinator reverts its in-memory state to the last committed offset. Timers
        of a member the revert drops find it gone and do nothing."""
        if before is None or snapshot is None:
            self.groups.pop(group_id, None)
        else:
            for f in fields(ConsumerGroup):
                setattr(before, f.name, getattr(snapshot, f.name))
            self.groups[group_id] = before
        self._event("consumer_group_reverted", group=group_id)

    # ============================================================================= persistence
    def write_group(self, group_id: str, done: Callable[[int], None] | None = None) -> None:
        """Append what changed in ``group_id`` since its last write (tombstones if it is gone); ``done`` gets
        the error code once the append is acknowledged (at once when nothing changed or there is no store).
        A failed write leaves the group's image unknown, so the next one rewrites every record and
        tombstones every key it no longer has."""
        group = self.groups.get(group_id)
        cache = self._encoded.setdefault(group_id, {})
        new = {} if group is None else group_image(group, self.topic_id, cache)
        if group is None:
            self._encoded.pop(group_id, None)
        old = self._written.get(group_id, {})
        records = self._prefix.pop(group_id, []) + image_changes(old, new)
        store = self.coordinator.store
        self._write_seq[group_id] = self._write_seq.get(group_id, 0) + 1
        if not records or store is None:
            self._written[group_id] = new
            if done is not None:
                done(NO_ERROR)
            return
        if new:
            self._written[group_id] = new
        else:
            self._written.pop(group_id, None)

        def appended(code: int) -> None:
            if code != NO_ERROR:
                self._event("consumer_group_write_failed", group=group_id, error=code)
                if self.groups.get(group_id) is group:
                    self._written[group_id] = {k: b"" for k in old.keys() | new.keys()}
            if done is not None:
                done(code)

        store.store_consumer_group_records(group_id, records, appended)

    def load_group(self, group: ConsumerGroup, image: Image) -> None:
        """Install a group rebuilt from ``__consumer_offsets`` (``image``: its records there). Every member's
        session timer starts afresh, and a member still revoking gets its rebalance timer back, as in
        Kafka's ``onLoaded``: live members keep their epochs and assignments."""
        if group.group_id in self.groups:
            return
        self.groups[group.group_id] = group
        self._written[group.group_id] = image
        self._event("consumer_group_loaded", group=group.group_id, epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    members={m.member_id: m.member_epoch for m in group.members.values()})  # fmt: skip
        for m in group.members.values():
            self._schedule_session_timeout(group, m.member_id)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group, m)

    def unload_group(self, group_id: str) -> None:
        """This broker no longer coordinates the group: its timers stop and it is forgotten here."""
        group = self.groups.pop(group_id, None)
        self._written.pop(group_id, None)
        self._encoded.pop(group_id, None)
        if group is None:
            return
        for mid in list(group.members):
            self._cancel(self._session_timers, group, mid)
            self._cancel(self._rebalance_timers, group, mid)
            self.classic.cancel_all(group, mid)
        self._event("consumer_group_unloaded", group=group_id)

    def _validate(self, req: ConsumerGroupHeartbeatRequest) -> None:
        def invalid(why: str) -> _Reject:
            return _Reject(InvalidRequestError.code, why)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise _Reject(
                UnsupportedAssignorError.code,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.assignors)}.",
            )
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                raise _Reject(InvalidRegularExpressionError.code, f"SubscribedTopicRegex: {e}") from None

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str
    ) -> ConsumerGroupHeartbeatResponse:
        self._validate(req)
        classic = self.coordinator.groups.get(req.group_id)
        if classic is not None and classic.members:
            self._upgrade(classic, req)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.groups.get(req.group_id)
        if group is None:
            if not joining:
                raise _Reject(GroupIdNotFoundError.code, f"Group {req.group_id} not found.")
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
        member_id = req.member_id or str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise _Reject(GroupMaxSizeReachedError.code, f"The consumer group has reached its maximum "
                          f"capacity of {self.config.max_size} members.")  # fmt: skip
        owned = self._owned(req)
        member = self._get_member(group, req, member_id, joining, owned)
        is_new = member.member_id not in group.members
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
            ),
            server_assignor=req.server_assignor
            if req.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=(
                frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                req.subscribed_topic_regex
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=client_id,
            client_host=client_host,
            classic=None,  # it speaks the consumer protocol now
        )
        self._update_member(
            group,
            updated,
            is_new
            or (
                (updated.subscribed_topic_names, updated.subscribed_topic_regex, updated.server_assignor)
                != (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
            ),
        )
        reconciled = self._reconcile(group, updated, owned)
        self._schedule_session_timeout(group, reconciled.member_id)
        full = joining or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and owned is not None
        )
        changed = reconciled.assigned != member.assigned or is_new
        return ConsumerGroupHeartbeatResponse(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=self._assignment(reconciled.assigned) if full or changed else None,
        )

    def _upgrade(self, classic: GroupMetadata, req: ConsumerGroupHeartbeatRequest) -> None:
        """A heartbeat to a classic group with members: a joining one converts it (migration.py) if the
        policy and the group allow; anything else is GROUP_ID_NOT_FOUND, as in Kafka."""
        gid = classic.group_id
        why = (
            "only a joining member converts a group"
            if req.member_epoch != JOIN_GROUP_MEMBER_EPOCH
            else can_upgrade(classic, self.config.migration_policy, self.config.max_size)
        )
        if why is None:
            try:
                group = from_classic(classic)
            except MigrationError as e:
                why = str(e)
        if why is not None:
            self._event("consumer_group_upgrade_refused", group=gid, reason=why)
            raise _Reject(GroupIdNotFoundError.code, f"Group {gid} is not a consumer group.")
        self.coordinator.detach_classic_group(gid)
        self.groups[gid] = group
        self._prefix[gid] = [(encode_group_metadata_key(gid), None)]
        self._event("consumer_group_converted", group=gid, to="consumer", epoch=group.group_epoch,
                    members=sorted(group.members))  # fmt: skip
        for mid in group.members:
            self._schedule_session_timeout(group, mid)

    def _downgrade(self, group: ConsumerGroup, leaving: str, reason: str) -> None:
        """The last consumer-protocol member leaves and classic members remain: a classic group again."""
        classic = to_classic(group, leaving, self.coordinator.clock.now_ms())
        for mid in list(group.members):
            self._cancel(self._session_timers, group, mid)
            self._cancel(self._rebalance_timers, group, mid)
            self.classic.cancel_all(group, mid)
        del self.groups[group.group_id]
        self._event("consumer_group_converted", group=group.group_id, to="classic", left=leaving,
                    reason=reason, generation=classic.generation_id)  # fmt: skip
        self.write_group(group.group_id)
        self.coordinator.adopt_classic_group(
            classic, f"downgrade of {group.group_id} from consumer to classic"
        )

    def _get_member(
        self,
        group: ConsumerGroup,
        req: ConsumerGroupHeartbeatRequest,
        member_id: str,
        joining: bool,
        owned: frozenset[GroupPartition] | None,
    ) -> ConsumerGroupMember:
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if joining:
                    self._event("consumer_group_join", group=group.group_id, member=member_id)
                    return ConsumerGroupMember(member_id)
                raise _Reject(UnknownMemberIdError.code, f"Member {member_id} is not a member of the group.")
            if not joining:
                self._check_epoch(member, req.member_epoch, owned)
            return member
        holder_id = group.static_members.get(req.instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if joining:
            if holder is None:
                self._event("consumer_group_join", group=group.group_id, member=member_id,
                            instance=req.instance_id)  # fmt: skip
                return ConsumerGroupMember(member_id, instance_id=req.instance_id)
            if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not holder.uses_classic_protocol:
                # A classic static member is replaced at once (a rolling upgrade of static members), as in
                # Kafka; a consumer-protocol one only after it left with epoch -2.
                raise _Reject(UnreleasedInstanceIdError.code, f"Static member {member_id} with instance id "
                              f"{req.instance_id} cannot join: the instance id is owned by {holder.member_id}.")  # fmt: skip
            self._cancel(self._session_timers, group, holder.member_id)
            self._cancel(self._rebalance_timers, group, holder.member_id)
            self._event("consumer_group_static_rejoin", group=group.group_id, member=member_id,
                        instance=req.instance_id, replaces=holder.member_id)  # fmt: skip
            return group.replace_static_member(holder, member_id)
        if holder is None:
            raise _Reject(UnknownMemberIdError.code, f"Instance id {req.instance_id} is unknown.")
        if holder.member_id != member_id:
            raise _Reject(FencedInstanceIdError.code, f"Static member {member_id} with instance id "
                          f"{req.instance_id} was fenced by member {holder.member_id}.")  # fmt: skip
        self._check_epoch(holder, req.member_epoch, owned)
        return holder

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember, epoch: int, owned: frozenset[GroupPartition] | None
    ) -> None:
        if epoch > member.member_epoch or (
            epoch < member.member_epoch
            and (epoch != member.previous_member_epoch or owned is None or not owned <= member.assigned)
        ):
            raise _Reject(FencedMemberEpochError.code, f"The member epoch {epoch} is not the coordinator's "
                          f"({member.member_epoch}); the member must abandon its partitions and rejoin.")  # fmt: skip

    def _owned(self, req: ConsumerGroupHeartbeatRequest) -> frozenset[GroupPartition] | None:
        if req.topic_partitions is None:
            return None
        tid = self.topic_id
        names = {tid(t): t for t in self.topics()}
        group = self.groups.get(req.group_id)
        if group is not None:
            names.update({tid(t): t for t, _ in group.partition_owners})
        names.pop(NO_TOPIC_ID, None)
        return frozenset(
            (names[tp.topic_id], p)
            for tp in req.topic_partitions
            if tp.topic_id in names
            for p in tp.partitions
        )

    def _assignment(self, assigned: frozenset[GroupPartition]) -> ConsumerGroupAssignment:
        return ConsumerGroupAssignment(
            topic_partitions=tuple(
                ConsumerGroupTopicPartitions(topic_id=self.topic_id(t), partitions=tuple(sorted(ps)))
                for t, ps in sorted(nest(assigned).items())
            )
        )

    # ============================================================================= assignment
    def _subscriptions(self, group: ConsumerGroup) -> dict[str, frozenset[str]]:
        topics = self.topics()
        out = {}
        for m in group.members.values():
            subs = {t for t in m.subscribed_topic_names if t in topics}
            if m.subscribed_topic_regex is not None:
                pattern = re.compile(m.subscribed_topic_regex)
                subs |= {t for t in topics if pattern.fullmatch(t)}
            out[m.member_id] = frozenset(subs)
        return out

    def subscribed_topic_names(self, group_id: str) -> frozenset[str]:
        """The topics the members of consumer group ``group_id`` subscribe to, by name or by a regex matching
        an existing topic (none if it is no consumer group)."""
        group = self.groups.get(group_id)
        if group is None:
            return frozenset()
        names = {t for m in group.members.values() for t in m.subscribed_topic_names}
        return frozenset(names.union(*self._subscriptions(group).values()))

    def _subscribed_partitions(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self.topics()
        return {t: topics[t] for s in self._subscriptions(group).values() for t in s}

    def _assignor_name(self, group: ConsumerGroup) -> str:
        """The members' most wanted server assignor, else the broker's first (Kafka's preferred assignor)."""
        chosen = Counter(m.server_assignor for m in group.members.values() if m.server_assignor is not None)
        return chosen.most_common(1)[0][0] if chosen else self.config.assignors[0]

    def _compute_target(self, group: ConsumerGroup) -> None:
        name = self._assignor_name(group)
        previous = {mid: nest(tps) for mid, tps in group.target.items()}
        target = ASSIGNORS[name](self._subscriptions(group), self.topics(), previous)
        group.target = {mid: frozenset(flatten(target.get(mid, {}))) for mid in group.members}
        group.assignment_epoch = group.group_epoch
        self._event("consumer_group_target", group=group.group_id, epoch=group.assignment_epoch, assignor=name,
                    target={mid: sorted(f"{t}-{p}" for t, p in tps) for mid, tps in sorted(group.target.items())})  # fmt: skip

    def _update_member(
        self, group: ConsumerGroup, updated: ConsumerGroupMember, subscription_changed: bool, **event: Any
    ) -> None:
        """Put ``updated`` in the group. A changed subscription, or a change in the partitions the group's
        subscriptions resolve to, bumps the group epoch; a group epoch past the target assignment's
        computes a new target. ``event``: extra fields of the epoch event."""
        group.update_member(updated)
        bump = subscription_changed
        partitions = self._subscribed_partitions(group)
        if partitions != group.subscribed_partitions:
            group.subscribed_partitions = partitions
            bump = True
        if bump:
            group.group_epoch += 1
            self._event("consumer_group_epoch", group=group.group_id, epoch=group.group_epoch,
                        member=updated.member_id, members=len(group.members), **event)  # fmt: skip
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerGroupMember, owned: frozenset[GroupPartition] | None
    ) -> ConsumerGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(group, member, owned)
        if updated == member:
            return member
        group.update_member(updated)
        self._event("consumer_group_member", group=group.group_id, member=updated.member_id,
                    epoch=updated.member_epoch, state=updated.state.value,
                    assigned=sorted(f"{t}-{p}" for t, p in updated.assigned),
                    revoking=sorted(f"{t}-{p}" for t, p in updated.pending_revocation))  # fmt: skip
        if updated.uses_classic_protocol:
            pass  # a classic member has join and sync timers instead (classic_members.py), as in Kafka
        elif updated.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_rebalance_timeout(group, updated)
        else:
            self._cancel(self._rebalance_timers, group, updated.member_id)
        return updated

    # ============================================================================= describe / list
    def describe(self, group_ids: tuple[str, ...]) -> list[ConsumerGroupDescribedGroup]:
        """ConsumerGroupDescribe: a group not of this type (classic, or unknown) is GROUP_ID_NOT_FOUND."""
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                out.append(ConsumerGroupDescribedGroup(group_id=gid, error_code=GroupIdNotFoundError.code))
                continue
            members = tuple(
                ConsumerGroupDescribeMember(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=_described(m.assigned, self.topic_id),
                    target_assignment=_described(group.target.get(m.member_id, frozenset()), self.topic_id),
                )
                for m in group.members.values()
            )
            out.append(
                ConsumerGroupDescribedGroup(
                    group_id=gid,
                    group_state=group.state().value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=self._assignor_name(group),
                    members=members,
                )
            )
        return out

    # ============================================================================= offset commits
    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        *,
        transactional: bool = False,
        modern: bool = True,
    ) -> int | None:
        """The error of an OffsetCommit (or, ``transactional``, a TxnOffsetCommit) to ``group_id`` if it is a
        consumer group (None if it is not one); ``modern``: the OffsetCommit came in v9 or later."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id and not group.members:
            return NO_ERROR  # a commit from outside the group (assign(), admin) while nobody consumes
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            # TxnOffsetCommit before v3 carries no group metadata, and a producer may send none: as in
            # Kafka (KAFKA-18060), such a commit is not checked against the members.
            return NO_ERROR
        member = group.members.get(member_id)
        if member is None:
            return UnknownMemberIdError.code
        if not transactional and not modern and not member.uses_classic_protocol:
            return _UNSUPPORTED_VERSION  # a KIP-848 member commits with OffsetCommit v9+, as in Kafka
        if instance_id is not None and member.instance_id != instance_id:
            return FencedInstanceIdError.code
        if member_epoch != member.member_epoch:
            # A classic member knows generations, not epochs: Kafka answers it ILLEGAL_GENERATION.
            if transactional or member.uses_classic_protocol:
                # TxnOffsetCommit has no STALE_MEMBER_EPOCH (its clients know ILLEGAL_GENERATION as an
                # abortable error), and a classic member knows generations, not epochs.
                return IllegalGenerationError.code
            return StaleMemberEpochError.code
        return NO_ERROR

    # ============================================================================= leaving and fencing
    def _leave(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise _Reject(GroupIdNotFoundError.code, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise _Reject(
                    UnknownMemberIdError.code, f"Member {req.member_id} is not a member of the group."
                )
        else:
            holder_id = group.static_members.get(req.instance_id)
            member = group.members.get(holder_id) if holder_id is not None else None
            if member is None:
                raise _Reject(UnknownMemberIdError.code, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise _Reject(FencedInstanceIdError.code, f"Static member {req.member_id} with instance id "
                              f"{req.instance_id} was fenced by member {member.member_id}.")  # fmt: skip
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for a while: it keeps its partitions (and its target) until its session expires.
                left = replace(
                    member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH), pending_revocation=frozenset()
                )
                group.update_member(left)
                self._cancel(self._rebalance_timers, group, member.member_id)
                self._event("consumer_group_static_leave", group=group.group_id, member=member.member_id,
                            instance=req.instance_id)  # fmt: skip
                return ConsumerGroupHeartbeatResponse(
                    error_code=NO_ERROR,
                    member_id=member.member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                )
        self.fence_member(group, member.member_id, "left the group")
        return ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)

    def fence_member(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        """Remove the member: its partitions are free at once and the group epoch bumps. If it was the last
        one using the consumer protocol and classic members remain, the group becomes classic instead."""
        if member_id in group.members and can_downgrade(
            group, member_id, self.config.migration_policy, self.coordinator.config.max_size
        ):
            self._downgrade(group, member_id, reason)
            return
        if group.remove_member(member_id) is None:
            return
        self._cancel(self._session_timers, group, member_id)
        self._cancel(self._rebalance_timers, group, member_id)
        self.classic.cancel_all(group, member_id)
        group.group_epoch += 1
        self._event("consumer_group_member_fenced", group=group.group_id, member=member_id, reason=reason,
                    epoch=group.group_epoch, members=len(group.members))  # fmt: skip

    def delete_empty_group(self, group_id: str, *, deleted: bool = False) -> None:
        """Drop a consumer group with no members (a classic group takes its id, or DeleteGroups; the offsets
        are not this protocol's), writing tombstones for its records."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]
            if deleted:
                self._event("consumer_group_deleted", group=group_id)
            else:
                self._event("consumer_group_converted", group=group_id, to="classic")
            self.write_group(group_id)

    # ============================================================================= timers
    def _cancel(self, timers: dict[tuple[str, str], int], group: ConsumerGroup, member_id: str) -> None:
        self.coordinator._cancel_timer(timers.pop((group.group_id, member_id), None))

    def _schedule_session_timeout(self, group: ConsumerGroup, member_id: str) -> None:
        self._cancel(self._session_timers, group, member_id)

        def expire() -> None:
            self._session_timers.pop((group.group_id, member_id), None)
            if self.groups.get(group.group_id) is group:
                self.fence_member(group, member_id, "session timeout")
                self.write_group(group.group_id)

        key = (group.group_id, member_id)
        member = group.members.get(member_id)
        timeout = self.config.session_timeout_ms
        if member is not None and member.classic is not None:
            timeout = member.classic.session_timeout_ms  # a classic member keeps its own session.timeout.ms
        self._session_timers[key] = self.coordinator._set_timer(timeout, expire)

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._cancel(self._rebalance_timers, group, member.member_id)
        epoch = member.member_epoch

        def expire() -> None:
            self._rebalance_timers.pop((group.group_id, member.member_id), None)
            current = group.members.get(member.member_id)
            if (
                self.groups.get(group.group_id) is group
                and current is not None
                and current.member_epoch == epoch
            ):
                self.fence_member(
                    group, member.member_id, f"did not revoke within {member.rebalance_timeout_ms} ms"
                )
                self.write_group(group.group_id)

        key = (group.group_id, member.member_id)
        self._rebalance_timers[key] = self.coordinator._set_timer(member.rebalance_timeout_ms, expire)

    def shutdown(self) -> None:
        for timers in (self._session_timers, self._rebalance_timers):
            for tid in timers.values():
                self.coordinator._cancel_timer(tid)
            timers.clear()
        self.classic.shutdown()
        self.groups.clear()
        self._written.clear()
        self._encoded.clear()


def _copy(group: ConsumerGroup) -> ConsumerGroup:
    """A copy whose maps are the group's at this moment (members are immutable, so a shallow copy does)."""
    return replace(
        group,
        members=dict(group.members),
        static_members=dict(group.static_members),
        target=dict(group.target),
        partition_owners=dict(group.partition_owners),
        subscribed_partitions=dict(group.subscribed_partitions),
    )


def _described(
    partitions: frozenset[GroupPartition], topic_id: Callable[[str], uuid.UUID]
) -> DescribedAssignment:
    return DescribedAssignment(
        topic_partitions=tuple(
            DescribedTopicPartitions(topic_id=topic_id(t), topic_name=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(nest(partitions).items())
        )
    )


__all__ = ["ConsumerGroupConfig", "ConsumerGroupProtocol", "topic_id"]
