"""ConsumerProtocol subscription/assignment bytes (versions 0-3) and the sticky assignors' user data."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.protocol import TopicPartition as TP
from kafkalite.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)


def test_subscription_v1_bytes_by_hand() -> None:
    sub = ConsumerSubscription(topics=("b", "a"), owned_partitions=(TP("t", 3), TP("t", 0)))
    expected = bytes.fromhex(
        "0001"  # version 1
        "00000002" "0001" "61" "0001" "62"  # topics, sorted: "a", "b"
        "ffffffff"  # user data: null
        "00000001" "0001" "74" "00000002" "00000000" "00000003"  # owned: t -> [0, 3], sorted
    )  # fmt: skip
    assert sub.encode(1) == expected
    back = ConsumerSubscription.decode(expected)
    assert back.topics == ("a", "b") and back.owned_partitions == (TP("t", 0), TP("t", 3))
    assert back.generation_id == -1 and back.rack_id is None and back.version == 1


def test_subscription_v3_appends_generation_and_rack() -> None:
    sub = ConsumerSubscription(topics=("a",), user_data=b"\x01", generation_id=5, rack_id="r1")
    assert sub.encode(3) == bytes.fromhex(
        "0003" "00000001" "000161" "00000001" "01" "00000000" "00000005" "0002" "7231"
    )  # fmt: skip
    assert sub.encode(2) == bytes.fromhex("00020000000100016100000001010000000000000005")
    assert sub.encode(0) == bytes.fromhex("0000000000010001610000000101")
    assert sub.encode() == sub.encode(3)  # the Java client sends the highest version


def test_assignment_v0_bytes_by_hand() -> None:
    a = ConsumerAssignment(partitions=(TP("x", 2), TP("y", 0), TP("x", 1)), user_data=b"ud")
    expected = bytes.fromhex(
        "0000"
        "00000002" "0001" "78" "00000002" "00000002" "00000001" "0001" "79" "00000001" "00000000"
        "00000002" "7564"
    )  # fmt: skip
    assert a.encode(0) == expected
    back = ConsumerAssignment.decode(expected)
    assert back.partitions == (TP("x", 2), TP("x", 1), TP("y", 0)) and back.user_data == b"ud"


def test_newer_versions_read_with_the_latest_layout_and_bad_bytes_fail() -> None:
    sub = ConsumerSubscription(topics=("a",), generation_id=9, rack_id="r")
    v7 = struct.pack(">h", 7) + sub.encode(3)[2:] + b"future fields"
    got = ConsumerSubscription.decode(v7)
    assert (got.topics, got.generation_id, got.rack_id, got.version) == (("a",), 9, "r", 3)
    with pytest.raises(ConsumerProtocolError, match="unsupported version -1"):
        ConsumerSubscription.decode(b"\xff\xff" + sub.encode(3)[2:])
    with pytest.raises(ConsumerProtocolError, match="underflow"):
        ConsumerSubscription.decode(sub.encode(3)[:-1])
    with pytest.raises(ConsumerProtocolError, match="underflow"):
        ConsumerAssignment.decode(b"\x00")
    with pytest.raises(ConsumerProtocolError, match="version must be 0..3"):
        sub.encode(4)


def test_sticky_and_cooperative_user_data() -> None:
    parts = [TP("a", 1), TP("b", 0), TP("a", 0)]
    data = encode_sticky_user_data(parts, 4)
    got, gen = decode_sticky_user_data(data)
    assert sorted(got) == sorted(parts) and gen == 4
    # schema v0 (no generation) is still read; garbage is ignored with generation -1, as Kafka does
    assert decode_sticky_user_data(encode_sticky_user_data(parts, None))[1] is None
    assert decode_sticky_user_data(b"\x00\x00\x00\x09junk") == ([], -1)
    assert decode_sticky_user_data(None) == ([], None)
    assert encode_cooperative_user_data(7) == b"\x00\x00\x00\x07"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x07") == 7


names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
tps = st.builds(TP, names, st.integers(0, 2**31 - 1))
int32 = st.integers(-(2**31), 2**31 - 1)


def _jsort(xs):
    return sorted(xs, key=lambda t: t.encode("utf-16-be", "surrogatepass"))


@given(
    topics=st.lists(names, unique=True, max_size=6),
    user_data=st.none() | st.binary(max_size=20),
    owned=st.lists(tps, unique=True, max_size=8),
    generation=int32,
    rack=st.none() | names,
    version=st.integers(0, 3),
)
def test_subscription_round_trip(topics, user_data, owned, generation, rack, version) -> None:
    sub = ConsumerSubscription(tuple(topics), user_data, tuple(owned), generation, rack)
    back = ConsumerSubscription.decode(sub.encode(version))
    assert back.version == version
    assert list(back.topics) == _jsort(topics)
    assert back.user_data == user_data
    want_owned = sorted(owned, key=lambda t: (t.topic.encode("utf-16-be", "surrogatepass"), t.partition))
    assert list(back.owned_partitions) == (want_owned if version >= 1 else [])
    assert back.generation_id == (generation if version >= 2 else -1)
    assert back.rack_id == (rack if version >= 3 else None)


@given(parts=st.lists(tps, unique=True, max_size=10), user_data=st.none() | st.binary(max_size=20),
       version=st.integers(0, 3))  # fmt: skip
def test_assignment_round_trip(parts, user_data, version) -> None:
    back = ConsumerAssignment.decode(ConsumerAssignment(tuple(parts), user_data).encode(version))
    assert sorted(back.partitions) == sorted(parts) and back.user_data == user_data
    # grouped by topic, topics in order of first appearance, partitions in the order given
    order = list(dict.fromkeys(tp.topic for tp in parts))
    assert [tp for t in order for tp in parts if tp.topic == t] == list(back.partitions)
