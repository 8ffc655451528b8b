"""KRaft's own requests (KIP-595, KIP-630): Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum and
FetchSnapshot.

Replication itself rides on Fetch (``kafkalite.protocol.fetch``): a follower pulls from the leader with its
log end offset and the epoch of its last batch, and the leader answers with records, its high watermark,
a diverging epoch when the two logs disagree, and the current leader when the fetcher is behind.

Field names and version ranges are Kafka's (``VoteRequest.json`` and its siblings). The request classes
keep ``versions = None``: kafkalite's TCP listener does not serve them yet (the controller listener comes
with the broker integration). The directory ids (KIP-853, v1+) and the endpoints are not declared:
kafkalite's quorum has a static voter set, as Kafka's had before KIP-853.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kafkalite.protocol.api import (
    NO_ERROR,
    UNKNOWN_EPOCH,
    UNKNOWN_OFFSET,
    ApiKey,
    Message,
    Request,
    Response,
    TopicPartition,
    message,
)
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition
from kafkalite.protocol.fetch import SnapshotId

NO_LEADER = -1
"""``leader_id`` when the sender knows no leader for the epoch."""


class RaftRequest(NamedTuple):
    """A request between quorum members (and observers), with the id its response echoes. Here, with
    the messages, so the TCP bridge between processes may carry it."""

    correlation_id: int
    data: Any


class RaftResponse(NamedTuple):
    correlation_id: int
    data: Any


# ------------------------------------------------------------------------------------------------ Vote


@message
class VotePartition(Message):
    tp: TopicPartition = wire_partition()
    candidate_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    """The candidate's epoch, one above the last epoch it knew."""
    candidate_id: int = wire("int32", "0+", -1)
    last_offset_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    """The epoch of the last batch in the candidate's log."""
    last_offset: int = wire("int64", "0+", 0)
    """The candidate's log end offset: with ``last_offset_epoch``, what a voter compares with its own log."""


@message
class VotePartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    """The voter's epoch: a candidate behind it learns the epoch it lost."""
    vote_granted: bool = wire("bool", "0+", False)


@message
class VoteResponse(Response):
    api_key = ApiKey.VOTE
    error_code: int = wire("int16", "0+", NO_ERROR)
    partitions: tuple[VotePartitionResponse, ...] = wire_by_topic(
        "topics", VotePartitionResponse, topic="topic_name"
    )


@message
class VoteRequest(Request):
    api_key = ApiKey.VOTE
    response_type = VoteResponse
    flexible_from = 0
    cluster_id: str | None = wire("string", "0+", None, nullable="0+")
    voter_id: int = wire("int32", "1+", -1)
    """The voter the request is for (v1+), so a misrouted request is refused."""
    partitions: tuple[VotePartition, ...] = wire_by_topic("topics", VotePartition, topic="topic_name")


# ------------------------------------------------------------------------------------ BeginQuorumEpoch


@message
class BeginQuorumEpochPartition(Message):
    tp: TopicPartition = wire_partition()
    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)


@message
class QuorumEpochPartitionResponse(Message):
    """A voter's answer to BeginQuorumEpoch or EndQuorumEpoch: its error and the leader it knows."""

    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)


@message
class BeginQuorumEpochResponse(Response):
    api_key = ApiKey.BEGIN_QUORUM_EPOCH
    error_code: int = wire("int16", "0+", NO_ERROR)
    partitions: tuple[QuorumEpochPartitionResponse, ...] = wire_by_topic(
        "topics", QuorumEpochPartitionResponse, topic="topic_name"
    )


@message
class BeginQuorumEpochRequest(Request):
    """The new leader tells each voter it won ``leader_epoch``; resent until every voter answers."""

    api_key = ApiKey.BEGIN_QUORUM_EPOCH
    response_type = BeginQuorumEpochResponse
    flexible_from = 1
    cluster_id: str | None = wire("string", "0+", None, nullable="0+")
    voter_id: int = wire("int32", "1+", -1)
    partitions: tuple[BeginQuorumEpochPartition, ...] = wire_by_topic(
        "topics", BeginQuorumEpochPartition, topic="topic_name"
    )


# -------------------------------------------------------------------------------------- EndQuorumEpoch


@message
class EndQuorumEpochPartition(Message):
    tp: TopicPartition = wire_partition()
    leader_id: int = wire("int32", "0+", NO_LEADER)
    """The leader that is resigning."""
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    preferred_successors: tuple[int, ...] = wire("[]int32", "0", ())
    """Voters by how far their log has caught up, most first: the first one starts its election at once,
    the others back off by their place in the list (v1 sends them as PreferredCandidates with directory
    ids)."""


@message
class EndQuorumEpochResponse(Response):
    api_key = ApiKey.END_QUORUM_EPOCH
    error_code: int = wire("int16", "0+", NO_ERROR)
    partitions: tuple[QuorumEpochPartitionResponse, ...] = wire_by_topic(
        "topics", QuorumEpochPartitionResponse, topic="topic_name"
    )


