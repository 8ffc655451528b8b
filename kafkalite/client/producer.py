"""The producer: Kafka's KafkaProducer + Sender as one SimNetwork node.

``send()`` picks a partition (explicit partition, else the partitioner: a key's murmur2 hash or the
built-in sticky partition), appends the record to the partition's open batch and returns a future. The
sender part runs when a batch fills, when a linger, backoff or timeout timer fires, and when a response
arrives: it refreshes metadata when needed, expires batches older than ``delivery.timeout.ms``, and sends
each broker that leads a ready partition one ``ProduceRequest`` with one batch per partition, never more
than ``max.in.flight.requests.per.connection`` requests outstanding per broker.

Errors: a retriable error puts the batch back at the head of its partition (after ``retry.backoff.ms``,
growing up to ``retry.backoff.max.ms``) and, for stale-metadata errors, asks for new metadata. A missing
response fails the connection after ``request.timeout.ms``: every request in flight to that broker is
retried, although the broker may have written it; without idempotence that is how duplicates arise.
``MESSAGE_TOO_LARGE`` re-batches a multi-record batch by ``batch.size`` (a batch split before is halved
instead, KAFKA-8350) and fails a single record. Under acks=0 a batch is done once its request is sent,
with offset -1.

Memory: every new batch takes max(``batch.size``, its first record's bound) of ``buffer.memory`` until it
completes, as Kafka's BufferPool. A ``send()`` that needs a batch when the pool is short runs the network
until completions free enough, for up to ``max.block.ms`` (Kafka blocks the caller for that long), and
then fails with BufferExhaustedException. Called from inside the simulation (a callback, a scheduled
call) it cannot block, so it fails at once: Kafka's I/O thread blocked in send() could free nothing either.

A failed send's callback gets ``RecordMetadata(topic, partition, -1, -1)``, partition -1 when none was
chosen yet, as Kafka's client calls it.

``history`` lists every send with its outcome as ``kafkalite.client.send_history.SendRecord``: acknowledged (offset,
acks), failed (error name; nothing was written), or unknown (no answer, or an answer after an attempt
that may have been written). A send's id is its value, which is what the checker reads back by default.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.client.accumulator import (
    Callback,
    FutureRecordMetadata,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    batch_size_upper_bound,
)
from kafkalite.client.metadata import FATAL_TOPIC_ERRORS, ClusterMetadata
from kafkalite.client.partitioner import DefaultPartitioner, create_partitioner
from kafkalite.client.send_history import ACKED, FAILED, UNKNOWN, SendRecord
from kafkalite.client.transaction_manager import (
    DUPLICATE_SEQUENCE_NUMBER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
    TransactionManager,
)
from kafkalite.client.wakeup import Wakeup
from kafkalite.config.producer import ProducerConfig
from kafkalite.errors import (
    BufferExhaustedError,
    InvalidTxnStateError,
    KafkaError,
    MessageTooLargeError,
    NetworkError,
    ProducerFencedError,
    RequestTimedOutError,
    error_for_code,
)
from kafkalite.net.sim import BaseNode, NodeId
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
    MetadataRequest,
    MetadataResponse,
    OffsetCommitPartition,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkalite.records import BATCH_HEADER_SIZE, record_size
from kafkalite.records.record import MAX_RECORD_OVERHEAD
from kafkalite.records.varint import sizeof_varint

__all__ = ["FutureRecordMetadata", "Producer", "ProducerClosedError", "RecordMetadata"]

# Errors meaning "your metadata is stale" (Kafka's InvalidMetadataException family): refresh, then retry.
INVALID_METADATA_CODES = frozenset({3, 5, 6, 13, 56, 74, 75})
# Errors after which the batch may be in the log although it failed (the checker must not call it lost).
MAYBE_WRITTEN_CODES = frozenset({7, 20})
MESSAGE_TOO_LARGE = 10
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
INVALID_PRODUCER_EPOCH_CODE, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS = 47, 49, 51
PRODUCER_FENCED = 90
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms default
_new_future = object.__new__


class ProducerClosedError(RuntimeError):
    """``send()`` after ``close()`` (Kafka's IllegalStateException)."""


class _NoMemory(Exception):
    """A new batch for ``tp`` needs ``need`` bytes of buffer.memory that could not be had."""

    def __init__(self, tp: TopicPartition, need: int) -> None:
        self.tp, self.need = tp, need


class _InFlight:
    __slots__ = ("corr", "node", "batches", "deadline", "sent_ms", "is_metadata", "is_init")

    def __init__(self, corr: int, node: int, batches: list[ProducerBatch] | None, deadline: int, now: int):
        self.corr = corr
        self.node = node
        self.batches = batches
        self.deadline = deadline
        self.sent_ms = now
        self.is_metadata = batches is None
        self.is_init = False  # an InitProducerId request (batches is None too)


class _TopicCache:
    """Per-topic data the hot path needs, rebuilt when the metadata version changes."""

    __slots__ = ("version", "n", "available", "tps")

    def __init__(self, version: int, n: int, available: list[int], tps: list[TopicPartition]) -> None:
        self.version = version
        self.n = n
        self.available = available
        self.tps = tps


class _HotBatch:
    """What ``send()``'s fast path needs to append a value to a topic's open sticky batch.

    A record's exact size depends on its offset and timestamp deltas and its value's length only through
    varint widths, so within a *regime* (index below ``idx_end``, time at most ``ts_end``, value length in
    ``lmin..lmax``) it is ``c + len(value)``. ``lmax`` also keeps records past ``max.request.size`` on the
    full path, which checks them. ``room`` counts down the bytes the fast path may still add: the least of
    what keeps the batch under its write limit and what keeps the sticky partitioner from a forced switch.
    The bytes and sends taken this way reach the sticky state and the send counter when the entry is
    cooled (``Producer._cool``), so the per-record path updates one counter instead of three.
    """

    __slots__ = (
        "batch", "values", "stamps", "seqs", "sticky", "version", "room", "start_room", "start_len",
        "c", "lmin", "lmax", "idx_end", "ts_end",
    )  # fmt: skip

    def __init__(self, batch: ProducerBatch, sticky: Any, version: int, room: int, seqs: list | None) -> None:
        self.batch = batch
        self.values = batch.values
        self.stamps = batch.timestamps
        self.seqs = seqs  # None when the history is off: nothing reads per-record send numbers then
        self.sticky = sticky
        self.version = version
        self.room = room
        self.start_room = room
        self.start_len = len(batch.values)
        self.c = self.lmin = self.lmax = self.idx_end = self.ts_end = 0


# batch_size_upper_bound of a null-key, header-less record, less its value and the value's length varint:
# the batch header, the most record overhead, and one byte each for the null key and the header count.
_VALUE_BOUND_OVERHEAD = BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD + 2


def _same_width(v: int) -> int:
    """The largest ``w >= v >= 0`` whose zigzag varint is as wide as ``v``'s."""
    return (1 << (7 * sizeof_varint(v) - 1)) - 1


def _lowest_same_width(v: int) -> int:
    """The smallest ``w <= v`` (``v >= 0``) whose zigzag varint is as wide as ``v``'s."""
    width = sizeof_varint(v)
    return 0 if width == 1 else 1 << (7 * (width - 1) - 1)


class Producer(BaseNode):
    """A Kafka producer on the simulated network (add it with ``net.add_node(client_id, producer)``).

    ``send`` is Kafka's record send and shadows ``BaseNode.send``; network sends go through ``net.send``.
    """

    def __init__(
        self, client_id: str, bootstrap: Iterable[int], config: Mapping[str, Any] | None = None
    ) -> None:
        self.config = ProducerConfig.from_props(config)
        self.client_id = client_id
        cfg = self.config
        self.acks = cfg.acks
        self._batch_size = cfg.batch_size
        self._linger = cfg.linger_ms
        self._max_request_size = cfg.max_request_size
        self._buffer_memory = cfg.buffer_memory
        self._max_record = min(cfg.max_request_size, cfg.buffer_memory)
        self._compression = cfg.compression
        self._history_on = cfg.history_enabled
        self._key_ser: Callable[[Any], bytes] | None = cfg["key.serializer"]
        self._value_ser: Callable[[Any], bytes] | None = cfg["value.serializer"]
        self.metadata = ClusterMetadata(list(bootstrap), cfg.metadata_max_age_ms)
        if not self.metadata.bootstrap:
            raise ValueError("bootstrap must name at least one broker")
        self.accumulator = RecordAccumulator(
            cfg.batch_size,
            cfg.linger_ms,
            cfg.retry_backoff_ms,
            cfg.retry_backoff_max_ms,
            cfg.delivery_timeout_ms,
            cfg.acks,
        )
        self.partitioner: Any = None
        self._builtin: Callable[[str], Any] | None = None
        self._rng: random.Random | None = None
        self._seq = 0
        self._corr = 0
        self._cache: dict[str, _TopicCache] = {}
        # Per topic: the open sticky batch send()'s fast path appends to.
        self._hot: dict[str, _HotBatch] = {}
        self._inflight: dict[int, _InFlight] = {}
        self._node_inflight: dict[int, int] = {}
        self._node_backoff: dict[int, int] = {}
        self._node_latency: dict[int, tuple[int, int]] = {}  # broker -> (last ready, last able to send)
        self._meta_inflight: _InFlight | None = None
        self._meta_backoff_until = 0
        # Sends whose topic (or partition) is not in the metadata yet, or (w[10]) that wait for memory.
        self._waiting: list[list] = []
        self._pool_free = cfg.buffer_memory  # buffer.memory not held by an incomplete batch
        self._mem_waiting = 0  # entries of _waiting placed but short of memory
        self._wakeup = Wakeup(self, self._run)
        self._batches: list[ProducerBatch] = []  # every batch, for the history
        self._early: list[SendRecord] = []  # sends that failed before reaching a batch
        self._closing = False
        self._closed = False
        tid = cfg["transactional.id"]
        self._tm = TransactionManager(self.log, tid) if cfg.idempotence else None
        self._txn = tid is not None
        self._init_backoff_until = 0
        self._metrics: dict[str, int] = dict.fromkeys(
            (
                "record-send-total",
                "record-error-total",
                "record-retry-total",
                "batch-total",
                "batch-split-total",
                "batch-bytes-total",
                "request-total",
                "response-total",
                "request-timeout-total",
                "late-response-total",
                "metadata-request-total",
                "connection-failure-total",
            ),
            0,
        )

    @property
    def metrics(self) -> dict[str, int]:
        """Kafka-named counters. ``record-send-total`` is every ``send()`` call, i.e. the send counter."""
        uncounted = sum(len(h.values) - h.start_len for h in self._hot.values() if h.seqs is None)
        self._metrics["record-send-total"] = self._seq + uncounted
        return self._metrics

    # ---------------------------------------------------------------------------------- node hooks

    def bind(self, net: Any, node_id: NodeId) -> None:
        super().bind(net, node_id)
        if not self.client_id:
            self.client_id = str(node_id)
        self._rng = net.node_rng(node_id)
        props = dict(self.config.props)
        if props.get("partitioner.class") is None:
            props.pop("partitioner.class", None)
        self.partitioner = create_partitioner(props, self._rng)
        if isinstance(self.partitioner, DefaultPartitioner):
            self._builtin = self.partitioner.built_in
            self._hash_keys = not self.partitioner.ignore_keys
        else:
            self._builtin = None
            self._hash_keys = True
        self._on_new_batch = getattr(self.partitioner, "on_new_batch", None)
        # Kafka asks a configured partitioner (any but the built-in one) again for a new batch.
        self._abort_on_new_batch = not isinstance(self.partitioner, DefaultPartitioner)

    def on_message(self, src: NodeId, msg: Any, now_ms: int) -> None:
        if not isinstance(msg, ResponseEnvelope):
            return
        req = self._inflight.pop(msg.correlation_id, None)
        if req is None:
            # The request timed out and its connection was dropped; Kafka never sees this answer.
            self._metrics["late-response-total"] += 1
            return
        self._node_inflight[req.node] -= 1
        self._metrics["response-total"] += 1
        resp = msg.response
        if req.is_init:
            if self._txn:
                self._on_txn_response(resp, now_ms)
            else:
                self._on_init_producer_id(resp, now_ms)
        elif req.is_metadata:
            self._meta_inflight = None
            if isinstance(resp, MetadataResponse):
                self._on_metadata(resp, now_ms)
        elif isinstance(resp, ProduceResponse):
            self._on_produce_response(req, resp, now_ms)
        self._run(now_ms)

    def on_crash(self) -> None:
        """A crashed client loses everything in memory; its pending sends stay unknown forever."""
        self._inflight.clear()
        self._node_inflight.clear()
        self._meta_inflight = None
        self._wakeup.cancel()
        for batch in self.accumulator.abort_all():
            batch.final_state = "crashed"
        self._waiting.clear()
        self._mem_waiting = 0
        self._closed = True

    # ----------------------------------------------------------------------------------------- API

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp: int | None = None,
        callback: Callback | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future (and ``callback(metadata, error)``) completes when it is acked."""
        hot = self._hot.get(topic)
        if (
            hot is not None
            and key is None
            and partition is None
            and headers is None
            and timestamp is None
            and callback is None
            and value.__class__ is bytes
        ):
            # Fast path for the common send (no key, the open sticky batch has room): what _append
            # would do, minus the checks that cannot fail here. close() clears _hot, so a hot entry
            # means the producer is open. Anything else takes the full path.
            values = hot.values
            index = len(values)
            now = self.net._now
            vlen = len(value)
            if hot.lmin <= vlen <= hot.lmax and index < hot.idx_end and now <= hot.ts_end:
                size = hot.c + vlen  # the record's exact size in this regime
                room = hot.room - size
                batch = hot.batch
                if room > 0 and not batch.full and hot.version == self.metadata.version:
                    hot.room = room
                    batch.size += size
                    fut = _new_future(FutureRecordMetadata)
                    fut.batch = batch
                    fut.index = index
                    values.append(value)
                    hot.stamps.append(now)
                    seqs = hot.seqs
                    if seqs is not None:
                        seq = self._seq
                        self._seq = seq + 1
                        seqs.append(seq)
                    return fut
        if self._closing:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        if self._txn and self._tm.txn_state != "IN_TRANSACTION":  # type: ignore[union-attr]
            raise InvalidTxnStateError(
                f"Cannot call send in state {self._tm.txn_state}: a transactional producer sends "  # type: ignore[union-attr]
                "between begin_transaction() and commit_transaction() / abort_transaction()"
            )
        # Kafka's ProducerRecord refuses these before anything else happens.
        if partition is not None and partition < 0:
            raise ValueError(f"invalid partition {partition}: a partition number is >= 0, or None")
        if timestamp is not None and timestamp < 0:
            raise ValueError(f"invalid timestamp {timestamp}: a timestamp is >= 0, or None")
        if value is not None and value.__class__ is not bytes:
            value = self._value_ser(value) if self._value_ser else _to_bytes(value)
        if key is not None and key.__class__ is not bytes:
            key = self._key_ser(key) if self._key_ser else _to_bytes(key)
        seq = self._seq
        self._seq = seq + 1
        now = self.net._now
        ts = now if timestamp is None else timestamp
        bound = batch_size_upper_bound(key, value, headers)
        if bound > self._max_request_size or bound > self._buffer_memory:
            limit, name = (
                (self._max_request_size, "max.request.size")
                if bound > self._max_request_size
                else (self._buffer_memory, "buffer.memory")
            )
            err = MessageTooLargeError(
                f"The message is {bound} bytes when serialized (at most), larger than the {limit} "
                f"bytes of the producer's {name} configuration."
            )
            return self._fail_early(seq, topic, partition, value, err, callback)
        deadline = now + self.config.max_block_ms
        if self._mem_waiting:
            # Earlier sends queue for memory: this one goes after them, as Kafka's BufferPool serves
            # waiters in order.
            if not self._block(lambda: not self._mem_waiting, deadline):
                return self._fail_early(
                    seq, topic, partition, value, self._exhausted(self._batch_size), callback
                )
            now = self.net._now
        cache = self._cache.get(topic)
        if cache is None or cache.version != self.metadata.version:
            cache = self._topic_cache(topic)
        if cache is None or (partition is not None and partition >= cache.n):
            fut = FutureRecordMetadata(None, 0, topic)
            self._waiting.append(
                [seq, topic, partition, key, value, headers, ts, callback, fut, deadline, False]
            )
            self.metadata.add_topic(topic)
            self._wakeup.schedule(now)
            return fut
        try:
            return self._append(
                cache, seq, topic, partition, key, value, headers, ts, callback, None, now, deadline
            )
        except _NoMemory as short:
            return self._fail_early(
                seq, topic, short.tp.partition, value, self._exhausted(short.need), callback
            )

    def flush(self) -> None:
        """Make every queued batch ready now (Kafka's flush); run the network to let them complete."""
        self.accumulator.flushing = True
        self._wakeup.schedule(self.net._now)

    # ---------------------------------------------------------------------------- transactions

    def init_transactions(self, timeout_ms: int | None = None) -> None:
        """Register the transactional id with its coordinator: get the producer id, bump the epoch
        (fencing older producers with this id) and let the coordinator finish what they left open."""
        tm = self._txn_manager("init_transactions")
        if tm.txn_state != "UNINITIALIZED":
            raise InvalidTxnStateError(f"init_transactions was already called (state {tm.txn_state})")
        self._txn_call({"kind": "init"}, timeout_ms)
        tm.txn_state = "READY"

    def begin_transaction(self) -> None:
        tm = self._txn_manager("begin_transaction")
        if tm.txn_state != "READY":
            raise InvalidTxnStateError(f"Cannot begin a transaction in state {tm.txn_state}")
        tm.txn_state = "IN_TRANSACTION"

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        *,
        generation_id: int = -1,
        member_id: str = "",
        timeout_ms: int | None = None,
    ) -> None:
        """Commit a consumer group's offsets as part of this transaction (Kafka's
        sendOffsetsToTransaction): they count only if the transaction commits, together with what it
        wrote. ``offsets`` are the next offsets to read, per input partition."""
        tm = self._txn_manager("send_offsets_to_transaction")
        if tm.txn_state != "IN_TRANSACTION":
            raise InvalidTxnStateError(
                f"Cannot send offsets in state {tm.txn_state}: call begin_transaction() first"
            )
        parts = tuple(OffsetCommitPartition(tp=tp, committed_offset=o) for tp, o in sorted(offsets.items()))
        op = {"kind": "offsets", "phase": "add", "group_id": group_id, "generation_id": generation_id,
              "member_id": member_id, "partitions": parts, "group_coordinator": -1}  # fmt: skip
        self._txn_call(op, timeout_ms)
        tm.offsets_added = True

    def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Send everything of the transaction, then ask the coordinator to commit it."""
        self._end_transaction(True, timeout_ms)

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Drop what has not been sent, then ask the coordinator to abort the transaction."""
        tm = self._txn_manager("abort_transaction")
        if tm.txn_state == "IN_TRANSACTION":
            now = self.net._now
            for batch in self.accumulator.abort_all():
                self._fail_batch(batch, KafkaError("Failing batch since transaction was aborted"), now)
        self._end_transaction(False, timeout_ms)

    def _txn_manager(self, call: str) -> TransactionManager:
        if not self._txn or self._tm is None:
            raise InvalidTxnStateError(f"Cannot call {call}: the producer has no transactional.id")
        if self._tm.txn_state == "FATAL_ERROR":
            raise ProducerFencedError(f"Cannot call {call}: the producer was fenced ({self._tm.op_error})")
        return self._tm

    def _end_transaction(self, commit: bool, timeout_ms: int | None) -> None:
        tm = self._txn_manager("commit_transaction" if commit else "abort_transaction")
        if tm.txn_state != "IN_TRANSACTION":
            raise InvalidTxnStateError(
                f"Cannot {'commit' if commit else 'abort'} a transaction in state {tm.txn_state}: "
                "call begin_transaction() first"
            )
        tm.txn_state = "COMMITTING" if commit else "ABORTING"
        if not commit:
            tm.new_partitions.clear()  # their batches were dropped: nothing of them reaches the log
        self.flush()
        limit = self.config.max_block_ms if timeout_ms is None else timeout_ms
        if not self.net.run_until(self.idle, limit):  # every send of the transaction answered first
            raise RequestTimedOutError(f"Timeout expired after {limit} ms while flushing the transaction")
        if tm.txn_partitions or tm.new_partitions or tm.offsets_added:
            self._txn_call({"kind": "end", "commit": commit}, timeout_ms)
        # else: the coordinator never heard of this transaction (nothing was sent): it ends here, as
        # Kafka's client ends a transaction that added no partition without an EndTxn.
        tm.txn_state = "READY"
        tm.txn_partitions.clear()
        tm.offsets_added = False

    def _txn_call(self, op: dict, timeout_ms: int | None) -> None:
        """Run the network until the coordinator answered ``op`` (Kafka's blocking transactional calls)."""
        tm = self._tm
        assert tm is not None
        tm.op = {**op, "done": False, "error": None}
        net = self.net
        self._wakeup.schedule(net._now)
        limit = self.config.max_block_ms if timeout_ms is None else timeout_ms
        if net._running:
            raise RuntimeError("transactional calls block: call them outside the simulation's run loop")
        finished = net.run_until(lambda: tm.op["done"], limit)  # type: ignore[index]
        op, tm.op = tm.op, None
        if not finished:
            raise RequestTimedOutError(f"Timeout expired after {limit} ms while awaiting {op['kind']}")
        if op["error"] is not None:
            raise op["error"]

    def _txn_send(self, node: int, req: Any, now: int) -> bool:
        corr = self._next_corr()
        if not self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, req)):
            self._connection_failed(node, now)
            tm = self._tm
            assert tm is not None
            if tm.coordinator == node:
                tm.coordinator = -1  # a coordinator we cannot reach: look it up again
            if tm.op is not None and tm.op.get("group_coordinator") == node:
                tm.op["group_coordinator"] = -1
            self._init_backoff_until = now + self.config.retry_backoff_ms
            self._wakeup.schedule(self._init_backoff_until)
            return False
        inflight = _InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
        inflight.is_init = True
        self._inflight[corr] = inflight
        self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
        self._tm.init_pending = True  # type: ignore[union-attr]
        return True

    def _txn_step(self, now: int) -> None:
        """Send the next transactional request the state calls for (one at a time, as Kafka's
        TransactionManager queues them): FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn."""
        tm = self._tm
        assert tm is not None
        if tm.init_pending or now < self._init_backoff_until or tm.txn_state == "FATAL_ERROR":
            return
        tid = tm.transactional_id
        op = tm.op
        wants = op is not None and not op["done"] or bool(tm.new_partitions)
        if not wants:
            return
        if tm.coordinator < 0:
            for node in self.metadata.nodes():
                if self._node_backoff.get(node, 0) <= now and self._txn_send(
                    node, FindCoordinatorRequest(key=tid, key_type=CoordinatorType.TRANSACTION), now
                ):
                    return
            return
        if op is not None and op["kind"] == "offsets" and not op["done"]:
            self._txn_offsets_step(op, now)
            return
        if op is not None and op["kind"] == "init" and not op["done"]:
            timeout = self.config["transaction.timeout.ms"]
            self._txn_send(
                tm.coordinator,
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout),
                now,
            )
            return
        if tm.new_partitions:
            parts = tuple(sorted(tm.new_partitions))
            req = AddPartitionsToTxnRequest(
                transactional_id=tid, producer_id=tm.producer_id, producer_epoch=tm.epoch, partitions=parts
            )
            self._txn_send(tm.coordinator, req, now)
            return
        if op is not None and op["kind"] == "end" and not op["done"] and not self._has_work():
            req = EndTxnRequest(
                transactional_id=tid,
                producer_id=tm.producer_id,
                producer_epoch=tm.epoch,
                committed=op["commit"],
            )
            self._txn_send(tm.coordinator, req, now)

    def _txn_offsets_step(self, op: dict, now: int) -> None:
        tm = self._tm
        assert tm is not None
        tid, pid, epoch = tm.transactional_id, tm.producer_id, tm.epoch
        if op["phase"] == "add":
            req: Any = AddOffsetsToTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=op["group_id"]
            )
            self._txn_send(tm.coordinator, req, now)
        elif op["group_coordinator"] < 0:
            for node in self.metadata.nodes():
                if self._node_backoff.get(node, 0) <= now and self._txn_send(
                    node, FindCoordinatorRequest(key=op["group_id"], key_type=CoordinatorType.GROUP), now
                ):
                    return
        else:
            req = TxnOffsetCommitRequest(
                transactional_id=tid, group_id=op["group_id"], producer_id=pid, producer_epoch=epoch,
                generation_id=op["generation_id"], member_id=op["member_id"], partitions=op["partitions"],
            )  # fmt: skip
            self._txn_send(op["group_coordinator"], req, now)

    def _on_txn_response(self, resp: Any, now: int) -> None:
        tm = self._tm
        assert tm is not None
        tm.init_pending = False
        code = getattr(resp, "error_code", 0)
        op = tm.op
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
                    tm.coordinator = -1  # look for the coordinator again
            self._init_backoff_until = now + self.config.retry_backoff_ms
            self._wakeup.schedule(self._init_backoff_until)
            return
        if code:
            exc_type = error_for_code(code) or KafkaError
            err = exc_type(f"transactional id {tm.transactional_id}: {type(resp).__name__}")
            if code in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH_CODE, INVALID_PRODUCER_ID_MAPPING):
                tm.txn_state = "FATAL_ERROR"
                tm.op_error = err
            if tm.op is not None:
                tm.op["error"], tm.op["done"] = err, True
            return
        if isinstance(resp, FindCoordinatorResponse):
            if group_call:
                op["group_coordinator"] = resp.node_id  # type: ignore[index]
            else:
                tm.coordinator = resp.node_id
        elif isinstance(resp, AddOffsetsToTxnResponse) and op is not None:
            op["phase"] = "commit"
        elif isinstance(resp, TxnOffsetCommitResponse) and op is not None:
            op["done"] = True
        elif isinstance(resp, InitProducerIdResponse):
            tm.set_producer_id(resp.producer_id, resp.producer_epoch)
            if tm.op is not None:
                tm.op["done"] = True
        elif isinstance(resp, AddPartitionsToTxnResponse):
            for r in resp.results:
                tm.txn_partitions.add(r.tp)
                tm.new_partitions.discard(r.tp)
        elif isinstance(resp, EndTxnResponse) and tm.op is not None:
            tm.op["done"] = True

    def close(self, timeout_ms: int | None = None) -> None:
        """Stop taking records and send what is queued; ``timeout_ms=0`` fails queued records at once."""
        self._closing = True
        for topic in list(self._hot):
            self._cool(topic)  # send()'s fast path must not take records any more
        self.accumulator.closing = True
        if timeout_ms == 0:
            now = self.net._now
            for batch in self.accumulator.abort_all():
                self._fail_batch(batch, KafkaError("Producer is closed forcefully."), now)
            for w in self._waiting:
                self._fail_waiting(w, KafkaError("Producer is closed forcefully."))
            self._waiting.clear()
            self._mem_waiting = 0
        self._wakeup.schedule(self.net._now)

    def idle(self) -> bool:
        """True when nothing is queued, waiting for metadata or in flight (handy for ``run_until``)."""
        return not (self._waiting or self.accumulator.has_unsent() or self._has_produce_inflight())

    @property
    def closed(self) -> bool:
        return self._closing and self.idle()

    def partitions_for(self, topic: str) -> list[int] | None:
        info = self.metadata.topic(topic)
        return None if info is None else [p.partition for p in info.partitions]

    @property
    def history(self) -> list[SendRecord]:
        """Every send so far, in send order, with its outcome (see the module docstring)."""
        rows: list[SendRecord] = list(self._early)
        producer = self.client_id
        for batch in self._batches:
            if batch.children is not None:
                continue  # split: its halves are listed instead
            topic, partition = batch.tp
            acks = batch.acks
            if batch.done and batch.error is None:
                base = batch.base_offset
                for i, (seq, value) in enumerate(zip(batch.seqs, batch.values, strict=True)):
                    offset = base + i if base >= 0 else None
                    rows.append(SendRecord(value, topic, partition, ACKED, offset, acks, None, producer, seq))
                continue
            if batch.done:
                outcome = UNKNOWN if batch.maybe_written else FAILED
                error = batch.error.name  # type: ignore[union-attr]
            else:
                outcome, error = UNKNOWN, batch.final_state or "pending"
            for seq, value in zip(batch.seqs, batch.values, strict=True):
                rows.append(SendRecord(value, topic, partition, outcome, None, acks, error, producer, seq))
        for w in self._waiting:
            rows.append(SendRecord(w[4], w[1], -1 if w[2] is None else w[2], UNKNOWN, None, self.acks,
                                   "pending", producer, w[0]))  # fmt: skip
        rows.sort(key=lambda r: r.seq)  # type: ignore[arg-type, return-value]
        return rows

    # ------------------------------------------------------------------------------------ hot path

    def _append(
        self,
        cache: _TopicCache,
        seq: int,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        ts: int,
        callback: Callback | None,
        fut: FutureRecordMetadata | None,
        now: int,
        deadline: int | None = None,
    ) -> FutureRecordMetadata:
        """Kafka's ``RecordAccumulator.append`` (and ``KafkaProducer.doSend``'s second try): place the
        record in its partition's open batch when its exact size fits, else in a new batch, whose memory
        it waits for until ``deadline`` (``None``: it cannot wait; ``_NoMemory`` is raised)."""
        if topic in self._hot:
            self._cool(topic)  # the sticky state below must see every byte the fast path took
        sticky = None
        chosen = partition is None
        if chosen:
            if self._builtin is not None and (key is None or not self._hash_keys):
                sticky = self._builtin(topic)
            else:
                partition = self._choose(topic, key, value, cache)
        acc = self.accumulator
        while True:
            if sticky is not None:
                partition = sticky.peek_current_partition(cache.n, cache.available)
            tp = self._tp(cache, topic, partition)  # type: ignore[arg-type]
            batch, nbytes = self._open_batch_with_room(tp, ts, key, value, headers, now)
            if batch is not None:
                break
            # The partition has no batch open for this record. A switch an earlier append held back
            # (its batch was not full then) happens now, and the record follows it: Kafka's
            # partitionChanged. After a switch the new partition has no bytes yet, so this loops once.
            if sticky is None:
                break
            sticky.update_partition_info(0, cache.n, cache.available, enable_switch=True)
            if sticky.current_partition == partition:
                break
        if batch is None and self._abort_on_new_batch:
            # A configured partitioner is asked again when a record would open a new batch (Kafka's
            # abortOnNewBatch, KIP-480): its on_new_batch hook runs first; explicit partitions stay.
            if self._on_new_batch is not None:
                self._on_new_batch(topic, cache.n, cache.available, partition)
            if chosen:
                partition = self._choose(topic, key, value, cache)
                tp = self._tp(cache, topic, partition)
            batch, nbytes = self._open_batch_with_room(tp, ts, key, value, headers, now)
        if batch is None:
            bound = batch_size_upper_bound(key, value, headers)
            need = bound if bound > self._batch_size else self._batch_size
            if need > self._pool_free:
                if deadline is None or not self._block(lambda: self._pool_free >= need, deadline):
                    raise _NoMemory(tp, need)
                now = self.net._now
                # The network ran meanwhile: the record may fit a batch opened for tp since.
                batch, nbytes = self._open_batch_with_room(tp, ts, key, value, headers, now)
        if batch is None:
            batch = acc.new_batch(tp, now, bound, self._compression)
            self._pool_free -= need
            batch.pooled = need
            nbytes = record_size(0, 0, key, value, headers)
            self._metrics["batch-total"] += 1
            if self._history_on:
                self._batches.append(batch)
            wake = self._wakeup.at
            if wake is None or wake > now + self._linger:
                self._wakeup.schedule(now + self._linger)
        if self._txn and tp not in self._tm.txn_partitions:  # type: ignore[union-attr]
            self._tm.new_partitions.add(tp)  # type: ignore[union-attr]
        index = batch.append(key, value, headers, ts, seq)
        appended = batch.count_bytes(nbytes)
        if callback is not None:
            if batch.callbacks is None:
                batch.callbacks = []
            batch.callbacks.append((index, callback))
        if batch.full:
            self._wakeup.schedule(now)
        if sticky is not None:
            sticky.update_partition_info(appended, cache.n, cache.available, enable_switch=batch.full)
            if (
                not batch.full
                and batch.keys is None  # the fast path appends values only
                and batch.headers is None
                and not batch.ratio  # nor does it estimate compression
                and value.__class__ is bytes
                and ts >= batch.timestamps[0]
                and sticky.current_partition == tp.partition  # no forced switch just happened
                and not self._txn  # a transactional send checks the transaction's state every time
            ):
                self._make_hot(topic, batch, sticky, cache.version, value, now)
        if fut is None:
            return FutureRecordMetadata(batch, index, topic)
        fut.batch, fut.index = batch, index
        return fut

    def _choose(self, topic: str, key: bytes | None, value: bytes | None, cache: _TopicCache) -> int:
        partition = self.partitioner.partition(topic, key, value, cache.n, cache.available)
        if partition < 0:  # Kafka refuses a negative answer (IllegalArgumentException)
            raise ValueError(f"partitioner returned an invalid partition {partition} for {topic!r}")
        # An answer >= the partition count is kept, as Kafka keeps it: its batch waits for a leader the
        # metadata may yet name (the topic may grow) until delivery.timeout.ms expires it.
        return partition

    @staticmethod
    def _tp(cache: _TopicCache, topic: str, partition: int) -> TopicPartition:
        return cache.tps[partition] if partition < cache.n else TopicPartition(topic, partition)

    def _block(self, done: Callable[[], bool], deadline: int) -> bool:
        """Kafka's blocking ``send()``: run the network until ``done()`` or ``deadline``; from inside the
        simulation nothing can run meanwhile, so it cannot wait."""
        if done():
            return True
        net = self.net
        if net._running or deadline <= net._now:
            return False
        return net.run_until(done, deadline - net._now)

    def _exhausted(self, need: int) -> BufferExhaustedError:
        return BufferExhaustedError(
            f"Failed to allocate {need} bytes within the configured max blocking time "
            f"{self.config.max_block_ms} ms. Total memory: {self._buffer_memory} bytes. Available memory: "
            f"{self._pool_free} bytes."
        )

    def _open_batch_with_room(
        self, tp: TopicPartition, ts: int, key: bytes | None, value: bytes | None, headers: Any, now: int
    ) -> tuple[ProducerBatch | None, int]:
        """``tp``'s open batch and the record's size in it, if the record fits; a batch it does not fit is
        closed to appends (Kafka's closeForRecordAppends) and so becomes ready to send."""
        batch = self.accumulator.open_batch(tp)
        if batch is None:
            return None, 0
        nbytes = batch.next_record_size(ts, key, value, headers)
        if batch.has_room(nbytes):
            return batch, nbytes
        batch.full = True
        self._wakeup.schedule(now)
        return None, 0

    def _make_hot(
        self, topic: str, batch: ProducerBatch, sticky: Any, version: int, value: bytes, now: int
    ) -> None:
        """Open the fast path on ``batch`` for the regime of widths the next record falls in."""
        index = len(batch.values)
        base_ts = batch.timestamps[0]
        delta = now - base_ts
        vlen = len(value)
        # A null-key, header-less record: attributes, null key and header count take a byte each.
        body = 3 + sizeof_varint(delta) + sizeof_varint(index) + sizeof_varint(vlen) + vlen
        size = body + sizeof_varint(body)
        fixed = body - vlen
        # Value lengths that keep the length varint and the body-length varint as wide as now, and that
        # pass send()'s size check (a null-key, header-less record's upper bound is _VALUE_BOUND_OVERHEAD
        # plus the value and its length varint).
        lmin = max(_lowest_same_width(vlen), _lowest_same_width(body) - fixed)
        lmax = min(
            _same_width(vlen),
            _same_width(body) - fixed,
            self._max_record - _VALUE_BOUND_OVERHEAD - sizeof_varint(vlen),
        )
        if not lmin <= vlen <= lmax:
            return
        room = min(batch.limit - batch.size, 2 * sticky.sticky_batch_size - sticky.produced_bytes)
        hot = _HotBatch(batch, sticky, version, room, batch.seqs if self._history_on else None)
        hot.c = size - vlen
        hot.lmin, hot.lmax = lmin, lmax
        hot.idx_end = _same_width(index) + 1
        hot.ts_end = base_ts + _same_width(delta)
        self._hot[topic] = hot

    def _cool(self, topic: str) -> None:
        """End ``topic``'s fast-path entry, handing on what it took: bytes to the sticky partitioner,
        sends to the send counter."""
        hot = self._hot.pop(topic)
        hot.sticky._produced_bytes += hot.start_room - hot.room
        if hot.seqs is None:
            self._seq += len(hot.values) - hot.start_len

    def _topic_cache(self, topic: str) -> _TopicCache | None:
        info = self.metadata.topic(topic)
        if info is None or not info.partitions:
            self._cache.pop(topic, None)
            return None
        n = info.num_partitions
        old = self._cache.get(topic)
        tps = (
            old.tps if old is not None and len(old.tps) == n else [TopicPartition(topic, p) for p in range(n)]
        )
        cache = _TopicCache(self.metadata.version, n, list(info.available), tps)
        self._cache[topic] = cache
        return cache

    # ------------------------------------------------------------------------------------- sender

    def _run(self, now: int) -> None:
        """One pass of Kafka's Sender loop."""
        if self._closed:
            return
        acc = self.accumulator
        meta = self.metadata
        # Timeouts first: missing responses, then batches past delivery.timeout.ms.
        for req in [r for r in self._inflight.values() if r.deadline <= now]:
            if req.corr in self._inflight:
                self._metrics["request-timeout-total"] += 1
                self.log("request_timeout", broker=req.node, correlation_id=req.corr)
                self._disconnect(req.node, now, timed_out=True)
        self._expire(now)
        self._expire_waiting(now)
        if self._mem_waiting:
            self._place_waiting(now)
        # Metadata: topics waiting for it, unknown leaders, explicit requests, max age.
        nodes, next_ready, unknown = acc.ready(meta.leader_for, now)
        if unknown:
            meta.request_update()
        if (self._waiting or unknown or meta.need_update or self._has_work()) and meta.update_due(now):
            self._maybe_send_metadata(now)
        if isinstance(self.partitioner, DefaultPartitioner) and self.partitioner.adaptive:
            self._update_load_stats()
        tm = self._tm
        gate = None
        if tm is not None:
            gate = tm.gate
            if tm.bump_pending:
                tm.maybe_bump(acc.batches)
            if self._txn:
                self._txn_step(now)
            elif not tm.has_producer_id and self._has_work():
                self._maybe_send_init_producer_id(now)
        for node in sorted(nodes):
            # Kafka's node latency stats: when a broker has batches ready, note whether it can take them.
            busy = self._node_inflight.get(node, 0) >= self.config.max_in_flight
            backing_off = self._node_backoff.get(node, 0) > now
            drained = self._node_latency.get(node, (now, now))[1] if busy or backing_off else now
            self._node_latency[node] = (now, drained)
            if busy:
                continue
            if backing_off:
                at = self._node_backoff[node]
                next_ready = at if next_ready is None else min(next_ready, at)
                continue
            # Like the Sender looping, keep sending to this broker while it may take more requests.
            while self._node_inflight.get(node, 0) < self.config.max_in_flight:
                batches = acc.drain(
                    self._partitions_led_by, node, self._max_request_size, self._compression, now, gate
                )
                if not batches:
                    break
                self._send_produce(node, batches, now)
                if self._node_backoff.get(node, 0) > now:
                    break  # the connection just failed
                if not acc.node_ready(self._partitions_led_by(node), now):
                    break  # what is left lingers: Kafka's next ready() check would not pick it
        if acc.flushing and self.idle():
            acc.flushing = False
        self._schedule_next(now, next_ready)

    def _schedule_next(self, now: int, next_ready: int | None) -> None:
        cands = [] if next_ready is None else [next_ready]
        cands.extend(r.deadline for r in self._inflight.values())
        exp = self.accumulator.next_expiry_ms()
        if exp is not None:
            cands.append(exp)
        for r in self._inflight.values():
            live = [b.created_ms for b in r.batches or () if not b.done]
            if live:
                cands.append(min(live) + self.config.delivery_timeout_ms)
        if self._waiting:
            cands.append(min(w[9] for w in self._waiting))
        meta = self.metadata
        if self._meta_inflight is None and (self._waiting or self._has_work()):
            if meta.need_update:
                cands.append(max(self._meta_backoff_until, now + 1))
            else:
                age = meta.next_age_refresh_ms()
                if age is not None:
                    cands.append(age)
        if cands:
            self._wakeup.schedule(max(min(cands), now))

    def _has_work(self) -> bool:
        return self.accumulator.has_unsent() or self._has_produce_inflight()

    def _has_produce_inflight(self) -> bool:
        return any(not r.is_metadata for r in self._inflight.values())

    def _partitions_led_by(self, node: int) -> list[TopicPartition]:
        leader_for = self.metadata.leader_for
        return [tp for tp, dq in self.accumulator.batches.items() if dq and leader_for(tp) == node]

    def _update_load_stats(self) -> None:
        """Queue sizes for adaptive partitioning, gathered as Kafka's ``partitionReady`` does: only once
        every partition of the topic has had a batch (else choices stay uniform), over the partitions
        with a leader, leaving out those whose leader has had batches ready but could not take them
        for longer than ``partitioner.availability.timeout.ms`` (when that is set)."""
        batches = self.accumulator.batches
        timeout = self.partitioner.availability_timeout_ms
        leader_for = self.metadata.leader_for
        for topic in self.metadata.wanted:
            cache = self._cache.get(topic)
            if cache is None:
                continue
            entries = [tp for tp in cache.tps if tp in batches]
            if len(entries) < cache.n:
                self.partitioner.update_partition_load_stats(topic, None)
                continue
            ids, sizes = [], []
            for tp in entries:
                leader = leader_for(tp)
                if leader < 0:
                    continue
                ready, drained = self._node_latency.get(leader, (0, 0))
                if timeout > 0 and ready - drained > timeout:
                    continue  # a broker that cannot keep up: its partitions are not chosen for now
                ids.append(tp.partition)
                sizes.append(len(batches[tp]))
            pad = len(entries) - len(ids)
            self.partitioner.update_partition_load_stats(topic, sizes + [0] * pad, ids + [-1] * pad, len(ids))

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _send_produce(self, node: int, batches: list[ProducerBatch], now: int) -> None:
        cfg = self.config
        req = ProduceRequest(
            acks=self.acks,
            timeout_ms=cfg.request_timeout_ms,
            partitions=tuple(ProducePartition(tp=b.tp, records=b.buffer or b"") for b in batches),
        )
        corr = self._next_corr()
        self._metrics["request-total"] += 1
        self._metrics["batch-bytes-total"] += sum(len(b.buffer or b"") for b in batches)
        if cfg.max_in_flight == 1:
            for b in batches:
                self.accumulator.muted.add(b.tp)  # guarantee order: one batch per partition in flight
        if not self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, req)):
            self._connection_failed(node, now)
            for b in batches:
                self._retry_or_fail(b, NetworkError(f"Connection to node {node} failed"), now, 13)
            return
        if self.acks == 0:
            # No response will come: Kafka completes acks=0 batches as soon as the request is sent.
            for b in batches:
                self._complete(b, -1, -1, now)
            return
        inflight = _InFlight(corr, node, batches, now + cfg.request_timeout_ms, now)
        self._inflight[corr] = inflight
        self._node_inflight[node] = self._node_inflight.get(node, 0) + 1

    def _maybe_send_metadata(self, now: int) -> None:
        if self._meta_inflight is not None or now < self._meta_backoff_until:
            return
        meta = self.metadata
        nodes = meta.nodes()
        # Kafka's leastLoadedNode: fewest requests in flight, from a random start, skipping failed nodes.
        start = self._rng.randrange(len(nodes)) if self._rng is not None else 0
        order = nodes[start:] + nodes[:start]
        order.sort(key=lambda n: self._node_inflight.get(n, 0))  # stable: ties keep the random order
        req = MetadataRequest(topics=tuple(meta.wanted))
        for node in order:
            if self._node_backoff.get(node, 0) > now:
                continue
            corr = self._next_corr()
            if self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, req)):
                self._metrics["metadata-request-total"] += 1
                inflight = _InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
                self._inflight[corr] = inflight
                self._meta_inflight = inflight
                self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
                return
            self._connection_failed(node, now)
        self._meta_backoff_until = now + self.config.retry_backoff_ms

    def _maybe_send_init_producer_id(self, now: int) -> None:
        """Ask a broker for a producer id (Kafka sends InitProducerId to the least loaded node)."""
        tm = self._tm
        if tm is None or tm.init_pending or now < self._init_backoff_until:
            return
        for node in self.metadata.nodes():
            if self._node_backoff.get(node, 0) > now:
                continue
            corr = self._next_corr()
            req = InitProducerIdRequest(
                transaction_timeout_ms=self.config.props.get("transaction.timeout.ms", 60_000)
            )
            if self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, req)):
                inflight = _InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
                inflight.is_init = True
                self._inflight[corr] = inflight
                self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
                tm.init_pending = True
                return
            self._connection_failed(node, now)
        self._init_backoff_until = now + self.config.retry_backoff_ms

    def _on_init_producer_id(self, resp: Any, now: int) -> None:
        tm = self._tm
        assert tm is not None
        tm.init_pending = False
        if isinstance(resp, InitProducerIdResponse) and resp.error_code == 0:
            tm.set_producer_id(resp.producer_id, resp.producer_epoch)
            for dq in self.accumulator.batches.values():
                for b in dq:
                    b.base_sequence = -1  # a new producer id starts every partition at sequence 0
            return
        code = getattr(resp, "error_code", -1)
        self.log("init_producer_id_failed", error_code=code)
        self._init_backoff_until = now + self.config.retry_backoff_ms
        self._wakeup.schedule(self._init_backoff_until)

    def _sequence_error(self, b: ProducerBatch, code: int, now: int) -> bool:
        """Handle the produce errors that concern sequences; returns True when the batch is dealt with."""
        tm = self._tm
        assert tm is not None
        if code == DUPLICATE_SEQUENCE_NUMBER or (
            code == OUT_OF_ORDER_SEQUENCE_NUMBER and tm.already_acked(b)
        ):
            # The leader already has this batch but no longer remembers where: a success with no offset.
            tm.acked(b)
            self._complete(b, -1, -1, now)
            return True
        if code not in (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID):
            return False
        queued = self.accumulator.batches.get(b.tp, ())
        if code == OUT_OF_ORDER_SEQUENCE_NUMBER and tm.earlier_pending(b, queued):
            # Refused only because an earlier batch has not landed yet: retry after it (in order).
            b.in_flight = False
            self.accumulator.muted.discard(b.tp)
            self.accumulator.reenqueue(b, now)
            return True
        known_cause = b.tp in tm.unresolved or code == UNKNOWN_PRODUCER_ID
        tm.hole(b.tp)
        if known_cause and now - b.created_ms < self.config.delivery_timeout_ms:
            # The hole is a batch we gave up on: this one was refused, so it is not in the log and may
            # go again under the bumped epoch with a new sequence.
            b.in_flight = False
            self.accumulator.muted.discard(b.tp)
            self.accumulator.reenqueue(b, now)
            return True
        return False  # the leader lost our sequence state: Kafka fails the batch (and bumps the epoch)

    def _connection_failed(self, node: int, now: int) -> None:
        self._metrics["connection-failure-total"] += 1
        self._node_backoff[node] = now + RECONNECT_BACKOFF_MS
        self.metadata.request_update()

    def _disconnect(self, node: int, now: int, *, timed_out: bool) -> None:
        """Drop the connection to ``node``: every request in flight on it fails with NETWORK_EXCEPTION."""
        self.metadata.request_update()
        self._node_backoff[node] = now + RECONNECT_BACKOFF_MS
        for corr in [c for c, r in self._inflight.items() if r.node == node]:
            req = self._inflight.pop(corr)
            self._node_inflight[node] -= 1
            if req.is_init:
                self._tm.init_pending = False  # type: ignore[union-attr]
                if self._txn:
                    tm = self._tm
                    assert tm is not None
                    tm.coordinator = -1  # find it again: it may have moved
                    if tm.op is not None and "group_coordinator" in tm.op:
                        tm.op["group_coordinator"] = -1
                continue
            if req.is_metadata:
                self._meta_inflight = None
                continue
            for b in req.batches or ():
                if b.done:
                    continue
                if timed_out:
                    b.maybe_written = True  # the broker may have appended it and only the answer was lost
                err = NetworkError(
                    f"Disconnected from node {node} due to timeout"
                    if timed_out
                    else f"Disconnected from node {node}"
                )
                self._retry_or_fail(b, err, now, 13)

    # --------------------------------------------------------------------------------- responses

    def _on_metadata(self, resp: MetadataResponse, now: int) -> None:
        meta = self.metadata
        meta.update(resp, now)
        self._meta_backoff_until = now + self.config.retry_backoff_ms
        self._node_backoff.clear()
        if self._waiting:
            self._place_waiting(now, resp)

    def _place_waiting(self, now: int, resp: MetadataResponse | None = None) -> None:
        """Append the waiting sends whose partition is known now, in order; once one is short of memory,
        it and every later one wait for memory (their senders would still be blocked in Kafka)."""
        meta = self.metadata
        waiting, self._waiting = self._waiting, []
        self._mem_waiting = 0
        short = False
        for w in waiting:
            seq, topic, partition, key, value, headers, ts, callback, fut, _deadline, _mem = w
            info = meta.topic(topic)
            if resp is not None and info is None and meta.topic_errors.get(topic) is not None:
                code = next((t.error_code for t in resp.topics if t.name == topic), 0)
                if code in FATAL_TOPIC_ERRORS:
                    exc_type = error_for_code(code) or KafkaError
                    self._fail_waiting(w, exc_type(f"topic {topic}"))
                    continue
            cache = self._topic_cache(topic)
            if cache is None or (partition is not None and partition >= cache.n):
                w[10] = False
                self._waiting.append(w)
                continue
            if not short:
                try:
                    self._append(cache, seq, topic, partition, key, value, headers, ts, callback, fut, now)
                    continue
                except _NoMemory:
                    short = True
            w[10] = True
            self._mem_waiting += 1
            self._waiting.append(w)

    def _on_produce_response(self, req: _InFlight, resp: ProduceResponse, now: int) -> None:
        by_tp = {p.tp: p for p in resp.partitions}
        for b in req.batches or ():
            self.accumulator.muted.discard(b.tp)
            if b.done:
                continue  # expired while in flight (delivery.timeout.ms): the answer comes too late
            b.in_flight = False
            pr = by_tp.get(b.tp)
            if pr is None:
                self._retry_or_fail(b, NetworkError(f"no response for {b.tp}"), now, 13)
                continue
            code = pr.error_code
            if code == 0:
                if self._tm is not None:
                    self._tm.acked(b)
                self._complete(b, pr.base_offset, pr.log_append_time_ms, now)
                continue
            if self._tm is not None and b.base_sequence >= 0 and self._sequence_error(b, code, now):
                continue
            exc_type = error_for_code(code) or KafkaError
            msg = pr.error_message or f"{b.tp} on node {req.node}"
            if code in MAYBE_WRITTEN_CODES:
                b.maybe_written = True
            if code == MESSAGE_TOO_LARGE and b.record_count > 1:
                self._split(b, now)
                continue
            self._retry_or_fail(b, exc_type(msg), now, code)

    def _split(self, b: ProducerBatch, now: int) -> None:
        """Kafka's splitAndReenqueue: re-batch by ``batch.size``; a batch made by a split is halved
        instead (KAFKA-8350), else a batch.size above the broker's limit would split into itself forever."""
        self._metrics["batch-split-total"] += 1
        if self._compression and b.buffer is not None and b.records_bytes:
            # Kafka resets the topic's estimate to the ratio this batch really had (at least 1).
            actual = (len(b.buffer) - BATCH_HEADER_SIZE) / b.records_bytes
            self.accumulator.ratios.reset(b.tp.topic, self._compression, max(1.0, actual))
        limit = max(b.max_record_size(), b.size // 2) if b.is_split else self._batch_size
        children = b.split(now, limit)
        self._release(b)  # the children are built outside the pool, as Kafka's are
        if self._history_on:
            self._batches.extend(children)
        if self._tm is not None and b.base_sequence >= 0:
            # The children cover the parent's sequence range exactly, so they keep it (as Kafka's do):
            # queued in sequence order, each goes as a retry, alone, so they reach the log in order.
            self._tm.replace(b, children)
            for child in children:
                self.accumulator.reenqueue(child, now)
            return
        self.accumulator.requeue_split(b, children)

    def _retry_or_fail(self, b: ProducerBatch, err: KafkaError, now: int, code: int) -> None:
        b.in_flight = False
        self.accumulator.muted.discard(b.tp)
        cfg = self.config
        if (
            err.retriable
            and b.attempts <= cfg.retries
            and now - b.created_ms < cfg.delivery_timeout_ms
            and not self._closed
        ):
            self._metrics["record-retry-total"] += b.record_count
            self.log("retry", tp=str(b.tp), error=err.name, attempt=b.attempts)
            if code in INVALID_METADATA_CODES:
                self.metadata.request_update()
            self.accumulator.reenqueue(b, now)
            return
        self._fail_batch(b, err, now)

    def _expire(self, now: int) -> None:
        limit = self.config.delivery_timeout_ms
        for b in self.accumulator.expired(now):
            self._fail_batch(b, self._expiry_error(b, now), now)
        for req in self._inflight.values():
            for b in req.batches or ():
                if not b.done and now - b.created_ms >= limit:
                    b.maybe_written = True
                    self.accumulator.muted.discard(b.tp)
                    self._fail_batch(b, self._expiry_error(b, now), now)

    @staticmethod
    def _expiry_error(b: ProducerBatch, now: int) -> RequestTimedOutError:
        return RequestTimedOutError(
            f"Expiring {b.record_count} record(s) for {b.tp}:{now - b.created_ms} ms has passed since "
            "batch creation"
        )

    def _expire_waiting(self, now: int) -> None:
        if not self._waiting:
            return
        keep = []
        limit = self.config.max_block_ms
        for w in self._waiting:
            if w[9] > now:
                keep.append(w)
            elif w[10]:
                self._mem_waiting -= 1
                self._fail_waiting(w, self._exhausted(max(self._batch_size, len(w[4] or b""))))
            elif w[2] is not None and (info := self.metadata.topic(w[1])) is not None:
                self._fail_waiting(
                    w,
                    RequestTimedOutError(
                        f"Partition {w[2]} of topic {w[1]} with partition count {info.num_partitions} is "
                        f"not present in metadata after {limit} ms."
                    ),
                )
            else:
                self._fail_waiting(
                    w, RequestTimedOutError(f"Topic {w[1]} not present in metadata after {limit} ms.")
                )
        self._waiting = keep

    # ------------------------------------------------------------------------------- completion

    def _release(self, b: ProducerBatch) -> None:
        """Give a finished batch's buffer.memory back (Kafka's deallocate)."""
        if b.pooled:
            self._pool_free += b.pooled
            b.pooled = 0

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int, now: int) -> None:
        self._release(b)
        b.base_offset = base_offset
        b.log_append_time = log_append_time
        b.done = True
        b.in_flight = False
        self._run_callbacks(b)

    def _fail_batch(self, b: ProducerBatch, err: KafkaError, now: int) -> None:
        if self._tm is not None and b.base_sequence >= 0:
            self._tm.failed(b)
        self._release(b)
        b.error = err
        b.done = True
        b.in_flight = False
        self._metrics["record-error-total"] += b.record_count
        self.log("batch_failed", tp=str(b.tp), error=err.name, records=b.record_count)
        self._run_callbacks(b)

    def _run_callbacks(self, b: ProducerBatch) -> None:
        if not b.callbacks:
            return
        err = b.error
        failed = RecordMetadata(b.tp.topic, b.tp.partition, -1, -1) if err else None
        for index, cb in b.callbacks:
            try:
                cb(failed or b.metadata(index), err)
            except Exception as exc:  # a user callback must not break the sender (Kafka logs it)
                self.log("callback_error", tp=str(b.tp), error=repr(exc))

    def _fail_early(
        self,
        seq: int,
        topic: str,
        partition: int | None,
        value: bytes | None,
        err: KafkaError,
        callback: Callback | None,
    ) -> FutureRecordMetadata:
        """A send that failed before reaching a batch; ``partition`` None (or -1) when none was chosen."""
        if partition is None:
            partition = -1
        fut = FutureRecordMetadata(None, 0, topic)
        fut._error = err
        self._metrics["record-error-total"] += 1
        if self._history_on:
            self._early.append(
                SendRecord(value, topic, partition, FAILED, None, self.acks, err.name, self.client_id, seq)
            )
        if callback is not None:
            try:
                callback(RecordMetadata(topic, partition, -1, -1), err)
            except Exception as exc:
                self.log("callback_error", topic=topic, error=repr(exc))
        return fut

    def _fail_waiting(self, w: list, err: KafkaError) -> None:
        seq, topic, partition, _k, value, _h, _ts, callback, fut, _d, _m = w
        failed = self._fail_early(seq, topic, partition, value, err, callback)
        fut._error = failed._error


def _to_bytes(obj: Any) -> bytes:
    if isinstance(obj, str):
        return obj.encode()
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj)
    raise TypeError(
        f"cannot send {type(obj).__name__}: pass bytes or str, or set key.serializer/value.serializer"
    )
