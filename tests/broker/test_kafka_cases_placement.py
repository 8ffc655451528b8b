"""Hashing, partitioning and placement answers pinned to Apache Kafka's tests (facts only).

Sources: UtilsTest (murmur2, abs), BuiltInPartitionerTest (KIP-794 sticky switching), AdminRackAwareTest
(replica placement) and KafkaController's auto leader rebalance trigger.
"""

from __future__ import annotations

from collections import Counter

import pytest

from kafkalite.broker.controller.controller import leader_imbalance_exceeded
from kafkalite.client.partitioner import BuiltInPartitioner, partition_for_key, to_positive
from kafkalite.common.utils import coordinator_partition, java_string_hash, kafka_abs
from kafkalite.errors import InvalidPartitionsError, InvalidReplicationFactorError
from kafkalite.metadata.placement import assign_new_partitions, assign_replicas, rack_alternated_brokers
from tests.broker.test_placement import KAFKA_5_BROKERS_10_PARTITIONS_RF3
from tests.client.test_partitioner import KAFKA_MURMUR2_VECTORS

# --- murmur2 and the key partitioner (UtilsTest.testMurmur2) ------------------------------------------

MURMUR2 = KAFKA_MURMUR2_VECTORS  # test_partitioner checks murmur2 itself on them


@pytest.mark.parametrize(("key", "expected"), MURMUR2)
@pytest.mark.parametrize("n", [1, 2, 3, 6, 10, 12, 50, 100])
def test_key_partition_is_positive_hash_mod_n(key: bytes, expected: int, n: int) -> None:
    # Sign bit cleared, never abs(): -790332482 -> 1357151166.
    assert partition_for_key(key, n) == (expected & 0x7FFFFFFF) % n


def test_key_partition_spot_values() -> None:
    assert to_positive(-790332482) == 1357151166
    assert [partition_for_key(b"foobar", n) for n in (3, 10, 50)] == [1357151166 % 3, 6, 16]
    assert partition_for_key(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3


# --- Coordinator placement (UtilsTest.testAbs, Java String.hashCode) ------------------------------------


def test_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-10) == 10
    assert kafka_abs(10) == 10
    assert kafka_abs(0) == 0
    assert kafka_abs(-1) == 1


def test_group_partition_for_min_value_hash() -> None:
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE in Java; Utils.abs maps it to 0, where
    # toPositive would also give 0 but Math.abs would stay negative.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("polygenelubricants", 7) == 0


def test_group_partition_uses_abs_not_mask() -> None:
    # "foo".hashCode() = 101574 and "Aa"/"BB" collide on 2112 in Java.
    assert java_string_hash("foo") == 101574
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert coordinator_partition("foo", 50) == 101574 % 50
    # A negative hash: abs gives partition 12, the producer's sign-bit mask would give 36.
    assert java_string_hash("my-group") == -1906497762
    assert coordinator_partition("my-group", 50) == 12


# --- Replica placement (AdminRackAwareTest) ---------------------------------------------------------------


