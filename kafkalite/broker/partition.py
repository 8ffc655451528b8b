"""Kafka's ``Partition``: one replica of a topic-partition on one broker, as leader or follower.

The leader keeps, for every other replica, the state its fetches reveal (Kafka's ``Replica``: log end
offset, the leader's LEO at the previous fetch, ``lastCaughtUpTimeMs``), computes the high watermark as the
smallest LEO in the (maximal) ISR, which only moves forward, and decides which replicas should leave or
join the ISR. ISR changes are only *proposed* here (``pending_isr``, KIP-497): the controller's answer
makes them real. A follower's high watermark is ``min(leader HW, own LEO)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalite.protocol import TopicPartition
from kafkalite.records import BATCH_HEADER_SIZE, BatchHeader
from kafkalite.storage.log import Log


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
        log_event: Callable[..., None] | None = None,
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
        self._log_event = log_event or (lambda *a, **k: None)
        self._tp_name = str(tp)  # events name the partition several times per produced batch

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
        self._log_event(kind, tp=self._tp_name, **fields)

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
        self.event("leo", replica=self.broker_id, leo=leo)

    def make_follower(self, state: Any) -> None:
        self.apply_state(state)
        self.remotes = {}
        self.leader_epoch_start_offset = -1
        self.event("become_follower", leader=self.leader_id, epoch=self.leader_epoch, leo=self.log_end_offset)

    # ----- leader side ------------------------------------------------------------------------------
    def update_follower_fetch_state(
        self, replica: int, fetch_offset: int, log_start: int, now_ms: int
    ) -> None:
        """Kafka's rule: caught up now if the fetch reached the leader's LEO, or caught up as of the previous
        fetch if this one reached the LEO the leader had then."""
        st = self.remotes.get(replica)
        if st is None:
            return
        leader_leo = self.log_end_offset
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, now_ms)
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms
        st.log_start_offset = log_start
        if fetch_offset != st.log_end_offset:
            st.log_end_offset = fetch_offset
            self.event("leo", replica=replica, leo=fetch_offset)

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
            self.event("hw", replica=self.broker_id, hw=new_hw, old=old)
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

    # ----- follower side ----------------------------------------------------------------------------
    def update_follower_hw(self, leader_hw: int) -> None:
        new_hw = max(0, min(leader_hw, self.log_end_offset))
        if new_hw != self.high_watermark:
            old = self.high_watermark
            self.high_watermark = new_hw
            self.event("hw", replica=self.broker_id, hw=new_hw, old=old)

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
            self.event("leo", replica=self.broker_id, leo=self.log_end_offset)
        if self.high_watermark > self.log_end_offset:
            self.high_watermark = self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int, reason: str) -> None:
        """Empty the log and restart it at ``offset``; the high watermark follows the new log end."""
        leo = self.log_end_offset
        self.log.truncate_fully_and_start_at(offset)
        self.event("truncate", reason=reason, from_offset=leo, to_offset=offset)
        self.event("leo", replica=self.broker_id, leo=offset)
        if self.high_watermark != offset:
            old = self.high_watermark
            self.high_watermark = offset
            self.event("hw", replica=self.broker_id, hw=offset, old=old)


__all__ = ["Partition", "ReplicaState"]
