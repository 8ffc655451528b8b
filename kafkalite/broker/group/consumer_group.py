"""A consumer group of the KIP-848 protocol (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and
``CurrentAssignmentBuilder``): plain state and the reconciliation step, no timers, no I/O.

Three epochs order everything. The *group epoch* grows whenever membership or a subscription (or a
subscribed topic's partition count) changes. The *target assignment* is the assignor's answer for one group
epoch (its *assignment epoch*). Each member has a *member epoch*: the target epoch it has reconciled to.

A member moves to the target in steps (``reconcile``), as Kafka's ``CurrentAssignmentBuilder`` does:

- partitions it has that the target takes away are *pending revocation*: the member keeps its epoch and is
  told to give them up (``UNREVOKED_PARTITIONS``); it stays there until a heartbeat's owned partitions no
  longer include any of them;
- partitions the target gives it are handed over only once no other member owns them (every owned
  partition has an owner in ``partition_owners``); until then the member is ``UNRELEASED_PARTITIONS`` at the
  new epoch and gets the rest;
- otherwise it is ``STABLE`` at the target epoch.

So a partition never has two owners: ``assign_owner`` refuses one that is owned (IllegalStateError, a bug).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from kafkalite.broker.group.assignor import Assignment
from kafkalite.protocol.consumer_group_records import ClassicMemberMetadata

GroupPartition = tuple[str, int]


class MemberState(Enum):
    """Kafka's ``MemberState`` names."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState`` as DescribeGroups/ListGroups show it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def flatten(assignment: Mapping[str, frozenset[int]]) -> set[GroupPartition]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def nest(partitions: set[GroupPartition] | frozenset[GroupPartition]) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: frozenset[GroupPartition] = frozenset()
    """Partitions the member may use (its heartbeat response lists them)."""
    pending_revocation: frozenset[GroupPartition] = frozenset()
    """Partitions the member still owns but must give up before it moves on."""
    classic: ClassicMemberMetadata | None = None
    """Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group: its
    session timeout and the (assignor name, subscription) pairs it joined with."""

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        return dataclasses.replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def owned(self) -> frozenset[GroupPartition]:
        return self.assigned | self.pending_revocation

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """instance id -> member id."""
    target: dict[str, frozenset[GroupPartition]] = field(default_factory=dict)
    """The target assignment of ``assignment_epoch``, by member id."""
    partition_owners: dict[GroupPartition, tuple[str, int]] = field(default_factory=dict)
    """Each owned partition -> (member id, member epoch): Kafka's partition epochs, with the owner named."""
    subscribed_partitions: dict[str, int] = field(default_factory=dict)
    """Partition count of each subscribed topic when the group epoch was last bumped."""

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Install ``member`` (new or changed), moving the partition ownership with it."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned():
            self.assign_owner(tp, member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def replace_static_member(self, old: ConsumerGroupMember, new_member_id: str) -> ConsumerGroupMember:
        """A static member rejoins under a new member id: it takes over the old one's partitions and target."""
        target = self.target.get(old.member_id, old.assigned)
        self.remove_member(old.member_id)
        new = dataclasses.replace(old, member_id=new_member_id, member_epoch=0, previous_member_epoch=0)
        self.target[new_member_id] = target
        self.update_member(new)
        return new

    def assign_owner(self, tp: GroupPartition, member: ConsumerGroupMember) -> None:
        current = self.partition_owners.get(tp)
        if current is not None and current[0] != member.member_id:
            raise IllegalStateError(
                f"group {self.group_id}: partition {tp[0]}-{tp[1]} given to {member.member_id} while "
                f"{current[0]} (epoch {current[1]}) still owns it"
            )
        self.partition_owners[tp] = (member.member_id, member.member_epoch)

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned():
            if self.partition_owners.get(tp, ("",))[0] == member.member_id:
                del self.partition_owners[tp]

    def owner_of(self, tp: GroupPartition) -> str | None:
        found = self.partition_owners.get(tp)
        return None if found is None else found[0]


class IllegalStateError(Exception):
    """An internal invariant broke (two owners for one partition): a bug, never a client's fault."""


def reconcile(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    owned: frozenset[GroupPartition] | None,
) -> ConsumerGroupMember:
    """One step of ``member`` towards the group's target (Kafka's ``CurrentAssignmentBuilder.build``).
    ``owned`` is what the heartbeat reported (None: not sent, so nothing counts as revoked)."""
    epoch = group.assignment_epoch
    if member.state is MemberState.STABLE:
        if member.member_epoch == epoch:
            return member
        return _next(group, member, member.member_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        return _next(group, member, member.member_epoch + 1, owned)
    return _next(group, member, member.member_epoch, owned)


def _still_owns(owned: frozenset[GroupPartition] | None, revoking: frozenset[GroupPartition]) -> bool:
    return owned is None or bool(owned & revoking)


def _next(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    epoch: int,
    owned: frozenset[GroupPartition] | None,
) -> ConsumerGroupMember:
    target = group.target.get(member.member_id, frozenset())
    keep = member.assigned & target
    revoke = member.assigned - keep
    wanted = target - keep
    free = frozenset(tp for tp in wanted if group.owner_of(tp) in (None, member.member_id))
    unreleased = bool(wanted - free)
    if revoke and _still_owns(owned, revoke):
        return dataclasses.replace(
            member.with_epoch(epoch) if epoch != member.member_epoch else member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=keep,
            pending_revocation=revoke,
        )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    moved = (
        member.with_epoch(group.assignment_epoch) if group.assignment_epoch != member.member_epoch else member
    )
    return dataclasses.replace(moved, state=state, assigned=keep | free, pending_revocation=frozenset())


__all__ = [
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "GroupPartition",
    "IllegalStateError",
    "MemberState",
    "flatten",
    "nest",
    "reconcile",
]
