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

# ---------------------------------------------------------------------------------------------- Fetch


@message
class FetchPartition(Message):
    tp: TopicPartition
    fetch_offset: int = 0
    current_leader_epoch: int = UNKNOWN_EPOCH
    """The leader epoch the fetcher believes current; the leader answers FENCED_LEADER_EPOCH or
    UNKNOWN_LEADER_EPOCH when it differs, -1 skips the check."""
    last_fetched_epoch: int = UNKNOWN_EPOCH
    """Epoch of the last batch the follower has; lets the leader report a diverging epoch (KIP-320)."""
    log_start_offset: int = UNKNOWN_OFFSET
    """A follower's own log start offset; -1 from consumers."""
    partition_max_bytes: int = 1_048_576
    """max.partition.fetch.bytes; at least one whole batch is returned even when it is larger."""


@message
class EpochEndOffset(Message):
    """A leader epoch and the offset where it ended (the first offset of the next epoch)."""

    epoch: int = UNKNOWN_EPOCH
    end_offset: int = UNKNOWN_OFFSET


@message
class AbortedTransaction(Message):
    """A producer's aborted transaction that begins at ``first_offset`` within the returned range."""

    producer_id: int
    first_offset: int


@message
class FetchPartitionResponse(Message):
    tp: TopicPartition
    error_code: int = NO_ERROR
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    """Set when the follower's last_fetched_epoch is not on the leader's log: truncate to it first."""
    preferred_read_replica: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] | None = None
    """Under read_committed, the aborted transactions overlapping ``records``; None otherwise."""
    records: object = b""
    """Whole record batches: ``bytes``, or a file-slice-like object (``FileSlice``: path, position, size,
    ``len()``) that the network layer can ``sendfile`` without copying. Typed loosely so the protocol
    layer does not import storage."""


@message
class FetchResponse(Response):
    api_key = ApiKey.FETCH
    error_code: int = NO_ERROR
    session_id: int = 0
    partitions: tuple[FetchPartitionResponse, ...] = ()


@message
class FetchRequest(Request):
    api_key = ApiKey.FETCH
    response_type = FetchResponse
    replica_id: int = CONSUMER_REPLICA_ID
    """-1 for a consumer; a follower puts its broker id, which makes the fetch move the leader's view of
    that replica (its LEO, hence the ISR and high watermark)."""
    max_wait_ms: int = 500
    """fetch.max.wait.ms: how long the broker may hold the request waiting for ``min_bytes``."""
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    """fetch.max.bytes for the whole response (Kafka's schema default is 0x7fffffff, the client's 50 MiB)."""
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED
    session_id: int = 0
    session_epoch: int = -1
    """Incremental fetch sessions (KIP-227): 0 and -1 mean a full fetch with no session."""
    partitions: tuple[FetchPartition, ...] = ()
    forgotten: tuple[TopicPartition, ...] = ()
    """Partitions to drop from the fetch session."""
    rack_id: str = ""


# ----------------------------------------------------------------------------------------- ListOffsets


@message
class ListOffsetsPartition(Message):
    tp: TopicPartition
    timestamp: int = LATEST_TIMESTAMP
    """A time in ms, or LATEST_TIMESTAMP (-1), EARLIEST_TIMESTAMP (-2), MAX_TIMESTAMP (-3)."""
    current_leader_epoch: int = UNKNOWN_EPOCH


@message
class ListOffsetsPartitionResponse(Message):
    tp: TopicPartition
    error_code: int = NO_ERROR
    timestamp: int = NO_TIMESTAMP
    offset: int = UNKNOWN_OFFSET
    """The first offset whose timestamp is at least the one asked for, or the earliest/latest offset."""
    leader_epoch: int = UNKNOWN_EPOCH


@message
class ListOffsetsResponse(Response):
    api_key = ApiKey.LIST_OFFSETS
    partitions: tuple[ListOffsetsPartitionResponse, ...] = ()


@message
class ListOffsetsRequest(Request):
    api_key = ApiKey.LIST_OFFSETS
    response_type = ListOffsetsResponse
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED
    """Under read_committed the latest offset is the last stable offset, not the high watermark."""
    partitions: tuple[ListOffsetsPartition, ...] = ()


# ------------------------------------------------------------------------------------ OffsetForLeaderEpoch


@message
class OffsetForLeaderEpochPartition(Message):
    tp: TopicPartition
    leader_epoch: int = UNKNOWN_EPOCH
    """The epoch whose end offset the follower wants."""
    current_leader_epoch: int = UNKNOWN_EPOCH


@message
class OffsetForLeaderEpochPartitionResponse(Message):
    tp: TopicPartition
    error_code: int = NO_ERROR
    leader_epoch: int = UNKNOWN_EPOCH
    """The largest epoch on the leader not above the one asked for."""
    end_offset: int = UNKNOWN_OFFSET
    """Where that epoch ends on the leader (its log end offset if it is the current epoch)."""


@message
class OffsetForLeaderEpochResponse(Response):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    partitions: tuple[OffsetForLeaderEpochPartitionResponse, ...] = ()


@message
class OffsetForLeaderEpochRequest(Request):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    response_type = OffsetForLeaderEpochResponse
    replica_id: int = DEBUGGING_REPLICA_ID
    """A follower's broker id; Kafka's schema default is -2 (a tool)."""
    partitions: tuple[OffsetForLeaderEpochPartition, ...] = ()
