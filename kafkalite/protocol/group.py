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
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition, wire_partitions

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""Kafka's ``authorized_operations`` when they were not asked for (kafkalite never computes them)."""

# ------------------------------------------------------------------------------------- FindCoordinator


@message
class FindCoordinatorResponse(Response):
    api_key = ApiKey.FIND_COORDINATOR
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "1+", None, nullable="1+")
    node_id: int = wire("int32", "0+", NO_NODE)
    host: str = wire("string", "0+", "")
    port: int = wire("int32", "0+", -1)


@message
class FindCoordinatorRequest(Request):
    """Which broker coordinates a group (or a transactional id): the leader of the partition of
    ``__consumer_offsets`` (``__transaction_state``) that the key hashes to."""

    api_key = ApiKey.FIND_COORDINATOR
    response_type = FindCoordinatorResponse
    versions = (0, 3)
    flexible_from = 3
    key: str = wire("string", "0+", "")
    key_type: int = wire("int8", "1+", CoordinatorType.GROUP)


# ------------------------------------------------------------------------------------------- JoinGroup


@message
class JoinGroupProtocol(Message):
    """An assignor the member supports (e.g. "range") with its subscription, in order of preference."""

    name: str = wire("string", "0+")
    metadata: bytes = wire("bytes", "0+", b"")


@message
class JoinGroupMember(Message):
    member_id: str = wire("string", "0+")
    group_instance_id: str | None = wire("string", "5+", None, nullable="5+")
    metadata: bytes = wire("bytes", "0+", b"")


