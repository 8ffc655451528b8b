"""Kafka's purgatory: ``DelayedProduce`` (acks=all waits for the ISR), ``DelayedFetch`` (long polling until
``min_bytes`` are available or ``max_wait_ms`` passes) and ``DelayedDeleteRecords`` (until every live replica
has moved its log start offset), each kind watched by partition in a ``DelayedOperationPurgatory``.

An operation is checked (``try_complete``) whenever something it waits for may have changed -- an append, a
high-watermark move, an ISR or leadership change: the ReplicaManager then calls its purgatory's
``check_and_complete(tp)`` -- and completes at most once (``force_complete``), either then or when its timer
fires (``on_expiration``). Completing answers the request through the ReplicaManager. The timeout waits in
the broker's ``SystemTimer`` (timing_wheel), where completing cancels it; nothing here reads a clock or
sleeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kafkalite.broker.timing_wheel import SystemTimer, TimerTask
from kafkalite.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from kafkalite.protocol import (
    NO_ERROR,
    DeleteRecordsPartitionResponse,
    DeleteRecordsResponse,
    FetchPartitionResponse,
    FetchRequest,
    IsolationLevel,
    ProducePartitionResponse,
    ProduceResponse,
    RecordError,
    RequestEnvelope,
    TopicPartition,
)

if TYPE_CHECKING:
    from kafkalite.broker.fetch_session import FetchContext
    from kafkalite.broker.replica_manager import ReplicaManager


@dataclass(eq=False)
class DelayedOperation:
    """Kafka's ``DelayedOperation``: the request ``env`` from ``src``, answered once by ``on_complete``."""

    rm: ReplicaManager = field(repr=False)
    env: RequestEnvelope
    src: Any
    timer: TimerTask | None = field(default=None, kw_only=True, repr=False)
    completed: bool = field(default=False, kw_only=True)
    purgatory: DelayedOperationPurgatory | None = field(default=None, kw_only=True, repr=False)
    keys: tuple[TopicPartition, ...] = field(default=(), kw_only=True, repr=False)

    def try_complete(self) -> bool:
        """Complete now if what the operation waits for is there; True when it completed now."""
        raise NotImplementedError

    def try_complete_at(self, key: TopicPartition) -> bool:
        """As ``try_complete``, told that only ``key`` changed since the last try."""
        return self.try_complete()

    def on_complete(self) -> None:
        """Answer the request (runs once)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """The timer fired: answer with what there is."""
        self.force_complete()

    def force_complete(self) -> bool:
        """Stop watching, cancel the timer and answer; False if it was already completed."""
        if self.completed:
            return False
        self.completed = True
        if self.purgatory is not None:
            self.purgatory.unwatch(self)
        self.on_complete()
        return True


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    """Kafka's ``DelayedOperationPurgatory``: the operations of one kind waiting, by partition."""

    def __init__(self, timer: SystemTimer) -> None:
        self._timer = timer
        self.watchers: dict[TopicPartition, list[Op]] = {}

    def watch(self, op: Op, keys: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Watch ``op`` on ``keys`` until it completes or ``timeout_ms`` passes (``on_expiration``)."""
        op.purgatory = self
        op.timer = self._timer.add(timeout_ms, op.on_expiration)
        op.keys = tuple(keys)
        for key in op.keys:
            self.watchers.setdefault(key, []).append(op)

    def unwatch(self, op: Op) -> None:
        timer = op.timer
        if timer is not None:
            op.timer = None
            timer.cancel()
        for key in op.keys:
            ops = self.watchers.get(key)
            if ops and op in ops:
                ops.remove(op)
                if not ops:
                    del self.watchers[key]

    def watched(self, key: TopicPartition) -> list[Op]:
        return self.watchers.get(key, [])

    def check_and_complete(self, key: TopicPartition) -> None:
        """Something ``key``'s operations wait for may have changed: try each."""
        ops = self.watchers.get(key)
        if ops:  # usually none: the replication path calls this several times per batch
            for op in list(ops):  # a copy: completing an operation unwatches it
                op.try_complete_at(key)

    def complete_all(self, key: TopicPartition) -> None:
        """Answer every operation watching ``key`` now (this broker stopped leading it)."""
        ops = self.watchers.get(key)
        if ops:
            for op in list(ops):
                op.force_complete()

    def clear(self) -> None:
        self.watchers.clear()


# ================================================================================================ produce
@dataclass
class ProducePartitionStatus:
    """One partition of a waiting produce: the offset the HW must reach, and the answer so far."""

    tp: TopicPartition
    required_offset: int
    base_offset: int
    log_start_offset: int = -1
    error_code: int = NO_ERROR
    acks_pending: bool = True


@dataclass(eq=False)
class DelayedProduce(DelayedOperation):
    statuses: dict[TopicPartition, ProducePartitionStatus]
    done_codes: dict[TopicPartition, tuple] = field(default_factory=dict)
    """Partitions answered at once (errors): tp -> (error_code, base_offset, log_start_offset,
    error_message, record_errors)."""

    def try_complete(self) -> bool:
        """Kafka's DelayedProduce.tryComplete: each partition is done once the HW passed its batch (error if
        the ISR is then below min.insync.replicas) or once this broker stopped leading it."""
        rm = self.rm
        if len(self.statuses) == 1:
            # With acks=all every HW move lands here, and most waiting requests are still above the HW: a
            # single-partition request the leader cannot answer yet is skipped without the full check.
            (s,) = self.statuses.values()
            p = rm.partition_or_none(s.tp)
            if p is not None and p.is_leader and s.acks_pending and p.high_watermark < s.required_offset:
                return False
        for tp, s in self.statuses.items():
            if not s.acks_pending:
                continue
            p = rm.partition_or_none(tp)
            if p is None and rm.is_offline(tp):
                s.error_code, s.acks_pending = KafkaStorageError.code, False
            elif p is None or not p.is_leader:
                s.error_code, s.acks_pending = NotLeaderOrFollowerError.code, False
            else:
                done, code = p.check_enough_replicas_reach_offset(s.required_offset, rm._min_isr(tp.topic))
                if done:
                    s.error_code, s.acks_pending = code, False
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        if self.completed:
            return
        self.timer = None
        if self.try_complete():
            return
        for s in self.statuses.values():
            if s.acks_pending:
                s.error_code, s.acks_pending = RequestTimedOutError.code, False
                self.rm._event("produce_timeout", tp=str(s.tp), required_offset=s.required_offset)
        self.force_complete()

    def on_complete(self) -> None:
        self.rm._reply(self.src, self.env, self.response())

    def response(self) -> ProduceResponse:
        """The answer as of now: each partition's error, else where its batch went."""
        parts = []
        for pp in self.env.request.partitions:  # type: ignore[attr-defined]
            if pp.tp in self.done_codes:
                code, base, start, message, record_errors = self.done_codes[pp.tp]
                parts.append(
                    ProducePartitionResponse(
                        tp=pp.tp,
                        error_code=code,
                        base_offset=base,
                        log_start_offset=start,
                        record_errors=record_errors,
                        error_message=message,
                    )
                )
            elif pp.tp in self.statuses:
                s = self.statuses[pp.tp]
                ok = s.error_code == NO_ERROR
                parts.append(
                    ProducePartitionResponse(
                        tp=pp.tp,
                        error_code=s.error_code,
                        base_offset=s.base_offset if ok else -1,
                        log_start_offset=s.log_start_offset,
                    )
                )
        return ProduceResponse(partitions=tuple(parts))


def refusal_detail(e: KafkaError) -> tuple[str | None, tuple[RecordError, ...]]:
    """What a produce answer says besides the code (v8+ error_message and record_errors): for a batch
    the leader's validation refused, why, and which record when one is to blame. Kafka fills these for
    per-record errors; kafkalite says why for every refused batch."""
    if not isinstance(e, CorruptRecordError | InvalidRecordError | InvalidTimestampError):
        return None, ()
    index = getattr(e, "record_index", None)
    return e.message, () if index is None else (RecordError(batch_index=index, message=e.message),)


# ================================================================================================ fetch
@dataclass(eq=False)
class DelayedFetch(DelayedOperation):
    request: FetchRequest
    context: FetchContext
    """What to read (with a fetch session, all its partitions, not only those the request named) and how
    to trim the answer."""
    first: list[FetchPartitionResponse]
    """The answers read when the fetch arrived, in ``context.partitions`` order."""
    marks: list[tuple | None]
    """``ReplicaManager.fetch_marks`` of each partition then: an empty first answer whose partition still
    has the same marks is the answer at completion too, and is not read again."""

    _by_tp: dict[TopicPartition, Any] | None = field(default=None, init=False, repr=False)

    @property
    def is_follower(self) -> bool:
        return self.request.replica_id >= 0

    @property
    def _any_byte_will_do(self) -> bool:
        # A partition with data below its bound holds at least one whole batch, so with min_bytes=1
        # (the followers' and consumers' default) it is enough; read_committed may stop at the LSO.
        req = self.request
        return req.min_bytes <= 1 and (
            self.is_follower or req.isolation_level != IsolationLevel.READ_COMMITTED
        )

    def _look(self, fp: Any) -> tuple[bool, bool]:
        """(whether the fetch must be answered now: the partition is gone, no longer led here or under
        another epoch; whether it has something past the fetch offset)."""
        p = self.rm.partition_or_none(fp.tp)
        if p is None or not p.is_leader or p.check_current_leader_epoch(fp.current_leader_epoch) != NO_ERROR:
            return True, False
        end = p.log_end_offset if self.is_follower else p.high_watermark
        return False, end > fp.fetch_offset

    def try_complete(self) -> bool:
        """Kafka's DelayedFetch.tryComplete: done once ``min_bytes`` can be read, or at once when a partition
        is no longer led here (or under another epoch)."""
        if self.completed:
            return True
        ready = 0
        for fp in self.context.partitions:
            force, more = self._look(fp)
            if force:
                self.force_complete()
                return True
            ready += more  # any byte counts toward min_bytes=1; exact sizes are re-read on completion
        if ready and (self._any_byte_will_do or self._bytes_ready() >= self.request.min_bytes):
            self.force_complete()
            return True
        return False

    def try_complete_at(self, key: TopicPartition) -> bool:
        """``try_complete`` after a change at ``key`` alone. Every earlier try found no partition ready and
        none lost, and each change that could alter that (an append, a HW move, a leadership or epoch
        change) tries the operations watching its own partition; so, when one byte is enough, ``key`` is
        the only partition to look at. A follower's fetch session names every partition it follows here
        (the 50 of ``__consumer_offsets`` among them), and an append tries each parked fetch."""
        if self.completed:
            return True
        if not self._any_byte_will_do:
            return self.try_complete()
        if self._by_tp is None:
            self._by_tp = {fp.tp: fp for fp in self.context.partitions}
        fp = self._by_tp.get(key)
        if fp is None or len(self._by_tp) != len(self.context.partitions):
            return self.try_complete()  # not ours, or a partition named twice: the full check decides
        force, more = self._look(fp)
        if force or more:
            self.force_complete()
            return True
        return False

    def _bytes_ready(self) -> int:
        return sum(self.rm._read_partition(self.request, fp, copy=False)[1] for fp in self.context.partitions)

    def on_complete(self) -> None:
        rm = self.rm
        slices = self.env.zero_copy
        results = []
        for fp, first, marks in zip(self.context.partitions, self.first, self.marks, strict=True):
            if not first.records and marks is not None and _same_marks(marks, rm.fetch_marks(fp.tp)):
                results.append(first)  # most partitions of a session: nothing happened there meanwhile
            else:
                results.append(rm._read_partition(self.request, fp, slices=slices)[0])
        rm.answer_fetch(self.src, self.env, results, self.context)


def _same_marks(a: tuple, b: tuple | None) -> bool:
    # the replica and its log by identity (a recreated partition or a swapped log is another one)
    return b is not None and a[0] is b[0] and a[1] is b[1] and a[2:] == b[2:]


# ================================================================================================ DeleteRecords
@dataclass(eq=False)
class DelayedDeleteRecords(DelayedOperation):
    """A DeleteRecords waiting for the replicas: done per partition once its low watermark (the smallest
    log start offset of the leader and its live followers) reached the requested offset."""

    requested: dict[TopicPartition, int]  # partition -> new log start asked for (pending ones only)
    answers: dict[TopicPartition, tuple[int, int]]  # partition -> (low watermark, error code)

    def check(self) -> bool:
        """Move the partitions whose replicas all followed into the answers; True when none is left."""
        rm = self.rm
        for tp, target in list(self.requested.items()):
            p = rm.partition_or_none(tp)
            if p is None or not p.is_leader:
                self.answers[tp] = (-1, NotLeaderOrFollowerError.code)
            else:
                low = p.low_watermark(rm.metadata_cache.live_brokers)
                if low < target:
                    continue
                self.answers[tp] = (low, NO_ERROR)
            del self.requested[tp]
        return not self.requested

    def try_complete(self) -> bool:
        return self.check() and self.force_complete()

    def on_expiration(self) -> None:
        if not self.completed:
            self.check()
            self.force_complete()

    def on_complete(self) -> None:
        rm = self.rm
        for tp in self.requested:  # still waiting: timed out
            p = rm.partition_or_none(tp)
            low = p.low_watermark(rm.metadata_cache.live_brokers) if p is not None and p.is_leader else -1
            self.answers[tp] = (low, RequestTimedOutError.code)
        parts = tuple(
            DeleteRecordsPartitionResponse(
                tp=dp.tp, low_watermark=self.answers[dp.tp][0], error_code=self.answers[dp.tp][1]
            )
            for dp in self.env.request.partitions  # type: ignore[attr-defined]
        )
        rm._reply(self.src, self.env, DeleteRecordsResponse(partitions=parts))


__all__ = [
    "DelayedDeleteRecords",
    "DelayedFetch",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "DelayedProduce",
    "ProducePartitionStatus",
    "refusal_detail",
]
