"""Consumer assignor answers pinned to Apache Kafka's own test cases (inputs and expected outputs only).

Each test names the Kafka test it mirrors (clients/src/test/java/org/apache/kafka/clients/consumer/...).
Kafka runs its sticky cases for both ``StickyAssignor`` and ``CooperativeStickyAssignor``; so do we,
settling the cooperative flavour with follow-up rebalances the way Kafka's cooperative test harness
does before it checks the final state. Rack-aware variants are out of scope (see the module docstring
of ``kafkalite.client.assignors``); Kafka's non-rack expectations are the ones used here.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from kafkalite.client.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    _sticky_assign,
)
from kafkalite.protocol import TopicPartition

Assignment = dict[str, list[TopicPartition]]
STICKY_FLAVOURS = [StickyAssignor, CooperativeStickyAssignor]
GEN = 1  # Kafka's tests use generation 1 for "current" subscriptions


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def tps(spec: str) -> list[TopicPartition]:
    """``"t1-0, t2-3"`` -> partitions, the notation Kafka's rack tests use."""
    out = []
    for item in spec.split(", "):
        if item:
            topic, _, p = item.rpartition("-")
            out.append(tp(topic, int(p)))
    return out


def as_spec(parts: Sequence[TopicPartition]) -> str:
    return ", ".join(sorted(f"{t.topic}-{t.partition}" for t in parts))


def sub(
    topics: Sequence[str], owned: Sequence[TopicPartition] = (), gen: int = -1, **kw: object
) -> Subscription:
    return Subscription(list(topics), list(owned), gen, **kw)  # type: ignore[arg-type]


def transferring(
    ppt: Mapping[str, int], subs: Mapping[str, Subscription]
) -> dict[TopicPartition, str] | None:
    """Kafka's ``partitionsTransferringOwnership`` (``None`` on the general path, as in Kafka)."""
    wanted = {t for s in subs.values() for t in s.topics}
    return _sticky_assign({t: n for t, n in ppt.items() if t in wanted and n > 0}, subs)[1]


def assert_valid_and_balanced(subs: Mapping[str, Subscription], assignment: Assignment) -> None:
    """Kafka's verifyValidityAndBalance: subscribed topics only, no sharing, no useful move left."""
    assert set(assignment) == set(subs)
    members = sorted(assignment)
    for i, a in enumerate(members):
        for part in assignment[a]:
            assert part.topic in subs[a].topics
        for b in members[i + 1 :]:
            assert not set(assignment[a]) & set(assignment[b])
            if abs(len(assignment[a]) - len(assignment[b])) <= 1:
                continue
            more, less = (a, b) if len(assignment[a]) > len(assignment[b]) else (b, a)
            # Partitions of a topic both hold could have moved to the lighter one.
            assert not {t.topic for t in assignment[more]} & {t.topic for t in assignment[less]}, (more, less)


def fully_balanced(assignment: Assignment) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return max(sizes) - min(sizes) <= 1


def settle(
    assignor: object, ppt: Mapping[str, int], subs: dict[str, Subscription], got: Assignment
) -> Assignment:
    """Kafka's cooperative harness: while something is revoked, rebalance again with what is now owned."""
    rounds = 0
    while True:
        added, revoked = set(), set()
        for member, parts in got.items():
            owned = set(subs[member].owned_partitions)
            added |= set(parts) - owned
            revoked |= owned - set(parts)
        assert not added & revoked, "a partition was given away in the round it was revoked"
        if not revoked:
            return got
        for member, parts in got.items():
            s = subs[member]
            subs[member] = Subscription(s.topics, list(parts), GEN, s.group_instance_id, s.rack)
        got = assignor.assign(ppt, subs)  # type: ignore[attr-defined]
        rounds += 1
        assert rounds <= 4


def check(
    assignor: object, ppt: Mapping[str, int], subs: dict[str, Subscription], got: Assignment
) -> Assignment:
    """Validity and balance of the final state; returns that state (after follow-ups for cooperative)."""
    if isinstance(assignor, CooperativeStickyAssignor):
        got = settle(assignor, ppt, subs, got)
    assert_valid_and_balanced(subs, got)
    return got


# ==================================================================================================
# RangeAssignor (RangeAssignorTest, non-rack expectations)
# ==================================================================================================


def test_range_no_topic_and_nonexistent_topic() -> None:
    # testOneConsumerNoTopic / testOneConsumerNonexistentTopic
    assert RangeAssignor().assign({}, {"consumer1": sub([])}) == {"consumer1": []}
    assert RangeAssignor().assign({}, {"consumer1": sub(["topic1"])}) == {"consumer1": []}


def test_range_one_consumer() -> None:
    # testOneConsumerOneTopic, testOnlyAssignsPartitionsFromSubscribedTopics, testOneConsumerMultipleTopics
    r = RangeAssignor()
    assert r.assign({"topic1": 3}, {"c": sub(["topic1"])}) == {"c": tps("topic1-0, topic1-1, topic1-2")}
    assert r.assign({"topic1": 3, "other": 3}, {"c": sub(["topic1"])}) == {
        "c": tps("topic1-0, topic1-1, topic1-2")
    }
    got = r.assign({"topic1": 1, "topic2": 2}, {"c": sub(["topic1", "topic2"])})
    assert set(got["c"]) == set(tps("topic1-0, topic2-0, topic2-1"))


