"""Online migration between the classic group protocol and KIP-848's consumer protocol (Kafka's
``group.consumer.migration.policy`` and the classic-member paths of its ``GroupMetadataManager``).

A group moves while it has members, so a fleet can be restarted one consumer at a time:

- **upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a classic group that has members turns it into a
  consumer group, if the policy allows upgrades, the group uses the ``consumer`` embedded protocol and its
  size fits ``group.consumer.max.size``. Each classic member becomes a member at epoch = the generation,
  Stable, with its last assignment as both its current and its target assignment (``from_classic``); the
  classic record is tombstoned and the consumer group's records written. Otherwise the heartbeat gets
  GROUP_ID_NOT_FOUND, as in Kafka.
- **classic members of a consumer group** keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup, translated
  to the consumer group (``ClassicMembers``): a JoinGroup updates the member from its subscription, moves
  the group epoch and target as a heartbeat would, and reconciles with the partitions the subscription says
  it owns; the response's generation is the member epoch and SyncGroup hands out its assigned partitions in
  the consumer protocol's assignment format. Heartbeat answers REBALANCE_IN_PROGRESS while the member has to
  rejoin (the group epoch moved past it, it must revoke, or partitions it waits for were freed), and a member
  that then does not rejoin within its rebalance timeout, or does not sync after joining, is fenced.
  OffsetCommit checks the generation against the member epoch (ILLEGAL_GENERATION for a classic member).
- **downgrade**: when the last member using the consumer protocol leaves a group whose remaining members all
  speak the classic protocol (policy allowing downgrades, the rest within ``group.max.size``), it becomes a
  classic group again (``to_classic``): same members, generation = the group epoch, each member's assigned
  partitions as its assignment, and a rebalance begins.

Policies (case-insensitive): ``bidirectional`` (both, Kafka's default), ``upgrade``, ``downgrade``,
``disabled``. Joining an empty group of either kind always converts it, whatever the policy.
"""

from __future__ import annotations

import contextlib
from enum import Enum

from kafkalite.broker.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    GroupPartition,
    IllegalStateError,
    MemberState,
)
from kafkalite.broker.group.member import GroupMetadata, GroupState, MemberMetadata
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.consumer_group_records import ClassicMemberMetadata
from kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
)


class MigrationPolicy(Enum):
    """Kafka's ``ConsumerGroupMigrationPolicy``."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, value: str) -> MigrationPolicy:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise ValueError(
                f"group.consumer.migration.policy={value!r} is not one of {', '.join(p.value for p in cls)}"
            ) from None

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class MigrationError(Exception):
    """The embedded consumer protocol of a member could not be read: the group cannot convert."""


def decode_subscription(protocols: tuple[tuple[str, bytes], ...]) -> ConsumerSubscription:
    """The subscription a classic member joined with (every protocol carries the same one: Kafka reads the
    first)."""
    if not protocols:
        raise MigrationError("the member names no protocol")
    try:
        return ConsumerSubscription.decode(protocols[0][1])
    except ConsumerProtocolError as e:
        raise MigrationError(f"malformed consumer protocol subscription: {e}") from None


def owned_partitions(sub: ConsumerSubscription) -> frozenset[GroupPartition]:
    return frozenset((tp.topic, tp.partition) for tp in sub.owned_partitions)


def encode_assignment(member: ConsumerGroupMember) -> bytes:
    """The member's assigned partitions as a SyncGroup assignment, in the version its subscription has."""
    assert member.classic is not None
    version = 3
    if member.classic.supported_protocols:
        with contextlib.suppress(ConsumerProtocolError):
            version = min(3, ConsumerSubscription.decode(member.classic.supported_protocols[0][1]).version)
    parts = tuple(TopicPartition(t, p) for t, p in sorted(member.assigned))
    return ConsumerAssignment(parts).encode(version)


