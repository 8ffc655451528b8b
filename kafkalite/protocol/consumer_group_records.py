"""The ``__consumer_offsets`` records of a KIP-848 consumer group, as Kafka's group coordinator writes them.

A consumer group is stored as several keyed records, so that one member's heartbeat rewrites only what it
changed. The key's int16 version says which record it is; keys use the classic encoding (int16-length
strings), values are version 0 of Kafka's flexible encoding (compact strings and arrays, a tagged-fields
section ending every struct):

====  ==========================================  =================================================
key   record (key fields)                         value v0
====  ==========================================  =================================================
3     ConsumerGroupMetadata (group)               ``Epoch`` (the group epoch)
4     ConsumerGroupPartitionMetadata (group)      ``Topics``: id, name, partition count of each
                                                  subscribed topic (the metadata the epoch saw)
5     ConsumerGroupMemberMetadata (group, member) instance id, rack, client id and host, subscribed
                                                  names and regex, rebalance timeout, server assignor
                                                  (tag 0: a classic member's session timeout and
                                                  protocols)
6     ConsumerGroupTargetAssignmentMetadata       ``AssignmentEpoch``
      (group)
7     ConsumerGroupTargetAssignmentMember         ``TopicPartitions``: the member's target (topic id,
      (group, member)                             partitions)
8     ConsumerGroupCurrentMemberAssignment        member epoch, previous epoch, state (int8),
      (group, member)                             assigned and pending-revocation partitions
====  ==========================================  =================================================

A null value (tombstone) deletes its key. Topics are named by id in the assignments, as in Kafka.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kafkalite.errors import CorruptRecordError
from kafkalite.protocol.codec.types import Reader, WireFormatError, Writer

CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8
VALUE_VERSION = 0

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""(topic id, partitions) pairs, as the assignment values hold them."""


# ------------------------------------------------------------------------------------------------ keys
@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)

KEY_TYPES: dict[int, type] = {
    CONSUMER_GROUP_METADATA_KEY_VERSION: ConsumerGroupMetadataKey,
    CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION: ConsumerGroupPartitionMetadataKey,
    CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION: ConsumerGroupMemberMetadataKey,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION: ConsumerGroupTargetAssignmentMetadataKey,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: ConsumerGroupTargetAssignmentMemberKey,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION: ConsumerGroupCurrentMemberAssignmentKey,
}
_KEY_VERSIONS = {t: v for v, t in KEY_TYPES.items()}
_MEMBER_KEYS = (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)


# ---------------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group (tagged field 0)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions = ()


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    """Kafka's ``MemberState`` byte: 0 stable, 1 unrevoked partitions, 2 unreleased partitions."""
    assigned_partitions: TopicPartitions = ()
    partitions_pending_revocation: TopicPartitions = field(default=())


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)


# --------------------------------------------------------------------------------------------- encoding
def encode_key(key: ConsumerGroupKey) -> bytes:
    """``version int16, group string`` (and ``member string`` for the per-member records)."""
    w = Writer()
    w.int16(_KEY_VERSIONS[type(key)])
    w.string(key.group)
    if isinstance(key, _MEMBER_KEYS):
        w.string(key.member_id)
    return bytes(w.buf)


def _write_partitions(w: Writer, tps: TopicPartitions) -> None:
    w.array_length(len(tps), compact=True)
    for tid, parts in tps:
        w.uuid(tid)
        w.array_length(len(parts), compact=True)
        for p in parts:
            w.int32(p)
        w.empty_tagged_fields()


def _write_strings(w: Writer, items: tuple[str, ...]) -> None:
    w.array_length(len(items), compact=True)
    for s in items:
        w.compact_string(s)


