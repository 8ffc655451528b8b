"""``image_records``: a ``MetadataImage`` written back as the records that rebuild it (Kafka's
``MetadataImage.write(ImageWriter)``), the content of a metadata snapshot.

The order is Kafka's: the ``metadata.version`` feature first (a reader needs it before anything else),
then the other features, brokers, topics with their partitions, configs, producer ids, ACLs and SCRAM
credentials. Replaying the records into an empty image gives the image back (``image_records`` is
tested for exactly that).
"""

from __future__ import annotations

from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    features = sorted(image.features.items(), key=lambda kv: (kv[0] != "metadata.version", kv[0]))
    out += [FeatureLevelRecord(name=n, feature_level=level) for n, level in features]
    for b in sorted(image.brokers.values(), key=lambda b: b.id):
        out.append(
            RegisterBrokerRecord(
                broker_id=b.id,
                incarnation_id=b.incarnation_id,
                broker_epoch=b.epoch,
                end_points=b.listeners,
                rack=b.rack,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
                log_dirs=b.directories,
            )
        )
    for t in sorted(image.topics.values(), key=lambda t: t.name):
        out.append(TopicRecord(name=t.name, topic_id=t.id))
        for p, r in sorted(t.partitions.items()):
            out.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=t.id,
                    replicas=r.replicas,
                    isr=r.isr,
                    removing_replicas=r.removing_replicas,
                    adding_replicas=r.adding_replicas,
                    leader=r.leader,
                    leader_recovery_state=r.leader_recovery_state,
                    leader_epoch=r.leader_epoch,
                    partition_epoch=r.partition_epoch,
                    directories=r.directories,
                    eligible_leader_replicas=r.elr or None,
                    last_known_elr=r.last_known_elr or None,
                )
            )
    for (kind, name), keys in sorted(image.configs.items()):
        out += [
            ConfigRecord(resource_type=kind, resource_name=name, name=k, value=v)
            for k, v in sorted(keys.items())
        ]
    if image.next_producer_id:
        out.append(ProducerIdsRecord(broker_id=-1, next_producer_id=image.next_producer_id))
    out += [acl for _, acl in sorted(image.acls.items())]
    out += [UserScramCredentialRecord.of(u, m, cred) for (u, m), cred in sorted(image.scram.items())]
    return out


__all__ = ["image_records"]
