"""The producer's own record of its sends: each attempt and how it ended, as the client saw it.

A ``Producer`` with ``kafkalite.history.enabled`` appends one ``SendRecord`` per send: acknowledged (with
its offset and acks level), failed (with the error's name) or unknown (no answer came back, so the record
may be in the log). The history checker (``kafkalite.harness.checker``) judges a log against these.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

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


def history_rows(
    early: Iterable[SendRecord], batches: Iterable[Any], waiting: Iterable[list], producer: str, acks: int
) -> list[SendRecord]:
    """A producer's sends in send order: those that failed before reaching a batch (``early``), those in
    its ``ProducerBatch``es (a split batch is listed by its halves), and those still waiting for metadata
    or memory (``Producer._waiting`` entries: seq, topic, partition, key, value, ...)."""
    rows: list[SendRecord] = list(early)
    for batch in batches:
        if batch.children is not None:
            continue  # split: its halves are listed instead
        topic, partition = batch.tp
        batch_acks = batch.acks
        if batch.done and batch.error is None:
            base = batch.base_offset
            for i, (seq, value) in enumerate(zip(batch.seqs, batch.values, strict=True)):
                offset = base + i if base >= 0 else None
                rows.append(
                    SendRecord(value, topic, partition, ACKED, offset, batch_acks, None, producer, seq)
                )
            continue
        if batch.done:
            outcome = UNKNOWN if batch.maybe_written else FAILED
            error = batch.error.name
        else:
            outcome, error = UNKNOWN, batch.final_state or "pending"
        for seq, value in zip(batch.seqs, batch.values, strict=True):
            rows.append(SendRecord(value, topic, partition, outcome, None, batch_acks, error, producer, seq))
    for w in waiting:
        rows.append(SendRecord(w[4], w[1], -1 if w[2] is None else w[2], UNKNOWN, None, acks,
                               "pending", producer, w[0]))  # fmt: skip
    rows.sort(key=lambda r: r.seq)  # type: ignore[arg-type, return-value]
    return rows