def test_range_two_consumers_one_topic() -> None:
    # testTwoConsumersOneTopicOnePartition / testTwoConsumersOneTopicTwoPartitions
    subs = {"consumer1": sub(["topic1"]), "consumer2": sub(["topic1"])}
    assert RangeAssignor().assign({"topic1": 1}, subs) == {"consumer1": tps("topic1-0"), "consumer2": []}
    assert RangeAssignor().assign({"topic1": 2}, subs) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1"),
    }


def test_range_mixed_topics() -> None:
    # testMultipleConsumersMixedTopics
    subs = {
        "consumer1": sub(["topic1"]),
        "consumer2": sub(["topic1", "topic2"]),
        "consumer3": sub(["topic1"]),
    }
    got = RangeAssignor().assign({"topic1": 3, "topic2": 2}, subs)
    assert {m: set(v) for m, v in got.items()} == {
        "consumer1": set(tps("topic1-0")),
        "consumer2": set(tps("topic1-1, topic2-0, topic2-1")),
        "consumer3": set(tps("topic1-2")),
    }


def test_range_two_topics_six_partitions_dynamic_and_static() -> None:
    # testTwoConsumersTwoTopicsSixPartitions, testTwoStaticConsumersTwoTopicsSixPartitions,
    # testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    ppt = {"topic1": 3, "topic2": 3}
    both = ["topic1", "topic2"]
    big, small = set(tps("topic1-0, topic1-1, topic2-0, topic2-1")), set(tps("topic1-2, topic2-2"))
    got = RangeAssignor().assign(ppt, {"consumer1": sub(both), "consumer2": sub(both)})
    assert (set(got["consumer1"]), set(got["consumer2"])) == (big, small)
    # Instance ids rank the members, not member ids ("consumer-b" wins over "consumer-a").
    subs = {
        "consumer-b": sub(both, group_instance_id="instance1"),
        "consumer-a": sub(both, group_instance_id="instance2"),
    }
    got = RangeAssignor().assign(ppt, subs)
    assert (set(got["consumer-b"]), set(got["consumer-a"])) == (big, small)
    subs = {"consumer-b": sub(both, group_instance_id="instance1"), "consumer-a": sub(both)}
    got = RangeAssignor().assign(ppt, subs)
    assert (set(got["consumer-b"]), set(got["consumer-a"])) == (big, small)


def test_range_static_members_persistent() -> None:
    # testStaticMemberRangeAssignmentPersistent
    ppt = {"topic1": 5, "topic2": 4}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": sub(both, group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub(both)
    expected = {
        "consumer1": set(tps("topic1-0, topic1-1, topic2-0")),
        "consumer2": set(tps("topic1-2, topic2-1")),
        "consumer3": set(tps("topic1-3, topic2-2")),
        "consumer4": set(tps("topic1-4, topic2-3")),
    }
    assert {m: set(v) for m, v in RangeAssignor().assign(ppt, subs).items()} == expected
    del subs["consumer4"]
    subs["consumer5"] = sub(both)
    expected["consumer5"] = expected.pop("consumer4")
    assert {m: set(v) for m, v in RangeAssignor().assign(ppt, subs).items()} == expected


def _by_instance(got: Assignment, subs: Mapping[str, Subscription]) -> dict[str, set[TopicPartition]]:
    return {s.group_instance_id: set(got[m]) for m, s in subs.items() if s.group_instance_id}  # type: ignore[misc]


@pytest.mark.parametrize(
    ("assignor", "expected"),
    [
        # testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges
        (
            RangeAssignor,
            {
                "instance1": "topic1-0, topic1-1, topic2-0, topic2-1",
                "instance2": "topic1-2, topic1-3, topic2-2, topic2-3",
                "instance3": "topic1-4, topic2-4",
            },
        ),
        # testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges
        (
            RoundRobinAssignor,
            {
                "instance1": "topic1-0, topic1-3, topic2-1, topic2-4",
                "instance2": "topic1-1, topic1-4, topic2-2",
                "instance3": "topic1-2, topic2-0, topic2-3",
            },
        ),
    ],
)
def test_static_members_survive_member_id_changes(assignor: type, expected: dict[str, str]) -> None:
    ppt = {"topic1": 5, "topic2": 5}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": sub(both, group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    want = {instance: set(tps(names)) for instance, names in expected.items()}
    assert _by_instance(assignor().assign(ppt, subs), subs) == want
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert _by_instance(assignor().assign(ppt, subs), subs) == want


def _spec_assign(
    assignor: object, ppt: Mapping[str, int], topics: Sequence[Sequence[str]], owned=None
) -> list[str]:
    """Kafka's verifyRackAssignment without racks: members consumer0.., answers as sorted strings."""
    owned = owned or []
    subs = {f"consumer{i}": sub(t, tps(owned[i]) if i < len(owned) else [], -1) for i, t in enumerate(topics)}
    got = assignor.assign(ppt, subs)  # type: ignore[attr-defined]
    return [as_spec(got[f"consumer{i}"]) for i in range(len(topics))]


