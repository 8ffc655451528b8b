"""Replica placement: Kafka's expected assignments, invariants and errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.errors import KafkaError
from kafkalite.metadata.placement import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_new_partitions,
    assign_replicas,
    replica_index,
)

# Expected map from Kafka's AdminRackAwareTest.testReplicaAssignment: brokers 0..4, 10 partitions,
# replication factor 3, fixed start index 0 (so the initial shift is 0 too).
KAFKA_5_BROKERS_10_PARTITIONS_RF3 = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
}


def test_kafka_expected_assignment() -> None:
    assert assign_replicas(range(5), 10, 3, start_index=0) == KAFKA_5_BROKERS_10_PARTITIONS_RF3


def test_explicit_shift_equal_to_start_index_is_the_default() -> None:
    assert assign_replicas(range(5), 10, 3, start_index=2) == assign_replicas(
        range(5), 10, 3, start_index=2, next_replica_shift=2
    )


def test_broker_order_and_ids_do_not_matter_beyond_sorting() -> None:
    ids = [40, 10, 30, 0, 20]
    got = assign_replicas(ids, 10, 3, start_index=0)
    relabel = {i: b for i, b in enumerate(sorted(ids))}
    want = {p: [relabel[r] for r in rs] for p, rs in KAFKA_5_BROKERS_10_PARTITIONS_RF3.items()}
    assert got == want


def test_start_partition_id() -> None:
    # As in Kafka, the shift only grows for wraps crossed inside this call, not for earlier ones...
    tail = assign_replicas(range(5), 4, 3, start_index=0, start_partition_id=6)
    assert tail == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}
    # ...so the caller passes the shift reached so far to continue the full sequence.
    tail = assign_replicas(range(5), 4, 3, start_index=0, next_replica_shift=1, start_partition_id=6)
    assert tail == {p: KAFKA_5_BROKERS_10_PARTITIONS_RF3[p] for p in range(6, 10)}


# Kafka's AddPartitionsTest (4 brokers, ZooKeeper-mode CreatePartitions): expected leader and replica set
# of each added partition.
@pytest.mark.parametrize(
    ("existing", "count", "expected"),
    [
        ({0: [1, 2]}, 2, {1: (2, {0, 2}), 2: (3, {1, 3})}),
        (
            {0: [2, 3, 0, 1]},
            6,
            {
                1: (3, {3, 2, 0, 1}),
                2: (0, {0, 3, 1, 2}),
                3: (1, {1, 0, 2, 3}),
                4: (2, {2, 3, 0, 1}),
                5: (3, {3, 0, 1, 2}),
                6: (0, {0, 1, 2, 3}),
            },
        ),
    ],
)
def test_kafka_add_partitions(existing: dict, count: int, expected: dict) -> None:
    got = assign_new_partitions(range(4), existing, count)
    assert {p: (rs[0], set(rs)) for p, rs in got.items()} == expected


def test_add_partitions_when_partition_0_leader_is_gone() -> None:
    # Broker 1 left: the round-robin starts at the next higher id, 2.
    got = assign_new_partitions([0, 2, 3], {0: [1, 2]}, 1)
    assert got[1][0] == 3  # start index 1 (broker 2), partition id 1 -> index 2


def test_random_start_and_shift_come_from_rng_in_kafka_order() -> None:
    rng = random.Random(42)
    start, shift = rng.randrange(7), rng.randrange(7)
    got = assign_replicas(range(7), 20, 3, rng=random.Random(42))
    assert got == assign_replicas(range(7), 20, 3, start_index=start, next_replica_shift=shift)


def test_replica_index_never_hits_the_leader() -> None:
    for n in range(2, 8):
        for first in range(n):
            for shift in range(3 * n):
                for j in range(n - 1):
                    assert replica_index(first, shift, j, n) != first


def test_single_broker() -> None:
    assert assign_replicas([7], 3, 1, start_index=0) == {0: [7], 1: [7], 2: [7]}


@pytest.mark.parametrize(
    ("partitions", "rf", "error", "code"),
    [
        (0, 1, InvalidPartitionsError, 37),
        (-1, 1, InvalidPartitionsError, 37),
        (10, 0, InvalidReplicationFactorError, 38),
        (10, -2, InvalidReplicationFactorError, 38),
    ],
)
def test_invalid_counts(partitions: int, rf: int, error: type, code: int) -> None:
    with pytest.raises(error) as info:
        assign_replicas(range(5), partitions, rf, start_index=0)
    assert isinstance(info.value, KafkaError)
    assert info.value.code == code


def test_replication_factor_above_broker_count_names_both() -> None:
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(range(5), 10, 6)
    assert info.value.name == "INVALID_REPLICATION_FACTOR"
    assert "6" in str(info.value) and "5" in str(info.value)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([], 1, 1)


def test_partition_count_checked_before_replication_factor() -> None:
    # Kafka's order: partitions first.
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(range(3), 0, 0)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        assign_replicas([1, 1, 2], 3, 2)
    with pytest.raises(ValueError):
        assign_replicas(range(3), 3, 2, start_index=-1)
    with pytest.raises(ValueError):
        assign_new_partitions(range(3), {1: [0, 1]}, 2)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 9),
    data=st.data(),
)
def test_assignment_invariants(n: int, data: st.DataObject) -> None:
    brokers = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    rf = data.draw(st.integers(1, n))
    rounds = data.draw(st.integers(1, 4))
    partitions = rounds * n
    start = data.draw(st.integers(0, 3 * n))
    shift = data.draw(st.integers(0, 3 * n))
    got = assign_replicas(brokers, partitions, rf, start_index=start, next_replica_shift=shift)

    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(brokers)
    # Whole rounds: every broker leads, and holds, exactly its share.
    leaders = Counter(rs[0] for rs in got.values())
    assert leaders == Counter({b: rounds for b in brokers})
    replicas = Counter(b for rs in got.values() for b in rs)
    assert replicas == Counter({b: rounds * rf for b in brokers})


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 8), partitions=st.integers(1, 40), seed=st.integers(0, 2**32), data=st.data())
def test_leaders_spread_evenly(n: int, partitions: int, seed: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, n))
    got = assign_replicas(range(n), partitions, rf, rng=random.Random(seed))
    counts = Counter(rs[0] for rs in got.values())
    assert max(counts.values()) - min(counts.get(b, 0) for b in range(n)) <= 1
    assert got == assign_replicas(range(n), partitions, rf, rng=random.Random(seed))


def test_followers_of_one_leader_vary_across_rounds() -> None:
    # The growing shift is the point: broker 0's partitions do not all share the same followers.
    got = assign_replicas(range(5), 20, 2, start_index=0)
    followers = {rs[1] for rs in got.values() if rs[0] == 0}
    assert followers == {1, 2, 3, 4}
