"""Replica placement for new topics and partitions, as Kafka's ``AdminUtils`` does.

Leaders go round-robin over the sorted broker list from a start index. Follower ``j`` of a partition
sits ``1 + (shift + j) % (n - 1)`` brokers after its leader, so it never lands on the leader, and the
shift grows by one each time the leaders wrap around the broker list: partitions that share a leader
then get different followers, which spreads the follower load (and the load a broker failure moves)
over all the other brokers.

Example, 5 brokers, start index 0, shift 0: partitions 0..4 get ``[0,1,2] [1,2,3] [2,3,4] [3,4,0]
[4,0,1]``, then the shift becomes 1 and partitions 5..9 get ``[0,2,3] [1,3,4] [2,4,0] [3,0,1]
[4,1,2]``.

With broker racks (``broker_racks``) the same walk runs over a rack-alternated broker list (one broker
per rack in turn, racks by name, brokers by id), the follower shift is scaled by the number of racks, and
a candidate follower is skipped while some rack, or some broker, still has no replica of the partition.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from kafkalite.errors import InvalidPartitionsError, InvalidReplicationFactorError

__all__ = [
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_new_partitions",
    "assign_replicas",
    "rack_alternated_brokers",
    "replica_index",
]


def replica_index(first_replica_index: int, shift: int, j: int, num_brokers: int) -> int:
    """Index in the broker list of follower ``j`` (0-based) of a partition led from ``first_replica_index``."""
    # The offset ranges over 1..n-1, never 0, so a follower is never the leader.
    offset = 1 + (shift + j) % (num_brokers - 1)
    return (first_replica_index + offset) % num_brokers


def assign_replicas(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition_id: int = 0,
    next_replica_shift: int | None = None,
    rng: random.Random | None = None,
    broker_racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """Map partition ids ``start_partition_id ..`` to replica lists (leader first).

    ``start_index`` picks the first leader in the sorted broker list; ``next_replica_shift`` the
    initial follower shift, which, as in Kafka, equals ``start_index`` when only that is given. Both
    are drawn from ``rng`` (start index first) when not given.

    ``broker_racks`` maps broker id to rack; when any listed broker has a rack, placement is rack
    aware and every broker must have one (``ValueError`` otherwise, Kafka's AdminOperationException).

    Raises ``InvalidPartitionsError`` for fewer than one partition and ``InvalidReplicationFactorError``
    for a replication factor below 1 or above the number of brokers, checked in Kafka's order.
    """
    if num_partitions < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {num_partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, got {replication_factor}"
        )
    brokers = sorted(broker_ids)
    n = len(brokers)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {n} available brokers"
        )
    if len(set(brokers)) != n:
        raise ValueError(f"duplicate broker ids in {list(broker_ids)}")
    for name, value in (("start_index", start_index), ("next_replica_shift", next_replica_shift)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")

    if start_index is None:
        rng = rng if rng is not None else random.Random()
        start_index = rng.randrange(n)
        if next_replica_shift is None:
            next_replica_shift = rng.randrange(n)
    elif next_replica_shift is None:
        next_replica_shift = start_index
    shift = next_replica_shift

    racks = {b: (broker_racks or {}).get(b) for b in brokers}
    if any(r is not None for r in racks.values()):
        if any(r is None for r in racks.values()):
            raise ValueError("not all brokers have rack information for rack aware replica assignment")
        return _assign_rack_aware(
            racks,
            num_partitions,
            replication_factor,
            start_index,
            max(0, start_partition_id),
            shift,  # type: ignore[arg-type]
        )

    assignment: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        replicas.extend(brokers[replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        assignment[partition] = replicas
        partition += 1
    return assignment


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn (racks sorted by name, brokers by id within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    # Java sorts rack names by UTF-16 code unit.
    queues = [
        sorted(by_rack[r]) for r in sorted(by_rack, key=lambda r: r.encode("utf-16-be", "surrogatepass"))
    ]
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def _assign_rack_aware(
    broker_racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    start_index: int,
    first_partition: int,
    shift: int,
) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    num_racks = len(set(broker_racks.values()))
    assignment: dict[int, list[int]] = {}
    partition = first_partition
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used, brokers_used = {broker_racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Prefer a rack, then a broker, that holds no replica yet; reuse only once all do.
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        assignment[partition] = replicas
        partition += 1
    return assignment


def assign_new_partitions(
    broker_ids: Sequence[int],
    existing: Mapping[int, Sequence[int]],
    partitions_to_add: int,
    *,
    broker_racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """Replicas for partitions added to a topic (Kafka's CreatePartitions without an explicit plan).

    The new ids follow the existing ones, the replication factor is partition 0's, and the start index
    is the position of partition 0's leader (or the next higher broker id) in the sorted broker list,
    so leaders continue the round-robin. As in Kafka, the follower shift restarts from the start index
    rather than from where topic creation left it.

    ``broker_racks`` makes the placement rack aware, as in ``assign_replicas``. Kafka still takes the
    start index from the id-sorted list, then uses it in the rack-alternated one; so does this.
    """
    if 0 not in existing:
        raise ValueError("the existing assignment has no partition 0")
    brokers = sorted(broker_ids)
    leader = existing[0][0]
    start_index = next((i for i, b in enumerate(brokers) if b >= leader), 0)
    return assign_replicas(
        brokers,
        partitions_to_add,
        len(existing[0]),
        start_index=start_index,
        start_partition_id=len(existing),
        broker_racks=broker_racks,
    )
