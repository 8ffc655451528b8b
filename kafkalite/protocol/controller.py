"""Controller to broker (LeaderAndIsr, StopReplica, UpdateMetadata), broker to controller
(ControlledShutdown), and the admin requests the controller executes (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments). Every controller request carries the controller's epoch so a broker can
refuse one from a deposed controller (STALE_CONTROLLER_EPOCH)."""

from __future__ import annotations

import uuid

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_LEADER,
    NO_NODE,
    UNKNOWN_EPOCH,
    ApiKey,
    Message,
    PartitionError,
    Request,
    Response,
    TopicPartition,
    message,
)
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition, wire_partitions
from kafkalite.protocol.metadata import NO_TOPIC_ID, BrokerEndpoint

# ---------------------------------------------------------------------------------------- LeaderAndIsr


@message
class LeaderAndIsrPartitionState(Message):
    tp: TopicPartition
    controller_epoch: int = -1
    """Epoch of the controller that last wrote this state (may be older than the request's)."""
    leader: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    """Version of the partition state: the state znode's zkVersion (Kafka's older name, ``zk_version``),
    which the leader must quote when it writes an ISR change."""
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    """The partition was just created: the broker may create its log without checking for a lost disk."""
    topic_id: uuid.UUID = NO_TOPIC_ID
    """The topic's id (LeaderAndIsr v5+): written to the replica's ``partition.metadata``; a log there
    with another id belongs to an older topic of the same name."""


@message
class LeaderAndIsrResponse(Response):
    api_key = ApiKey.LEADER_AND_ISR
    error_code: int = NO_ERROR
    partition_errors: tuple[PartitionError, ...] = ()


@message
class LeaderAndIsrRequest(Request):
    api_key = ApiKey.LEADER_AND_ISR
    response_type = LeaderAndIsrResponse
    controller_id: int = NO_NODE
    controller_epoch: int = -1
    broker_epoch: int = -1
    """The receiving broker's epoch as the controller knows it; a restarted broker ignores older ones."""
    partition_states: tuple[LeaderAndIsrPartitionState, ...] = ()
    live_leaders: tuple[BrokerEndpoint, ...] = ()
    """The leaders named in ``partition_states``, so a new follower knows where to fetch."""


# ----------------------------------------------------------------------------------------- StopReplica


@message
class StopReplicaPartitionState(Message):
    tp: TopicPartition
    leader_epoch: int = UNKNOWN_EPOCH
    """-2 when the topic is being deleted (Kafka's EpochDuringDelete)."""
    delete_partition: bool = False
    """Delete the log as well as stopping the replica (topic deletion, reassignment away)."""


@message
class StopReplicaResponse(Response):
    api_key = ApiKey.STOP_REPLICA
    error_code: int = NO_ERROR
    partition_errors: tuple[PartitionError, ...] = ()


@message
class StopReplicaRequest(Request):
    api_key = ApiKey.STOP_REPLICA
    response_type = StopReplicaResponse
    controller_id: int = NO_NODE
    controller_epoch: int = -1
    broker_epoch: int = -1
    partition_states: tuple[StopReplicaPartitionState, ...] = ()


# -------------------------------------------------------------------------------------- UpdateMetadata


@message
class UpdateMetadataPartitionState(Message):
    tp: TopicPartition
    controller_epoch: int = -1
    leader: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    """The state znode's zkVersion, as in LeaderAndIsr."""
    replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    topic_id: uuid.UUID = NO_TOPIC_ID
    """The topic's id (UpdateMetadata v7+), which the broker answers Metadata with."""


@message
class UpdateMetadataResponse(Response):
    api_key = ApiKey.UPDATE_METADATA
    error_code: int = NO_ERROR


@message
class UpdateMetadataRequest(Request):
    """The controller's view of the cluster, sent to every broker so each can answer Metadata requests."""

    api_key = ApiKey.UPDATE_METADATA
    response_type = UpdateMetadataResponse
    controller_id: int = NO_NODE
    controller_epoch: int = -1
    broker_epoch: int = -1
    partition_states: tuple[UpdateMetadataPartitionState, ...] = ()
    live_brokers: tuple[BrokerEndpoint, ...] = ()


# ---------------------------------------------------------------------------------- ControlledShutdown


@message
class ControlledShutdownResponse(Response):
    api_key = ApiKey.CONTROLLED_SHUTDOWN
    error_code: int = NO_ERROR
    remaining_partitions: tuple[TopicPartition, ...] = ()
    """Partitions the broker still leads; it retries until this is empty, then stops."""


