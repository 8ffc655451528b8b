"""A consumer group as ``__consumer_offsets`` records, and back (Kafka's ``GroupCoordinatorRecordHelpers`` for
the consumer group records, and the replay of them when a coordinator loads its partition).

``group_image`` renders a group as the records that describe it now, keyed by their encoded keys, in the
order Kafka writes them: each member's subscription, the subscription metadata, the group epoch, each
member's target, the assignment epoch, each member's current assignment. ``image_changes`` turns two
images into what has to be appended: tombstones first (a member's current assignment, its target, its
subscription, then the group's assignment epoch, subscription metadata and epoch: the order Kafka's
``removeMember`` and ``createGroupTombstoneRecords`` use), then every record whose value changed. So a
heartbeat that only moved one member writes that member's records; a member that leaves writes its three
tombstones and the new group epoch; a deleted group writes tombstones for everything.

``ConsumerGroupReplay`` takes the records of a partition in log order (last value per key wins, a
tombstone deletes) and rebuilds the groups that have an epoch record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kafkalite.broker.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    GroupPartition,
    MemberState,
    nest,
)
from kafkalite.protocol import consumer_group_records as cgr
from kafkalite.protocol.metadata import NO_TOPIC_ID

Image = dict[bytes, bytes]
"""Encoded key -> encoded value: the records that describe one group."""

MEMBER_STATE_BYTES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
"""Kafka's ``MemberState`` values as the current assignment record stores them."""
_STATE_OF_BYTE = {b: s for s, b in MEMBER_STATE_BYTES.items()}

# Tombstones go in this order of key version: member records (current, target, subscription) before the
# group's (assignment epoch, subscription metadata, epoch), so a replay never sees a group without an epoch
# that still has members.
_TOMBSTONE_ORDER = (8, 7, 6, 5, 4, 3)


def _partitions(tps: frozenset[GroupPartition], topic_id: Callable[[str], uuid.UUID]) -> cgr.TopicPartitions:
    return tuple((topic_id(t), tuple(sorted(ps))) for t, ps in sorted(nest(tps).items()))


def member_metadata_value(member: ConsumerGroupMember) -> cgr.ConsumerGroupMemberMetadataValue:
    return cgr.ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        classic_member_metadata=member.classic,
    )


Record = tuple[bytes, bytes]
"""An encoded (key, value)."""


def _encoded(key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue) -> Record:
    return cgr.encode_key(key), cgr.encode_value(value)


def _member_records(
    gid: str, m: ConsumerGroupMember, topic_id: Callable[[str], uuid.UUID]
) -> tuple[Record, Record]:
    """The member's subscription record and its current assignment record."""
    current = cgr.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch,
        previous_member_epoch=m.previous_member_epoch,
        state=MEMBER_STATE_BYTES[m.state],
        assigned_partitions=_partitions(m.assigned, topic_id),
        partitions_pending_revocation=_partitions(m.pending_revocation, topic_id),
    )
    return (
        _encoded(cgr.ConsumerGroupMemberMetadataKey(gid, m.member_id), member_metadata_value(m)),
        _encoded(cgr.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id), current),
    )


def group_image(
    group: ConsumerGroup, topic_id: Callable[[str], uuid.UUID], cache: dict[Any, Any] | None = None
) -> Image:
    """The records that describe ``group`` now (see the module docstring for the order). ``cache`` keeps
    the encoded records of members and targets between calls: a heartbeat changes one member, so only its
    records are encoded again (members are immutable values, so an unchanged one is found as it is)."""
    gid = group.group_id
    old = {} if cache is None else cache
    used: dict[Any, Any] = {}
    members: list[tuple[Record, Record]] = []
    for m in group.members.values():
        found = old.get(m)
        if found is None:
            found = _member_records(gid, m, topic_id)
        used[m] = found
        members.append(found)
    targets: list[Record] = []
    for mid, target in group.target.items():
        tkey = (mid, target)
        found = old.get(tkey)
        if found is None:
            value = cgr.ConsumerGroupTargetAssignmentMemberValue(_partitions(target, topic_id))
            found = _encoded(cgr.ConsumerGroupTargetAssignmentMemberKey(gid, mid), value)
        used[tkey] = found
        targets.append(found)
    if cache is not None:
        cache.clear()
        cache.update(used)
    topics = tuple(
        cgr.TopicMetadata(topic_id(t), t, n) for t, n in sorted(group.subscribed_partitions.items())
    )
    records = [subscription for subscription, _current in members]
    records.append(
        _encoded(cgr.ConsumerGroupPartitionMetadataKey(gid), cgr.ConsumerGroupPartitionMetadataValue(topics))
    )
    records.append(
        _encoded(cgr.ConsumerGroupMetadataKey(gid), cgr.ConsumerGroupMetadataValue(group.group_epoch))
    )
    records += targets
    records.append(
        _encoded(
            cgr.ConsumerGroupTargetAssignmentMetadataKey(gid),
            cgr.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch),
        )
    )
    records += [current for _subscription, current in members]
    return dict(records)


