"""``QuorumController``: the metadata state machine on each controller, active on the Raft leader.

Every controller replays committed records (``handle_commit``) into ``committed``. The one whose Raft
client leads becomes active once its high watermark passes the start of its epoch: by then every record
of earlier epochs is committed and replayed, so the committed image is the whole truth. While active it
turns a request into records against ``image`` (the committed image plus its own uncommitted records),
appends them, replays them into ``image`` at once (so the next request sees them, as Kafka's controller
does), and answers only when the high watermark passes the last record written so far.

While active it also balances leaders: with ``auto.leader.rebalance.enable`` (Kafka's default), once a
partition is led by another than its first replica, a check ``leader.imbalance.check.interval.seconds``
later writes the preferred elections that can happen (Kafka's ``maybeBalancePartitionLeaders``; unlike
ZooKeeper mode, KRaft's controller has no per-broker percentage threshold).

On losing leadership it drops ``image`` back to ``committed`` and fails every waiting request with
NOT_CONTROLLER: its uncommitted records may be truncated by the next leader, so nothing derived from
them can be trusted; the records that do survive are replayed again from the log like any other, and the
brokers retry against the new controller. Kafka reverts to its last committed snapshot for the same
reason.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kafkalite.errors import (
    ElectionNotNeededError,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kafkalite.metadata.controller import (
    acl_control,
    configuration_control,
    producer_id_control,
    scram_control,
)
from kafkalite.metadata.controller.cluster_control import ClusterControlManager
from kafkalite.metadata.controller.replication_control import (
    MAX_ELECTIONS_PER_IMBALANCE,
    PREFERRED,
    UNCLEAN,
    ReplicaPlacer,
    ReplicationControlManager,
)
from kafkalite.metadata.delta import MetadataDelta
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.metadata_loader import snapshot_image
from kafkalite.metadata.partition_assignment import (
    create_partitions_records,
    create_topics_records,
    excessive_batch,
)
from kafkalite.metadata.records import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    RemoveTopicRecord,
    UnfenceBrokerRecord,
)
from kafkalite.metadata.serde import deserialize, serialize
from kafkalite.protocol.api import Response
from kafkalite.protocol.broker_lifecycle import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from kafkalite.protocol.configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from kafkalite.protocol.controller import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignmentResult,
)
from kafkalite.protocol.metadata import (
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafkalite.protocol.security_admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kafkalite.raft import Batch, KafkaRaftClient, LeaderState

MAX_RECORDS_PER_BATCH = 10_000  # Kafka's QuorumController.DEFAULT_MAX_RECORDS_PER_BATCH

METADATA_VERSION = 20
"""The ``metadata.version`` feature level the first active controller writes (Kafka 3.8's 3.8-IV0)."""

CONTROLLER_REQUESTS = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    CreateTopicsRequest,
    AllocateProducerIdsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    AlterUserScramCredentialsRequest,
    CreatePartitionsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    AssignReplicasToDirsRequest,
)

_BOUNDED = (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    CreatePartitionsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
)
"""The requests Kafka's controller refuses with POLICY_VIOLATION when they would write more than
``MAX_RECORDS_PER_USER_OP`` records."""

Respond = Callable[[Response], None]


