"""Metadata records: Kafka's frame and field layout, and every record type round-trips at every version."""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.metadata.records import (
    RECORD_TYPES,
    BrokerEndpoint,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkalite.metadata.serde import MetadataParseError, deserialize, serialize
from kafkalite.protocol.codec.binding import plan_of
from kafkalite.protocol.codec.schema import _range

_PRIM = {
    "int8": st.integers(-128, 127),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "string": st.text(max_size=8),
    "bytes": st.binary(max_size=8),
}


def _records(cls, version: int):
    """Records of ``cls`` whose fields absent in ``version`` keep their defaults."""
    kw = {}
    for step in plan_of(cls):
        b = step.b
        lo, hi = _range(b.versions)
        if not lo <= version <= hi:
            continue
        nlo, nhi = _range(b.nullable)
        if b.type == "[]struct":
            s = st.lists(_records(b.items, version), max_size=3).map(tuple)
        elif b.type.startswith("[]"):
            s = st.lists(_PRIM[b.type[2:]], max_size=4).map(tuple)
        else:
            s = _PRIM[b.type]
        if nlo <= version <= nhi:
            s = st.none() | s
        kw[step.attr] = s
    return st.builds(cls, **kw)


_CASES = [
    (cls, v) for cls in RECORD_TYPES.values() for v in range(cls.valid_versions[0], cls.valid_versions[1] + 1)
]


@pytest.mark.parametrize(("cls", "version"), _CASES, ids=[f"{c.__name__}-v{v}" for c, v in _CASES])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_record_round_trips(cls, version, data) -> None:
    record = data.draw(_records(cls, version))
    back, v = deserialize(serialize(record, version))
    assert (back, v) == (record, version)


def test_the_frame_is_kafkas() -> None:
    # frame version 1, api key 7, version 0 (unsigned varints), then id int32, epoch int64, no tagged fields
    data = serialize(FenceBrokerRecord(id=3, epoch=42))
    assert data == bytes([1, 7, 0]) + struct.pack(">iq", 3, 42) + b"\x00"
    assert serialize(NoOpRecord()) == bytes([1, 20, 0, 0])


def test_topic_record_layout() -> None:
    tid = uuid.UUID(int=5)
    data = serialize(TopicRecord(name="orders", topic_id=tid))
    # compact string: length + 1 as an unsigned varint
    assert data == bytes([1, 2, 0, 7]) + b"orders" + tid.bytes + b"\x00"


def test_partition_change_writes_only_what_changed_as_tagged_fields() -> None:
    tid = uuid.UUID(int=9)
    only_isr = serialize(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(1, 2)))
    # body: partition id, topic id, then one tagged field (tag 0, size 9: a compact array of two int32)
    assert only_isr[3:] == struct.pack(">i", 0) + tid.bytes + bytes([1, 0, 9, 3]) + struct.pack(">ii", 1, 2)
    back, _ = deserialize(only_isr)
    assert back.leader == -2 and back.replicas is None, "absent tagged fields mean 'no change'"


def test_register_broker_defaults_to_fenced() -> None:
    rec = RegisterBrokerRecord(
        broker_id=1,
        broker_epoch=7,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),),
    )
    back, v = deserialize(serialize(rec))
    assert back.fenced and v == 3 and back == rec


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes([0, 7, 0]), "frame version 0"),
        (bytes([1, 99, 0]), "unknown metadata record type 99"),
        (bytes([1, 7, 5]), "version 5"),
        (bytes([1, 7, 0, 1]), "unreadable FenceBrokerRecord"),
        (serialize(NoOpRecord()) + b"x", "garbage"),
    ],
)
def test_bad_records_are_refused_with_the_reason(data: bytes, message: str) -> None:
    with pytest.raises(MetadataParseError, match=message):
        deserialize(data)


def test_every_kafka_record_type_kafkalite_declares_has_a_unique_key() -> None:
    keys = [cls.api_key for cls in RECORD_TYPES.values()]
    assert len(keys) == len(set(keys))
    assert all(dataclasses.is_dataclass(c) for c in RECORD_TYPES.values())
