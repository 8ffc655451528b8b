"""Producer partitioners: Kafka's murmur2 vectors, Kafka's partitioner test scenarios, properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.client.partitioner import (
    BuiltInPartitioner,
    DefaultPartitioner,
    KeyHashPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
    UniformStickyPartitioner,
    choose_partition,
    create_partitioner,
    murmur2,
    partition_for_key,
    to_positive,
)
from kafkalite.errors import InvalidConfigError

# --------------------------------------------------------------------------------------------------
# murmur2
# --------------------------------------------------------------------------------------------------

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# Not in Kafka's tests: cover a one-byte tail, bytes >= 0x80 and the empty key. Values computed by a
# Java transcription of the algorithm run on a JVM (so Java's own int wrap-around and >>> apply).
JVM_CROSS_CHECKED = [
    (b"", 275646681),
    (b"a", -1563381124),
    (b"\xff", -311467685),
    (b"\x80", 857690492),
    (b"hello", 2132663229),
    (b"\xff\xff\xff\xff\xff", -363838622),
    (b"key", -1079937367),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS + JVM_CROSS_CHECKED)
def test_murmur2_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive() -> None:
    assert to_positive(0) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # where abs() would stay negative in Java
    assert to_positive(2**31 - 1) == 2**31 - 1
    assert to_positive(-790332482) == 1357151166


@pytest.mark.parametrize(
    ("key", "partitions", "expected"),
    # to_positive of the Kafka vectors above, modulo the partition count.
    [(b"foobar", 10, 6), (b"foobar", 50, 16), (b"21", 3, 0), (b"abc", 7, 479470107 % 7), (b"21", 1, 0)],
)
def test_partition_for_key(key: bytes, partitions: int, expected: int) -> None:
    assert partition_for_key(key, partitions) == expected


def test_partition_for_key_needs_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


@given(st.binary(max_size=200))
def test_murmur2_is_a_deterministic_int32(data: bytes) -> None:
    h = murmur2(data)
    assert -(2**31) <= h < 2**31
    assert murmur2(bytes(data)) == h


@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_partition_in_range(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert DefaultPartitioner().partition("t", key, None, n) == p


# --------------------------------------------------------------------------------------------------
# Round robin (scenarios of Kafka's RoundRobinPartitionerTest)
# --------------------------------------------------------------------------------------------------


def test_round_robin_skips_unavailable() -> None:
    # Partitions listed 1, 2, 0 with 1 leaderless: available in metadata order is [2, 0].
    rr = RoundRobinPartitioner()
    counts = Counter(rr.partition("test", None, None, 3, [2, 0]) for _ in range(100))
    assert counts == Counter({0: 50, 2: 50})


@pytest.mark.parametrize("key", [None, b"key"])
def test_round_robin_counters_are_per_topic(key: bytes | None) -> None:
    rr = RoundRobinPartitioner()
    counts: Counter[int] = Counter()
    for i in range(30):
        counts[rr.partition("topicA", key, None, 3)] += 1
        if i % 5 == 0:
            rr.partition("topicB", key, None, 1)
    assert counts == Counter({0: 10, 1: 10, 2: 10})


def test_round_robin_without_available_uses_all() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition("t", None, None, 3, []) for _ in range(4)] == [0, 1, 2, 0]


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=10, unique=True),
    st.integers(1, 5),
)
def test_round_robin_visits_available_evenly(available: list[int], rounds: int) -> None:
    rr = RoundRobinPartitioner()
    seen = [rr.partition("t", None, None, 51, available) for _ in range(rounds * len(available))]
    assert Counter(seen) == Counter({p: rounds for p in available})
    assert seen[: len(available)] == available


# --------------------------------------------------------------------------------------------------
# KIP-480 sticky (scenarios of Kafka's UniformStickyPartitionerTest)
# --------------------------------------------------------------------------------------------------


def test_uniform_sticky_switches_only_on_matching_new_batch() -> None:
    p = UniformStickyPartitioner(random.Random(1))
    counts: Counter[int] = Counter()

    def produce() -> int:
        part = 0
        for i in range(30):
            part = p.partition("A", b"key", None, 3)
            counts[part] += 1
            if i % 5 == 0:
                p.partition("B", b"key", None, 1)
        return part

    old = produce()
    p.on_new_batch("A", 3, None, old)
    p.on_new_batch("B", 1, None, 0)
    new = produce()
    assert new != old
    p.on_new_batch("A", 3, None, old)  # stale previous partition: no switch
    produce()
    assert counts == Counter({old: 30, new: 60})


def test_sticky_unavailable_partitions_alternate() -> None:
    # Only 0 and 2 are available, and a switch must move to the other one.
    p = UniformStickyPartitioner(random.Random(3))
    counts: Counter[int] = Counter()
    part = 0
    for _ in range(50):
        part = p.partition("test", None, None, 3, [2, 0])
        counts[part] += 1
    p.on_new_batch("test", 3, [2, 0], part)
    for _ in range(50):
        counts[p.partition("test", None, None, 3, [2, 0])] += 1
    assert counts == Counter({0: 50, 2: 50})


def test_sticky_single_and_no_available() -> None:
    p = UniformStickyPartitioner(random.Random(0))
    assert p.partition("one", None, None, 5, [3]) == 3
    p.on_new_batch("one", 5, [3], 3)
    assert p.partition("one", None, None, 5, [3]) == 3
    assert 0 <= p.partition("none", None, None, 4, []) < 4


def test_sticky_partitioner_hashes_keys() -> None:
    p = StickyPartitioner(random.Random(0))
    assert p.partition("t", b"foobar", None, 10) == 6
    assert UniformStickyPartitioner(random.Random(0)).partition("t", b"foobar", None, 10) == (
        UniformStickyPartitioner(random.Random(0)).partition("t", None, None, 10)
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    available=st.lists(st.integers(0, 9), min_size=1, max_size=10, unique=True),
    batches=st.lists(st.integers(1, 20), min_size=1, max_size=10),
)
def test_sticky_stays_until_new_batch(seed: int, available: list[int], batches: list[int]) -> None:
    p = StickyPartitioner(random.Random(seed))
    previous = None
    for size in batches:
        chosen = {p.partition("t", None, None, 10, available) for _ in range(size)}
        assert len(chosen) == 1
        (part,) = chosen
        assert part in available
        if previous is not None and len(available) > 1:
            assert part != previous
        p.on_new_batch("t", 10, available, part)
        previous = part


# --------------------------------------------------------------------------------------------------
# KIP-794 built-in partitioner (scenarios of Kafka's BuiltInPartitionerTest)
# --------------------------------------------------------------------------------------------------


class SequentialPartitioner(BuiltInPartitioner):
    """Draws 0, 1, 2, ... instead of random numbers, like the helper in Kafka's test."""

    def __init__(self, topic: str, sticky_batch_size: int) -> None:
        super().__init__(topic, sticky_batch_size)
        self._next = 0

    def random_partition(self) -> int:
        self._next += 1
        return self._next - 1


