"""Shared algorithms (Kafka's ``common.utils``): Java's ``String.hashCode``, Kafka's ``Utils.abs``, and which
``__consumer_offsets`` (or ``__transaction_state``) partition, hence which broker, coordinates a key.

Kafka's ``GroupMetadataManager.partitionFor`` is ``Utils.abs(groupId.hashCode()) % groupMetadataTopicPartitionCount``;
the leader of that partition is the group's coordinator. The hash must be Java's ``String.hashCode`` bit for bit,
or kafkalite and a real cluster would disagree about where a group lives.
"""

from __future__ import annotations

__all__ = ["DEFAULT_OFFSETS_TOPIC_PARTITIONS", "coordinator_partition", "java_string_hash", "kafka_abs"]

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