@message
class ControlledShutdownRequest(Request):
    api_key = ApiKey.CONTROLLED_SHUTDOWN
    response_type = ControlledShutdownResponse
    broker_id: int = NO_NODE
    broker_epoch: int = -1


# --------------------------------------------------------------------------------------- ElectLeaders


@message
class ElectionResult(Message):
    tp: TopicPartition = wire_partition("partition_id")
    error_code: int = wire("int16", "0+", NO_ERROR)
    """ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ..."""
    error_message: str | None = wire("string", "0+", None, nullable="0+")


@message
class ElectLeadersResponse(Response):
    api_key = ApiKey.ELECT_LEADERS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "1+", NO_ERROR)
    results: tuple[ElectionResult, ...] = wire_by_topic(
        "replica_election_results", ElectionResult, topic="topic", partitions="partition_result"
    )


@message
class ElectLeadersRequest(Request):
    api_key = ApiKey.ELECT_LEADERS
    response_type = ElectLeadersResponse
    versions = (0, 2)
    flexible_from = 2
    election_type: int = wire("int8", "1+", 0)
    """0: preferred (move leadership back to the first replica); 1: unclean (allow an out-of-sync one)."""
    partitions: tuple[TopicPartition, ...] | None = wire_partitions(
        "topic_partitions", "0+", None, topic="topic", nullable="0+"
    )
    """None: every partition."""
    timeout_ms: int = wire("int32", "0+", 60_000)


# -------------------------------------------------------------------------- AlterPartitionReassignments


@message
class Reassignment(Message):
    tp: TopicPartition = wire_partition()
    replicas: tuple[int, ...] | None = wire("[]int32", "0+", None, nullable="0+")
    """The target replica list; None cancels a reassignment in progress."""


@message
class ReassignmentResult(Message):
    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")


@message
class AlterPartitionReassignmentsResponse(Response):
    api_key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    results: tuple[ReassignmentResult, ...] = wire_by_topic("responses", ReassignmentResult)


@message
class AlterPartitionReassignmentsRequest(Request):
    api_key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    response_type = AlterPartitionReassignmentsResponse
    versions = (0, 0)
    flexible_from = 0
    timeout_ms: int = wire("int32", "0+", 60_000)
    reassignments: tuple[Reassignment, ...] = wire_by_topic("topics", Reassignment)


# -------------------------------------------------------------------------- ListPartitionReassignments


@message
class OngoingReassignment(Message):
    tp: TopicPartition = wire_partition()
    replicas: tuple[int, ...] = wire("[]int32", "0+", ())
    """Every replica the partition has while it moves: the target ones and those still to leave."""
    adding_replicas: tuple[int, ...] = wire("[]int32", "0+", ())
    removing_replicas: tuple[int, ...] = wire("[]int32", "0+", ())


@message
class ListPartitionReassignmentsResponse(Response):
    api_key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    reassignments: tuple[OngoingReassignment, ...] = wire_by_topic("topics", OngoingReassignment)


@message
class ListPartitionReassignmentsRequest(Request):
    api_key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    response_type = ListPartitionReassignmentsResponse
    versions = (0, 0)
    flexible_from = 0
    timeout_ms: int = wire("int32", "0+", 60_000)
    partitions: tuple[TopicPartition, ...] | None = wire_partitions(
        "topics", "0+", None, partitions="partition_indexes", nullable="0+"
    )
    """None: every reassignment in progress; otherwise those of these partitions that are moving."""


# -------------------------------------------------------------------------------------- AlterPartition


@message
class AlterPartitionItem(Message):
    """One ISR change the leader asks for, quoting the state it last saw (KIP-497)."""

    tp: TopicPartition
    leader_epoch: int = UNKNOWN_EPOCH
    new_isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@message
class AlterPartitionResult(Message):
    tp: TopicPartition
    error_code: int = NO_ERROR
    leader: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    """The state as the controller wrote it: the leader adopts it (or learns why not)."""


@message
class AlterPartitionResponse(Response):
    api_key = ApiKey.ALTER_PARTITION
    error_code: int = NO_ERROR
    partitions: tuple[AlterPartitionResult, ...] = ()


@message
class AlterPartitionRequest(Request):
    """A leader asks the controller to record an ISR change; the leader applies it only once the
    controller has written it, so the controller's record is always the ISR in force."""

    api_key = ApiKey.ALTER_PARTITION
    response_type = AlterPartitionResponse
    broker_id: int = NO_NODE
    broker_epoch: int = -1
    partitions: tuple[AlterPartitionItem, ...] = ()