def test_built_in_switches_after_batch_size_bytes() -> None:
    a = SequentialPartitioner("A", 3)
    first = a.peek_current_partition(3)
    for _ in range(3):
        assert a.peek_current_partition(3) == first
        a.update_partition_info(1, 3)
    assert a.peek_current_partition(3) != first
    b = SequentialPartitioner("B", 1)
    for _ in range(10):
        assert b.peek_current_partition(1) == 0
        b.update_partition_info(1, 1)


def test_built_in_unavailable_partitions() -> None:
    a = BuiltInPartitioner("A", 1, random.Random(5))
    seen = set()
    for _ in range(100):
        seen.add(a.peek_current_partition(3, [0, 2]))
        a.update_partition_info(1, 3, [0, 2])
    assert seen == {0, 2}
    b = BuiltInPartitioner("B", 1, random.Random(5))
    for _ in range(100):
        assert b.peek_current_partition(2, [1]) == 1
        b.update_partition_info(1, 2, [1])
    c = BuiltInPartitioner("C", 1, random.Random(5))
    assert c.peek_current_partition(1, []) == 0
    c.update_partition_info(1, 1, [])
    assert c.peek_current_partition(1, []) == 0


def test_built_in_adaptive_frequencies_are_inverse_to_queue_sizes() -> None:
    queue_sizes = [5, 0, 3, 0, 1]
    p = SequentialPartitioner("A", 1)
    p.update_partition_load_stats(queue_sizes, list(range(5)), 5)
    cycles = 2
    counts = [0] * 5
    for _ in range(p.load_stats_range_end() * cycles):
        part = p.peek_current_partition(5)
        counts[part] += 1
        p.update_partition_info(1, 5)
    assert counts == [(6 - q) * cycles for q in queue_sizes]  # 6 = max queue size + 1


