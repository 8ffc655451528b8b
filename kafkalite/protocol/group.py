"""Consumer groups: finding the coordinator, the join/sync/heartbeat/leave protocol, committed offsets,
and listing/describing groups. ``metadata`` and ``assignment`` are opaque bytes to the coordinator; the
consumer's assignor (client side) encodes and decodes them."""

from __future__ import annotations

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_NODE,
    UNKNOWN_EPOCH,
    UNKNOWN_OFFSET,
    ApiKey,
    CoordinatorType,
    Message,
    PartitionError,
    Request,
    Response,
    TopicPartition,
    message,
)

# ------------------------------------------------------------------------------------- FindCoordinator


@message
class FindCoordinatorResponse(Response):
    api_key = ApiKey.FIND_COORDINATOR
    error_code: int = NO_ERROR
    error_message: str | None = None
    node_id: int = NO_NODE
    host: str = ""
    port: int = -1


@message
class FindCoordinatorRequest(Request):
    """Which broker coordinates a group (or a transactional id): the leader of the partition of
    ``__consumer_offsets`` (``__transaction_state``) that the key hashes to."""

    api_key = ApiKey.FIND_COORDINATOR
    response_type = FindCoordinatorResponse
    key: str = ""
    key_type: int = CoordinatorType.GROUP


# ------------------------------------------------------------------------------------------- JoinGroup


@message
class JoinGroupProtocol(Message):
    """An assignor the member supports (e.g. "range") with its subscription, in order of preference."""

    name: str
    metadata: bytes = b""


@message
class JoinGroupMember(Message):
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes = b""


@message
class JoinGroupResponse(Response):
    api_key = ApiKey.JOIN_GROUP
    error_code: int = NO_ERROR
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    """The assignor chosen: one every member supports."""
    leader: str = ""
    """Member id of the group leader, the one member that computes the assignment."""
    skip_assignment: bool = False
    member_id: str = ""
    """This member's id, assigned by the coordinator (also returned with MEMBER_ID_REQUIRED)."""
    members: tuple[JoinGroupMember, ...] = ()
    """Every member and its subscription; filled in for the leader only."""


@message
class JoinGroupRequest(Request):
    api_key = ApiKey.JOIN_GROUP
    response_type = JoinGroupResponse
    group_id: str = ""
    session_timeout_ms: int = 45_000
    """session.timeout.ms: no heartbeat for this long and the coordinator removes the member."""
    rebalance_timeout_ms: int = 300_000
    """How long the coordinator waits for members to rejoin (the consumer sends max.poll.interval.ms)."""
    member_id: str = ""
    """Empty on the first join."""
    group_instance_id: str | None = None
    """group.instance.id, for static membership (KIP-345)."""
    protocol_type: str = "consumer"
    protocols: tuple[JoinGroupProtocol, ...] = ()
    reason: str | None = None


# ------------------------------------------------------------------------------------------- SyncGroup


@message
class SyncGroupAssignment(Message):
    member_id: str
    assignment: bytes = b""


@message
class SyncGroupResponse(Response):
    api_key = ApiKey.SYNC_GROUP
    error_code: int = NO_ERROR
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
    """This member's share, as the leader encoded it."""


@message
class SyncGroupRequest(Request):
    api_key = ApiKey.SYNC_GROUP
    response_type = SyncGroupResponse
    group_id: str = ""
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()
    """The leader's assignment for every member; empty from the other members."""


# ------------------------------------------------------------------------------------------- Heartbeat


@message
class HeartbeatResponse(Response):
    api_key = ApiKey.HEARTBEAT
    error_code: int = NO_ERROR
    """REBALANCE_IN_PROGRESS tells a member to rejoin."""


@message
class HeartbeatRequest(Request):
    api_key = ApiKey.HEARTBEAT
    response_type = HeartbeatResponse
    group_id: str = ""
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


# ------------------------------------------------------------------------------------------ LeaveGroup


@message
class MemberIdentity(Message):
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@message
class LeaveGroupMemberResponse(Message):
    member_id: str
    group_instance_id: str | None = None
    error_code: int = NO_ERROR


@message
class LeaveGroupResponse(Response):
    api_key = ApiKey.LEAVE_GROUP
    error_code: int = NO_ERROR
    members: tuple[LeaveGroupMemberResponse, ...] = ()


