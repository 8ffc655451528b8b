"""The wire bindings: a message dataclass's declarations give its schema and both conversions."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkalite.protocol as P
from kafkalite.protocol.codec.binding import (
    from_wire,
    schema_of,
    to_wire,
    wire,
    wire_by_topic,
    wire_partition,
)
from kafkalite.protocol.codec.messages import SPECS
from kafkalite.protocol.codec.schema import decode, encode
from tests import hostile

_SERVED = [
    pytest.param(k, v, id=f"{s.name}-v{v}")
    for k, s in sorted(SPECS.items())
    if P.REQUEST_TYPES.get(k) is not None and P.REQUEST_TYPES[k].versions is not None
    for v in range(s.min_version, s.max_version + 1)
]


@pytest.mark.parametrize(("key", "version"), _SERVED)
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_response_survives_the_wire_and_back(key, version, data) -> None:
    """A response read from the wire, written and read again, is the same message: nothing a response
    class holds is lost in its wire declarations."""
    spec, cls = SPECS[key], P.RESPONSE_TYPES[key]
    flex = spec.flexible(version)

    def through(body: dict):
        return from_wire(cls, decode(spec.response, encode(spec.response, body, version, flex), version, flex),
                         version)  # fmt: skip

    msg = through(data.draw(hostile.wire_struct(spec.response, version)))
    assert isinstance(msg, cls)
    again = through(to_wire(msg, version))
    # A topic listed twice comes back as one entry with all its partitions: same entries, regrouped.
    assert _entries(again) == _entries(msg)
    assert through(to_wire(again, version)) == again


def _entries(msg) -> dict:
    """Each field of a message; a tuple as the multiset of its items' reprs."""
    out = {}
    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        out[f.name] = Counter(map(repr, v)) if isinstance(v, tuple) else v
    return out


@pytest.mark.parametrize(("key", "version"), _SERVED)
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_request_a_client_can_send_converts(key, version, data) -> None:
    spec = SPECS[key]
    flex = spec.flexible(version)
    body = decode(spec.request, encode(spec.request, data.draw(hostile.wire_struct(spec.request, version)),
                                       version, flex), version, flex)  # fmt: skip
    req = from_wire(P.REQUEST_TYPES[key], body, version)
    assert isinstance(req, P.REQUEST_TYPES[key])
    # and it writes back: kafkalite's own clients and tools can send what the listener reads
    again = decode(spec.request, encode(spec.request, to_wire(req, version), version, flex), version, flex)
    assert _entries(from_wire(P.REQUEST_TYPES[key], again, version)) == _entries(req)


@pytest.mark.parametrize(
    ("cls", "body", "version"),
    [
        (P.JoinGroupRequest, {"group_id": "g", "session_timeout_ms": 10, "member_id": "", "protocol_type": "c",
                              "protocols": []}, 4),
        (P.HeartbeatRequest, {"group_id": "g", "generation_id": 1, "member_id": "m"}, 2),
        (P.SyncGroupRequest, {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []}, 2),
    ],
)  # fmt: skip
def test_a_version_before_static_membership_reads_as_no_instance_id(cls, body, version) -> None:
    """group.instance.id arrived with KIP-345; an older request names no static member (null, not "")."""
    spec = SPECS[cls.api_key]
    raw = encode(spec.request, body, version, spec.flexible(version))
    req = from_wire(cls, decode(spec.request, raw, version, spec.flexible(version)), version)
    assert req.group_instance_id is None


def test_partitions_nest_under_their_topics_in_first_seen_order() -> None:
    tps = [P.TopicPartition("b", 1), P.TopicPartition("a", 0), P.TopicPartition("b", 0)]
    resp = P.ListOffsetsResponse(
        partitions=tuple(P.ListOffsetsPartitionResponse(tp=tp, offset=7) for tp in tps)
    )
    body = to_wire(resp, 5)
    assert [t["name"] for t in body["topics"]] == ["b", "a"]
    assert [p["partition_index"] for p in body["topics"][0]["partitions"]] == [1, 0]
    back = from_wire(P.ListOffsetsResponse, body, 5)
    assert [e.tp for e in back.partitions] == [tps[0], tps[2], tps[1]]


def test_a_declared_field_is_the_only_edit_a_new_wire_field_needs() -> None:
    @P.message
    class Entry(P.Message):
        tp: P.TopicPartition = wire_partition("idx")
        size: int = wire("int32", "1+", 0)

    @P.message
    class Thing(P.Message):
        name: str = wire("string", "0+", "")
        entries: tuple[Entry, ...] = wire_by_topic("topics", Entry, "0+", topic="t", partitions="ps")
        note: str | None = wire("string", "2+", None, nullable="2+", tag=0)

    fields = schema_of(Thing)
    assert [f.name for f in fields] == ["name", "topics", "note"]
    assert [f.name for f in fields[1].fields] == ["t", "ps"]
    assert [f.name for f in fields[1].fields[1].fields] == ["idx", "size"]
    thing = Thing(name="x", entries=(Entry(tp=P.TopicPartition("t1", 3), size=9),), note="hi")
    for v, flex in ((0, False), (1, False), (2, True)):
        back = from_wire(Thing, decode(fields, encode(fields, to_wire(thing, v), v, flex), v, flex), v)
        assert back.entries[0].size == (9 if v >= 1 else 0)
        assert back.note == ("hi" if v >= 2 else None)


def test_a_wire_type_that_does_not_exist_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="int33"):
        wire("int33")
    with pytest.raises(ValueError, match="items"):
        wire("[]struct")
