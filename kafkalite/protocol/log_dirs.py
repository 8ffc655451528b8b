"""A broker's log directories (JBOD, KIP-112/113): DescribeLogDirs (which replica lives in which
``log.dirs`` entry, its size and lag, and whether the dir is offline) and AlterReplicaLogDirs (move a
replica to another dir of the same broker)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, TopicPartition, message
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition, wire_partitions

INVALID_OFFSET_LAG = -1
"""The lag DescribeLogDirs gives when the replica's current log is not there (Kafka's value)."""


def _by_topic(items: tuple, topic: Callable[[Any], str]) -> tuple:
    """``items`` with each topic's together, topics in first-seen order: the order the wire writes them."""
    order = dict.fromkeys(topic(i) for i in items)
    return tuple(i for t in order for i in items if topic(i) == t)


# ------------------------------------------------------------------------------------ DescribeLogDirs


@message
class DescribeLogDirsPartition(Message):
    tp: TopicPartition = wire_partition()
    partition_size: int = wire("int64", "0+", 0)
    """Bytes of the log's segments."""
    offset_lag: int = wire("int64", "0+", 0)
    """A current log: how far its end is below the high watermark (0 on the leader); a future log: how
    far it is behind the current log's end."""
    is_future: bool = wire("bool", "0+", False, name="is_future_key")
    """A log AlterReplicaLogDirs is filling, which will replace the current one."""


@message
class DescribeLogDirsResult(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    """KAFKA_STORAGE_ERROR when the dir is offline (then nothing else is given)."""
    log_dir: str = wire("string")
    partitions: tuple[DescribeLogDirsPartition, ...] = wire_by_topic("topics", DescribeLogDirsPartition)
    total_bytes: int = wire("int64", "4+", -1)
    usable_bytes: int = wire("int64", "4+", -1)

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        # Grouped by topic as written (see AlterReplicaLogDir.wire_in), so a read round-trips.
        kw["partitions"] = _by_topic(kw.get("partitions", ()), lambda e: e.tp.topic)
        return kw


@message
class DescribeLogDirsResponse(Response):
    api_key = ApiKey.DESCRIBE_LOG_DIRS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "3+", NO_ERROR)
    results: tuple[DescribeLogDirsResult, ...] = wire("[]struct", "0+", (), items=DescribeLogDirsResult)


@message
class DescribeLogDirsRequest(Request):
    api_key = ApiKey.DESCRIBE_LOG_DIRS
    response_type = DescribeLogDirsResponse
    versions = (0, 4)
    flexible_from = 2
    partitions: tuple[TopicPartition, ...] | None = wire_partitions(
        "topics", "0+", None, topic="topic", nullable="0+"
    )
    """None: every replica on the broker."""


# --------------------------------------------------------------------------------- AlterReplicaLogDirs


@message
class AlterReplicaLogDir(Message):
    path: str = wire("string")
    """The target directory: one of the broker's ``log.dirs``, absolute."""
    partitions: tuple[TopicPartition, ...] = wire_partitions("topics")

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        # A topic listed twice in one dir reads as one group, as it is written back (Kafka keys the
        # topics of a dir by name): what a client sent and what kafkalite sends again are the same.
        kw["partitions"] = _by_topic(kw.get("partitions", ()), lambda tp: tp.topic)
        return kw


@message
class AlterReplicaLogDirResult(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class AlterReplicaLogDirsResponse(Response):
    api_key = ApiKey.ALTER_REPLICA_LOG_DIRS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[AlterReplicaLogDirResult, ...] = wire_by_topic(
        "results", AlterReplicaLogDirResult, topic="topic_name"
    )


@message
class AlterReplicaLogDirsRequest(Request):
    api_key = ApiKey.ALTER_REPLICA_LOG_DIRS
    response_type = AlterReplicaLogDirsResponse
    versions = (0, 2)
    flexible_from = 2
    dirs: tuple[AlterReplicaLogDir, ...] = wire("[]struct", "0+", (), items=AlterReplicaLogDir)

    def targets(self) -> dict[TopicPartition, str]:
        """Each partition's target dir (a partition named twice keeps the last, as Kafka's map does)."""
        return {tp: d.path for d in self.dirs for tp in d.partitions}


__all__ = [
    "INVALID_OFFSET_LAG",
    "AlterReplicaLogDir",
    "AlterReplicaLogDirResult",
    "AlterReplicaLogDirsRequest",
    "AlterReplicaLogDirsResponse",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
]
