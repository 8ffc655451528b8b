"""Kafka's ``TopicDeletionManager`` (ZooKeeper mode): how the controller deletes a topic.

DeleteTopics (or an admin tool) creates ``/admin/delete_topics/<t>``. The controller, watching that path,
takes the topic out of its partition and replica state machines and:

1. tells every live broker, by UpdateMetadata with leader -2 (Kafka's ``LeaderDuringDelete``), that the
   topic's partitions are going: they leave every metadata cache, so clients stop seeing the topic;
2. sends StopReplica with ``delete_partition`` to every replica, which closes and removes its log;
3. once every replica has answered, deletes ``/brokers/topics/<t>``, ``/config/topics/<t>`` and the admin
   znode. Only then can a topic of the same name be created again.

A replica on a dead broker keeps the deletion pending until that broker is back (Kafka's "ineligible"
replicas); a partition being reassigned holds it until the move ends. A controller failover resumes
every deletion from the admin znodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.coordination import paths
from kafkalite.coordination.store import Delete, NoNode
from kafkalite.protocol import (
    NO_ERROR,
    StopReplicaPartitionState,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
)

LEADER_DURING_DELETE = -2


@dataclass
class _Deletion:
    partitions: dict[int, tuple[int, ...]]  # partition -> replicas
    pending: set[tuple[int, TopicPartition]] = field(default_factory=set)  # (broker, tp) not yet deleted
    requested: set[tuple[int, TopicPartition]] = field(default_factory=set)  # StopReplica sent (this epoch)
    started: bool = False


class TopicDeletionManager:
    """Runs inside the active controller; ``controller`` is the ``Controller``."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.topics: dict[str, _Deletion] = {}
        self.waiters: list[tuple[set[str], Callable[[], None]]] = []

    # ------------------------------------------------------------------------------------ queue

    def is_deleting(self, topic: str) -> bool:
        return topic in self.topics

    def enqueue(self, topic: str) -> None:
        """Mark ``topic`` for deletion (it must be loaded in the controller context)."""
        ctx = self.c.ctx
        if topic in self.topics or topic not in ctx.topics:
            return
        parts = {p: info.replicas for p, info in ctx.topics[topic].items()}
        self.topics[topic] = _Deletion(
            parts, {(r, TopicPartition(topic, p)) for p, rs in parts.items() for r in rs}
        )
        self.c._log("topic_deletion_queued", topic=topic)

    def resume(self) -> None:
        """Move every queued deletion as far as it can go now."""
        for topic in sorted(self.topics):
            self._progress(topic)

    def when_started(self, topics: set[str], callback: Callable[[], None]) -> None:
        """Call ``callback`` once each of ``topics`` has left the metadata (deletion started or done)."""
        self.waiters.append((set(topics), callback))
        self._notify()

    def _notify(self) -> None:
        done = [w for w in self.waiters if not any(self._in_metadata(t) for t in w[0])]
        self.waiters = [w for w in self.waiters if w not in done]
        for _topics, callback in done:
            callback()

    def _in_metadata(self, topic: str) -> bool:
        d = self.topics.get(topic)
        return topic in self.c.ctx.topics or (d is not None and not d.started)

    # ---------------------------------------------------------------------------------- progress

    def _eligible(self, topic: str) -> bool:
        ctx = self.c.ctx
        return not any(tp.topic == topic for tp in ctx.reassigning)

    def _progress(self, topic: str) -> None:
        ctx = self.c.ctx
        d = self.topics[topic]
        if not d.started:
            if not self._eligible(topic):
                return
            d.started = True
            ctx.topics.pop(topic, None)
            ctx.topic_ids.pop(topic, None)
            ctx.topic_configs.pop(topic, None)
            self.c._log("topic_deletion_started", topic=topic, partitions=sorted(d.partitions))
            self._send_metadata_removal(topic, d)
            self._notify()
        stops: dict[int, list[TopicPartition]] = {}
        for broker, tp in sorted(d.pending - d.requested):
            if broker in ctx.live_brokers:
                stops.setdefault(broker, []).append(tp)
                d.requested.add((broker, tp))
        for broker, tps in sorted(stops.items()):
            self.c.channel.send_request(
                broker,
                StopReplicaRequest(
                    controller_id=self.c.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers.get(broker, -1),
                    partition_states=tuple(
                        StopReplicaPartitionState(
                            tp=tp, leader_epoch=LEADER_DURING_DELETE, delete_partition=True
                        )
                        for tp in tps
                    ),
                ),
            )
        if not d.pending:
            self._complete(topic)

    def _send_metadata_removal(self, topic: str, d: _Deletion) -> None:
        ctx = self.c.ctx
        states = tuple(
            UpdateMetadataPartitionState(
                tp=TopicPartition(topic, p),
                controller_epoch=ctx.epoch,
                leader=LEADER_DURING_DELETE,
                replicas=rs,
            )
            for p, rs in sorted(d.partitions.items())
        )
        self.c.channel.broadcast_metadata(states)

    def on_stop_replica_response(self, broker: int, request: StopReplicaRequest, response: Any) -> None:
        errors = {e.tp: e.error_code for e in getattr(response, "partition_errors", ())}
        failed = getattr(response, "error_code", NO_ERROR) != NO_ERROR
        touched = set()
        for st in request.partition_states:
            d = self.topics.get(st.tp.topic)
            if d is None or not st.delete_partition:
                continue
            key = (broker, st.tp)
            if failed or errors.get(st.tp, NO_ERROR) != NO_ERROR:
                d.requested.discard(key)  # Kafka marks it ineligible; retried on the next resume
                continue
            d.pending.discard(key)
            touched.add(st.tp.topic)
        for topic in sorted(touched):
            if not self.topics[topic].pending:
                self._complete(topic)

    def on_broker_failure(self, dead: set[int]) -> None:
        """A StopReplica to a broker that died may never be answered: send it again when it is back."""
        for d in self.topics.values():
            d.requested = {(b, tp) for b, tp in d.requested if b not in dead}

    def _complete(self, topic: str) -> None:
        zk = self.c.zk
        ops: list[Any] = []
        base = paths.topic_path(topic)
        try:
            for p in sorted(zk.get_children(paths.topic_partitions_path(topic)), key=int):
                with_state = paths.partition_state_path(topic, int(p))
                if zk.exists(with_state) is not None:
                    ops.append(Delete(with_state))
                ops.append(Delete(paths.partition_path(topic, int(p))))
            ops.append(Delete(paths.topic_partitions_path(topic)))
        except NoNode:
            pass
        for path in (base, f"{paths.CONFIG_TOPICS}/{topic}", paths.delete_topic_path(topic)):
            if zk.exists(path) is not None:
                ops.append(Delete(path))
        if ops:
            self.c._write(ops)
        del self.topics[topic]
        self.c._log("topic_deleted", topic=topic)
        self._notify()


__all__ = ["LEADER_DURING_DELETE", "TopicDeletionManager"]
