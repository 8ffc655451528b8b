"""Checks of a partition count and of a replica list an admin asked for, shared by the ZooKeeper-mode
controller and the KRaft quorum controller (Kafka's CreatePartitions checks and
``validateManualPartitionAssignment``); both answer INVALID_PARTITIONS or INVALID_REPLICA_ASSIGNMENT. And
the bound on how much one admin request may create (``MAX_RECORDS_PER_USER_OP``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from kafkalite.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, PolicyViolationError

MAX_RECORDS_PER_USER_OP = 10_000
"""KRaft's most metadata records one operation may write (Kafka's QuorumController bound): a topic, each
of its partitions and each config override is one."""


def excessive_batch(records: int) -> PolicyViolationError | None:
    """POLICY_VIOLATION, as KRaft answers, for an operation of more than ``MAX_RECORDS_PER_USER_OP``
    records; refused before anything is placed or written, so a request for a billion partitions costs
    nothing."""
    if records <= MAX_RECORDS_PER_USER_OP:
        return None
    return PolicyViolationError(
        f"Unable to perform excessively large batch operation: {records} metadata records "
        f"exceed {MAX_RECORDS_PER_USER_OP}."
    )


def create_topics_records(topics: Any, default_partitions: int) -> int:
    """How many records a CreateTopics writes: per topic, its own, one per partition (its assignments,
    else its count, ``default_partitions`` for -1) and one per config override."""
    return sum(
        1
        + max(
            0,
            len(t.assignments)
            if t.assignments
            else (default_partitions if t.num_partitions == -1 else t.num_partitions),
        )
        + len(t.configs)
        for t in topics
    )


def create_partitions_records(topics: Any, current: Any) -> int:
    """How many PartitionRecords a CreatePartitions writes; ``current(name)`` is a topic's partition count,
    None for a topic that does not exist."""
    return sum(max(0, t.count - n) for t in topics if (n := current(t.name)) is not None)


def partitions_to_add(current: int, count: int, assignments: Sequence[Sequence[int]] | None) -> int:
    """How many partitions a CreatePartitions of ``count`` adds to a topic of ``current``: refused unless
    it is an increase, and unless an explicit plan names exactly the new ones."""
    if count < current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {count}."
        )
    if count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partitions.")
    added = count - current
    if assignments is not None and len(assignments) != added:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided."
        )
    return added


def validate_manual_assignment(
    partition: int, replicas: Sequence[int], brokers: Collection[int], replication_factor: int | None = None
) -> None:
    """A replica list given by hand: not empty, only ``brokers``, no broker twice, and (when given) as many
    replicas as the topic's other partitions have."""
    if not replicas:
        raise InvalidReplicaAssignmentError(f"The replica list of partition {partition} is empty.")
    unknown = sorted(set(replicas) - set(brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: {unknown}.")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(
            f"The replica list {list(replicas)} of partition {partition} names a broker more than once."
        )
    if replication_factor is not None and len(replicas) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
            f"while partition {partition} has replicas {list(replicas)}."
        )


__all__ = [
    "MAX_RECORDS_PER_USER_OP",
    "create_partitions_records",
    "create_topics_records",
    "excessive_batch",
    "partitions_to_add",
    "validate_manual_assignment",
]
