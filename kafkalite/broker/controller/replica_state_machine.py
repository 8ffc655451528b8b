"""Kafka's ``ReplicaStateMachine`` (ZooKeeper mode): the controller's view of each replica.

As for partitions, a replica's state is read from the context rather than kept apart:

* **OnlineReplica**: on a live broker, in a log dir that works. Becoming online (``online``: the
  controller's startup, a broker's startup, a log dir failure to check) sends the broker a LeaderAndIsr
  with the partition's current state, which the broker acts on (lead, follow, or report the replica
  offline).
* **OfflineReplica**: its broker died, bounced, or reported the replica in a failed log dir (``offline``).
  A follower leaves the ISR (the last ISR member stays, so that it can lead when it returns); a leader's
  partition gets a new leader through the partition state machine's offline election.
* **NewReplica**, **ReplicaDeletionStarted** / **Successful** / **Ineligible**, **NonExistentReplica**: a
  new partition's replicas come online with its first LeaderAndIsr (``is_new``); deletion is the topic
  deletion manager's (``kafkalite.broker.topic_deletion``) and the reassignment's StopReplica.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.broker.controller.context import ControllerContext
from kafkalite.protocol import NO_LEADER, TopicPartition


class ReplicaStateMachine:
    """Runs inside the active controller; ``controller`` is the ``Controller`` (its context and its
    partition state machine)."""

    def __init__(self, controller: Any) -> None:
        self.c = controller

    @property
    def ctx(self) -> ControllerContext:
        ctx = self.c.ctx
        assert ctx is not None, "not the active controller"
        return ctx

    def startup(self, batch: ControllerBrokerRequestBatch) -> None:
        """Every live replica learns the partition's state from this controller (Kafka's startup)."""
        self.online(set(self.ctx.live_brokers), batch)

    def online(
        self,
        brokers: Iterable[int],
        batch: ControllerBrokerRequestBatch,
        *,
        skip: Iterable[TopicPartition] = (),
    ) -> None:
        """-> OnlineReplica for the replicas on ``brokers`` of every partition with a state (but those in
        ``skip``, which already have their LeaderAndIsr in ``batch``): a LeaderAndIsr each."""
        brokers, skip = set(brokers), set(skip)
        for tp, info in self.ctx.partitions():
            if info.state is None or tp in skip:
                continue
            for r in info.replicas:
                if r in brokers:
                    batch.add_leader_and_isr(r, tp, info)

    def offline(
        self,
        dead: set[int],
        batch: ControllerBrokerRequestBatch,
        *,
        reason: str,
        only: TopicPartition | None = None,
    ) -> None:
        """-> OfflineReplica for the replicas on ``dead`` (of ``only``, or of every partition): leaders
        are replaced (the partition state machine's offline election); followers leave the ISR."""
        if not dead:
            return
        psm = self.c.partition_state_machine
        for tp, info in self.ctx.partitions():
            if only is not None and tp != only:
                continue
            st = info.state
            if st is None or not (st.leader in dead or any(r in dead for r in st.isr)):
                continue
            remaining = tuple(r for r in st.isr if r not in dead)
            if st.leader in dead:
                psm.leader_offline(tp, info, remaining, batch, reason=reason)
            elif st.leader != NO_LEADER or remaining:  # an offline partition keeps its last ISR member
                psm.update_leader_and_isr(
                    tp, info, st.leader, remaining or st.isr[-1:], batch, reason=reason, event="isr_changed"
                )

    def offline_bounced_on_failover(self, batch: ControllerBrokerRequestBatch) -> None:
        """Leaders and ISR members whose broker registered after the state znode was last written.

        Such a replica got its leadership or ISR seat in an earlier incarnation: it may have restarted
        without the records it acknowledged (a crash loses the unflushed page cache). A running
        controller sees the bounce as a broker epoch change and handles the broker as failed first
        (``Controller._broker_change``); a new controller has no earlier epochs to compare, but the state
        znode only changes through a controller or the leader, so a registration (czxid) newer than the
        state's last write (mzxid) means the replica bounced since. Without this, a leader that
        restarted empty just as the controller moved (often: it was the controller) keeps leading at
        the same leader epoch and its followers truncate the acked records away to match it.
        """
        ctx = self.ctx
        for tp, info in ctx.partitions():
            st = info.state
            if st is None:
                continue
            members = {st.leader, *st.isr}
            bounced = {r for r in members if ctx.live_brokers.get(r, -1) > info.mzxid >= 0}
            if bounced:
                self.offline(bounced, batch, reason="controller_failover_bounce", only=tp)


__all__ = ["ReplicaStateMachine"]
