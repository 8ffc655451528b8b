"""Cluster metadata and topic administration: Metadata, CreateTopics, DeleteTopics, DeleteRecords."""

from __future__ import annotations

import uuid

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
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition

NO_TOPIC_ID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id."""
_TOPIC_ID_NAMESPACE = uuid.UUID("6b61666b-616c-6974-652d-746f70696373")


def topic_id(name: str) -> uuid.UUID:
    """An id derived from the name: only a fallback where no broker's id is known (unit tests of the group
    protocol without a metadata cache, a broker that answered none). Brokers answer with the topic's real
    id (KIP-516), which the controller draws when it creates the topic."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, name)


#: Kafka's ``authorized_operations`` value when they were not asked for (``Integer.MIN_VALUE``).
OPERATIONS_NOT_REQUESTED = -(2**31)

# -------------------------------------------------------------------------------------------- Metadata


@message
class BrokerEndpoint(Message):
    """A broker as clients (and other brokers) reach it."""

    node_id: int = wire("int32")
    host: str = wire("string", "0+", "")
    port: int = wire("int32", "0+", -1)
    rack: str | None = wire("string", "1+", None, nullable="1+")
    listeners: tuple[str, ...] = ()
    """Every listener the broker registered, ``NAME://HOST:PORT``; host and port are the first's."""


