"""The record formats of ``__consumer_offsets``: keys and values as Kafka's group coordinator writes them.

Every record key and value starts with an int16 schema version, then the fields in Kafka's classic
(non-flexible) encoding: int16-length UTF-8 strings (-1 = null), int32 big-endian integers, int64 longs,
int32-length byte arrays, arrays as an int32 count followed by the elements.

Keys (the version says which kind of record it is):

- version 0 or 1: an offset commit, ``group, topic, partition``. kafkalite writes version 1.
- version 2: group metadata, ``group``.
- versions 3-8: the records of a KIP-848 consumer group (``consumer_group_records``).

Values:

- offset commit v0..v3: ``offset int64``, ``leaderEpoch int32`` (v3+), ``metadata string``,
  ``commitTimestamp int64``, ``expireTimestamp int64`` (v1 only). kafkalite writes v3.
- group metadata v0..v3: ``protocolType string``, ``generation int32``, ``protocol string?``,
  ``leader string?``, ``currentStateTimestamp int64`` (v2+), then the members, each ``memberId``,
  ``groupInstanceId string?`` (v3+), ``clientId``, ``clientHost``, ``rebalanceTimeout int32`` (v1+),
  ``sessionTimeout int32``, ``subscription bytes``, ``assignment bytes``. kafkalite writes v3.

A null value (tombstone) deletes its key: compaction then drops the older records with that key.
Versions 4+ of the values are Kafka's flexible encoding (tagged fields); kafkalite does not read them.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

from kafkalite.errors import CorruptRecordError
from kafkalite.protocol import consumer_group_records as cgr
from kafkalite.protocol.types import Reader, Writer

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
NO_EXPIRE_TIMESTAMP = -1


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP
    """Only in version 1 records (the pre-KIP-211 per-commit retention)."""


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadataValue, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------------------- primitives
class _Reader(Reader):
    error = CorruptRecordError

    def str_(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        """A non-null byte array; a null one (length -1) reads as empty."""
        return self.nullable_bytes() or b""


# ----------------------------------------------------------------------------------------- encoders
def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Key v1: ``version int16 = 1, group string, topic string, partition int32``."""
    w = Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic).int32(partition)
    return w.getvalue()


def encode_group_metadata_key(group: str) -> bytes:
    """Key v2: ``version int16 = 2, group string``."""
    return Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).getvalue()


def encode_offset_commit_value(value: OffsetCommitValue, version: int = OFFSET_COMMIT_VALUE_VERSION) -> bytes:
    """An offset commit value (v3 by default; v0-v2 for compatibility tests)."""
    if version not in (0, 1, 2, 3):
        raise ValueError(f"offset commit value version {version} is not supported (0-3)")
    w = Writer().int16(version).int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata or "").int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    return w.getvalue()


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """A group metadata value (v3 by default)."""
    if version not in (0, 1, 2, 3):
        raise ValueError(f"group metadata value version {version} is not supported (0-3)")
    w = Writer().int16(version).string(value.protocol_type).int32(value.generation)
    w.string(value.protocol).string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id).string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout).nullable_bytes(m.subscription).nullable_bytes(m.assignment)
    return w.getvalue()


# ----------------------------------------------------------------------------------------- decoders
def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | cgr.ConsumerGroupKey:
    """The key of a ``__consumer_offsets`` record; its version says which kind."""
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in cgr.KEY_TYPES:
        return cgr.decode_key(version, data)
    if version in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.str_(), r.str_(), r.int32())
    elif version == 2:
        key = GroupMetadataKey(r.str_())
    else:
        raise CorruptRecordError(f"unknown __consumer_offsets key version {version} (expected 0 to 8)")
    r.done()
    return key


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data, "offset commit value")
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise CorruptRecordError(f"offset commit value version {version} is not readable (0-3)")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.str_()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else NO_EXPIRE_TIMESTAMP
    r.done()
    return OffsetCommitValue(offset, epoch, metadata, commit_ts, expire_ts)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "group metadata value")
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise CorruptRecordError(f"group metadata value version {version} is not readable (0-3)")
    protocol_type = r.str_()
    generation = r.int32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.int64() if version >= 2 else -1
    count = r.int32()
    if count < 0:
        raise CorruptRecordError(f"group metadata value: negative member count {count}")
    members = []
    for _ in range(count):
        member_id = r.str_()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.str_()
        client_host = r.str_()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        members.append(
            MemberMetadataValue(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_value(
    key: OffsetCommitKey | GroupMetadataKey | cgr.ConsumerGroupKey, data: bytes | None
) -> OffsetCommitValue | GroupMetadataValue | cgr.ConsumerGroupValue | None:
    """The value for ``key``; None for a tombstone."""
    if data is None:
        return None
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):
        return cgr.decode_value(key, data)
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    return decode_group_metadata_value(data)


def value_version(data: bytes | None) -> int | None:
    return None if data is None or len(data) < 2 else struct.unpack(">h", data[:2])[0]


# ------------------------------------------------------------------------------------- text (dump-log)
def format_record(key: bytes | None, value: bytes | None) -> str:
    """``key: {...} payload: {...}`` as JSON with Kafka's field names, for ``dump-log --offsets-decoder``."""
    if key is None:
        return "key: null payload: unreadable (a __consumer_offsets record needs a key)"
    k = decode_key(key)
    kver = struct.unpack(">h", key[:2])[0]
    if isinstance(k, OffsetCommitKey):
        kdata: dict = {"group": k.group, "topic": k.topic, "partition": k.partition}
    elif isinstance(k, GroupMetadataKey):
        kdata = {"group": k.group}
    else:
        kdata = cgr.key_json(k)
    out = "key: " + json.dumps({"type": str(kver), "data": kdata}, separators=(",", ":"))
    v = decode_value(k, value)
    if v is None:
        return out + " payload: <DELETE>"
    if not isinstance(v, OffsetCommitValue | GroupMetadataValue):
        payload = {"version": str(value_version(value)), "data": cgr.value_json(v)}
        return out + " payload: " + json.dumps(payload, separators=(",", ":"))
    if isinstance(v, OffsetCommitValue):
        vdata: dict = {"offset": v.offset}
        if value_version(value) == 3:
            vdata["leaderEpoch"] = v.leader_epoch
        vdata.update(metadata=v.metadata, commitTimestamp=v.commit_timestamp)
        if value_version(value) == 1:
            vdata["expireTimestamp"] = v.expire_timestamp
    else:
        vdata = {
            "protocolType": v.protocol_type,
            "generation": v.generation,
            "protocol": v.protocol,
            "leader": v.leader,
            "currentStateTimestamp": v.current_state_timestamp,
            "members": [
                {
                    "memberId": m.member_id,
                    "groupInstanceId": m.group_instance_id,
                    "clientId": m.client_id,
                    "clientHost": m.client_host,
                    "rebalanceTimeout": m.rebalance_timeout,
                    "sessionTimeout": m.session_timeout,
                    "subscription": m.subscription.hex(),
                    "assignment": m.assignment.hex(),
                }
                for m in v.members
            ],
        }
    payload = {"version": str(value_version(value)), "data": vdata}
    return out + " payload: " + json.dumps(payload, separators=(",", ":"))


__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "format_record",
]
