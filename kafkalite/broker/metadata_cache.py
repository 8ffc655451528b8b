"""``MetadataCache``: what the controller told this broker with UpdateMetadata (Kafka's ``MetadataCache``).

One per broker: the broker (``KafkaBroker``) owns it, answers Metadata and DescribeCluster from it, and
hands the same object to its ``ReplicaManager``, which reads the live brokers (HW advance, low watermark).
An UpdateMetadata from an older controller epoch than the newest applied is refused with
STALE_CONTROLLER_EPOCH and changes nothing: a deposed controller must not roll the view back.
"""

from __future__ import annotations

import uuid

from kafkalite.broker.topic_deletion import LEADER_DURING_DELETE
from kafkalite.broker.topic_validator import is_valid_topic
from kafkalite.errors import (
    InvalidTopicError,
    LeaderNotAvailableError,
    StaleControllerEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    INTERNAL_TOPICS,
    NO_ERROR,
    NO_LEADER,
    BrokerEndpoint,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafkalite.protocol.metadata import NO_TOPIC_ID

CLUSTER_ID = "kafkalite"


class MetadataCache:
    """Partition states, live brokers, the controller's id and epoch, as the last UpdateMetadata set them."""

    def __init__(self, cluster_id: str = CLUSTER_ID) -> None:
        self.cluster_id = cluster_id
        """What Metadata and DescribeCluster answer: a KRaft broker's formatted cluster id."""
        self.partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self.live_brokers: dict[int, BrokerEndpoint] = {}
        self.controller_id: int = -1
        self.controller_epoch = -1
        self._names: set[str] | None = None  # the topics of ``partitions``, rebuilt after a change
        self._counts: dict[str, int] | None = None  # partition count by topic, rebuilt after a change
        self._cache_by_id: dict[uuid.UUID, str] | None = None
        self.topic_ids: dict[str, uuid.UUID] = {}
        """The id of each topic, from the partition states that carry one (KIP-516)."""

    def update(self, req: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions it deleted (leader -2: their topic is going).

        Raises ``StaleControllerEpochError`` (nothing applied) when ``req`` comes from an older controller
        epoch than one already applied."""
        if req.controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"UpdateMetadata from controller {req.controller_id} has epoch {req.controller_epoch}, "
                f"older than {self.controller_epoch}"
            )
        self.controller_epoch = req.controller_epoch
        self.controller_id = req.controller_id
        self.live_brokers = {b.node_id: b for b in req.live_brokers}
        self._names = self._counts = self._cache_by_id = None
        deleted = []
        for st in req.partition_states:
            if st.leader == LEADER_DURING_DELETE:
                if self.partitions.pop(st.tp, None) is not None:
                    deleted.append(st.tp)
            else:
                self.partitions[st.tp] = st
                if st.topic_id != NO_TOPIC_ID:
                    self.topic_ids[st.tp.topic] = st.topic_id
        return deleted

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._names = self._counts = self._cache_by_id = None

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id; Kafka's zero id when this broker knows none (the topic is unknown here).
        An id stays in ``topic_ids`` after its topic's partitions go (removing them one by one must
        stay cheap); only a topic with partitions here answers with it."""
        return self.topic_ids.get(name, NO_TOPIC_ID) if self.has_topic(name) else NO_TOPIC_ID

    def topic_name(self, tid: uuid.UUID) -> str | None:
        """The name of the topic with id ``tid`` here, or None."""
        by_id = self._cache_by_id
        if by_id is None:
            names = self._topic_names()
            by_id = self._cache_by_id = {t: n for n, t in self.topic_ids.items() if n in names}
        return by_id.get(tid)

    def leader(self, tp: TopicPartition) -> int:
        st = self.partitions.get(tp)
        return st.leader if st else NO_LEADER

    def isr(self, tp: TopicPartition) -> tuple[int, ...]:
        st = self.partitions.get(tp)
        return tuple(st.isr) if st else ()

    def topics(self) -> list[str]:
        return sorted(self._topic_names())

    def has_topic(self, name: str) -> bool:
        return name in self._topic_names()

    def partition_counts(self) -> dict[str, int]:
        """Partition count by topic: what the consumer groups' assignors see (shared; do not change it)."""
        if self._counts is None:
            counts: dict[str, int] = {}
            for tp in self.partitions:
                counts[tp.topic] = counts.get(tp.topic, 0) + 1
            self._counts = counts
        return self._counts

    def _topic_names(self) -> set[str]:
        if self._names is None:
            self._names = {tp.topic for tp in self.partitions}
        return self._names

    def metadata(self, req: MetadataRequest) -> MetadataResponse:
        names = self.topics() if req.topics is None else list(req.topics)
        topics = []
        if req.topic_ids:
            for tid in req.topic_ids:
                name = self.topic_name(tid)
                if name is not None:
                    names.append(name)
                else:
                    topics.append(TopicMetadata(name=None, topic_id=tid, error_code=UnknownTopicIdError.code))
        for name in names:
            parts = sorted((tp.partition, st) for tp, st in self.partitions.items() if tp.topic == name)
            if not parts:
                code = UnknownTopicOrPartitionError.code if is_valid_topic(name) else InvalidTopicError.code
                topics.append(TopicMetadata(name=name, error_code=code))
                continue
            pms = []
            for p, st in parts:
                leader_ok = st.leader != NO_LEADER and st.leader in self.live_brokers
                pms.append(
                    PartitionMetadata(
                        partition=p,
                        error_code=NO_ERROR if leader_ok else LeaderNotAvailableError.code,
                        leader_id=st.leader if leader_ok else NO_LEADER,
                        leader_epoch=st.leader_epoch,
                        replicas=st.replicas,
                        isr=st.isr,
                        offline_replicas=st.offline_replicas,
                    )
                )
            topics.append(
                TopicMetadata(
                    name=name,
                    topic_id=self.topic_id(name),
                    is_internal=name in INTERNAL_TOPICS,
                    partitions=tuple(pms),
                )
            )
        return MetadataResponse(
            brokers=tuple(self.live_brokers[b] for b in sorted(self.live_brokers)),
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            topics=tuple(topics),
        )

    def describe_cluster(self) -> DescribeClusterResponse:
        return DescribeClusterResponse(
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            brokers=tuple(self.live_brokers[b] for b in sorted(self.live_brokers)),
        )


__all__ = ["CLUSTER_ID", "MetadataCache"]
