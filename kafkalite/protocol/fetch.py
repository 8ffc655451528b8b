"""Reading a log: Fetch (consumers and follower replicas), ListOffsets, and OffsetForLeaderEpoch (KIP-101,
how a follower finds where its log diverged from the leader's before it truncates)."""

from __future__ import annotations

from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.protocol.api import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    LATEST_TIMESTAMP,
    NO_ERROR,
    NO_TIMESTAMP,
    UNKNOWN_EPOCH,
    UNKNOWN_OFFSET,
    ApiKey,
    Message,
    Request,
    Response,
    TopicPartition,
    message,
)
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition, wire_partitions

# ---------------------------------------------------------------------------------------------- Fetch


@message
class FetchPartition(Message):
    tp: TopicPartition = wire_partition("partition")
    current_leader_epoch: int = wire("int32", "9+", UNKNOWN_EPOCH)
    """The leader epoch the fetcher believes current; the leader answers FENCED_LEADER_EPOCH or
    UNKNOWN_LEADER_EPOCH when it differs, -1 skips the check."""
    fetch_offset: int = wire("int64", "0+", 0)
    last_fetched_epoch: int = wire("int32", "12+", UNKNOWN_EPOCH)
    """Epoch of the last batch the follower has; lets the leader report a diverging epoch (KIP-320)."""
    log_start_offset: int = wire("int64", "5+", UNKNOWN_OFFSET)
    """A follower's own log start offset; -1 from consumers."""
    partition_max_bytes: int = wire("int32", "0+", 1_048_576)
    """max.partition.fetch.bytes; at least one whole batch is returned even when it is larger."""


@message
class EpochEndOffset(Message):
    """A leader epoch and the offset where it ended (the first offset of the next epoch)."""

    epoch: int = wire("int32", "12+", UNKNOWN_EPOCH)
    end_offset: int = wire("int64", "12+", UNKNOWN_OFFSET)


@message
class LeaderIdAndEpoch(Message):
    """The leader a replica knows, sent back to a fetcher that named another epoch (KIP-595's leader
    discovery: a KRaft observer or follower learns the new leader from any voter it fetches from)."""

    leader_id: int = wire("int32", "12+", -1)
    leader_epoch: int = wire("int32", "12+", UNKNOWN_EPOCH)


@message
class SnapshotId(Message):
    """A snapshot's end offset and epoch (KIP-630): what a KRaft fetcher below the leader's log start
    must download with FetchSnapshot."""

    end_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)


@message
class AbortedTransaction(Message):
    """A producer's aborted transaction that begins at ``first_offset`` within the returned range."""

    producer_id: int = wire("int64", "4+")
    first_offset: int = wire("int64", "4+")


@message
class FetchPartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    high_watermark: int = wire("int64", "0+", UNKNOWN_OFFSET)
    last_stable_offset: int = wire("int64", "4+", UNKNOWN_OFFSET)
    log_start_offset: int = wire("int64", "5+", UNKNOWN_OFFSET)
    diverging_epoch: EpochEndOffset | None = wire("struct", "12+", None, items=EpochEndOffset, tag=0)
    """Set when the follower's last_fetched_epoch is not on the leader's log: truncate to it first."""
    current_leader: LeaderIdAndEpoch | None = wire("struct", "12+", None, items=LeaderIdAndEpoch, tag=1)
    """Set by a KRaft voter answering a fetch for another epoch, or when it is not the leader."""
    snapshot_id: SnapshotId | None = wire("struct", "12+", None, items=SnapshotId, tag=2)
    """Set by a KRaft leader whose log no longer holds the fetch offset: fetch this snapshot instead."""
    aborted_transactions: tuple[AbortedTransaction, ...] | None = wire(
        "[]struct", "4+", None, items=AbortedTransaction, nullable="4+"
    )
    """Under read_committed, the aborted transactions overlapping ``records``; None otherwise."""
    preferred_read_replica: int = wire("int32", "11+", -1)
    records: object = wire("records", "0+", b"", nullable="0+")
    """Whole record batches: ``bytes``, or a file-slice-like object (``FileSlice``: path, position, size,
    ``len()``) that the network layer can ``sendfile`` without copying. Typed loosely so the protocol
    layer does not import storage."""


@message
class FetchResponse(Response):
    api_key = ApiKey.FETCH
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "7+", NO_ERROR)
    session_id: int = wire("int32", "7+", 0)
    partitions: tuple[FetchPartitionResponse, ...] = wire_by_topic(
        "responses", FetchPartitionResponse, topic="topic"
    )


