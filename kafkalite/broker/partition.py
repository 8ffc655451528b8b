"""Kafka's ``Partition``: one replica of a topic-partition on one broker, as leader or follower.

The leader keeps, for every other replica, the state its fetches reveal (Kafka's ``Replica``: log end
offset, the leader's LEO at the previous fetch, ``lastCaughtUpTimeMs``), computes the high watermark as the
smallest LEO in the (maximal) ISR, which only moves forward, and decides which replicas should leave or
join the ISR. ISR changes are only *proposed* here (``pending_isr``, KIP-497; the ``AlterPartitionManager``
sends them): the controller's answer makes them real. A follower's high watermark is
``min(leader HW, own LEO)``.

As in Kafka, the leader's side of the requests that touch one replica is here too: the append with its
leader epoch after the min-ISR check (``append_records_to_leader``), whether a waiting acks=all produce is
done (``check_enough_replicas_reach_offset``), the read for a fetch with its epoch and divergence checks
(``read_records``), ListOffsets (``fetch_offset_for_timestamp``) and OffsetForLeaderEpoch
(``last_offset_for_leader_epoch``). The ``ReplicaManager`` finds the partition and answers the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalite.common.acks import Acks
from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from kafkalite.protocol import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_ERROR,
    AbortedTransaction,
    AlterPartitionResult,
    EpochEndOffset,
    FetchPartitionResponse,
    FetchRequest,
    ListOffsetsPartitionResponse,
    OffsetForLeaderEpochPartitionResponse,
    TopicPartition,
)
from kafkalite.protocol.api import EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP
from kafkalite.records import BATCH_HEADER_SIZE, BatchHeader
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH
from kafkalite.storage.log import Log

logger = logging.getLogger("kafkalite.broker")


@dataclass
class ReplicaState:
    """What the leader knows about one follower, from its fetches."""

    broker_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0


class Partition:
    """One replica. ``log`` is the local ``Log``; leader/follower state comes from LeaderAndIsr."""

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        *,
        broker_id: int,
        high_watermark: int = 0,
        record_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        self.pending_since_ms = 0
        self.leader_epoch_start_offset = -1
        self.remotes: dict[int, ReplicaState] = {}
        self.high_watermark = min(max(high_watermark, 0), log.log_end_offset)
        # record_event(kind, fields): the fields dict goes to the event log as it is (no re-packing).
        self._record_event = record_event or (lambda kind, fields: None)
        self._tp_name = str(tp)  # events name the partition several times per produced batch
        self._reported_corruption: set[tuple[str, int]] = set()

    # ----- views -----------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus replicas a pending expansion adds: what the HW must wait for (Kafka's rule)."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def remote_leo(self, replica: int) -> int:
        if replica == self.broker_id:
            return self.log_end_offset
        st = self.remotes.get(replica)
        return st.log_end_offset if st else -1

    def last_caught_up_ms(self, replica: int) -> int:
        st = self.remotes.get(replica)
        return st.last_caught_up_ms if st else -1

    def event(self, kind: str, **fields: Any) -> None:
        self._record_event(kind, {"tp": self._tp_name, **fields})

    # The two events of every replicated batch, each dict built at once rather than from keywords.
    def leo_event(self, replica: int, leo: int) -> None:
        """The event ``event("leo", replica=replica, leo=leo)`` logs."""
        self._record_event("leo", {"tp": self._tp_name, "replica": replica, "leo": leo})

    def hw_event(self, hw: int, old: int) -> None:
        """The event ``event("hw", replica=<this broker>, hw=hw, old=old)`` logs."""
        self._record_event("hw", {"tp": self._tp_name, "replica": self.broker_id, "hw": hw, "old": old})

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (
            f"Partition({self.tp}, {role}, epoch={self.leader_epoch}, isr={list(self.isr)}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset})"
        )

    # ----- state changes from the controller --------------------------------------------------------
    def apply_state(self, state: Any) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None

    def make_leader(self, state: Any, now_ms: int) -> None:
        """Become leader: stamp the new epoch's start offset, reset what we know about followers."""
        self.apply_state(state)
        leo = self.log_end_offset
        self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
        self.leader_epoch_start_offset = leo
        self.remotes = {
            r: ReplicaState(r, last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in self.replicas
            if r != self.broker_id
        }
        self.event(
            "become_leader", epoch=self.leader_epoch, isr=list(self.isr), leo=leo, hw=self.high_watermark
        )
        self.leo_event(self.broker_id, leo)

    def update_assignment(self, state: Any, now_ms: int) -> None:
        """A new ISR or replica set in the same leader term (KRaft writes a reassignment's added replicas
        without a leader epoch bump): what is known of the followers that stay is kept, an added one is
        tracked from now on, so its fetches can bring it into the ISR (Kafka's ``updateAssignmentAndIsr``)."""
        self.apply_state(state)
        self.remotes = {
            r: self.remotes.get(r) or ReplicaState(r, last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in self.replicas
            if r != self.broker_id
        }

    def make_follower(self, state: Any) -> None:
        self.apply_state(state)
        self.remotes = {}
        self.leader_epoch_start_offset = -1
        self.event("become_follower", leader=self.leader_id, epoch=self.leader_epoch, leo=self.log_end_offset)

    # ----- leader side ------------------------------------------------------------------------------
    def update_follower_fetch_state(
        self, replica: int, fetch_offset: int, log_start: int, now_ms: int
    ) -> bool:
        """Kafka's ``updateFollowerFetchState``: the follower's log end and log start offsets are the
        fetch's, its caught-up time follows Kafka's rule (``_note_fetch``). Whether the follower's log end
        or log start offset moved (only then can the HW or the low watermark)."""
        st = self.remotes.get(replica)
        if st is None:
            return False
        moved = log_start != st.log_start_offset
        self._note_fetch(st, fetch_offset, now_ms)
        st.log_start_offset = log_start
        if fetch_offset != st.log_end_offset:
            st.log_end_offset = fetch_offset
            self.leo_event(replica, fetch_offset)
            return True
        return moved

    def refresh_follower_fetch_state(
        self, replica: int, fetch_offset: int, log_start: int, now_ms: int
    ) -> bool:
        """``update_follower_fetch_state`` for a fetch at the place where ``replica``'s previous one left
        it (its log end and log start offsets): only the fetch times change, so neither the HW nor the
        low watermark can move. False, changing nothing, when the replica is elsewhere or unknown: the
        caller does the full update. A follower's idle partitions come in every fetch it sends."""
        st = self.remotes.get(replica)
        if st is None or fetch_offset != st.log_end_offset or log_start != st.log_start_offset:
            return False
        self._note_fetch(st, fetch_offset, now_ms)
        return True

    def _note_fetch(self, st: ReplicaState, fetch_offset: int, now_ms: int) -> None:
        # Kafka's rule: caught up now if the fetch reached the leader's LEO, or caught up as of the
        # previous fetch if this one reached the LEO the leader had then.
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, now_ms)
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms

    def maybe_increment_hw(
        self,
        now_ms: int = 0,
        max_lag_ms: int = 30_000,
        min_isr: int = 1,
        alive: Callable[[int], bool] | None = None,
    ) -> bool:
        """Kafka 3.7's rule, only forward. The HW is the least LEO of the leader, the maximal ISR, and the
        replicas outside it that are caught up (within ``max_lag_ms`` of ``now_ms``) on a live broker
        (``alive``): those are about to join, and an HW that ran ahead of them would have to wait for them
        later anyway. It does not move while the ISR is smaller than the effective min ISR
        (``min.insync.replicas``, capped at the replica count; KAFKA-15583). Returns whether it moved."""
        if not self.is_leader:
            return False
        if len(self.isr) < min(min_isr, len(self.replicas) or 1):
            return False
        # The leader's own LEO always counts, listed or not; one pass, as this runs on every fetch.
        new_hw = self.log.log_end_offset
        me = self.broker_id
        maximal = self.maximal_isr
        for r, st in self.remotes.items():
            if r == me:
                continue
            leo = st.log_end_offset
            if leo >= new_hw:
                continue
            if r in maximal or (
                (now_ms - st.last_caught_up_ms <= max_lag_ms or leo >= self.log.log_end_offset)
                and st.last_caught_up_ms > 0
                and (alive is None or alive(r))
            ):
                new_hw = leo
        for r in maximal:  # an ISR member the leader has no fetch state for yet holds the HW at -1
            if r != me and r not in self.remotes:
                new_hw = -1
        if new_hw > self.high_watermark:
            old = self.high_watermark
            self.high_watermark = new_hw
            self.hw_event(new_hw, old)
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers to drop: behind the leader's LEO and not caught up within ``max_lag_ms``.

        A follower at the leader's LEO stays, however long ago it fetched (Kafka's ``isCaughtUp``): with
        no new data it has nothing to lag behind, and shrinking it would weaken acks=all for no reason."""
        leo = self.log.log_end_offset
        return [
            r
            for r in self.isr
            if r != self.broker_id
            and (st := self.remotes.get(r)) is not None
            and st.log_end_offset != leo
            and now_ms - st.last_caught_up_ms > max_lag_ms
        ]

    def can_join_isr(self, replica: int) -> bool:
        """A follower rejoins when its LEO reached the HW and the current epoch's start offset."""
        st = self.remotes.get(replica)
        return (
            st is not None
            and replica not in self.isr
            and replica in self.replicas
            and st.log_end_offset >= self.high_watermark
            and st.log_end_offset >= self.leader_epoch_start_offset
        )

    # ----- ISR changes (KIP-497): decided here, sent by the AlterPartitionManager ------------------
    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """Kafka's ``maybeShrinkIsr``: the ISR without the followers that fell behind (each logged as
        ``isr_lagging``), or None when there is nothing to propose (no laggard, not the leader, or a
        proposal still waits for the controller)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        out = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not out:
            return None
        for r in out:
            self.event(
                "isr_lagging", replica=r, lag_ms=now_ms - self.last_caught_up_ms(r), leo=self.remote_leo(r)
            )
        return tuple(r for r in self.isr if r not in out)

    def maybe_expand_isr(self, replica: int) -> tuple[int, ...] | None:
        """Kafka's ``maybeExpandIsr``, after ``replica``'s fetch: the ISR with it, once it may join."""
        if self.pending_isr is None and self.can_join_isr(replica):
            return tuple(sorted(set(self.isr) | {replica}))
        return None

    def prepare_isr_change(self, new_isr: tuple[int, ...], why: str, now_ms: int) -> None:
        """Hold ``new_isr`` as the pending proposal (the HW already waits for what it adds)."""
        self.pending_isr = new_isr
        self.pending_since_ms = now_ms
        self.event("isr_change_proposed", change=why, isr=list(self.isr), new_isr=list(new_isr))

    def handle_alter_partition_result(self, r: AlterPartitionResult) -> bool:
        """The controller's answer to the pending proposal: adopt the ISR it wrote (True), or learn that
        it refused, or that a newer LeaderAndIsr already superseded it (False)."""
        proposed, self.pending_isr = self.pending_isr, None
        if r.error_code != NO_ERROR:
            self.event("isr_change_failed", error_code=r.error_code, new_isr=list(proposed or ()))
            return False
        if r.leader_epoch != self.leader_epoch or r.partition_epoch < self.partition_epoch:
            return False
        old = self.isr
        self.isr = tuple(r.isr)
        self.partition_epoch = r.partition_epoch
        kind = "isr_shrink" if len(self.isr) < len(old) else "isr_expand"
        self.event(
            kind,
            old_isr=list(old),
            isr=list(self.isr),
            partition_epoch=self.partition_epoch,
            hw=self.high_watermark,
        )
        return True

    # ----- the leader's side of produce, fetch, ListOffsets, OffsetForLeaderEpoch ----------------------
    def check_current_leader_epoch(self, current_leader_epoch: int) -> int:
        """KIP-320: a request naming an older epoch is fenced, a newer one is not known here yet."""
        if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == self.leader_epoch:
            return NO_ERROR
        if current_leader_epoch < self.leader_epoch:
            return FencedLeaderEpochError.code
        return UnknownLeaderEpochError.code

    def append_records_to_leader(self, records: Any, acks: int, min_isr: int, *, internal: bool) -> Any:
        """Kafka's ``appendRecordsToLeader``: refuse unless leading, or (acks=all) with an ISR below the
        effective ``min.insync.replicas``; else append with this leader's epoch. ``internal``: a
        coordinator's own write (no client validation). Returns the log's append info."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {self.tp}")
        min_isr = min(min_isr, len(self.replicas))  # effective (Kafka 3.7)
        if acks == Acks.ALL and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.tp}: ISR {list(self.isr)} is smaller than min.insync.replicas={min_isr}"
            )
        info = self.log.append(
            records, leader_epoch=self.leader_epoch, from_coordinator=internal, from_client=not internal
        )
        self.leo_event(self.broker_id, self.log_end_offset)
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int, min_isr: int) -> tuple[bool, int]:
        """Kafka's rule for a waiting acks=all produce: done once the HW passed ``required_offset``, with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then below the effective ``min.insync.replicas``."""
        if self.high_watermark < required_offset:
            return False, NO_ERROR
        if len(self.maximal_isr) < min(min_isr, len(self.replicas)):
            return True, NotEnoughReplicasAfterAppendError.code
        return True, NO_ERROR

    def low_watermark(self, live: Any = None) -> int:
        """The smallest log start offset of the leader and its followers on ``live`` brokers (all if empty)."""
        low = self.log.log_start_offset
        for r, st in self.remotes.items():
            if st.log_start_offset >= 0 and (not live or r in live):
                low = min(low, st.log_start_offset)
        return low

    def read_records(
        self, req: FetchRequest, fp: Any, *, copy: bool = True, slices: bool = False
    ) -> tuple[FetchPartitionResponse | None, int]:
        """The answer to ``fp`` (one partition of fetch ``req``) and its size in bytes. ``copy=False`` only
        sizes the data (None instead of a response when there is data), as a waiting fetch checks
        ``fetch.min.bytes`` without reading what it will read again on completion. ``slices``: answer with
        the log's file slice itself, for a sender that ``sendfile``s it."""
        if not self.is_leader:
            return FetchPartitionResponse(tp=fp.tp, error_code=NotLeaderOrFollowerError.code), 0
        code = self.check_current_leader_epoch(fp.current_leader_epoch)
        if code != NO_ERROR:
            return FetchPartitionResponse(tp=fp.tp, error_code=code), 0
        follower = req.replica_id >= 0
        hw = self.high_watermark
        log = self.log
        start = log.log_start_offset
        lso = log.last_stable_offset(hw)
        committed_only = not follower and req.isolation_level == IsolationLevel.READ_COMMITTED
        offset = fp.fetch_offset
        if (
            offset >= start
            and not committed_only
            and offset == (log.log_end_offset if follower else hw)
            and fp.last_fetched_epoch in (-1, log.leader_epoch_cache.latest_epoch)
        ):
            # Caught up, nothing to send: every follower fetch names all the partitions it follows
            # from this leader (the 50 of __consumer_offsets among them) and a waiting fetch is
            # read again at each append, so the common empty answer skips the log read. A fetcher
            # on the leader's latest epoch at its end cannot have diverged (KIP-320).
            return FetchPartitionResponse(
                tp=fp.tp, records=b"", high_watermark=hw, last_stable_offset=lso, log_start_offset=start
            ), 0
        if fp.last_fetched_epoch >= 0:
            # KIP-320: the fetcher's last epoch is not ours up to its fetch offset -> it diverged. A follower
            # truncates; a consumer (Fetch v12+ carries its epoch too) validates its position.
            epoch, end = log.leader_epoch_cache.end_offset_for(fp.last_fetched_epoch, log.log_end_offset)
            if epoch != fp.last_fetched_epoch or end < fp.fetch_offset:
                div = EpochEndOffset(epoch=epoch, end_offset=end)
                return FetchPartitionResponse(
                    tp=fp.tp,
                    diverging_epoch=div,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                ), 0
        try:
            info = log.read(
                fp.fetch_offset,
                min(fp.partition_max_bytes, req.max_bytes),
                max_offset=None if follower else (lso if committed_only else hw),
                verify=True,
            )
        except (OffsetOutOfRangeError, CorruptRecordError, KafkaStorageError) as e:
            if isinstance(e, CorruptRecordError):
                self._report_corruption(fp.fetch_offset, str(e), req.replica_id)
            return FetchPartitionResponse(
                tp=fp.tp,
                error_code=e.code,
                high_watermark=hw,
                last_stable_offset=lso,
                log_start_offset=start,
            ), 0
        if info.bad_batch is not None and info.records.position == info.bad_batch.position:
            self._report_corruption(fp.fetch_offset, info.bad_batch.describe(str(self.tp)), req.replica_id)
        if not copy:
            return None, info.records.size
        # bytes on a simulated link, whose delivery is later: the leader's file may change underneath
        data = info.records if slices else info.records.read()
        aborted = None
        if committed_only:
            # Kafka's read_committed answer: the aborted transactions overlapping what is returned, so
            # the consumer can drop their records (it skips control batches itself).
            aborted = tuple(
                AbortedTransaction(producer_id=e.producer_id, first_offset=e.first_offset)
                for e in log.collect_aborted(fp.fetch_offset, lso)
            )
        return FetchPartitionResponse(
            tp=fp.tp, records=data, high_watermark=hw, last_stable_offset=lso, log_start_offset=start,
            aborted_transactions=aborted,
        ), len(data)  # fmt: skip

    def _report_corruption(self, offset: int, what: str, replica_id: int) -> None:
        """Log a corrupt batch a fetch ran into, once per batch (Kafka logs the failed fetch)."""
        key = (what, offset)
        if key in self._reported_corruption:
            return
        self._reported_corruption.add(key)
        self.event("corrupt_batch", offset=offset, error=what, fetcher=replica_id)
        logger.error("Broker %d: fetch of %s at offset %d: %s", self.broker_id, self.tp, offset, what)

    def fetch_offset_for_timestamp(
        self, lp: Any, replica_id: int, isolation_level: IsolationLevel
    ) -> ListOffsetsPartitionResponse:
        """Kafka's ``fetchOffsetForTimestamp``: the answer to one partition of a ListOffsets."""
        tp = lp.tp
        if not self.is_leader:
            return ListOffsetsPartitionResponse(tp=tp, error_code=NotLeaderOrFollowerError.code)
        code = self.check_current_leader_epoch(lp.current_leader_epoch)
        if code != NO_ERROR:
            return ListOffsetsPartitionResponse(tp=tp, error_code=code)
        # Kafka's "last fetchable offset": what a client with this isolation level may read up to (the
        # LSO under read_committed, else the HW); a replica or a debugging tool sees the whole log.
        if replica_id != CONSUMER_REPLICA_ID:
            bound = self.log_end_offset
        elif isolation_level == IsolationLevel.READ_COMMITTED:
            bound = self.log.last_stable_offset(self.high_watermark)
        else:
            bound = self.high_watermark
        # A new leader whose HW is still below the start of its epoch does not yet know what its
        # predecessor had committed: Kafka answers a client's "latest" (and a lookup it cannot answer
        # below the bound) with the retriable OFFSET_NOT_AVAILABLE until the HW catches up.
        lagging = replica_id == CONSUMER_REPLICA_ID and self.leader_epoch_start_offset > self.high_watermark
        if lp.timestamp == LATEST_TIMESTAMP:
            if lagging:
                return ListOffsetsPartitionResponse(tp=tp, error_code=OffsetNotAvailableError.code)
            return ListOffsetsPartitionResponse(tp=tp, offset=bound, leader_epoch=self.leader_epoch)
        if lp.timestamp == LATEST_TIERED_TIMESTAMP:
            # Nothing is tiered to remote storage here: Kafka's answer without it is offset and epoch -1.
            return ListOffsetsPartitionResponse(tp=tp, offset=-1, leader_epoch=-1)
        if lp.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # the same without tiering
            off = self.log.log_start_offset
            epoch = self.log.leader_epoch_cache.epoch_for_offset(off)
            return ListOffsetsPartitionResponse(tp=tp, offset=off, leader_epoch=epoch)
        try:
            found = self.log.offset_for_timestamp(lp.timestamp)
        except KafkaError as e:
            return ListOffsetsPartitionResponse(tp=tp, error_code=e.code)
        if found is None or found[0] >= bound:  # a record not readable yet is not an answer
            code = OffsetNotAvailableError.code if lagging else NO_ERROR
            return ListOffsetsPartitionResponse(tp=tp, error_code=code)
        epoch = self.log.leader_epoch_cache.epoch_for_offset(found[0])
        return ListOffsetsPartitionResponse(tp=tp, offset=found[0], timestamp=found[1], leader_epoch=epoch)

    def last_offset_for_leader_epoch(self, ep: Any) -> OffsetForLeaderEpochPartitionResponse:
        """Kafka's ``lastOffsetForLeaderEpoch``: where ``ep.leader_epoch`` ends on this leader's log."""
        if not self.is_leader:
            return OffsetForLeaderEpochPartitionResponse(tp=ep.tp, error_code=NotLeaderOrFollowerError.code)
        code = self.check_current_leader_epoch(ep.current_leader_epoch)
        if code != NO_ERROR:
            return OffsetForLeaderEpochPartitionResponse(tp=ep.tp, error_code=code)
        epoch, end = self.log.leader_epoch_cache.end_offset_for(ep.leader_epoch, self.log_end_offset)
        return OffsetForLeaderEpochPartitionResponse(tp=ep.tp, leader_epoch=epoch, end_offset=end)

    # ----- follower side ----------------------------------------------------------------------------
    def update_follower_hw(self, leader_hw: int) -> None:
        new_hw = max(0, min(leader_hw, self.log_end_offset))
        if new_hw != self.high_watermark:
            old = self.high_watermark
            self.high_watermark = new_hw
            self.hw_event(new_hw, old)

    def append_as_follower(self, data) -> None:
        """Append the leader's batches as they are.

        DeleteRecords need not stop at a batch boundary, so a follower that restarted empty at the
        leader's log start can be sent a batch beginning below it. As Kafka does, the empty log then
        restarts at that batch's base offset; the log start offset in the same fetch answer moves it
        back up."""
        log = self.log
        leo = log.log_end_offset
        if leo == log.log_start_offset and len(data) >= BATCH_HEADER_SIZE:
            first = BatchHeader.parse(data)
            if first.base_offset < leo <= first.last_offset:
                self.truncate_fully_and_start_at(first.base_offset, "first_batch_below_log_start")
        log.append_as_follower(data)

    def truncate_to(self, offset: int, reason: str) -> None:
        leo = self.log_end_offset
        if self.log.truncate_to(offset):  # also trims the epoch cache when nothing is cut
            self.event("truncate", reason=reason, from_offset=leo, to_offset=offset)
            self.leo_event(self.broker_id, self.log_end_offset)
        if self.high_watermark > self.log_end_offset:
            self.high_watermark = self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int, reason: str) -> None:
        """Empty the log and restart it at ``offset``; the high watermark follows the new log end."""
        leo = self.log_end_offset
        self.log.truncate_fully_and_start_at(offset)
        self.event("truncate", reason=reason, from_offset=leo, to_offset=offset)
        self.leo_event(self.broker_id, offset)
        if self.high_watermark != offset:
            old = self.high_watermark
            self.high_watermark = offset
            self.hw_event(offset, old)


__all__ = ["Partition", "ReplicaState"]
