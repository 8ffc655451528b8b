"""``ReplicationControlManager``: topics, partitions and their leaders and ISRs, on the active controller.

It writes a topic as a TopicRecord and one PartitionRecord per partition (every replica in the ISR, the
first replica leading), takes a fenced broker out of every ISR and off every leadership, gives
leaderless partitions back to a broker that is unfenced, and applies a leader's AlterPartition after
Kafka's checks, in Kafka's order. Unclean election happens only where the topic (or the controller's
default) enables it. The admin requests on partitions are here too: CreatePartitions (placed as
``kafkalite.metadata.placement`` places added partitions), ElectLeaders, the automatic preferred leader
balancing, and KIP-455 reassignments, which live in the partition's own registration (adding and
removing replicas) and complete through ``partition_change`` when the ISR allows.

JBOD in KRaft (KIP-858): every replica has a log dir in its partition's registration. A new replica gets
its broker's only dir, or stays unassigned until the broker says where it put it (AssignReplicasToDirs);
a broker whose heartbeat reports a dir offline leaves the ISR of every partition it holds in that dir,
which gets another leader from its ISR (``handle_directories_offline``), while its replicas in its other
dirs keep their places.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkalite.common.kafka_uuid import random_uuid
from kafkalite.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    KafkaError,
    NewLeaderElectedError,
    NoReassignmentInProgressError,
    NotControllerError,
    NotLeaderOrFollowerError,
    PreferredLeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkalite.metadata.controller.configuration_control import validate_topic_config
from kafkalite.metadata.controller.partition_change import (
    partition_change,
    reassignment_replicas,
    revert_reassignment,
)
from kafkalite.metadata.delta import TOPIC_RESOURCE, MetadataDelta
from kafkalite.metadata.image import MetadataImage, PartitionRegistration
from kafkalite.metadata.partition_assignment import partitions_to_add, validate_manual_assignment
from kafkalite.metadata.placement import assign_new_partitions
from kafkalite.metadata.records import (
    DIR_MIGRATING,
    DIR_UNASSIGNED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.broker_lifecycle import (
    AssignDirectoryResult,
    AssignPartitionResult,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignTopicResult,
)
from kafkalite.protocol.controller import AlterPartitionItem, AlterPartitionResult, OngoingReassignment
from kafkalite.protocol.metadata import CreatableTopic, CreatableTopicResult, CreatePartitionsTopic
from kafkalite.protocol.topic_partition import TopicPartition

PREFERRED, UNCLEAN = 0, 1
"""ElectLeaders' election types."""
ELR_FEATURE = "eligible.leader.replicas.version"
"""KIP-966's feature: at level 1 the controller keeps eligible leader replicas (off by default in Kafka 4.0,
on for clusters formatted by 4.1 and later)."""
MAX_ELECTIONS_PER_IMBALANCE = 1000
"""Kafka's bound on the preferred elections one leader balancing pass writes; more wait for the next."""

ReplicaPlacer = Callable[..., Mapping[int, Sequence[int]]]
"""``placer(broker_ids, num_partitions, replication_factor, rng=...)`` -> partition -> replicas."""


def _usable(image: MetadataImage) -> Callable[[int], bool]:
    def usable(b: int) -> bool:
        reg = image.brokers.get(b)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    return usable


def default_dir(image: MetadataImage, broker_id: int) -> uuid.UUID:
    """Where a new replica on ``broker_id`` goes (Kafka's ``ClusterControlManager.defaultDir``): its only
    log dir; unassigned when it has several (the broker picks one and reports it) or is not registered;
    migrating when it registered none."""
    reg = image.brokers.get(broker_id)
    if reg is None:
        return DIR_UNASSIGNED
    if not reg.directories:
        return DIR_MIGRATING
    return reg.directories[0] if len(reg.directories) == 1 else DIR_UNASSIGNED


def _dir_online(image: MetadataImage) -> Callable[[int, uuid.UUID], bool]:
    def online(broker_id: int, dir: uuid.UUID) -> bool:
        reg = image.brokers.get(broker_id)
        return reg is not None and reg.has_online_dir(dir)

    return online


