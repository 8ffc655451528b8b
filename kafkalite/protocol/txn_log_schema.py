"""Records of ``__transaction_state``, in Kafka's schema.

Key (version 0): the transactional id. Value (version 0; version 1 is flexible and adds tagged fields
kafkalite leaves at their defaults): producer id int64, producer epoch int16, transaction timeout int32,
state int8, the partitions of the transaction (topic, partition ids), last update and start timestamps.
Each is prefixed by its int16 version, as Kafka's coordinator records are. A null value is a tombstone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from kafkalite.errors import CorruptRecordError
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.codec.schema import A, F, decode, encode
from kafkalite.protocol.codec.types import WireFormatError

_VERSION = struct.Struct(">h")
_KEY = (F("transactional_id", "string", "0+"),)
_VALUE = (
    F("producer_id", "int64", "0+"),
    F("previous_producer_id", "int64", "1+", tag=0, default=-1),
    F("next_producer_id", "int64", "1+", tag=1, default=-1),
    F("producer_epoch", "int16", "0+"),
    F("transaction_timeout_ms", "int32", "0+"),
    F("transaction_status", "int8", "0+"),
    A(
        "transaction_partitions",
        "0+",
        [F("topic", "string", "0+"), F("partition_ids", "[]int32", "0+")],
        nullable="0+",
    ),
    F("transaction_last_update_timestamp_ms", "int64", "0+"),
    F("transaction_start_timestamp_ms", "int64", "0+"),
)


class TxnState(IntEnum):
    """Kafka's transaction states, with the ids it stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1

    def copy(self, **changes) -> TransactionMetadata:
        fields = {**self.__dict__, "partitions": set(self.partitions), **changes}
        return TransactionMetadata(**fields)


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(0) + encode(_KEY, {"transactional_id": transactional_id}, 0, False)


def encode_value(m: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(m.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = {
        "producer_id": m.producer_id,
        "producer_epoch": m.producer_epoch,
        "transaction_timeout_ms": m.timeout_ms,
        "transaction_status": int(m.state),
        "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": m.update_ms,
        "transaction_start_timestamp_ms": m.start_ms,
    }
    return _VERSION.pack(0) + encode(_VALUE, body, 0, False)


def decode_record(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """``(transactional id, metadata or None for a tombstone)``."""
    try:
        (kv,) = _VERSION.unpack_from(key)
        if kv != 0:
            raise CorruptRecordError(f"unknown __transaction_state key version {kv}")
        tid = decode(_KEY, key[2:], 0, False)["transactional_id"]
        if value is None:
            return tid, None
        (vv,) = _VERSION.unpack_from(value)
        if vv not in (0, 1):
            raise CorruptRecordError(f"unknown __transaction_state value version {vv}")
        v = decode(_VALUE, value[2:], vv, vv >= 1)
    except (struct.error, WireFormatError) as e:
        raise CorruptRecordError(f"unreadable __transaction_state record: {e}") from None
    parts = {
        TopicPartition(p["topic"], i) for p in v["transaction_partitions"] or () for i in p["partition_ids"]
    }
    return tid, TransactionMetadata(
        tid,
        v["producer_id"],
        v["producer_epoch"],
        v["transaction_timeout_ms"],
        TxnState(v["transaction_status"]),
        parts,
        v["transaction_start_timestamp_ms"],
        v["transaction_last_update_timestamp_ms"],
    )
