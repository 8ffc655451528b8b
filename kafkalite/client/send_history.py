"""The producer's own record of its sends: each attempt and how it ended, as the client saw it.

A ``Producer`` with ``kafkalite.history.enabled`` appends one ``SendRecord`` per send: acknowledged (with
its offset and acks level), failed (with the error's name) or unknown (no answer came back, so the record
may be in the log). The history checker (``kafkalite.harness.checker``) judges a log against these.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from kafkalite.common.acks import Acks

# Send outcomes.
ACKED = "acked"
FAILED = "failed"
UNKNOWN = "unknown"
OUTCOMES: tuple[str, ...] = (ACKED, FAILED, UNKNOWN)

TopicPartition = tuple[str, int]


def _acks(level: int | str) -> int:
    try:
        return int(Acks.parse(level))  # a plain int: a history row prints and serialises as a number
    except ValueError:
        raise ValueError(f"acks must be 0, 1, -1 or 'all', not {level!r}") from None


@dataclass(frozen=True)
class SendRecord:
    """One producer send attempt and how it ended, as the client saw it.

    ``seq`` orders sends of one producer; when left ``None`` the position in the input list is used.
    """

    id: Hashable
    topic: str
    partition: int
    outcome: str
    offset: int | None = None
    acks: int = -1
    error: str | None = None
    producer: str = ""
    seq: int | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")
        object.__setattr__(self, "acks", _acks(self.acks))
        # acks=0 producers get offset -1 back from the client; it names no position in the log.
        if self.offset is not None and self.offset < 0:
            object.__setattr__(self, "offset", None)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @classmethod
    def acked(
        cls,
        id: Hashable,
        topic: str,
        partition: int,
        offset: int | None,
        acks: int | str = -1,
        producer: str = "",
        seq: int | None = None,
    ) -> SendRecord:
        return cls(id, topic, partition, ACKED, offset, _acks(acks), None, producer, seq)

    @classmethod
    def failed(
        cls,
        id: Hashable,
        topic: str,
        partition: int,
        error: str,
        acks: int | str = -1,
        producer: str = "",
        seq: int | None = None,
    ) -> SendRecord:
        return cls(id, topic, partition, FAILED, None, _acks(acks), error, producer, seq)

    @classmethod
    def unknown(
        cls,
        id: Hashable,
        topic: str,
        partition: int,
        acks: int | str = -1,
        producer: str = "",
        seq: int | None = None,
    ) -> SendRecord:
        return cls(id, topic, partition, UNKNOWN, None, _acks(acks), "timeout", producer, seq)
