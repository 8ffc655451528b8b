"""Cluster metadata and topic administration: Metadata, CreateTopics, DeleteTopics, DeleteRecords."""

from __future__ import annotations

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_LEADER,
    NO_NODE,
    UNKNOWN_EPOCH,
    UNKNOWN_OFFSET,
    ApiKey,
    Message,
    Request,
    Response,
    TopicPartition,
    message,
)

# -------------------------------------------------------------------------------------------- Metadata


@message
class BrokerEndpoint(Message):
    """A broker as clients (and other brokers) reach it."""

    node_id: int
    host: str = ""
    port: int = -1
    rack: str | None = None
    listeners: tuple[str, ...] = ()
    """Every listener the broker registered, ``NAME://HOST:PORT``; host and port are the first's."""


@message
class PartitionMetadata(Message):
    partition: int
    error_code: int = NO_ERROR
    """LEADER_NOT_AVAILABLE while there is no leader; the rest of the entry is still filled in."""
    leader_id: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    replicas: tuple[int, ...] = ()
    """The assigned replicas, preferred leader first."""
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()


@message
class TopicMetadata(Message):
    name: str
    error_code: int = NO_ERROR
    """Topic-level: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED, ..."""
    is_internal: bool = False
    partitions: tuple[PartitionMetadata, ...] = ()


@message
class MetadataResponse(Response):
    api_key = ApiKey.METADATA
    brokers: tuple[BrokerEndpoint, ...] = ()
    """Live brokers only."""
    cluster_id: str | None = None
    controller_id: int = NO_NODE
    topics: tuple[TopicMetadata, ...] = ()


@message
class MetadataRequest(Request):
    api_key = ApiKey.METADATA
    response_type = MetadataResponse
    topics: tuple[str, ...] | None = None
    """None asks for every topic; ``()`` for none (brokers and controller only)."""
    allow_auto_topic_creation: bool = True


# ---------------------------------------------------------------------------------------- CreateTopics


@message
class ReplicaAssignment(Message):
    partition: int
    broker_ids: tuple[int, ...] = ()


@message
class CreatableTopic(Message):
    name: str
    num_partitions: int = -1
    """-1 (and replication_factor -1): the broker's num.partitions / default.replication.factor. Must be -1
    when ``assignments`` is given."""
    replication_factor: int = -1
    assignments: tuple[ReplicaAssignment, ...] = ()
    configs: tuple[tuple[str, str], ...] = ()
    """Topic config overrides as (name, value) pairs, e.g. ``(("cleanup.policy", "compact"),)``."""


@message
class CreatableTopicResult(Message):
    name: str
    error_code: int = NO_ERROR
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@message
class CreateTopicsResponse(Response):
    api_key = ApiKey.CREATE_TOPICS
    topics: tuple[CreatableTopicResult, ...] = ()


@message
class CreateTopicsRequest(Request):
    api_key = ApiKey.CREATE_TOPICS
    response_type = CreateTopicsResponse
    topics: tuple[CreatableTopic, ...] = ()
    timeout_ms: int = 60_000
    validate_only: bool = False


# ------------------------------------------------------------------------------------ CreatePartitions


@message
class CreatePartitionsTopic(Message):
    name: str
    count: int
    """The topic's new total number of partitions (more than it has)."""
    assignments: tuple[tuple[int, ...], ...] | None = None
    """Replicas of each new partition, in partition order; None: placed as Kafka places added partitions."""


@message
class CreatePartitionsTopicResult(Message):
    name: str
    error_code: int = NO_ERROR
    error_message: str | None = None


@message
class CreatePartitionsResponse(Response):
    api_key = ApiKey.CREATE_PARTITIONS
    results: tuple[CreatePartitionsTopicResult, ...] = ()


@message
class CreatePartitionsRequest(Request):
    api_key = ApiKey.CREATE_PARTITIONS
    response_type = CreatePartitionsResponse
    topics: tuple[CreatePartitionsTopic, ...] = ()
    timeout_ms: int = 60_000
    validate_only: bool = False


# -------------------------------------------------------------------------------------- DescribeCluster


@message
class DescribeClusterResponse(Response):
    api_key = ApiKey.DESCRIBE_CLUSTER
    error_code: int = NO_ERROR
    cluster_id: str = ""
    controller_id: int = NO_NODE
    brokers: tuple[BrokerEndpoint, ...] = ()


@message
class DescribeClusterRequest(Request):
    """The live brokers and the controller, as this broker's metadata cache knows them."""

    api_key = ApiKey.DESCRIBE_CLUSTER
    response_type = DescribeClusterResponse
    include_cluster_authorized_operations: bool = False


# ---------------------------------------------------------------------------------------- DeleteTopics


@message
class DeletableTopicResult(Message):
    name: str
    error_code: int = NO_ERROR
    error_message: str | None = None


@message
class DeleteTopicsResponse(Response):
    api_key = ApiKey.DELETE_TOPICS
    topics: tuple[DeletableTopicResult, ...] = ()


@message
class DeleteTopicsRequest(Request):
    api_key = ApiKey.DELETE_TOPICS
    response_type = DeleteTopicsResponse
    topic_names: tuple[str, ...] = ()
    timeout_ms: int = 30_000


# --------------------------------------------------------------------------------------- DeleteRecords


@message
class DeleteRecordsPartition(Message):
    tp: TopicPartition
    offset: int = -1
    """The new log start offset; -1 means the high watermark (delete everything committed)."""


@message
class DeleteRecordsPartitionResponse(Message):
    tp: TopicPartition
    low_watermark: int = UNKNOWN_OFFSET
    """The partition's log start offset after the deletion."""
    error_code: int = NO_ERROR


@message
class DeleteRecordsResponse(Response):
    api_key = ApiKey.DELETE_RECORDS
    partitions: tuple[DeleteRecordsPartitionResponse, ...] = ()


@message
class DeleteRecordsRequest(Request):
    api_key = ApiKey.DELETE_RECORDS
    response_type = DeleteRecordsResponse
    partitions: tuple[DeleteRecordsPartition, ...] = ()
    timeout_ms: int = 30_000
