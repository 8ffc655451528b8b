"""Partition reassignment in the controller (Kafka's KIP-455 flow, ZooKeeper mode).

A move starts from AlterPartitionReassignments or ``/admin/reassign_partitions``: the replicas become the
original ones plus the target (``adding``, ``removing``) and the leader epoch is bumped; once every target
replica is in the ISR the leader moves if it is not a target, the replicas shrink to the target and the
removed ones get StopReplica with ``delete_partition``. Cancelling completes the move back to the original
replicas. ListPartitionReassignments lists the moves in progress.
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.broker.controller.partition_state_machine import reassign_partition_leader_election
from kafkalite.coordination import paths
from kafkalite.coordination.store import Delete, NoNode, SetData, WatchedEvent
from kafkalite.errors import (
    InvalidReplicaAssignmentError,
    KafkaError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    NO_ERROR,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    ReassignmentResult,
    TopicPartition,
)


class ReassignmentManager:
    """Runs inside the active controller; ``controller`` is the ``Controller``."""

    def __init__(self, controller: Any) -> None:
        self.c = controller

    def alter(self, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
        ctx = self.c.ctx
        assert ctx is not None
        results = []
        for r in req.reassignments:
            code, message = NO_ERROR, None
            try:
                if r.replicas is None:
                    self.cancel(r.tp)
                else:
                    self.start(r.tp, tuple(r.replicas))
            except KafkaError as exc:
                code, message = exc.code, str(exc)
            results.append(ReassignmentResult(tp=r.tp, error_code=code, error_message=message))
        return AlterPartitionReassignmentsResponse(results=tuple(results))

    def ongoing(self, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
        """The moves in progress (of the partitions asked about); a partition that is not moving, or does
        not exist, is left out, as Kafka's controller leaves it out."""
        ctx = self.c.ctx
        assert ctx is not None
        wanted = ctx.reassigning if req.partitions is None else req.partitions
        out = []
        for tp in sorted(t for t in wanted if t in ctx.reassigning):
            info = ctx.info(tp)
            if info is None:
                continue
            out.append(
                OngoingReassignment(
                    tp=tp,
                    replicas=info.replicas,
                    adding_replicas=info.adding,
                    removing_replicas=info.removing,
                )
            )
        return ListPartitionReassignmentsResponse(reassignments=tuple(out))

    def watch_admin_znode(self, into: dict[TopicPartition, tuple[int, ...]] | None = None) -> None:
        if self.c.zk.exists(paths.REASSIGN_PARTITIONS, watch=self._on_admin_znode) is None:
            return
        try:
            data, _ = self.c.zk.get(paths.REASSIGN_PARTITIONS)
        except NoNode:
            return
        for (t, p), replicas in paths.decode_reassignment(data).items():
            tp = TopicPartition(t, p)
            if into is not None:
                into[tp] = replicas
            elif self.c.ctx is not None and self.c.ctx.reassigning.get(tp) != replicas:
                try:
                    self.start(tp, replicas)
                except KafkaError as exc:
                    self.c._log("reassignment_rejected", tp=str(tp), error=str(exc))

    def _on_admin_znode(self, event: WatchedEvent) -> None:
        if self.c.ctx is not None:
            self.c._watch_event("reassign_partitions", self.watch_admin_znode)

    def start(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        ctx = self.c.ctx
        assert ctx is not None
        info = ctx.info(tp)
        if info is None or info.state is None:
            raise UnknownTopicOrPartitionError(f"{tp} does not exist")
        if not target or len(set(target)) != len(target):
            raise InvalidReplicaAssignmentError(f"replica list {list(target)} is empty or has duplicates")
        if any(b < 0 for b in target):
            raise InvalidReplicaAssignmentError(f"replica list {list(target)} has a negative broker id")
        origin = tuple(r for r in info.replicas if r not in info.adding)
        # As Kafka's validateReplicas: only the replicas being added must be alive; a dead replica that
        # stays is no obstacle (the move completes once it is back in the ISR).
        dead = [b for b in target if b not in origin and b not in ctx.live_brokers]
        if dead:
            raise InvalidReplicaAssignmentError(
                f"brokers {dead} to be added are not alive (live brokers: {sorted(ctx.live_brokers)})"
            )
        if target == origin and not info.adding and not info.removing:
            return
        full = tuple(dict.fromkeys(target + origin))
        info.replicas = full
        info.adding = tuple(r for r in target if r not in origin)
        info.removing = tuple(r for r in origin if r not in target)
        ctx.reassigning[tp] = target
        self.c._write_assignment(tp.topic)
        self.c._log(
            "reassignment_started", tp=str(tp), target=target, replicas=full,
            adding=info.adding, removing=info.removing,
        )  # fmt: skip
        batch = ControllerBrokerRequestBatch()
        st = info.state
        self.c.partition_state_machine.update_leader_and_isr(
            tp, info, st.leader, st.isr, batch, reason="reassignment", event="leader_epoch_bumped"
        )
        self.c.channel.send_batch(batch)
        self.check(tp)

    def cancel(self, tp: TopicPartition) -> None:
        ctx = self.c.ctx
        assert ctx is not None
        info = ctx.info(tp)
        if info is None or tp not in ctx.reassigning:
            raise NoReassignmentInProgressError(f"no reassignment of {tp} in progress")
        origin = tuple(r for r in info.replicas if r not in info.adding)
        ctx.reassigning[tp] = origin  # complete back to the original replicas
        self.check(tp)

    def check(self, tp: TopicPartition) -> None:
        """Finish the reassignment once every target replica is in the ISR."""
        ctx = self.c.ctx
        assert ctx is not None
        target = ctx.reassigning.get(tp)
        info = ctx.info(tp)
        if target is None or info is None or info.state is None:
            return
        st = info.state
        if not all(r in st.isr for r in target):
            return
        removed = tuple(r for r in info.replicas if r not in target)
        isr = tuple(r for r in st.isr if r in target)
        leader = st.leader
        if leader not in target or leader not in ctx.live_brokers:
            leader = reassign_partition_leader_election(target, isr, ctx.live_brokers)
        info.replicas, info.adding, info.removing = target, (), ()
        batch = ControllerBrokerRequestBatch()
        self.c._write_assignment(tp.topic)
        self.c.partition_state_machine.update_leader_and_isr(
            tp, info, leader, isr, batch, reason="reassignment",
            event="leader_elected" if leader != st.leader else "isr_changed",
        )  # fmt: skip
        for r in removed:
            if r in ctx.live_brokers:
                batch.add_stop_replica(r, tp, info.state.leader_epoch, delete_partition=True)
        del ctx.reassigning[tp]
        self.c.channel.send_batch(batch)
        self.c._log("reassignment_completed", tp=str(tp), replicas=target, removed=removed)
        self._remove_from_admin_znode(tp)
        ctx.deletion.resume()

    def _remove_from_admin_znode(self, tp: TopicPartition) -> None:
        try:
            data, st = self.c.zk.get(paths.REASSIGN_PARTITIONS)
        except NoNode:
            return
        pending = paths.decode_reassignment(data)
        pending.pop((tp.topic, tp.partition), None)
        if pending:
            self.c._write(
                [SetData(paths.REASSIGN_PARTITIONS, paths.encode_reassignment(pending), st.version)]
            )
        else:
            self.c._write([Delete(paths.REASSIGN_PARTITIONS, st.version)])


__all__ = ["ReassignmentManager"]