@dataclass(frozen=True)
class ControllerSettings:
    cluster_id: str
    broker_session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    metadata_max_idle_interval_ms: int = 500
    """Kafka's ``metadata.max.idle.interval.ms`` (KIP-835): an active controller that wrote nothing for this
    long writes a NoOpRecord, so the high watermark, and every observer's view of its own lag, keeps
    moving; 0 turns it off."""
    auto_leader_rebalance_enable: bool = True
    """Kafka's ``auto.leader.rebalance.enable``: the active controller moves leaderships back to the
    preferred (first) replicas every ``leader_imbalance_check_interval_ms`` while some are elsewhere."""
    leader_imbalance_check_interval_ms: int = 300_000
    """Kafka's ``leader.imbalance.check.interval.seconds``, in ms. KRaft's controller ignores
    ``leader.imbalance.per.broker.percentage``: any imbalanced partition is enough."""
    min_insync_replicas: int = 1
    """The broker default ``min.insync.replicas``, which the controller reads only for KIP-966's ELR."""
    bootstrap_features: tuple[tuple[str, int], ...] = ()
    """Feature levels besides ``metadata.version`` the first active controller finalizes on an empty log,
    as ``kafka-storage format --feature name=level`` does: ``("eligible.leader.replicas.version", 1)``
    turns on KIP-966 (Kafka 4.0 leaves it at 0)."""
    bootstrap_records: tuple[MetadataRecord, ...] = ()
    """What the first active controller writes after ``metadata.version`` on an empty log (the node's
    ``bootstrap.checkpoint``: SCRAM users from ``storage format --add-scram``)."""

    @classmethod
    def from_broker_config(cls, cluster_id: str, bcfg: Any, **overrides: Any) -> ControllerSettings:
        """The settings a node's ``BrokerConfig`` gives: the keys the controller applies when it creates
        topics, elects and balances leaders."""
        return cls(
            cluster_id,
            num_partitions=bcfg.num_partitions,
            default_replication_factor=bcfg.default_replication_factor,
            unclean_leader_election_enable=bcfg.unclean_leader_election_enable,
            auto_leader_rebalance_enable=bcfg.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms=bcfg.leader_imbalance_check_interval_seconds * 1000,
            min_insync_replicas=bcfg.min_insync_replicas,
            **overrides,
        )


@dataclass
class _Waiting:
    offset: int
    respond: Respond
    response: Response