ALL3 = ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    ("ppt", "topics", "expected"),
    [
        # testRackAwareAssignmentWithUniformSubscription: the "rack-aware logic not used" answer
        (
            {"t1": 6, "t2": 7, "t3": 2},
            [ALL3, ALL3, ALL3],
            ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
        ),
        # testRackAwareAssignmentWithNonEqualSubscription
        (
            {"t1": 6, "t2": 7, "t3": 2},
            [ALL3, ALL3, ["t1", "t3"]],
            ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
        ),
        # testRackAwareAssignmentWithUniformPartitions
        (
            {"t1": 5, "t2": 5, "t3": 5},
            [ALL3, ALL3, ALL3],
            ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"],
        ),
        # testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription
        (
            {"t1": 5, "t2": 5, "t3": 5},
            [ALL3, ALL3, ["t1", "t3"]],
            ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
        ),
        # testRackAwareAssignmentWithCoPartitioning (both subscription layouts)
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
            [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]],
            [
                "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
                "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
                "t3-0, t4-0",
                "t3-1, t4-1",
            ],
        ),
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
            [["t1", "t2", "t3", "t4"]] * 4,
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
                "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
                "t1-4, t2-4",
                "t1-5, t2-5",
            ],
        ),
        # testCoPartitionedAssignmentWithSameSubscription (t7..t9 do not exist)
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4},
            [[f"t{i}" for i in range(1, 10)]] * 3,
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
                "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
                "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
            ],
        ),
    ],
)
def test_range_kafka_multi_topic_answers(
    ppt: dict[str, int], topics: list[list[str]], expected: list[str]
) -> None:
    assert _spec_assign(RangeAssignor(), ppt, topics) == expected


def test_range_rack_arguments_do_not_change_the_answer_without_partition_racks() -> None:
    # Kafka falls back to the plain answer when partitions carry no rack (nullRacks broker cases).
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    subs = {f"consumer{i}": sub(ALL3, rack="abc"[i]) for i in range(3)}
    got = RangeAssignor().assign(ppt, subs)
    assert [as_spec(got[f"consumer{i}"]) for i in range(3)] == [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
        "t1-2, t1-3, t2-3, t2-4, t3-1",
        "t1-4, t1-5, t2-5, t2-6",
    ]


# ==================================================================================================
# RoundRobinAssignor (RoundRobinAssignorTest)
# ==================================================================================================


def test_roundrobin_basic_cases() -> None:
    rr = RoundRobinAssignor()
    assert rr.assign({}, {"consumer": sub([])}) == {"consumer": []}
    assert rr.assign({}, {"consumer": sub(["topic"])}) == {"consumer": []}
    assert rr.assign({"topic": 3}, {"consumer": sub(["topic"])}) == {
        "consumer": tps("topic-0, topic-1, topic-2")
    }
    assert rr.assign({"topic": 3, "other": 3}, {"consumer": sub(["topic"])}) == {
        "consumer": tps("topic-0, topic-1, topic-2")
    }
    got = rr.assign({"topic1": 1, "topic2": 2}, {"consumer": sub(["topic1", "topic2"])})
    assert got == {"consumer": tps("topic1-0, topic2-0, topic2-1")}
    two = {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])}
    assert rr.assign({"topic": 1}, two) == {"consumer1": tps("topic-0"), "consumer2": []}
    assert rr.assign({"topic": 2}, two) == {"consumer1": tps("topic-0"), "consumer2": tps("topic-1")}


def test_roundrobin_mixed_topics() -> None:
    # testMultipleConsumersMixedTopics
    subs = {
        "consumer1": sub(["topic1"]),
        "consumer2": sub(["topic1", "topic2"]),
        "consumer3": sub(["topic1"]),
    }
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 2}, subs) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-0, topic2-1"),
        "consumer3": tps("topic1-2"),
    }


def test_roundrobin_two_topics_six_partitions() -> None:
    # testTwoDynamicConsumersTwoTopicsSixPartitions, testTwoStaticConsumersTwoTopicsSixPartitions,
    # testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    ppt = {"topic1": 3, "topic2": 3}
    both = ["topic1", "topic2"]
    first, second = tps("topic1-0, topic1-2, topic2-1"), tps("topic1-1, topic2-0, topic2-2")
    assert RoundRobinAssignor().assign(ppt, {"consumer1": sub(both), "consumer2": sub(both)}) == {
        "consumer1": first,
        "consumer2": second,
    }
    subs = {
        "consumer-b": sub(both, group_instance_id="instance1"),
        "consumer-a": sub(both, group_instance_id="instance2"),
    }
    assert RoundRobinAssignor().assign(ppt, subs) == {"consumer-b": first, "consumer-a": second}
    subs = {"consumer-b": sub(both, group_instance_id="instance1"), "consumer-a": sub(both)}
    assert RoundRobinAssignor().assign(ppt, subs) == {"consumer-b": first, "consumer-a": second}


