"""Kafka's error codes as typed exceptions.

Each exception carries the numeric code and name Kafka uses on the wire, so a broker can turn any of
them into a response field unchanged and a reader of the book sees the same names Kafka's logs print.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base class: ``code`` and ``name`` are Kafka's (see Kafka's Errors enum)."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(f"{self.name}: {message}" if message else self.name)
        self.message = message


class OffsetOutOfRangeError(KafkaError):
    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(KafkaError):
    """A batch failed validation: bad CRC, bad sizes, unknown magic, truncated bytes."""

    code, name, retriable = 2, "CORRUPT_MESSAGE", True


class UnknownTopicOrPartitionError(KafkaError):
    code, name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


class MessageTooLargeError(KafkaError):
    code, name = 10, "MESSAGE_TOO_LARGE"


class RecordListTooLargeError(KafkaError):
    code, name = 18, "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(KafkaError):
    code, name = 32, "INVALID_TIMESTAMP"


class InvalidPartitionsError(KafkaError):
    """A partition count below 1."""

    code, name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaError):
    """A replication factor below 1, or above the number of brokers available."""

    code, name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidConfigError(KafkaError):
    code, name = 40, "INVALID_CONFIG"


class KafkaStorageError(KafkaError):
    code, name, retriable = 56, "KAFKA_STORAGE_ERROR", True


class InvalidRecordError(KafkaError):
    code, name = 87, "INVALID_RECORD"


_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}


def error_for_code(code: int) -> type[KafkaError] | None:
    """The exception class for a Kafka error code, ``None`` for 0 (no error)."""
    if code == 0:
        return None
    return _BY_CODE.get(code, KafkaError)