@message
class JoinGroupResponse(Response):
    api_key = ApiKey.JOIN_GROUP
    throttle_time_ms: int = wire("int32", "2+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    generation_id: int = wire("int32", "0+", -1)
    protocol_type: str | None = wire("string", "7+", None, nullable="7+")
    protocol_name: str | None = wire("string", "0+", None, nullable="7+")
    """The assignor chosen: one every member supports."""
    leader: str = wire("string", "0+", "")
    """Member id of the group leader, the one member that computes the assignment."""
    skip_assignment: bool = wire("bool", "9+", False)
    """KIP-814: the leader of a stable group, a static member that rejoined, must not assign again."""
    leader_before_rejoin: str | None = None
    """With ``skip_assignment``: the leader's member id before it rejoined, which a client below v9 is
    told is the leader, so that it does not take itself for the leader and assign (as Kafka does)."""
    member_id: str = wire("string", "0+", "")
    """This member's id, assigned by the coordinator (also returned with MEMBER_ID_REQUIRED)."""
    members: tuple[JoinGroupMember, ...] = wire("[]struct", "0+", (), items=JoinGroupMember)
    """Every member and its subscription; filled in for the leader only."""

    def wire_out(self, body: dict, version: int) -> None:
        if version < 7 and body["protocol_name"] is None:  # not nullable before v7: no assignor chosen yet
            body["protocol_name"] = ""
        if version < 9 and self.skip_assignment and self.leader_before_rejoin is not None:
            body["leader"], body["members"] = self.leader_before_rejoin, []


@message
class JoinGroupRequest(Request):
    api_key = ApiKey.JOIN_GROUP
    response_type = JoinGroupResponse
    versions = (0, 9)
    flexible_from = 6
    group_id: str = wire("string", "0+", "")
    session_timeout_ms: int = wire("int32", "0+", 45_000)
    """session.timeout.ms: no heartbeat for this long and the coordinator removes the member."""
    rebalance_timeout_ms: int = wire("int32", "1+", 300_000, wire_default=-1)
    """How long the coordinator waits for members to rejoin (the consumer sends max.poll.interval.ms)."""
    member_id: str = wire("string", "0+", "")
    """Empty on the first join."""
    group_instance_id: str | None = wire("string", "5+", None, nullable="5+")
    """group.instance.id, for static membership (KIP-345)."""
    protocol_type: str = wire("string", "0+", "consumer")
    protocols: tuple[JoinGroupProtocol, ...] = wire("[]struct", "0+", (), items=JoinGroupProtocol)
    reason: str | None = wire("string", "8+", None, nullable="8+")

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        # v0 has one timeout, which bounds both the session and the rebalance
        if version < 1 and "session_timeout_ms" in kw:
            kw["rebalance_timeout_ms"] = kw["session_timeout_ms"]
        return kw


# ------------------------------------------------------------------------------------------- SyncGroup


@message
class SyncGroupAssignment(Message):
    member_id: str = wire("string", "0+")
    assignment: bytes = wire("bytes", "0+", b"")


@message
class SyncGroupResponse(Response):
    api_key = ApiKey.SYNC_GROUP
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    protocol_type: str | None = wire("string", "5+", None, nullable="5+")
    protocol_name: str | None = wire("string", "5+", None, nullable="5+")
    assignment: bytes = wire("bytes", "0+", b"")
    """This member's share, as the leader encoded it."""


@message
class SyncGroupRequest(Request):
    api_key = ApiKey.SYNC_GROUP
    response_type = SyncGroupResponse
    versions = (0, 5)
    flexible_from = 4
    group_id: str = wire("string", "0+", "")
    generation_id: int = wire("int32", "0+", -1)
    member_id: str = wire("string", "0+", "")
    group_instance_id: str | None = wire("string", "3+", None, nullable="3+")
    protocol_type: str | None = wire("string", "5+", None, nullable="5+")
    """From v5 the member says which protocol it joined with: INCONSISTENT_GROUP_PROTOCOL if not the group's."""
    protocol_name: str | None = wire("string", "5+", None, nullable="5+")
    assignments: tuple[SyncGroupAssignment, ...] = wire("[]struct", "0+", (), items=SyncGroupAssignment)
    """The leader's assignment for every member; empty from the other members."""


# ------------------------------------------------------------------------------------------- Heartbeat


@message
class HeartbeatResponse(Response):
    api_key = ApiKey.HEARTBEAT
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    """REBALANCE_IN_PROGRESS tells a member to rejoin."""


@message
class HeartbeatRequest(Request):
    api_key = ApiKey.HEARTBEAT
    response_type = HeartbeatResponse
    versions = (0, 4)
    flexible_from = 4
    group_id: str = wire("string", "0+", "")
    generation_id: int = wire("int32", "0+", -1)
    member_id: str = wire("string", "0+", "")
    group_instance_id: str | None = wire("string", "3+", None, nullable="3+")


# ------------------------------------------------------------------------------------------ LeaveGroup


@message
class MemberIdentity(Message):
    member_id: str = wire("string", "3+")
    group_instance_id: str | None = wire("string", "3+", None, nullable="3+")
    reason: str | None = wire("string", "5+", None, nullable="5+")


@message
class LeaveGroupMemberResponse(Message):
    member_id: str = wire("string", "3+")
    group_instance_id: str | None = wire("string", "3+", None, nullable="3+")
    error_code: int = wire("int16", "3+", NO_ERROR)


@message
class LeaveGroupResponse(Response):
    api_key = ApiKey.LEAVE_GROUP
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    members: tuple[LeaveGroupMemberResponse, ...] = wire("[]struct", "3+", (), items=LeaveGroupMemberResponse)


@message
class LeaveGroupRequest(Request):
    api_key = ApiKey.LEAVE_GROUP
    response_type = LeaveGroupResponse
    versions = (0, 5)
    flexible_from = 4
    group_id: str = wire("string", "0+", "")
    member_id: str = wire("string", "0-2", "")
    """Only on the wire before v3, which names one member; ``wire_in`` moves it into ``members``."""
    members: tuple[MemberIdentity, ...] = wire("[]struct", "3+", (), items=MemberIdentity)

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        member_id = kw.pop("member_id", "")
        if version < 3:  # the batch of members (KIP-345) came with v3; before it, one member leaves
            kw["members"] = (MemberIdentity(member_id=member_id),)
        return kw

    def wire_out(self, body: dict, version: int) -> None:
        if version < 3 and self.members:
            body["member_id"] = self.members[0].member_id


# ----------------------------------------------------------------------------------------- OffsetCommit


@message
class OffsetCommitPartition(Message):
    tp: TopicPartition = wire_partition()
    committed_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """The next offset to consume (one past the last record processed)."""
    committed_leader_epoch: int = wire("int32", "6+", UNKNOWN_EPOCH)
    committed_metadata: str | None = wire("string", "0+", "", nullable="0+")


@message
class OffsetCommitResponse(Response):
    api_key = ApiKey.OFFSET_COMMIT
    throttle_time_ms: int = wire("int32", "3+", 0)
    partitions: tuple[PartitionError, ...] = wire_by_topic("topics", PartitionError)


@message
class OffsetCommitRequest(Request):
    api_key = ApiKey.OFFSET_COMMIT
    response_type = OffsetCommitResponse
    versions = (2, 9)
    flexible_from = 8
    group_id: str = wire("string", "0+", "")
    generation_id: int = wire("int32", "1+", -1, name="generation_id_or_member_epoch")
    """-1 with an empty member_id: a commit from outside the group protocol (manual assignment)."""
    member_id: str = wire("string", "1+", "")
    group_instance_id: str | None = wire("string", "7+", None, nullable="7+")
    retention_time_ms: int = wire("int64", "2-4", -1)
    """-1: the broker's offsets.retention.minutes. kafkalite keeps offsets by that config alone, so
    ``wire_in`` drops what a v2-v4 client sends."""
    partitions: tuple[OffsetCommitPartition, ...] = wire_by_topic("topics", OffsetCommitPartition)
    modern: bool = True
    """Sent in v9+, the version a member of a KIP-848 consumer group must commit with (Kafka answers
    UNSUPPORTED_VERSION to such a member's older commit)."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("retention_time_ms", None)
        kw["modern"] = version >= 9
        return kw


# ------------------------------------------------------------------------------------------ OffsetFetch


@message
class OffsetFetchPartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    committed_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """-1: nothing committed (the consumer falls back to auto.offset.reset)."""
    committed_leader_epoch: int = wire("int32", "5+", UNKNOWN_EPOCH)
    metadata: str | None = wire("string", "0+", "", nullable="0+")
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class OffsetFetchResponse(Response):
    api_key = ApiKey.OFFSET_FETCH
    throttle_time_ms: int = wire("int32", "3+", 0)
    partitions: tuple[OffsetFetchPartitionResponse, ...] = wire_by_topic(
        "topics", OffsetFetchPartitionResponse
    )
    error_code: int = wire("int16", "2+", NO_ERROR)


@message
class OffsetFetchRequest(Request):
    api_key = ApiKey.OFFSET_FETCH
    response_type = OffsetFetchResponse
    versions = (1, 6)
    flexible_from = 6
    group_id: str = wire("string", "0+", "")
    partitions: tuple[TopicPartition, ...] | None = wire_partitions(
        "topics", "0+", None, partitions="partition_indexes", nullable="2+"
    )
    """None: every partition the group has committed."""
    require_stable: bool = False
    """Answer UNSTABLE_OFFSET_COMMIT rather than skip offsets of a transaction still open (KIP-447)."""


# -------------------------------------------------------------------------------------- DescribeGroups


@message
class DescribedGroupMember(Message):
    member_id: str = wire("string", "0+")
    group_instance_id: str | None = wire("string", "4+", None, nullable="4+")
    client_id: str = wire("string", "0+", "")
    client_host: str = wire("string", "0+", "")
    member_metadata: bytes = wire("bytes", "0+", b"")
    member_assignment: bytes = wire("bytes", "0+", b"")


@message
class DescribedGroup(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    group_id: str = wire("string", "0+")
    group_state: str = wire("string", "0+", "")
    """Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""
    protocol_type: str = wire("string", "0+", "")
    protocol_data: str = wire("string", "0+", "")
    """The chosen assignor."""
    members: tuple[DescribedGroupMember, ...] = wire("[]struct", "0+", (), items=DescribedGroupMember)
    authorized_operations: int = wire("int32", "3+", AUTHORIZED_OPERATIONS_OMITTED)
    """Always Kafka's "not asked for": kafkalite has no authorizer, so ``wire_in`` ignores a value read."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("authorized_operations", None)
        return kw


@message
class DescribeGroupsResponse(Response):
    api_key = ApiKey.DESCRIBE_GROUPS
    throttle_time_ms: int = wire("int32", "1+", 0)
    groups: tuple[DescribedGroup, ...] = wire("[]struct", "0+", (), items=DescribedGroup)


@message
class DescribeGroupsRequest(Request):
    api_key = ApiKey.DESCRIBE_GROUPS
    response_type = DescribeGroupsResponse
    versions = (0, 5)
    flexible_from = 5
    groups: tuple[str, ...] = wire("[]string", "0+", ())
    include_authorized_operations: bool = wire("bool", "3+", False)
    """kafkalite has no authorizer to ask, so ``wire_in`` ignores it and groups carry Kafka's "omitted"."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("include_authorized_operations", None)
        return kw


# ------------------------------------------------------------------------------------------ ListGroups


@message
class ListedGroup(Message):
    group_id: str = wire("string", "0+")
    protocol_type: str = wire("string", "0+", "")
    group_state: str = wire("string", "4+", "")
    group_type: str = wire("string", "5+", "")
    """``classic`` or ``consumer`` (KIP-848)."""


@message
class ListGroupsResponse(Response):
    api_key = ApiKey.LIST_GROUPS
    throttle_time_ms: int = wire("int32", "1+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    groups: tuple[ListedGroup, ...] = wire("[]struct", "0+", (), items=ListedGroup)


@message
class ListGroupsRequest(Request):
    api_key = ApiKey.LIST_GROUPS
    response_type = ListGroupsResponse
    versions = (0, 5)
    flexible_from = 3
    states_filter: tuple[str, ...] = wire("[]string", "4+", ())
    """Empty: groups in any state (case ignored)."""
    types_filter: tuple[str, ...] = wire("[]string", "5+", ())
    """Empty: groups of any type; else ``classic`` and/or ``consumer`` (case ignored)."""


# ----------------------------------------------------------------------------------------- DeleteGroups


@message
class DeletableGroupResult(Message):
    group_id: str = wire("string", "0+")
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class DeleteGroupsResponse(Response):
    api_key = ApiKey.DELETE_GROUPS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[DeletableGroupResult, ...] = wire("[]struct", "0+", (), items=DeletableGroupResult)


@message
class DeleteGroupsRequest(Request):
    """Remove Empty groups and their committed offsets (tombstones in ``__consumer_offsets``)."""

    api_key = ApiKey.DELETE_GROUPS
    response_type = DeleteGroupsResponse
    versions = (0, 2)
    flexible_from = 2
    groups: tuple[str, ...] = wire("[]string", "0+", (), name="groups_names")
