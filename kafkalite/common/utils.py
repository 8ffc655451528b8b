"""Shared algorithms (Kafka's ``common.utils``): Java's ``String.hashCode`` and ``HashMap`` iteration order, Kafka's ``Utils.abs``, and which
``__consumer_offsets`` (or ``__transaction_state``) partition, hence which broker, coordinates a key.

Kafka's ``GroupMetadataManager.partitionFor`` is ``Utils.abs(groupId.hashCode()) % groupMetadataTopicPartitionCount``;
the leader of that partition is the group's coordinator. The hash must be Java's ``String.hashCode`` bit for bit,
or kafkalite and a real cluster would disagree about where a group lives.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DEFAULT_OFFSETS_TOPIC_PARTITIONS",
    "coordinator_partition",
    "java_hash_map_capacity",
    "java_hash_map_order",
    "java_hash_spread",
    "java_string_hash",
    "kafka_abs",
]

DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions
_INT_MIN = -(2**31)


def _to_int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")  # characters outside the BMP count as two code units
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return _to_int32(h)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``|n|``, except ``Integer.MIN_VALUE`` (whose ``Math.abs`` is itself) maps to 0.

    Not ``Utils.toPositive`` (``n & 0x7fffffff``): the two differ for every other negative number.
    """
    return 0 if n == _INT_MIN else abs(n)


def coordinator_partition(
    group_id: str, offsets_topic_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
) -> int:
    """The ``__consumer_offsets`` partition holding ``group_id``'s offsets and metadata."""
    if offsets_topic_partitions <= 0:
        raise ValueError("offsets_topic_partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % offsets_topic_partitions


def java_hash_spread(h: int) -> int:
    """Java's ``HashMap.hash``: the high half of the hash code folded into the low half."""
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hash_map_capacity(max_size: int) -> int:
    """The buckets of a default ``HashMap`` that has held ``max_size`` entries."""
    # A default-constructed HashMap starts at 16 buckets and doubles once size exceeds 3/4 of them.
    cap = 16
    while max_size > cap * 3 // 4:
        cap *= 2
    return cap


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a default ``HashMap<String, ?>`` filled with ``keys`` in this order."""
    keys = list(keys)
    mask = java_hash_map_capacity(len(keys)) - 1
    # Within a bucket Java keeps insertion order (resizes split bins without reordering them).
    return [
        k
        for _, _, k in sorted(
            (java_hash_spread(java_string_hash(k)) & mask, i, k) for i, k in enumerate(keys)
        )
    ]
