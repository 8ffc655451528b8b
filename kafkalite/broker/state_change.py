"""The controller's replica state changes on one broker: Kafka's ``becomeLeaderOrFollower`` (LeaderAndIsr,
with ``makeLeaders`` / ``makeFollowers``) and ``stopReplicas`` (StopReplica), applied to a ``ReplicaManager``.

A LeaderAndIsr is fenced by the controller epoch, then each partition state newer than the replica's (a
higher leader epoch, or the same one with a higher partition epoch) is applied:

- *leader*: the partition leaves its fetcher; a new term stamps its epoch's start offset and resets what the
  leader knows of its followers (``Partition.make_leader``), a partition-epoch bump only takes the new ISR
  and replicas; then the HW may move and the waiting fetches and produces are checked.
- *follower*: unless it already follows the same leader in the same epoch, the partition leaves its
  fetcher, waiting requests are answered (it no longer leads), and it is added to the new leader's fetcher,
  which first finds where the logs diverge (KIP-101/279), or, without leader epochs, after cutting the log
  back to the high watermark.

StopReplica takes a replica out of its fetcher and answers what waits on it; with ``delete_partition`` its
log goes too. The partitions this broker started or stopped leading are reported to ``on_leadership_change``
(the group and transaction coordinators load or unload their state).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from kafkalite.errors import (
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    NO_ERROR,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
)
from kafkalite.protocol.metadata import NO_TOPIC_ID

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager


def become_leader_or_follower(rm: ReplicaManager, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    """Become leader or follower for each partition whose state is newer than ours."""
    if req.controller_epoch < rm._controller_epoch:
        rm._event("stale_controller", request="LeaderAndIsr", epoch=req.controller_epoch)
        return LeaderAndIsrResponse(error_code=StaleControllerEpochError.code)
    rm._controller_epoch = req.controller_epoch
    errors = []
    now = rm.clock.now_ms()
    elected: list[TopicPartition] = []
    resigned: list[TopicPartition] = []
    for state in req.partition_states:
        tp = state.tp
        if rm.broker_id not in state.replicas:
            errors.append(PartitionError(tp=tp, error_code=UnknownTopicOrPartitionError.code))
            continue
        existing = rm.partition_or_none(tp)
        if existing is not None and not (
            state.leader_epoch > existing.leader_epoch
            or (
                state.leader_epoch == existing.leader_epoch
                and state.partition_epoch > existing.partition_epoch
            )
        ):
            rm._event(
                "stale_leader_epoch", tp=str(tp), epoch=state.leader_epoch, current=existing.leader_epoch
            )
            errors.append(PartitionError(tp=tp, error_code=FencedLeaderEpochError.code))
            continue
        try:
            p = rm._get_or_create(tp)
            if state.topic_id != NO_TOPIC_ID:
                # partition.metadata: written for a new replica, checked for an old one (KIP-516)
                p.log.assign_topic_id(state.topic_id)
            was_leader, old_epoch = p.is_leader, p.leader_epoch
            if state.leader == rm.broker_id:
                make_leader(rm, p, state, now)
                if not was_leader or old_epoch != p.leader_epoch:
                    elected.append(tp)
            else:
                make_follower(rm, p, state)
                if was_leader:
                    resigned.append(tp)
            errors.append(PartitionError(tp=tp, error_code=NO_ERROR))
        except KafkaError as e:
            errors.append(PartitionError(tp=tp, error_code=e.code))
        except OSError as e:
            # e.g. out of file descriptors or a name the file system refuses: this replica cannot
            # open its log, the others go on (Kafka answers KAFKA_STORAGE_ERROR for it)
            rm._event("replica_storage_error", tp=str(tp), error=f"{type(e).__name__}: {e}")
            errors.append(PartitionError(tp=tp, error_code=KafkaStorageError.code))
    rm._notify_leadership(elected, resigned)
    return LeaderAndIsrResponse(partition_errors=tuple(errors))


def make_leader(rm: ReplicaManager, p: Partition, state: Any, now: int) -> None:
    rm.fetcher_manager.remove(p.tp)
    same_term = p.is_leader and p.leader_epoch == state.leader_epoch
    if same_term:  # only ISR/replicas changed (partition epoch bump)
        p.update_assignment(state, now)
    else:
        p.make_leader(state, now)
    rm._maybe_increment_hw(p)
    rm.fetch_purgatory.check_and_complete(p.tp)
    rm.produce_purgatory.check_and_complete(p.tp)


def make_follower(rm: ReplicaManager, p: Partition, state: Any) -> None:
    same = not p.is_leader and p.leader_id == state.leader and p.leader_epoch == state.leader_epoch
    if same and rm.fetcher_manager.has(p.tp, state.leader):
        p.apply_state(state)
        return
    rm.fetcher_manager.remove(p.tp)
    p.make_follower(state)
    rm._fail_delayed(p.tp)
    if rm.config.truncate_by_leader_epoch:
        truncate = True
    else:
        # Pre-KIP-101: cut back to the high watermark (from replication-offset-checkpoint at startup).
        p.truncate_to(p.high_watermark, "high_watermark")
        truncate = False
    if state.leader >= 0 and not rm.config.replica_metadata_only:  # a replica without data fetches none
        rm.fetcher_manager.add(p.tp, state.leader, p.log_end_offset, state.leader_epoch, truncate)


def stop_replicas(rm: ReplicaManager, req: StopReplicaRequest) -> StopReplicaResponse:
    """Stop each replica named whose leader epoch is not older than ours; delete its log if asked."""
    if req.controller_epoch < rm._controller_epoch:
        return StopReplicaResponse(error_code=StaleControllerEpochError.code)
    rm._controller_epoch = req.controller_epoch
    errors = []
    resigned: list[TopicPartition] = []
    for st in req.partition_states:
        p = rm.partition_or_none(st.tp)
        if p is not None and st.leader_epoch >= 0 and st.leader_epoch < p.leader_epoch:
            errors.append(PartitionError(tp=st.tp, error_code=FencedLeaderEpochError.code))
            continue
        rm.fetcher_manager.remove(st.tp)
        rm._fail_delayed(st.tp)
        if p is not None:
            if p.is_leader:
                resigned.append(st.tp)
            p.leader_id = -1
            rm._event("stop_replica", tp=str(st.tp), delete=st.delete_partition)
            if st.delete_partition:
                rm.alter_log_dirs.remove(st.tp, delete=True)
                del rm._partitions[st.tp]
                p.log.close()
                shutil.rmtree(p.log.dir, ignore_errors=True)
                rm._forget_hw_checkpoint(st.tp)
        elif st.delete_partition:
            # Not opened since this broker started (e.g. it was down when its topic was deleted).
            for d in rm.log_dirs:
                shutil.rmtree(d / f"{st.tp.topic}-{st.tp.partition}", ignore_errors=True)
            rm.alter_log_dirs.delete_leftovers(st.tp)  # a move's future log, a retired log
            rm._forget_hw_checkpoint(st.tp)
        errors.append(PartitionError(tp=st.tp, error_code=NO_ERROR))
    rm._notify_leadership([], resigned)
    return StopReplicaResponse(partition_errors=tuple(errors))


__all__ = ["become_leader_or_follower", "make_follower", "make_leader", "stop_replicas"]
