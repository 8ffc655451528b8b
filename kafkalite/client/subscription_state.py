"""What a consumer is assigned and where it stands in each partition (Kafka's ``SubscriptionState``).

Each assigned partition has a ``TopicPartitionState``: its position (the offset of the next record
``poll`` returns), a pending offset reset (``seek_to_beginning``/``seek_to_end`` or ``auto.offset.reset``),
whether it is paused, the records fetched and not yet returned (decoded, or batches still to decode),
and an error for the next ``poll``. The subscription itself (topics, pattern, listener) is the group's
business and lives in the ``ConsumerCoordinator``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkalite.client.consumer_coordinator import OffsetAndMetadata
from kafkalite.protocol import TopicPartition
from kafkalite.records import Record

__all__ = ["IllegalStateError", "SubscriptionState", "TopicPartitionState"]


class IllegalStateError(RuntimeError):
    """A call that the consumer's state does not allow (Kafka's IllegalStateException)."""


class TopicPartitionState:
    """One assigned partition: its position, pending reset, buffered records and fetch state."""

    __slots__ = ("position", "reset_ts", "paused", "buffer", "pending", "buffer_end", "hw", "log_start",
                 "generation", "backoff_until", "reset_inflight", "error", "committed_fetch")  # fmt: skip

    def __init__(self) -> None:
        self.position: int | None = None
        self.reset_ts: int | None = None  # EARLIEST/LATEST_TIMESTAMP when a reset was asked for
        self.paused = False
        self.buffer: list[Record] = []  # fetched records at or after the position, in offset order
        # Fetched batches after the buffer, not decoded yet (the fetcher's ``PendingBatches``).
        self.pending: Any = None
        self.buffer_end = 0  # the position once the buffer is drained (past trailing control batches)
        self.hw: int | None = None
        self.log_start: int | None = None
        self.generation = 0  # bumped by every seek/reset: answers to older fetches are dropped
        self.backoff_until = 0
        self.reset_inflight = False
        self.error: Exception | None = None  # raised by the next poll
        self.committed_fetch = False  # the group's committed offset is wanted before any reset

    def set_position(self, offset: int | None, reset_ts: int | None = None) -> None:
        """Seek (``offset``) or ask for a reset (``None``, to ``reset_ts``): what was fetched is dropped."""
        self.position = offset
        self.reset_ts = reset_ts
        self.reset_inflight = False
        self.buffer = []
        self.pending = None
        self.generation += 1
        self.error = None
        self.committed_fetch = False


class SubscriptionState:
    """The assigned partitions, in the order ``poll`` visits them."""

    def __init__(self) -> None:
        self.assigned: dict[TopicPartition, TopicPartitionState] = {}

    def assign(self, partitions: Iterable[TopicPartition], from_group: bool) -> None:
        """Replace the assignment, keeping the state of partitions kept; with a group (``from_group``),
        new partitions wait for the committed offset."""
        old = self.assigned
        self.assigned = {}
        for tp in partitions:
            st = old.get(tp)
            if st is None:
                st = TopicPartitionState()
                st.committed_fetch = from_group
            self.assigned[tp] = st

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        st = self.assigned.get(TopicPartition(*tp))
        if st is None:
            raise IllegalStateError(f"No current assignment for partition {TopicPartition(*tp)}")
        return st

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self.assigned.items() if st.paused}

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The position of every assigned partition that has one: what auto-commit commits."""
        return {
            tp: OffsetAndMetadata(st.position) for tp, st in self.assigned.items() if st.position is not None
        }

    def has_ready(self) -> bool:
        """Something for ``poll`` to return or raise."""
        return any(
            st.error is not None or ((st.buffer or st.pending is not None) and not st.paused)
            for st in self.assigned.values()
        )
