"""Kafka's transaction coordinator: one per broker, serving the transactional ids whose
``__transaction_state`` partition the broker leads (partition = abs(hashCode(id)) % 50, as for groups).

A transaction's life, each step written to ``__transaction_state`` (acks=all) before it is answered:

- ``InitProducerId(id)``: a producer id for a new id, else the same id with the epoch bumped, which
  fences any older producer with that id. A transaction still open is aborted first (the caller is
  told CONCURRENT_TRANSACTIONS and retries). State Empty.
- ``AddPartitionsToTxn`` / ``AddOffsetsToTxn``: the partitions the transaction writes (the group's
  ``__consumer_offsets`` partition for offsets). State Ongoing; the timeout clock starts.
- ``EndTxn``: PrepareCommit or PrepareAbort is written and answered, then the coordinator sends
  WriteTxnMarkers to the leaders of every partition, and once all have the marker, CompleteCommit or
  CompleteAbort is written.

On becoming leader of a ``__transaction_state`` partition the coordinator loads it (last record per id
wins) and finishes what a previous coordinator left in PrepareCommit/PrepareAbort by sending the markers
again. Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` it aborts Ongoing
transactions older than their timeout, bumping the epoch so the producer that let it time out is fenced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.common.utils import coordinator_partition
from kafkalite.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
)
from kafkalite.protocol import (
    NO_ERROR,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CreatableTopic,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionError,
    TopicPartition,
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from kafkalite.protocol.txn_log_schema import (
    TransactionMetadata,
    TxnState,
    decode_record,
    encode_key,
    encode_value,
)
from kafkalite.records import build_batch

TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_EPOCH = 0x7FFF
MARKER_RETRY_MS = 100
Respond = Callable[[Any], None]


def transaction_state_topic(config: Any) -> CreatableTopic:
    """The CreateTopics entry for ``__transaction_state`` (compacted, its own min ISR)."""
    return CreatableTopic(
        name=TRANSACTION_STATE_TOPIC,
        num_partitions=config.transaction_state_log_num_partitions,
        replication_factor=config.transaction_state_log_replication_factor,
        configs=(
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", str(config.transaction_state_log_min_isr)),
            ("segment.bytes", str(config.transaction_state_log_segment_bytes)),
        ),
    )


class TransactionCoordinator:
    def __init__(
        self,
        broker_id: int,
        config: Any,
        replica_manager: Any,
        *,
        producer_ids: Callable[[], int],
        leader_of: Callable[[TopicPartition], int],
        clock: Any,
        set_timer: Callable[[int, Callable[[int], None]], int],
        log_event: Callable[..., None],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.rm = replica_manager
        self.num_partitions: int = config.transaction_state_log_num_partitions
        self._producer_ids = producer_ids
        self._leader_of = leader_of
        self.clock = clock
        self._set_timer = set_timer
        self._log = log_event
        self.txns: dict[str, TransactionMetadata] = {}
        self.pending: set[str] = set()  # ids with a state write or markers in flight
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self._generation: dict[int, int] = {}
        self.coordinator_epochs: dict[int, int] = {}
        self.stopped = False
        self._timer_started = False

    # ------------------------------------------------------------------------------- ownership
    def partition_for(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self.num_partitions)

    def ownership_error(self, transactional_id: str) -> int:
        p = self.partition_for(transactional_id)
        if p in self.loading:
            return CoordinatorLoadInProgressError.code
        if p not in self.owned:
            return NotCoordinatorError.code
        return NO_ERROR

    def on_leadership_change(self, elected: list[TopicPartition], resigned: list[TopicPartition]) -> None:
        for tp in resigned:
            if tp.topic == TRANSACTION_STATE_TOPIC:
                self._resign(tp.partition)
        for tp in elected:
            if tp.topic == TRANSACTION_STATE_TOPIC:
                self._elect(tp.partition)

    def _elect(self, p: int) -> None:
        if self.stopped or p in self.owned or p in self.loading:
            return
        self.loading.add(p)
        gen = self._generation.get(p, 0) + 1
        self._generation[p] = gen
        self._set_timer(0, lambda _now: self._load(p, gen))

    def _resign(self, p: int) -> None:
        self.owned.discard(p)
        self.loading.discard(p)
        self._generation[p] = self._generation.get(p, 0) + 1
        for tid in [t for t in self.txns if self.partition_for(t) == p]:
            del self.txns[tid]
            self.pending.discard(tid)

    def _load(self, p: int, gen: int) -> None:
        if self._generation.get(p) != gen or p not in self.loading:
            return
        part = self.rm.partition_or_none(TopicPartition(TRANSACTION_STATE_TOPIC, p))
        if part is None or not part.is_leader:
            self.loading.discard(p)
            return
        found: dict[str, TransactionMetadata | None] = {}
        for rec in part.log.iter_records(None, None):
            if rec.key is None:
                continue
            try:
                tid, meta = decode_record(rec.key, rec.value)
            except KafkaError as e:
                self._log("txn_record_skipped", offset=rec.offset, error=str(e))
                continue
            found[tid] = meta
        self.coordinator_epochs[p] = part.leader_epoch
        for tid, meta in found.items():
            if meta is not None:
                self.txns[tid] = meta
        self.loading.discard(p)
        self.owned.add(p)
        self._log("txn_partition_loaded", partition=p, transactions=sorted(t for t, m in found.items() if m))
        if not self._timer_started:
            self._timer_started = True
            self._set_timer(
                self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self._expire
            )
        # A coordinator that died between Prepare and Complete: finish its work (markers are idempotent).
        for tid, meta in sorted(found.items()):
            if meta is not None and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self.pending.add(tid)
                self._send_markers(meta)

    # ---------------------------------------------------------------------------------- writes
    def _write(self, meta: TransactionMetadata, done: Callable[[int], None]) -> None:
        """Append ``meta`` to the id's partition with acks=all; on success it becomes the current state."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_for(meta.transactional_id))
        meta.update_ms = self.clock.now_ms()
        batch = build_batch(
            [(encode_key(meta.transactional_id), encode_value(meta))], timestamp=meta.update_ms
        )

        def appended(resp: Any) -> None:
            if resp.error_code == NO_ERROR and tp.partition in self.owned:
                self.txns[meta.transactional_id] = meta
                self._log("txn_state", transactional_id=meta.transactional_id, state=meta.state.name,
                          producer_id=meta.producer_id, epoch=meta.producer_epoch)  # fmt: skip
                done(NO_ERROR)
            else:
                done(NotCoordinatorError.code)  # Kafka's translation of a failed state write

        self.rm.append_records(tp, batch, appended, acks=-1, timeout_ms=self.config.offsets_commit_timeout_ms)

    # -------------------------------------------------------------------------------- requests
    def _check(self, tid: str | None) -> int:
        if not tid:
            return InvalidTxnStateError.code if tid == "" else NO_ERROR
        if self.stopped:
            return CoordinatorNotAvailableError.code
        code = self.ownership_error(tid)
        if code:
            return code
        if tid in self.pending:
            return ConcurrentTransactionsError.code
        return NO_ERROR

    def handle_init_producer_id(self, req: InitProducerIdRequest, respond: Respond) -> None:
        tid = req.transactional_id
        assert tid is not None
        code = self._check(tid)
        if code:
            respond(InitProducerIdResponse(error_code=code))
            return
        if (
            req.transaction_timeout_ms > self.config.transaction_max_timeout_ms
            or req.transaction_timeout_ms <= 0
        ):
            respond(InitProducerIdResponse(error_code=InvalidTransactionTimeoutError.code))
            return
        meta = self.txns.get(tid)
        if meta is not None and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            respond(InitProducerIdResponse(error_code=ConcurrentTransactionsError.code))
            return
        if meta is not None and meta.state == TxnState.ONGOING:
            # The previous producer left a transaction open: abort it under a bumped epoch (fencing that
            # producer), and let this one retry once the abort is complete.
            self._abort(meta, bump=True)
            respond(InitProducerIdResponse(error_code=ConcurrentTransactionsError.code))
            return
        now = self.clock.now_ms()
        if meta is None or meta.producer_epoch >= MAX_EPOCH - 1:
            pid, epoch = self._producer_ids(), 0
        else:
            pid, epoch = meta.producer_id, meta.producer_epoch + 1
        new = TransactionMetadata(tid, pid, epoch, req.transaction_timeout_ms, TxnState.EMPTY, set(), -1, now)
        self.pending.add(tid)

        def done(code: int) -> None:
            self.pending.discard(tid)
            if code:
                respond(InitProducerIdResponse(error_code=code))
            else:
                respond(InitProducerIdResponse(producer_id=pid, producer_epoch=epoch))

        self._write(new, done)

    def _fenced(self, meta: TransactionMetadata | None, producer_id: int, epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return InvalidProducerIdMappingError.code
        if epoch != meta.producer_epoch:
            return ProducerFencedError.code
        return NO_ERROR

    def _add(
        self, tid: str, producer_id: int, epoch: int, tps: set[TopicPartition], reply: Callable[[int], None]
    ) -> None:
        code = self._check(tid)
        meta = self.txns.get(tid)
        if not code:
            code = self._fenced(meta, producer_id, epoch)
        if not code and meta is not None and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            code = ConcurrentTransactionsError.code
        if code:
            reply(code)
            return
        assert meta is not None
        if meta.state == TxnState.ONGOING and tps <= meta.partitions:
            reply(NO_ERROR)
            return
        start = meta.start_ms if meta.state == TxnState.ONGOING else self.clock.now_ms()
        new = meta.copy(state=TxnState.ONGOING, partitions=meta.partitions | tps, start_ms=start)
        self.pending.add(tid)

        def done(code: int) -> None:
            self.pending.discard(tid)
            reply(code)

        self._write(new, done)

    def handle_add_partitions(self, req: AddPartitionsToTxnRequest, respond: Respond) -> None:
        tps = set(req.partitions)

        def reply(code: int) -> None:
            respond(
                AddPartitionsToTxnResponse(
                    results=tuple(PartitionError(tp=tp, error_code=code) for tp in req.partitions)
                )
            )

        self._add(req.transactional_id, req.producer_id, req.producer_epoch, tps, reply)

    def handle_add_offsets(
        self, req: AddOffsetsToTxnRequest, respond: Respond, offsets_partition: TopicPartition
    ) -> None:
        self._add(
            req.transactional_id, req.producer_id, req.producer_epoch, {offsets_partition},
            lambda code: respond(AddOffsetsToTxnResponse(error_code=code)),
        )  # fmt: skip

    def handle_end_txn(self, req: EndTxnRequest, respond: Respond) -> None:
        tid = req.transactional_id
        code = self._check(tid)
        meta = self.txns.get(tid)
        if not code:
            code = self._fenced(meta, req.producer_id, req.producer_epoch)
        if code:
            respond(EndTxnResponse(error_code=code))
            return
        assert meta is not None
        done_state = TxnState.COMPLETE_COMMIT if req.committed else TxnState.COMPLETE_ABORT
        if meta.state == done_state:
            respond(EndTxnResponse())  # a retry of an EndTxn that already went through
            return
        if meta.state != TxnState.ONGOING:
            respond(EndTxnResponse(error_code=InvalidTxnStateError.code))
            return
        prepare = TxnState.PREPARE_COMMIT if req.committed else TxnState.PREPARE_ABORT
        new = meta.copy(state=prepare)
        self.pending.add(tid)

        def written(code: int) -> None:
            if code:
                self.pending.discard(tid)
                respond(EndTxnResponse(error_code=code))
                return
            respond(EndTxnResponse())  # Kafka answers once the decision is durable, before the markers
            self._send_markers(new)

        self._write(new, written)

    # ---------------------------------------------------------------------------------- markers
    def _abort(self, meta: TransactionMetadata, *, bump: bool) -> None:
        epoch = meta.producer_epoch + 1 if bump and meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        new = meta.copy(state=TxnState.PREPARE_ABORT, producer_epoch=epoch)
        tid = meta.transactional_id
        self.pending.add(tid)

        def written(code: int) -> None:
            if code:
                self.pending.discard(tid)
                return
            self._send_markers(new)

        self._write(new, written)

    def _send_markers(self, meta: TransactionMetadata) -> None:
        """WriteTxnMarkers to every partition's leader until each has the marker, then Complete."""
        committed = meta.state == TxnState.PREPARE_COMMIT
        left = set(meta.partitions)
        coordinator_epoch = self.coordinator_epochs.get(self.partition_for(meta.transactional_id), 0)
        tid = meta.transactional_id

        def complete() -> None:
            final = meta.copy(
                state=TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT, partitions=set()
            )

            def written(_code: int) -> None:
                self.pending.discard(tid)

            self._write(final, written)

        def round_(_now: int = 0) -> None:
            if self.stopped or self.txns.get(tid) is not meta:
                return  # the partition moved, or the state changed under us: the new owner finishes
            if not left:
                complete()
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(left):
                by_leader.setdefault(self._leader_of(tp), []).append(tp)
            waiting = [len(by_leader)]
            for leader, tps in by_leader.items():
                if leader < 0:
                    waiting[0] -= 1
                    continue
                marker = WritableTxnMarker(
                    producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, committed=committed,
                    partitions=tuple(tps), coordinator_epoch=coordinator_epoch,
                )  # fmt: skip
                self.rm._send_request(
                    leader, WriteTxnMarkersRequest(markers=(marker,)), _MarkerOwner(answered, tps), 5000
                )
            if waiting[0] == 0:
                self._set_timer(MARKER_RETRY_MS, round_)
            state["waiting"] = waiting

        state: dict[str, Any] = {}

        def answered(tps: list[TopicPartition], results: dict[TopicPartition, int] | None) -> None:
            for tp in tps:
                code = None if results is None else results.get(tp)
                # Written, or the partition is gone for good: nothing more to mark there.
                if code in (NO_ERROR, 3):
                    left.discard(tp)
            state["waiting"][0] -= 1
            if state["waiting"][0] == 0:
                if left:
                    self._set_timer(MARKER_RETRY_MS, round_)
                else:
                    complete()

        round_()

    # ---------------------------------------------------------------------------------- timeouts
    def _expire(self, now: int) -> None:
        if self.stopped:
            return
        self._set_timer(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self._expire)
        for tid, meta in sorted(self.txns.items()):
            if (
                meta.state == TxnState.ONGOING
                and tid not in self.pending
                and self.partition_for(tid) in self.owned
                and now - meta.start_ms > meta.timeout_ms
            ):
                self._log(
                    "txn_timed_out",
                    transactional_id=tid,
                    producer_id=meta.producer_id,
                    epoch=meta.producer_epoch,
                )
                self._abort(meta, bump=True)

    def shutdown(self) -> None:
        self.stopped = True
        self.owned.clear()
        self.loading.clear()


class _MarkerOwner:
    """Answer (or timeout) of one WriteTxnMarkers request."""

    def __init__(
        self,
        answered: Callable[[list[TopicPartition], dict[TopicPartition, int] | None], None],
        tps: list[TopicPartition],
    ) -> None:
        self.answered = answered
        self.tps = tps

    def on_response(self, _cid: int, _request: Any, response: Any) -> None:
        results = {p.tp: p.error_code for m in response.markers for p in m.partitions}
        self.answered(self.tps, results)

    def on_timeout(self, _cid: int, _request: Any) -> None:
        self.answered(self.tps, None)
