"""``MetadataImage``: the cluster's metadata as of one offset of ``__cluster_metadata`` (Kafka's ``image``).

An image never changes: a ``MetadataDelta`` replays records on top of one and ``apply`` builds the next
image, sharing every part the records did not touch. Two nodes that replayed the same prefix of the log
hold equal images, which is what the simulator's checks compare.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkalite.common.scram import ScramCredential
from kafkalite.metadata.records import (
    DIR_LOST,
    DIR_MIGRATING,
    DIR_UNASSIGNED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    PartitionChangeRecord,
    PartitionRecord,
)


def _empty() -> Mapping:
    return MappingProxyType({})


def frozen(d: dict) -> Mapping:
    return MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker (Kafka's ``BrokerRegistration``): ``epoch`` is the offset of its registration
    record, so a restarted broker always gets a larger one."""

    id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    directories: tuple[uuid.UUID, ...] = ()
    """Its online log dirs, sorted (KIP-858): those it registered, less those it reported offline."""

    def has_online_dir(self, dir: uuid.UUID) -> bool:
        """Whether a replica assigned to ``dir`` here is on a working disk (Kafka's ``DirectoryId.isOnline``):
        an unassigned or migrating replica counts as online, a lost one never; a broker that registered no
        dirs is taken at its word, since it halts when its last dir fails."""
        if dir in (DIR_UNASSIGNED, DIR_MIGRATING):
            return True
        if dir == DIR_LOST:
            return False
        return not self.directories or dir in self.directories


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's state (Kafka's ``PartitionRegistration``). ``elr`` and ``last_known_elr`` are
    KIP-966's: the replicas outside the ISR that still hold every committed record, and the last leader
    of a partition whose ISR emptied (both stay empty unless ``eligible.leader.replicas.version`` is on)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()
    """The log dir of each replica, in replica order (KIP-858); empty: nothing known (all migrating)."""
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def directory(self, broker_id: int) -> uuid.UUID:
        """The log dir holding ``broker_id``'s replica (DIR_MIGRATING when not known)."""
        if len(self.directories) == len(self.replicas) and broker_id in self.replicas:
            return self.directories[self.replicas.index(broker_id)]
        return DIR_MIGRATING

    def dirs(self) -> tuple[uuid.UUID, ...]:
        """``directories``, one per replica (DIR_MIGRATING for each when none are known)."""
        return tuple(self.directory(r) for r in self.replicas)

    @classmethod
    def from_record(cls, r: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=r.replicas,
            directories=_dirs(r.replicas, r.directories),
            isr=r.isr,
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            removing_replicas=r.removing_replicas,
            adding_replicas=r.adding_replicas,
            leader_recovery_state=r.leader_recovery_state,
            elr=r.eligible_leader_replicas or (),
            last_known_elr=r.last_known_elr or (),
        )

    def merge(self, c: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after ``c``: every change bumps the partition epoch; naming a leader (even the
        same one) bumps the leader epoch, as Kafka's ``PartitionRegistration.merge``."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if c.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = c.leader, self.leader_epoch + 1
        replicas = self.replicas if c.replicas is None else c.replicas
        if c.directories:
            dirs = c.directories
        elif replicas == self.replicas:
            dirs = self.directories
        else:  # the replicas changed and the record names no dirs: each staying replica keeps its own
            dirs = tuple(self.directory(r) for r in replicas)
        return PartitionRegistration(
            replicas=replicas,
            directories=_dirs(replicas, dirs),
            isr=self.isr if c.isr is None else c.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=self.removing_replicas if c.removing_replicas is None else c.removing_replicas,
            adding_replicas=self.adding_replicas if c.adding_replicas is None else c.adding_replicas,
            leader_recovery_state=(
                self.leader_recovery_state if c.leader_recovery_state == -1 else c.leader_recovery_state
            ),
            elr=self.elr if c.eligible_leader_replicas is None else c.eligible_leader_replicas,
            last_known_elr=self.last_known_elr if c.last_known_elr is None else c.last_known_elr,
        )


def _dirs(replicas: tuple[int, ...], dirs: tuple[uuid.UUID, ...]) -> tuple[uuid.UUID, ...]:
    """A record's directories as the registration keeps them: none when all are migrating (what a record
    without them means, as Kafka's ``defaultToMigrating``), so old and new records replay alike."""
    if len(dirs) != len(replicas) or all(d == DIR_MIGRATING for d in dirs):
        return ()
    return tuple(dirs)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Everything the records up to ``offset`` (written in leader epoch ``epoch``) say."""

    offset: int = -1
    epoch: int = -1
    features: Mapping[str, int] = field(default_factory=_empty)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty)
    topics: Mapping[uuid.UUID, TopicImage] = field(default_factory=_empty)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=_empty)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=_empty)
    """(resource type, resource name) -> the keys set on it."""
    next_producer_id: int = 0
    """The first producer id of the next block the controller hands out."""
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=_empty)
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=_empty)
    """(user, mechanism) -> credential: the same ``ScramCredential`` a ZooKeeper-mode broker decodes from
    its znode, so SASL/SCRAM logins read either alike."""
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def topic(self, name: str) -> TopicImage | None:
        tid = self.topic_ids.get(name)
        return None if tid is None else self.topics[tid]

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topic(topic)
        return None if t is None else t.partitions.get(partition)

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if not b.fenced)

    def summary(self) -> dict:
        """A plain-data view (for digests and printing): topics by name, partitions by index."""
        got = self._cache.get("summary")
        if got is None:
            got = self._cache["summary"] = {
                "brokers": {i: (b.epoch, b.fenced) for i, b in sorted(self.brokers.items())},
                "topics": {
                    t.name: {p: (r.leader, r.leader_epoch, r.isr) for p, r in sorted(t.partitions.items())}
                    for t in sorted(self.topics.values(), key=lambda t: t.name)
                },
                "next_producer_id": self.next_producer_id,
            }
        return got


EMPTY_IMAGE = MetadataImage()