def _change(image: MetadataImage, *args: Any, **kwargs: Any) -> PartitionChangeRecord | None:
    """``partition_change`` with what the image says of log dirs: a replica in an offline dir may not
    lead, a new replica gets its broker's default dir."""
    return partition_change(
        *args, dir_online=_dir_online(image), default_dir=lambda b: default_dir(image, b), **kwargs
    )


def _placement_brokers(image: MetadataImage, rf: int) -> tuple[list[int], dict[str, Any]]:
    """The brokers new replicas may go to (registered, unfenced) and the placer's rack argument, or
    INVALID_REPLICATION_FACTOR when there are fewer than ``rf`` of them. Rack-aware only when every broker
    registered a rack: with only some, KRaft's placer does not refuse (ZooKeeper mode's AdminUtils does),
    it places as if there were no racks."""
    usable = image.unfenced_brokers()
    if rf > len(usable):
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {rf} time(s): The target replication factor of "
            f"{rf} cannot be reached because only {len(usable)} broker(s) are registered."
        )
    racks = {b: image.brokers[b].rack for b in usable}
    return usable, ({"broker_racks": racks} if all(r is not None for r in racks.values()) else {})


class ReplicationControlManager:
    def __init__(
        self,
        placer: ReplicaPlacer,
        rng: random.Random,
        num_partitions: int = 1,
        replication_factor: int = 1,
        unclean_leader_election: bool = False,
        min_insync_replicas: int = 1,
    ) -> None:
        self.placer = placer
        self.rng = rng
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.unclean_leader_election = unclean_leader_election
        self.min_insync_replicas = min_insync_replicas

    def unclean(self, image: MetadataImage, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable``, else the controller's default."""
        value = image.configs.get((TOPIC_RESOURCE, topic), {}).get("unclean.leader.election.enable")
        return self.unclean_leader_election if value is None else value.strip().lower() == "true"

    def elr(self, image: MetadataImage, topic: str, part: PartitionRegistration) -> dict[str, Any]:
        """``partition_change``'s KIP-966 arguments for ``part`` of ``topic``: whether the feature is on,
        and the effective min ISR (the topic's ``min.insync.replicas``, else the controller's default,
        capped at the replica count as Kafka's ``getTopicEffectiveMinIsr`` caps it)."""
        if image.features.get(ELR_FEATURE, 0) < 1:
            return {}
        value = image.configs.get((TOPIC_RESOURCE, topic), {}).get("min.insync.replicas")
        min_isr = self.min_insync_replicas if value is None else int(value)
        return {"elr_enabled": True, "min_isr": min(min_isr, len(part.replicas))}

    # ------------------------------------------------------------------------------ CreateTopics
    def create_topic(
        self, image: MetadataImage, t: CreatableTopic
    ) -> tuple[list[MetadataRecord], CreatableTopicResult]:
        try:
            records, n, rf = self._create(image, t)
        except KafkaError as e:
            return [], CreatableTopicResult(name=t.name, error_code=e.code, error_message=e.message)
        return records, CreatableTopicResult(name=t.name, num_partitions=n, replication_factor=rf)

    def _create(self, image: MetadataImage, t: CreatableTopic) -> tuple[list[MetadataRecord], int, int]:
        if image.topic(t.name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        validate_topic_config(dict(t.configs))
        if t.assignments:
            assignment = {a.partition: tuple(a.broker_ids) for a in t.assignments}
        else:
            n = self.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = self.replication_factor if t.replication_factor == -1 else t.replication_factor
            usable, extra = _placement_brokers(image, rf)
            placed = self.placer(usable, n, rf, rng=self.rng, **extra)
            assignment = {p: tuple(r) for p, r in placed.items()}
        tid = random_uuid(self.rng, image.topics)
        records: list[MetadataRecord] = [TopicRecord(name=t.name, topic_id=tid)]
        for p, replicas in sorted(assignment.items()):
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=tid,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                    directories=tuple(default_dir(image, r) for r in replicas),
                )
            )
        for name, value in t.configs:
            records.append(
                ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name, name=name, value=value)
            )
        rf = len(next(iter(assignment.values()))) if assignment else 0
        return records, len(assignment), rf

    # ---------------------------------------------------------------------------- broker changes
    def handle_broker_fenced(
        self, image: MetadataImage, broker_id: int, *, unclean_shutdown: bool = False
    ) -> list[PartitionChangeRecord]:
        """Take ``broker_id`` out of every ISR and off every leadership (it is fenced, or about to be:
        ``image`` may still show it unfenced, so it is treated as unusable explicitly). With
        ``unclean_shutdown`` (a new incarnation registering: the old one may have lost unflushed data) it
        leaves every ELR too, as Kafka's ``handleBrokerUncleanShutdown``."""
        base = _usable(image)

        def usable(b: int) -> bool:
            return b != broker_id and base(b)

        out = []
        for t in sorted(image.topics.values(), key=lambda t: t.name):
            for p, part in sorted(t.partitions.items()):
                in_elr = unclean_shutdown and broker_id in part.elr
                if broker_id not in part.isr and part.leader != broker_id and not in_elr:
                    continue
                isr = tuple(r for r in part.isr if r != broker_id)
                rec = _change(
                    image, t.id, p, part, usable, isr, unclean=self.unclean(image, t.name),
                    unclean_shutdown=(broker_id,) if unclean_shutdown else (),
                    **self.elr(image, t.name, part),
                )  # fmt: skip
                if rec is not None:
                    out.append(rec)
        return out

    def handle_broker_unfenced(self, image: MetadataImage, broker_id: int) -> list[PartitionChangeRecord]:
        """Elect ``broker_id`` where a partition has no leader and it is in the ISR (with ELR: or in the
        ELR, or the last known leader)."""
        base = _usable(image)

        def usable(b: int) -> bool:
            return b == broker_id or base(b)

        out = []
        for t in sorted(image.topics.values(), key=lambda t: t.name):
            unclean = self.unclean(image, t.name)
            for p, part in sorted(t.partitions.items()):
                if part.leader != -1:
                    continue
                eligible = (*part.isr, *part.elr, *part.last_known_elr)
                if broker_id in eligible or (unclean and broker_id in part.replicas):
                    rec = _change(
                        image, t.id, p, part, usable, unclean=unclean, **self.elr(image, t.name, part)
                    )
                    if rec is not None:
                        out.append(rec)
        return out

    # ------------------------------------------------------------------------- log dirs (KIP-858)
    def handle_directories_offline(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, offline: Sequence[uuid.UUID]
    ) -> list[MetadataRecord]:
        """Kafka's ``handleDirectoriesOffline``: for each dir of ``broker_id`` its heartbeat newly reports
        offline, take the broker out of the ISR of every partition whose replica there is in that dir (a
        new leader from the rest of the ISR where it led), then record the dirs it has left. Dirs already
        known offline, or never registered, change nothing."""
        reg = image.brokers.get(broker_id)
        if reg is None:
            return []
        newly = [d for d in reg.directories if d in offline]
        if not newly:
            return []
        out: list[MetadataRecord] = []
        for t in sorted(image.topics.values(), key=lambda t: t.name):
            for p, part in sorted(t.partitions.items()):
                if broker_id not in part.replicas or part.directory(broker_id) not in newly:
                    continue
                rec = self._without(image, t.id, p, part, broker_id, t.name)
                if rec is not None:
                    out.append(rec)
        remaining = tuple(d for d in reg.directories if d not in offline)
        # Kafka writes the remaining dirs (an empty list would read as no change: the broker halts then)
        out.append(
            BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch, log_dirs=remaining)
        )
        return out

    def _without(
        self,
        image: MetadataImage,
        tid: uuid.UUID,
        p: int,
        part: PartitionRegistration,
        broker_id: int,
        topic: str,
    ) -> PartitionChangeRecord | None:
        """``part`` with ``broker_id`` out of its ISR and never its leader (Kafka's
        ``generateLeaderAndIsrUpdates`` with a broker to remove)."""
        base = _usable(image)

        def usable(b: int) -> bool:
            return b != broker_id and base(b)

        isr = tuple(r for r in part.isr if r != broker_id)
        return _change(
            image, tid, p, part, usable, isr, unclean=self.unclean(image, topic),
            **self.elr(image, topic, part),
        )  # fmt: skip

    def assign_replicas_to_dirs(
        self, image: MetadataImage, req: AssignReplicasToDirsRequest
    ) -> tuple[list[MetadataRecord], AssignReplicasToDirsResponse]:
        """Kafka's ``handleAssignReplicasToDirs`` (the caller checked the broker epoch): record each
        replica's dir; a replica placed in a dir already offline is then treated as offline (out of the
        ISR, not leading). Per partition UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, or
        NOT_LEADER_OR_FOLLOWER when the broker holds no replica of it."""
        b = req.broker_id
        reg = image.brokers[b]
        records: list[MetadataRecord] = []
        img = image
        offline: list[tuple[uuid.UUID, int]] = []
        dirs_out = []
        for d in req.directories:
            topics_out = []
            for t in d.topics:
                topic = img.topics.get(t.topic_id)
                results = []
                for q in t.partitions:
                    i = q.partition_index
                    part = None if topic is None else topic.partitions.get(i)
                    if topic is None:
                        code = UnknownTopicIdError.code
                    elif part is None:
                        code = UnknownTopicOrPartitionError.code
                    elif b not in part.replicas:
                        code = NotLeaderOrFollowerError.code
                    else:
                        code = NO_ERROR
                        rec = _change(
                            img, t.topic_id, i, part, _usable(img), target_dirs={b: d.id},
                            **self.elr(img, topic.name, part),
                        )  # fmt: skip
                        if rec is not None:
                            records.append(rec)
                            img = _replayed(img, [rec])
                        if not reg.has_online_dir(d.id):
                            offline.append((t.topic_id, i))
                    results.append(AssignPartitionResult(partition_index=i, error_code=code))
                topics_out.append(AssignTopicResult(topic_id=t.topic_id, partitions=tuple(results)))
            dirs_out.append(AssignDirectoryResult(id=d.id, topics=tuple(topics_out)))
        for tid, i in offline:
            t = img.topics[tid]
            rec = self._without(img, tid, i, t.partitions[i], b, t.name)
            if rec is not None:
                records.append(rec)
                img = _replayed(img, [rec])
        return records, AssignReplicasToDirsResponse(directories=tuple(dirs_out))

    # ---------------------------------------------------------------------------- AlterPartition
    def alter_partition(
        self, image: MetadataImage, broker_id: int, item: AlterPartitionItem
    ) -> tuple[PartitionChangeRecord | None, AlterPartitionResult]:
        t = image.topic(item.tp.topic)
        part = None if t is None else t.partitions.get(item.tp.partition)
        try:
            self._validate(image, broker_id, part, item)
        except KafkaError as e:
            return None, AlterPartitionResult(tp=item.tp, error_code=e.code)
        assert t is not None and part is not None
        rec = _change(
            image, t.id, item.tp.partition, part, _usable(image), item.new_isr,
            unclean=self.unclean(image, t.name), **self.elr(image, t.name, part),
        )  # fmt: skip
        after = part if rec is None else part.merge(rec)
        if rec is not None and rec.leader not in (NO_LEADER_CHANGE, broker_id):
            # The new ISR completed a reassignment that moved the leadership away: the change is written,
            # and the old leader learns it must take the new metadata (Kafka answers the same way).
            return rec, AlterPartitionResult(tp=item.tp, error_code=NewLeaderElectedError.code)
        return rec, AlterPartitionResult(
            tp=item.tp,
            error_code=NO_ERROR,
            leader=after.leader,
            leader_epoch=after.leader_epoch,
            isr=after.isr,
            partition_epoch=after.partition_epoch,
        )

    @staticmethod
    def _validate(
        image: MetadataImage, broker_id: int, part: PartitionRegistration | None, item: AlterPartitionItem
    ) -> None:
        if part is None:
            raise UnknownTopicOrPartitionError(str(item.tp))
        # A leader ahead of this controller means this controller is behind (deposed): send it elsewhere.
        if item.leader_epoch > part.leader_epoch or item.partition_epoch > part.partition_epoch:
            raise NotControllerError(f"{item.tp}: the request is ahead of this controller")
        if item.leader_epoch < part.leader_epoch:
            raise FencedLeaderEpochError(f"{item.tp}: leader epoch {item.leader_epoch} < {part.leader_epoch}")
        if broker_id != part.leader:
            raise InvalidRequestError(f"{item.tp}: broker {broker_id} is not the leader ({part.leader})")
        if item.partition_epoch < part.partition_epoch:
            raise InvalidUpdateVersionError(
                f"{item.tp}: partition epoch {item.partition_epoch} < {part.partition_epoch}"
            )
        isr = item.new_isr
        if not isr or len(set(isr)) != len(isr) or any(r not in part.replicas for r in isr):
            raise InvalidRequestError(f"{item.tp}: invalid ISR {isr}")
        if part.leader not in isr:
            raise InvalidRequestError(f"{item.tp}: the ISR {isr} does not include the leader")
        usable = _usable(image)
        bad = [r for r in isr if not usable(r)]
        if bad:
            raise IneligibleReplicaError(f"{item.tp}: replicas {bad} are fenced, shutting down or unknown")

    # -------------------------------------------------------------------------- CreatePartitions
    def create_partitions(self, image: MetadataImage, t: CreatePartitionsTopic) -> list[PartitionRecord]:
        """The PartitionRecords that grow ``t.name`` to ``t.count`` partitions (Kafka's checks and order:
        the topic, the count, then each explicit replica list); raises the Kafka error."""
        topic = image.topic(t.name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
        current = len(topic.partitions)
        added = partitions_to_add(current, t.count, t.assignments)
        rf = len(topic.partitions[0].replicas)
        active = _usable(image)
        if t.assignments is not None:
            plan = {}
            for i, replicas in enumerate(t.assignments):
                validate_manual_assignment(current + i, replicas, image.brokers, rf)
                if not any(active(r) for r in replicas):
                    raise InvalidReplicaAssignmentError(
                        f"All brokers specified in the manual partition assignment for partition "
                        f"{current + i} are fenced or in controlled shutdown."
                    )
                plan[current + i] = tuple(replicas)
        else:
            usable, extra = _placement_brokers(image, rf)
            existing = {p: list(part.replicas) for p, part in topic.partitions.items()}
            placed = assign_new_partitions(usable, existing, added, **extra)
            plan = {p: tuple(r) for p, r in placed.items()}
        records = []
        for p, replicas in sorted(plan.items()):
            isr = tuple(r for r in replicas if active(r))
            if not isr:  # placed only on brokers in controlled shutdown: refused as the placer refuses
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {rf} time(s): All brokers are currently fenced or "
                    "in controlled shutdown."
                )
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic.id,
                    replicas=replicas,
                    isr=isr,
                    leader=isr[0],
                    leader_epoch=0,
                    partition_epoch=0,
                    directories=tuple(default_dir(image, r) for r in replicas),
                )
            )
        return records

    # ------------------------------------------------------------------------------ ElectLeaders
    def elect_leader(
        self, image: MetadataImage, tp: TopicPartition, election_type: int
    ) -> tuple[PartitionChangeRecord | None, int]:
        """The record of one ElectLeaders election, and the partition's error code (Kafka's
        ``electLeader``): ELECTION_NOT_NEEDED where the preferred replica leads already (preferred) or
        any replica leads (unclean); PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE
        where no election can change anything."""
        t = image.topic(tp.topic)
        part = None if t is None else t.partitions.get(tp.partition)
        if t is None or part is None:
            return None, UnknownTopicOrPartitionError.code
        preferred = election_type == PREFERRED
        if (preferred and part.leader == part.replicas[0]) or (not preferred and part.leader != NO_LEADER):
            return None, ElectionNotNeededError.code
        rec = _change(
            image, t.id, tp.partition, part, _usable(image), preferred=preferred, unclean=not preferred,
            **self.elr(image, t.name, part),
        )  # fmt: skip
        if rec is None:
            code = PreferredLeaderNotAvailableError if preferred else EligibleLeadersNotAvailableError
            return None, code.code
        return rec, NO_ERROR

    @staticmethod
    def partitions(image: MetadataImage) -> list[TopicPartition]:
        """Every partition, by topic name and index."""
        return [
            TopicPartition(t.name, p)
            for t in sorted(image.topics.values(), key=lambda t: t.name)
            for p in sorted(t.partitions)
        ]

    def imbalanced(self, image: MetadataImage) -> list[TopicPartition]:
        """The partitions whose leader is not their first replica (Kafka's ``imbalancedPartitions``)."""
        return [
            tp for tp in self.partitions(image) if (p := image.partition(*tp)) and p.leader != p.replicas[0]
        ]

    def balance_partition_leaders(self, image: MetadataImage) -> list[PartitionChangeRecord]:
        """Kafka's ``maybeBalancePartitionLeaders``: a preferred election for each imbalanced partition
        (at most ``MAX_ELECTIONS_PER_IMBALANCE`` records); one whose preferred replica cannot lead is left."""
        out: list[PartitionChangeRecord] = []
        usable = _usable(image)
        for tp in self.imbalanced(image):
            if len(out) >= MAX_ELECTIONS_PER_IMBALANCE:
                break
            t = image.topic(tp.topic)
            assert t is not None
            part = t.partitions[tp.partition]
            rec = _change(
                image, t.id, tp.partition, part, usable, preferred=True, **self.elr(image, t.name, part)
            )
            if rec is not None:
                out.append(rec)
        return out

    # ----------------------------------------------------------------- partition reassignments
    def alter_reassignment(
        self, image: MetadataImage, tp: TopicPartition, target: Sequence[int] | None
    ) -> PartitionChangeRecord | None:
        """The record that starts, changes or (``target`` None) cancels ``tp``'s reassignment (Kafka's
        ``alterPartitionReassignment``); raises the Kafka error. The move then completes by itself once
        the ISR holds every target replica (``partition_change``)."""
        t = image.topic(tp.topic)
        part = None if t is None else t.partitions.get(tp.partition)
        if t is None or part is None:
            raise UnknownTopicOrPartitionError(f"Unable to find partition {tp.topic}:{tp.partition}.")
        usable = _usable(image)
        unclean = self.unclean(image, t.name)
        if target is None:
            if not part.adding_replicas and not part.removing_replicas:
                raise NoReassignmentInProgressError(
                    f"No reassignment of {tp.topic}:{tp.partition} is in progress."
                )
            replicas, isr, revert_is_unclean = revert_reassignment(part)
            if revert_is_unclean and not unclean:
                raise InvalidReplicaAssignmentError(
                    f"Unable to revert partition assignment for {tp.topic}:{tp.partition} because it would "
                    "require an unclean leader election."
                )
            return _change(
                image, t.id, tp.partition, part, usable, isr, unclean=unclean,
                target_replicas=replicas, target_adding=(), target_removing=(),
                **self.elr(image, t.name, part),
            )  # fmt: skip
        validate_manual_assignment(tp.partition, target, image.brokers)
        replicas, adding, removing = reassignment_replicas(part.replicas, target)
        return _change(
            image, t.id, tp.partition, part, usable,
            target_replicas=replicas, target_adding=adding, target_removing=removing,
            **self.elr(image, t.name, part),
        )  # fmt: skip

    @staticmethod
    def list_reassignments(
        image: MetadataImage, partitions: Sequence[TopicPartition] | None
    ) -> list[OngoingReassignment]:
        """The moves in progress, of ``partitions`` (None: all); a partition not moving is left out."""
        out = []
        for tp in ReplicationControlManager.partitions(image) if partitions is None else partitions:
            part = image.partition(tp.topic, tp.partition)
            if part is not None and (part.adding_replicas or part.removing_replicas):
                out.append(
                    OngoingReassignment(
                        tp=tp,
                        replicas=part.replicas,
                        adding_replicas=part.adding_replicas,
                        removing_replicas=part.removing_replicas,
                    )
                )
        return out


def _replayed(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply(image.offset, image.epoch)
