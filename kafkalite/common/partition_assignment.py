"""Checks of a partition count and of a replica list an admin asked for, shared by the ZooKeeper-mode
controller and the KRaft quorum controller (Kafka's CreatePartitions checks and
``validateManualPartitionAssignment``); both answer INVALID_PARTITIONS or INVALID_REPLICA_ASSIGNMENT."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kafkalite.errors import InvalidPartitionsError, InvalidReplicaAssignmentError


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


__all__ = ["partitions_to_add", "validate_manual_assignment"]
