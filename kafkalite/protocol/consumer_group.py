"""The consumer group protocol of KIP-848: one ConsumerGroupHeartbeat (api key 68) carries a member's
subscription and the partitions it owns; the coordinator answers with the member's epoch and, when it changed,
the partitions the member may use now. The assignment is computed on the broker (``group.consumer.assignors``),
not by a leader member as in the classic protocol."""

from __future__ import annotations

import uuid

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, message
from kafkalite.protocol.codec.binding import wire

JOIN_GROUP_MEMBER_EPOCH = 0
"""The epoch a member sends to join (or rejoin after being fenced) the group."""
LEAVE_GROUP_MEMBER_EPOCH = -1
"""The epoch a member sends to leave the group for good."""
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
"""The epoch a static member sends to leave for a while: it keeps its partitions until its session expires."""


@message
class ConsumerGroupTopicPartitions(Message):
    """Partitions of one topic, named by its topic id as in Kafka's KIP-848 messages."""

    topic_id: uuid.UUID = wire("uuid", "0+")
    partitions: tuple[int, ...] = wire("[]int32", "0+", ())


@message
class ConsumerGroupAssignment(Message):
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...] = wire(
        "[]struct", "0+", (), items=ConsumerGroupTopicPartitions
    )
    """The partitions the member may consume now (never one another member still owns)."""


@message
class ConsumerGroupHeartbeatResponse(Response):
    api_key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    member_id: str | None = wire("string", "0+", None, nullable="0+")
    member_epoch: int = wire("int32", "0+", 0)
    heartbeat_interval_ms: int = wire("int32", "0+", 0)
    assignment: ConsumerGroupAssignment | None = wire(
        "struct", "0+", None, items=ConsumerGroupAssignment, nullable="0+"
    )
    """None when the assignment did not change since the member's last heartbeat."""


@message
class ConsumerGroupHeartbeatRequest(Request):
    """Most fields are None (or -1) when they did not change since the member's last heartbeat; a join
    (epoch 0) sends them all."""

    api_key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    response_type = ConsumerGroupHeartbeatResponse
    versions = (0, 1)
    """Kafka 3.9 serves v0; 4.0 adds v1 (the regex subscription, ``subscribed_topic_regex``)."""
    flexible_from = 0
    group_id: str = wire("string", "0+", "")
    member_id: str = wire("string", "0+", "")
    member_epoch: int = wire("int32", "0+", JOIN_GROUP_MEMBER_EPOCH)
    instance_id: str | None = wire("string", "0+", None, nullable="0+")
    rack_id: str | None = wire("string", "0+", None, nullable="0+")
    rebalance_timeout_ms: int = wire("int32", "0+", -1)
    subscribed_topic_names: tuple[str, ...] | None = wire("[]string", "0+", None, nullable="0+")
    subscribed_topic_regex: str | None = wire("string", "1+", None, nullable="1+")
    server_assignor: str | None = wire("string", "0+", None, nullable="0+")
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...] | None = wire(
        "[]struct", "0+", None, items=ConsumerGroupTopicPartitions, nullable="0+"
    )
    """The partitions the member owns (it reports them so the coordinator knows what it has revoked)."""


# ------------------------------------------------------------------------------- ConsumerGroupDescribe


@message
class DescribedTopicPartitions(Message):
    topic_id: uuid.UUID = wire("uuid", "0+")
    topic_name: str = wire("string", "0+", "")
    partitions: tuple[int, ...] = wire("[]int32", "0+", ())


@message
class DescribedAssignment(Message):
    topic_partitions: tuple[DescribedTopicPartitions, ...] = wire(
        "[]struct", "0+", (), items=DescribedTopicPartitions
    )


@message
class ConsumerGroupDescribeMember(Message):
    member_id: str = wire("string", "0+", "")
    instance_id: str | None = wire("string", "0+", None, nullable="0+")
    rack_id: str | None = wire("string", "0+", None, nullable="0+")
    member_epoch: int = wire("int32", "0+", 0)
    client_id: str = wire("string", "0+", "")
    client_host: str = wire("string", "0+", "")
    subscribed_topic_names: tuple[str, ...] = wire("[]string", "0+", ())
    subscribed_topic_regex: str | None = wire("string", "0+", None, nullable="0+")
    assignment: DescribedAssignment = wire("struct", "0+", DescribedAssignment(), items=DescribedAssignment)
    """What the member owns now."""
    target_assignment: DescribedAssignment = wire(
        "struct", "0+", DescribedAssignment(), items=DescribedAssignment
    )
    """What the assignor wants it to own once reconciled."""


@message
class ConsumerGroupDescribedGroup(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    group_id: str = wire("string", "0+", "")
    group_state: str = wire("string", "0+", "")
    """Kafka's consumer group states: Empty, Assigning, Reconciling, Stable, Dead."""
    group_epoch: int = wire("int32", "0+", 0)
    assignment_epoch: int = wire("int32", "0+", 0)
    assignor_name: str = wire("string", "0+", "")
    members: tuple[ConsumerGroupDescribeMember, ...] = wire(
        "[]struct", "0+", (), items=ConsumerGroupDescribeMember
    )
    authorized_operations: int = wire("int32", "0+", -(2**31))
    """Kafka's "not asked for": kafkalite has no authorizer."""


@message
class ConsumerGroupDescribeResponse(Response):
    api_key = ApiKey.CONSUMER_GROUP_DESCRIBE
    throttle_time_ms: int = wire("int32", "0+", 0)
    groups: tuple[ConsumerGroupDescribedGroup, ...] = wire(
        "[]struct", "0+", (), items=ConsumerGroupDescribedGroup
    )


@message
class ConsumerGroupDescribeRequest(Request):
    """Describe consumer-type groups (KIP-848): epochs, assignor, each member's assignment and target.
    A classic group or an unknown one is answered GROUP_ID_NOT_FOUND, as Kafka does."""

    api_key = ApiKey.CONSUMER_GROUP_DESCRIBE
    response_type = ConsumerGroupDescribeResponse
    versions = (0, 0)
    flexible_from = 0
    group_ids: tuple[str, ...] = wire("[]string", "0+", ())
    include_authorized_operations: bool = wire("bool", "0+", False)


__all__ = [
    "ConsumerGroupDescribeMember",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupDescribedGroup",
    "DescribedAssignment",
    "DescribedTopicPartitions",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroupAssignment",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupTopicPartitions",
]
