"""The consumer protocol: the bytes a consumer puts in JoinGroup (its subscription) and the leader puts in
SyncGroup (each member's assignment), laid out as Kafka's Java client lays them out.

Both are opaque to the group coordinator. Each starts with an int16 version, then the fields of that
version in Kafka's classic (non-flexible) encoding: strings are an int16 length and UTF-8 bytes (-1 for a
null string), arrays an int32 count, nullable bytes an int32 length (-1 for null). Versions 0-3:

* Subscription: ``topics`` (v0+, sorted), ``user_data`` (v0+), ``owned_partitions`` (v1+, as topic ->
  partitions, sorted by topic then partition), ``generation_id`` (v2+, default -1), ``rack_id`` (v3+).
* Assignment: ``partitions`` (v0+, grouped by topic in order of first appearance), ``user_data`` (v0+).

A version above 3 is read with the version 3 layout (Kafka promises later versions only append fields);
a negative version or truncated bytes raise ``ConsumerProtocolError``.

The assignors' own user data is here too: the eager ``sticky`` assignor sends the partitions it held and
their generation (it owns nothing when it rejoins, having revoked everything), ``cooperative-sticky`` sends
its generation alone.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalite.common.utils import java_hash_map_order
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.types import Reader, Writer

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "HIGHEST_VERSION",
    "ConsumerAssignment",
    "ConsumerProtocolError",
    "ConsumerSubscription",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3
DEFAULT_GENERATION = -1


class ConsumerProtocolError(ValueError):
    """Subscription or assignment bytes that do not parse (Kafka's SchemaException)."""


# ------------------------------------------------------------------------------- primitive writers/readers


class _Writer(Writer):
    error = ConsumerProtocolError

    def too_long(self, n: int) -> str:
        return f"string of {n} bytes is longer than an int16 length allows"

    def topic_partitions(self, groups: list[tuple[str, list[int]]]) -> None:
        self.int32(len(groups))
        for topic, parts in groups:
            self.string(topic)
            self.int32(len(parts))
            for p in parts:
                self.int32(p)


class _Reader(Reader):
    error = ConsumerProtocolError
    any_negative_is_null = True

    def underflow(self, n: int) -> str:
        return f"buffer underflow at byte {self.pos} (wanted {n} of {len(self.data)})"

    def bad_string(self, n: int) -> str:
        return "null string in a non-nullable field"

    def array_len(self) -> int:
        n = self.int32()
        if n < 0:
            raise self.fail("null array in a non-nullable field")
        return n

    def topic_partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.array_len()):
            topic = self.string()
            assert topic is not None
            for _ in range(self.array_len()):
                out.append(TopicPartition(topic, self.int32()))
        return out


def _version(r: _Reader) -> int:
    v = r.int16()
    if v < 0:
        raise ConsumerProtocolError(f"{r.what}: unsupported version {v}")
    return min(v, HIGHEST_VERSION)


def _check_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= HIGHEST_VERSION:
        raise ConsumerProtocolError(
            f"consumer protocol version must be 0..{HIGHEST_VERSION}, got {version!r}"
        )
    return version


def _sorted_groups(tps: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    # Java sorts by topic (String.compareTo, UTF-16 order) then partition, and groups runs of one topic.
    groups: list[tuple[str, list[int]]] = []
    for tp in sorted(tps, key=lambda t: (t.topic.encode("utf-16-be", "surrogatepass"), t.partition)):
        if not groups or groups[-1][0] != tp.topic:
            groups.append((tp.topic, []))
        groups[-1][1].append(tp.partition)
    return groups


def _first_seen_groups(tps: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())


# ----------------------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class ConsumerSubscription:
    """One member's JoinGroup metadata for one assignor (Kafka's ``ConsumerPartitionAssignor.Subscription``)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    version: int = field(default=HIGHEST_VERSION, compare=False)
    """The version the bytes were read with (or are written with by default)."""

    def encode(self, version: int | None = None) -> bytes:
        v = _check_version(self.version if version is None else version)
        w = _Writer()
        w.int16(v)
        topics = sorted(self.topics, key=lambda t: t.encode("utf-16-be", "surrogatepass"))
        w.int32(len(topics))
        for t in topics:
            w.string(t)
        w.nullable_bytes(self.user_data)
        if v >= 1:
            w.topic_partitions(_sorted_groups(self.owned_partitions))
        if v >= 2:
            w.int32(self.generation_id)
        if v >= 3:
            w.string(self.rack_id)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> ConsumerSubscription:
        r = _Reader(data, "consumer protocol subscription")
        v = _version(r)
        topics = tuple(r.string() or "" for _ in range(r.array_len()))
        user_data = r.nullable_bytes()
        owned = tuple(r.topic_partitions()) if v >= 1 else ()
        generation = r.int32() if v >= 2 else DEFAULT_GENERATION
        rack = r.string(nullable=True) if v >= 3 else None
        return cls(topics, user_data, owned, generation, rack or None, version=v)


@dataclass(frozen=True)
class ConsumerAssignment:
    """One member's share, as the leader sends it in SyncGroup (``ConsumerPartitionAssignor.Assignment``)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = field(default=HIGHEST_VERSION, compare=False)

    def encode(self, version: int | None = None) -> bytes:
        v = _check_version(self.version if version is None else version)
        w = _Writer()
        w.int16(v)
        w.topic_partitions(_first_seen_groups(self.partitions))
        w.nullable_bytes(self.user_data)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> ConsumerAssignment:
        r = _Reader(data, "consumer protocol assignment")
        v = _version(r)
        parts = tuple(r.topic_partitions())
        user_data = r.nullable_bytes()
        return cls(parts, user_data, version=v)


# ------------------------------------------------------------------------------- assignor user data


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """The eager sticky assignor's user data (its schema v1: the partitions held, by topic, then the
    generation). Topics come in Java ``HashMap`` order, as ``groupPartitionsByTopic`` leaves them."""
    by_topic = dict(_first_seen_groups(partitions))
    w = _Writer()
    w.topic_partitions([(t, by_topic[t]) for t in java_hash_map_order(by_topic)])
    if generation is not None:
        w.int32(generation)
    return w.getvalue()


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int | None]:
    """(partitions, generation) from sticky user data; ``([], None)`` for none, ``([], -1)`` for garbage
    (as Kafka: an unreadable previous assignment is ignored, not an error)."""
    if not data:
        return [], None
    r = _Reader(data, "sticky assignor user data")
    try:
        parts = r.topic_partitions()
    except ConsumerProtocolError:
        return [], DEFAULT_GENERATION
    if r.pos + 4 <= len(r.data):
        return parts, r.int32()
    return parts, None  # schema v0: no generation


def encode_cooperative_user_data(generation: int) -> bytes:
    """The cooperative-sticky assignor's user data: its generation as an int32."""
    return struct.pack(">i", generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    if data is None:
        return None
    if len(data) < 4:
        return DEFAULT_GENERATION
    return struct.unpack(">i", bytes(data[:4]))[0]