@message
class LeaveGroupRequest(Request):
    api_key = ApiKey.LEAVE_GROUP
    response_type = LeaveGroupResponse
    group_id: str = ""
    members: tuple[MemberIdentity, ...] = ()


# ----------------------------------------------------------------------------------------- OffsetCommit


@message
class OffsetCommitPartition(Message):
    tp: TopicPartition
    committed_offset: int = UNKNOWN_OFFSET
    """The next offset to consume (one past the last record processed)."""
    committed_leader_epoch: int = UNKNOWN_EPOCH
    committed_metadata: str | None = ""


@message
class OffsetCommitResponse(Response):
    api_key = ApiKey.OFFSET_COMMIT
    partitions: tuple[PartitionError, ...] = ()


@message
class OffsetCommitRequest(Request):
    api_key = ApiKey.OFFSET_COMMIT
    response_type = OffsetCommitResponse
    group_id: str = ""
    generation_id: int = -1
    """-1 with an empty member_id: a commit from outside the group protocol (manual assignment)."""
    member_id: str = ""
    group_instance_id: str | None = None
    partitions: tuple[OffsetCommitPartition, ...] = ()


# ------------------------------------------------------------------------------------------ OffsetFetch


@message
class OffsetFetchPartitionResponse(Message):
    tp: TopicPartition
    committed_offset: int = UNKNOWN_OFFSET
    """-1: nothing committed (the consumer falls back to auto.offset.reset)."""
    committed_leader_epoch: int = UNKNOWN_EPOCH
    metadata: str | None = ""
    error_code: int = NO_ERROR


@message
class OffsetFetchResponse(Response):
    api_key = ApiKey.OFFSET_FETCH
    error_code: int = NO_ERROR
    partitions: tuple[OffsetFetchPartitionResponse, ...] = ()


@message
class OffsetFetchRequest(Request):
    api_key = ApiKey.OFFSET_FETCH
    response_type = OffsetFetchResponse
    group_id: str = ""
    partitions: tuple[TopicPartition, ...] | None = None
    """None: every partition the group has committed."""
    require_stable: bool = False
    """Answer UNSTABLE_OFFSET_COMMIT rather than skip offsets of a transaction still open (KIP-447)."""


# -------------------------------------------------------------------------------------- DescribeGroups


@message
class DescribedGroupMember(Message):
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@message
class DescribedGroup(Message):
    group_id: str
    error_code: int = NO_ERROR
    group_state: str = ""
    """Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""
    protocol_type: str = ""
    protocol_data: str = ""
    """The chosen assignor."""
    members: tuple[DescribedGroupMember, ...] = ()


@message
class DescribeGroupsResponse(Response):
    api_key = ApiKey.DESCRIBE_GROUPS
    groups: tuple[DescribedGroup, ...] = ()


@message
class DescribeGroupsRequest(Request):
    api_key = ApiKey.DESCRIBE_GROUPS
    response_type = DescribeGroupsResponse
    groups: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------ ListGroups


@message
class ListedGroup(Message):
    group_id: str
    protocol_type: str = ""
    group_state: str = ""


@message
class ListGroupsResponse(Response):
    api_key = ApiKey.LIST_GROUPS
    error_code: int = NO_ERROR
    groups: tuple[ListedGroup, ...] = ()


@message
class ListGroupsRequest(Request):
    api_key = ApiKey.LIST_GROUPS
    response_type = ListGroupsResponse
    states_filter: tuple[str, ...] = ()
    """Empty: groups in any state."""


# ----------------------------------------------------------------------------------------- DeleteGroups


@message
class DeletableGroupResult(Message):
    group_id: str
    error_code: int = NO_ERROR


@message
class DeleteGroupsResponse(Response):
    api_key = ApiKey.DELETE_GROUPS
    results: tuple[DeletableGroupResult, ...] = ()


@message
class DeleteGroupsRequest(Request):
    """Remove Empty groups and their committed offsets (tombstones in ``__consumer_offsets``)."""

    api_key = ApiKey.DELETE_GROUPS
    response_type = DeleteGroupsResponse
    groups: tuple[str, ...] = ()
