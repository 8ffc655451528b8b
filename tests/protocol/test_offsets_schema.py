"""The ``__consumer_offsets`` record formats: hand-checked bytes, round trips, damaged input."""

from __future__ import annotations

import struct

import pytest

from kafkalite.errors import CorruptRecordError
from kafkalite.protocol.offsets_schema import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    format_record,
)


def test_offset_commit_key_bytes_by_hand() -> None:
    # version 1 (int16), "grp" (int16 length + UTF-8), "t" likewise, partition 7 (int32), all big-endian.
    expected = bytes.fromhex("0001000367727000017400000007")
    assert encode_offset_commit_key("grp", "t", 7) == expected
    assert decode_key(expected) == OffsetCommitKey("grp", "t", 7)


def test_group_metadata_key_bytes_by_hand() -> None:
    assert encode_group_metadata_key("g") == b"\x00\x02\x00\x01g"
    assert decode_key(b"\x00\x02\x00\x01g") == GroupMetadataKey("g")


def test_offset_commit_key_v0_reads_like_v1() -> None:
    v0 = b"\x00\x00" + encode_offset_commit_key("a", "b", 1)[2:]
    assert decode_key(v0) == OffsetCommitKey("a", "b", 1)


def test_offset_commit_value_v3_bytes_by_hand() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expected = struct.pack(">hqih", 3, 42, 5, 1) + b"m" + struct.pack(">q", 1000)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_offset_commit_value_versions_round_trip(version: int) -> None:
    value = OffsetCommitValue(
        offset=9, leader_epoch=4 if version >= 3 else -1, metadata="", commit_timestamp=77,
        expire_timestamp=99 if version == 1 else -1,
    )  # fmt: skip
    data = encode_offset_commit_value(value, version)
    assert struct.unpack(">h", data[:2])[0] == version
    assert decode_offset_commit_value(data) == value


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m-1",
        current_state_timestamp=123456,
        members=(
            MemberMetadataValue("m-1", None, "c1", "/c1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
            MemberMetadataValue("m-2", "static-2", "c2", "/c2", 300000, 10000, b"", b"x"),
        ),
    )


def test_group_metadata_value_round_trip_and_layout() -> None:
    value = _group_value()
    data = encode_group_metadata_value(value)
    assert data[:2] == b"\x00\x03"
    assert decode_group_metadata_value(data) == value
    # Hand-check the start: protocolType "consumer", generation 3, protocol "range", leader "m-1", timestamp.
    head = (
        b"\x00\x03" + b"\x00\x08consumer" + struct.pack(">i", 3) + b"\x00\x05range" + b"\x00\x03m-1"
        + struct.pack(">q", 123456) + struct.pack(">i", 2)
    )  # fmt: skip
    assert data.startswith(head)


def test_group_metadata_value_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 4, None, None, 99, ())
    data = encode_group_metadata_value(empty)
    assert b"\xff\xff\xff\xff" in data  # the two null strings, int16 -1 each
    assert decode_group_metadata_value(data) == empty


def test_group_metadata_value_v0_has_no_instance_or_timestamps() -> None:
    value = _group_value()
    data = encode_group_metadata_value(value, 0)
    back = decode_group_metadata_value(data)
    assert back.current_state_timestamp == -1
    assert [m.group_instance_id for m in back.members] == [None, None]
    assert [m.rebalance_timeout for m in back.members] == [-1, -1]
    assert [m.assignment for m in back.members] == [m.assignment for m in value.members]


def test_tombstone_decodes_to_none() -> None:
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None
    assert decode_value(GroupMetadataKey("g"), None) is None


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x00\x09\x00\x01g", "key version 9"),
        (b"\x00\x01\x00\x05ab", "needs 5 more bytes"),
        (encode_offset_commit_key("g", "t", 1) + b"\x00", "trailing"),
    ],
)
def test_bad_keys_are_typed_errors(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_key(data)


def test_flexible_value_versions_are_refused_by_name() -> None:
    with pytest.raises(CorruptRecordError, match="version 4"):
        decode_offset_commit_value(b"\x00\x04" + b"\x00" * 30)


def test_format_record_names_kafka_fields() -> None:
    key = encode_offset_commit_key("g", "t", 2)
    value = encode_offset_commit_value(OffsetCommitValue(10, 1, "", 5))
    text = format_record(key, value)
    assert text.startswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":2}}')
    assert '"offset":10' in text and '"leaderEpoch":1' in text and '"commitTimestamp":5' in text
    assert format_record(key, None).endswith("payload: <DELETE>")
    gtext = format_record(encode_group_metadata_key("g"), encode_group_metadata_value(_group_value()))
    assert '"protocolType":"consumer"' in gtext and '"memberId":"m-2"' in gtext
