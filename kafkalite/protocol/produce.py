"""Produce: a client (or a transaction coordinator's marker path, elsewhere) appends record batches."""

from __future__ import annotations

from kafkalite.protocol.api import (
    NO_ERROR,
    NO_TIMESTAMP,
    UNKNOWN_OFFSET,
    ApiKey,
    Message,
    Request,
    Response,
    TopicPartition,
    message,
)


@message
class ProducePartition(Message):
    tp: TopicPartition
    records: bytes = b""
    """Record batch v2 bytes exactly as the producer built them; the leader stamps offsets in place."""


@message
class RecordError(Message):
    """Which record of a rejected batch was at fault (Kafka's BatchIndexAndErrorMessage)."""

    batch_index: int
    message: str | None = None


@message
class ProducePartitionResponse(Message):
    tp: TopicPartition
    error_code: int = NO_ERROR
    base_offset: int = UNKNOWN_OFFSET
    """Offset given to the first record of the batch."""
    log_append_time_ms: int = NO_TIMESTAMP
    """The broker's timestamp when the topic uses LogAppendTime, else -1."""
    log_start_offset: int = UNKNOWN_OFFSET
    record_errors: tuple[RecordError, ...] = ()
    error_message: str | None = None


@message
class ProduceResponse(Response):
    api_key = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionResponse, ...] = ()


@message
class ProduceRequest(Request):
    api_key = ApiKey.PRODUCE
    response_type = ProduceResponse
    transactional_id: str | None = None
    acks: int = -1
    """0: no response at all; 1: the leader's log has it; -1 (all): every ISR member has it (the default)."""
    timeout_ms: int = 30_000
    """How long the leader may wait for the ISR under acks=-1 (request.timeout.ms)."""
    partitions: tuple[ProducePartition, ...] = ()
