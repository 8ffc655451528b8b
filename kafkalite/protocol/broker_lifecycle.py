"""A KRaft broker's requests to the active controller (KIP-631): BrokerRegistration, BrokerHeartbeat,
AllocateProducerIds (KIP-730) and AssignReplicasToDirs (KIP-858: which log dir holds each replica).

Field names, version ranges and defaults are Kafka's (``BrokerRegistrationRequest.json`` and its
siblings); every version is flexible. The request classes keep ``versions = None``: kafkalite serves them
on the simulator only until a controller listener exists.
"""

from __future__ import annotations

import uuid

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, message
from kafkalite.protocol.codec.binding import wire

_ZERO_UUID = uuid.UUID(int=0)

# ---------------------------------------------------------------------------------- BrokerRegistration


@message
class Listener(Message):
    name: str = wire("string")
    host: str = wire("string")
    port: int = wire("uint16")
    security_protocol: int = wire("int16", "0+", 0)


@message
class Feature(Message):
    name: str = wire("string")
    min_supported_version: int = wire("int16")
    max_supported_version: int = wire("int16")


@message
class BrokerRegistrationResponse(Response):
    api_key = ApiKey.BROKER_REGISTRATION
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    broker_epoch: int = wire("int64", "0+", -1)
    """The offset of the broker's registration record: its epoch until it registers again."""


@message
class BrokerRegistrationRequest(Request):
    api_key = ApiKey.BROKER_REGISTRATION
    response_type = BrokerRegistrationResponse
    flexible_from = 0
    broker_id: int = wire("int32")
    cluster_id: str = wire("string", "0+", "")
    incarnation_id: uuid.UUID = wire("uuid", "0+", _ZERO_UUID)
    """New on every start of the broker process: a second registration of the same incarnation is a
    retry, one of another incarnation while the first is alive a duplicate broker id."""
    listeners: tuple[Listener, ...] = wire("[]struct", "0+", (), items=Listener)
    features: tuple[Feature, ...] = wire("[]struct", "0+", (), items=Feature)
    rack: str | None = wire("string", "0+", None, nullable="0+")
    is_migrating_zk_broker: bool = wire("bool", "1+", False)
    log_dirs: tuple[uuid.UUID, ...] = wire("[]uuid", "2+", ())
    previous_broker_epoch: int = wire("int64", "3+", -1)


# ------------------------------------------------------------------------------------- BrokerHeartbeat


@message
class BrokerHeartbeatResponse(Response):
    api_key = ApiKey.BROKER_HEARTBEAT
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    is_caught_up: bool = wire("bool", "0+", False)
    """The broker has replayed the metadata log up to the controller's registration of it."""
    is_fenced: bool = wire("bool", "0+", True)
    should_shut_down: bool = wire("bool", "0+", False)


@message
class BrokerHeartbeatRequest(Request):
    api_key = ApiKey.BROKER_HEARTBEAT
    response_type = BrokerHeartbeatResponse
    flexible_from = 0
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64", "0+", -1)
    current_metadata_offset: int = wire("int64", "0+", -1)
    """The highest metadata offset the broker has replayed."""
    want_fence: bool = wire("bool", "0+", False)
    want_shut_down: bool = wire("bool", "0+", False)
    offline_log_dirs: tuple[uuid.UUID, ...] = wire("[]uuid", "1+", (), tag=0)


# --------------------------------------------------------------------------------- AllocateProducerIds


@message
class AllocateProducerIdsResponse(Response):
    api_key = ApiKey.ALLOCATE_PRODUCER_IDS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    producer_id_start: int = wire("int64", "0+", -1)
    producer_id_len: int = wire("int32", "0+", 0)


@message
class AllocateProducerIdsRequest(Request):
    api_key = ApiKey.ALLOCATE_PRODUCER_IDS
    response_type = AllocateProducerIdsResponse
    flexible_from = 0
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64", "0+", -1)


# -------------------------------------------------------------------------------- AssignReplicasToDirs


@message
class AssignPartition(Message):
    partition_index: int = wire("int32")


@message
class AssignTopic(Message):
    topic_id: uuid.UUID = wire("uuid")
    partitions: tuple[AssignPartition, ...] = wire("[]struct", "0+", (), items=AssignPartition)


@message
class AssignDirectory(Message):
    id: uuid.UUID = wire("uuid")
    topics: tuple[AssignTopic, ...] = wire("[]struct", "0+", (), items=AssignTopic)


@message
class AssignPartitionResult(Message):
    partition_index: int = wire("int32")
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class AssignTopicResult(Message):
    topic_id: uuid.UUID = wire("uuid")
    partitions: tuple[AssignPartitionResult, ...] = wire("[]struct", "0+", (), items=AssignPartitionResult)


@message
class AssignDirectoryResult(Message):
    id: uuid.UUID = wire("uuid")
    topics: tuple[AssignTopicResult, ...] = wire("[]struct", "0+", (), items=AssignTopicResult)


@message
class AssignReplicasToDirsResponse(Response):
    api_key = ApiKey.ASSIGN_REPLICAS_TO_DIRS
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    directories: tuple[AssignDirectoryResult, ...] = wire("[]struct", "0+", (), items=AssignDirectoryResult)


@message
class AssignReplicasToDirsRequest(Request):
    """A broker tells the controller in which of its log dirs (``meta.properties`` directory.id) it
    placed each replica, so the controller knows which partitions a failed dir takes offline."""

    api_key = ApiKey.ASSIGN_REPLICAS_TO_DIRS
    response_type = AssignReplicasToDirsResponse
    flexible_from = 0
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64", "0+", -1)
    directories: tuple[AssignDirectory, ...] = wire("[]struct", "0+", (), items=AssignDirectory)


__all__ = [
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AssignDirectory",
    "AssignDirectoryResult",
    "AssignPartition",
    "AssignPartitionResult",
    "AssignReplicasToDirsRequest",
    "AssignReplicasToDirsResponse",
    "AssignTopic",
    "AssignTopicResult",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "Feature",
    "Listener",
]