class QuorumController:
    """The RaftListener of a controller node; ``attach`` gives it its Raft client."""

    def __init__(
        self, node_id: int, settings: ControllerSettings, placer: ReplicaPlacer, rng: random.Random
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self.rng = rng
        self.client: KafkaRaftClient | None = None
        self.committed = MetadataImage()
        self.image = self.committed
        self.active_epoch: int | None = None
        self.cluster = ClusterControlManager(settings.cluster_id, settings.broker_session_timeout_ms)
        self.replication = ReplicationControlManager(
            placer,
            rng,
            settings.num_partitions,
            settings.default_replication_factor,
            settings.unclean_leader_election_enable,
            settings.min_insync_replicas,
        )
        self._waiting: list[_Waiting] = []
        self._last_written = -1
        self._last_write_ms = 0
        self._balance_at_ms: int | None = None
        self._balance_seen: MetadataImage | None = None
        self.activations = 0
        self.on_commit: Callable[[MetadataImage], None] | None = None
        """Called with the committed image after each batch (checkers compare nodes with it)."""
        self.snapshot_generator: Any = None
        """A ``SnapshotGenerator`` that snapshots ``committed`` as it grows (KIP-630)."""

    def attach(self, client: KafkaRaftClient) -> None:
        self.client = client

    @property
    def is_active(self) -> bool:
        return self.active_epoch is not None

    # ------------------------------------------------------------------------------- RaftListener
    def handle_commit(self, batch: Batch) -> None:
        if self.is_active and batch.epoch != self.active_epoch:
            self.renounce()  # someone else's records are committing: we are not the leader any more
        delta = MetadataDelta(self.committed)
        for i, value in enumerate(batch.records):
            record, _ = deserialize(value or b"")
            delta.replay(record, batch.base_offset + i)
        self.committed = delta.apply(batch.last_offset, batch.epoch)
        if not self.is_active:
            self.image = self.committed
        if self.on_commit is not None:
            self.on_commit(self.committed)
        self._complete(batch.last_offset)
        if self.snapshot_generator is not None:
            self.snapshot_generator.on_commit(batch, self.committed)

    def handle_load_snapshot(self, reader: Any) -> None:
        """A snapshot replaces the committed state (a controller that was away, or a restart)."""
        if self.is_active:
            self.renounce()  # only a follower loads a snapshot; the leader has the log
        self.committed = self.image = snapshot_image(reader)
        if self.on_commit is not None:
            self.on_commit(self.committed)
        if self.snapshot_generator is not None:
            self.snapshot_generator.on_load_snapshot()

    # ---------------------------------------------------------------------------------- role
    def on_transition(self, state: Any) -> None:
        if self.is_active and not (isinstance(state, LeaderState) and state.epoch == self.active_epoch):
            self.renounce()

    def renounce(self) -> None:
        self.active_epoch = None
        self.image = self.committed
        self._last_written = -1
        self._balance_at_ms = self._balance_seen = None
        waiting, self._waiting = self._waiting, []
        for w in waiting:
            w.respond(_error_response(w.response, NotControllerError.code))

    def _maybe_activate(self, now_ms: int) -> None:
        c = self.client
        if c is None or self.is_active:
            return
        st = c.state
        if isinstance(st, LeaderState) and c.high_watermark > st.epoch_start_offset:
            self.active_epoch = st.epoch
            self.activations += 1
            self.image = self.committed
            self._last_written = -1
            self._last_write_ms = now_ms
            self.cluster.activate(self.image, now_ms)
            if self.image.features.get("metadata.version") is None:  # bootstrap, as a formatted log's first
                level = FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION)
                features = [
                    FeatureLevelRecord(name=n, feature_level=v)
                    for n, v in self.settings.bootstrap_features
                    if v
                ]
                self._write([level, *features, *self.settings.bootstrap_records], now_ms)

    # ---------------------------------------------------------------------------------- driver
    def poll(self, now_ms: int) -> None:
        """Become active or step down as the Raft role says; fence brokers whose session expired."""
        c = self.client
        if c is not None and self.is_active:
            st = c.state
            if not (isinstance(st, LeaderState) and st.epoch == self.active_epoch):
                self.renounce()
        self._maybe_activate(now_ms)
        if self.is_active:
            for b in self.cluster.expired(self.image, now_ms):
                self._fence(b, now_ms)
        if self.is_active:
            self._maybe_balance_leaders(now_ms)
        idle = self.settings.metadata_max_idle_interval_ms
        if self.is_active and idle > 0 and now_ms - self._last_write_ms >= idle:
            self._write([NoOpRecord()], now_ms)

    def next_deadline_ms(self) -> int | None:
        if not self.is_active:
            return None
        times = [self.cluster.next_expiry_ms(self.image)]
        if self.settings.metadata_max_idle_interval_ms > 0:
            times.append(self._last_write_ms + self.settings.metadata_max_idle_interval_ms)
        times.append(self._balance_at_ms)
        due = [t for t in times if t is not None]
        return min(due) if due else None

    def handle_request(self, req: Any, now_ms: int, respond: Respond) -> None:
        """Answer ``req`` through ``respond`` once what it wrote is committed (NOT_CONTROLLER at once when
        this controller is not active)."""
        if not self.is_active:
            respond(_error_response(_empty_response(req), NotControllerError.code))
            return
        refused = self._too_large(req)
        if refused is not None:
            respond(refused)
            return
        if isinstance(req, BrokerRegistrationRequest):
            records, resp = self._register(req, now_ms)
        elif isinstance(req, BrokerHeartbeatRequest):
            records, resp = self._heartbeat(req, now_ms)
        elif isinstance(req, AlterPartitionRequest):
            records, resp = self._alter_partition(req)
        elif isinstance(req, CreateTopicsRequest):
            records, resp = self._create_topics(req)
        elif isinstance(req, AllocateProducerIdsRequest):
            records, resp = self._allocate_producer_ids(req)
        elif isinstance(req, AssignReplicasToDirsRequest):
            records, resp = self._assign_replicas_to_dirs(req)
        elif isinstance(req, DeleteTopicsRequest):
            records, resp = self._delete_topics(req)
        elif isinstance(req, IncrementalAlterConfigsRequest):
            records, resp = self._alter_configs(req)
        elif isinstance(req, CreateAclsRequest):
            records, resp = acl_control.create_acls(self.image, req, self._new_id)
        elif isinstance(req, DeleteAclsRequest):
            records, resp = acl_control.delete_acls(self.image, req)
        elif isinstance(req, AlterUserScramCredentialsRequest):
            records, resp = scram_control.alter_credentials(self.image, req)
        elif isinstance(req, CreatePartitionsRequest):
            records, resp = self._create_partitions(req)
        elif isinstance(req, ElectLeadersRequest):
            records, resp = self._elect_leaders(req)
        elif isinstance(req, AlterPartitionReassignmentsRequest):
            records, resp = self._alter_reassignments(req)
        elif isinstance(req, ListPartitionReassignmentsRequest):
            records = []
            resp = ListPartitionReassignmentsResponse(
                reassignments=tuple(self.replication.list_reassignments(self.image, req.partitions))
            )
        else:
            raise TypeError(f"not a controller request: {type(req).__name__}")
        if isinstance(req, _BOUNDED) and (too_many := excessive_batch(len(records))) is not None:
            # the whole request fails, as Kafka's does: no partial results next to a top-level error
            top = "error_code" in resp.__dataclass_fields__
            records, resp = [], _error_response(_empty_response(req) if top else resp, too_many.code)
        if records and not self._write(records, now_ms):
            respond(_error_response(resp, NotControllerError.code))
            return
        self._waiting.append(_Waiting(self._last_written, respond, resp))
        self._complete(self.committed.offset)

    # -------------------------------------------------------------------------------- handlers
    def _register(self, req: BrokerRegistrationRequest, now: int) -> tuple[list, Response]:
        assert self.client is not None
        epoch = self.client.log.end_offset  # the registration record's own offset
        try:
            rec = self.cluster.register(self.image, req, epoch, now)
        except KafkaError as e:
            return [], BrokerRegistrationResponse(error_code=e.code)
        records: list[MetadataRecord] = []
        old = self.image.brokers.get(req.broker_id)
        if old is not None:
            # A new incarnation: whatever the old one held may be gone (a crash loses unflushed data),
            # so it leaves every ISR first, and every ELR unless its previous epoch says it shut down
            # cleanly (KIP-966), as Kafka's handleBrokerUncleanShutdown does.
            clean = req.previous_broker_epoch == old.epoch
            records += self.replication.handle_broker_fenced(
                self.image, req.broker_id, unclean_shutdown=not clean
            )
            epoch += len(records)
            rec = replace(rec, broker_epoch=epoch)
        records.append(rec)
        return records, BrokerRegistrationResponse(broker_epoch=epoch)

    def _heartbeat(self, req: BrokerHeartbeatRequest, now: int) -> tuple[list, Response]:
        try:
            b = self.cluster.check_broker_epoch(self.image, req.broker_id, req.broker_epoch)
        except KafkaError as e:
            return [], BrokerHeartbeatResponse(error_code=e.code)
        self.cluster.touch(req.broker_id, now)
        records, resp = self._heartbeat_state(b, req)
        if req.offline_log_dirs:  # KIP-858: after the state change, as Kafka's processBrokerHeartbeat
            after = _replayed(self.image, records)
            records += self.replication.handle_directories_offline(after, b.id, b.epoch, req.offline_log_dirs)
        return records, resp

    def _heartbeat_state(self, b: Any, req: BrokerHeartbeatRequest) -> tuple[list, Response]:
        """The records and answer of a heartbeat's fencing, unfencing or controlled shutdown."""
        caught_up = req.current_metadata_offset >= b.epoch
        records: list[MetadataRecord] = []
        fenced = b.fenced
        if req.want_shut_down:
            return self._controlled_shutdown(b, caught_up)
        if req.want_fence and not b.fenced:
            records = self._fence_records(b.id, b.epoch)
            fenced = True
        elif b.fenced and caught_up and not req.want_fence and not req.want_shut_down:
            records = [UnfenceBrokerRecord(id=b.id, epoch=b.epoch)]
            after = _replayed(self.image, records)
            records += self.replication.handle_broker_unfenced(after, b.id)
            fenced = False
        return records, BrokerHeartbeatResponse(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=req.want_shut_down
        )

    def _controlled_shutdown(self, b: Any, caught_up: bool) -> tuple[list, Response]:
        """Kafka's controlled shutdown in KRaft: mark the broker as shutting down and move its
        leaderships and ISR places away (it is no longer eligible); once it leads nothing, fence it and
        tell it to go (should_shut_down)."""
        records: list[MetadataRecord] = []
        img = self.image
        if not b.fenced and not b.in_controlled_shutdown:
            records.append(
                BrokerRegistrationChangeRecord(broker_id=b.id, broker_epoch=b.epoch, in_controlled_shutdown=1)
            )
            img = _replayed(img, records)
            changes = self.replication.handle_broker_fenced(img, b.id)
            records += changes
            img = _replayed(img, changes)
        leads = any(p.leader == b.id for t in img.topics.values() for p in t.partitions.values())
        done = b.fenced or not leads
        if done and not b.fenced:
            records.append(FenceBrokerRecord(id=b.id, epoch=b.epoch))
        return records, BrokerHeartbeatResponse(is_caught_up=caught_up, is_fenced=done, should_shut_down=done)

    def _alter_partition(self, req: AlterPartitionRequest) -> tuple[list, Response]:
        try:
            if req.broker_epoch != -1:  # -1: a sender that does not say (AlterPartition v0)
                self.cluster.check_broker_epoch(self.image, req.broker_id, req.broker_epoch)
        except KafkaError as e:
            return [], AlterPartitionResponse(error_code=e.code)

        def one(img: MetadataImage, item: Any) -> tuple[list, Any]:
            rec, result = self.replication.alter_partition(img, req.broker_id, item)
            return [] if rec is None else [rec], result

        records, results = self._each(req.partitions, one)
        return records, AlterPartitionResponse(partitions=tuple(results))

    def _too_large(self, req: Any) -> Response | None:
        """The answer to a CreateTopics or CreatePartitions that would write more than
        ``MAX_RECORDS_PER_USER_OP`` records (POLICY_VIOLATION for every topic, as Kafka's controller
        answers), counted before anything is placed; None for any other request."""
        if isinstance(req, CreateTopicsRequest):
            error = excessive_batch(create_topics_records(req.topics, self.settings.num_partitions))
            if error is not None:
                return CreateTopicsResponse(
                    topics=tuple(
                        CreatableTopicResult(name=t.name, error_code=error.code, error_message=error.message)
                        for t in req.topics
                    )
                )
        elif isinstance(req, CreatePartitionsRequest):
            img = self.image
            error = excessive_batch(
                create_partitions_records(
                    req.topics, lambda n: len(t.partitions) if (t := img.topic(n)) else None
                )
            )
            if error is not None:
                return CreatePartitionsResponse(
                    results=tuple(
                        CreatePartitionsTopicResult(
                            name=t.name, error_code=error.code, error_message=error.message
                        )
                        for t in req.topics
                    )
                )
        return None

    def _each(
        self, items: Any, handle: Callable[[MetadataImage, Any], tuple[list, Any]], *, write: bool = True
    ) -> tuple[list[MetadataRecord], list[Any]]:
        """``handle(image, item)`` -> ``(records, result)`` for each item in turn, each seeing the image
        after the records of those before it (as Kafka's controller builds one request's records); the
        records (none if not ``write``: validate_only) and the results, a None result left out."""
        records: list[MetadataRecord] = []
        results = []
        img = self.image
        for item in items:
            recs, result = handle(img, item)
            if recs and write:
                records += recs
                img = _replayed(img, recs)
            if result is not None:
                results.append(result)
        return records, results

    def _create_topics(self, req: CreateTopicsRequest) -> tuple[list, Response]:
        records, results = self._each(req.topics, self.replication.create_topic, write=not req.validate_only)
        return records, CreateTopicsResponse(topics=tuple(results))

    def _delete_topics(self, req: DeleteTopicsRequest) -> tuple[list, Response]:
        def one(img: MetadataImage, name: str) -> tuple[list, Any]:
            t = img.topic(name)
            if t is None:
                return [], DeletableTopicResult(name=name, error_code=UnknownTopicOrPartitionError.code)
            return [RemoveTopicRecord(topic_id=t.id)], DeletableTopicResult(name=name)

        records, results = self._each(req.topic_names, one)
        return records, DeleteTopicsResponse(topics=tuple(results))

    def _create_partitions(self, req: CreatePartitionsRequest) -> tuple[list, Response]:
        def one(img: MetadataImage, t: Any) -> tuple[list, Any]:
            try:
                return self.replication.create_partitions(img, t), CreatePartitionsTopicResult(name=t.name)
            except KafkaError as e:
                return [], CreatePartitionsTopicResult(
                    name=t.name, error_code=e.code, error_message=e.message
                )

        records, results = self._each(req.topics, one, write=not req.validate_only)
        return records, CreatePartitionsResponse(results=tuple(results))

    def _elect_leaders(self, req: ElectLeadersRequest) -> tuple[list, Response]:
        if req.election_type not in (PREFERRED, UNCLEAN):
            return [], ElectLeadersResponse(error_code=InvalidRequestError.code)
        every = req.partitions is None

        def one(img: MetadataImage, tp: Any) -> tuple[list, Any]:
            rec, code = self.replication.elect_leader(img, tp, req.election_type)
            # Asked for every partition, Kafka leaves out those that needed no election.
            result = (
                None
                if every and code == ElectionNotNeededError.code
                else ElectionResult(tp=tp, error_code=code)
            )
            return [] if rec is None else [rec], result

        tps = self.replication.partitions(self.image) if every else req.partitions
        records, results = self._each(tps, one)
        return records, ElectLeadersResponse(results=tuple(results))

    def _alter_reassignments(self, req: AlterPartitionReassignmentsRequest) -> tuple[list, Response]:
        def one(img: MetadataImage, r: Any) -> tuple[list, Any]:
            try:
                rec = self.replication.alter_reassignment(img, r.tp, r.replicas)
            except KafkaError as e:
                return [], ReassignmentResult(tp=r.tp, error_code=e.code, error_message=e.message)
            return [] if rec is None else [rec], ReassignmentResult(tp=r.tp)

        records, results = self._each(req.reassignments, one)
        return records, AlterPartitionReassignmentsResponse(results=tuple(results))

    def _maybe_balance_leaders(self, now_ms: int) -> None:
        """Kafka's automatic preferred leader balancing in KRaft: once some partition is led by another
        than its first replica, a check ``leader_imbalance_check_interval_ms`` later elects the preferred
        replicas that can lead; a pass that hit its bound runs again at once."""
        s = self.settings
        if not s.auto_leader_rebalance_enable:
            return
        if self._balance_at_ms is None:
            if self.image is self._balance_seen:
                return  # nothing changed since the last look: no need to walk every partition again
            self._balance_seen = self.image
            if self.replication.imbalanced(self.image):
                self._balance_at_ms = now_ms + s.leader_imbalance_check_interval_ms
            return
        if now_ms < self._balance_at_ms:
            return
        records = self.replication.balance_partition_leaders(self.image)
        self._balance_at_ms = None
        if records:
            self._write(list(records), now_ms)
        if len(records) >= MAX_ELECTIONS_PER_IMBALANCE:
            self._balance_at_ms = now_ms + 10

    def _alter_configs(self, req: IncrementalAlterConfigsRequest) -> tuple[list, Response]:
        records, results = self._each(
            req.resources, configuration_control.incremental_alter, write=not req.validate_only
        )
        return records, IncrementalAlterConfigsResponse(results=tuple(results))

    def _allocate_producer_ids(self, req: AllocateProducerIdsRequest) -> tuple[list, Response]:
        try:
            self.cluster.check_broker_epoch(self.image, req.broker_id, req.broker_epoch)
        except KafkaError as e:
            return [], AllocateProducerIdsResponse(error_code=e.code)
        rec, start, size = producer_id_control.allocate(self.image, req.broker_id, req.broker_epoch)
        return [rec], AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=size)

    def _assign_replicas_to_dirs(self, req: AssignReplicasToDirsRequest) -> tuple[list, Response]:
        try:
            self.cluster.check_broker_epoch(self.image, req.broker_id, req.broker_epoch)
        except KafkaError as e:
            return [], AssignReplicasToDirsResponse(error_code=e.code)
        return self.replication.assign_replicas_to_dirs(self.image, req)

    def _new_id(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    # --------------------------------------------------------------------------------- fencing
    def _fence_records(self, broker_id: int, epoch: int) -> list[MetadataRecord]:
        records: list[MetadataRecord] = list(self.replication.handle_broker_fenced(self.image, broker_id))
        records.append(FenceBrokerRecord(id=broker_id, epoch=epoch))
        return records

    def _fence(self, broker_id: int, now_ms: int) -> None:
        b = self.image.brokers[broker_id]
        self._write(self._fence_records(broker_id, b.epoch), now_ms)

    # ---------------------------------------------------------------------------------- writing
    def _write(self, records: list[MetadataRecord], now_ms: int) -> bool:
        """Append ``records`` as one batch and replay them into ``image``; False if the Raft client
        refused (it is no longer the leader), after stepping down."""
        c = self.client
        assert c is not None and self.active_epoch is not None
        base = c.log.end_offset
        delta = MetadataDelta(self.image)
        for i, r in enumerate(records):
            delta.replay(r, base + i)
        # Replay first: the append may commit the batch at once (a quorum of one) and call handle_commit.
        self.image = delta.apply(base + len(records) - 1, self.active_epoch)
        self._last_written = base + len(records) - 1
        self._last_write_ms = now_ms
        data = [serialize(r) for r in records]
        try:
            # As Kafka's controller: at most MAX_RECORDS_PER_BATCH records a batch. Writes that may
            # exceed it are not atomic in Kafka either (fencing a broker that leads 100,000
            # partitions); a user operation is refused above MAX_RECORDS_PER_USER_OP, so it fits one.
            for i in range(0, len(data), MAX_RECORDS_PER_BATCH):
                c.append(data[i : i + MAX_RECORDS_PER_BATCH], now_ms)
        except NotLeaderOrFollowerError:
            self.renounce()
            return False
        return True

    def _complete(self, committed_offset: int) -> None:
        if not self._waiting:
            return
        done = [w for w in self._waiting if w.offset <= committed_offset]
        if done:
            self._waiting = [w for w in self._waiting if w.offset > committed_offset]
            for w in done:
                w.respond(w.response)


def _replayed(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply(image.offset, image.epoch)


def _empty_response(req: Any) -> Response:
    return req.response_type()


def _error_response(resp: Response, code: int) -> Response:
    """``resp`` with its error code set (top level where it has one, else on every partition/topic)."""
    if "error_code" in resp.__dataclass_fields__:
        return replace(resp, error_code=code)
    if isinstance(resp, CreateTopicsResponse):
        topics = tuple(CreatableTopicResult(name=t.name, error_code=code) for t in resp.topics)
        return CreateTopicsResponse(topics=topics)
    if isinstance(resp, DeleteTopicsResponse):
        return DeleteTopicsResponse(
            topics=tuple(DeletableTopicResult(name=t.name, error_code=code) for t in resp.topics)
        )
    if isinstance(resp, CreateAclsResponse):
        return replace(resp, results=tuple(replace(r, error_code=code) for r in resp.results))
    if isinstance(resp, DeleteAclsResponse):
        return replace(
            resp,
            filter_results=tuple(replace(r, error_code=code, matching_acls=()) for r in resp.filter_results),
        )
    if isinstance(resp, AlterUserScramCredentialsResponse):
        return replace(resp, results=tuple(replace(r, error_code=code) for r in resp.results))
    if isinstance(resp, CreatePartitionsResponse):
        return replace(resp, results=tuple(replace(r, error_code=code) for r in resp.results))
    if isinstance(resp, IncrementalAlterConfigsResponse):
        return IncrementalAlterConfigsResponse(
            results=tuple(replace(r, error_code=code) for r in resp.results)
        )
    return resp


__all__ = ["CONTROLLER_REQUESTS", "ControllerSettings", "QuorumController"]