@message
class EndQuorumEpochRequest(Request):
    api_key = ApiKey.END_QUORUM_EPOCH
    response_type = EndQuorumEpochResponse
    flexible_from = 1
    cluster_id: str | None = wire("string", "0+", None, nullable="0+")
    partitions: tuple[EndQuorumEpochPartition, ...] = wire_by_topic(
        "topics", EndQuorumEpochPartition, topic="topic_name"
    )


# ------------------------------------------------------------------------------------- DescribeQuorum


@message
class ReplicaState(Message):
    """What the leader knows of one voter or observer."""

    replica_id: int = wire("int32", "0+", -1)
    log_end_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """The replica's last fetch offset, or -1 if it has not fetched in this epoch."""
    last_fetch_timestamp: int = wire("int64", "1+", -1)
    last_caught_up_timestamp: int = wire("int64", "1+", -1)


@message
class DescribeQuorumPartition(Message):
    tp: TopicPartition = wire_partition()


@message
class DescribeQuorumPartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "2+", None, nullable="2+")
    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    high_watermark: int = wire("int64", "0+", UNKNOWN_OFFSET)
    current_voters: tuple[ReplicaState, ...] = wire("[]struct", "0+", (), items=ReplicaState)
    observers: tuple[ReplicaState, ...] = wire("[]struct", "0+", (), items=ReplicaState)


@message
class DescribeQuorumResponse(Response):
    api_key = ApiKey.DESCRIBE_QUORUM
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "2+", None, nullable="2+")
    partitions: tuple[DescribeQuorumPartitionResponse, ...] = wire_by_topic(
        "topics", DescribeQuorumPartitionResponse, topic="topic_name"
    )


@message
class DescribeQuorumRequest(Request):
    api_key = ApiKey.DESCRIBE_QUORUM
    response_type = DescribeQuorumResponse
    versions = (0, 1)
    """v2 adds directory ids and endpoints (KIP-853), which kafkalite's static quorum does not have."""
    flexible_from = 0
    partitions: tuple[DescribeQuorumPartition, ...] = wire_by_topic(
        "topics", DescribeQuorumPartition, topic="topic_name"
    )


# -------------------------------------------------------------------------------------- FetchSnapshot


@message
class FetchSnapshotPartition(Message):
    tp: TopicPartition = wire_partition("partition")
    current_leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)
    snapshot_id: SnapshotId = wire("struct", "0+", SnapshotId(), items=SnapshotId)
    """The snapshot the leader named in its Fetch response."""
    position: int = wire("int64", "0+", 0)
    """The byte position in the snapshot file to read from: what the fetcher already has."""


@message
class SnapshotLeader(Message):
    """FetchSnapshot's LeaderIdAndEpoch (the same fields as Fetch's, present from v0)."""

    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "0+", UNKNOWN_EPOCH)


@message
class FetchSnapshotPartitionResponse(Message):
    tp: TopicPartition = wire_partition("index")
    error_code: int = wire("int16", "0+", NO_ERROR)
    snapshot_id: SnapshotId = wire("struct", "0+", SnapshotId(), items=SnapshotId)
    current_leader: SnapshotLeader = wire("struct", "0+", SnapshotLeader(), items=SnapshotLeader, tag=0)
    size: int = wire("int64", "0+", 0)
    """The whole snapshot's size in bytes: the fetcher is done when it has this many."""
    position: int = wire("int64", "0+", 0)
    unaligned_records: bytes = wire("records", "0+", b"")
    """Bytes of the snapshot file from ``position``; a chunk may end inside a batch."""


@message
class FetchSnapshotResponse(Response):
    api_key = ApiKey.FETCH_SNAPSHOT
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    partitions: tuple[FetchSnapshotPartitionResponse, ...] = wire_by_topic(
        "topics", FetchSnapshotPartitionResponse, topic="name"
    )


@message
class FetchSnapshotRequest(Request):
    """A follower or observer downloads the leader's snapshot a chunk at a time (API 59, v0: v1 adds
    directory ids and endpoints, KIP-853)."""

    api_key = ApiKey.FETCH_SNAPSHOT
    response_type = FetchSnapshotResponse
    flexible_from = 0
    cluster_id: str | None = wire("string", "0+", None, nullable="0+", tag=0)
    replica_id: int = wire("int32", "0+", -1)
    max_bytes: int = wire("int32", "0+", 0x7FFFFFFF)
    partitions: tuple[FetchSnapshotPartition, ...] = wire_by_topic(
        "topics", FetchSnapshotPartition, topic="name"
    )


RAFT_REQUESTS: tuple[type[Request], ...] = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    DescribeQuorumRequest,
    FetchSnapshotRequest,
)
"""The quorum's requests. Only DescribeQuorum is also in ``kafkalite.protocol.REQUESTS``: a KRaft broker's
listener takes it from clients and forwards it to the active controller."""
