"""The producer: Kafka's KafkaProducer as a SimNetwork node, with its ``Sender``, ``RecordAccumulator``
and ``TransactionManager``.

``send()`` picks a partition (explicit partition, else the partitioner: a key's murmur2 hash or the
built-in sticky partition), appends the record to the partition's open batch and returns a future. The
``Sender`` (``kafkalite.client.sender``) runs when a batch fills, when a linger, backoff or timeout timer
fires, and when a response arrives: it refreshes metadata, expires batches, sends the ready ones, retries
or fails them. ``MESSAGE_TOO_LARGE`` re-batches a multi-record batch by ``batch.size`` (a batch split
before is halved instead, KAFKA-8350) and fails a single record. Under acks=0 a batch is done once its
request is sent, with offset -1. The transactional calls block the caller until the coordinator answered;
the ``TransactionManager`` (``kafkalite.client.transaction_manager``) keeps their state and requests.

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
    TopicFuture,
    batch_size_upper_bound,
)
from kafkalite.client.metadata import FATAL_TOPIC_ERRORS, ClusterMetadata
from kafkalite.client.partitioner import DefaultPartitioner, create_partitioner
from kafkalite.client.send_history import FAILED, SendRecord, history_rows
from kafkalite.client.sender import Sender
from kafkalite.client.transaction_manager import TransactionManager
from kafkalite.client.wakeup import Wakeup
from kafkalite.config.producer import ProducerConfig
from kafkalite.errors import (
    BufferExhaustedError,
    InvalidTxnStateError,
    KafkaError,
    MessageTooLargeError,
    ProducerFencedError,
    RequestTimedOutError,
    error_for_code,
)
from kafkalite.net.sim import BaseNode, NodeId
from kafkalite.protocol import (
    MetadataResponse,
    OffsetCommitPartition,
    TopicPartition,
)
from kafkalite.records import BATCH_HEADER_SIZE, record_size
from kafkalite.records.record import MAX_RECORD_OVERHEAD
from kafkalite.records.varint import sizeof_varint

__all__ = ["FutureRecordMetadata", "Producer", "ProducerClosedError", "RecordMetadata"]


class ProducerClosedError(RuntimeError):
    """``send()`` after ``close()`` (Kafka's IllegalStateException)."""


class _NoMemory(Exception):
    """A new batch for ``tp`` needs ``need`` bytes of buffer.memory that could not be had."""

    def __init__(self, tp: TopicPartition, need: int) -> None:
        self.tp, self.need = tp, need


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
    full path, which checks them. The batch's size stays below ``cap``: the least of its write limit and
    what keeps the sticky partitioner from a forced switch. The bytes and sends taken this way reach the
    sticky state and the send counter when the entry is cooled (``Producer._cool``), so the per-record
    path updates one counter (the batch's size) instead of three. New metadata cools every entry
    (``ClusterMetadata.on_update``), so the per-record path does not compare metadata versions.
    """

    __slots__ = (
        "batch", "values", "stamps", "seqs", "sticky", "cap", "start_size", "start_len",
        "c", "lmin", "lmax", "idx_end", "ts_end",
    )  # fmt: skip

    def __init__(self, batch: ProducerBatch, sticky: Any, room: int, seqs: list | None) -> None:
        self.batch = batch
        self.values = batch.values
        self.stamps = batch.timestamps
        self.seqs = seqs  # None when the history is off: nothing reads per-record send numbers then
        self.sticky = sticky
        # The fast path appends while the batch's size stays below ``cap``: ``room`` bytes from now.
        self.start_size = batch.size
        self.cap = batch.size + room
        self.start_len = len(batch.values)
        self.c = self.lmin = self.lmax = self.idx_end = self.ts_end = 0


# batch_size_upper_bound of a null-key, header-less record, less its value and the value's length varint:
# the batch header, the most record overhead, and one byte each for the null key and the header count.
_VALUE_BOUND_OVERHEAD = BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD + 2


def _regime(hot: _HotBatch, index: int, now: int, vlen: int, max_record: int) -> bool:
    """Set ``hot``'s regime to the one a null-key, header-less record of ``vlen`` value bytes at
    ``index``, sent at ``now``, falls in; False (``hot`` unchanged) when it has none (a timestamp before
    the batch's first, or a value too large for ``send()``'s size check to be skipped)."""
    base_ts = hot.stamps[0]
    delta = now - base_ts
    if delta < 0:
        return False
    # A regime depends on the deltas only through their varint widths (both are >= 0, so zigzag is a
    # shift): the widths, the value length and the size limit key a cache of computed regimes.
    dw = ((delta << 1).bit_length() + 6) // 7 or 1
    iw = ((index << 1).bit_length() + 6) // 7 or 1
    key = (dw, iw, vlen, max_record)
    r = _REGIMES.get(key)
    if r is None:
        r = _REGIMES[key] = _compute_regime(dw, iw, vlen, max_record)
    if r is None:
        return False
    hot.c, hot.lmin, hot.lmax, idx_end, ts_span = r
    hot.idx_end = idx_end
    hot.ts_end = base_ts + ts_span
    return True


_REGIMES: dict[tuple[int, int, int, int], tuple[int, int, int, int, int] | None] = {}


def _compute_regime(
    delta_width: int, index_width: int, vlen: int, max_record: int
) -> tuple[int, int, int, int, int] | None:
    """(size less value length, least and most value length, first index and largest timestamp delta
    past the regime) for records whose deltas have these varint widths, or None."""
    if len(_REGIMES) > 4096:
        _REGIMES.clear()  # many value sizes: recomputing is cheap
    # Attributes, null key and header count take a byte each; the other fields are varints.
    body = 3 + delta_width + index_width + sizeof_varint(vlen) + vlen
    fixed = body - vlen
    # Value lengths that keep the length varint and the body-length varint as wide as now, and that
    # pass send()'s size check (a null-key, header-less record's upper bound is _VALUE_BOUND_OVERHEAD
    # plus the value and its length varint).
    lmin = max(_lowest_same_width(vlen), _lowest_same_width(body) - fixed)
    lmax = min(
        _same_width(vlen), _same_width(body) - fixed, max_record - _VALUE_BOUND_OVERHEAD - sizeof_varint(vlen)
    )
    if not lmin <= vlen <= lmax:
        return None
    widest = (1 << (7 * index_width - 1)) - 1  # the largest index (and delta) of that varint width
    return fixed + sizeof_varint(body), lmin, lmax, widest + 1, (1 << (7 * delta_width - 1)) - 1


def _same_width(v: int) -> int:
    """The largest ``w >= v >= 0`` whose zigzag varint is as wide as ``v``'s."""
    return (1 << (7 * sizeof_varint(v) - 1)) - 1


def _lowest_same_width(v: int) -> int:
    """The smallest ``w <= v`` (``v >= 0``) whose zigzag varint is as wide as ``v``'s."""
    width = sizeof_varint(v)
    return 0 if width == 1 else 1 << (7 * (width - 1) - 1)


class Producer(BaseNode):
    """A Kafka producer on the simulated network (add it with ``net.add_node(client_id, producer)``).

    ``send`` is Kafka's record send and shadows ``BaseNode.send``; network sends go through ``net.send``
    (by the ``Sender``). The class is a little over 600 lines because the append path (``send``'s fast
    path, ``_append``, the hot-batch regime, memory and the sends waiting for metadata) stays here: the
    fast path reads this object's attributes directly, and a hop to another object per record would
    cost the throughput ``kafkalite bench produce`` measures.
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
        self.metadata.on_update = self._cool_all
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
        self._cache: dict[str, _TopicCache] = {}
        # Per topic: the open sticky batch send()'s fast path appends to.
        self._hot: dict[str, _HotBatch] = {}
        # Sends whose topic (or partition) is not in the metadata yet, or (w[10]) that wait for memory.
        self._waiting: list[list] = []
        self._pool_free = cfg.buffer_memory  # buffer.memory not held by an incomplete batch
        self._mem_waiting = 0  # entries of _waiting placed but short of memory
        self._batches: list[ProducerBatch] = []  # every batch, for the history
        self._early: list[SendRecord] = []  # sends that failed before reaching a batch
        self._closing = False
        self._closed = False
        tid = cfg["transactional.id"]
        self._tm = TransactionManager(self.log, tid) if cfg.idempotence else None
        self._txn = tid is not None
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
        self._sender = Sender(self)
        self._wakeup = Wakeup(self, self._sender.run)

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
        self._sender.on_message(msg, now_ms)

    def _run(self, now: int) -> None:
        """One pass of the sender's loop (what the producer's timer runs)."""
        self._sender.run(now)

    def on_crash(self) -> None:
        """A crashed client loses everything in memory; its pending sends stay unknown forever."""
        self._sender.crash()
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
            if (hot.lmin <= vlen <= hot.lmax and index < hot.idx_end and now <= hot.ts_end) or _regime(
                hot, index, now, vlen, self._max_record
            ):
                # (Out of its regime, the entry takes the one this record is in, when it has one: the
                # offset delta's varint widens at record 64, the timestamp delta's after 63 ms.)
                batch = hot.batch
                size = batch.size + hot.c + vlen  # c + vlen: the record's exact size in this regime
                if size < hot.cap:  # (a closed batch has a cap of 0)
                    batch.size = size
                    fut = FutureRecordMetadata()
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
        return self._send_full(topic, value, key, partition, headers, timestamp, callback)

    def _send_full(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Any,
        timestamp: int | None,
        callback: Callback | None,
    ) -> FutureRecordMetadata:
        """``send()`` off its fast path. A method of its own so that ``send()``'s frame stays small: its
        locals, and the closure cell ``_block``'s condition needs, are set up and torn down per call."""
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
            if not self._block(self._no_memory_waiters, deadline):
                return self._fail_early(
                    seq, topic, partition, value, self._exhausted(self._batch_size), callback
                )
            now = self.net._now
        cache = self._cache.get(topic)
        if cache is None or cache.version != self.metadata.version:
            cache = self._topic_cache(topic)
        if cache is None or (partition is not None and partition >= cache.n):
            fut = TopicFuture(None, 0, topic)
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
        self._txn_manager("begin_transaction").begin()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: Any,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit a consumer group's offsets as part of this transaction (Kafka's
        sendOffsetsToTransaction): they count only if the transaction commits, together with what it
        wrote. ``offsets`` are the next offsets to read, per input partition. ``group_id`` is the group's
        id, or the consumer's ``group_metadata()`` (its member id, generation or member epoch and instance
        id then let the coordinator refuse a commit from a member no longer in the group)."""
        if not isinstance(group_id, str):
            meta = group_id
            group_id, generation_id = meta.group_id, meta.generation_id
            member_id, group_instance_id = meta.member_id, meta.group_instance_id
        tm = self._txn_manager("send_offsets_to_transaction")
        if tm.txn_state != "IN_TRANSACTION":
            raise InvalidTxnStateError(
                f"Cannot send offsets in state {tm.txn_state}: call begin_transaction() first"
            )
        parts = tuple(OffsetCommitPartition(tp=tp, committed_offset=o) for tp, o in sorted(offsets.items()))
        op = {"kind": "offsets", "phase": "add", "group_id": group_id, "generation_id": generation_id,
              "member_id": member_id, "group_instance_id": group_instance_id, "partitions": parts,
              "group_coordinator": -1}  # fmt: skip
        self._txn_call(op, timeout_ms)
        tm.offsets_added = True

    def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Send everything of the transaction, then ask the coordinator to commit it."""
        self._end_transaction(True, timeout_ms)

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Drop what has not been sent, then ask the coordinator to abort the transaction."""
        tm = self._txn_manager("abort_transaction")
        if tm.txn_state in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            now = self.net._now
            for batch in self.accumulator.abort_all():
                self._sender.fail_batch(batch, KafkaError("Failing batch since transaction was aborted"), now)
        self._end_transaction(False, timeout_ms)

    def _txn_manager(self, call: str) -> TransactionManager:
        if not self._txn or self._tm is None:
            raise InvalidTxnStateError(f"Cannot call {call}: the producer has no transactional.id")
        if self._tm.txn_state == "FATAL_ERROR":
            raise ProducerFencedError(f"Cannot call {call}: the producer was fenced ({self._tm.op_error})")
        return self._tm

    def _end_transaction(self, commit: bool, timeout_ms: int | None) -> None:
        tm = self._txn_manager("commit_transaction" if commit else "abort_transaction")
        tm.start_end(commit)
        self.flush()
        limit = self.config.max_block_ms if timeout_ms is None else timeout_ms
        # Every send of the transaction answered first (a commit stops early if it can only be aborted).
        if not self.net.run_until(
            lambda: self.idle() or (commit and tm.txn_state == "ABORTABLE_ERROR"), limit
        ):
            raise RequestTimedOutError(f"Timeout expired after {limit} ms while flushing the transaction")
        if commit and tm.txn_state == "ABORTABLE_ERROR":
            tm.raise_abortable("commit")  # a partition could not join it while it flushed
        if tm.needs_end_txn():
            self._txn_call({"kind": "end", "commit": commit}, timeout_ms)
        tm.ended()

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

    def close(self, timeout_ms: int | None = None) -> None:
        """Stop taking records and send what is queued; ``timeout_ms=0`` fails queued records at once."""
        self._closing = True
        self._cool_all()  # send()'s fast path must not take records any more
        self.accumulator.closing = True
        if timeout_ms == 0:
            now = self.net._now
            for batch in self.accumulator.abort_all():
                self._sender.fail_batch(batch, KafkaError("Producer is closed forcefully."), now)
            for w in self._waiting:
                self._fail_waiting(w, KafkaError("Producer is closed forcefully."))
            self._waiting.clear()
            self._mem_waiting = 0
        self._wakeup.schedule(self.net._now)

    def idle(self) -> bool:
        """True when nothing is queued, waiting for metadata or in flight (handy for ``run_until``)."""
        return not (self._waiting or self.accumulator.has_unsent() or self._sender.has_produce_inflight())

    @property
    def closed(self) -> bool:
        return self._closing and self.idle()

    def partitions_for(self, topic: str) -> list[int] | None:
        info = self.metadata.topic(topic)
        return None if info is None else [p.partition for p in info.partitions]

    @property
    def history(self) -> list[SendRecord]:
        """Every send so far, in send order, with its outcome (see the module docstring)."""
        return history_rows(self._early, self._batches, self._waiting, self.client_id, self.acks)

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
                if deadline is None or not self._block_for_memory(need, deadline):
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
            return TopicFuture(batch, index, topic)
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

    # The conditions _block waits on are methods, not lambdas in the callers: a lambda would make
    # ``self`` a closure cell of send()'s and _append's frames, built on every call.
    def _no_memory_waiters(self) -> bool:
        return not self._mem_waiting

    def _block_for_memory(self, need: int, deadline: int) -> bool:
        return self._block(lambda: self._pool_free >= need, deadline)

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
        batch.close_for_appends()
        self._wakeup.schedule(now)
        return None, 0

    def _make_hot(
        self, topic: str, batch: ProducerBatch, sticky: Any, version: int, value: bytes, now: int
    ) -> None:
        """Open the fast path on ``batch`` for the regime of widths the next record falls in; not when
        the metadata changed since ``version`` (while the send waited for memory): the entry would keep
        partition info that metadata updates no longer reach (they end the entries there are)."""
        if version != self.metadata.version:
            return
        room = min(batch.limit - batch.size, 2 * sticky.sticky_batch_size - sticky.produced_bytes)
        hot = _HotBatch(batch, sticky, room, batch.seqs if self._history_on else None)
        if _regime(hot, len(batch.values), now, len(value), self._max_record):
            self._hot[topic] = hot
            batch.hot = hot

    def _cool_all(self) -> None:
        """End every fast-path entry (the producer closes, or new metadata came)."""
        for topic in list(self._hot):
            self._cool(topic)

    def _cool(self, topic: str) -> None:
        """End ``topic``'s fast-path entry, handing on what it took: bytes to the sticky partitioner,
        sends to the send counter."""
        hot = self._hot.pop(topic)
        hot.batch.hot = None
        hot.sticky._produced_bytes += hot.batch.size - hot.start_size
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

    # ------------------------------------------------------------------------- sends waiting

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

    # ----------------------------------------------------------------------------------- memory

    def _release(self, b: ProducerBatch) -> None:
        """Give a finished batch's buffer.memory back (Kafka's deallocate)."""
        if b.pooled:
            self._pool_free += b.pooled
            b.pooled = 0

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
        fut = TopicFuture(None, 0, topic)
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