@message
class PartitionMetadata(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    """LEADER_NOT_AVAILABLE while there is no leader; the rest of the entry is still filled in."""
    partition: int = wire("int32", name="partition_index")
    leader_id: int = wire("int32", "0+", NO_LEADER)
    leader_epoch: int = wire("int32", "7+", UNKNOWN_EPOCH)
    replicas: tuple[int, ...] = wire("[]int32", "0+", (), name="replica_nodes")
    """The assigned replicas, preferred leader first."""
    isr: tuple[int, ...] = wire("[]int32", "0+", (), name="isr_nodes")
    offline_replicas: tuple[int, ...] = wire("[]int32", "5+", ())


@message
class TopicMetadata(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    """Topic-level: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_ID, ..."""
    name: str | None = wire("string", "0+", None, nullable="12+")
    """None only for a topic asked for by an id no topic has (v12+)."""
    topic_id: uuid.UUID = wire("uuid", "10+", NO_TOPIC_ID)
    is_internal: bool = wire("bool", "1+", False)
    partitions: tuple[PartitionMetadata, ...] = wire("[]struct", "0+", (), items=PartitionMetadata)
    topic_authorized_operations: int = wire("int32", "8+", OPERATIONS_NOT_REQUESTED)
    """kafkalite reports no authorized operations: always Kafka's "not requested"."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("topic_authorized_operations", None)  # not kept (see the field)
        return kw


@message
class MetadataResponse(Response):
    api_key = ApiKey.METADATA
    throttle_time_ms: int = wire("int32", "3+", 0)
    brokers: tuple[BrokerEndpoint, ...] = wire("[]struct", "0+", (), items=BrokerEndpoint)
    """Live brokers only."""
    cluster_id: str | None = wire("string", "2+", None, nullable="2+")
    controller_id: int = wire("int32", "1+", NO_NODE)
    topics: tuple[TopicMetadata, ...] = wire("[]struct", "0+", (), items=TopicMetadata)
    cluster_authorized_operations: int = wire("int32", "8-10", OPERATIONS_NOT_REQUESTED)
    """kafkalite reports no authorized operations: always Kafka's "not requested"."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("cluster_authorized_operations", None)  # not kept (see the field)
        return kw


@message
class MetadataRequestTopic(Message):
    """One entry of Metadata's topic list on the wire: a name, or (v10+) a topic id with a null name.
    ``MetadataRequest`` keeps the names in ``topics`` and the ids in ``topic_ids``."""

    topic_id: uuid.UUID = wire("uuid", "10+", NO_TOPIC_ID)
    name: str | None = wire("string", "0+", None, nullable="10+")


@message
class MetadataRequest(Request):
    api_key = ApiKey.METADATA
    response_type = MetadataResponse
    versions = (0, 12)
    """v10 adds topic ids (answered from v12 on, as Kafka does); KIP-848 consumers look topics up by id."""
    flexible_from = 9
    topics: tuple[str, ...] | None = wire(
        "[]struct", "0+", None, nullable="1+", items=MetadataRequestTopic, unwrap="name"
    )
    """None asks for every topic; ``()`` for none (brokers and controller only)."""
    allow_auto_topic_creation: bool = wire("bool", "4+", True)
    include_cluster_authorized_operations: bool = wire("bool", "8-10", False)
    """Read and dropped: kafkalite reports no authorized operations."""
    include_topic_authorized_operations: bool = wire("bool", "8+", False)
    """Read and dropped, as ``include_cluster_authorized_operations``."""
    topic_ids: tuple[uuid.UUID, ...] = ()
    """Topics asked for by id (entries with a null name, v10+), besides those named in ``topics``."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        topics = kw.get("topics")
        every = topics is None or (version == 0 and not topics)  # v0 asks for every topic with an empty list
        if every:
            kw["topics"] = None
        else:
            kw["topics"] = tuple(t for t in topics if t is not None)
            kw["topic_ids"] = tuple(t["topic_id"] for t in body["topics"] if t.get("name") is None)
        kw.pop("include_cluster_authorized_operations", None)
        kw.pop("include_topic_authorized_operations", None)
        return kw

    def wire_out(self, body: dict, version: int) -> None:
        if version == 0 and self.topics is None:
            body["topics"] = []
        elif self.topic_ids and body.get("topics") is not None and version >= 10:
            body["topics"] = list(body["topics"]) + [{"topic_id": t, "name": None} for t in self.topic_ids]


# ---------------------------------------------------------------------------------------- CreateTopics


@message
class ReplicaAssignment(Message):
    partition: int = wire("int32", name="partition_index")
    broker_ids: tuple[int, ...] = wire("[]int32", "0+", ())


@message
class CreatableTopicConfig(Message):
    """One config override of CreateTopics on the wire; ``CreatableTopic.configs`` keeps (name, value) pairs."""

    name: str = wire("string")
    value: str | None = wire("string", "0+", None, nullable="0+")


@message
class CreatableTopic(Message):
    name: str = wire("string")
    num_partitions: int = wire("int32", "0+", -1)
    """-1 (and replication_factor -1): the broker's num.partitions / default.replication.factor. Must be -1
    when ``assignments`` is given."""
    replication_factor: int = wire("int16", "0+", -1)
    assignments: tuple[ReplicaAssignment, ...] = wire("[]struct", "0+", (), items=ReplicaAssignment)
    configs: tuple[tuple[str, str], ...] = wire(
        "[]struct", "0+", (), items=CreatableTopicConfig, unwrap=("name", "value")
    )
    """Topic config overrides as (name, value) pairs, e.g. ``(("cleanup.policy", "compact"),)``."""


@message
class CreatableTopicResult(Message):
    name: str = wire("string")
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "1+", None, nullable="0+")
    num_partitions: int = -1
    replication_factor: int = -1


@message
class CreateTopicsResponse(Response):
    api_key = ApiKey.CREATE_TOPICS
    throttle_time_ms: int = wire("int32", "2+", 0)
    topics: tuple[CreatableTopicResult, ...] = wire("[]struct", "0+", (), items=CreatableTopicResult)


@message
class CreateTopicsRequest(Request):
    api_key = ApiKey.CREATE_TOPICS
    response_type = CreateTopicsResponse
    versions = (0, 4)
    topics: tuple[CreatableTopic, ...] = wire("[]struct", "0+", (), items=CreatableTopic)
    timeout_ms: int = wire("int32", "0+", 60_000)
    validate_only: bool = wire("bool", "1+", False)


# ------------------------------------------------------------------------------------ CreatePartitions


@message
class CreatePartitionsAssignment(Message):
    """One new partition's replicas on the wire; ``CreatePartitionsTopic.assignments`` keeps the tuples."""

    broker_ids: tuple[int, ...] = wire("[]int32", "0+", ())


@message
class CreatePartitionsTopic(Message):
    name: str = wire("string")
    count: int = wire("int32")
    """The topic's new total number of partitions (more than it has)."""
    assignments: tuple[tuple[int, ...], ...] | None = wire(
        "[]struct", "0+", None, nullable="0+", items=CreatePartitionsAssignment, unwrap="broker_ids"
    )
    """Replicas of each new partition, in partition order; None: placed as Kafka places added partitions."""


@message
class CreatePartitionsTopicResult(Message):
    name: str = wire("string")
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")


@message
class CreatePartitionsResponse(Response):
    api_key = ApiKey.CREATE_PARTITIONS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[CreatePartitionsTopicResult, ...] = wire(
        "[]struct", "0+", (), items=CreatePartitionsTopicResult
    )


@message
class CreatePartitionsRequest(Request):
    api_key = ApiKey.CREATE_PARTITIONS
    response_type = CreatePartitionsResponse
    versions = (0, 3)
    flexible_from = 2
    topics: tuple[CreatePartitionsTopic, ...] = wire("[]struct", "0+", (), items=CreatePartitionsTopic)
    timeout_ms: int = wire("int32", "0+", 60_000)
    validate_only: bool = wire("bool", "0+", False)


# -------------------------------------------------------------------------------------- DescribeCluster


@message
class DescribeClusterBroker(Message):
    """DescribeCluster's broker entry on the wire: a ``BrokerEndpoint`` whose rack is there from v0 (Metadata
    added it in v1). ``DescribeClusterResponse.brokers`` holds ``BrokerEndpoint``s."""

    node_id: int = wire("int32")
    host: str = wire("string", "0+", "")
    port: int = wire("int32", "0+", -1)
    rack: str | None = wire("string", "0+", None, nullable="0+")


@message
class DescribeClusterResponse(Response):
    api_key = ApiKey.DESCRIBE_CLUSTER
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", "", nullable="0+")
    """Not set by kafkalite, which writes it empty (Kafka writes null); dropped when read."""
    endpoint_type: int = wire("int8", "1+", 1)
    """KIP-919's 1: brokers (2, controllers, is not served); dropped when read."""
    cluster_id: str = wire("string", "0+", "")
    controller_id: int = wire("int32", "0+", NO_NODE)
    brokers: tuple[BrokerEndpoint, ...] = wire(
        "[]struct", "0+", (), items=DescribeClusterBroker, renames={"node_id": "broker_id"}
    )
    """Written from each ``BrokerEndpoint``'s own fields (the entry class only gives the wire's shape)."""
    cluster_authorized_operations: int = wire("int32", "0+", OPERATIONS_NOT_REQUESTED)
    """kafkalite reports no authorized operations: always Kafka's "not requested"."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw["brokers"] = tuple(
            BrokerEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in kw.get("brokers", ())
        )
        for dropped in ("error_message", "endpoint_type", "cluster_authorized_operations"):
            kw.pop(dropped, None)
        return kw


@message
class DescribeClusterRequest(Request):
    """The live brokers and the controller, as this broker's metadata cache knows them."""

    api_key = ApiKey.DESCRIBE_CLUSTER
    response_type = DescribeClusterResponse
    versions = (0, 1)
    flexible_from = 0
    include_cluster_authorized_operations: bool = wire("bool", "0+", False)
    endpoint_type: int = wire("int8", "1+", 1)
    """KIP-919's 1: brokers; read and dropped (kafkalite always describes its brokers)."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("endpoint_type", None)
        return kw


# ---------------------------------------------------------------------------------------- DeleteTopics


@message
class DeletableTopicResult(Message):
    name: str = wire("string")
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "5+", None, nullable="5+")


@message
class DeleteTopicsResponse(Response):
    api_key = ApiKey.DELETE_TOPICS
    throttle_time_ms: int = wire("int32", "1+", 0)
    topics: tuple[DeletableTopicResult, ...] = wire(
        "[]struct", "0+", (), name="responses", items=DeletableTopicResult
    )


@message
class DeleteTopicsRequest(Request):
    api_key = ApiKey.DELETE_TOPICS
    response_type = DeleteTopicsResponse
    versions = (0, 5)
    flexible_from = 4
    topic_names: tuple[str, ...] = wire("[]string", "0+", ())
    timeout_ms: int = wire("int32", "0+", 30_000)


# --------------------------------------------------------------------------------------- DeleteRecords


@message
class DeleteRecordsPartition(Message):
    tp: TopicPartition = wire_partition()
    offset: int = wire("int64", "0+", -1)
    """The new log start offset; -1 means the high watermark (delete everything committed)."""


@message
class DeleteRecordsPartitionResponse(Message):
    tp: TopicPartition = wire_partition()
    low_watermark: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """The partition's log start offset after the deletion."""
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class DeleteRecordsResponse(Response):
    api_key = ApiKey.DELETE_RECORDS
    throttle_time_ms: int = wire("int32", "0+", 0)
    partitions: tuple[DeleteRecordsPartitionResponse, ...] = wire_by_topic(
        "topics", DeleteRecordsPartitionResponse
    )


@message
class DeleteRecordsRequest(Request):
    api_key = ApiKey.DELETE_RECORDS
    response_type = DeleteRecordsResponse
    versions = (0, 2)
    flexible_from = 2
    partitions: tuple[DeleteRecordsPartition, ...] = wire_by_topic("topics", DeleteRecordsPartition)
    timeout_ms: int = wire("int32", "0+", 30_000)
