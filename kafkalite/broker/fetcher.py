"""Kafka's ``ReplicaFetcherThread``, as a state machine: a follower pulling from one leader.

One fetcher per source broker holds the partitions this broker follows there. A partition starts in
*truncating* state: with leader epochs (KIP-101/KIP-279) the fetcher asks the leader OffsetForLeaderEpoch
for the end of the follower's latest epoch and truncates to ``min(that, own LEO)`` -- repeating when the
leader answers with an older epoch the follower must first locate in its own cache -- before fetching.
Without epochs (``kafkalite.truncate.by.leader.epoch=false``) the ReplicaManager has already truncated to
the high watermark and the partition starts fetching at once. Fetching sends one FetchRequest at a time
(``replica_id`` = own broker id, ``fetch_offset`` = LEO, ``current_leader_epoch``); the leader long-polls
it. Batches are appended as they are (``Log.append_as_follower``); the follower HW becomes
``min(leader HW, LEO)``. A fetch offset out of range at the leader *resets*: ListOffsets LATEST, and if the
leader's LEO is below ours we truncate to it; otherwise ListOffsets EARLIEST, and if the leader's log start
is above our LEO we empty the log and restart it there, else we keep it and fetch on from our LEO. Errors
back off ``replica.fetch.backoff.ms``; a request unanswered within ``replica.socket.timeout.ms`` is
abandoned and retried.

``ReplicaFetcherManager`` (Kafka's ``AbstractFetcherManager``) keeps the fetchers: a partition is added to
its leader's fetcher (created on demand) and removed from whichever holds it; a fetcher left without
partitions stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.broker.fetch_session import INITIAL_EPOCH, FetchSessionHandler
from kafkalite.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_ERROR,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    TopicPartition,
)
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

TRUNCATING, FETCHING, RESETTING, FAILED = "truncating", "fetching", "resetting", "failed"
_BYTES = (bytes, bytearray)


class ReplicaFetcherManager:
    """The fetchers of one broker, one per leader it follows partitions of."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def has(self, tp: TopicPartition, leader: int) -> bool:
        f = self.fetchers.get(leader)
        return f is not None and tp in f.partitions

    def add(
        self, tp: TopicPartition, leader: int, fetch_offset: int, leader_epoch: int, truncate: bool
    ) -> None:
        """Follow ``tp`` at ``leader`` from ``fetch_offset`` (``truncate``: find the divergence first)."""
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(self.rm, leader)
        f.add_partition(tp, fetch_offset, leader_epoch, truncate)

    def remove(self, tp: TopicPartition) -> None:
        for leader, f in list(self.fetchers.items()):
            f.remove_partition(tp)
            if f.is_empty():
                f.stop()
                del self.fetchers[leader]

    def shutdown(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()


@dataclass
class PartitionFetchState:
    tp: TopicPartition
    fetch_offset: int
    leader_epoch: int
    state: str
    backoff_until_ms: int = 0
    in_flight: bool = False
    # While resetting: the leader's LEO once ListOffsets LATEST answered, then EARLIEST is asked.
    reset_leader_end: int | None = None
    request: FetchPartition | None = None  # this partition's part of the last fetch built


class ReplicaFetcher:
    """Follower fetch loop towards ``leader_id``; driven by the ReplicaManager's responses and timers."""

    def __init__(self, rm: ReplicaManager, leader_id: int) -> None:
        self.rm = rm
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.fetch_in_flight: int | None = None  # correlation id
        self._wake_timer: int | None = None
        self.session = FetchSessionHandler()
        # The in-flight fetch's session epoch, and each partition's entry as the leader's session holds it
        # then (an incremental fetch names only what changed; the answer is about the whole session).
        self._in_flight_epoch = INITIAL_EPOCH
        self._in_flight_parts: dict[TopicPartition, FetchPartition] = {}

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, partitions={sorted(map(str, self.partitions))})"

    # ----- membership --------------------------------------------------------------------------------
    def add_partition(self, tp: TopicPartition, fetch_offset: int, leader_epoch: int, truncate: bool) -> None:
        self.partitions[tp] = PartitionFetchState(
            tp, fetch_offset, leader_epoch, TRUNCATING if truncate else FETCHING
        )
        self.run()

    def remove_partition(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def is_empty(self) -> bool:
        return not self.partitions

    def stop(self) -> None:
        self.partitions.clear()
        if self._wake_timer is not None:
            self.rm._cancel_timer(self._wake_timer)
            self._wake_timer = None
        self.fetch_in_flight = None

    # ----- the loop -------------------------------------------------------------------------------------
    def run(self) -> None:
        """Send whatever can be sent now: epoch queries for truncating partitions, then one fetch."""
        now = self.rm.clock.now_ms()
        wake = None
        for st in self.partitions.values():
            if st.backoff_until_ms > now:
                wake = st.backoff_until_ms if wake is None else min(wake, st.backoff_until_ms)
                continue
            if st.state == TRUNCATING and not st.in_flight:
                self._send_epoch_query(st)
            elif st.state == RESETTING and not st.in_flight:
                self._send_list_offsets(st)
        if self.fetch_in_flight is None:
            ready = []
            for st in self.partitions.values():
                if st.state == FETCHING and st.backoff_until_ms <= now:
                    ready.append(st)
            if ready:
                self._send_fetch(ready)
        if wake is not None and self._wake_timer is None:
            self._wake_timer = self.rm._set_timer(wake - now, self._on_wake)

    def _on_wake(self, _now_ms: int) -> None:
        self._wake_timer = None
        self.run()

    def _backoff(self, st: PartitionFetchState) -> None:
        st.backoff_until_ms = self.rm.clock.now_ms() + self.rm.config.replica_fetch_backoff_ms

    def _send_fetch(self, ready: list[PartitionFetchState]) -> None:
        cfg = self.rm.config
        parts = []
        for st in ready:
            p = self.rm.partition_or_none(st.tp)
            if p is None:
                continue
            log = p.log
            last_epoch = (
                log.leader_epoch_cache.latest_epoch if cfg.truncate_by_leader_epoch else UNDEFINED_EPOCH
            )
            fp = st.request
            if (
                fp is None
                or fp.fetch_offset != st.fetch_offset
                or fp.current_leader_epoch != st.leader_epoch
                or fp.last_fetched_epoch != last_epoch
                or fp.log_start_offset != log.log_start_offset
            ):
                # The same object while nothing changed: the session sends only partitions whose entry
                # is another object (and differs).
                fp = st.request = FetchPartition(
                    tp=st.tp,
                    fetch_offset=st.fetch_offset,
                    current_leader_epoch=st.leader_epoch,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=log.log_start_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                )
            parts.append(fp)
        if not parts:
            return
        session_id, epoch, changed, forgotten = self.session.build(parts)
        req = FetchRequest(
            replica_id=self.rm.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes,
            max_bytes=cfg.replica_fetch_response_max_bytes,
            session_id=session_id,
            session_epoch=epoch,
            partitions=changed,
            forgotten=forgotten,
        )
        self._in_flight_epoch = epoch
        self._in_flight_parts = self.session.sent
        self.fetch_in_flight = self.rm._send_request(
            self.leader_id, req, self, cfg.replica_socket_timeout_ms + cfg.replica_fetch_wait_max_ms
        )

    def _send_epoch_query(self, st: PartitionFetchState) -> None:
        p = self.rm.partition_or_none(st.tp)
        if p is None:
            return
        epoch = p.log.leader_epoch_cache.latest_epoch
        if epoch == UNDEFINED_EPOCH:
            # No epochs on this replica (empty or pre-epoch log): Kafka falls back to the high watermark.
            p.truncate_to(p.high_watermark, "no_leader_epoch_fallback_to_hw")
            self._start_fetching(st, p.log_end_offset)
            return
        self._query_epoch(st, epoch)

    def _query_epoch(self, st: PartitionFetchState, epoch: int) -> None:
        req = OffsetForLeaderEpochRequest(
            replica_id=self.rm.broker_id,
            partitions=(
                OffsetForLeaderEpochPartition(
                    tp=st.tp, leader_epoch=epoch, current_leader_epoch=st.leader_epoch
                ),
            ),
        )
        st.in_flight = True
        self.rm._send_request(self.leader_id, req, self, self.rm.config.replica_socket_timeout_ms)

    def _send_list_offsets(self, st: PartitionFetchState) -> None:
        ts = LATEST_TIMESTAMP if st.reset_leader_end is None else EARLIEST_TIMESTAMP
        req = ListOffsetsRequest(
            replica_id=self.rm.broker_id,
            partitions=(ListOffsetsPartition(tp=st.tp, timestamp=ts, current_leader_epoch=st.leader_epoch),),
        )
        st.in_flight = True
        self.rm._send_request(self.leader_id, req, self, self.rm.config.replica_socket_timeout_ms)

    def _start_fetching(self, st: PartitionFetchState, offset: int) -> None:
        st.state = FETCHING
        st.fetch_offset = offset
        st.in_flight = False
        st.reset_leader_end = None

    # ----- answers ---------------------------------------------------------------------------------------
    def on_timeout(self, cid: int, request: object) -> None:
        """The leader did not answer in time (link cut, leader paused): retry after the backoff."""
        if isinstance(request, FetchRequest):
            if self.fetch_in_flight == cid:
                self.fetch_in_flight = None
                self.session.reset()  # the leader may or may not have moved the session on
        else:
            for fp in getattr(request, "partitions", ()):
                st = self.partitions.get(fp.tp)
                if st is not None:
                    st.in_flight = False
                    st.reset_leader_end = None  # a reset starts over: the leader's LEO may have moved
                    self._backoff(st)
        self.run()

    def on_response(self, cid: int, request: object, response: object) -> None:
        if isinstance(response, FetchResponse):
            if self.fetch_in_flight != cid:
                return  # an answer after its timeout: the session has started over since
            self.fetch_in_flight = None
            self.session.on_response(self._in_flight_epoch, response.error_code, response.session_id)
            if response.error_code != NO_ERROR:
                # the session is gone (the leader restarted, or evicted it): a full fetch next
                self.rm._event("fetch_session_error", leader=self.leader_id, error_code=response.error_code)
            else:
                self._handle_fetch(self._in_flight_parts, response)
        elif isinstance(response, OffsetForLeaderEpochResponse):
            for r in response.partitions:
                self._handle_epoch_answer(r)
        elif isinstance(response, ListOffsetsResponse):
            asked = {lp.tp: lp for lp in request.partitions}
            for r in response.partitions:
                self._handle_reset_offset(r, asked.get(r.tp))
        self.run()

    def _handle_fetch(self, asked: dict[TopicPartition, FetchPartition], response: FetchResponse) -> None:
        """Apply an answer to the fetch whose session then held ``asked``."""
        for r in response.partitions:
            st = self.partitions.get(r.tp)
            fp = asked.get(r.tp)
            if st is None or st.state != FETCHING or fp is None or fp.fetch_offset != st.fetch_offset:
                continue  # partition moved on (new leader, truncation) since this fetch went out
            p = self.rm.partition_or_none(r.tp)
            if p is None:
                continue
            code = r.error_code
            if code == NO_ERROR:
                if r.diverging_epoch is not None:
                    st.state = TRUNCATING
                    self._truncate_to_epoch_end(st, r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
                    continue
                data = r.records if isinstance(r.records, _BYTES) else r.records.read()
                if data:
                    try:
                        self.rm._append_as_follower(p, data)
                    except CorruptRecordError as exc:
                        # Damaged in transit or at the leader: fetch the same offset again later.
                        self.rm._event("fetch_corrupt", tp=str(r.tp), leader=self.leader_id, error=str(exc))
                        self._backoff(st)
                        continue
                    except KafkaError as exc:
                        # The leader's data does not fit this log (e.g. a wrong base offset): stop
                        # replicating this partition until the controller sends a new LeaderAndIsr, as
                        # Kafka's fetcher marks a partition failed instead of stopping the broker.
                        st.state = FAILED
                        self.rm._event(
                            "partition_failed", tp=str(r.tp), leader=self.leader_id, error=str(exc)
                        )
                        continue
                    st.fetch_offset = p.log_end_offset
                p.update_follower_hw(r.high_watermark)
                # The leader's retention moved its log start: follow it (never past what we hold committed).
                start = min(r.log_start_offset, p.high_watermark)
                if start > p.log.log_start_offset:
                    p.log.delete_records(start)
            elif code == OffsetOutOfRangeError.code:
                st.state = RESETTING
                st.in_flight = False
                st.reset_leader_end = None
            elif code in (
                FencedLeaderEpochError.code,
                UnknownLeaderEpochError.code,
                NotLeaderOrFollowerError.code,
                UnknownTopicOrPartitionError.code,
            ):
                self._backoff(st)
            else:
                self.rm._event("fetch_error", tp=str(r.tp), leader=self.leader_id, error_code=code)
                self._backoff(st)

    def _handle_epoch_answer(self, r) -> None:
        st = self.partitions.get(r.tp)
        if st is None or st.state != TRUNCATING:
            return
        st.in_flight = False
        if r.error_code != NO_ERROR:
            self._backoff(st)
            return
        self._truncate_to_epoch_end(st, r.leader_epoch, r.end_offset)

    def _truncate_to_epoch_end(self, st: PartitionFetchState, leader_epoch: int, leader_end: int) -> None:
        """KIP-101/279: find where this log and the leader's agree, truncate there, then fetch."""
        p = self.rm.partition_or_none(st.tp)
        if p is None:
            return
        leo = p.log_end_offset
        if leader_end < 0:
            # The leader cannot place our epoch at all: only the high watermark is known to be shared.
            p.truncate_to(min(p.high_watermark, leo), "leader_epoch_unknown_to_leader")
            self._start_fetching(st, p.log_end_offset)
            return
        cache = p.log.leader_epoch_cache
        f_epoch, f_end = cache.end_offset_for(leader_epoch, leo)
        if leader_epoch == UNDEFINED_EPOCH or f_end < 0:
            # An offset without an epoch, or an epoch our cache cannot place (it holds no entries): the
            # leader's offset is the only bound left.
            self._truncate_and_fetch(
                st, p, leader_epoch, leader_end, min(leader_end, leo), "leader_epoch_unknown_to_follower"
            )
            return
        if f_epoch != leader_epoch:
            # The leader's epoch is not in our cache: cut back to the end of our largest older epoch and
            # ask again about that one (Kafka's multi-round truncation, KIP-279).
            p.truncate_to(min(f_end, leo), "leader_epoch_intermediate")
            st.state = TRUNCATING
            self._query_epoch(st, f_epoch)
            return
        self._truncate_and_fetch(st, p, leader_epoch, leader_end, min(f_end, leader_end, leo), "leader_epoch")

    def _truncate_and_fetch(
        self,
        st: PartitionFetchState,
        p: Partition,
        leader_epoch: int,
        leader_end: int,
        target: int,
        reason: str,
    ) -> None:
        """Cut the log at the truncation point found, log it, and fetch on from there."""
        p.truncate_to(target, reason)
        self.rm._event(
            "truncation_point",
            tp=str(st.tp),
            leader_epoch=leader_epoch,
            leader_end_offset=leader_end,
            to=target,
        )
        self._start_fetching(st, p.log_end_offset)

    def _handle_reset_offset(self, r, asked: ListOffsetsPartition | None) -> None:
        """Kafka's out-of-range handling: compare our LEO with the leader's LEO, then its log start."""
        st = self.partitions.get(r.tp)
        if st is None or st.state != RESETTING or not st.in_flight or asked is None:
            return
        expected = LATEST_TIMESTAMP if st.reset_leader_end is None else EARLIEST_TIMESTAMP
        if asked.timestamp != expected or asked.current_leader_epoch != st.leader_epoch:
            return  # an answer to an earlier reset (the partition was re-added since)
        st.in_flight = False
        if r.error_code != NO_ERROR:
            st.reset_leader_end = None
            self._backoff(st)
            return
        p = self.rm.partition_or_none(r.tp)
        if p is None:
            return
        leo = p.log_end_offset
        if st.reset_leader_end is None:
            if r.offset < leo:
                # The leader has less than us (an unclean election): drop our tail. Any divergence
                # below it stays, as in Kafka, where only leader epochs can find it.
                p.truncate_to(r.offset, "offset_out_of_range")
                self._start_fetching(st, p.log_end_offset)
            else:
                st.reset_leader_end = r.offset  # ask for the leader's log start next (run() sends it)
            return
        leader_start = r.offset
        if leader_start > leo:
            # Everything we hold is older than anything the leader still has: start over at its start.
            p.truncate_fully_and_start_at(leader_start, "offset_out_of_range_reset")
        # Otherwise the leader's LEO passed ours while we were out of range (new appends after an
        # unclean election): keep our log and fetch on from its end.
        self._start_fetching(st, max(leader_start, leo))
