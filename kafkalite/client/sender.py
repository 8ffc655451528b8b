"""The producer's network side (Kafka's ``Sender``): one pass of its loop per wake-up of the producer node.

A pass expires what has waited too long (requests past ``request.timeout.ms``, batches past
``delivery.timeout.ms``, sends that found no metadata or memory within ``max.block.ms``), asks for
metadata when a topic or a leader is unknown or the metadata is old, lets the ``TransactionManager`` send
its next request, and drains the accumulator: each broker that leads a ready partition gets one
``ProduceRequest`` with one batch per partition, never more than
``max.in.flight.requests.per.connection`` requests outstanding per broker.

Answers come back through ``on_message``: a retriable error puts the batch back at the head of its
partition (after ``retry.backoff.ms``, growing up to ``retry.backoff.max.ms``) and, for stale-metadata
errors, asks for new metadata; a missing answer drops the connection after ``request.timeout.ms`` and
every request in flight on it is retried (without idempotence, that is how duplicates arise);
``MESSAGE_TOO_LARGE`` splits a multi-record batch; sequence errors go to the ``TransactionManager``'s rules.

The sender works for one ``Producer`` and reads its configuration, accumulator, metadata and the sends
still waiting (``Producer._waiting``) through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.client.accumulator import ProducerBatch, RecordMetadata
from kafkalite.client.partitioner import DefaultPartitioner
from kafkalite.client.transaction_manager import (
    DUPLICATE_SEQUENCE_NUMBER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
)
from kafkalite.errors import KafkaError, NetworkError, RequestTimedOutError, error_for_code
from kafkalite.protocol import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
)
from kafkalite.records import BATCH_HEADER_SIZE

if TYPE_CHECKING:
    from kafkalite.client.producer import Producer

# Errors meaning "your metadata is stale" (Kafka's InvalidMetadataException family): refresh, then retry.
INVALID_METADATA_CODES = frozenset({3, 5, 6, 13, 56, 74, 75})
# Errors after which the batch may be in the log although it failed (the checker must not call it lost).
MAYBE_WRITTEN_CODES = frozenset({7, 20})
MESSAGE_TOO_LARGE = 10
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms default


class InFlight:
    """One request sent and not yet answered (produce, metadata, or a producer-id/transactional one)."""

    __slots__ = ("corr", "node", "batches", "deadline", "sent_ms", "is_metadata", "is_init")

    def __init__(self, corr: int, node: int, batches: list[ProducerBatch] | None, deadline: int, now: int):
        self.corr = corr
        self.node = node
        self.batches = batches
        self.deadline = deadline
        self.sent_ms = now
        self.is_metadata = batches is None
        self.is_init = False  # an InitProducerId or transactional request (batches is None too)


class Sender:
    """Requests in flight, per-broker backoff and latency, and the loop that drains the accumulator."""

    def __init__(self, producer: Producer) -> None:
        self._p = producer
        self.config = producer.config
        self.accumulator = producer.accumulator
        self.metadata = producer.metadata
        self._metrics = producer._metrics
        self._tm = producer._tm
        self._txn = producer._txn
        self._inflight: dict[int, InFlight] = {}
        self._node_inflight: dict[int, int] = {}
        self.node_backoff: dict[int, int] = {}
        self._node_latency: dict[int, tuple[int, int]] = {}  # broker -> (last ready, last able to send)
        self._meta_inflight: InFlight | None = None
        self._meta_backoff_until = 0
        self.init_backoff_until = 0
        self._corr = 0

    def crash(self) -> None:
        """Everything in flight is forgotten (the node's memory is gone)."""
        self._inflight.clear()
        self._node_inflight.clear()
        self._meta_inflight = None

    # ------------------------------------------------------------------------------------ the loop

    def run(self, now: int) -> None:
        """One pass of Kafka's Sender loop."""
        p = self._p
        if p._closed:
            return
        acc = self.accumulator
        meta = self.metadata
        # Timeouts first: missing responses, then batches past delivery.timeout.ms.
        late = []
        for req in self._inflight.values():
            if req.deadline <= now:
                late.append(req)
        for req in late:
            if req.corr in self._inflight:
                self._metrics["request-timeout-total"] += 1
                p.log("request_timeout", broker=req.node, correlation_id=req.corr)
                self._disconnect(req.node, now, timed_out=True)
        self._expire(now)
        p._expire_waiting(now)
        if p._mem_waiting:
            p._place_waiting(now)
        # Metadata: topics waiting for it, unknown leaders, explicit requests, max age.
        nodes, next_ready, unknown = acc.ready(meta.leader_for, now)
        if unknown:
            meta.request_update()
        # An idle producer refreshes too, as Kafka's Sender does on every poll: it learns of new partitions
        # (and moved leaders) before its next send, not with it.
        if meta.wanted and meta.update_due(now):
            self._maybe_send_metadata(now)
        if isinstance(p.partitioner, DefaultPartitioner) and p.partitioner.adaptive:
            self._update_load_stats()
        tm = self._tm
        gate = None
        if tm is not None:
            gate = tm.gate
            if tm.bump_pending:
                tm.maybe_bump(acc.batches)
            if self._txn:
                tm.send_next(self, now)
            elif not tm.has_producer_id and self.has_work():
                self._maybe_send_init_producer_id(now)
        max_in_flight = self.config.max_in_flight
        for node in sorted(nodes):
            # Kafka's node latency stats: when a broker has batches ready, note whether it can take them.
            busy = self._node_inflight.get(node, 0) >= max_in_flight
            backing_off = self.node_backoff.get(node, 0) > now
            drained = self._node_latency.get(node, (now, now))[1] if busy or backing_off else now
            self._node_latency[node] = (now, drained)
            if busy:
                continue
            if backing_off:
                at = self.node_backoff[node]
                next_ready = at if next_ready is None else min(next_ready, at)
                continue
            # Like the Sender looping, keep sending to this broker while it may take more requests.
            while self._node_inflight.get(node, 0) < max_in_flight:
                batches = acc.drain(
                    self._partitions_led_by, node, p._max_request_size, p._compression, now, gate
                )
                if not batches:
                    break
                self._send_produce(node, batches, now)
                if self.node_backoff.get(node, 0) > now:
                    break  # the connection just failed
                if not acc.node_ready(self._partitions_led_by(node), now):
                    break  # what is left lingers: Kafka's next ready() check would not pick it
        if acc.flushing and p.idle():
            acc.flushing = False
        self._schedule_next(now, next_ready)

    def _schedule_next(self, now: int, next_ready: int | None) -> None:
        p = self._p
        cands = [] if next_ready is None else [next_ready]
        exp = self.accumulator.next_expiry_ms()
        if exp is not None:
            cands.append(exp)
        delivery_timeout = self.config.delivery_timeout_ms
        for r in self._inflight.values():
            cands.append(r.deadline)
            oldest = None
            for b in r.batches or ():
                if not b.done and (oldest is None or b.created_ms < oldest):
                    oldest = b.created_ms
            if oldest is not None:
                cands.append(oldest + delivery_timeout)
        if p._waiting:
            cands.append(min(w[9] for w in p._waiting))
        meta = self.metadata
        if self._meta_inflight is None and meta.wanted:
            if meta.need_update:
                cands.append(max(self._meta_backoff_until, now + 1))
            else:
                age = meta.next_age_refresh_ms()
                if age is not None:
                    cands.append(age)
        if cands:
            p._wakeup.schedule(max(min(cands), now))

    def has_work(self) -> bool:
        return self.accumulator.has_unsent() or self.has_produce_inflight()

    def has_produce_inflight(self) -> bool:
        return any(not r.is_metadata for r in self._inflight.values())

    def _partitions_led_by(self, node: int) -> list[TopicPartition]:
        leader_for = self.metadata.leader_for
        led = []
        for tp, dq in self.accumulator.batches.items():
            if dq and leader_for(tp) == node:
                led.append(tp)
        return led

    def _update_load_stats(self) -> None:
        """Queue sizes for adaptive partitioning, gathered as Kafka's ``partitionReady`` does: only once
        every partition of the topic has had a batch (else choices stay uniform), over the partitions
        with a leader, leaving out those whose leader has had batches ready but could not take them
        for longer than ``partitioner.availability.timeout.ms`` (when that is set)."""
        p = self._p
        partitioner = p.partitioner
        batches = self.accumulator.batches
        timeout = partitioner.availability_timeout_ms
        leader_for = self.metadata.leader_for
        for topic in self.metadata.wanted:
            cache = p._cache.get(topic)
            if cache is None:
                continue
            if cache.n < 2:  # one partition: nothing to weigh (what the loop below would conclude)
                partitioner.update_partition_load_stats(topic, None)
                continue
            entries = [tp for tp in cache.tps if tp in batches]
            if len(entries) < cache.n:
                partitioner.update_partition_load_stats(topic, None)
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
            partitioner.update_partition_load_stats(topic, sizes + [0] * pad, ids + [-1] * pad, len(ids))

    # ------------------------------------------------------------------------------------ requests

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _send(self, node: int, corr: int, req: Any) -> bool:
        p = self._p
        return p.net.send(p.node_id, node, RequestEnvelope(corr, p.client_id, req))

    def _send_produce(self, node: int, batches: list[ProducerBatch], now: int) -> None:
        cfg = self.config
        acks = self._p.acks
        req = ProduceRequest(
            acks=acks,
            timeout_ms=cfg.request_timeout_ms,
            partitions=tuple(ProducePartition(tp=b.tp, records=b.buffer or b"") for b in batches),
        )
        corr = self._next_corr()
        self._metrics["request-total"] += 1
        self._metrics["batch-bytes-total"] += sum(len(b.buffer or b"") for b in batches)
        if cfg.max_in_flight == 1:
            for b in batches:
                self.accumulator.muted.add(b.tp)  # guarantee order: one batch per partition in flight
        if not self._send(node, corr, req):
            self._connection_failed(node, now)
            for b in batches:
                self._retry_or_fail(b, NetworkError(f"Connection to node {node} failed"), now, 13)
            return
        if acks == 0:
            # No response will come: Kafka completes acks=0 batches as soon as the request is sent.
            for b in batches:
                self._complete(b, -1, -1, now)
            return
        inflight = InFlight(corr, node, batches, now + cfg.request_timeout_ms, now)
        self._inflight[corr] = inflight
        self._node_inflight[node] = self._node_inflight.get(node, 0) + 1

    def _maybe_send_metadata(self, now: int) -> None:
        if self._meta_inflight is not None or now < self._meta_backoff_until:
            return
        meta = self.metadata
        nodes = meta.nodes()
        # Kafka's leastLoadedNode: fewest requests in flight, from a random start, skipping failed nodes.
        rng = self._p._rng
        start = rng.randrange(len(nodes)) if rng is not None else 0
        order = nodes[start:] + nodes[:start]
        order.sort(key=lambda n: self._node_inflight.get(n, 0))  # stable: ties keep the random order
        req = MetadataRequest(topics=tuple(meta.wanted))
        for node in order:
            if self.node_backoff.get(node, 0) > now:
                continue
            corr = self._next_corr()
            if self._send(node, corr, req):
                self._metrics["metadata-request-total"] += 1
                inflight = InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
                self._inflight[corr] = inflight
                self._meta_inflight = inflight
                self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
                return
            self._connection_failed(node, now)
        self._meta_backoff_until = now + self.config.retry_backoff_ms

    def _maybe_send_init_producer_id(self, now: int) -> None:
        """Ask a broker for a producer id (Kafka sends InitProducerId to the least loaded node)."""
        tm = self._tm
        if tm is None or tm.init_pending or now < self.init_backoff_until:
            return
        for node in self.metadata.nodes():
            if self.node_backoff.get(node, 0) > now:
                continue
            corr = self._next_corr()
            req = InitProducerIdRequest(
                transaction_timeout_ms=self.config.props.get("transaction.timeout.ms", 60_000)
            )
            if self._send(node, corr, req):
                inflight = InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
                inflight.is_init = True
                self._inflight[corr] = inflight
                self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
                tm.init_pending = True
                return
            self._connection_failed(node, now)
        self.init_backoff_until = now + self.config.retry_backoff_ms

    def send_txn(self, node: int, req: Any, now: int) -> bool:
        """Send a transactional request for the ``TransactionManager``; False when ``node`` is unreachable."""
        corr = self._next_corr()
        tm = self._tm
        assert tm is not None
        if not self._send(node, corr, req):
            self._connection_failed(node, now)
            tm.unreachable(node)
            self._txn_backoff(now)
            return False
        inflight = InFlight(corr, node, None, now + self.config.request_timeout_ms, now)
        inflight.is_init = True
        self._inflight[corr] = inflight
        self._node_inflight[node] = self._node_inflight.get(node, 0) + 1
        tm.init_pending = True
        return True

    def _txn_backoff(self, now: int) -> None:
        self.init_backoff_until = now + self.config.retry_backoff_ms
        self._p._wakeup.schedule(self.init_backoff_until)

    def _connection_failed(self, node: int, now: int) -> None:
        self._metrics["connection-failure-total"] += 1
        self.node_backoff[node] = now + RECONNECT_BACKOFF_MS
        self.metadata.request_update()

    def _disconnect(self, node: int, now: int, *, timed_out: bool) -> None:
        """Drop the connection to ``node``: every request in flight on it fails with NETWORK_EXCEPTION."""
        self.metadata.request_update()
        self.node_backoff[node] = now + RECONNECT_BACKOFF_MS
        for corr in [c for c, r in self._inflight.items() if r.node == node]:
            req = self._inflight.pop(corr)
            self._node_inflight[node] -= 1
            if req.is_init:
                tm = self._tm
                assert tm is not None
                tm.init_pending = False
                if self._txn:
                    tm.disconnected()
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

    # ----------------------------------------------------------------------------------- responses

    def on_message(self, msg: Any, now_ms: int) -> None:
        """An answer arrived: apply it, then run a pass of the loop."""
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
                if self._tm.handle_response(resp):  # type: ignore[union-attr]
                    self._txn_backoff(now_ms)
            else:
                self._on_init_producer_id(resp, now_ms)
        elif req.is_metadata:
            self._meta_inflight = None
            if isinstance(resp, MetadataResponse):
                self._on_metadata(resp, now_ms)
        elif isinstance(resp, ProduceResponse):
            self._on_produce_response(req, resp, now_ms)
        self.run(now_ms)

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
        self._p.log("init_producer_id_failed", error_code=code)
        self._txn_backoff(now)

    def _on_metadata(self, resp: MetadataResponse, now: int) -> None:
        self.metadata.update(resp, now)
        self._meta_backoff_until = now + self.config.retry_backoff_ms
        self.node_backoff.clear()
        p = self._p
        if p._waiting:
            p._place_waiting(now, resp)

    def _on_produce_response(self, req: InFlight, resp: ProduceResponse, now: int) -> None:
        by_tp = {p.tp: p for p in resp.partitions}
        tm = self._tm
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
                if tm is not None:
                    tm.acked(b)
                self._complete(b, pr.base_offset, pr.log_append_time_ms, now)
                continue
            if tm is not None and b.base_sequence >= 0 and self._sequence_error(b, code, now):
                continue
            exc_type = error_for_code(code) or KafkaError
            msg = pr.error_message or f"{b.tp} on node {req.node}"
            if code in MAYBE_WRITTEN_CODES:
                b.maybe_written = True
            if code == MESSAGE_TOO_LARGE and b.record_count > 1:
                self._split(b, now)
                continue
            self._retry_or_fail(b, exc_type(msg), now, code)

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

    def _split(self, b: ProducerBatch, now: int) -> None:
        """Kafka's splitAndReenqueue: re-batch by ``batch.size``; a batch made by a split is halved
        instead (KAFKA-8350), else a batch.size above the broker's limit would split into itself forever."""
        p = self._p
        self._metrics["batch-split-total"] += 1
        compression = p._compression
        if compression and b.buffer is not None and b.records_bytes:
            # Kafka resets the topic's estimate to the ratio this batch really had (at least 1).
            actual = (len(b.buffer) - BATCH_HEADER_SIZE) / b.records_bytes
            self.accumulator.ratios.reset(b.tp.topic, compression, max(1.0, actual))
        limit = max(b.max_record_size(), b.size // 2) if b.is_split else p._batch_size
        children = b.split(now, limit)
        p._release(b)  # the children are built outside the pool, as Kafka's are
        if p._history_on:
            p._batches.extend(children)
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
            and not self._p._closed
        ):
            self._metrics["record-retry-total"] += b.record_count
            self._p.log("retry", tp=str(b.tp), error=err.name, attempt=b.attempts)
            if code in INVALID_METADATA_CODES:
                self.metadata.request_update()
            self.accumulator.reenqueue(b, now)
            return
        self.fail_batch(b, err, now)

    def _expire(self, now: int) -> None:
        limit = self.config.delivery_timeout_ms
        for b in self.accumulator.expired(now):
            self.fail_batch(b, self._expiry_error(b, now), now)
        for req in self._inflight.values():
            for b in req.batches or ():
                if not b.done and now - b.created_ms >= limit:
                    b.maybe_written = True
                    self.accumulator.muted.discard(b.tp)
                    self.fail_batch(b, self._expiry_error(b, now), now)

    @staticmethod
    def _expiry_error(b: ProducerBatch, now: int) -> RequestTimedOutError:
        return RequestTimedOutError(
            f"Expiring {b.record_count} record(s) for {b.tp}:{now - b.created_ms} ms has passed since "
            "batch creation"
        )

    # ---------------------------------------------------------------------------------- completion

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int, now: int) -> None:
        self._p._release(b)
        b.base_offset = base_offset
        b.log_append_time = log_append_time
        b.done = True
        b.in_flight = False
        self._run_callbacks(b)

    def fail_batch(self, b: ProducerBatch, err: KafkaError, now: int) -> None:
        if self._tm is not None and b.base_sequence >= 0:
            self._tm.failed(b)
        p = self._p
        p._release(b)
        b.error = err
        b.done = True
        b.in_flight = False
        self._metrics["record-error-total"] += b.record_count
        p.log("batch_failed", tp=str(b.tp), error=err.name, records=b.record_count)
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
                self._p.log("callback_error", tp=str(b.tp), error=repr(exc))


__all__ = ["InFlight", "Sender"]