def test_built_in_load_stats_fallbacks() -> None:
    p = BuiltInPartitioner("A", 1)
    p.update_partition_load_stats([2, 2, 2], [0, 1, 2])  # all equal: uniform
    with pytest.raises(ValueError):
        p.load_stats_range_end()
    p.update_partition_load_stats([4], [0])  # one partition: uniform
    with pytest.raises(ValueError):
        p.load_stats_range_end()
    # Equal sizes but one partition excluded as slow: weighted over the rest, excluded never chosen.
    p.update_partition_load_stats([2, 2, 9], [4, 7, 1], length=2)
    assert p.load_stats_range_end() == 2
    assert {p.next_partition(9) for _ in range(50)} == {4, 7}
    p.update_partition_load_stats(None)
    with pytest.raises(ValueError):
        p.update_partition_load_stats([1, 2], [0])


def test_built_in_switch_can_be_deferred_up_to_twice_the_batch_size() -> None:
    p = SequentialPartitioner("A", 10)
    first = p.peek_current_partition(4)
    p.update_partition_info(15, 4, enable_switch=False)
    assert p.peek_current_partition(4) == first
    assert p.produced_bytes == 15
    p.update_partition_info(5, 4, enable_switch=False)
    assert p.peek_current_partition(4) != first
    assert p.produced_bytes == 0


def test_built_in_needs_positive_batch_size() -> None:
    with pytest.raises(ValueError):
        BuiltInPartitioner("A", 0)
    BuiltInPartitioner("A", 1)


# --------------------------------------------------------------------------------------------------
# Default partitioner of the modern client
# --------------------------------------------------------------------------------------------------


def test_default_hashes_keys_and_sticks_for_null_keys() -> None:
    d = DefaultPartitioner(batch_size=100, rng=random.Random(9))
    assert d.partition("t", b"foobar", None, 10) == 6
    sticky = d.partition("t", None, None, 10)
    for _ in range(9):
        d.on_append("t", None, sticky, 10, 10)
        # Keyed records do not count towards the switch.
        d.on_append("t", b"k", sticky, 1000, 10)
        assert d.partition("t", None, None, 10) == sticky
    d.on_append("t", None, sticky, 10, 10)
    assert d.built_in("t").produced_bytes == 0  # switched (possibly to the same partition, as in Kafka)


def test_default_switch_spreads_records() -> None:
    d = DefaultPartitioner(batch_size=0, rng=random.Random(2))  # batch.size 0: switch every record
    seen = []
    for _ in range(200):
        p = d.partition("t", None, None, 4)
        d.on_append("t", None, p, 50, 4)
        seen.append(p)
    assert set(seen) == {0, 1, 2, 3}


def test_default_ignore_keys() -> None:
    d = DefaultPartitioner(ignore_keys=True, rng=random.Random(0))
    chosen = {d.partition("t", key, None, 50) for key in (b"a", b"b", b"foobar", None)}
    assert len(chosen) == 1