def encode_value(value: ConsumerGroupValue) -> bytes:
    """Version 0 of the value, in Kafka's flexible encoding."""
    w = Writer()
    w.int16(VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.array_length(len(value.topics), compact=True)
        for t in value.topics:
            w.uuid(t.topic_id)
            w.compact_string(t.topic_name)
            w.int32(t.num_partitions)
            w.array_length(0, compact=True)  # PartitionMetadata (racks): unused since Kafka 4.0
            w.empty_tagged_fields()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.compact_string(value.instance_id)
        w.compact_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        _write_strings(w, value.subscribed_topic_names)
        w.compact_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
        classic = value.classic_member_metadata
        if classic is None:
            w.empty_tagged_fields()
            return bytes(w.buf)
        inner = Writer()
        inner.int32(classic.session_timeout_ms)
        inner.array_length(len(classic.supported_protocols), compact=True)
        for name, metadata in classic.supported_protocols:
            inner.compact_string(name)
            inner.compact_bytes(metadata)
            inner.empty_tagged_fields()
        inner.empty_tagged_fields()
        w.uvarint(1)  # one tagged field: tag 0, its size, its bytes
        w.uvarint(0)
        w.uvarint(len(inner.buf))
        w.buf += inner.buf
        return bytes(w.buf)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_partitions(w, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        _write_partitions(w, value.assigned_partitions)
        _write_partitions(w, value.partitions_pending_revocation)
    else:
        raise TypeError(f"not a consumer group record value: {type(value).__name__}")
    w.empty_tagged_fields()
    return bytes(w.buf)


# --------------------------------------------------------------------------------------------- decoding
def decode_key(version: int, data: bytes) -> ConsumerGroupKey:
    """A key whose leading int16 ``version`` (3-8) was read by the caller; ``data`` is the whole key."""
    kind = KEY_TYPES[version]
    r = Reader(data, 2)
    r.field = f"{kind.__name__}"
    try:
        group = r.string()
        key = kind(group, r.string()) if kind in _MEMBER_KEYS else kind(group)
    except WireFormatError as e:
        raise CorruptRecordError(str(e)) from None
    if r.pos != len(data):
        raise CorruptRecordError(f"{kind.__name__}: {len(data) - r.pos} bytes after the key")
    return key


def _read_partitions(r: Reader) -> TopicPartitions:
    out = []
    for _ in range(r.array_length(compact=True)):
        tid = r.uuid()
        parts = tuple(r.int32() for _ in range(r.array_length(compact=True)))
        r.skip_tagged_fields()
        out.append((tid, parts))
    return tuple(out)


def _read_strings(r: Reader) -> tuple[str, ...]:
    return tuple(str(r.compact_string()) for _ in range(r.array_length(compact=True)))


def _read_classic(data: bytes) -> ClassicMemberMetadata:
    r = Reader(data)
    r.field = "ClassicMemberMetadata"
    session = r.int32()
    protocols = []
    for _ in range(r.array_length(compact=True)):
        name = str(r.compact_string())
        metadata = r.compact_bytes() or b""
        r.skip_tagged_fields()
        protocols.append((name, bytes(metadata)))
    r.skip_tagged_fields()
    return ClassicMemberMetadata(session, tuple(protocols))


def decode_value(key: ConsumerGroupKey, data: bytes) -> ConsumerGroupValue:
    """The (non-null) value of ``key``; bytes that do not read as version 0 raise CorruptRecordError."""
    what = type(key).__name__.replace("Key", "Value")
    r = Reader(data)
    r.field = what
    try:
        version = r.int16()
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"{what} version {version} is not readable (0)")
        value = _decode_fields(key, r)
    except WireFormatError as e:
        raise CorruptRecordError(str(e)) from None
    if r.pos != len(data):
        raise CorruptRecordError(f"{what}: {len(data) - r.pos} bytes after the value")
    return value


def _decode_fields(key: ConsumerGroupKey, r: Reader) -> ConsumerGroupValue:
    value: ConsumerGroupValue
    if isinstance(key, ConsumerGroupMetadataKey):
        value = ConsumerGroupMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = []
        for _ in range(r.array_length(compact=True)):
            tid = r.uuid()
            name = str(r.compact_string())
            count = r.int32()
            for _ in range(r.array_length(compact=True)):  # racks by partition: read past them
                r.int32()
                _read_strings(r)
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            topics.append(TopicMetadata(tid, name, count))
        value = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        fields: dict[str, Any] = dict(
            instance_id=r.compact_string(nullable=True),
            rack_id=r.compact_string(nullable=True),
            client_id=str(r.compact_string()),
            client_host=str(r.compact_string()),
            subscribed_topic_names=_read_strings(r),
            subscribed_topic_regex=r.compact_string(nullable=True),
            rebalance_timeout_ms=r.int32(),
            server_assignor=r.compact_string(nullable=True),
        )
        tagged = r.skip_tagged_fields()
        if 0 in tagged:
            fields["classic_member_metadata"] = _read_classic(tagged[0])
        return ConsumerGroupMemberMetadataValue(**fields)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(_read_partitions(r))
    else:
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=r.int32(),
            previous_member_epoch=r.int32(),
            state=r.int8(),
            assigned_partitions=_read_partitions(r),
            partitions_pending_revocation=_read_partitions(r),
        )
    r.skip_tagged_fields()
    return value


# ------------------------------------------------------------------------------------------ text (dump-log)
def _partitions_json(tps: TopicPartitions) -> list[dict[str, Any]]:
    return [{"topicId": str(t), "partitions": list(ps)} for t, ps in tps]


def key_json(key: ConsumerGroupKey) -> dict[str, Any]:
    out: dict[str, Any] = {"groupId": key.group}
    if isinstance(key, _MEMBER_KEYS):
        out["memberId"] = key.member_id
    return out


def value_json(value: ConsumerGroupValue) -> dict[str, Any]:
    """The value with Kafka's field names (as its JSON converters print them)."""
    if isinstance(value, ConsumerGroupMetadataValue):
        return {"epoch": value.epoch}
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": value.assignment_epoch}
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        return {
            "topics": [
                {
                    "topicId": str(t.topic_id),
                    "topicName": t.topic_name,
                    "numPartitions": t.num_partitions,
                    "partitionMetadata": [],
                }  # fmt: skip
                for t in value.topics
            ]
        }
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        out: dict[str, Any] = {
            "instanceId": value.instance_id,
            "rackId": value.rack_id,
            "clientId": value.client_id,
            "clientHost": value.client_host,
            "subscribedTopicNames": list(value.subscribed_topic_names),
            "subscribedTopicRegex": value.subscribed_topic_regex,
            "rebalanceTimeoutMs": value.rebalance_timeout_ms,
            "serverAssignor": value.server_assignor,
        }
        c = value.classic_member_metadata
        if c is not None:
            out["classicMemberMetadata"] = {
                "sessionTimeoutMs": c.session_timeout_ms,
                "supportedProtocols": [{"name": n, "metadata": m.hex()} for n, m in c.supported_protocols],
            }
        return out
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _partitions_json(value.topic_partitions)}
    return {
        "memberEpoch": value.member_epoch,
        "previousMemberEpoch": value.previous_member_epoch,
        "state": value.state,
        "assignedPartitions": _partitions_json(value.assigned_partitions),
        "partitionsPendingRevocation": _partitions_json(value.partitions_pending_revocation),
    }


__all__ = [
    "KEY_TYPES",
    "ClassicMemberMetadata",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupValue",
    "TopicMetadata",
    "TopicPartitions",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "key_json",
    "value_json",
]
