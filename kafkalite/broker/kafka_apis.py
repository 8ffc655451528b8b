"""``KafkaApis``: the broker's request handlers, as Kafka separates them from ``KafkaServer``.

``handle`` routes each request to the component that serves it: Produce and Fetch (the bulk of the traffic)
straight to the ``ReplicaManager``, the requests only the active controller answers to the ``Controller``,
the group APIs (the classic ones and KIP-848's ConsumerGroupHeartbeat) to the group coordinator and the transaction APIs to the transaction coordinator (each only
for groups and transactions whose partition this broker leads and has loaded, else NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS), the config APIs to the ``AdminManager``. Metadata, FindCoordinator and
InitProducerId (without a transactional id) are answered here.

Requests from the controller (LeaderAndIsr, UpdateMetadata, StopReplica) are fenced first: an older
controller epoch than the newest seen is refused with STALE_CONTROLLER_EPOCH, an older broker epoch than
this incarnation's registration with STALE_BROKER_EPOCH (KIP-380).

Metadata auto-creates missing topics (``auto.create.topics.enable``) and FindCoordinator the internal topics
(``__consumer_offsets``, ``__transaction_state``) through CreateTopics to the controller, as Kafka's
AutoTopicCreationManager does in ZooKeeper mode. A handler that raises is answered with its error
(``handle_error``, Kafka's ``handleError``), and the broker goes on.

One ``KafkaApis`` per broker incarnation: the controller epoch seen and the topic creations under way start
afresh with each.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkalite.broker.group.manager import OFFSETS_TOPIC, offsets_topic
from kafkalite.broker.txn.coordinator import TRANSACTION_STATE_TOPIC, transaction_state_topic
from kafkalite.coordination.store import SessionExpired
from kafkalite.coordination.zk_node import ConnectionLossError
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    InvalidReplicationFactorError,
    KafkaError,
    LeaderNotAvailableError,
    NotControllerError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    INTERNAL_TOPICS,
    NO_LEADER,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ControlledShutdownRequest,
    CoordinatorType,
    CreatableTopic,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ElectLeadersRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    RequestEnvelope,
    StopReplicaRequest,
    StopReplicaResponse,
    SyncGroupRequest,
    TopicMetadata,
    TopicPartition,
    TxnOffsetCommitRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafkalite.protocol.error_response import UNKNOWN_SERVER_ERROR, error_response

if TYPE_CHECKING:
    from kafkalite.broker.server import KafkaBroker

logger = logging.getLogger("kafkalite.broker")

CONTROLLER_APIS = (
    CreateTopicsRequest,
    CreatePartitionsRequest,
    AlterPartitionRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    DeleteTopicsRequest,
    ControlledShutdownRequest,
)
FROM_CONTROLLER = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
GROUP_APIS = (
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ConsumerGroupHeartbeatRequest,
)


class KafkaApis:
    """The request handlers of one broker incarnation; ``broker`` is its ``KafkaBroker``, whose
    components (replica manager, controller, coordinators, metadata cache) they call."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self.controller_epoch_seen = -1
        self._internal_topic_creation: dict[str, int | None] = {}
        self._auto_creating: dict[str, int] = {}  # topic -> correlation id of its CreateTopics
        self._auto_create_failed: dict[str, int] = {}  # topic -> error of its last attempt

    def handle(self, src: Any, env: RequestEnvelope) -> None:
        """Serve one request (the broker has started: its replica manager is there)."""
        b = self.broker
        req = env.request
        b.metrics.request_received(src, env.correlation_id, req)
        # Produce and fetch requests, the bulk of the traffic, go straight to the ReplicaManager; the
        # chain below would get there too, after a dozen isinstance checks.
        hot = _RM_HOT.get(req.__class__)
        if hot is not None:
            getattr(b.rm, hot)(env, src)
            if req.__class__ is ProduceRequest and req.acks == 0:
                b.metrics.request_answered(src, env.correlation_id)  # no response will stop its clock
            return
        if isinstance(req, FROM_CONTROLLER):
            self._from_controller(src, env)
        elif isinstance(req, CONTROLLER_APIS):
            assert b.controller is not None
            b.controller.handle_request(src, env)
        elif isinstance(req, MetadataRequest):
            b.send(src, env.reply(self._metadata(req)))
        elif isinstance(req, DescribeClusterRequest):
            b.send(src, env.reply(b.cache.describe_cluster()))
        elif isinstance(req, DeleteGroupsRequest):
            b.send(src, env.reply(self._delete_groups(req)))
        elif isinstance(req, DescribeConfigsRequest):
            b.send(src, env.reply(b.admin.describe_configs(req)))
        elif isinstance(req, AlterConfigsRequest):
            b.send(src, env.reply(b.admin.alter_configs(req)))
        elif isinstance(req, IncrementalAlterConfigsRequest):
            b.send(src, env.reply(b.admin.incremental_alter_configs(req)))
        elif isinstance(req, FindCoordinatorRequest):
            b.send(src, env.reply(self._find_coordinator(req)))
        elif isinstance(req, InitProducerIdRequest) and req.transactional_id is None:
            b.send(src, env.reply(self._init_producer_id(req)))
        elif isinstance(req, _TXN_REQUESTS):
            self._handle_txn_request(src, env)
        elif isinstance(req, _GROUP_REQUESTS):
            self._handle_group_request(src, env)
        else:
            handler = _RM_HANDLERS.get(type(req).__name__)
            if handler is None:
                b.log("unsupported_request", api=type(req).__name__, src=src)
                return
            getattr(b.rm, handler)(env, src)

    def _delete_groups(self, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        # A method of its own: the generator's closure would give handle() a cell to build per request.
        gm = self.broker.group_manager
        codes = gm.delete_groups(req.groups) if gm is not None else {}
        return DeleteGroupsResponse(
            results=tuple(DeletableGroupResult(group_id=g, error_code=codes.get(g, 0)) for g in req.groups)
        )

    def handle_error(self, src: Any, msg: Any, exc: Exception) -> None:
        """Kafka's ``handleError``: the request that raised is answered with its error (a Kafka error's
        own code, else UNKNOWN_SERVER_ERROR with no message, so nothing internal leaks to the client) and
        logged with its traceback; every other request, and the broker, go on."""
        b = self.broker
        request = getattr(msg, "request", None)
        api = type(request if request is not None else msg).__name__
        logger.error("broker %s: unexpected error handling %s from %s", b.broker_id, api, src, exc_info=exc)
        b.log("request_failed", api=api, src=src, error=f"{type(exc).__name__}: {exc}")
        if not isinstance(msg, RequestEnvelope):
            return
        if isinstance(request, ProduceRequest) and request.acks == 0:
            return  # the client waits for no answer
        if isinstance(exc, KafkaError) and exc.code != UNKNOWN_SERVER_ERROR:
            answer = error_response(request, exc.code, exc.message or None)
        else:
            answer = error_response(request)
        try:
            b.send(src, msg.reply(answer))
        except Exception as again:  # noqa: BLE001 - e.g. the client is gone: nothing more to do
            logger.error("broker %s: could not answer a failed %s: %r", b.broker_id, api, again)

    # --------------------------------------------------------------------- metadata, auto-creation

    def _metadata(self, req: MetadataRequest) -> MetadataResponse:
        """The cache's answer; with ``auto.create.topics.enable`` and the request's
        ``allow_auto_topic_creation``, each missing topic it names is created (Kafka's
        AutoTopicCreationManager, ZooKeeper mode): LEADER_NOT_AVAILABLE while that is under way, the
        creation's error if it failed (then it is tried again on the next request)."""
        resp = self.broker.cache.metadata(req)
        if req.topics is None or not (
            req.allow_auto_topic_creation and self.broker.config.auto_create_topics_enable
        ):
            return resp
        missing = UnknownTopicOrPartitionError.code
        if not any(t.error_code == missing for t in resp.topics):
            return resp
        topics = tuple(
            TopicMetadata(
                name=t.name, error_code=self._auto_create(t.name), is_internal=t.name in INTERNAL_TOPICS
            )
            if t.error_code == missing
            else t
            for t in resp.topics
        )
        return MetadataResponse(
            brokers=resp.brokers, cluster_id=resp.cluster_id, controller_id=resp.controller_id, topics=topics
        )

    def _auto_create(self, name: str) -> int:
        """Start creating a missing (valid) topic, at most once at a time; the code Metadata answers."""
        b = self.broker
        failed = self._auto_create_failed.pop(name, None)
        if failed is not None:
            return failed
        if name in INTERNAL_TOPICS:
            if name == OFFSETS_TOPIC:
                spec, rf = offsets_topic(b.config), b.config.offsets_topic_replication_factor
            else:
                spec, rf = (
                    transaction_state_topic(b.config),
                    b.config.transaction_state_log_replication_factor,
                )
            if len(b.cache.live_brokers) < rf:
                self._create_internal_topic(spec, rf)  # logs why not
                return InvalidReplicationFactorError.code
            self._create_internal_topic(spec, rf)
            return LeaderNotAvailableError.code
        if name in self._auto_creating:
            return LeaderNotAvailableError.code
        controller = b.controller_id()
        if controller is None:
            return LeaderNotAvailableError.code
        spec = CreatableTopic(
            name=name,
            num_partitions=b.config.num_partitions,
            replication_factor=b.config.default_replication_factor,
        )
        b.log(
            "auto_create_topic",
            topic=name,
            partitions=spec.num_partitions,
            replication_factor=spec.replication_factor,
        )
        self._auto_creating[name] = b.rm._send_request(
            controller,
            CreateTopicsRequest(topics=(spec,)),
            _AutoTopicCreation(b, name),
            b.config.controller_socket_timeout_ms,
        )
        return LeaderNotAvailableError.code

    # ----------------------------------------------------------------------------- producer ids

    def _init_producer_id(self, req: InitProducerIdRequest) -> InitProducerIdResponse:
        """An idempotent producer's id: a fresh one with epoch 0 on every call, as Kafka gives when no
        transactional id is named (such a producer bumps its epoch itself, KIP-360)."""
        b = self.broker
        try:
            pid = b._producer_id_manager().generate()
        except (ConnectionLossError, SessionExpired, CoordinatorNotAvailableError) as exc:
            b.log("producer_id_unavailable", error=repr(exc))
            return InitProducerIdResponse(error_code=CoordinatorNotAvailableError.code)
        b.log("producer_id_allocated", producer_id=pid)
        return InitProducerIdResponse(producer_id=pid, producer_epoch=0)

    def _handle_txn_request(self, src: Any, env: RequestEnvelope) -> None:
        b = self.broker
        req = env.request
        coord = b.txn_coordinator
        assert coord is not None

        def respond(response: Any) -> None:
            if b.rm is not None and coord is b.txn_coordinator:  # not a previous incarnation's
                b.send(src, env.reply(response))

        if isinstance(req, InitProducerIdRequest):
            coord.handle_init_producer_id(req, respond)
        elif isinstance(req, AddPartitionsToTxnRequest):
            coord.handle_add_partitions(req, respond)
        elif isinstance(req, AddOffsetsToTxnRequest):
            assert b.group_manager is not None
            coord.handle_add_offsets(req, respond, b.group_manager.topic_partition(req.group_id))
        else:
            coord.handle_end_txn(req, respond)

    # ------------------------------------------------------------------------------------ groups

    def _find_coordinator(self, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """The leader of the key's ``__consumer_offsets`` partition, from the metadata cache."""
        b = self.broker
        unavailable = CoordinatorNotAvailableError.code
        assert b.group_manager is not None and b.txn_coordinator is not None
        if req.key_type == CoordinatorType.TRANSACTION:
            topic = TRANSACTION_STATE_TOPIC
            tp = TopicPartition(topic, b.txn_coordinator.partition_for(req.key))
            spec = transaction_state_topic(b.config)
            rf = b.config.transaction_state_log_replication_factor
        else:
            topic = OFFSETS_TOPIC
            tp = b.group_manager.topic_partition(req.key)
            spec = offsets_topic(b.config)
            rf = b.config.offsets_topic_replication_factor
        if not any(t.topic == topic for t in b.cache.partitions):
            why = self._create_internal_topic(spec, rf)
            return FindCoordinatorResponse(error_code=unavailable, error_message=why)
        st = b.cache.partitions.get(tp)
        if st is None or st.leader == NO_LEADER or st.leader not in b.cache.live_brokers:
            return FindCoordinatorResponse(error_code=unavailable, error_message=f"{tp} has no leader")
        ep = b.cache.live_brokers[st.leader]
        return FindCoordinatorResponse(node_id=ep.node_id, host=ep.host, port=ep.port)

    def _create_internal_topic(self, spec: CreatableTopic, rf: int) -> str:
        """Ask the controller to create an internal topic (once at a time); says why it is not there yet."""
        b = self.broker
        name = spec.name
        event = "offsets_topic" if name == OFFSETS_TOPIC else "transaction_state_topic"
        config_key = "offsets.topic" if name == OFFSETS_TOPIC else "transaction.state.log"
        alive = len(b.cache.live_brokers)
        if alive < rf:
            # Kafka refuses rather than create the topic under-replicated for good.
            b.log(f"{event}_not_created", alive_brokers=alive, replication_factor=rf)
            return f"{alive} alive broker(s) do not meet {config_key}.replication.factor={rf} for {name}"
        controller = b.controller_id()
        if controller is None:
            return f"no controller to create {name}"
        if self._internal_topic_creation.get(name) is None:
            b.log(f"{event}_create", partitions=spec.num_partitions, replication_factor=rf)
            self._internal_topic_creation[name] = b.rm._send_request(
                controller,
                CreateTopicsRequest(topics=(spec,)),
                _InternalTopicCreation(b, name),
                b.config.controller_socket_timeout_ms,
            )
        return f"{name} is being created"

    def _handle_group_request(self, src: Any, env: RequestEnvelope) -> None:
        """Check that this broker coordinates the group now, then hand the request to the coordinator."""
        b = self.broker
        req = env.request
        coord, manager = b.group_coordinator, b.group_manager
        assert coord is not None and manager is not None

        def respond(response: Any) -> None:
            if b.rm is not None and coord is b.group_coordinator:  # not a previous incarnation's
                b.send(src, env.reply(response))

        if isinstance(req, DescribeGroupsRequest):
            served = tuple(g for g in req.groups if manager.ownership_error(g) == 0)
            answers: dict[str, DescribedGroup] = {}
            if served:
                coord.handle_describe_groups(
                    DescribeGroupsRequest(groups=served),
                    lambda r: answers.update({g.group_id: g for g in r.groups}),
                )
            groups = tuple(
                answers[g]
                if g in answers
                else DescribedGroup(group_id=g, error_code=manager.ownership_error(g))
                for g in req.groups
            )
            respond(DescribeGroupsResponse(groups=groups))
            return
        if isinstance(req, ConsumerGroupDescribeRequest):
            # As DescribeGroups: each group answered by its own coordinator's error when not this broker.
            mine = tuple(g for g in req.group_ids if manager.ownership_error(g) == 0)
            described = {g.group_id: g for g in coord.consumer.describe(mine)}
            respond(
                ConsumerGroupDescribeResponse(
                    groups=tuple(
                        described[g]
                        if g in described
                        else ConsumerGroupDescribedGroup(group_id=g, error_code=manager.ownership_error(g))
                        for g in req.group_ids
                    )
                )
            )
            return
        if isinstance(req, ListGroupsRequest):

            def listed(r: ListGroupsResponse) -> None:
                if manager.loading:  # some groups are not known yet; Kafka says so with the partial list
                    r = ListGroupsResponse(error_code=CoordinatorLoadInProgressError.code, groups=r.groups)
                respond(r)

            coord.handle_list_groups(req, listed)
            return
        if isinstance(req, ConsumerGroupHeartbeatRequest) and not req.group_id:
            code = 0  # the coordinator answers INVALID_REQUEST, as Kafka does for this API
        elif not req.group_id and not isinstance(req, OffsetFetchRequest):
            code = InvalidGroupIdError.code
        else:
            code = manager.ownership_error(req.group_id)
        if code:
            respond(error_response(req, code))
            return
        if isinstance(req, JoinGroupRequest):
            coord.handle_join_group(req, respond, client_id=env.client_id, client_host=f"/{src}")
        elif isinstance(req, SyncGroupRequest):
            coord.handle_sync_group(req, respond)
        elif isinstance(req, HeartbeatRequest):
            coord.handle_heartbeat(req, respond)
        elif isinstance(req, LeaveGroupRequest):
            coord.handle_leave_group(req, respond)
        elif isinstance(req, OffsetCommitRequest):
            coord.handle_offset_commit(req, respond)
        elif isinstance(req, TxnOffsetCommitRequest):
            coord.handle_txn_offset_commit(req, respond)
        elif isinstance(req, ConsumerGroupHeartbeatRequest):
            coord.handle_consumer_group_heartbeat(
                req, respond, client_id=env.client_id, client_host=f"/{src}"
            )
        else:
            coord.handle_offset_fetch(req, respond)

    # --------------------------------------------------------------------- requests from the controller

    def _from_controller(self, src: Any, env: RequestEnvelope) -> None:
        b = self.broker
        req = env.request
        if req.controller_epoch < self.controller_epoch_seen:
            b.log(
                "stale_request_fenced",
                api=type(req).__name__,
                controller=req.controller_id,
                epoch=req.controller_epoch,
                current_epoch=self.controller_epoch_seen,
            )
            b.send(src, env.reply(req.response_type(error_code=StaleControllerEpochError.code)))
            return
        # Until this incarnation has registered, a controller request was addressed to a previous one
        # (the controller still sees the old ephemeral): acting on it would let a broker that restarted
        # without its unflushed tail lead from a stale ISR. Kafka only serves requests after registering.
        if not b.registered or (req.broker_epoch != -1 and req.broker_epoch < b.broker_epoch):
            b.log("stale_broker_epoch_fenced", api=type(req).__name__, epoch=req.broker_epoch)
            b.send(src, env.reply(req.response_type(error_code=StaleBrokerEpochError.code)))
            return
        self.controller_epoch_seen = req.controller_epoch
        if isinstance(req, UpdateMetadataRequest):
            # The one cache (the replica manager reads the same object); the fence above already refused
            # an older controller epoch, so its own epoch check cannot fire here.
            deleted = b.cache.update(req)
            b.rm.handle_update_metadata(req)
            if deleted and b.group_manager is not None:
                b.group_manager.on_partitions_deleted(deleted)
            b._configured_topics -= {tp.topic for tp in deleted}
            response: Any = UpdateMetadataResponse()
        elif isinstance(req, LeaderAndIsrRequest):
            b._load_topic_configs({st.tp.topic for st in req.partition_states})
            response = b.rm.handle_leader_and_isr(req)
            if not isinstance(response, LeaderAndIsrResponse):
                response = LeaderAndIsrResponse()
        else:
            for st in req.partition_states:
                if st.delete_partition:
                    b.cache.remove(st.tp)
            response = b.rm.handle_stop_replica(req)
            if not isinstance(response, StopReplicaResponse):
                response = StopReplicaResponse()
        b.send(src, env.reply(response))


class _InternalTopicCreation:
    """Answer (or timeout) of the broker's CreateTopics for an internal topic."""

    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        self.broker = broker
        self.topic = topic

    def on_response(self, cid: int, _request: Any, response: Any) -> None:
        self._done(cid, response.topics[0].error_code if response.topics else -1)

    def on_timeout(self, cid: int, _request: Any) -> None:
        self._done(cid, -1)

    def _done(self, cid: int, code: int) -> None:
        a = self.broker.apis  # the current incarnation's
        if a._internal_topic_creation.get(self.topic) == cid:
            a._internal_topic_creation[self.topic] = None  # the next FindCoordinator asks again if needed
            event = "offsets_topic" if self.topic == OFFSETS_TOPIC else "transaction_state_topic"
            self.broker.log(f"{event}_create_result", error_code=code)


class _AutoTopicCreation:
    """Answer (or timeout) of the CreateTopics a Metadata request started; a failure other than a
    concurrent creation is kept for the next Metadata to report (bounded, oldest dropped first)."""

    KEEP_FAILURES = 1000

    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        self.broker = broker
        self.topic = topic

    def on_response(self, cid: int, _request: Any, response: Any) -> None:
        result = response.topics[0] if getattr(response, "topics", ()) else None
        self._done(cid, UNKNOWN_SERVER_ERROR if result is None else result.error_code)

    def on_timeout(self, cid: int, _request: Any) -> None:
        self._done(cid, 0)  # nothing known: the next Metadata asks again

    def _done(self, cid: int, code: int) -> None:
        a = self.broker.apis  # the current incarnation's
        if a._auto_creating.get(self.topic) != cid:
            return  # a previous incarnation's request
        del a._auto_creating[self.topic]
        if code in (0, TopicAlreadyExistsError.code, NotControllerError.code):
            return
        self.broker.log("auto_create_topic_failed", topic=self.topic, error_code=code)
        failed = a._auto_create_failed
        failed[self.topic] = code
        if len(failed) > self.KEEP_FAILURES:
            del failed[next(iter(failed))]


_RM_HANDLERS = {
    "ProduceRequest": "handle_produce",
    "FetchRequest": "handle_fetch",
    "ListOffsetsRequest": "handle_list_offsets",
    "OffsetForLeaderEpochRequest": "handle_offset_for_leader_epoch",
    "WriteTxnMarkersRequest": "handle_write_txn_markers",
    "DeleteRecordsRequest": "handle_delete_records",
    "DescribeLogDirsRequest": "handle_describe_log_dirs",
    "AlterReplicaLogDirsRequest": "handle_alter_replica_log_dirs",
}
_RM_HOT = {ProduceRequest: "handle_produce", FetchRequest: "handle_fetch"}  # by exact class
_GROUP_REQUESTS = GROUP_APIS + (
    DescribeGroupsRequest,
    ListGroupsRequest,
    TxnOffsetCommitRequest,
    ConsumerGroupDescribeRequest,
)
_TXN_REQUESTS = (InitProducerIdRequest, AddPartitionsToTxnRequest, AddOffsetsToTxnRequest, EndTxnRequest)

__all__ = ["CONTROLLER_APIS", "FROM_CONTROLLER", "GROUP_APIS", "KafkaApis"]
