"""The idempotent and transactional producer's bookkeeping (Kafka's client-side ``TransactionManager``):
producer id, epoch and per-partition sequences; the transaction's state and the requests that move it.

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

With a ``transactional.id`` it also runs the transaction (KIP-98): the state (UNINITIALIZED, READY,
IN_TRANSACTION, COMMITTING, ABORTING, FATAL_ERROR), the blocking call in progress (``op``: init, offsets,
end) and, one at a time, the request that call or a new partition needs next: FindCoordinator,
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn. The ``Sender`` sends them
and hands the answers back (``send_next``, ``handle_response``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkalite.client.accumulator import ProducerBatch
from kafkalite.errors import InvalidTxnStateError, KafkaError, error_for_code
from kafkalite.protocol import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CoordinatorType,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TopicPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

if TYPE_CHECKING:
    from kafkalite.client.sender import Sender

MAX_EPOCH = 0x7FFF
BATCHES_REMEMBERED = 5  # the leader's per-producer window (Kafka's NUM_BATCHES_TO_RETAIN)
MAX_SEQUENCE = 0x7FFFFFFF

# Produce error codes the sequence logic handles itself.
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59
# Coordinator answers: retried after retry.backoff.ms (the first three by finding the coordinator again),
# or fatal for this producer (a newer one with the same transactional id fenced it).
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
INVALID_PRODUCER_EPOCH_CODE, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS = 47, 49, 51
PRODUCER_FENCED = 90


class TransactionManager:
    """Producer id, epoch and per-partition sequence state of one idempotent producer."""

    def __init__(self, log: Callable[..., None], transactional_id: str | None = None) -> None:
        self.log = log
        # Transactions (KIP-98): the id, the client-side state and the partitions the coordinator knows.
        self.transactional_id = transactional_id
        # then READY, IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR
        self.txn_state = "UNINITIALIZED"
        self.abortable_error: Exception | None = None
        """Why the transaction can only be aborted now (ABORTABLE_ERROR)."""
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
        live = []
        for b in batches:  # loops, not comprehensions, here and below: these run for every batch
            if b.in_flight and not b.done:
                live.append(b)
        self.inflight[tp] = live
        return bool(live)

    def _window_full(self, tp: TopicPartition) -> bool:
        """At most five batches of a partition unanswered, across leaders and connections: the leader
        remembers only its last five per producer, so a retry must never fall further behind than that
        (otherwise a batch already written would look out of order, and be written again after a bump)."""
        current = self._current
        waiting = []
        for b in self.unacked.get(tp, ()):
            if not b.done and b.children is None and current(b):
                waiting.append(b)
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
        sent = self.inflight.get(tp)
        if sent is None:
            self.inflight[tp] = [first]
            return True
        if len(sent) >= 2 * BATCHES_REMEMBERED:
            # Only a retry asks _live to prune this list: answered batches leave here as new ones go,
            # or a long-lived producer would keep every batch it ever sent (records included).
            sent[:] = [b for b in sent if not b.done]
        sent.append(first)
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

    # ------------------------------------------------------------------------- transaction states

    def begin(self) -> None:
        if self.txn_state != "READY":
            raise InvalidTxnStateError(f"Cannot begin a transaction in state {self.txn_state}")
        self.txn_state = "IN_TRANSACTION"

    def start_end(self, commit: bool) -> None:
        """Enter COMMITTING or ABORTING; an abort forgets the partitions whose batches were dropped."""
        if self.txn_state == "ABORTABLE_ERROR" and commit:
            self.raise_abortable("commit")
        if self.txn_state not in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            raise InvalidTxnStateError(
                f"Cannot {'commit' if commit else 'abort'} a transaction in state {self.txn_state}: "
                "call begin_transaction() first"
            )
        self.txn_state = "COMMITTING" if commit else "ABORTING"
        if not commit:
            self.new_partitions.clear()  # their batches were dropped: nothing of them reaches the log

    def raise_abortable(self, what: str) -> None:
        """Kafka's abortable error: a part of the transaction failed, so it cannot commit; abort it."""
        err = self.abortable_error
        raise type(err)(f"Cannot {what} the transaction: it must be aborted, as an earlier request of it "
                        f"failed ({err})")  # fmt: skip

    def needs_end_txn(self) -> bool:
        """Whether the coordinator knows of the transaction (else it ends without an EndTxn, as in Kafka)."""
        return bool(self.txn_partitions or self.new_partitions or self.offsets_added)

    def ended(self) -> None:
        self.txn_state = "READY"
        self.abortable_error = None
        self.txn_partitions.clear()
        self.offsets_added = False

    # ---------------------------------------------------------------------- transactional requests

    def send_next(self, sender: Sender, now: int) -> None:
        """Send the next transactional request the state calls for (one at a time, as Kafka's
        TransactionManager queues them): FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn."""
        if self.init_pending or now < sender.init_backoff_until or self.txn_state == "FATAL_ERROR":
            return
        tid = self.transactional_id
        op = self.op
        wants = op is not None and not op["done"] or bool(self.new_partitions)
        if not wants:
            return
        if self.coordinator < 0:
            for node in sender.metadata.nodes():
                if sender.node_backoff.get(node, 0) <= now and sender.send_txn(
                    node, FindCoordinatorRequest(key=tid, key_type=CoordinatorType.TRANSACTION), now
                ):
                    return
            return
        if op is not None and op["kind"] == "offsets" and not op["done"]:
            self._send_offsets_step(sender, op, now)
            return
        if op is not None and op["kind"] == "init" and not op["done"]:
            timeout = sender.config["transaction.timeout.ms"]
            sender.send_txn(
                self.coordinator,
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout),
                now,
            )
            return
        if self.new_partitions:
            parts = tuple(sorted(self.new_partitions))
            req = AddPartitionsToTxnRequest(
                transactional_id=tid,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                partitions=parts,
            )
            sender.send_txn(self.coordinator, req, now)
            return
        if op is not None and op["kind"] == "end" and not op["done"] and not sender.has_work():
            req = EndTxnRequest(
                transactional_id=tid,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                committed=op["commit"],
            )
            sender.send_txn(self.coordinator, req, now)

    def _send_offsets_step(self, sender: Sender, op: dict, now: int) -> None:
        tid, pid, epoch = self.transactional_id, self.producer_id, self.epoch
        if op["phase"] == "add":
            req: Any = AddOffsetsToTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=op["group_id"]
            )
            sender.send_txn(self.coordinator, req, now)
        elif op["group_coordinator"] < 0:
            for node in sender.metadata.nodes():
                if sender.node_backoff.get(node, 0) <= now and sender.send_txn(
                    node, FindCoordinatorRequest(key=op["group_id"], key_type=CoordinatorType.GROUP), now
                ):
                    return
        else:
            req = TxnOffsetCommitRequest(
                transactional_id=tid, group_id=op["group_id"], producer_id=pid, producer_epoch=epoch,
                generation_id=op["generation_id"], member_id=op["member_id"],
                group_instance_id=op.get("group_instance_id"), partitions=op["partitions"],
            )  # fmt: skip
            sender.send_txn(op["group_coordinator"], req, now)

    def unreachable(self, node: int) -> None:
        """A transactional request to ``node`` could not be sent: a coordinator there is looked up again."""
        if self.coordinator == node:
            self.coordinator = -1
        if self.op is not None and self.op.get("group_coordinator") == node:
            self.op["group_coordinator"] = -1

    def disconnected(self) -> None:
        """The connection of the request in flight dropped: find the coordinators again (they may have moved)."""
        self.coordinator = -1
        if self.op is not None and "group_coordinator" in self.op:
            self.op["group_coordinator"] = -1

    def handle_response(self, resp: Any) -> bool:
        """Apply a coordinator's answer; returns True when the request is to be retried after a backoff."""
        self.init_pending = False
        code = getattr(resp, "error_code", 0)
        op = self.op
        group_call = op is not None and op["kind"] == "offsets" and op["phase"] == "commit"
        if isinstance(resp, AddPartitionsToTxnResponse | TxnOffsetCommitResponse):
            results = resp.results if isinstance(resp, AddPartitionsToTxnResponse) else resp.partitions
            code = max((r.error_code for r in results), default=0)
        if code in (
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
            CONCURRENT_TRANSACTIONS,
        ):
            if code != CONCURRENT_TRANSACTIONS and code != COORDINATOR_LOAD_IN_PROGRESS:
                if group_call:
                    op["group_coordinator"] = -1  # type: ignore[index]
                else:
                    self.coordinator = -1  # look for the coordinator again
            return True
        if code:
            exc_type = error_for_code(code) or KafkaError
            err = exc_type(f"transactional id {self.transactional_id}: {type(resp).__name__}")
            if code in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH_CODE, INVALID_PRODUCER_ID_MAPPING):
                self.txn_state = "FATAL_ERROR"
                self.op_error = err
            elif self.txn_state in ("IN_TRANSACTION", "COMMITTING") and isinstance(
                resp, AddPartitionsToTxnResponse | AddOffsetsToTxnResponse | TxnOffsetCommitResponse
            ):
                # A part of the transaction is missing: as Kafka's client, it can only be aborted now.
                self.txn_state = "ABORTABLE_ERROR"
                self.abortable_error = err
            if self.op is not None:
                self.op["error"], self.op["done"] = err, True
            return False
        if isinstance(resp, FindCoordinatorResponse):
            if group_call:
                op["group_coordinator"] = resp.node_id  # type: ignore[index]
            else:
                self.coordinator = resp.node_id
        elif isinstance(resp, AddOffsetsToTxnResponse) and op is not None:
            op["phase"] = "commit"
        elif isinstance(resp, TxnOffsetCommitResponse) and op is not None:
            op["done"] = True
        elif isinstance(resp, InitProducerIdResponse):
            self.set_producer_id(resp.producer_id, resp.producer_epoch)
            if self.op is not None:
                self.op["done"] = True
        elif isinstance(resp, AddPartitionsToTxnResponse):
            for r in resp.results:
                self.txn_partitions.add(r.tp)
                self.new_partitions.discard(r.tp)
        elif isinstance(resp, EndTxnResponse) and self.op is not None:
            self.op["done"] = True
        return False


def _after(a: int, b: int) -> bool:
    """Sequence ``a`` comes after ``b`` on the 2**31 ring (within half a ring)."""
    return a != b and ((a - b) & MAX_SEQUENCE) < (1 << 30)
