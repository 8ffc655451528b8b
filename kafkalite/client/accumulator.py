"""Batches, futures and the RecordAccumulator: where records wait between ``send()`` and the Sender.

As in Kafka's client, each partition has a deque of ``ProducerBatch``; ``send()`` appends to the last
batch while the record's exact encoded size fits under ``batch.size`` (Kafka's ``hasRoomFor``), then
opens a new one. A broker is *ready* once one of its partitions has a full batch, a batch that waited
``linger.ms`` (``retry.backoff.ms`` after a failed attempt), or a flush or close is under way; ``drain``
then takes the first batch of each of its partitions, up to ``max.request.size`` a request. Records are
kept as columns while the batch is open and encoded once (``build_batch``) when it is first drained.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import Any, NamedTuple

from kafkalite.errors import KafkaError
from kafkalite.protocol import TopicPartition
from kafkalite.records import (
    BATCH_HEADER_SIZE,
    build_batch,
    build_values_batch,
    record_size,
    record_size_upper_bound,
    set_producer_fields,
)

__all__ = [
    "CompressionRatioEstimator",
    "FutureRecordMetadata",
    "NotCompletedError",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordMetadata",
    "TopicFuture",
    "batch_size_upper_bound",
]

_F32 = struct.Struct("<f")


def _f32(x: float) -> float:
    """``x`` rounded to a Java float: Kafka keeps compression ratios in 32-bit floats."""
    return _F32.unpack(_F32.pack(x))[0]


# Kafka's MemoryRecordsBuilder and CompressionRatioEstimator constants.
COMPRESSION_RATE_ESTIMATION_FACTOR = _f32(1.05)
COMPRESSION_RATIO_IMPROVING_STEP = _f32(0.005)
COMPRESSION_RATIO_DETERIORATE_STEP = _f32(0.05)


class CompressionRatioEstimator:
    """How well each topic's batches compressed so far, per codec (Kafka's ``CompressionRatioEstimator``).

    A batch bound for a compressed topic is sized with the estimate of its creation time: a batch that
    compresses worse than expected raises it at once, a better one lowers it by a small step. Kafka keeps
    one table per JVM; here each producer has its own, so simulated producers do not share state.
    """

    def __init__(self) -> None:
        self._ratios: dict[tuple[str, int], float] = {}

    def estimation(self, topic: str, codec: int) -> float:
        return self._ratios.get((topic, codec), 1.0)

    def update(self, topic: str, codec: int, observed: float) -> float:
        current = self.estimation(topic, codec)
        observed = _f32(observed)
        if observed > current:
            current = max(_f32(current + COMPRESSION_RATIO_DETERIORATE_STEP), observed)
        elif observed < current:
            current = max(_f32(current - COMPRESSION_RATIO_IMPROVING_STEP), observed)
        self._ratios[(topic, codec)] = current
        return current

    def reset(self, topic: str, codec: int, ratio: float) -> None:
        """Set the estimate outright (Kafka's setEstimation, used after a split)."""
        self._ratios[(topic, codec)] = _f32(ratio)


def batch_size_upper_bound(key: bytes | None, value: bytes | None, headers: Any) -> int:
    """The most a batch holding only this record can take (Kafka's ``estimateBatchSizeUpperBound``):
    what ``send()`` checks against ``max.request.size`` and ``buffer.memory``."""
    return BATCH_HEADER_SIZE + record_size_upper_bound(key, value, headers)


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed; ``offset`` is -1 under acks=0 (the broker never says)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class NotCompletedError(RuntimeError):
    """``result()`` on a future whose record is still in flight: run the simulation further first."""


class FutureRecordMetadata:
    """One record's outcome, resolved through its batch (Kafka's ``FutureRecordMetadata``).

    The producer's fast path makes one per record as ``FutureRecordMetadata()`` and two slot stores: no
    ``__init__`` and no instance dict, the cheapest object Python builds. A future made anywhere else
    is a ``TopicFuture``, which can also carry a topic before it has a batch, and an error."""

    __slots__ = ("batch", "index")
    _error: KafkaError | None = None  # failed before reaching a batch (a TopicFuture only)
    _topic = ""

    @property
    def topic(self) -> str:
        batch = self.batch
        return self._topic or ("" if batch is None else batch.tp.topic)

    def _leaf(self) -> tuple[ProducerBatch | None, int]:
        batch, index = self.batch, self.index
        while batch is not None and batch.children:
            for child, lo in batch.children:
                if lo <= index < lo + child.record_count:
                    batch, index = child, index - lo
                    break
        return batch, index

    def done(self) -> bool:
        if self._error is not None:
            return True
        batch, _ = self._leaf()
        return batch is not None and batch.done

    def exception(self) -> KafkaError | None:
        """The error the send failed with, ``None`` if it succeeded (or is not done yet)."""
        if self._error is not None:
            return self._error
        batch, _ = self._leaf()
        return None if batch is None else batch.error

    def result(self) -> RecordMetadata:
        """The record's metadata; raises the send's ``KafkaError`` or ``NotCompletedError``."""
        if self._error is not None:
            raise self._error
        batch, index = self._leaf()
        if batch is None or not batch.done:
            raise NotCompletedError("the record is not acknowledged yet; run the network further")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(index)

    @property
    def partition(self) -> int:
        batch, _ = self._leaf()
        return -1 if batch is None else batch.tp.partition

    def __repr__(self) -> str:
        if not self.done():
            return "FutureRecordMetadata(pending)"
        err = self.exception()
        return f"FutureRecordMetadata({err.name})" if err else f"FutureRecordMetadata({self.result()})"


class TopicFuture(FutureRecordMetadata):
    """A future made off the fast path: named by topic while it waits for metadata or memory, and
    failed with ``_error`` when the send fails before reaching a batch."""

    __slots__ = ("_error", "_topic")

    def __init__(self, batch: ProducerBatch | None, index: int, topic: str) -> None:
        self.batch = batch
        self.index = index
        self._topic = topic
        self._error = None


Callback = Callable[[RecordMetadata | None, KafkaError | None], Any]


class ProducerBatch:
    """Records bound for one partition, sent and acknowledged together."""

    __slots__ = (
        "tp",
        "values",
        "keys",
        "headers",
        "timestamps",
        "seqs",
        "callbacks",
        "size",
        "records_bytes",
        "limit",
        "ratio",
        "created_ms",
        "last_attempt_ms",
        "attempts",
        "buffer",
        "full",
        "done",
        "error",
        "base_offset",
        "log_append_time",
        "children",
        "maybe_written",
        "in_flight",
        "acks",
        "final_state",
        "bytes_only",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "transactional",
        "pooled",
        "is_split",
        "hot",
    )

    def __init__(
        self, tp: TopicPartition, created_ms: int, acks: int, limit: int = 0, ratio: float = 0.0
    ) -> None:
        self.tp = tp
        # Records as columns: the fast path appends only a value; keys and headers lists exist (padded
        # with None) once a record has a key or headers, so the common batch encodes without tuples.
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None
        self.headers: list[Any] | None = None
        self.timestamps: list[int] = []
        self.seqs: list[int] = []  # the producer's send number of each record, for the history
        self.callbacks: list[tuple[int, Callback]] | None = None
        # Kafka's MemoryRecordsBuilder sizing: ``size`` is the estimated encoded size (header plus the
        # records' exact sizes, scaled by ``ratio`` * 1.05 when compressed, ``ratio`` 0 meaning not
        # compressed); ``limit`` is the write limit, max(batch.size, the first record's upper bound).
        self.size = BATCH_HEADER_SIZE
        self.records_bytes = 0
        self.limit = limit
        self.ratio = ratio
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.attempts = 0
        self.buffer: bytes | None = None
        self.full = False
        # The producer's fast-path entry appending to this batch, if any: it appends while the batch's
        # size is below its ``cap``, so closing the batch sets that to 0 (see close_for_appends).
        self.hot: Any = None
        self.done = False
        self.error: KafkaError | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.children: list[tuple[ProducerBatch, int]] | None = None
        self.maybe_written = False  # an attempt may have reached the log: a failure is then "unknown"
        self.in_flight = False
        self.acks = acks
        self.final_state = ""
        self.bytes_only = True  # every value is bytes (no None): the encoder may skip checking
        # An idempotent producer's identity and first sequence, set when the batch is first drained.
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.transactional = False
        self.pooled = 0  # bytes of buffer.memory this batch holds until it completes
        self.is_split = False  # made by split(): held no buffer.memory, and splits by halves next time

    @property
    def record_count(self) -> int:
        return len(self.values)

    def next_record_size(self, ts: int, key: bytes | None, value: bytes | None, headers: Any) -> int:
        """Exact size the next record would take here (its offset and timestamp deltas count)."""
        stamps = self.timestamps
        return record_size(len(stamps), ts - stamps[0] if stamps else 0, key, value, headers)

    def has_room(self, nbytes: int) -> bool:
        """Kafka's ``hasRoomFor``: one more record of ``nbytes`` fits under the write limit (a batch takes
        at least one record; compression of the new record is not counted on)."""
        if self.full:
            return False
        return not self.values or self.limit >= self.size + nbytes

    def count_bytes(self, nbytes: int) -> int:
        """Account for a record of ``nbytes`` just appended; returns how much the estimated size grew
        (all of it for a batch's first record, header included), as Kafka reports appended bytes."""
        before = self.size if len(self.values) > 1 else 0
        self.records_bytes += nbytes
        if self.ratio:
            est = _f32(_f32(self.records_bytes * self.ratio) * COMPRESSION_RATE_ESTIMATION_FACTOR)
            self.size = BATCH_HEADER_SIZE + int(est)
        else:
            self.size += nbytes
        if self.size >= self.limit:
            self.full = True  # Kafka's isFull: the write limit is reached
        return self.size - before

    @property
    def records(self) -> list[tuple]:
        """The records as ``(key, value, headers)`` tuples, in order."""
        n = len(self.values)
        keys = self.keys if self.keys is not None else repeat(None, n)
        headers = self.headers if self.headers is not None else repeat(None, n)
        return list(zip(keys, self.values, headers, strict=False))  # repeat() pads missing columns

    def append(self, key: bytes | None, value: bytes | None, headers: Any, ts: int, seq: int) -> int:
        """Add one record; returns its index in the batch."""
        values = self.values
        index = len(values)
        if key is not None:
            if self.keys is None:
                self.keys = [None] * index
            self.keys.append(key)
        elif self.keys is not None:
            self.keys.append(None)
        if headers is not None:
            if self.headers is None:
                self.headers = [None] * index
            self.headers.append(headers)
        elif self.headers is not None:
            self.headers.append(None)
        if value.__class__ is not bytes:
            self.bytes_only = False
        values.append(value)
        self.timestamps.append(ts)
        self.seqs.append(seq)
        return index

    def close_for_appends(self) -> None:
        """Kafka's closeForRecordAppends: no record joins this batch any more, the producer's fast
        path included."""
        self.full = True
        if self.hot is not None:
            self.hot.cap = 0

    def encode(self, compression: int) -> bytes:
        """The batch's v2 bytes, built once (the batch takes no more records after this)."""
        if self.buffer is None:
            self.close_for_appends()
            buf = None
            pid, epoch, seq = self.producer_id, self.producer_epoch, self.base_sequence
            if self.keys is None and self.headers is None and self.values:
                buf = build_values_batch(
                    self.values, self.timestamps, compression, bytes_only=self.bytes_only,
                    producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                )  # fmt: skip
            if buf is None:
                buf = build_batch(
                    self.records, timestamp=self.timestamps, compression=compression,
                    producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                )  # fmt: skip
            if self.transactional:
                buf = bytes(set_producer_fields(bytearray(buf), pid, epoch, seq, transactional=True))
            self.buffer = buf
        return self.buffer

    def set_producer_state(
        self, producer_id: int, epoch: int, base_sequence: int, transactional: bool = False
    ) -> None:
        """Give the batch its producer id, epoch and first sequence (again, after an epoch bump), and the
        transactional bit; an already built buffer is rewritten in place of rebuilding it."""
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, epoch, base_sequence
        self.transactional = transactional
        if self.buffer is not None:
            buf = bytearray(self.buffer)
            self.buffer = bytes(
                set_producer_fields(buf, producer_id, epoch, base_sequence, transactional=transactional)
            )

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + len(self.values) - 1) & 0x7FFFFFFF

    def metadata(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        return RecordMetadata(self.tp.topic, self.tp.partition, offset, ts)

    def split(self, now_ms: int, max_bytes: int) -> list[ProducerBatch]:
        """Re-batch the records (after MESSAGE_TOO_LARGE) into batches of at most ``max_bytes`` (each takes
        at least one record), as Kafka's ``ProducerBatch.split``: order, creation time and callbacks kept."""
        stamps = self.timestamps
        rows = self.records
        out: list[ProducerBatch] = []
        lows: list[int] = []
        child: ProducerBatch | None = None
        for i, (k, v, h) in enumerate(rows):
            if child is not None:
                nbytes = record_size(len(child.values), stamps[i] - child.timestamps[0], k, v, h)
                if not child.has_room(nbytes):
                    child = None
            if child is None:
                bound = BATCH_HEADER_SIZE + record_size_upper_bound(k, v, h)
                child = ProducerBatch(self.tp, self.created_ms, self.acks, max(max_bytes, bound))
                child.is_split = True
                child.maybe_written = self.maybe_written
                child.last_attempt_ms = now_ms
                out.append(child)
                lows.append(i)
                nbytes = record_size(0, 0, k, v, h)
            child.append(k, v, h, stamps[i], self.seqs[i])
            child.count_bytes(nbytes)
        for child, lo in zip(out, lows, strict=True):
            child.full = True
            if self.callbacks:
                hi = lo + child.record_count
                child.callbacks = [(i - lo, cb) for i, cb in self.callbacks if lo <= i < hi] or None
        self.children = list(zip(out, lows, strict=True))
        self.callbacks = None
        return out

    def max_record_size(self) -> int:
        """The largest record's upper bound in a batch of its own (Kafka's ``maxRecordSize``)."""
        return max(BATCH_HEADER_SIZE + record_size_upper_bound(k, v, h) for k, v, h in self.records)


class RecordAccumulator:
    """Per-partition deques of batches, and the ready/drain/expire logic of Kafka's accumulator."""

    def __init__(
        self,
        batch_size: int,
        linger_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        delivery_timeout_ms: int,
        acks: int,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.acks = acks
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.muted: set[TopicPartition] = set()
        self.flushing = False
        self.closing = False
        self._drain_index: dict[int, int] = {}
        self.ratios = CompressionRatioEstimator()

    # ------------------------------------------------------------------------------------ appending

    def new_batch(
        self, tp: TopicPartition, now_ms: int, first_record_bound: int = 0, compression: int = 0
    ) -> ProducerBatch:
        """Open a batch at the tail of ``tp``'s deque. Its write limit is ``batch.size``, or the upper bound
        of its first record when that is larger (such a record gets a batch of its own)."""
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = deque()
        elif dq:
            dq[-1].close_for_appends()
        ratio = self.ratios.estimation(tp.topic, compression) if compression else 0.0
        batch = ProducerBatch(tp, now_ms, self.acks, max(self.batch_size, first_record_bound), ratio)
        dq.append(batch)
        return batch

    def open_batch(self, tp: TopicPartition) -> ProducerBatch | None:
        """The partition's last batch if it still takes records."""
        dq = self.batches.get(tp)
        if dq:
            last = dq[-1]
            if not last.full:
                return last
        return None

    def has_unsent(self) -> bool:
        return any(self.batches.values())

    # --------------------------------------------------------------------------------- ready/drain

    def backoff_ms(self, attempts: int) -> int:
        """Kafka's exponential retry backoff (KIP-580), without jitter to stay deterministic."""
        if attempts <= 0:
            return 0
        return min(self.retry_backoff_ms * (1 << min(attempts - 1, 30)), self.retry_backoff_max_ms)

    def _ready_at(self, batch: ProducerBatch, queued: int) -> int:
        """The time the first batch of a partition may go, given how many batches are queued behind it."""
        if batch.attempts:
            return batch.last_attempt_ms + self.backoff_ms(batch.attempts)
        if batch.full or queued > 1 or self.flushing or self.closing:
            return batch.created_ms
        return batch.created_ms + self.linger_ms

    def ready(
        self, leader_of: Callable[[TopicPartition], int], now_ms: int
    ) -> tuple[set[int], int | None, set[str]]:
        """Brokers with a batch ready now, the next time another may become ready, topics with no leader."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_at: int | None = None
        for tp, dq in self.batches.items():
            if not dq or tp in self.muted:
                continue
            leader = leader_of(tp)
            if leader < 0:
                unknown.add(tp.topic)
                continue
            at = self._ready_at(dq[0], len(dq))
            if at <= now_ms:
                nodes.add(leader)
            elif next_at is None or at < next_at:
                next_at = at
        return nodes, next_at, unknown

    def node_ready(self, partitions: list[TopicPartition], now_ms: int) -> bool:
        """Whether one of ``partitions`` (those a broker leads) has a batch ready to go now."""
        for tp in partitions:
            dq = self.batches.get(tp)
            if dq and tp not in self.muted and self._ready_at(dq[0], len(dq)) <= now_ms:
                return True
        return False

    def drain(
        self,
        partitions_of: Callable[[int], list[TopicPartition]],
        node: int,
        max_size: int,
        compression: int,
        now_ms: int,
        gate: Callable[[ProducerBatch], bool] | None = None,
    ) -> list[ProducerBatch]:
        """Take the first batch of each partition led by ``node``, up to ``max_size`` bytes in all.

        As Kafka's ``drainBatchesForOneNode``: once a broker is ready (one of its partitions has a ready
        batch), batches still lingering on its other partitions ride along in the same request; only a
        batch backing off before a retry stays. The start position rotates per node (Kafka's drainIndex)
        so no partition starves. ``gate`` (an idempotent producer's) may hold a partition's first batch
        back, and gives it its sequence before it is encoded.
        """
        parts = partitions_of(node)
        if not parts:
            return []
        start = self._drain_index.get(node, 0) % len(parts)
        out: list[ProducerBatch] = []
        size = 0
        for i in range(len(parts)):
            tp = parts[(start + i) % len(parts)]
            dq = self.batches.get(tp)
            if not dq or tp in self.muted:
                continue
            first = dq[0]
            if first.attempts and self._ready_at(first, len(dq)) > now_ms:
                continue  # backing off before a retry
            if gate is not None and not gate(first):
                continue
            fresh = first.buffer is None
            nbytes = len(first.encode(compression))
            if fresh and compression and first.records_bytes:
                # Kafka's ProducerBatch.close: feed the observed ratio back for the next batches' sizing.
                self.ratios.update(tp.topic, compression, (nbytes - BATCH_HEADER_SIZE) / first.records_bytes)
            if out and size + nbytes > max_size:
                break  # the request is full; this partition goes first next time
            dq.popleft()
            first.attempts += 1
            first.last_attempt_ms = now_ms
            first.in_flight = True
            out.append(first)
            size += nbytes
            self._drain_index[node] = (start + i + 1) % len(parts)
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch to retry back at the head of its partition's deque; a batch with a sequence goes
        before the first queued batch with a later (or no) sequence, so retries leave in sequence order."""
        batch.in_flight = False
        batch.last_attempt_ms = now_ms
        dq = self.batches.get(batch.tp)
        if dq is None:
            dq = self.batches[batch.tp] = deque()
        if batch.base_sequence >= 0:
            for i, other in enumerate(dq):
                if other.base_sequence < 0 or other.base_sequence > batch.base_sequence:
                    dq.insert(i, batch)
                    return
            if dq and dq[-1].base_sequence >= 0:
                dq.append(batch)
                return
        dq.appendleft(batch)

    def requeue_split(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """Queue the halves of a split batch at the head, in order, ready at once."""
        dq = self.batches.get(parent.tp)
        if dq is None:
            dq = self.batches[parent.tp] = deque()
        for child in reversed(children):
            dq.appendleft(child)

    def expired(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``delivery.timeout.ms``."""
        out = []
        limit = self.delivery_timeout_ms
        for dq in self.batches.values():
            while dq and now_ms - dq[0].created_ms >= limit:
                batch = dq.popleft()
                batch.close_for_appends()  # out of the queue: nothing may append to it any more
                out.append(batch)
            # Later batches are younger except retried/split ones at the head; those were handled above.
        return out

    def next_expiry_ms(self) -> int | None:
        first = [dq[0].created_ms for dq in self.batches.values() if dq]
        return min(first) + self.delivery_timeout_ms if first else None

    def abort_all(self) -> list[ProducerBatch]:
        out = [b for dq in self.batches.values() for b in dq]
        for b in out:
            b.close_for_appends()  # out of the queue: nothing may append to it any more
        for dq in self.batches.values():
            dq.clear()
        return out