def test_default_adaptive_toggle() -> None:
    on = DefaultPartitioner(rng=random.Random(0))
    on.update_partition_load_stats("t", [3, 0], [0, 1])
    assert on.built_in("t").load_stats_range_end() == 5
    off = DefaultPartitioner(adaptive=False, rng=random.Random(0))
    off.update_partition_load_stats("t", [3, 0], [0, 1])
    with pytest.raises(ValueError):
        off.built_in("t").load_stats_range_end()


def test_default_is_deterministic_for_a_seed() -> None:
    def run(seed: int) -> list[int]:
        d = DefaultPartitioner(batch_size=30, rng=random.Random(seed))
        out = []
        for _ in range(100):
            p = d.partition("t", None, None, 8)
            d.on_append("t", None, p, 7, 8)
            out.append(p)
        return out

    assert run(11) == run(11)


# --------------------------------------------------------------------------------------------------
# Key hash, producer rule, configuration
# --------------------------------------------------------------------------------------------------


def test_key_hash_partitioner() -> None:
    k = KeyHashPartitioner()
    assert k.partition("t", b"foobar", None, 50) == 16
    with pytest.raises(ValueError):
        k.partition("t", None, None, 50)
    fallback = StickyPartitioner(random.Random(0))
    k = KeyHashPartitioner(fallback)
    first = k.partition("t", None, None, 5)
    k.on_new_batch("t", 5, None, first)
    assert k.partition("t", None, None, 5) != first


def test_choose_partition() -> None:
    class Negative:
        def partition(self, topic, key, value, num_partitions, available=None):
            return -1

    assert choose_partition(Negative(), "t", None, None, 3, explicit_partition=2) == 2
    with pytest.raises(ValueError):
        choose_partition(Negative(), "t", None, None, 3)
    assert choose_partition(KeyHashPartitioner(), "t", b"foobar", None, 10) == 6


class UserPartitioner:
    def __init__(self) -> None:
        self.configs: dict = {}

    def configure(self, configs: dict) -> None:
        self.configs = dict(configs)

    def partition(self, topic, key, value, num_partitions, available=None):
        return num_partitions - 1


def test_create_partitioner_default() -> None:
    p = create_partitioner(
        {
            "batch.size": "100",
            "partitioner.ignore.keys": "true",
            "partitioner.adaptive.partitioning.enable": False,
        },
        random.Random(0),
    )
    assert isinstance(p, DefaultPartitioner)
    assert (p.sticky_batch_size, p.ignore_keys, p.adaptive) == (100, True, False)
    d = create_partitioner({})
    assert isinstance(d, DefaultPartitioner)
    assert (d.sticky_batch_size, d.ignore_keys, d.adaptive) == (16384, False, True)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.clients.producer.RoundRobinPartitioner", RoundRobinPartitioner),
        ("org.apache.kafka.clients.producer.UniformStickyPartitioner", UniformStickyPartitioner),
        ("org.apache.kafka.clients.producer.internals.DefaultPartitioner", StickyPartitioner),
        ("kafkalite.client.partitioner.RoundRobinPartitioner", RoundRobinPartitioner),
        ("kafkalite.client.partitioner:KeyHashPartitioner", KeyHashPartitioner),
    ],
)
def test_create_partitioner_by_name(name: str, cls: type) -> None:
    assert type(create_partitioner({"partitioner.class": name})) is cls


def test_create_partitioner_user_class_and_instance() -> None:
    p = create_partitioner({"partitioner.class": UserPartitioner, "batch.size": 5})
    assert isinstance(p, UserPartitioner) and p.configs["batch.size"] == 5
    assert isinstance(p, Partitioner)
    inst = UserPartitioner()
    assert create_partitioner({"partitioner.class": inst}) is inst
    assert inst.configs == {}


@pytest.mark.parametrize(
    "config",
    [
        {"partitioner.class": "no.such.module.Thing"},
        {"partitioner.class": "NoDots"},
        {"partitioner.class": object()},
        {"batch.size": -1},
        {"batch.size": "big"},
        {"partitioner.ignore.keys": "yes"},
    ],
)
def test_create_partitioner_rejects(config: dict) -> None:
    with pytest.raises(InvalidConfigError):
        create_partitioner(config)