@message
class FetchRequest(Request):
    api_key = ApiKey.FETCH
    response_type = FetchResponse
    versions = (4, 12)
    flexible_from = 12
    cluster_id: str | None = wire("string", "12+", None, nullable="12+", tag=0)
    """The cluster the fetcher believes it is in; only KRaft's own fetches check it, so ``wire_in`` drops it."""
    replica_id: int = wire("int32", "0+", CONSUMER_REPLICA_ID)
    """-1 for a consumer; a follower puts its broker id, which makes the fetch move the leader's view of
    that replica (its LEO, hence the ISR and high watermark)."""
    max_wait_ms: int = wire("int32", "0+", 500)
    """fetch.max.wait.ms: how long the broker may hold the request waiting for ``min_bytes``."""
    min_bytes: int = wire("int32", "0+", 1)
    max_bytes: int = wire("int32", "3+", 52_428_800, wire_default=0x7FFFFFFF)
    """fetch.max.bytes for the whole response (Kafka's schema default is 0x7fffffff, the client's 50 MiB)."""
    isolation_level: int = wire("int8", "4+", IsolationLevel.READ_UNCOMMITTED)
    session_id: int = wire("int32", "7+", 0)
    session_epoch: int = wire("int32", "7+", -1)
    """Incremental fetch sessions (KIP-227, ``kafkalite.broker.fetch_session``): epoch -1 is a full fetch with
    no session, 0 a full fetch that opens one, any other the next fetch of session ``session_id``."""
    partitions: tuple[FetchPartition, ...] = wire_by_topic("topics", FetchPartition, topic="topic")
    forgotten: tuple[TopicPartition, ...] = wire_partitions("forgotten_topics_data", "7+", topic="topic")
    """Partitions to drop from the fetch session."""
    rack_id: str = wire("string", "11+", "")

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        # The fetch session fields stay (KIP-227, kafkalite.broker.fetch_session); the rack is not used
        # (no fetching from followers, KIP-392).
        kw["rack_id"] = ""
        kw.pop("cluster_id", None)
        kw["max_bytes"] = kw["max_bytes"] or 0x7FFFFFFF
        return kw


# ----------------------------------------------------------------------------------------- ListOffsets


@message
class ListOffsetsPartition(Message):
    tp: TopicPartition = wire_partition()
    current_leader_epoch: int = wire("int32", "4+", UNKNOWN_EPOCH)
    timestamp: int = wire("int64", "0+", LATEST_TIMESTAMP)
    """A time in ms, or LATEST_TIMESTAMP (-1), EARLIEST_TIMESTAMP (-2), MAX_TIMESTAMP (-3, v7+),
    EARLIEST_LOCAL_TIMESTAMP (-4, v8+) or LATEST_TIERED_TIMESTAMP (-5, v9+)."""


@message
class ListOffsetsPartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    timestamp: int = wire("int64", "1+", NO_TIMESTAMP)
    offset: int = wire("int64", "1+", UNKNOWN_OFFSET)
    """The first offset whose timestamp is at least the one asked for, or the earliest/latest offset."""
    leader_epoch: int = wire("int32", "4+", UNKNOWN_EPOCH)


@message
class ListOffsetsResponse(Response):
    api_key = ApiKey.LIST_OFFSETS
    throttle_time_ms: int = wire("int32", "2+", 0)
    partitions: tuple[ListOffsetsPartitionResponse, ...] = wire_by_topic(
        "topics", ListOffsetsPartitionResponse
    )


@message
class ListOffsetsRequest(Request):
    api_key = ApiKey.LIST_OFFSETS
    response_type = ListOffsetsResponse
    versions = (1, 9)
    flexible_from = 6
    replica_id: int = wire("int32", "0+", CONSUMER_REPLICA_ID)
    isolation_level: int = wire("int8", "2+", IsolationLevel.READ_UNCOMMITTED, wire_default=0)
    """Under read_committed the latest offset is the last stable offset, not the high watermark."""
    partitions: tuple[ListOffsetsPartition, ...] = wire_by_topic("topics", ListOffsetsPartition)


# ------------------------------------------------------------------------------------ OffsetForLeaderEpoch


@message
class OffsetForLeaderEpochPartition(Message):
    tp: TopicPartition = wire_partition("partition")
    current_leader_epoch: int = wire("int32", "2+", UNKNOWN_EPOCH)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    """The epoch whose end offset the follower wants."""


@message
class OffsetForLeaderEpochPartitionResponse(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    tp: TopicPartition = wire_partition("partition")
    leader_epoch: int = wire("int32", "1+", UNKNOWN_EPOCH)
    """The largest epoch on the leader not above the one asked for."""
    end_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """Where that epoch ends on the leader (its log end offset if it is the current epoch)."""


@message
class OffsetForLeaderEpochResponse(Response):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    throttle_time_ms: int = wire("int32", "2+", 0)
    partitions: tuple[OffsetForLeaderEpochPartitionResponse, ...] = wire_by_topic(
        "topics", OffsetForLeaderEpochPartitionResponse, topic="topic"
    )


@message
class OffsetForLeaderEpochRequest(Request):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    response_type = OffsetForLeaderEpochResponse
    versions = (0, 4)
    flexible_from = 4
    replica_id: int = wire("int32", "3+", DEBUGGING_REPLICA_ID)
    """A follower's broker id; Kafka's schema default is -2 (a tool)."""
    partitions: tuple[OffsetForLeaderEpochPartition, ...] = wire_by_topic(
        "topics", OffsetForLeaderEpochPartition, topic="topic"
    )