def image_changes(old: Image, new: Image) -> list[tuple[bytes, bytes | None]]:
    """The records that turn the log's ``old`` image of a group into ``new``: tombstones, then changes."""
    gone = [k for k in old if k not in new]
    gone.sort(key=lambda k: _TOMBSTONE_ORDER.index(int.from_bytes(k[:2], "big")))
    out: list[tuple[bytes, bytes | None]] = [(k, None) for k in gone]
    out += [(k, v) for k, v in new.items() if old.get(k) != v]
    return out


def _resolve(
    tps: cgr.TopicPartitions, names: Mapping[uuid.UUID, str], unknown: set[str]
) -> frozenset[GroupPartition]:
    """Topic ids to names; an id ``names`` lacks goes to ``unknown`` and its partitions are left out."""
    found = set()
    for tid, parts in tps:
        name = names.get(tid)
        if name is None:
            unknown.add(str(tid))
            continue
        found.update((name, p) for p in parts)
    return frozenset(found)


class ConsumerGroupReplay:
    """The consumer group records of one ``__consumer_offsets`` partition, replayed in log order."""

    def __init__(self) -> None:
        self._records: dict[str, dict[cgr.ConsumerGroupKey, cgr.ConsumerGroupValue]] = {}

    def replay(self, key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue | None) -> None:
        records = self._records.setdefault(key.group, {})
        if value is None:
            records.pop(key, None)
            if not records:
                del self._records[key.group]
        else:
            records[key] = value

    def image(self, group_id: str) -> Image:
        """The group's records as the log holds them now (what the next write is compared with)."""
        return {cgr.encode_key(k): cgr.encode_value(v) for k, v in self._records.get(group_id, {}).items()}

    def groups(
        self, topic_names: Mapping[uuid.UUID, str], log_event: Callable[..., Any] | None = None
    ) -> dict[str, ConsumerGroup]:
        """Every group with an epoch record, rebuilt. A topic id is named by the group's subscription
        metadata, else by ``topic_names`` (the broker's metadata); partitions of a topic neither knows (it
        was deleted) are left out."""
        out = {}
        for gid, records in sorted(self._records.items()):
            epoch = records.get(cgr.ConsumerGroupMetadataKey(gid))
            if not isinstance(epoch, cgr.ConsumerGroupMetadataValue):
                continue
            names = dict(topic_names)
            meta = records.get(cgr.ConsumerGroupPartitionMetadataKey(gid))
            subscribed: dict[str, int] = {}
            if isinstance(meta, cgr.ConsumerGroupPartitionMetadataValue):
                for t in meta.topics:
                    names[t.topic_id] = t.topic_name
                    subscribed[t.topic_name] = t.num_partitions
            names.pop(NO_TOPIC_ID, None)
            unknown: set[str] = set()

            def resolve(tps: cgr.TopicPartitions, names=names, unknown=unknown) -> frozenset[GroupPartition]:
                return _resolve(tps, names, unknown)

            target_epoch = records.get(cgr.ConsumerGroupTargetAssignmentMetadataKey(gid))
            group = ConsumerGroup(
                gid,
                group_epoch=epoch.epoch,
                assignment_epoch=target_epoch.assignment_epoch
                if isinstance(target_epoch, cgr.ConsumerGroupTargetAssignmentMetadataValue)
                else 0,
                subscribed_partitions=subscribed,
            )
            for key, value in records.items():
                if isinstance(key, cgr.ConsumerGroupTargetAssignmentMemberKey):
                    assert isinstance(value, cgr.ConsumerGroupTargetAssignmentMemberValue)
                    group.target[key.member_id] = resolve(value.topic_partitions)
            for key, value in records.items():
                if not isinstance(key, cgr.ConsumerGroupMemberMetadataKey):
                    continue
                assert isinstance(value, cgr.ConsumerGroupMemberMetadataValue)
                member = ConsumerGroupMember(
                    key.member_id,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    subscribed_topic_names=frozenset(value.subscribed_topic_names),
                    subscribed_topic_regex=value.subscribed_topic_regex,
                    server_assignor=value.server_assignor,
                    classic=value.classic_member_metadata,
                )
                current = records.get(cgr.ConsumerGroupCurrentMemberAssignmentKey(gid, key.member_id))
                if isinstance(current, cgr.ConsumerGroupCurrentMemberAssignmentValue):
                    member = replace(
                        member,
                        member_epoch=current.member_epoch,
                        previous_member_epoch=current.previous_member_epoch,
                        state=_STATE_OF_BYTE.get(current.state, MemberState.STABLE),
                        assigned=resolve(current.assigned_partitions),
                        pending_revocation=resolve(current.partitions_pending_revocation),
                    )
                group.update_member(member)
            if unknown and log_event is not None:
                log_event("consumer_group_unknown_topics", group=gid, topic_ids=sorted(unknown))
            out[gid] = group
        return out


__all__ = [
    "MEMBER_STATE_BYTES",
    "ConsumerGroupReplay",
    "Image",
    "group_image",
    "image_changes",
    "member_metadata_value",
]
