"""The idempotent producer's bookkeeping: producer id, epoch and per-partition sequences (Kafka's
client-side ``TransactionManager``, idempotence part).

Each batch gets, when it is first drained, the partition's next sequence; the leader accepts a batch only
if its sequence follows the last one it has, and answers a retry of one of the last five batches with the
offsets the first copy got. Ordering and no-duplicates then hold under retries as long as the producer
keeps three rules:

- a batch being retried goes alone: it leaves only when nothing else of its partition is in flight, and
  retries are queued in sequence order (``RecordAccumulator.reenqueue``);
- a batch refused with OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier batch of its partition is still
  pending is only out of order because of that batch: it is retried;
- when the sequence space of a partition has a hole the leader will never fill (a batch failed for good,
  or the leader lost the producer's state), the producer bumps its epoch itself (KIP-360): once nothing is
  in flight, epoch + 1, every partition restarts at sequence 0, and queued batches are sequenced again.
  Only batches that cannot be in the log get a new sequence, so the bump never makes a duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkalite.client.accumulator import ProducerBatch
from kafkalite.protocol import TopicPartition

MAX_EPOCH = 0x7FFF
BATCHES_REMEMBERED = 5  # the leader's per-producer window (Kafka's NUM_BATCHES_TO_RETAIN)
MAX_SEQUENCE = 0x7FFFFFFF

# Produce error codes the sequence logic handles itself.
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59


class TransactionManager:
    """Producer id, epoch and per-partition sequence state of one idempotent producer."""

    def __init__(self, log: Callable[..., None], transactional_id: str | None = None) -> None:
        self.log = log
        # Transactions (KIP-98): the id, the client-side state and the partitions the coordinator knows.
        self.transactional_id = transactional_id
        self.txn_state = "UNINITIALIZED"  # READY, IN_TRANSACTION, COMMITTING, ABORTING, FATAL_ERROR
        self.txn_partitions: set[TopicPartition] = set()
        self.new_partitions: set[TopicPartition] = set()
        self.coordinator = -1
        self.op: dict | None = None  # the blocking call in progress: init / commit / abort
        self.op_error: Exception | None = None
        self.offsets_added = False  # send_offsets_to_transaction ran in the current transaction
        self.producer_id = -1
        self.epoch = -1
        self.init_pending = False  # an InitProducerId is in flight
        self.next_seq: dict[TopicPartition, int] = {}
        self.last_acked: dict[TopicPartition, int] = {}
        self.inflight: dict[TopicPartition, list[ProducerBatch]] = {}
        # Batches given a sequence and not yet answered for good, in flight or waiting to be retried.
        self.unacked: dict[TopicPartition, list[ProducerBatch]] = {}
        self.unresolved: set[TopicPartition] = set()  # a sequenced batch failed: maybe a hole
        self.gapped: set[TopicPartition] = set()  # a hole the leader confirmed: bump before sending more
        self.bump_pending = False
        self.epoch_bumps = 0

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self._reset_sequences()
        self.log("producer_id", producer_id=producer_id, epoch=epoch)

    # ---------------------------------------------------------------------------------- draining

    def _live(self, tp: TopicPartition) -> bool:
        batches = self.inflight.get(tp)
        if not batches:
            return False
        live = [b for b in batches if b.in_flight and not b.done]
        self.inflight[tp] = live
        return bool(live)

    def _window_full(self, tp: TopicPartition) -> bool:
        """At most five batches of a partition unanswered, across leaders and connections: the leader
        remembers only its last five per producer, so a retry must never fall further behind than that
        (otherwise a batch already written would look out of order, and be written again after a bump)."""
        waiting = [
            b for b in self.unacked.get(tp, ()) if not b.done and b.children is None and self._current(b)
        ]
        self.unacked[tp] = waiting
        return len(waiting) >= BATCHES_REMEMBERED

    def _current(self, b: ProducerBatch) -> bool:
        return b.base_sequence >= 0 and b.producer_id == self.producer_id and b.producer_epoch == self.epoch

    def gate(self, first: ProducerBatch) -> bool:
        """Whether ``first`` (the head of its partition's queue) may be drained now; if so, it gets its
        sequence (``RecordAccumulator.drain`` calls this just before encoding the batch)."""
        tp = first.tp
        if self.producer_id < 0 or tp in self.gapped:
            return False
        if self.transactional_id is not None and tp not in self.txn_partitions:
            return False  # the coordinator must know the partition before its first batch goes
        if self._current(first):
            # A retry: alone, so that it and the batches after it reach the log in order.
            if self._live(tp):
                return False
        else:
            if self.bump_pending or self._window_full(tp):
                return False
            seq = self.next_seq.get(tp, 0)
            first.set_producer_state(self.producer_id, self.epoch, seq, self.transactional_id is not None)
            self.next_seq[tp] = (seq + first.record_count) & MAX_SEQUENCE
            self.unacked.setdefault(tp, []).append(first)
        self.inflight.setdefault(tp, []).append(first)
        return True

    # --------------------------------------------------------------------------------- responses

    def acked(self, b: ProducerBatch) -> None:
        if not self._current(b):
            return
        tp = b.tp
        last = b.last_sequence
        prev = self.last_acked.get(tp, -1)
        if prev < 0 or _after(last, prev):
            self.last_acked[tp] = last
        self.unresolved.discard(tp)  # a later batch got in: whatever failed before it was written

    def already_acked(self, b: ProducerBatch) -> bool:
        """A later batch of the same epoch was acknowledged: the leader takes sequences only in order, so
        ``b`` is in the log (its own answer was lost), though too long ago for the leader to remember it."""
        last = self.last_acked.get(b.tp, -1)
        return self._current(b) and last >= 0 and not _after(b.last_sequence, last)

    def failed(self, b: ProducerBatch) -> None:
        """A sequenced batch failed for good (expired, retries exhausted, fatal error)."""
        if self._current(b):
            self.unresolved.add(b.tp)

    def earlier_pending(self, b: ProducerBatch, queued: Iterable[ProducerBatch]) -> bool:
        """Whether a batch of ``b``'s partition with an earlier sequence is still queued or in flight."""
        seq = b.base_sequence
        for other in list(self.inflight.get(b.tp, ())) + list(queued):
            if other is b or other.done or not self._current(other):
                continue
            if _after(seq, other.base_sequence):
                return True
        return False

    def replace(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """``parent`` was split: its children take its sequence range (and its place among the unacked)."""
        seq = parent.base_sequence
        for child in children:
            child.set_producer_state(parent.producer_id, parent.producer_epoch, seq, parent.transactional)
            seq = (seq + child.record_count) & MAX_SEQUENCE
        waiting = self.unacked.setdefault(parent.tp, [])
        at = waiting.index(parent) if parent in waiting else len(waiting)
        waiting[at : at + 1] = children

    def hole(self, tp: TopicPartition) -> None:
        """The leader will never fill the sequence hole of ``tp``: bump the epoch before sending more."""
        self.gapped.add(tp)
        if not self.bump_pending:
            self.bump_pending = True
            self.log("epoch_bump_requested", tp=str(tp), epoch=self.epoch)

    def maybe_bump(self, queues: dict[TopicPartition, Iterable[ProducerBatch]]) -> bool:
        """Bump the epoch once no batch is in flight and every queued batch that holds an old sequence
        sits behind a hole (so it cannot be in the log). Returns whether it bumped."""
        if not self.bump_pending:
            return False
        if any(self._live(tp) for tp in list(self.inflight)):
            return False
        for tp, dq in queues.items():
            if tp not in self.gapped and any(self._current(b) for b in dq):
                return False  # a retry that may be in the log: let it finish under the old epoch
        if self.epoch >= MAX_EPOCH:
            self.producer_id = -1  # out of epochs: a new producer id (the caller sends InitProducerId)
        else:
            self.epoch += 1
        self.epoch_bumps += 1
        for dq in queues.values():
            for b in dq:
                b.base_sequence = -1  # sequenced again when drained
        self._reset_sequences()
        self.log("epoch_bumped", producer_id=self.producer_id, epoch=self.epoch)
        return True

    def _reset_sequences(self) -> None:
        self.next_seq.clear()
        self.last_acked.clear()
        self.inflight.clear()
        self.unacked.clear()
        self.unresolved.clear()
        self.gapped.clear()
        self.bump_pending = False


def _after(a: int, b: int) -> bool:
    """Sequence ``a`` comes after ``b`` on the 2**31 ring (within half a ring)."""
    return a != b and ((a - b) & MAX_SEQUENCE) < (1 << 30)
