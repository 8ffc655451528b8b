"""Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn (producer to coordinators), WriteTxnMarkers (transaction coordinator to the
leaders of the transaction's partitions)."""

from __future__ import annotations

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ApiKey,
    Message,
    PartitionError,
    Request,
    Response,
    TopicPartition,
    message,
)
from kafkalite.protocol.group import OffsetCommitPartition

# -------------------------------------------------------------------------------------- InitProducerId


@message
class InitProducerIdResponse(Response):
    api_key = ApiKey.INIT_PRODUCER_ID
    error_code: int = NO_ERROR
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@message
class InitProducerIdRequest(Request):
    """Get a producer id (idempotence); with a transactional id, also bump its epoch, fencing older
    producers with that id, and abort or finish any transaction they left open."""

    api_key = ApiKey.INIT_PRODUCER_ID
    response_type = InitProducerIdResponse
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    """transaction.timeout.ms: the coordinator aborts a transaction left open longer than this."""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    """The current id and epoch when a producer re-initialises itself (KIP-360); -1 otherwise."""


# ---------------------------------------------------------------------------------- AddPartitionsToTxn


@message
class AddPartitionsToTxnResponse(Response):
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    results: tuple[PartitionError, ...] = ()


@message
class AddPartitionsToTxnRequest(Request):
    """Tell the coordinator which partitions the transaction will write, before the first write to each."""

    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    response_type = AddPartitionsToTxnResponse
    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


# ------------------------------------------------------------------------------------ AddOffsetsToTxn


@message
class AddOffsetsToTxnResponse(Response):
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    error_code: int = NO_ERROR


@message
class AddOffsetsToTxnRequest(Request):
    """Add the group's ``__consumer_offsets`` partition to the transaction (before TxnOffsetCommit)."""

    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    response_type = AddOffsetsToTxnResponse
    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    group_id: str = ""


# ------------------------------------------------------------------------------------ TxnOffsetCommit


@message
class TxnOffsetCommitResponse(Response):
    api_key = ApiKey.TXN_OFFSET_COMMIT
    partitions: tuple[PartitionError, ...] = ()


@message
class TxnOffsetCommitRequest(Request):
    """Offsets committed as part of a transaction: visible only if it commits (sent to the group
    coordinator)."""

    api_key = ApiKey.TXN_OFFSET_COMMIT
    response_type = TxnOffsetCommitResponse
    transactional_id: str = ""
    group_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    partitions: tuple[OffsetCommitPartition, ...] = ()


# -------------------------------------------------------------------------------------------- EndTxn


@message
class EndTxnResponse(Response):
    api_key = ApiKey.END_TXN
    error_code: int = NO_ERROR


@message
class EndTxnRequest(Request):
    api_key = ApiKey.END_TXN
    response_type = EndTxnResponse
    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    committed: bool = False
    """True to commit, False to abort."""


# ------------------------------------------------------------------------------------ WriteTxnMarkers


@message
class WritableTxnMarker(Message):
    """Write a COMMIT or ABORT control record for one producer into each of ``partitions``."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    committed: bool = False
    partitions: tuple[TopicPartition, ...] = ()
    coordinator_epoch: int = -1
    """Epoch of the coordinator's ``__transaction_state`` partition; lets a leader drop markers from a
    coordinator that has since moved (TRANSACTION_COORDINATOR_FENCED)."""


@message
class TxnMarkerResult(Message):
    producer_id: int
    partitions: tuple[PartitionError, ...] = ()


@message
class WriteTxnMarkersResponse(Response):
    api_key = ApiKey.WRITE_TXN_MARKERS
    markers: tuple[TxnMarkerResult, ...] = ()


@message
class WriteTxnMarkersRequest(Request):
    api_key = ApiKey.WRITE_TXN_MARKERS
    response_type = WriteTxnMarkersResponse
    markers: tuple[WritableTxnMarker, ...] = ()