def test_roundrobin_static_members_persistent() -> None:
    # testStaticMemberRoundRobinAssignmentPersistent
    ppt = {"topic1": 3, "topic2": 3}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": sub(both, group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub(both)
    expected = {
        "consumer1": tps("topic1-0, topic2-1"),
        "consumer2": tps("topic1-1, topic2-2"),
        "consumer3": tps("topic1-2"),
        "consumer4": tps("topic2-0"),
    }
    assert RoundRobinAssignor().assign(ppt, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = sub(both)
    expected["consumer5"] = expected.pop("consumer4")
    assert RoundRobinAssignor().assign(ppt, subs) == expected


# ==================================================================================================
# Sticky and cooperative sticky (AbstractStickyAssignorTest, StickyAssignorTest, CooperativeStickyAssignorTest)
# ==================================================================================================


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_trivial_cases(cls: type) -> None:
    # testOneConsumerNoTopic, testOneConsumerNonexistentTopic, testOneConsumerOneTopic,
    # testOnlyAssignsPartitionsFromSubscribedTopics, testOneConsumerMultipleTopics
    a = cls()
    assert a.assign({}, {"consumer": sub([])}) == {"consumer": []}
    assert a.assign({"topic": 0}, {"consumer": sub(["topic"])}) == {"consumer": []}
    assert a.assign({"topic": 3}, {"consumer": sub(["topic"])}) == {
        "consumer": tps("topic-0, topic-1, topic-2")
    }
    owned = tps("topic-0, topic-1, other-0, other-1")
    assert a.assign({"topic": 2}, {"consumer": sub(["topic"], owned, GEN)}) == {
        "consumer": tps("topic-0, topic-1")
    }
    got = a.assign({"topic1": 1, "topic2": 2}, {"consumer": sub(["topic1", "topic2"])})
    assert got == {"consumer": tps("topic1-0, topic2-0, topic2-1")}


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_two_consumers_one_topic(cls: type) -> None:
    # testTwoConsumersOneTopicOnePartition / testTwoConsumersOneTopicTwoPartitions
    subs = {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])}
    got = cls().assign({"topic": 1}, subs)
    assert sorted(len(v) for v in got.values()) == [0, 1]
    assert cls().assign({"topic": 2}, subs) == {"consumer1": tps("topic-0"), "consumer2": tps("topic-1")}
    assert transferring({"topic": 2}, subs) == {}


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_mixed_topic_subscriptions(cls: type) -> None:
    # testMultipleConsumersMixedTopicSubscriptions (general path: no transferring map)
    ppt = {"topic1": 3, "topic2": 2}
    subs = {
        "consumer1": sub(["topic1"]),
        "consumer2": sub(["topic1", "topic2"]),
        "consumer3": sub(["topic1"]),
    }
    assert cls().assign(ppt, subs) == {
        "consumer1": tps("topic1-0, topic1-2"),
        "consumer2": tps("topic2-0, topic2-1"),
        "consumer3": tps("topic1-1"),
    }
    assert transferring(ppt, subs) is None


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_two_consumers_two_topics_six_partitions(cls: type) -> None:
    # testTwoConsumersTwoTopicsSixPartitions
    both = ["topic1", "topic2"]
    got = cls().assign({"topic1": 3, "topic2": 3}, {"consumer1": sub(both), "consumer2": sub(both)})
    assert got == {
        "consumer1": tps("topic1-0, topic1-2, topic2-1"),
        "consumer2": tps("topic1-1, topic2-0, topic2-2"),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_owner_of_min_quota_gets_max_quota(cls: type) -> None:
    # testConsumerOwningMinQuotaExpectedMaxQuota
    ppt = {"topic1": 2, "topic2": 3}
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": sub(both, tps("topic1-0, topic2-1"), GEN),
        "consumer2": sub(both, tps("topic1-1, topic2-2"), GEN),
    }
    assert transferring(ppt, subs) == {}
    got = cls().assign(ppt, subs)
    assert got == {"consumer1": tps("topic1-0, topic2-1, topic2-0"), "consumer2": tps("topic1-1, topic2-2")}


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_more_max_quota_owners_than_needed(cls: type) -> None:
    # testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers
    ppt = {"topic1": 2, "topic2": 2}
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": sub(both, tps("topic1-0, topic2-0"), GEN),
        "consumer2": sub(both, tps("topic1-1, topic2-1"), GEN),
        "consumer3": sub(both, [], GEN),
    }
    assert transferring(ppt, subs) == {tp("topic2", 0): "consumer3"}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    assert got == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-1"),
        "consumer3": tps("topic2-0"),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_all_consumers_under_min_quota(cls: type) -> None:
    # testAllConsumersAreUnderMinQuota
    ppt = {"topic1": 2, "topic2": 3}
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": sub(both, tps("topic1-0"), GEN),
        "consumer2": sub(both, tps("topic1-1"), GEN),
        "consumer3": sub(both, [], GEN),
    }
    assert transferring(ppt, subs) == {}
    assert cls().assign(ppt, subs) == {
        "consumer1": tps("topic1-0, topic2-1"),
        "consumer2": tps("topic1-1, topic2-2"),
        "consumer3": tps("topic2-0"),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_add_remove_consumer_one_topic(cls: type) -> None:
    # testAddRemoveConsumerOneTopic
    ppt = {"topic": 3}
    a = cls()
    got = a.assign(ppt, {"consumer1": sub(["topic"])})
    assert got == {"consumer1": tps("topic-0, topic-1, topic-2")}
    subs = {"consumer1": sub(["topic"], got["consumer1"], GEN), "consumer2": sub(["topic"], [], GEN)}
    assert transferring(ppt, subs) == {tp("topic", 2): "consumer2"}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    assert got == {"consumer1": tps("topic-0, topic-1"), "consumer2": tps("topic-2")}
    subs = {"consumer2": sub(["topic"], got["consumer2"], GEN)}
    assert transferring(ppt, subs) == {}
    assert set(a.assign(ppt, subs)["consumer2"]) == set(tps("topic-0, topic-1, topic-2"))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_topic_balance_after_reassignment(cls: type) -> None:
    # testTopicBalanceAfterReassignment: every member gets an equal share of each topic.
    ppt = {"topic1": 12, "topic2": 12}
    both = ["topic1", "topic2"]
    a = cls()

    def per_topic(got: Assignment, n: int) -> None:
        for parts in got.values():
            assert sum(p.topic == "topic1" for p in parts) == n
            assert sum(p.topic == "topic2" for p in parts) == n

    subs = {"consumer1": sub(both)}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    per_topic(got, 12)
    subs = {"consumer1": sub(both, got["consumer1"], GEN), "consumer2": sub(both, [], GEN)}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    per_topic(got, 6)
    subs = {m: sub(both, got.get(m, []), GEN) for m in ("consumer1", "consumer2", "consumer3", "consumer4")}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    per_topic(got, 3)
    subs = {m: sub(both, got[m], GEN) for m in ("consumer3", "consumer4")}
    assert transferring(ppt, subs) == {}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    per_topic(got, 6)


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_add_remove_two_consumers_two_topics(cls: type) -> None:
    # testAddRemoveTwoConsumersTwoTopics, including the transferring-ownership map
    ppt = {"topic1": 3, "topic2": 4}
    both = ["topic1", "topic2"]
    a = cls()
    subs = {"consumer1": sub(both), "consumer2": sub(both)}
    got = a.assign(ppt, subs)
    assert got == {
        "consumer1": tps("topic1-0, topic1-2, topic2-1, topic2-3"),
        "consumer2": tps("topic1-1, topic2-0, topic2-2"),
    }
    subs = {m: sub(both, got.get(m, []), GEN) for m in ("consumer1", "consumer2", "consumer3", "consumer4")}
    assert transferring(ppt, subs) == {
        tp("topic1", 2): "consumer3",
        tp("topic2", 3): "consumer3",
        tp("topic2", 2): "consumer4",
    }
    got = check(a, ppt, subs, a.assign(ppt, subs))
    assert got == {
        "consumer1": tps("topic1-0, topic2-1"),
        "consumer2": tps("topic2-0, topic1-1"),
        "consumer3": tps("topic1-2, topic2-3"),
        "consumer4": tps("topic2-2"),
    }
    subs = {m: sub(both, got[m], GEN) for m in ("consumer3", "consumer4")}
    assert transferring(ppt, subs) == {}
    assert a.assign(ppt, subs) == {
        "consumer3": tps("topic1-2, topic2-3, topic1-0, topic2-1"),
        "consumer4": tps("topic2-2, topic1-1, topic2-0"),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_poor_round_robin_scenario(cls: type) -> None:
    # testPoorRoundRobinAssignmentScenario: topicN has N % 2 + 1 partitions.
    ppt = {f"topic{i}": i % 2 + 1 for i in range(1, 6)}
    every = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    subs = {"consumer1": sub(every), "consumer2": sub(odd), "consumer3": sub(odd), "consumer4": sub(every)}
    a = cls()
    check(a, ppt, subs, a.assign(ppt, subs))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_add_remove_topic_two_consumers(cls: type) -> None:
    # testAddRemoveTopicTwoConsumers
    a = cls()
    ppt = {"topic": 3}
    subs = {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])}
    first = a.assign(ppt, subs)
    assert transferring(ppt, subs) == {}
    assert sorted(len(v) for v in first.values()) == [1, 2]
    ppt = {"topic": 3, "topic2": 3}
    subs = {m: sub(["topic", "topic2"], first[m], GEN) for m in first}
    assert transferring(ppt, subs) == {}
    second = check(a, ppt, subs, a.assign(ppt, subs))
    for m in second:
        assert len(second[m]) == 3 and set(first[m]) <= set(second[m])
    ppt = {"topic2": 3}
    subs = {m: sub(["topic2"], second[m], GEN) for m in second}
    assert transferring(ppt, subs) == {}
    third = check(a, ppt, subs, a.assign(ppt, subs))
    assert sorted(len(v) for v in third.values()) == [1, 2]
    for m in third:
        assert set(third[m]) <= set(second[m])


