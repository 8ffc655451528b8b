"""``BrokerMetadataPublisher``: a KRaft broker applies the metadata it replayed (Kafka's
``BrokerMetadataPublisher`` with ``ReplicaManager.applyDelta``).

It gathers the partitions the deltas changed and the topics they removed, and when asked to publish
turns them into what the ZooKeeper-mode broker gets from its controller, applied the same way: the
metadata cache's update, ``become_leader_or_follower`` for the replicas this broker hosts (leader or
follower, with the leader and partition epochs that order the changes), StopReplica with deletion for a
removed topic. The raft epoch of the records stands in for the controller epoch: it only grows along
the log, which is what the replica manager's fencing needs. Topic configs come from ConfigRecords; the
ACLs go to the broker's ``StandardAuthorizer`` and the SCRAM credentials are read from the published image
(``BrokerServer.scram_credential``), as Kafka's ACL and SCRAM publishers hand them on.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafkalite.broker.topic_deletion import LEADER_DURING_DELETE
from kafkalite.common.kafka_uuid import uuid_to_str
from kafkalite.errors import KafkaStorageError
from kafkalite.metadata.delta import TOPIC_RESOURCE, MetadataDelta
from kafkalite.metadata.image import MetadataImage, TopicImage
from kafkalite.protocol import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafkalite.protocol.metadata import BrokerEndpoint
from kafkalite.storage.partition_metadata import PartitionMetadataFile

if TYPE_CHECKING:
    from kafkalite.broker.broker_server import BrokerServer

_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


class BrokerMetadataPublisher:
    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self.published = MetadataImage()
        self._changed: set[tuple[uuid.UUID, int]] = set()
        self._deleted: dict[uuid.UUID, TopicImage] = {}
        self._configs_changed = False
        self._first_publish = True

    def on_delta(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """A publisher for the ``MetadataLoader``: note what changed, apply it at the next ``publish``."""
        self._changed |= set(delta.changed)
        for tid, t in delta.deleted_topics.items():
            self._deleted.setdefault(tid, t)
            self._changed = {k for k in self._changed if k[0] != tid}
        self._configs_changed |= image.configs is not delta.image.configs

    def publish(self, image: MetadataImage, controller_id: int) -> None:
        """Apply everything since the last publish (called once the broker has replayed what it fetched)."""
        if image is self.published:
            return
        b = self.broker
        epoch = max(image.epoch, 0)
        states, leader_states, stops = [], [], []
        for tid, t in self._deleted.items():
            if tid in image.topics:
                continue  # removed and created again under the same id: cannot happen, ids are unique
            for p in t.partitions:
                tp = TopicPartition(t.name, p)
                states.append(UpdateMetadataPartitionState(tp=tp, leader=LEADER_DURING_DELETE))
                if b.broker_id in t.partitions[p].replicas:
                    stops.append(StopReplicaPartitionState(tp=tp, delete_partition=True))
        if self._first_publish:
            stops += self._stray_replicas(image, {s.tp for s in stops})
        for tid, p in sorted(self._changed, key=lambda k: (str(k[0]), k[1])):
            t = image.topics.get(tid)
            part = None if t is None else t.partitions.get(p)
            if t is None or part is None:
                continue
            tp = TopicPartition(t.name, p)
            states.append(
                UpdateMetadataPartitionState(
                    tp=tp,
                    controller_epoch=epoch,
                    leader=part.leader,
                    leader_epoch=part.leader_epoch,
                    isr=part.isr,
                    partition_epoch=part.partition_epoch,
                    replicas=part.replicas,
                    offline_replicas=tuple(r for r in part.replicas if _fenced(image, r)),
                    topic_id=tid,
                )
            )
            old_part = self.published.partition(t.name, p)
            if b.broker_id not in part.replicas and old_part is not None and b.broker_id in old_part.replicas:
                # A reassignment moved the partition off this broker: its replica goes, as Kafka's
                # applyDelta deletes a local partition the delta no longer places here.
                stops.append(StopReplicaPartitionState(tp=tp, delete_partition=True))
            if b.broker_id in part.replicas:
                old = self.published.topics.get(tid)
                leader_states.append(
                    LeaderAndIsrPartitionState(
                        tp=tp,
                        controller_epoch=epoch,
                        leader=part.leader,
                        leader_epoch=part.leader_epoch,
                        isr=part.isr,
                        partition_epoch=part.partition_epoch,
                        replicas=part.replicas,
                        is_new=old is None or p not in old.partitions,
                        topic_id=tid,
                    )
                )
        live = tuple(
            _endpoint(reg) for reg in sorted(image.brokers.values(), key=lambda r: r.id) if not reg.fenced
        )
        deleted = b.cache.update(
            UpdateMetadataRequest(
                controller_id=controller_id,
                controller_epoch=epoch,
                partition_states=tuple(states),
                live_brokers=live,
            )
        )
        rm = b.rm
        if rm is not None:
            if self._configs_changed or leader_states:
                topics = {s.tp.topic for s in leader_states} | {
                    name for (kind, name) in image.configs if kind == TOPIC_RESOURCE
                }
                for topic in sorted(topics):
                    if image.topic(topic) is not None:
                        rm.set_topic_config(topic, dict(image.configs.get((TOPIC_RESOURCE, topic), {})))
            if stops:
                for s in stops:
                    if image.partition(s.tp.topic, s.tp.partition) is None:
                        b.cache.remove(s.tp)
                rm.handle_stop_replica(
                    StopReplicaRequest(controller_epoch=epoch, partition_states=tuple(stops))
                )
            if leader_states:
                rm.handle_leader_and_isr(
                    LeaderAndIsrRequest(
                        controller_id=controller_id,
                        controller_epoch=epoch,
                        partition_states=tuple(leader_states),
                    )
                )
            rm.handle_update_metadata(UpdateMetadataRequest(controller_epoch=epoch))
        if deleted and b.group_manager is not None:
            b.group_manager.on_partitions_deleted(deleted)
        if b.authorizer is not None and b.authorizer.apply(image.acls):
            b.log("acls_applied", broker=b.broker_id, acls=len(image.acls), offset=image.offset)
        self.published = image
        self._first_publish = False
        self._changed.clear()
        self._deleted.clear()
        self._configs_changed = False

    def _stray_replicas(
        self, image: MetadataImage, known: set[TopicPartition]
    ) -> list[StopReplicaPartitionState]:
        """On the first publish, the partition logs on this broker's disks that the image gives it no
        replica of (Kafka's stray replicas): a broker that loaded a metadata snapshot never saw the
        RemoveTopicRecord of a topic deleted while it was away, so nothing else would remove them.
        A log is matched by the topic id in its ``partition.metadata`` (KIP-516), so the log of a topic
        deleted and created again under the same name while this broker was down is stray too. A log
        without the file (written before kafkalite kept ids) is matched by name and gets the file when
        its replica starts; Kafka 3.7+ counts such a log as stray, but here it may hold data."""
        b = self.broker
        rm = b.rm
        out: list[StopReplicaPartitionState] = []
        if rm is None:
            return out
        hosted = {p.tp for p in rm.partitions()}
        for d in rm.log_dirs:
            children = sorted(d.iterdir()) if d.is_dir() else []
            for child in children:
                topic, sep, index = child.name.rpartition("-")
                if (
                    not (sep and topic and index.isdigit() and child.is_dir())
                    or topic == "__cluster_metadata"
                ):
                    continue
                tp = TopicPartition(topic, int(index))
                if tp in hosted or tp in known:
                    continue
                try:
                    tid = PartitionMetadataFile(child).read()
                except KafkaStorageError as e:
                    # keep the data; the replica's start will report the file again
                    b.log("partition_metadata_unreadable", broker=b.broker_id, dir=str(child), error=str(e))
                    tid = None
                if tid is not None:
                    t = image.topics.get(tid)
                    part = None if t is None or t.name != topic else t.partitions.get(tp.partition)
                else:
                    part = image.partition(topic, tp.partition)
                if part is None or b.broker_id not in part.replicas:
                    b.log(
                        "stray_replica",
                        broker=b.broker_id,
                        tp=str(tp),
                        topic_id=None if tid is None else uuid_to_str(tid),
                    )
                    out.append(StopReplicaPartitionState(tp=tp, delete_partition=True))
                    known.add(tp)
        return out


def _fenced(image: MetadataImage, broker_id: int) -> bool:
    reg = image.brokers.get(broker_id)
    return reg is None or reg.fenced


def _endpoint(reg: Any) -> BrokerEndpoint:
    first = reg.listeners[0] if reg.listeners else None
    return BrokerEndpoint(
        node_id=reg.id,
        host=first.host if first else "",
        port=first.port if first else -1,
        rack=reg.rack,
        listeners=tuple(f"{x.name}://{x.host}:{x.port}" for x in reg.listeners),
    )
