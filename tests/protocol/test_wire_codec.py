"""Kafka's wire codec: primitives, every served message at every served version (round trips generated
from the schemas), headers, and garbage that must fail with WireFormatError and nothing else."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.codec.header import (
    UnsupportedVersion,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkalite.protocol.codec.messages import SPECS, supported_versions
from kafkalite.protocol.codec.schema import Field, decode, encode
from kafkalite.protocol.codec.types import Reader, WireFormatError, Writer

# ------------------------------------------------------------------------------------- primitives


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n):
    w = Writer()
    w.uvarint(n)
    assert Reader(bytes(w.buf)).uvarint() == n


@given(st.integers(-(2**31), 2**31 - 1))
def test_zigzag_varint_round_trip(n):
    w = Writer()
    w.varint(n)
    assert Reader(bytes(w.buf)).varint() == n


def test_known_encodings():
    w = Writer()
    w.uvarint(300)
    w.compact_string("ab")
    w.compact_string(None)
    w.string("ab")
    w.string(None)
    assert bytes(w.buf) == b"\xac\x02" + b"\x03ab" + b"\x00" + b"\x00\x02ab" + b"\xff\xff"


@given(st.one_of(st.none(), st.text(max_size=50)), st.booleans())
def test_strings_round_trip(s, compact):
    w = Writer()
    (w.compact_string if compact else w.string)(s)
    r = Reader(bytes(w.buf))
    assert (r.compact_string(True) if compact else r.string(True)) == s


def test_truncated_reads_name_the_field():
    r = Reader(b"\x00\x05ab")
    r.field = "client_id"
    with pytest.raises(WireFormatError, match="client_id: needs 5 bytes"):
        r.string()


# -------------------------------------------------------------------------- every message, every version

_PRIM = {
    "int8": st.integers(-128, 127),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "string": st.text(max_size=8),
    "bytes": st.binary(max_size=16),
    "records": st.binary(max_size=16),
}


def _value(f: Field, v: int):
    t = f.type
    if t == "struct":
        return _struct(f.fields, v)
    if t == "[]struct":
        base = st.lists(_struct(f.fields, v), max_size=3)
    elif t.startswith("[]"):
        base = st.lists(_PRIM[t[2:]], max_size=3)
    else:
        base = _PRIM[t]
    if f.nullable_in(v) or t == "records":
        return st.one_of(st.none(), base)
    return base


def _struct(fields: tuple[Field, ...], v: int):
    present = {f.name: _value(f, v) for f in fields if f.present(v)}
    return st.fixed_dictionaries(present)


def _cases():
    for key, spec in sorted(SPECS.items()):
        for v in range(spec.min_version, spec.max_version + 1):
            yield pytest.param(key, v, id=f"{spec.name}-v{v}")


def _only_present(fields: tuple[Field, ...], data: dict, v: int) -> dict:
    out = {}
    for f in fields:
        if not f.present(v):
            continue
        value = data[f.name]
        if f.type == "struct":
            value = _only_present(f.fields, value, v)
        elif f.type == "[]struct" and value is not None:
            value = [_only_present(f.fields, x, v) for x in value]
        out[f.name] = value
    return out


@pytest.mark.parametrize(("key", "version"), list(_cases()))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_every_message_round_trips(key, version, data):
    spec = SPECS[key]
    flexible = spec.flexible(version)
    for fields in (spec.request, spec.response):
        body = data.draw(_struct(fields, version))
        back = decode(fields, encode(fields, body, version, flexible), version, flexible)
        assert _only_present(fields, back, version) == body


def test_api_versions_response_uses_header_v0_even_when_flexible():
    frame = encode_response(18, 3, 42, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    size, corr = struct.unpack_from(">ii", frame)
    assert (size, corr) == (len(frame) - 4, 42)
    assert frame[8:10] == b"\x00\x00"  # the error code right after the correlation id: no tagged fields
    assert decode_response(18, 3, frame[4:])[0] == 42


def test_request_frames_round_trip_with_their_header():
    frame = encode_request(3, 4, 7, "client", {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
    header, body = decode_request(frame[4:])
    assert header == (3, 4, 7, "client")
    assert [t["name"] for t in body["topics"]] == ["t"] and body["allow_auto_topic_creation"] is False


def test_flexible_request_header_has_tagged_fields():
    frame = encode_request(18, 3, 1, "c", {"client_software_name": "x", "client_software_version": "1"})
    header, body = decode_request(frame[4:])
    assert body == {"client_software_name": "x", "client_software_version": "1"}


def test_unknown_api_or_version_is_reported_with_the_header():
    raw = struct.pack(">hhi", 18, 99, 5) + b"\xff\xff"
    with pytest.raises(UnsupportedVersion) as e:
        decode_request(raw)
    assert e.value.header.correlation_id == 5
    with pytest.raises(UnsupportedVersion):
        decode_request(struct.pack(">hhi", 9999, 0, 5) + b"\xff\xff")


def test_advertised_versions_cover_every_spec():
    assert {k for k, _, _ in supported_versions(kraft=True)} == set(SPECS)
    assert all(lo <= hi for _, lo, hi in supported_versions(kraft=True))


def test_a_zookeeper_mode_broker_does_not_list_describe_quorum():
    # DescribeQuorumRequest.json's listeners are broker and controller, not zkBroker
    assert 55 in SPECS and (55, 0, 1) in supported_versions(kraft=True)
    assert {k for k, _, _ in supported_versions()} == set(SPECS) - {55}


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_never_raises_anything_but_a_wire_error(raw):
    with contextlib.suppress(WireFormatError):
        decode_request(raw)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_truncated_valid_requests_fail_cleanly(data):
    key = data.draw(st.sampled_from(sorted(SPECS)))
    spec = SPECS[key]
    v = data.draw(st.integers(spec.min_version, spec.max_version))
    body = data.draw(_struct(spec.request, v))
    frame = encode_request(key, v, 1, "c", body)[4:]
    cut = data.draw(st.integers(0, max(0, len(frame) - 1)))
    with contextlib.suppress(WireFormatError):
        decode_request(frame[:cut])


def test_uuid_round_trip():
    w = Writer()
    u = uuid.uuid4()
    w.uuid(u)
    assert Reader(bytes(w.buf)).uuid() == u


def test_a_nullable_struct_has_kafkas_presence_byte():
    """ConsumerGroupHeartbeatResponse.Assignment: -1 for null, 1 then the struct (Kafka's generated code)."""
    assign = next(f for f in SPECS[68].response if f.name == "assignment")
    tid = uuid.UUID(int=1)
    present = {"topic_partitions": [{"topic_id": tid, "partitions": [3]}]}
    assert encode((assign,), {"assignment": None}, 0, True) == b"\xff\x00"  # null, the tagged fields
    raw = encode((assign,), {"assignment": present}, 0, True)
    assert raw[0] == 1 and raw[1] == 2 and raw[2:18] == tid.bytes, raw.hex()
    for value in (None, present):
        assert decode((assign,), encode((assign,), {"assignment": value}, 1, True), 1, True) == {
            "assignment": value
        }
