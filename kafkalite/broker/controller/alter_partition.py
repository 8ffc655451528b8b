"""AlterPartition in the controller (KIP-497, ZooKeeper mode): the leader's ISR changes.

A leader proposes a new ISR quoting the leader epoch and partition epoch (the state znode's version) it
knows. The controller refuses a proposal from a broker that is not the leader (NOT_LEADER_OR_FOLLOWER), an
older or newer leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), a stale partition epoch
(INVALID_UPDATE_VERSION), an ISR without the leader or with a non-replica (INVALID_REQUEST), or a dead
broker joining (INELIGIBLE_REPLICA, KIP-841). An accepted change keeps the leader epoch and moves the
partition epoch; a proposal that is already the committed state is answered with it (idempotent).
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.coordination import paths
from kafkalite.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import AlterPartitionRequest, AlterPartitionResponse, AlterPartitionResult

STALE_BROKER_EPOCH = StaleBrokerEpochError.code
INVALID_UPDATE_VERSION = InvalidUpdateVersionError.code
INELIGIBLE_REPLICA = IneligibleReplicaError.code


def alter_partition(c: Any, req: AlterPartitionRequest) -> AlterPartitionResponse:
    """ISR changes proposed by leaders (KIP-497): each checked against the leader epoch and partition
    epoch the leader quotes, written, and answered with the committed state; UpdateMetadata to all, and a
    reassignment waiting for its targets to join the ISR is checked again."""
    ctx = c.ctx
    assert ctx is not None
    epoch = ctx.live_brokers.get(req.broker_id)
    if epoch is None or (req.broker_epoch != -1 and req.broker_epoch != epoch):
        c._log("alter_partition_rejected", broker=req.broker_id, error="STALE_BROKER_EPOCH")
        return AlterPartitionResponse(error_code=STALE_BROKER_EPOCH)
    results = []
    batch = ControllerBrokerRequestBatch()
    for item in req.partitions:
        results.append(_alter_one(c, req.broker_id, item, batch))
    c.channel.send_batch(batch)
    for item in req.partitions:
        if item.tp in ctx.reassigning:
            c.reassignment.check(item.tp)
    return AlterPartitionResponse(partitions=tuple(results))


def _alter_one(c: Any, broker: int, item: Any, batch: ControllerBrokerRequestBatch) -> AlterPartitionResult:
    ctx = c.ctx
    assert ctx is not None
    tp = item.tp
    info = ctx.info(tp)

    def reject(code: int, name: str) -> AlterPartitionResult:
        c._log(
            "alter_partition_rejected",
            tp=str(tp),
            broker=broker,
            error=name,
            leader_epoch=item.leader_epoch,
            partition_epoch=item.partition_epoch,
        )
        st = info.state if info is not None else None
        if st is None:
            return AlterPartitionResult(tp=tp, error_code=code)
        return AlterPartitionResult(
            tp=tp,
            error_code=code,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=st.isr,
            partition_epoch=info.zk_version,
        )

    if info is None or info.state is None:
        return reject(UnknownTopicOrPartitionError.code, UnknownTopicOrPartitionError.name)
    st = info.state
    if st.leader != broker:
        return reject(NotLeaderOrFollowerError.code, NotLeaderOrFollowerError.name)
    if item.leader_epoch < st.leader_epoch:
        return reject(FencedLeaderEpochError.code, FencedLeaderEpochError.name)
    if item.leader_epoch > st.leader_epoch:
        return reject(UnknownLeaderEpochError.code, UnknownLeaderEpochError.name)
    new_isr = tuple(item.new_isr)
    if new_isr == st.isr and item.partition_epoch <= info.zk_version:
        # Already the committed state (Kafka's equalsAllowStalePartitionEpoch, checked before the
        # partition-epoch fence to keep AlterPartition idempotent): a leader sending again a proposal
        # whose answer it never got learns the committed state and partition epoch.
        return AlterPartitionResult(
            tp=tp,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=st.isr,
            partition_epoch=info.zk_version,
        )
    if item.partition_epoch != info.zk_version:
        return reject(INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION")
    if broker not in new_isr or any(r not in info.replicas for r in new_isr):
        return reject(InvalidRequestError.code, InvalidRequestError.name)
    added = [r for r in new_isr if r not in st.isr]
    if any(r not in ctx.live_brokers for r in added):
        return reject(INELIGIBLE_REPLICA, "INELIGIBLE_REPLICA")  # KIP-841: no dead broker joins
    if new_isr != st.isr:
        # KIP-497: an ISR change from the leader keeps the leader epoch; the zkVersion moves.
        new = paths.PartitionState(st.leader, st.leader_epoch, new_isr, ctx.epoch)
        if not c.partition_state_machine.write_state(tp, new):
            return reject(INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION")
        c._log(
            "isr_changed",
            tp=str(tp),
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=new_isr,
            partition_epoch=info.zk_version,
            prev_isr=st.isr,
            reason="alter_partition",
        )
        batch.add_update_metadata(tp)
    st = info.state
    return AlterPartitionResult(
        tp=tp, leader=st.leader, leader_epoch=st.leader_epoch, isr=st.isr, partition_epoch=info.zk_version
    )


__all__ = ["alter_partition"]
