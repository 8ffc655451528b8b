"""Partition assignors: golden vectors from Kafka's javadoc/tests plus invariants under hypothesis."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.client.assignors import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from kafkalite.protocol import TopicPartition


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def _short(assignment: Mapping[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [f"{t.topic}p{t.partition}" for t in tps] for m, tps in assignment.items()}


def test_protocol_names() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    assert ASSIGNORS["cooperative-sticky"] is CooperativeStickyAssignor


# --- Range / round robin (RangeAssignor and RoundRobinAssignor javadoc) ---------------------------------


def test_range_javadoc_example() -> None:
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    got = _short(RangeAssignor().assign({"t0": 3, "t1": 3}, subs))
    assert got == {"C0": ["t0p0", "t0p1", "t1p0", "t1p1"], "C1": ["t0p2", "t1p2"]}


def test_roundrobin_javadoc_example() -> None:
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    got = _short(RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs))
    assert got == {"C0": ["t0p0", "t0p2", "t1p1"], "C1": ["t0p1", "t1p0", "t1p2"]}


def test_roundrobin_javadoc_unequal_subscriptions() -> None:
    # RoundRobinAssignor javadoc: C0 on t0; C1 on t0,t1; C2 on t0,t1,t2 with 1, 2, 3 partitions.
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t0", "t1", "t2"]),
    }
    got = _short(RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs))
    assert got == {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}


def test_range_eight_partitions_three_consumers() -> None:
    subs = {c: Subscription(["orders"]) for c in ("c-2", "c-0", "c-1")}
    got = RangeAssignor().assign({"orders": 8}, subs)
    assert [len(got[c]) for c in ("c-0", "c-1", "c-2")] == [3, 3, 2]
    assert got["c-0"] == [tp("orders", p) for p in (0, 1, 2)]
    assert got["c-2"] == [tp("orders", 6), tp("orders", 7)]


def test_range_static_members_sort_by_instance_id() -> None:
    # RangeAssignorTest.testStaticMemberRangeAssignmentPersistent: group.instance.id, not member id, orders.
    subs = {
        "zzz": Subscription(["t"], group_instance_id="instance1"),
        "aaa": Subscription(["t"], group_instance_id="instance2"),
        "dyn": Subscription(["t"]),  # dynamic members sort after static ones
    }
    got = _short(RangeAssignor().assign({"t": 5}, subs))
    assert got == {"zzz": ["tp0", "tp1"], "aaa": ["tp2", "tp3"], "dyn": ["tp4"]}


def test_range_unsubscribed_and_missing_topics() -> None:
    subs = {"a": Subscription(["t1", "ghost"]), "b": Subscription(["t2"])}
    got = _short(RangeAssignor().assign({"t1": 2, "t2": 1, "other": 4}, subs))
    assert got == {"a": ["t1p0", "t1p1"], "b": ["t2p0"]}


# --- Sticky: StickyAssignor javadoc and AbstractStickyAssignorTest ---------------------------------------


EX1_TOPICS = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}


def test_sticky_javadoc_example1() -> None:
    topics = list(EX1_TOPICS)
    subs = {c: Subscription(topics) for c in ("C0", "C1", "C2")}
    first = _short(StickyAssignor().assign(EX1_TOPICS, subs))
    # Javadoc: "the assignment with both sticky and round robin assignors will be" this.
    assert first == {"C0": ["t0p0", "t1p1", "t3p0"], "C1": ["t0p1", "t2p0", "t3p1"], "C2": ["t1p0", "t2p1"]}
    assert first == _short(RoundRobinAssignor().assign(EX1_TOPICS, subs))

    prev = StickyAssignor().assign(EX1_TOPICS, subs)
    after = {c: Subscription(topics, prev[c], generation=1) for c in ("C0", "C2")}
    got = StickyAssignor().assign(EX1_TOPICS, after)
    # Javadoc's point: every previous assignment survives C1 leaving (round robin keeps only some).
    for c in ("C0", "C2"):
        assert set(prev[c]) <= set(got[c])
        assert len(got[c]) == 4
    # Exact answer of today's AbstractStickyAssignor (constrained path: owned sorted by partition then topic,
    # orphans dealt round robin). The javadoc's "C0 [.., t2p0], C2 [.., t0p1, t3p1]" predates that rewrite.
    assert _short(got) == {"C0": ["t0p0", "t3p0", "t1p1", "t0p1"], "C2": ["t1p0", "t2p1", "t2p0", "t3p1"]}
    rr = RoundRobinAssignor().assign(EX1_TOPICS, after)
    assert _short(rr) == {"C0": ["t0p0", "t1p0", "t2p0", "t3p0"], "C2": ["t0p1", "t1p1", "t2p1", "t3p1"]}


def test_sticky_javadoc_example2_unequal_subscriptions() -> None:
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t0", "t1", "t2"]),
    }
    first = StickyAssignor().assign(ppt, subs)
    assert _short(first) == {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}
    # C0 leaves: sticky keeps 5 assignments (javadoc), C1 [t1p0, t1p1, t0p0], C2 unchanged.
    after = {c: Subscription(subs[c].topics, first[c], generation=1) for c in ("C1", "C2")}
    got = StickyAssignor().assign(ppt, after)
    assert _short(got) == {"C1": ["t1p0", "t1p1", "t0p0"], "C2": ["t2p0", "t2p1", "t2p2"]}


def test_sticky_add_remove_two_consumers_two_topics() -> None:
    # AbstractStickyAssignorTest.testAddRemoveTwoConsumersTwoTopics (no racks).
    ppt = {"topic1": 3, "topic2": 4}
    topics = ["topic1", "topic2"]
    a = StickyAssignor()
    got = a.assign(ppt, {"consumer1": Subscription(topics), "consumer2": Subscription(topics)})
    assert got["consumer1"] == [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)]
    assert got["consumer2"] == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]

    subs = {
        "consumer1": Subscription(topics, got["consumer1"], generation=1),
        "consumer2": Subscription(topics, got["consumer2"], generation=1),
        "consumer3": Subscription(topics, [], generation=1),
        "consumer4": Subscription(topics, [], generation=1),
    }
    got = a.assign(ppt, subs)
    assert got == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1)],
        "consumer2": [tp("topic2", 0), tp("topic1", 1)],
        "consumer3": [tp("topic1", 2), tp("topic2", 3)],
        "consumer4": [tp("topic2", 2)],
    }
    # The cooperative flavour withholds exactly the partitions Kafka lists as transferring ownership.
    coop = CooperativeStickyAssignor().assign(ppt, subs)
    assert coop == {**got, "consumer3": [], "consumer4": []}

    subs = {
        "consumer3": Subscription(topics, got["consumer3"], generation=2),
        "consumer4": Subscription(topics, got["consumer4"], generation=2),
    }
    got = a.assign(ppt, subs)
    assert got["consumer3"] == [tp("topic1", 2), tp("topic2", 3), tp("topic1", 0), tp("topic2", 1)]
    assert got["consumer4"] == [tp("topic2", 2), tp("topic1", 1), tp("topic2", 0)]
    assert CooperativeStickyAssignor().assign(ppt, subs) == got  # nothing changes hands, nothing withheld


def test_sticky_add_remove_consumer_one_topic_cooperative() -> None:
    # AbstractStickyAssignorTest.testAddRemoveConsumerOneTopic: topic-2 is transferring to consumer2.
    subs = {
        "consumer1": Subscription(["topic"], [tp("topic", p) for p in range(3)], 1),
        "consumer2": Subscription(["topic"], [], 1),
    }
    assert StickyAssignor().assign({"topic": 3}, subs) == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
    }
    assert CooperativeStickyAssignor().assign({"topic": 3}, subs) == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [],
    }


def test_same_generation_double_claim_is_discarded() -> None:
    # Two members claiming one partition in the same generation: neither keeps a stale claim.
    subs = {"a": Subscription(["t"], [tp("t", 0)], 3), "b": Subscription(["t"], [tp("t", 0), tp("t", 1)], 3)}
    got = StickyAssignor().assign({"t": 2}, subs)
    assert sorted(got["a"] + got["b"]) == [tp("t", 0), tp("t", 1)]
    assert got["b"] == [tp("t", 1)]


def test_higher_generation_claim_wins() -> None:
    subs = {
        "a": Subscription(["t"], [tp("t", 0)], 2),
        "b": Subscription(["t"], [tp("t", 0)], 5),
        "c": Subscription(["t"]),
    }
    got = StickyAssignor().assign({"t": 3}, subs)
    assert tp("t", 0) in got["b"]


# --- Properties ----------------------------------------------------------------------------------------

TOPICS = ["a", "b", "c", "d"]


@st.composite
def groups(draw: st.DrawFn, equal: bool = False) -> tuple[dict[str, int], dict[str, Subscription]]:
    ppt = {t: draw(st.integers(0, 6)) for t in TOPICS}
    n = draw(st.integers(1, 6))
    members = draw(
        st.lists(st.sampled_from([f"m{i}" for i in range(10)]), min_size=n, max_size=n, unique=True)
    )
    if equal:
        topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
        return ppt, {m: Subscription(topics) for m in members}
    return ppt, {
        m: Subscription(draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))) for m in members
    }


def _check_valid(
    ppt: Mapping[str, int], subs: Mapping[str, Subscription], got: Mapping[str, list[TopicPartition]]
) -> None:
    assert set(got) == set(subs)
    owners: dict[TopicPartition, str] = {}
    for m, tps in got.items():
        for t in tps:
            assert t.topic in subs[m].topics, f"{m} got {t} without subscribing"
            assert t not in owners, f"{t} assigned twice"
            owners[t] = m
    expected = {tp(t, p) for s in subs.values() for t in s.topics for p in range(ppt.get(t, 0))}
    assert set(owners) == expected


def _with_owned(
    subs: Mapping[str, Subscription], prev: Mapping[str, list[TopicPartition]], gen: int
) -> dict[str, Subscription]:
    return {m: Subscription(s.topics, prev.get(m, []), gen) for m, s in subs.items()}


ALL = [RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()]


@settings(max_examples=150, deadline=None)
@given(groups())
def test_every_partition_once_to_a_subscriber(group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    ppt, subs = group
    for assignor in ALL:
        _check_valid(ppt, subs, assignor.assign(ppt, subs))


@settings(max_examples=100, deadline=None)
@given(groups(), st.data())
def test_sticky_valid_with_previous_ownership(
    group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject
) -> None:
    ppt, subs = group
    prev = RoundRobinAssignor().assign(ppt, subs)
    # Some members leave and some partitions had a different owner: sticky must still be a valid assignment.
    stay = data.draw(st.lists(st.sampled_from(sorted(subs)), min_size=1, unique=True))
    after = _with_owned({m: subs[m] for m in stay}, prev, 1)
    _check_valid(ppt, after, StickyAssignor().assign(ppt, after))


@settings(max_examples=100, deadline=None)
@given(groups(equal=True), st.booleans())
def test_balanced_when_subscriptions_equal(
    group: tuple[dict[str, int], dict[str, Subscription]], with_history: bool
) -> None:
    ppt, subs = group
    if with_history:
        subs = _with_owned(subs, RangeAssignor().assign(ppt, subs), 1)  # a lopsided previous assignment
    for assignor in (RoundRobinAssignor(), StickyAssignor()):
        sizes = [len(v) for v in assignor.assign(ppt, subs).values()]
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(equal=True), st.data())
def test_sticky_keeps_at_least_as_much_as_roundrobin(
    group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject
) -> None:
    ppt, subs = group
    if len(subs) < 2:
        return
    prev = StickyAssignor().assign(ppt, subs)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    after = _with_owned({m: s for m, s in subs.items() if m != leaver}, prev, 1)

    def kept(got: Mapping[str, list[TopicPartition]]) -> int:
        return sum(len(set(got[m]) & set(prev[m])) for m in got)

    sticky = StickyAssignor().assign(ppt, after)
    assert kept(sticky) >= kept(RoundRobinAssignor().assign(ppt, after))
    # With equal subscriptions nobody remaining loses a partition when one member leaves.
    assert kept(sticky) == sum(len(prev[m]) for m in after)


@settings(max_examples=100, deadline=None)
@given(groups(), st.data())
def test_cooperative_never_hands_over_a_partition_still_owned(
    group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject
) -> None:
    ppt, subs = group
    prev = data.draw(st.sampled_from([RangeAssignor(), RoundRobinAssignor()])).assign(ppt, subs)
    stay = data.draw(st.lists(st.sampled_from(sorted(subs)), min_size=1, unique=True))
    joiners = {
        f"new{i}": Subscription(data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)))
        for i in range(data.draw(st.integers(0, 2)))
    }
    after = {**_with_owned({m: subs[m] for m in stay}, prev, 1), **joiners}
    got = CooperativeStickyAssignor().assign(ppt, after)
    owned_by = {t: m for m, s in after.items() for t in s.owned_partitions}
    for m, tps in got.items():
        for t in tps:
            assert owned_by.get(t, m) == m, f"{t} given to {m} while {owned_by[t]} still owns it"
    # What cooperative hands out is the eager sticky target minus the moving partitions.
    eager = StickyAssignor().assign(ppt, after)
    for m in got:
        assert set(got[m]) <= set(eager[m])
        assert set(eager[m]) - set(got[m]) == {t for t in eager[m] if owned_by.get(t, m) != m}


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
def test_no_partitions_or_no_topics(assignor: object) -> None:
    subs = {"x": Subscription(["t"]), "y": Subscription(["u"])}
    assert assignor.assign({}, subs) == {"x": [], "y": []}  # type: ignore[attr-defined]
