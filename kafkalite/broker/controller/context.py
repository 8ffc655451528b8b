"""What the active controller knows (Kafka's ``ControllerContext``), shared by the controller and its state
machines."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.kafka_uuid import random_uuid
from kafkalite.coordination import paths
from kafkalite.protocol import BrokerEndpoint, TopicPartition
from kafkalite.protocol.metadata import NO_TOPIC_ID


@dataclass
class PartitionInfo:
    """The controller's view of one partition: assignment plus the state znode and its version."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    state: paths.PartitionState | None = None
    zk_version: int = -1
    mzxid: int = -1  # zxid of the state znode's last write, as loaded or written by this controller
    topic_id: uuid.UUID = NO_TOPIC_ID  # the topic's, from /brokers/topics/<t>; sent with every state


@dataclass
class ControllerContext:
    """Everything the active controller knows, loaded from ZooKeeper on election."""

    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, int] = field(default_factory=dict)  # id -> broker epoch (czxid)
    endpoints: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    topic_id_rng: random.Random = field(default_factory=random.Random)
    """Draws new topic ids; seeded per controllership so a simulated run is repeatable."""
    reassigning: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    deletion: Any = None  # the TopicDeletionManager of this controllership
    shutting_down: set[int] = field(default_factory=set)  # brokers in controlled shutdown
    # Kafka's replicasOnOfflineDirs: per broker, the partitions whose replica there sits in a failed log dir.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def eligible_leaders(self, tp: TopicPartition | None = None) -> set[int]:
        """Live brokers that may take leadership (not those shutting down; for ``tp``, not those whose
        replica of it is in a failed log dir)."""
        return {
            b
            for b in self.live_brokers
            if b not in self.shutting_down and (tp is None or tp not in self.offline_replicas.get(b, ()))
        }

    def replica_offline(self, tp: TopicPartition, broker: int) -> bool:
        return broker not in self.live_brokers or tp in self.offline_replicas.get(broker, ())

    def partitions(self) -> list[tuple[TopicPartition, PartitionInfo]]:
        return [
            (TopicPartition(t, p), info)
            for t in sorted(self.topics)
            for p, info in sorted(self.topics[t].items())
        ]

    def new_topic_id(self) -> uuid.UUID:
        """A fresh id (Kafka's ``Uuid.randomUuid``), none of the live topics' ids."""
        return random_uuid(self.topic_id_rng, set(self.topic_ids.values()))

    def info(self, tp: TopicPartition) -> PartitionInfo | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)


def config_flag(value: Any) -> bool:
    """A boolean controller setting, given as a bool or as Kafka's ``"true"``/``"false"`` text."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


__all__ = ["ControllerContext", "PartitionInfo", "config_flag"]
