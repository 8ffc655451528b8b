"""Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn (producer to coordinators), WriteTxnMarkers (transaction coordinator to the
leaders of the transaction's partitions)."""

from __future__ import annotations

import dataclasses

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    UNKNOWN_EPOCH,
    ApiKey,
    Message,
    PartitionError,
    Request,
    Response,
    TopicPartition,
    message,
)
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partitions
from kafkalite.protocol.group import OffsetCommitPartition

# -------------------------------------------------------------------------------------- InitProducerId


@message
class InitProducerIdResponse(Response):
    api_key = ApiKey.INIT_PRODUCER_ID
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)
    producer_id: int = wire("int64", "0+", NO_PRODUCER_ID)
    producer_epoch: int = wire("int16", "0+", NO_PRODUCER_EPOCH)


@message
class InitProducerIdRequest(Request):
    """Get a producer id (idempotence); with a transactional id, also bump its epoch, fencing older
    producers with that id, and abort or finish any transaction they left open."""

    api_key = ApiKey.INIT_PRODUCER_ID
    response_type = InitProducerIdResponse
    versions = (0, 2)
    flexible_from = 2
    transactional_id: str | None = wire("string", "0+", None, nullable="0+")
    transaction_timeout_ms: int = wire("int32", "0+", 60_000)
    """transaction.timeout.ms: the coordinator aborts a transaction left open longer than this."""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    """The current id and epoch when a producer re-initialises itself (KIP-360); -1 otherwise."""


# ---------------------------------------------------------------------------------- AddPartitionsToTxn


@message
class AddPartitionsToTxnResponse(Response):
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[PartitionError, ...] = wire_by_topic(
        "results",
        PartitionError,
        partitions="results_by_partition",
        renames={"error_code": "partition_error_code"},
    )


@message
class AddPartitionsToTxnRequest(Request):
    """Tell the coordinator which partitions the transaction will write, before the first write to each."""

    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    response_type = AddPartitionsToTxnResponse
    versions = (0, 3)
    flexible_from = 3
    transactional_id: str = wire("string", "0+", "")
    producer_id: int = wire("int64", "0+", NO_PRODUCER_ID)
    producer_epoch: int = wire("int16", "0+", NO_PRODUCER_EPOCH)
    partitions: tuple[TopicPartition, ...] = wire_partitions("topics")


# ------------------------------------------------------------------------------------ AddOffsetsToTxn


@message
class AddOffsetsToTxnResponse(Response):
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class AddOffsetsToTxnRequest(Request):
    """Add the group's ``__consumer_offsets`` partition to the transaction (before TxnOffsetCommit)."""

    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    response_type = AddOffsetsToTxnResponse
    versions = (0, 3)
    flexible_from = 3
    transactional_id: str = wire("string", "0+", "")
    producer_id: int = wire("int64", "0+", NO_PRODUCER_ID)
    producer_epoch: int = wire("int16", "0+", NO_PRODUCER_EPOCH)
    group_id: str = wire("string", "0+", "")


# ------------------------------------------------------------------------------------ TxnOffsetCommit


@message
class TxnOffsetCommitResponse(Response):
    api_key = ApiKey.TXN_OFFSET_COMMIT
    throttle_time_ms: int = wire("int32", "0+", 0)
    partitions: tuple[PartitionError, ...] = wire_by_topic("topics", PartitionError)


@message
class TxnOffsetCommitRequest(Request):
    """Offsets committed as part of a transaction: visible only if it commits (sent to the group
    coordinator)."""

    api_key = ApiKey.TXN_OFFSET_COMMIT
    response_type = TxnOffsetCommitResponse
    versions = (0, 3)
    flexible_from = 3
    transactional_id: str = wire("string", "0+", "")
    group_id: str = wire("string", "0+", "")
    producer_id: int = wire("int64", "0+", NO_PRODUCER_ID)
    producer_epoch: int = wire("int16", "0+", NO_PRODUCER_EPOCH)
    # v3 (KIP-447): the consumer's group metadata, checked by the group coordinator. Before it, a commit
    # carries none and is taken from an old client.
    generation_id: int = wire("int32", "3+", -1)
    member_id: str = wire("string", "3+", "")
    group_instance_id: str | None = wire("string", "3+", None, nullable="3+")

    # Not @message: its fast __init__ sets only a class's own slots, and this one inherits them. Kept inside
    # the request: it is no message of its own.
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False)
    class _Partition(OffsetCommitPartition):
        """An ``OffsetCommitPartition`` as TxnOffsetCommit carries it: its leader epoch came in v2 here (v6
        in OffsetCommit). Only the wire uses it; ``wire_in`` hands on plain ``OffsetCommitPartition``s."""

        committed_leader_epoch: int = wire("int32", "2+", UNKNOWN_EPOCH)

    partitions: tuple[OffsetCommitPartition, ...] = wire_by_topic("topics", _Partition)

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        if "partitions" not in kw:
            return kw
        kw["partitions"] = tuple(
            OffsetCommitPartition(
                tp=p.tp, committed_offset=p.committed_offset, committed_leader_epoch=p.committed_leader_epoch,
                committed_metadata=p.committed_metadata,
            )
            for p in kw["partitions"]
        )  # fmt: skip
        return kw


# -------------------------------------------------------------------------------------------- EndTxn


@message
class EndTxnResponse(Response):
    api_key = ApiKey.END_TXN
    throttle_time_ms: int = wire("int32", "0+", 0)
    error_code: int = wire("int16", "0+", NO_ERROR)


@message
class EndTxnRequest(Request):
    api_key = ApiKey.END_TXN
    response_type = EndTxnResponse
    versions = (0, 3)
    flexible_from = 3
    transactional_id: str = wire("string", "0+", "")
    producer_id: int = wire("int64", "0+", NO_PRODUCER_ID)
    producer_epoch: int = wire("int16", "0+", NO_PRODUCER_EPOCH)
    committed: bool = wire("bool", "0+", False)
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
