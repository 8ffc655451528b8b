"""``MetadataDelta``: records replayed on top of a ``MetadataImage`` (Kafka's ``image.MetadataDelta``).

The delta copies a part of the image only when a record first touches it (the broker map, one topic's
partition map), so ``apply`` costs what changed, not the size of the cluster. It also remembers what
changed, which is what a broker acts on (``changed_partitions``, ``deleted_topics``), as Kafka's
``ReplicaManager.applyDelta`` reads its ``TopicsDelta``.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from kafkalite.common.scram import ScramCredential
from kafkalite.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    frozen,
)
from kafkalite.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

TOPIC_RESOURCE = 2
"""Kafka's ``ConfigResource.Type.TOPIC``."""


class MetadataReplayError(RuntimeError):
    """A record that does not fit the image it is replayed on (a broker epoch or topic that is not
    there): the log and the image disagree, which Kafka treats as fatal too."""


class MetadataDelta:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict | None = None
        self._brokers: dict | None = None
        self._topics: dict[uuid.UUID, TopicImage | None] = {}
        self._partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._configs: dict | None = None
        self._acls: dict | None = None
        self._scram: dict | None = None
        self._next_producer_id: int | None = None
        self.changed: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}
        """(topic id, partition) -> its state after the delta, for each partition created or changed."""
        self.deleted_topics: dict[uuid.UUID, TopicImage] = {}
        self.changed_brokers: set[int] = set()

    # ------------------------------------------------------------------------------- copy on write
    def _brokers_w(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    def _configs_w(self) -> dict:
        if self._configs is None:
            self._configs = dict(self.image.configs)
        return self._configs

    def _topic(self, tid: uuid.UUID) -> TopicImage | None:
        if tid in self._topics:
            return self._topics[tid]
        return self.image.topics.get(tid)

    def _parts_w(self, tid: uuid.UUID) -> dict[int, PartitionRegistration]:
        got = self._partitions.get(tid)
        if got is None:
            t = self._topic(tid)
            if t is None:
                raise MetadataReplayError(f"a partition record names topic id {tid}, which does not exist")
            got = self._partitions[tid] = dict(t.partitions)
        return got

    def _broker(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration:
        brokers = self._brokers if self._brokers is not None else self.image.brokers
        b = brokers.get(broker_id)
        if b is None or b.epoch != epoch:
            raise MetadataReplayError(
                f"cannot {what} broker {broker_id} epoch {epoch}: registered "
                f"{'nothing' if b is None else f'epoch {b.epoch}'}"
            )
        return b

    # ------------------------------------------------------------------------------------ replay
    def replay(self, record: MetadataRecord, offset: int = -1) -> None:
        """Apply one record; ``offset`` is where it sits in the log (a registration's broker epoch)."""
        r = record
        if isinstance(r, PartitionChangeRecord):
            parts = self._parts_w(r.topic_id)
            old = parts.get(r.partition_id)
            if old is None:
                raise MetadataReplayError(f"no partition {r.partition_id} of topic id {r.topic_id} to change")
            parts[r.partition_id] = self.changed[(r.topic_id, r.partition_id)] = old.merge(r)
        elif isinstance(r, PartitionRecord):
            parts = self._parts_w(r.topic_id)
            parts[r.partition_id] = self.changed[(r.topic_id, r.partition_id)] = (
                PartitionRegistration.from_record(r)
            )
        elif isinstance(r, TopicRecord):
            self._topics[r.topic_id] = TopicImage(r.name, r.topic_id)
            self._partitions[r.topic_id] = {}
        elif isinstance(r, RemoveTopicRecord):
            t = self._topic(r.topic_id)
            if t is None:
                raise MetadataReplayError(f"cannot remove topic id {r.topic_id}: it does not exist")
            if r.topic_id in self.image.topics:
                self.deleted_topics[r.topic_id] = self.image.topics[r.topic_id]
            self._topics[r.topic_id] = None
            self._partitions.pop(r.topic_id, None)
            self.changed = {k: v for k, v in self.changed.items() if k[0] != r.topic_id}
            self._configs_w().pop((TOPIC_RESOURCE, t.name), None)
        elif isinstance(r, RegisterBrokerRecord):
            self._brokers_w()[r.broker_id] = BrokerRegistration(
                r.broker_id,
                r.broker_epoch,
                r.incarnation_id,
                r.end_points,
                r.rack,
                r.fenced,
                r.in_controlled_shutdown,
                tuple(sorted(r.log_dirs)),
            )
            self.changed_brokers.add(r.broker_id)
        elif isinstance(r, FenceBrokerRecord | UnfenceBrokerRecord):
            fence = isinstance(r, FenceBrokerRecord)
            b = self._broker(r.id, r.epoch, "fence" if fence else "unfence")
            self._brokers_w()[r.id] = replace(b, fenced=fence)
            self.changed_brokers.add(r.id)
        elif isinstance(r, BrokerRegistrationChangeRecord):
            b = self._broker(r.broker_id, r.broker_epoch, "change")
            fenced = {1: True, -1: False}.get(r.fenced, b.fenced)
            shutdown = b.in_controlled_shutdown or r.in_controlled_shutdown == 1
            dirs = tuple(sorted(r.log_dirs)) if r.log_dirs else b.directories  # empty: no change
            self._brokers_w()[r.broker_id] = replace(
                b, fenced=fenced, in_controlled_shutdown=shutdown, directories=dirs
            )
            self.changed_brokers.add(r.broker_id)
        elif isinstance(r, UnregisterBrokerRecord):
            self._broker(r.broker_id, r.broker_epoch, "unregister")
            del self._brokers_w()[r.broker_id]
            self.changed_brokers.add(r.broker_id)
        elif isinstance(r, ConfigRecord):
            configs = self._configs_w()
            key = (r.resource_type, r.resource_name)
            keys = dict(configs.get(key, {}))
            if r.value is None:
                keys.pop(r.name, None)
            else:
                keys[r.name] = r.value
            if keys:
                configs[key] = frozen(keys)
            else:
                configs.pop(key, None)
        elif isinstance(r, ProducerIdsRecord):
            self._next_producer_id = r.next_producer_id
        elif isinstance(r, FeatureLevelRecord):
            if self._features is None:
                self._features = dict(self.image.features)
            if r.feature_level == 0:  # level 0: the feature is off
                self._features.pop(r.name, None)
            else:
                self._features[r.name] = r.feature_level
        elif isinstance(r, AccessControlEntryRecord):
            if self._acls is None:
                self._acls = dict(self.image.acls)
            self._acls[r.id] = r
        elif isinstance(r, RemoveAccessControlEntryRecord):
            if self._acls is None:
                self._acls = dict(self.image.acls)
            if self._acls.pop(r.id, None) is None:
                raise MetadataReplayError(f"cannot remove ACL {r.id}: it does not exist")
        elif isinstance(r, UserScramCredentialRecord):
            if self._scram is None:
                self._scram = dict(self.image.scram)
            self._scram[(r.name, r.mechanism)] = ScramCredential(
                r.salt, r.stored_key, r.server_key, r.iterations
            )
        elif isinstance(r, RemoveUserScramCredentialRecord):
            if self._scram is None:
                self._scram = dict(self.image.scram)
            if self._scram.pop((r.name, r.mechanism), None) is None:
                raise MetadataReplayError(
                    f"cannot remove {r.name}'s SCRAM credential {r.mechanism}: there is none"
                )
        elif isinstance(r, NoOpRecord):
            pass
        else:
            raise MetadataReplayError(f"no replay for {type(r).__name__}")

    # ------------------------------------------------------------------------------------- apply
    def apply(self, offset: int, epoch: int) -> MetadataImage:
        """The image after every record replayed, as of log ``offset`` written in ``epoch``."""
        img = self.image
        topics, topic_ids = img.topics, img.topic_ids
        if self._topics or self._partitions:
            topics, topic_ids = dict(img.topics), dict(img.topic_ids)
            for tid, t in self._topics.items():
                old = img.topics.get(tid)
                if old is not None:
                    topic_ids.pop(old.name, None)
                if t is None:
                    topics.pop(tid, None)
                else:
                    topics[tid] = t
                    topic_ids[t.name] = tid
            for tid, parts in self._partitions.items():
                t = topics.get(tid)
                if t is not None:
                    topics[tid] = replace(t, partitions=frozen(parts))
            topics, topic_ids = frozen(topics), frozen(topic_ids)
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            features=img.features if self._features is None else frozen(self._features),
            brokers=img.brokers if self._brokers is None else frozen(self._brokers),
            topics=topics,
            topic_ids=topic_ids,
            configs=img.configs if self._configs is None else frozen(self._configs),
            next_producer_id=img.next_producer_id
            if self._next_producer_id is None
            else self._next_producer_id,
            acls=img.acls if self._acls is None else frozen(self._acls),
            scram=img.scram if self._scram is None else frozen(self._scram),
        )

    def topic_name(self, tid: uuid.UUID) -> str | None:
        t = self._topic(tid) or self.deleted_topics.get(tid)
        return None if t is None else t.name


def replay_all(
    records, image: MetadataImage | None = None, offset: int = -1, epoch: int = -1
) -> MetadataImage:
    """The image after ``records`` (a convenience for tests and tools)."""
    delta = MetadataDelta(image if image is not None else MetadataImage())
    for r in records:
        delta.replay(r)
    return delta.apply(offset, epoch)