def _name(prefix: str, i: int, max_num: int) -> str:
    # Kafka's getCanonicalName: zero-padded to the width of max_num.
    return f"{prefix}{i:0{len(str(max_num))}d}"


def _moves_are_one_way(before: Mapping[str, Sequence[TopicPartition]], after: Assignment) -> bool:
    """Stand-in for Kafka's isSticky: no two members swapped partitions of one topic."""
    owner = {p: m for m, parts in before.items() for p in parts}
    pairs = {
        (p.topic, owner[p], m) for m, parts in after.items() for p in parts if p in owner and owner[p] != m
    }
    return not any((t, b, a) in pairs for t, a, b in pairs)


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_reassignment_after_one_consumer_leaves(cls: type) -> None:
    # testReassignmentAfterOneConsumerLeaves: 19 topics (ti has i partitions), consumer i takes t1..ti.
    ppt = {_name("t", i, 20): i for i in range(1, 20)}
    subs = {_name("c", i, 20): sub([_name("t", j, 20) for j in range(1, i + 1)]) for i in range(1, 20)}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    subs = {m: sub(s.topics, got[m], GEN) for m, s in subs.items()}
    del subs["c10"]
    before = {m: list(s.owned_partitions) for m, s in subs.items()}
    got = a.assign(ppt, subs)
    assert _moves_are_one_way(before, got)
    check(a, ppt, subs, got)


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_reassignment_after_one_consumer_added(cls: type) -> None:
    # testReassignmentAfterOneConsumerAdded: new members own nothing, so nothing is transferring.
    ppt = {"topic": 20}
    subs = {_name("c", i, 10): sub(["topic"]) for i in range(1, 10)}
    a = cls()
    assert transferring(ppt, subs) == {}
    check(a, ppt, subs, a.assign(ppt, subs))
    subs[_name("c", 10, 10)] = sub(["topic"])
    assert transferring(ppt, subs) == {}
    check(a, ppt, subs, a.assign(ppt, subs))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_same_subscriptions(cls: type) -> None:
    # testSameSubscriptions: 14 topics, 8 members with identical subscriptions, one leaves.
    ppt = {_name("t", i, 15): i for i in range(1, 15)}
    topics = list(ppt)
    subs = {_name("c", i, 9): sub(topics) for i in range(1, 9)}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    subs = {m: sub(topics, got[m], GEN) for m in subs}
    del subs[_name("c", 5, 9)]
    assert transferring(ppt, subs) == {}
    check(a, ppt, subs, a.assign(ppt, subs))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_three_generations_same_partition(cls: type) -> None:
    # testSubscriptionNotEqualAndAssignSamePartitionWith3Generation
    ppt = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {
            "consumer1": sub(["topic"], tps("topic-0, topic-2"), g1),
            "consumer2": sub(["topic"], tps("topic-1, topic-2, topic-3"), g2),
            "consumer3": sub(["topic"], tps("topic-2, topic-4, topic-5"), g3),
            "consumer4": sub(["topic1"], tps("topic1-0"), 2),
        }
        got = cls().assign(ppt, subs)
        everything = [p for parts in got.values() for p in parts]
        assert len(everything) == len(set(everything))
        assert all(1 <= len(parts) <= 2 for parts in got.values())


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_new_subscription(cls: type) -> None:
    # testNewSubscription
    ppt = {_name("t", i, 5): 1 for i in range(1, 5)}
    subs = {_name("c", i, 3): sub([_name("t", j, 5) for j in range(i, 3 * i - 1)]) for i in range(3)}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    # Kafka mutates consumer 0's topic list in place; its subscription carries no ownership.
    subs["c0"] = sub([*subs["c0"].topics, _name("t", 1, 5)])
    before = {m: list(v) for m, v in got.items()}
    got = a.assign(ppt, subs)
    assert _moves_are_one_way(before, got)
    check(a, ppt, subs, got)


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_move_existing_assignments(cls: type) -> None:
    # testMoveExistingAssignments
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {
        "consumer1": sub(["topic1", "topic2"], tps("topic1-0"), GEN),
        "consumer2": sub(["topic1", "topic2", "topic3", "topic4"], tps("topic2-0, topic3-0"), GEN),
        "consumer3": sub(
            ["topic2", "topic3", "topic4", "topic5", "topic6"], tps("topic4-0, topic5-0, topic6-0"), GEN
        ),
    }
    assert transferring(ppt, subs) is None
    a = cls()
    check(a, ppt, subs, a.assign(ppt, subs))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_stickiness_when_leader_leaves(cls: type) -> None:
    # testStickiness
    ppt = {"topic1": 3}
    subs = {f"consumer{i}": sub(["topic1"]) for i in range(1, 5)}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) <= 1 for v in got.values())
    kept = {m: v[0] for m, v in got.items() if v}
    subs = {m: sub(["topic1"], got[m], GEN) for m in ("consumer2", "consumer3", "consumer4")}
    assert transferring(ppt, subs) == {}
    got = check(a, ppt, subs, a.assign(ppt, subs))
    for m, parts in got.items():
        assert len(parts) == 1
        assert m not in kept or kept[m] in parts


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_deleted_topics(cls: type) -> None:
    # testAssignmentUpdatedForDeletedTopic / testNoExceptionThrownWhenOnlySubscribedTopicDeleted
    got = cls().assign({"topic1": 1, "topic3": 100}, {"consumer": sub(["topic1", "topic2", "topic3"])})
    assert len(got["consumer"]) == 101
    a = cls()
    got = a.assign({"topic": 3}, {"consumer": sub(["topic"])})
    assert a.assign({}, {"consumer": sub(["topic"], got["consumer"], GEN)}) == {"consumer": []}


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_random_subscriptions_and_changes(cls: type) -> None:
    # testReassignmentWithRandomSubscriptionsAndChanges (seeded, fewer rounds)
    rng = random.Random(794)

    def random_sublist(items: list[str]) -> list[str]:
        chosen = list(items)
        for _ in range(rng.randrange(len(items))):
            chosen.pop(rng.randrange(len(chosen)))
        return sorted(chosen)

    for _ in range(6):
        n_topics = 10 + rng.randrange(10)
        topics = [_name("t", i, 20) for i in range(n_topics)]
        ppt = {t: i + 1 for i, t in enumerate(topics)}
        n_members = 20 + rng.randrange(20)
        subs = {_name("c", i, 40): sub(random_sublist(topics)) for i in range(n_members)}
        a = cls()
        got = check(a, ppt, subs, a.assign(ppt, subs))
        subs = {m: sub(random_sublist(topics), got[m], GEN) for m in subs}
        check(a, ppt, subs, a.assign(ppt, subs))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_all_reach_quota(cls: type) -> None:
    # testAllConsumersReachExpectedQuotaAndAreConsideredFilled
    ppt = {"topic": 4}
    subs = {
        "consumer1": sub(["topic"], tps("topic-0, topic-1"), GEN),
        "consumer2": sub(["topic"], tps("topic-2"), GEN),
        "consumer3": sub(["topic"], [], GEN),
    }
    assert transferring(ppt, subs) == {}
    assert cls().assign(ppt, subs) == {
        "consumer1": tps("topic-0, topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-3"),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
@pytest.mark.parametrize("stale", [9, -1])
def test_sticky_stale_or_missing_generation_loses_claims(cls: type, stale: int) -> None:
    # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration / ...WithNoGeneration
    ppt = {"topic": 3, "topic2": 3}
    both = ["topic", "topic2"]
    claimed = tps("topic-0, topic-2, topic2-1")
    subs = {"consumer1": sub(both, claimed, 10), "consumer2": sub(both, claimed, stale)}
    assert transferring(ppt, subs) == {}
    got = cls().assign(ppt, subs)
    assert set(got["consumer1"]) == set(claimed)
    assert set(got["consumer2"]) == set(tps("topic-1, topic2-0, topic2-2"))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_double_claim_in_one_generation_is_transferring(cls: type) -> None:
    # testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration
    ppt = {"topic": 3}
    subs = {
        "consumer1": sub(["topic"], tps("topic-0, topic-1"), GEN),
        "consumer2": sub(["topic"], tps("topic-0, topic-2"), GEN),
        "consumer3": sub(["topic"], [], GEN),
    }
    assert transferring(ppt, subs) == {tp("topic", 0): "consumer3"}
    a = cls()
    got = check(a, ppt, subs, a.assign(ppt, subs))
    assert got == {"consumer1": tps("topic-1"), "consumer2": tps("topic-2"), "consumer3": tps("topic-0")}


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_highest_generation_keeps_partitions(cls: type) -> None:
    # testEnsurePartitionsAssignedToHighestGeneration
    ppt = {"topic": 3, "topic2": 3, "topic3": 3}
    every = ["topic", "topic2", "topic3"]
    subs = {
        "consumer1": sub(every, tps("topic-0, topic2-0, topic3-0"), 10),
        "consumer2": sub(every, tps("topic-1, topic2-1, topic3-1"), 9),
        "consumer3": sub(every, tps("topic2-1, topic3-0, topic3-2"), 8),
    }
    assert transferring(ppt, subs) == {}
    got = cls().assign(ppt, subs)
    assert {m: set(v) for m, v in got.items()} == {
        "consumer1": set(tps("topic-0, topic2-0, topic3-0")),
        "consumer2": set(tps("topic-1, topic2-1, topic3-1")),
        "consumer3": set(tps("topic-2, topic2-2, topic3-2")),
    }


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_no_reassignment_on_current_members(cls: type) -> None:
    # testNoReassignmentOnCurrentMembers
    ppt = {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3}
    every = ["topic", "topic2", "topic3", "topic1"]
    subs = {
        "consumer1": sub(every, [], -1),
        "consumer2": sub(every, tps("topic-0, topic2-0, topic1-0"), 9),
        "consumer3": sub(every, tps("topic3-2, topic2-2, topic1-1"), 8),
        "consumer4": sub(every, tps("topic3-1, topic-1, topic-2"), 7),
    }
    assert transferring(ppt, subs) == {}
    got = cls().assign(ppt, subs)
    assert set(got["consumer1"]) == set(tps("topic1-2, topic2-1, topic3-0"))
    assert fully_balanced(got)


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_claims_across_several_generations(cls: type) -> None:
    # testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration
    ppt = {"topic": 3, "topic2": 3}
    both = ["topic", "topic2"]
    subs = {
        "consumer1": sub(both, tps("topic-0, topic2-1, topic-1"), 10),
        "consumer2": sub(both, tps("topic-0, topic2-1, topic2-2"), 8),
    }
    assert transferring(ppt, subs) == {}
    got = cls().assign(ppt, subs)
    assert set(got["consumer1"]) == set(tps("topic-0, topic2-1, topic-1"))
    assert set(got["consumer2"]) == set(tps("topic-2, topic2-2, topic2-0"))


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_uniform_subscription_spec_answers(cls: type) -> None:
    # AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription, non-rack answer,
    # computed from scratch and again from that answer as ownership.
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    expected = [
        "t1-0, t1-3, t2-0, t2-3, t2-6",
        "t1-1, t1-4, t2-1, t2-4, t3-0",
        "t1-2, t1-5, t2-2, t2-5, t3-1",
    ]
    assert _spec_assign(cls(), ppt, [ALL3] * 3) == expected
    assert _spec_assign(cls(), ppt, [ALL3] * 3, expected) == expected


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_non_equal_subscription_spec_answers(cls: type) -> None:
    # AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription, non-rack answers.
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    topics = [ALL3, ALL3, ["t1", "t3"]]
    expected = [
        "t1-5, t2-0, t2-2, t2-4, t2-6",
        "t1-3, t2-1, t2-3, t2-5, t3-0",
        "t1-0, t1-1, t1-2, t1-4, t3-1",
    ]
    assert _spec_assign(cls(), ppt, topics) == expected
    assert _spec_assign(cls(), ppt, topics, expected) == expected
    # Badly placed ownership, cooperative only: Kafka's eager variant of this case passes ownership in
    # the subscription field, which StickyAssignor ignores (it reads user data), so it pins nothing.
    # The cooperative flavour first revokes what moves, then hands it out in the follow-up rebalance.
    owned = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]
    if cls is CooperativeStickyAssignor:
        intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
        final = [
            "t1-2, t1-3, t1-4, t2-4, t2-5",
            "t2-0, t2-1, t2-2, t2-3, t2-6",
            "t1-0, t1-1, t1-5, t3-0, t3-1",
        ]
        assert _spec_assign(cls(), ppt, topics, owned) == intermediate
        assert _spec_assign(cls(), ppt, topics, intermediate) == final


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
@pytest.mark.parametrize("equal", [True, False])
def test_sticky_multiple_generations_1(cls: type, equal: bool) -> None:
    # StickyAssignorTest.testAssignmentWithMultipleGenerations1
    every = ["topic", "topic2"]
    c2_topics = every if equal else ["topic"]
    ppt = {"topic": 6, "topic2": 6}
    a = cls()
    subs = {"consumer1": sub(every), "consumer2": sub(c2_topics), "consumer3": sub(every)}
    r1 = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) == 4 for v in r1.values())
    subs = {"consumer1": sub(every, r1["consumer1"], GEN), "consumer2": sub(c2_topics, r1["consumer2"], GEN)}
    r2 = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) == 6 for v in r2.values())
    if equal:
        assert set(r1["consumer1"]) <= set(r2["consumer1"])
    assert set(r1["consumer2"]) <= set(r2["consumer2"])
    assert set(r2["consumer2"]) & set(r1["consumer3"])
    subs = {"consumer2": sub(c2_topics, r2["consumer2"], 2), "consumer3": sub(every, r1["consumer3"], 1)}
    r3 = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) == 6 for v in r3.values())
    assert not set(r3["consumer2"]) & set(r3["consumer3"])


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
@pytest.mark.parametrize("equal", [True, False])
def test_sticky_multiple_generations_2(cls: type, equal: bool) -> None:
    # StickyAssignorTest.testAssignmentWithMultipleGenerations2
    every = ["topic", "topic2", "topic3"]
    c1_topics = every if equal else ["topic"]
    c3_topics = every if equal else ["topic", "topic2"]
    ppt = {"topic": 4, "topic2": 4, "topic3": 4}
    a = cls()
    subs = {"consumer1": sub(c1_topics), "consumer2": sub(every), "consumer3": sub(c3_topics)}
    r1 = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) == 4 for v in r1.values())
    subs = {"consumer2": sub(every, r1["consumer2"], 1)}
    r2 = check(a, ppt, subs, a.assign(ppt, subs))
    assert len(r2["consumer2"]) == 12 and set(r1["consumer2"]) <= set(r2["consumer2"])
    subs = {
        "consumer2": sub(every, r2["consumer2"], 2),
        "consumer1": sub(c1_topics, r1["consumer1"], 1),
        "consumer3": sub(c3_topics, r1["consumer3"], 1),
    }
    r3 = check(a, ppt, subs, a.assign(ppt, subs))
    assert all(len(v) == 4 for v in r3.values())


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
@pytest.mark.parametrize("equal", [True, False])
def test_sticky_conflicting_previous_generations(cls: type, equal: bool) -> None:
    # StickyAssignorTest.testAssignmentWithConflictingPreviousGenerations
    every = ["topic", "topic2", "topic3"]
    c1_topics = every if equal else ["topic"]
    c2_topics = every if equal else ["topic", "topic2"]
    ppt = {"topic": 4, "topic2": 4, "topic3": 4}
    c1 = (
        tps("topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0")
        if equal
        else tps("topic-0, topic-1, topic-2, topic-3")
    )
    c2 = tps("topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3")
    c3 = tps("topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3")
    subs = {
        "consumer1": sub(c1_topics, c1, 1),
        "consumer2": sub(c2_topics, c2, 2),
        "consumer3": sub(every, c3, 2),
    }
    a = cls()
    got = a.assign(ppt, subs)
    if cls is StickyAssignor:
        assert all(len(v) == 4 for v in got.values())
    assert set(got["consumer2"]) <= set(c2) and set(got["consumer3"]) <= set(c3)
    got = check(a, ppt, subs, got)
    assert all(len(v) == 4 for v in got.values())


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_owned_without_generation_still_counts(cls: type) -> None:
    # StickyAssignorTest.testSchemaBackwardCompatibility: consumer2's claim carries no generation.
    ppt = {"topic": 3}
    subs = {
        "consumer1": sub(["topic"], tps("topic-0, topic-2"), 1),
        "consumer2": sub(["topic"], tps("topic-1"), -1),
        "consumer3": sub(["topic"]),
    }
    a = cls()
    got = a.assign(ppt, subs)
    assert set(got["consumer1"]) <= set(tps("topic-0, topic-2")) and set(got["consumer2"]) <= set(
        tps("topic-1")
    )
    got = check(a, ppt, subs, got)
    assert all(len(v) == 1 for v in got.values())