def can_upgrade(classic: GroupMetadata, policy: MigrationPolicy, max_size: int) -> str | None:
    """Why ``classic`` (with members) cannot become a consumer group now; None if it can."""
    if not policy.upgrades:
        return "the online upgrade is disabled"
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or classic.protocol_name is None:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def from_classic(classic: GroupMetadata) -> ConsumerGroup:
    """The consumer group a classic group becomes (Kafka's ``ConsumerGroup.fromClassicGroup``): each member
    at epoch = generation, Stable, its last assignment its current and target one. Raises MigrationError if
    a member's subscription or assignment cannot be read."""
    gen = classic.generation_id
    group = ConsumerGroup(classic.group_id, group_epoch=gen, assignment_epoch=gen)
    assert classic.protocol_name is not None
    for m in classic.members.values():
        try:
            sub = ConsumerSubscription.decode(m.metadata(classic.protocol_name))
            assignment = ConsumerAssignment.decode(m.assignment) if m.assignment else ConsumerAssignment(())
        except (ConsumerProtocolError, KeyError) as e:
            raise MigrationError(f"member {m.member_id}: malformed embedded consumer protocol: {e}") from None
        assigned = frozenset((tp.topic, tp.partition) for tp in assignment.partitions)
        member = ConsumerGroupMember(
            m.member_id,
            member_epoch=gen,
            previous_member_epoch=gen,
            state=MemberState.STABLE,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(sub.topics),
            assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.target[m.member_id] = assigned
        try:
            group.update_member(member)
        except IllegalStateError as e:  # two members hold one partition: no consistent assignment to keep
            raise MigrationError(str(e)) from None
    return group


def can_downgrade(group: ConsumerGroup, leaving: str, policy: MigrationPolicy, classic_max_size: int) -> bool:
    """Kafka's ``validateOnlineDowngradeWithFencedMember``: ``leaving`` is the last consumer-protocol member
    and classic members remain."""
    rest = [m for mid, m in group.members.items() if mid != leaving]
    return (
        bool(rest)
        and all(m.uses_classic_protocol for m in rest)
        and policy.downgrades
        and len(rest) <= classic_max_size
    )


def to_classic(group: ConsumerGroup, leaving: str, now_ms: int) -> GroupMetadata:
    """The classic group a consumer group becomes without ``leaving`` (Kafka's
    ``ClassicGroup.fromConsumerGroup``): generation = group epoch, the first member's first protocol, its
    leader the first member, each member's assigned partitions as its assignment; Stable until the
    coordinator starts the rebalance."""
    rest = [m for mid, m in group.members.items() if mid != leaving]
    first = rest[0]
    assert first.classic is not None and first.classic.supported_protocols
    protocol = first.classic.supported_protocols[0][0]
    classic = GroupMetadata(
        group.group_id,
        state=GroupState.STABLE,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=protocol,
        leader_id=first.member_id,
        state_timestamp_ms=now_ms,
    )
    for m in rest:
        assert m.classic is not None
        classic.members[m.member_id] = MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.classic.session_timeout_ms,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=tuple(m.classic.supported_protocols),
            assignment=encode_assignment(m),
        )
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    return classic


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's ``supportsClassicProtocols``: the ``consumer`` type, and (if the group has classic members)
    a protocol every one of them supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    classic = [m for m in group.members.values() if m.classic is not None]
    if not classic:
        return True
    common = set.intersection(*({n for n, _ in m.classic.supported_protocols} for m in classic if m.classic))
    return bool(names & common)


def waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: some partition of its target is still owned by another."""
    target = group.target.get(member.member_id, frozenset())
    return any(group.owner_of(tp) not in (None, member.member_id) for tp in target - member.assigned)


__all__ = [
    "MigrationError",
    "MigrationPolicy",
    "can_downgrade",
    "can_upgrade",
    "decode_subscription",
    "encode_assignment",
    "from_classic",
    "owned_partitions",
    "supports_classic_protocols",
    "to_classic",
    "waiting_on_unreleased",
]
