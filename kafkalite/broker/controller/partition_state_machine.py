"""Kafka's ``PartitionStateMachine`` (ZooKeeper mode) and its leader election algorithms.

A partition's state is not kept apart here: it is read from the context, as Kafka's states map onto it:

* **NonExistentPartition**: not in the context (not created yet, or deleted).
* **NewPartition**: assigned (``/brokers/topics/<t>``) but without a state znode yet.
* **OnlinePartition**: a state znode whose leader is a live broker.
* **OfflinePartition**: a state znode with leader -1 or a dead leader.

``initialize`` moves NewPartition to OnlinePartition (the first live replica leads, the ISR is the live
replicas, leader epoch 0); ``elect_offline_partitions`` (Kafka's ``triggerOnlinePartitionStateChange``)
tries to bring every OfflinePartition online; ``leader_offline`` handles an OnlinePartition whose leader
went away. Every leader or controller-made ISR change goes through ``update_leader_and_isr``: leader epoch
+ 1, a compare-and-set on the state znode's version (the partition epoch), then LeaderAndIsr to the
replicas and UpdateMetadata to every broker, queued on the event's request batch.

The election algorithms are Kafka's ``PartitionLeaderElectionAlgorithms``, one per strategy (offline,
reassign, preferred, controlled shutdown): each picks the first replica, in assignment order, that is live
and in the ISR, with the strategy's twist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.broker.controller.context import ControllerContext, PartitionInfo, config_flag
from kafkalite.coordination import paths
from kafkalite.coordination.store import BadVersion, Create, NodeExists, NoNode, SetData
from kafkalite.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import NO_ERROR, NO_LEADER, TopicPartition

# ----------------------------------------------------------------------------- election algorithms


def offline_partition_leader_election(
    assignment: Iterable[int], isr: Iterable[int], live: Iterable[int], *, unclean: bool
) -> tuple[int, tuple[int, ...], str] | None:
    """(leader, new ISR, ``"clean"``/``"unclean"``), or None when nobody is eligible: the first live ISR
    member; else, if ``unclean``, the first live replica with an ISR of itself."""
    live, isr = set(live), tuple(isr)
    assignment = tuple(assignment)
    for r in assignment:
        if r in live and r in isr:
            return r, tuple(b for b in isr if b in live), "clean"
    if unclean:
        for r in assignment:
            if r in live:
                return r, (r,), "unclean"
    return None


def reassign_partition_leader_election(
    reassignment: Iterable[int], isr: Iterable[int], live: Iterable[int]
) -> int:
    """The first target replica that is live and in the ISR; -1 when none is."""
    live, isr = set(live), tuple(isr)
    return next((r for r in reassignment if r in live and r in isr), NO_LEADER)


def preferred_replica_partition_leader_election(
    assignment: tuple[int, ...], isr: Iterable[int], live: Iterable[int]
) -> int | None:
    """The first replica (the preferred leader) if it is live and in the ISR."""
    preferred = assignment[0]
    return preferred if preferred in set(live) and preferred in tuple(isr) else None


def controlled_shutdown_partition_leader_election(
    assignment: Iterable[int], isr: Iterable[int], live: Iterable[int]
) -> int | None:
    """The first replica in the ISR (the shutting-down broker already removed) that is live and not
    shutting down (``live`` leaves those out)."""
    live, isr = set(live), tuple(isr)
    return next((r for r in assignment if r in isr and r in live), None)


# ----------------------------------------------------------------------------------- the machine


class PartitionStateMachine:
    """Runs inside the active controller; ``controller`` is the ``Controller`` (its context, its
    epoch-fenced ZooKeeper writes, its log, its channel manager)."""

    def __init__(self, controller: Any) -> None:
        self.c = controller

    @property
    def ctx(self) -> ControllerContext:
        ctx = self.c.ctx
        assert ctx is not None, "not the active controller"
        return ctx

    def unclean_allowed(self, topic: str) -> bool:
        """``unclean.leader.election.enable``, the topic's override first."""
        override = self.ctx.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return config_flag(self.c.config["unclean.leader.election.enable"] if override is None else override)

    # ------------------------------------------------------------------------- the state znode

    def write_state(self, tp: TopicPartition, new: paths.PartitionState) -> bool:
        """CAS the state znode; on a version conflict reload it and return False."""
        info = self.ctx.topics[tp.topic][tp.partition]
        path = paths.partition_state_path(*tp)
        try:
            if info.state is None:
                self.c._write([Create(path, new.encode(), make_parents=True)])
                version = 0
            else:
                res = self.c._write([SetData(path, new.encode(), info.zk_version)])
                version = res[1].version
                info.mzxid = res[1].mzxid
        except (BadVersion, NodeExists):
            self.load_state(tp, info)
            self.c._log("partition_state_conflict", tp=str(tp), zk_version=info.zk_version)
            return False
        info.state, info.zk_version = new, version
        return True

    def load_state(self, tp: TopicPartition, info: PartitionInfo) -> None:
        try:
            data, st = self.c.zk.get(paths.partition_state_path(*tp))
            info.state, info.zk_version = paths.PartitionState.decode(data), st.version
            info.mzxid = st.mzxid
        except NoNode:
            info.state, info.zk_version, info.mzxid = None, -1, -1

    # ---------------------------------------------------------------------------- transitions

    def initialize(
        self, tp: TopicPartition, info: PartitionInfo, batch: ControllerBrokerRequestBatch
    ) -> None:
        """NewPartition -> OnlinePartition: first live replica leads, ISR = live replicas, epoch 0."""
        ctx = self.ctx
        live = [r for r in info.replicas if r in ctx.live_brokers]
        if not live:
            self.c._log("partition_offline", tp=str(tp), reason="no live replica at creation")
            return
        new = paths.PartitionState(
            leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=ctx.epoch
        )
        if not self.write_state(tp, new):
            return
        self.c._log(
            "leader_elected",
            tp=str(tp),
            leader=new.leader,
            leader_epoch=0,
            isr=new.isr,
            partition_epoch=info.zk_version,
            reason="new_partition",
        )
        for r in live:
            batch.add_leader_and_isr(r, tp, info, is_new=True)
        batch.add_update_metadata(tp)

    def update_leader_and_isr(
        self,
        tp: TopicPartition,
        info: PartitionInfo,
        leader: int,
        isr: tuple[int, ...],
        batch: ControllerBrokerRequestBatch,
        *,
        reason: str,
        event: str,
        extra: Mapping[str, Any] | None = None,
        notify: Iterable[int] | None = None,
    ) -> bool:
        """Write leader/ISR with leader_epoch + 1, log it, queue LeaderAndIsr (to the live replicas, or
        the live ones of ``notify``) and UpdateMetadata; False if the write lost a race."""
        ctx = self.ctx
        assert info.state is not None
        old = info.state
        new = paths.PartitionState(
            leader=leader, leader_epoch=old.leader_epoch + 1, isr=isr, controller_epoch=ctx.epoch
        )
        if not self.write_state(tp, new):
            return False
        self.c._log(
            event,
            tp=str(tp),
            leader=leader,
            leader_epoch=new.leader_epoch,
            isr=isr,
            partition_epoch=info.zk_version,
            prev_leader=old.leader,
            reason=reason,
            **(extra or {}),
        )
        targets = info.replicas if notify is None else notify
        for r in targets:
            if r in ctx.live_brokers:
                batch.add_leader_and_isr(r, tp, info)
        batch.add_update_metadata(tp)
        return True

    def leader_offline(
        self,
        tp: TopicPartition,
        info: PartitionInfo,
        remaining_isr: tuple[int, ...],
        batch: ControllerBrokerRequestBatch,
        *,
        reason: str,
    ) -> None:
        """The leader's replica went offline: the offline election among ``remaining_isr``; if nobody is
        eligible, OfflinePartition (leader -1), keeping the last ISR member so it can lead when it returns."""
        st = info.state
        assert st is not None
        choice = offline_partition_leader_election(
            info.replicas,
            remaining_isr,
            self.ctx.eligible_leaders(tp),
            unclean=self.unclean_allowed(tp.topic),
        )
        if choice is not None:
            leader, isr, how = choice
            self.update_leader_and_isr(
                tp, info, leader, isr, batch, reason=reason, event="leader_elected",
                extra={"election": how},
            )  # fmt: skip
            return
        isr = remaining_isr or st.isr[-1:]
        self.update_leader_and_isr(tp, info, NO_LEADER, isr, batch, reason=reason, event="partition_offline")

    def elect_offline_partitions(self, batch: ControllerBrokerRequestBatch, *, reason: str) -> None:
        """Try to bring every leaderless partition online (OfflinePartition -> OnlinePartition; Kafka's
        ``triggerOnlinePartitionStateChange``)."""
        ctx = self.ctx
        for tp, info in ctx.partitions():
            st = info.state
            if st is None or (st.leader != NO_LEADER and st.leader in ctx.live_brokers):
                continue
            choice = offline_partition_leader_election(
                info.replicas, st.isr, ctx.eligible_leaders(tp), unclean=self.unclean_allowed(tp.topic)
            )
            if choice is None:
                continue
            leader, isr, how = choice
            self.update_leader_and_isr(
                tp, info, leader, isr, batch, reason=reason, event="leader_elected", extra={"election": how}
            )

    def elect_preferred(
        self, tps: Iterable[TopicPartition], batch: ControllerBrokerRequestBatch, *, reason: str
    ) -> dict[TopicPartition, int]:
        """Move leadership to each partition's first replica where it is alive and in the ISR; the
        ElectLeaders error code of each partition."""
        ctx = self.ctx
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            info = ctx.info(tp)
            if info is None or info.state is None:
                out[tp] = UnknownTopicOrPartitionError.code
                continue
            st = info.state
            if st.leader == info.replicas[0]:
                out[tp] = ElectionNotNeededError.code
                continue
            preferred = preferred_replica_partition_leader_election(
                info.replicas, st.isr, ctx.eligible_leaders(tp)
            )
            if preferred is None or tp in ctx.reassigning:
                out[tp] = PreferredLeaderNotAvailableError.code
            elif self.update_leader_and_isr(
                tp, info, preferred, st.isr, batch, reason=reason, event="leader_elected",
                extra={"election": "preferred"},
            ):  # fmt: skip
                out[tp] = NO_ERROR
            else:
                out[tp] = PreferredLeaderNotAvailableError.code
        return out

    def elect_unclean(
        self, tps: Iterable[TopicPartition], batch: ControllerBrokerRequestBatch, *, reason: str
    ) -> dict[TopicPartition, int]:
        """ElectLeaders' unclean election: each leaderless partition gets the offline election with
        unclean election allowed, whatever the topic says; the error code of each partition."""
        ctx = self.ctx
        codes: dict[TopicPartition, int] = {}
        for tp in tps:
            info = ctx.info(tp)
            if info is None or info.state is None:
                codes[tp] = UnknownTopicOrPartitionError.code
                continue
            if info.state.leader in ctx.live_brokers:
                codes[tp] = ElectionNotNeededError.code
                continue
            choice = offline_partition_leader_election(
                info.replicas, info.state.isr, ctx.live_brokers, unclean=True
            )
            if choice is None:
                codes[tp] = EligibleLeadersNotAvailableError.code
                continue
            leader, isr, how = choice
            self.update_leader_and_isr(
                tp, info, leader, isr, batch, reason=reason, event="leader_elected",
                extra={"election": how},
            )  # fmt: skip
            codes[tp] = NO_ERROR
        return codes


__all__ = [
    "PartitionStateMachine",
    "controlled_shutdown_partition_leader_election",
    "offline_partition_leader_election",
    "preferred_replica_partition_leader_election",
    "reassign_partition_leader_election",
]