def test_replica_assignment_without_racks() -> None:
    # testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start index 0; a negative first
    # partition id counts as 0.
    expected = KAFKA_5_BROKERS_10_PARTITIONS_RF3
    assert assign_replicas(range(5), 10, 3, start_index=0, start_partition_id=-1) == expected
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(range(5), 10, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(range(5), 10, 6)


def test_invalid_parameters_checked_in_kafka_order() -> None:
    # testAssignReplicasToBrokersWithInvalidParameters: partitions first, then replication factor,
    # then incomplete rack information.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None}
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(list(racks), 0, 0, broker_racks=racks)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(list(racks), 10, 0, broker_racks=racks)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(list(racks), 10, 6, broker_racks=racks)
    with pytest.raises(ValueError, match="rack"):
        assign_replicas(list(racks), 10, 5, broker_racks=racks)


RACKS6 = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list_and_assignment() -> None:
    # testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert rack_alternated_brokers(RACKS6) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in RACKS6.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(list(RACKS6), 7, 3, start_index=0, start_partition_id=0, broker_racks=RACKS6) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def _rack_spread(assignment: dict[int, list[int]], racks: dict[int, str]) -> dict[int, set[str]]:
    return {p: {racks[b] for b in replicas} for p, replicas in assignment.items()}


@pytest.mark.parametrize(
    ("racks", "partitions", "rf"),
    [
        # testAssignmentWithRackAware / ...WithRandomStartIndex / 2ReplicasRackAware / ...With6Partitions
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 3),
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 2),
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 2),
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2),
        # testLargeNumberPartitionsAssignment
        (
            {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
            | {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
            96,
            3,
        ),
    ],
)
@pytest.mark.parametrize("seed", range(4))
def test_rack_aware_distribution(racks: dict[int, str], partitions: int, rf: int, seed: int) -> None:
    # Kafka's checkReplicaDistribution: one replica per rack, and leaders and replicas spread evenly.
    import random

    got = assign_replicas(list(racks), partitions, rf, rng=random.Random(seed), broker_racks=racks)
    assert all(len(s) == rf for s in _rack_spread(got, racks).values())
    leaders = Counter(r[0] for r in got.values())
    replicas = Counter(b for r in got.values() for b in r)
    assert set(leaders.values()) == {partitions // len(racks)}
    assert set(replicas.values()) == {partitions * rf // len(racks)}


def test_rack_aware_more_fewer_replicas_than_racks_and_single_rack() -> None:
    # testMoreReplicasThanRacks / testLessReplicasThanRacks / testSingleRack
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    got = assign_replicas(list(racks), 6, 5, broker_racks=racks)
    assert all(len(r) == 5 and len({racks[b] for b in r}) == 3 for r in got.values())
    got = assign_replicas(list(racks), 6, 2, broker_racks=racks)
    assert all(len(r) == 2 and len({racks[b] for b in r}) == 2 for r in got.values())
    one = dict.fromkeys(range(6), "rack1")
    got = assign_replicas(list(one), 6, 3, broker_racks=one)
    assert all(len(r) == 3 for r in got.values())
    assert Counter(r[0] for r in got.values()) == Counter(range(6))


def test_rack_aware_skips_brokers_already_holding_a_replica() -> None:
    # testSkipBrokerWithReplicaAlreadyAssigned: RF 4 over 3 racks, no broker twice in a partition.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    got = assign_replicas(list(racks), 6, 4, start_index=2, next_replica_shift=2, broker_racks=racks)
    assert all(len(set(r)) == 4 and {racks[b] for b in r} == {"a", "b", "c"} for r in got.values())


def test_rack_aware_expansion_continues_partition_ids() -> None:
    # testRackAwareExpansion: start partition 12 on brokers 6..11.
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    got = assign_replicas(list(racks), 12, 2, start_partition_id=12, broker_racks=racks)
    assert sorted(got) == list(range(12, 24))
    assert all(len({racks[b] for b in r}) == 2 for r in got.values())
    assert set(Counter(r[0] for r in got.values()).values()) == {2}


def test_add_partitions_continues_round_robin() -> None:
    # Kafka's createPartitions: start index = position of partition 0's leader, ids follow on.
    existing = assign_replicas(range(5), 3, 2, start_index=0)
    assert assign_new_partitions(range(5), existing, 2) == assign_replicas(
        range(5), 2, 2, start_index=0, start_partition_id=3
    )


# --- KIP-794 sticky switching (BuiltInPartitionerTest) -----------------------------------------------------


# Kafka's BuiltInPartitionerTest cases (stickyPartitioning, unavailablePartitions, adaptivePartitions)
# are test_partitioner's test_built_in_* tests.


def test_sticky_batch_size_must_be_positive() -> None:
    # testStickyBatchSizeMoreThatZero
    with pytest.raises(ValueError):
        BuiltInPartitioner("topicA", 0)
    BuiltInPartitioner("topicA", 1)


# --- Auto leader rebalance trigger (KafkaController.checkAndTriggerAutoLeaderRebalance) ---------------------


@pytest.mark.parametrize(
    ("not_preferred", "total", "pct", "fires"),
    [
        (1, 10, 10, False),  # exactly at the limit: Kafka needs strictly more
        (2, 10, 10, True),
        (0, 5, 0, False),
        (1, 5, 0, True),
        (10, 10, 100, False),
        # Boundaries where ratio * 100 rounds above the percentage but ratio > pct / 100 is false.
        (7, 50, 14, False),
        (7, 25, 28, False),
        (11, 20, 55, False),
        (14, 25, 56, False),
        (0, 0, 10, False),
    ],
)
def test_leader_imbalance_trigger(not_preferred: int, total: int, pct: int, fires: bool) -> None:
    assert leader_imbalance_exceeded(not_preferred, total, pct) is fires
