"""Controlled shutdown in the controller (Kafka's ControlledShutdown request, ZooKeeper mode)."""

from __future__ import annotations

from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.broker.controller.partition_state_machine import controlled_shutdown_partition_leader_election
from kafkalite.errors import BrokerNotAvailableError, StaleBrokerEpochError
from kafkalite.protocol import ControlledShutdownRequest, ControlledShutdownResponse

STALE_BROKER_EPOCH = StaleBrokerEpochError.code


def controlled_shutdown(c: Any, req: ControlledShutdownRequest) -> ControlledShutdownResponse:
    """Kafka's controlled shutdown: the broker's leaderships move to another ISR member (first in
    assignment order), its follower replicas leave the ISR and stop; the answer lists the replicated
    partitions it still leads (none eligible to take over), and the broker asks again."""
    ctx = c.ctx
    assert ctx is not None
    b = req.broker_id
    if b not in ctx.live_brokers:
        return ControlledShutdownResponse(error_code=BrokerNotAvailableError.code)
    if req.broker_epoch != -1 and req.broker_epoch < ctx.live_brokers[b]:
        return ControlledShutdownResponse(error_code=STALE_BROKER_EPOCH)
    if b not in ctx.shutting_down:
        c._log("controlled_shutdown", broker=b)
    ctx.shutting_down.add(b)
    eligible = ctx.eligible_leaders()
    psm = c.partition_state_machine
    batch = ControllerBrokerRequestBatch()
    for tp, info in ctx.partitions():
        st = info.state
        if (
            st is None
            or b not in info.replicas
            or len(info.replicas) < 2
            or ctx.deletion.is_deleting(tp.topic)
        ):
            continue
        isr = tuple(r for r in st.isr if r != b)
        if st.leader == b:
            leader = controlled_shutdown_partition_leader_election(info.replicas, isr, eligible)
            if leader is not None:
                psm.update_leader_and_isr(
                    tp, info, leader, isr, batch, reason="controlled_shutdown", event="leader_elected",
                    extra={"election": "controlled_shutdown"},
                )  # fmt: skip
        elif b in st.isr:
            psm.update_leader_and_isr(
                tp, info, st.leader, isr, batch, reason="controlled_shutdown", event="isr_changed"
            )
            batch.add_stop_replica(b, tp, info.state.leader_epoch, delete_partition=False)
    c.channel.send_batch(batch)
    remaining = tuple(
        tp
        for tp, info in ctx.partitions()
        if info.state is not None and info.state.leader == b and len(info.replicas) > 1
    )
    return ControlledShutdownResponse(remaining_partitions=remaining)


__all__ = ["controlled_shutdown"]
