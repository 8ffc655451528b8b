"""The producer's view of the cluster, as Kafka's client ``Metadata``: leaders per partition, live brokers.

It is refreshed with a ``MetadataRequest`` for the topics in use: on demand (``request_update``, after a
``NOT_LEADER_OR_FOLLOWER``, ``UNKNOWN_TOPIC_OR_PARTITION``, ``LEADER_NOT_AVAILABLE`` or a lost connection)
and every ``metadata.max.age.ms``. A partition entry with an older leader epoch than the one already known
is ignored (KIP-320): a lagging broker must not move the producer back to a deposed leader.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.errors import error_name
from kafkalite.protocol import NO_LEADER, MetadataResponse, TopicPartition
from kafkalite.protocol.metadata import NO_TOPIC_ID
from kafkalite.protocol.metadata import topic_id as derived_topic_id

__all__ = ["ClusterMetadata", "PartitionInfo", "TopicInfo"]

# Topic errors that will not go away by asking again: sends to the topic fail at once.
FATAL_TOPIC_ERRORS = frozenset({17, 29})  # INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(slots=True)
class TopicInfo:
    """One topic's partitions; ``available`` lists those with a leader (what partitioners choose from)."""

    name: str
    partitions: list[PartitionInfo]
    available: list[int]
    topic_id: uuid.UUID = NO_TOPIC_ID
    """The id the broker answered with (KIP-516); the zero id from a broker that gave none."""

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


class ClusterMetadata:
    """Leaders and brokers known to one client; ``version`` grows with every applied response."""

    def __init__(self, bootstrap: list[int], max_age_ms: int) -> None:
        self.bootstrap = list(bootstrap)
        self.brokers: list[int] = []
        self.max_age_ms = max_age_ms
        self.topics: dict[str, TopicInfo] = {}
        self.topic_errors: dict[str, str] = {}
        self.wanted: dict[str, None] = {}  # topics in use, insertion-ordered
        self.need_update = True
        self.last_refresh_ms: int | None = None
        self.version = 0
        self._leaders: dict[TopicPartition, int] = {}
        # Called after every applied response: a producer ends its fast-path entries, which hold
        # partition counts and availability from the metadata before.
        self.on_update: Callable[[], None] | None = None

    def add_topic(self, topic: str) -> bool:
        """Start tracking ``topic``; True if it is new (the caller then asks for a refresh)."""
        if topic in self.wanted:
            return False
        self.wanted[topic] = None
        self.need_update = True
        return True

    def request_update(self) -> None:
        self.need_update = True

    def update_due(self, now_ms: int) -> bool:
        if self.need_update or self.last_refresh_ms is None:
            return True
        return now_ms - self.last_refresh_ms >= self.max_age_ms

    def next_age_refresh_ms(self) -> int | None:
        return None if self.last_refresh_ms is None else self.last_refresh_ms + self.max_age_ms

    def nodes(self) -> list[int]:
        """Brokers to ask for metadata: the live ones last seen, else the bootstrap list."""
        return self.brokers or self.bootstrap

    def leader_for(self, tp: TopicPartition) -> int:
        return self._leaders.get(tp, NO_LEADER)

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def update(self, resp: MetadataResponse, now_ms: int) -> None:
        """Apply a response: brokers, and each requested topic's partitions (stale epochs ignored)."""
        self.version += 1
        self.last_refresh_ms = now_ms
        self.need_update = False
        if resp.brokers:
            self.brokers = sorted(b.node_id for b in resp.brokers)
        for tm in resp.topics:
            if tm.error_code:
                self.topic_errors[tm.name] = error_name(tm.error_code)
                if tm.error_code in FATAL_TOPIC_ERRORS:
                    self._drop_topic(tm.name)
                # A retriable topic error (auto-creation in progress) keeps what we knew; ask again soon.
                if tm.name in self.wanted:
                    self.need_update = True
                continue
            self.topic_errors.pop(tm.name, None)
            old = self.topics.get(tm.name)
            old_parts = {p.partition: p for p in old.partitions} if old else {}
            parts = []
            for pm in sorted(tm.partitions, key=lambda p: p.partition):
                prev = old_parts.get(pm.partition)
                if prev is not None and pm.leader_epoch >= 0 and pm.leader_epoch < prev.leader_epoch:
                    parts.append(prev)  # stale answer from a broker that has not heard of the new leader
                    continue
                leader = pm.leader_id if pm.error_code == 0 or pm.leader_id >= 0 else NO_LEADER
                parts.append(PartitionInfo(pm.partition, leader, pm.leader_epoch, pm.replicas, pm.isr))
            for p in parts:
                if p.leader < 0 and tm.name in self.wanted:
                    self.need_update = True  # an election is under way: look again after the backoff
            self.topics[tm.name] = TopicInfo(
                tm.name, parts, [p.partition for p in parts if p.leader >= 0], tm.topic_id
            )
            for p in parts:
                self._leaders[TopicPartition(tm.name, p.partition)] = p.leader
        if self.on_update is not None:
            self.on_update()

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id as the brokers gave it; for a topic they gave none, or one not known yet, the
        id kafkalite derives from the name (``protocol.metadata.topic_id``)."""
        info = self.topics.get(name)
        if info is None or info.topic_id == NO_TOPIC_ID:
            return derived_topic_id(name)
        return info.topic_id

    def _drop_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        if info is not None:
            for p in info.partitions:
                self._leaders.pop(TopicPartition(name, p.partition), None)
