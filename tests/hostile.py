"""Hypothesis strategies for hostile but well-formed requests: every field of every API, drawn from the
values that break servers (empty and illegal names, negative and huge numbers, unknown topics,
partitions, groups and members, bad configs, garbage record bytes), in two forms: kafkalite's request
dataclasses (for the simulator) and the wire codec's bodies for a version the listener serves."""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from typing import Any

from hypothesis import strategies as st

from kafkalite.protocol import Message, TopicPartition
from kafkalite.records import build_batch

#: Topic, group, member and transactional-id names; never the probe topic the tests produce to.
NAMES = (
    "t",
    "missing",
    "",
    ".",
    "..",
    "../escape",
    "a/b",
    "bad name!",
    "x" * 250,
    "y" * 300,
    "__consumer_offsets",
    "__transaction_state",
    "t.x",
    "t_x",
    "g",
    "ü",
)
CONFIG_KEYS = ("retention.ms", "segment.bytes", "cleanup.policy", "min.insync.replicas", "no.such.key")
CONFIG_VALUES = ("-5", "1", "0", "compact", "abc", "", "9223372036854775808")
INT32 = (-(2**31), -1000, -3, -2, -1, 0, 1, 2, 3, 7, 10_000, 20_000, 2**31 - 1)
INT64 = INT32 + (-(2**63), 2**63 - 1)
RECORDS = (
    b"",
    b"\x00\x01\x02",
    build_batch([(None, b"v", None)]),
    build_batch([(b"k", b"v" * 100, None)], producer_id=7, producer_epoch=0, base_sequence=0),
    b"\xff" * 61,
)

names = st.sampled_from(NAMES)
strings = st.one_of(names, st.sampled_from(CONFIG_KEYS + CONFIG_VALUES), st.text(max_size=8))
# plausible small values half the time, so a hostile name or config meets counts a broker would accept
_plausible = st.integers(-1, 3)
int32s = st.one_of(_plausible, _plausible, st.sampled_from(INT32), st.integers(-5, 10))
int64s = st.one_of(_plausible, _plausible, st.sampled_from(INT64), st.integers(-5, 10))
records = st.sampled_from(RECORDS)
topic_partitions = st.builds(TopicPartition, names, int32s)


def _topic_id(name: str) -> uuid.UUID:
    from kafkalite.broker.group.consumer_protocol import topic_id

    return topic_id(name)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0], len(rest) != len(args)
    return hint, False


def for_type(hint: Any) -> st.SearchStrategy:
    """A hostile value of a request field's type."""
    inner, optional = _unwrap_optional(hint)
    base = _for_type(inner)
    return st.one_of(st.none(), base) if optional else base


def _for_type(hint: Any) -> st.SearchStrategy:
    if hint is bool:
        return st.booleans()
    if hint is int:
        return int32s
    if hint is str:
        return strings
    if hint is bytes or hint is object:
        return records
    if hint is float:
        return st.floats(allow_nan=False)
    if hint is TopicPartition:
        return topic_partitions
    if hint is uuid.UUID:  # topic ids: the null one, those of hostile names (as the broker derives them)
        return st.one_of(st.just(uuid.UUID(int=0)), names.map(_topic_id), st.uuids())
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(for_type(args[0]), max_size=3).map(tuple)
        return st.tuples(*(for_type(a) for a in args))
    if isinstance(hint, type) and issubclass(hint, Message):
        return message(hint)
    raise TypeError(f"no strategy for {hint!r}")


def message(cls: type) -> st.SearchStrategy:
    """Any instance of a request (or request entry) class, every field hostile."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: st.deferred(lambda h=hints[f.name]: for_type(h)) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


# ------------------------------------------------------------------------------------ wire bodies

_WIRE_INTS = {
    "int8": st.sampled_from((-128, -1, 0, 1, 127)),
    "int16": st.one_of(st.sampled_from((-(2**15), -1, 0, 1, 2**15 - 1)), st.integers(-2, 5)),
    "uint16": st.sampled_from((0, 1, 2**16 - 1)),
    "int32": int32s,
    "uint32": st.sampled_from((0, 1, 2**32 - 1)),
    "int64": int64s,
}


def wire_value(f: Any, version: int) -> st.SearchStrategy:
    t = f.type
    if t.startswith("[]"):
        elem = t[2:]
        if elem == "struct":
            item: st.SearchStrategy = wire_struct(f.fields, version)
        else:
            item = _wire_primitive(elem)
        value = st.lists(item, max_size=3)
    elif t == "struct":
        value = wire_struct(f.fields, version)
    else:
        value = _wire_primitive(t)
    return st.one_of(st.none(), value) if f.nullable_in(version) else value


def _wire_primitive(t: str) -> st.SearchStrategy:
    if t in _WIRE_INTS:
        return _WIRE_INTS[t]
    if t == "bool":
        return st.booleans()
    if t == "string":
        return strings
    if t in ("bytes", "records"):
        return records
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    if t == "float64":
        return st.floats(allow_nan=False)
    raise TypeError(f"no strategy for wire type {t}")


def wire_struct(fields: Any, version: int) -> st.SearchStrategy:
    present = {f.name: wire_value(f, version) for f in fields if f.present(version)}
    return st.fixed_dictionaries(present)


# ----------------------------------------------------------------------------- probing over TCP


def recv_frame(sock: Any) -> bytes:
    import struct

    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return _recv_exactly(sock, size)


def _recv_exactly(sock: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return buf


def call(sock: Any, api_key: int, version: int, body: dict, corr: int = 1) -> dict:
    """One request on a raw socket, its decoded answer."""
    from kafkalite.protocol.codec.header import decode_response, encode_request

    sock.sendall(encode_request(api_key, version, corr, "hostile", body))
    got, answer = decode_response(api_key, version, recv_frame(sock))
    assert got == corr, (got, corr)
    return answer


def wire_produce_and_fetch(address: tuple[str, int], topic: str, value: bytes = b"still here") -> None:
    """A fresh connection produces one record to ``topic``-0 and fetches it back."""
    import socket

    with socket.create_connection(address, timeout=10) as s:
        batch = build_batch([(None, value, None)])
        produced = call(s, 0, 8, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})  # fmt: skip
        part = produced["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0, produced
        fetched = call(s, 1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                  "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "fetch_offset": part["base_offset"], "log_start_offset": -1,
                                             "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}, corr=2)  # fmt: skip
        got = fetched["responses"][0]["partitions"][0]
        assert got["error_code"] == 0 and value in bytes(got["records"] or b""), fetched
