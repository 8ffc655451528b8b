"""Kafka's ``AlterPartitionManager`` (KIP-497): a leader's ISR proposals on their way to the controller.

The partition decides a change (``Partition.maybe_shrink_isr`` / ``maybe_expand_isr``) and holds it as its
``pending_isr``; this manager sends it as an AlterPartition quoting the leader and partition epochs the leader
last saw, and hands the controller's answer back to the partition, which adopts the ISR the controller wrote
(``Partition.handle_alter_partition_result``); the ReplicaManager then moves the HW and answers the produces
waiting on it. A proposal left unanswered (timeout, top-level error, no controller) is kept and sent again
``ALTER_PARTITION_RETRY_MS`` later; an answer to a proposal a LeaderAndIsr has superseded is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol import NO_ERROR, AlterPartitionItem, AlterPartitionRequest, AlterPartitionResponse

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

# How soon an AlterPartition proposal left unanswered (timeout, top-level error) is sent again (Kafka: 50 ms).
ALTER_PARTITION_RETRY_MS = 50


class AlterPartitionManager:
    """The ISR proposals of one broker's leaders; the owner of their AlterPartition requests."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm

    def submit(self, p: Partition, new_isr: tuple[int, ...], why: str) -> None:
        """Propose ``new_isr`` for ``p`` (``why``: shrink or expand). Without a controller nothing is
        proposed: the next tick or fetch decides again."""
        controller = self.rm._controller_id()
        if controller is None or controller < 0:
            return
        p.prepare_isr_change(new_isr, why, self.rm.clock.now_ms())
        self._send(p)

    def _send(self, p: Partition) -> None:
        """Send (or send again) ``p``'s pending ISR proposal, as of its current leader/partition epochs."""
        assert p.pending_isr is not None
        rm = self.rm
        controller = rm._controller_id()
        if controller is None or controller < 0:
            self._retry(p, p.pending_isr, p.leader_epoch)
            return
        item = AlterPartitionItem(
            tp=p.tp, leader_epoch=p.leader_epoch, new_isr=p.pending_isr, partition_epoch=p.partition_epoch
        )
        req = AlterPartitionRequest(broker_id=rm.broker_id, partitions=(item,))
        rm._send_request(controller, req, self, rm.config.controller_socket_timeout_ms)

    def _retry(self, p: Partition, new_isr: tuple[int, ...], leader_epoch: int) -> None:
        """Kafka's AlterPartitionManager keeps an unanswered proposal and sends it again (its controller
        channel retries until an answer comes). Dropping it instead is unsafe for liveness: the controller
        may have committed it with the answer lost, and the leader, still on the old ISR and partition
        epoch, would then never agree with ZooKeeper again (every later proposal is INVALID_UPDATE_VERSION,
        or none is made since its own ISR already looks full). The controller answers a repeated proposal
        that is already committed with the committed state."""

        def again(_now_ms: int) -> None:
            if self.rm._stopped or self.rm.partition_or_none(p.tp) is not p:
                return
            if not p.is_leader or p.leader_epoch != leader_epoch or p.pending_isr != new_isr:
                return  # a LeaderAndIsr (or an answer) settled it meanwhile
            p.event("isr_change_retry", new_isr=list(new_isr), partition_epoch=p.partition_epoch)
            self._send(p)

        self.rm._set_timer(ALTER_PARTITION_RETRY_MS, again)

    def on_response(self, _cid: int, request: AlterPartitionRequest, resp: AlterPartitionResponse) -> None:
        rm = self.rm
        results = {r.tp: r for r in resp.partitions}
        for tp, item in {i.tp: i for i in request.partitions}.items():
            p = rm.partition_or_none(tp)
            if p is None or not p.is_leader or p.pending_isr != item.new_isr:
                continue
            if item.leader_epoch != p.leader_epoch or item.partition_epoch != p.partition_epoch:
                continue  # answers a proposal a LeaderAndIsr has superseded
            r = results.get(tp)
            if resp.error_code != NO_ERROR or r is None:
                # Top-level error (not the controller, stale broker epoch, ZooKeeper trouble on its side):
                # nothing was decided for this partition; keep the proposal and send it again.
                p.event("isr_change_failed", error_code=resp.error_code, new_isr=list(item.new_isr))
                self._retry(p, item.new_isr, item.leader_epoch)
                continue
            before = len(p.isr)
            if p.handle_alter_partition_result(r):
                if len(p.isr) != before:  # Kafka counts the change once the controller has it
                    (rm.metrics.isr_shrinks if len(p.isr) < before else rm.metrics.isr_expands).mark()
                rm._maybe_increment_hw(p)
                rm.produce_purgatory.check_and_complete(tp)

    def on_timeout(self, _cid: int, request: Any) -> None:
        """No answer in time: the proposal may or may not be committed, so it stays pending and goes out
        again (not dropped: see ``_retry``)."""
        for item in request.partitions:
            p = self.rm.partition_or_none(item.tp)
            if (
                p is not None
                and p.is_leader
                and p.pending_isr == item.new_isr
                and p.leader_epoch == item.leader_epoch
                and p.partition_epoch == item.partition_epoch
            ):
                p.event("isr_change_timeout", new_isr=list(item.new_isr))
                self._retry(p, item.new_isr, item.leader_epoch)


__all__ = ["ALTER_PARTITION_RETRY_MS", "AlterPartitionManager"]