@pytest.mark.parametrize("cls", STICKY_FLAVOURS)
def test_sticky_old_subscription_versions(cls: type) -> None:
    # StickyAssignorTest / CooperativeStickyAssignorTest.testAssignorWithOldVersionSubscriptions
    subs = {
        "consumer1": sub(["topic1"], tps("topic1-0"), GEN),
        "consumer2": sub(["topic1"], tps("topic1-1"), GEN),
        "consumer3": sub(["topic1"], [], GEN),
    }
    assert cls().assign({"topic1": 3}, subs) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1"),
        "consumer3": tps("topic1-2"),
    }


@pytest.mark.parametrize("partitions", [3, 4])
def test_double_claims_eager_vs_cooperative(partitions: int) -> None:
    # StickyAssignorTest / CooperativeStickyAssignorTest
    # .testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGeneration*
    ppt = {"topic": partitions}
    subs = {
        "consumer1": sub(["topic"], tps("topic-0, topic-1"), GEN),
        "consumer2": sub(["topic"], tps("topic-0, topic-2"), GEN),
        "consumer3": sub(["topic"], [], GEN),
    }
    c1 = tps("topic-1") if partitions == 3 else tps("topic-1, topic-3")
    assert StickyAssignor().assign(ppt, subs) == {
        "consumer1": c1,
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-0"),
    }
    # Cooperative: topic-0 stays unassigned until both claimants have let it go.
    assert CooperativeStickyAssignor().assign(ppt, subs) == {
        "consumer1": c1,
        "consumer2": tps("topic-2"),
        "consumer3": [],
    }
