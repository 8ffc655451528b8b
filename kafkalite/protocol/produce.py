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
from kafkalite.protocol.codec.binding import wire, wire_by_topic, wire_partition


@message
class ProducePartition(Message):
    tp: TopicPartition = wire_partition("index")
    records: bytes = wire("records", "0+", b"", nullable="0+")
    """Record batch v2 bytes exactly as the producer built them; the leader stamps offsets in place."""

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        if kw["records"] is None:  # a null records field is an empty produce
            kw["records"] = b""
        return kw


@message
class RecordError(Message):
    """Which record of a rejected batch was at fault (Kafka's BatchIndexAndErrorMessage)."""

    batch_index: int = wire("int32", "8+")
    message: str | None = wire("string", "8+", None, name="batch_index_error_message", nullable="8+")


@message
class ProducePartitionResponse(Message):
    tp: TopicPartition = wire_partition("index")
    error_code: int = wire("int16", "0+", NO_ERROR)
    base_offset: int = wire("int64", "0+", UNKNOWN_OFFSET)
    """Offset given to the first record of the batch."""
    log_append_time_ms: int = wire("int64", "2+", NO_TIMESTAMP)
    """The broker's timestamp when the topic uses LogAppendTime, else -1."""
    log_start_offset: int = wire("int64", "5+", UNKNOWN_OFFSET)
    record_errors: tuple[RecordError, ...] = wire("[]struct", "8+", (), items=RecordError)
    error_message: str | None = wire("string", "8+", None, nullable="8+")


@message
class ProduceResponse(Response):
    api_key = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionResponse, ...] = wire_by_topic(
        "responses", ProducePartitionResponse, partitions="partition_responses"
    )
    throttle_time_ms: int = wire("int32", "1+", 0)


@message
class ProduceRequest(Request):
    api_key = ApiKey.PRODUCE
    response_type = ProduceResponse
    versions = (3, 9)
    flexible_from = 9
    transactional_id: str | None = wire("string", "3+", None, nullable="3+")
    acks: int = wire("int16", "0+", -1)
    """0: no response at all; 1: the leader's log has it; -1 (all): every ISR member has it (the default)."""
    timeout_ms: int = wire("int32", "0+", 30_000)
    """How long the leader may wait for the ISR under acks=-1 (request.timeout.ms)."""
    partitions: tuple[ProducePartition, ...] = wire_by_topic(
        "topic_data", ProducePartition, partitions="partition_data"
    )
