"""Kafka's purgatory operations: ``DelayedProduce`` (acks=all waits for the ISR), ``DelayedFetch``
(long polling until ``min_bytes`` are available or ``max_wait_ms`` passes) and ``DelayedDeleteRecords``
(until every live replica has moved its log start offset).

Each operation is checked (``try_complete`` in the ReplicaManager) whenever something it waits for may have
changed -- an append, a high-watermark move, an ISR or leadership change -- and completes at most once,
either then or when its timer fires. The timer comes from the node's ``set_timer``; nothing here reads a
clock or sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalite.protocol import NO_ERROR, FetchRequest, RequestEnvelope, TopicPartition


@dataclass
class ProducePartitionStatus:
    """One partition of a waiting produce: the offset the HW must reach, and the answer so far."""

    tp: TopicPartition
    required_offset: int
    base_offset: int
    log_start_offset: int = -1
    error_code: int = NO_ERROR
    acks_pending: bool = True


@dataclass
class DelayedProduce:
    env: RequestEnvelope
    src: Any
    statuses: dict[TopicPartition, ProducePartitionStatus]
    done_codes: dict[TopicPartition, tuple] = field(default_factory=dict)
    """Partitions answered at once (errors): tp -> (error_code, base_offset, log_start_offset,
    error_message, record_errors)."""
    timer_id: int | None = None
    completed: bool = False


@dataclass
class DelayedFetch:
    env: RequestEnvelope
    src: Any
    request: FetchRequest
    timer_id: int | None = None
    completed: bool = False

    @property
    def is_follower(self) -> bool:
        return self.request.replica_id >= 0


@dataclass
class DelayedDeleteRecords:
    """A DeleteRecords waiting for the replicas: done per partition once its low watermark (the smallest
    log start offset of the leader and its live followers) reached the requested offset."""

    env: RequestEnvelope
    src: Any
    requested: dict[TopicPartition, int]  # partition -> new log start asked for (pending ones only)
    answers: dict[TopicPartition, tuple[int, int]]  # partition -> (low watermark, error code)
    timer_id: int | None = None
    completed: bool = False


__all__ = ["DelayedDeleteRecords", "DelayedFetch", "DelayedProduce", "ProducePartitionStatus"]
