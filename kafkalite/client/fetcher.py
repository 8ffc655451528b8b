"""Fetching records and looking up offsets for a consumer (Kafka's ``Fetcher`` and ``OffsetFetcher``).

Fetching: each broker that leads fetchable partitions (assigned, not paused, with a position and no
records buffered) gets one ``FetchRequest`` covering them, at most one in flight per broker. The answer
is parsed here: records before the position (the front of a batch) and control batches are skipped;
under ``isolation.level=read_committed`` the batches of aborted transactions are dropped; a batch failing
its CRC check (``check.crcs``) ends what is returned and becomes the next ``poll``'s error; errors that
mean stale metadata refresh it and retry after ``retry.backoff.ms``; ``OFFSET_OUT_OF_RANGE`` resets the
position per ``auto.offset.reset``. ``collect_fetch`` hands ``poll`` up to ``max.poll.records``.

Every batch's CRC is checked when its answer arrives, but its records are built only as ``poll`` needs
them (``PendingBatches``), as Kafka's ``CompletedFetch`` decodes batch by batch while ``poll`` drains it:
the records of a whole fetch (tens of thousands) never sit decoded at once, which would keep Python's
garbage collector scanning them over and over.

Offsets: ``ListOffsetsRequest`` to the leader resets positions (``auto.offset.reset``, ``seek_to_*``) and
answers ``beginning_offsets``, ``end_offsets`` and ``offsets_for_times``.

It sends through the consumer's connections (``Consumer._send``) and keeps the partitions' state in the
consumer's ``SubscriptionState``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkalite.client.subscription_state import SubscriptionState, TopicPartitionState
from kafkalite.errors import (
    CorruptRecordError,
    KafkaError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    error_for_code,
)
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    TopicPartition,
)
from kafkalite.records import BatchHeader, Record, decode_batches, iter_batches, validate_batch

if TYPE_CHECKING:
    from kafkalite.client.consumer import Consumer, _InFlight

__all__ = ["Fetcher", "NoOffsetForPartitionError", "OffsetAndTimestamp"]

OFFSET_OUT_OF_RANGE = 1
# Errors meaning "your metadata is stale" (Kafka's InvalidMetadataException family, plus the epoch
# errors): refresh, then try again after retry.backoff.ms.
INVALID_METADATA_CODES = frozenset({3, 5, 6, 13, 56, 74, 75, 76})


class NoOffsetForPartitionError(Exception):
    """A partition has no position and ``auto.offset.reset`` is ``none`` (Kafka's NoOffsetForPartition).

    Client-side, like Kafka's: it has no wire error code, so it is not a ``KafkaError``."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(f"Undefined offset with no reset policy for partitions: {names}")


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times``'s answer for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class _Lookup:
    """A ListOffsets question about several partitions (a user call or the consumer's own resets)."""

    __slots__ = ("timestamps", "results", "errors", "inflight", "backoff")

    def __init__(self, timestamps: Mapping[TopicPartition, int]) -> None:
        self.timestamps = dict(timestamps)
        self.results: dict[TopicPartition, Any] = {}
        self.errors: dict[TopicPartition, KafkaError] = {}
        self.inflight: set[TopicPartition] = set()
        self.backoff: dict[TopicPartition, int] = {}

    @property
    def done(self) -> bool:
        return len(self.results) + len(self.errors) >= len(self.timestamps)


class PendingBatches:
    """The batches of one fetch answer still to decode for ``poll``: their positions in ``data`` and
    record counts, from index ``next`` on; records below ``min_offset`` (the fetch position) are skipped.
    ``built`` counts the records decoded so far."""

    __slots__ = ("data", "positions", "counts", "next", "min_offset", "built")

    def __init__(self, data: Any, positions: list[int], counts: list[int], min_offset: int) -> None:
        self.data = data
        self.positions = positions
        self.counts = counts
        self.next = 0
        self.min_offset = min_offset
        self.built = 0


class Fetcher:
    """The fetches and offset lookups of one ``Consumer``. See the module docstring."""

    def __init__(self, consumer: Consumer, subscriptions: SubscriptionState) -> None:
        self.c = consumer
        self.subs = subscriptions
        self.lookups: list[_Lookup] = []
        self.fetching: dict[int, int] = {}  # broker -> correlation id of its fetch in flight

    def collect_fetch(self) -> dict[TopicPartition, list[Record]]:
        """Take up to max.poll.records buffered records, rotating partitions so none starves."""
        room = self.c.config.max_poll_records
        out: dict[TopicPartition, list[Record]] = {}
        assigned = self.subs.assigned
        for tp in list(assigned):
            if room <= 0:
                break
            st = assigned[tp]
            if st.paused:
                continue
            if st.pending is not None and len(st.buffer) <= room:
                self._decode_pending(tp, st, room)
            if not st.buffer:
                continue
            take, st.buffer = st.buffer[:room], st.buffer[room:]
            room -= len(take)
            out[tp] = take
            st.position = st.buffer[0].offset if st.buffer else st.buffer_end
            # Move the partition to the back: the next poll starts with the others.
            del assigned[tp]
            assigned[tp] = st
        n = sum(len(v) for v in out.values())
        self.c._metrics["records-consumed-total"] += n
        return out

    def _decode_pending(self, tp: TopicPartition, st: TopicPartitionState, room: int) -> None:
        """Decode pending batches until more than ``room`` records are buffered (so the position after
        this poll is a buffered record's offset, as when the whole fetch was decoded at once) or none
        are left."""
        p = st.pending
        buf = st.buffer
        positions, counts, n = p.positions, p.counts, len(p.positions)
        i = p.next
        while len(buf) <= room and i < n:
            j, want = i, room + 1 - len(buf)
            while j < n and want > 0:
                want -= counts[j]
                j += 1
            chunk = positions[i:j]
            try:
                # CRCs were checked on arrival; what is left to fail is the records inside a batch.
                records = decode_batches(p.data, chunk, verify_crc=False, min_offset=p.min_offset)
            except CorruptRecordError as exc:
                records, end = self._records_before_corrupt(
                    tp, st, p.data, chunk, p.min_offset, exc, earlier=p.built > 0
                )
                buf += records
                st.buffer_end = end
                i = n
                break
            buf += records
            p.built += len(records)
            i = j
        p.next = i
        if i >= n:
            st.pending = None
            if not buf and st.buffer_end > st.position:
                st.position = st.buffer_end  # nothing at or after the position in those batches

    def offsets_by_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """ListOffsets for each partition, running the network until every answer is in."""
        c = self.c
        c._check_open()
        timeout = c.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        lookup = _Lookup({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        if not lookup.timestamps:
            return {}
        for tp in lookup.timestamps:
            c.metadata.add_topic(tp.topic)
        self.lookups.append(lookup)
        try:
            c._kick()
            c._block(lambda: lookup.done, timeout)
        finally:
            self.lookups.remove(lookup)
        if lookup.errors:
            raise next(iter(lookup.errors.values()))
        if not lookup.done:
            raise RequestTimedOutError(f"Failed to get offsets by times in {timeout}ms")
        return {tp: lookup.results[tp] for tp in lookup.timestamps}

    def on_disconnect(self, req: _InFlight) -> None:
        """A request of ours was lost with its connection: it will be sent again."""
        if req.kind == "fetch":
            self.fetching.pop(req.node, None)
        elif req.kind == "reset":
            for tp, gen in req.tps.items():
                st = self.subs.assigned.get(tp)
                if st is not None and st.generation == gen:
                    st.reset_inflight = False
        elif req.kind == "lookup":
            req.lookup.inflight.difference_update(req.tps)

    # ===== sending (called from the consumer's loop, in this order) =====================================
    def send_resets(self, now: int, wake: list[int]) -> None:
        """ListOffsets for partitions without a position: ``auto.offset.reset`` or a ``seek_to_*``."""
        c, cfg = self.c, self.c.config
        resets: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, st in self.subs.assigned.items():
            if st.position is not None or st.reset_inflight or st.error is not None or st.committed_fetch:
                continue
            ts = st.reset_ts
            if ts is None:
                policy = cfg.auto_offset_reset
                if policy == "none":
                    st.error = NoOffsetForPartitionError([tp])
                    continue
                ts = EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
                st.reset_ts = ts
            if st.backoff_until > now:
                wake.append(st.backoff_until)
                continue
            leader, _epoch = c._leader(tp)
            if leader < 0:
                c.metadata.request_update()
                continue
            if c._node_backoff.get(leader, 0) > now:
                wake.append(c._node_backoff[leader])
                continue
            resets.setdefault(leader, []).append((tp, ts))
        for node, items in sorted(resets.items()):
            self._send_list_offsets(node, items, now, None)

    def send_lookups(self, now: int, wake: list[int]) -> None:
        """ListOffsets for the user's lookups (beginning/end offsets, offsets_for_times)."""
        c = self.c
        for lookup in self.lookups:
            by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
            for tp, ts in lookup.timestamps.items():
                if tp in lookup.results or tp in lookup.errors or tp in lookup.inflight:
                    continue
                until = max(lookup.backoff.get(tp, 0), c._node_backoff.get(c._leader(tp)[0], 0))
                if until > now:
                    wake.append(until)
                    continue
                leader, _epoch = c._leader(tp)
                if leader < 0:
                    c.metadata.request_update()
                    continue
                by_node.setdefault(leader, []).append((tp, ts))
            for node, items in sorted(by_node.items()):
                self._send_list_offsets(node, items, now, lookup)

    def send_fetches(self, now: int, wake: list[int]) -> None:
        """One FetchRequest per leader for its fetchable partitions, at most one in flight per leader."""
        c = self.c
        fetches: dict[int, list[TopicPartition]] = {}
        for tp, st in self.subs.assigned.items():
            if (
                st.paused
                or st.position is None
                or st.buffer
                or st.pending is not None
                or st.error is not None
            ):
                continue
            if st.backoff_until > now:
                wake.append(st.backoff_until)
                continue
            leader, _epoch = c._leader(tp)
            if leader < 0:
                c.metadata.request_update()
                continue
            if leader in self.fetching:
                continue
            if c._node_backoff.get(leader, 0) > now:
                wake.append(c._node_backoff[leader])
                continue
            fetches.setdefault(leader, []).append(tp)
        for node, tps in sorted(fetches.items()):
            self._send_fetch(node, tps, now)

    def _send_fetch(self, node: int, tps: list[TopicPartition], now: int) -> None:
        c = self.c
        cfg = c.config
        parts = []
        sent = {}
        for tp in tps:
            st = self.subs.assigned[tp]
            _leader, epoch = c._leader(tp)
            parts.append(FetchPartition(tp=tp, fetch_offset=st.position, current_leader_epoch=epoch,
                                        partition_max_bytes=cfg.max_partition_fetch_bytes))  # fmt: skip
            sent[tp] = (st.position, st.generation)
        req = FetchRequest(
            max_wait_ms=cfg.fetch_max_wait_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.fetch_max_bytes,
            isolation_level=cfg.isolation_level,
            partitions=tuple(parts),
        )
        if c._send(node, req, "fetch", now, tps=sent):
            self.fetching[node] = c._corr
            c._metrics["fetch-total"] += 1

    def _send_list_offsets(
        self, node: int, items: list[tuple[TopicPartition, int]], now: int, lookup: _Lookup | None
    ) -> None:
        c = self.c
        parts = tuple(
            ListOffsetsPartition(tp=tp, timestamp=ts, current_leader_epoch=c._leader(tp)[1])
            for tp, ts in items
        )
        if lookup is None:
            tps = {tp: self.subs.assigned[tp].generation for tp, _ts in items}
            kind = "reset"
        else:
            tps = {tp: None for tp, _ts in items}
            kind = "lookup"
        # the consumer's isolation level bounds the answers too: under read_committed "latest" is the LSO
        req = ListOffsetsRequest(isolation_level=c.config.isolation_level, partitions=parts)
        if not c._send(node, req, kind, now, tps=tps, lookup=lookup):
            return
        c._metrics["list-offsets-total"] += 1
        for tp, _ts in items:
            if lookup is None:
                self.subs.assigned[tp].reset_inflight = True
            else:
                lookup.inflight.add(tp)

    # ===== answers ======================================================================================
    def _retry_later(self, tp: TopicPartition, code: int, now: int) -> None:
        c = self.c
        if code in INVALID_METADATA_CODES:
            c.metadata.request_update()
        st = self.subs.assigned.get(tp)
        if st is not None:
            st.backoff_until = now + c.config.retry_backoff_ms

    def on_fetch(self, req: _InFlight, resp: Any, now: int) -> None:
        c = self.c
        if self.fetching.get(req.node) == req.corr:
            del self.fetching[req.node]
        if not isinstance(resp, FetchResponse):
            return
        for pr in resp.partitions:
            tp = pr.tp
            st = self.subs.assigned.get(tp)
            sent = req.tps.get(tp)
            if st is None or sent is None or sent != (st.position, st.generation):
                continue  # unassigned, seeked or reset since: this answer is stale
            if pr.error_code:
                c._metrics["fetch-error-total"] += 1
                if pr.error_code == OFFSET_OUT_OF_RANGE:
                    self._offset_out_of_range(tp, st, sent[0], pr)
                elif pr.error_code == CorruptRecordError.code:
                    # The broker cannot even read the batch there: the application hears of it, as from
                    # a CRC check, and the position stays (seek past it to go on, as in Kafka).
                    st.error = CorruptRecordError(
                        f"Record batch for partition {tp} at offset {sent[0]} is invalid, cause: "
                        f"the broker answered CORRUPT_MESSAGE"
                    )
                    c.log("fetch_corrupt", tp=str(tp), offset=sent[0], broker=req.node)
                else:
                    c.log("fetch_error", tp=str(tp), error=pr.error_code, broker=req.node)
                    self._retry_later(tp, pr.error_code, now)
                continue
            st.hw = pr.high_watermark
            st.log_start = pr.log_start_offset
            data = pr.records
            if not isinstance(data, bytes | bytearray | memoryview):
                data = data.read()  # type: ignore[attr-defined]
            if not data:
                continue
            c._metrics["bytes-consumed-total"] += len(data)
            position = sent[0]
            end = position
            wanted = []
            # read_committed: the fetch lists the aborted transactions overlapping it; a producer's
            # transactional batches are dropped from its aborted transaction's first offset to its ABORT
            # marker (Kafka's Fetcher does the same walk).
            aborted = sorted(pr.aborted_transactions or (), key=lambda a: a.first_offset)
            aborting: set[int] = set()
            counts = []
            for pos, header in iter_batches(data):
                while aborted and aborted[0].first_offset <= header.base_offset + header.last_offset_delta:
                    aborting.add(aborted.pop(0).producer_id)
                if header.next_offset <= position:
                    if header.is_control:
                        aborting.discard(header.producer_id)
                    continue
                end = max(end, header.next_offset)
                if header.is_control:
                    aborting.discard(header.producer_id)
                    continue  # commit/abort markers: never returned, but the position moves past them
                if header.is_transactional and header.producer_id in aborting:
                    continue  # part of an aborted transaction
                wanted.append(pos)
                counts.append(header.records_count)
            if wanted and c.config.check_crcs:
                try:
                    for pos in wanted:
                        validate_batch(data, pos)
                except CorruptRecordError as exc:
                    records, end = self._records_before_corrupt(tp, st, data, wanted, position, exc)
                    if records:
                        st.buffer = records
                        st.buffer_end = end
                    elif end > position:
                        st.position = end
                    continue
            if wanted:
                # Records are built as poll takes them (see the module docstring).
                st.pending = PendingBatches(data, wanted, counts, position)
                st.buffer_end = end
            elif end > position:
                st.position = end  # only control batches (or nothing at or after the position)

    def _records_before_corrupt(
        self,
        tp: TopicPartition,
        st: TopicPartitionState,
        data: Any,
        wanted: list[int],
        position: int,
        exc: Exception,
        *,
        earlier: bool = False,
    ) -> tuple[list[Record], int]:
        """A batch failed its check: the records of the batches before it, and where they end. With none
        before it (nor ``earlier`` ones of the same fetch), the next poll raises Kafka's error naming the
        partition and the batch's offset."""
        c = self.c
        records: list[Record] = []
        for pos in wanted:
            try:
                records += decode_batches(data, [pos], verify_crc=True, min_offset=position)
            except CorruptRecordError as e:
                offset = max(position, BatchHeader.parse(data, pos).base_offset)
                if not records and not earlier:
                    cause = re.sub(r" (in batch )?at position \d+", "", e.message)  # of the fetched bytes
                    st.error = CorruptRecordError(
                        f"Record batch for partition {tp} at offset {offset} is invalid, cause: {cause}"
                    )
                    c.log("fetch_corrupt", tp=str(tp), offset=offset, error=e.message)
                return records, offset
        return records, position  # not reached: exc came from one of the batches

    def _offset_out_of_range(self, tp: TopicPartition, st: TopicPartitionState, offset: int, pr: Any) -> None:
        c = self.c
        policy = c.config.auto_offset_reset
        c.log("offset_out_of_range", tp=str(tp), offset=offset, policy=policy)
        if policy == "none":
            st.set_position(offset)
            st.error = OffsetOutOfRangeError(
                f"Fetch position {offset} is out of range for partition {tp} "
                f"(log start {pr.log_start_offset}, high watermark {pr.high_watermark})"
            )
            return
        c._metrics["offset-reset-total"] += 1
        st.set_position(None, EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP)

    def on_list_offsets(self, req: _InFlight, resp: ListOffsetsResponse, now: int) -> None:
        c = self.c
        answered = {pr.tp: pr for pr in resp.partitions}
        for tp, gen in req.tps.items():
            pr = answered.get(tp)
            if req.kind == "reset":
                st = self.subs.assigned.get(tp)
                if st is None or st.generation != gen:
                    continue
                st.reset_inflight = False
                if pr is None or pr.error_code:
                    code = -1 if pr is None else pr.error_code
                    self._retry_later(tp, code, now)
                    continue
                st.set_position(pr.offset)
                c.log("offset_reset", tp=str(tp), offset=pr.offset)
                continue
            lookup: _Lookup = req.lookup
            lookup.inflight.discard(tp)
            if pr is None or pr.error_code:
                code = -1 if pr is None else pr.error_code
                exc = error_for_code(code) or KafkaError
                if code in INVALID_METADATA_CODES or (pr is None) or exc.retriable:
                    c.metadata.request_update()
                    lookup.backoff[tp] = now + c.config.retry_backoff_ms
                else:
                    lookup.errors[tp] = exc(f"ListOffsets for {tp}")
                continue
            ts = lookup.timestamps[tp]
            if ts in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
                lookup.results[tp] = OffsetAndTimestamp(pr.offset, pr.timestamp, _epoch(pr.leader_epoch))
            elif pr.offset < 0:
                lookup.results[tp] = None
            else:
                lookup.results[tp] = OffsetAndTimestamp(pr.offset, pr.timestamp, _epoch(pr.leader_epoch))


def _epoch(e: int) -> int | None:
    return None if e < 0 else e
