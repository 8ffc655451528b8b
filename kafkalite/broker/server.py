"""``KafkaBroker``: one broker as a node of the simulated network (Kafka's ``KafkaServer`` in ZooKeeper mode).

It owns a ZooKeeper session (``ZkLink``), its registration ``/brokers/ids/<id>`` (ephemeral, so it vanishes
when the session expires), a ``Controller`` component (active only on the elected broker) and a
``ReplicaManager`` (partitions, logs, replication). It routes every envelope to one of them, answers
Metadata from the cache the controller keeps current with UpdateMetadata, and fences controller requests
carrying an older controller epoch than the newest it has seen (STALE_CONTROLLER_EPOCH) or an older broker
epoch than its current registration (STALE_BROKER_EPOCH, KIP-380).

It also hosts the group coordinator (``GroupCoordinator`` + ``GroupMetadataManager``): FindCoordinator answers
the leader of the group's ``__consumer_offsets`` partition (auto-creating that topic through the controller
the first time, as Kafka does), and the group APIs are served only for groups whose partition this broker
leads and has loaded (else NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS).

Crash and restart: a crash drops everything in memory (and, if asked, log bytes never fsynced); restart opens
the logs again (recovery), opens a new session, registers and runs for controller, as a restarted process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.broker.admin_manager import CONFIG_CHANGE_PREFIX, AdminManager, decode_config_change
from kafkalite.broker.controller.controller import STALE_BROKER_EPOCH, Controller, decode_topic_config
from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.broker.group.manager import OFFSETS_TOPIC, GroupMetadataManager, offsets_topic
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.producer_id_manager import ProducerIdManager
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.txn.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    transaction_state_topic,
)
from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.coordination.store import NodeExists, NoNode, SessionExpired
from kafkalite.coordination.zk_node import ZK_NODE_ID, ConnectionLossError, ZkLink
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    InvalidReplicationFactorError,
    KafkaError,
    LeaderNotAvailableError,
    NotControllerError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalite.net.sim import BaseNode
from kafkalite.protocol import (
    INTERNAL_TOPICS,
    NO_LEADER,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
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
    HeartbeatResponse,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionError,
    ProduceRequest,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaRequest,
    StopReplicaResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicMetadata,
    TopicPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafkalite.protocol.error_response import UNKNOWN_SERVER_ERROR, error_response
from kafkalite.security.authorizer import AclAuthorizer, enabled
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

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
)
REGISTRATION_RETRY_MS = 1000

ReplicaManagerFactory = Callable[..., Any]


def _default_replica_manager_factory(**kwargs: Any) -> Any:
    return ReplicaManager(**kwargs)


class KafkaBroker(BaseNode):
    """A broker node. Add it to a ``SimNetwork`` next to a ``ZkNode``; it starts by itself."""

    def __init__(
        self,
        broker_id: int,
        log_dir: str | Path | Sequence[str | Path],
        config: Mapping[str, Any] | Any | None = None,
        *,
        zk_id: Any = ZK_NODE_ID,
        host: str | None = None,
        port: int = 9092,
        replica_manager_factory: ReplicaManagerFactory | None = None,
        auto_start: bool = True,
        zk_link_factory: Callable[..., ZkLink] | None = None,
        endpoints: tuple[str, ...] | None = None,
        file_ops: FileOps = OS_FILE_OPS,
    ) -> None:
        self.broker_id = broker_id
        # One dir, or several (Kafka's log.dirs, JBOD): a failed dir goes offline, the others keep serving.
        dirs = [log_dir] if isinstance(log_dir, str | Path) else list(log_dir)
        self.log_dirs = [Path(d) for d in dirs]
        self.log_dir = self.log_dirs[0]
        self.file_ops = file_ops
        self.halt_hook: Callable[[str], None] | None = None
        """How this broker halts when its last log dir failed: the process exits (``BrokerProcess``);
        by default the simulated node crashes."""
        self.config = BrokerConfig.coerce(config)
        self.props = self.config.to_props()
        self.zk_id = zk_id
        self.host = host or f"broker{broker_id}"
        self.port = port
        # what it registers, NAME://HOST:PORT each (the first is the one other brokers and tools use)
        self.endpoints = tuple(endpoints) if endpoints else (f"PLAINTEXT://{self.host}:{self.port}",)
        self._rm_factory = replica_manager_factory or _default_replica_manager_factory
        self.auto_start = auto_start
        self._zk_link_factory = zk_link_factory or ZkLink  # RemoteZkLink when the store is another process
        self.lose_unflushed_on_crash = False
        self.rm: Any = None
        self.zk: ZkLink | None = None
        self.controller: Controller | None = None
        self.cache = MetadataCache()
        self.controller_epoch_seen = -1
        self.broker_epoch = -1
        self.registered = False
        self._registration_timer: int | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.group_manager: GroupMetadataManager | None = None
        self._incarnation = 0
        self._internal_topic_creation: dict[str, int | None] = {}
        self._auto_creating: dict[str, int] = {}
        self._auto_create_failed: dict[str, int] = {}
        self.txn_coordinator: TransactionCoordinator | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.authorizer: Any = None  # an AclAuthorizer when authorizer.class.name is set

    # ------------------------------------------------------------------------------------ lifecycle

    def bind(self, net: Any, node_id: Any) -> None:
        super().bind(net, node_id)
        if self.auto_start:
            net.after(0, self._start_if_up)

    def _start_if_up(self) -> None:
        if self.net.is_up(self.node_id) and self.rm is None:
            self.startup()

    def startup(self) -> None:
        """Open the logs, open a ZooKeeper session, register, run for controller."""
        net = self.net
        self.cache = MetadataCache()
        self.controller_epoch_seen = -1
        self._configured_topics: set[str] = set()
        self._config_change_seq: int | None = None  # the last /config/changes notification handled
        self.producer_ids = None
        self.rm = self._rm_factory(
            broker_id=self.broker_id,
            log_dir=self.log_dirs if len(self.log_dirs) > 1 else self.log_dir,
            file_ops=self.file_ops,
            config=self.config,
            clock=net.clock,
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            controller_id=self.controller_id,
            # Straight to the network's log (what BaseNode.log does, minus a call layer): replication
            # logs several events per produced batch.
            log_event=partial(net.log, self.node_id),
            metadata_cache=self.cache,
        )
        self.rm.on_log_dir_event = self._propagate_log_dir_event
        self.rm.on_halt = self._halt
        self._start_group_coordinator()
        self.zk = self._zk_link_factory(
            net,
            self.node_id,
            session_timeout_ms=self.config.zookeeper_session_timeout_ms,
            zk_id=self.zk_id,
            on_expired=self._on_session_expired,
        )
        self.controller = Controller(
            self.broker_id,
            self.zk,
            self.props,
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            log=self.log,
            now_ms=self.now_ms,
            rng=net.node_rng(self.node_id),
        )
        self.admin = AdminManager(self.broker_id, self.config, lambda: self.zk)
        self.log("broker_starting", broker=self.broker_id)
        self._register()

    def _start_group_coordinator(self) -> None:
        """A fresh coordinator per incarnation: groups come back by loading ``__consumer_offsets``."""
        self._incarnation += 1
        self._internal_topic_creation = {}
        self._auto_creating: dict[str, int] = {}  # topic -> correlation id of its CreateTopics
        self._auto_create_failed: dict[str, int] = {}  # topic -> error of its last attempt
        seed = self.net.node_rng(f"{self.node_id!r}/group-coordinator/{self._incarnation}").getrandbits(64)
        self.group_coordinator = GroupCoordinator(
            self.net.clock,
            self.set_timer,
            self.cancel_timer,
            self.log,
            self.config,
            member_id_seed=seed,
        )
        self.group_manager = GroupMetadataManager(
            self.broker_id,
            self.config,
            self.group_coordinator,
            self.rm,
            clock=self.net.clock,
            set_timer=self.set_timer,
            log_event=self.log,
        )
        self.txn_coordinator = TransactionCoordinator(
            self.broker_id,
            self.config,
            self.rm,
            producer_ids=lambda: self._producer_id_manager().generate(),
            leader_of=self._partition_leader,
            clock=self.net.clock,
            set_timer=self.set_timer,
            log_event=self.log,
        )
        groups, txns = self.group_manager, self.txn_coordinator

        def leadership(elected: list[TopicPartition], resigned: list[TopicPartition]) -> None:
            groups.on_leadership_change(elected, resigned)
            txns.on_leadership_change(elected, resigned)

        self.rm.on_leadership_change = leadership
        self.rm.on_txn_marker = groups.on_txn_marker

    def _register(self, now_ms: int | None = None) -> None:
        """Open a session if needed, create ``/brokers/ids/<id>`` and run for controller; retried."""
        self._registration_timer = None
        zk = self.zk
        assert zk is not None and self.controller is not None
        try:
            if zk.session_id is None:
                zk.connect()
            paths.ensure_persistent_paths(zk)
            reg = paths.BrokerRegistration(
                self.broker_id,
                self.endpoints,
                timestamp=self.now_ms(),
                rack=self.config.broker_rack,
            )
            zk.create(paths.broker_path(self.broker_id), reg.encode(), ephemeral=True)
            stat = zk.exists(paths.broker_path(self.broker_id))
            assert stat is not None
            self.broker_epoch = stat.czxid
            self.registered = True
            self.log("broker_registered", broker=self.broker_id, broker_epoch=self.broker_epoch)
            self._config_changes()
            self._start_authorizer()
        except NodeExists:
            # The previous incarnation's session has not expired yet: wait for its ephemeral to go.
            self.log("broker_registration_retry", broker=self.broker_id, reason="NodeExists")
            self._registration_timer = self.set_timer(REGISTRATION_RETRY_MS, self._register)
            return
        except (ConnectionLossError, SessionExpired) as exc:
            if isinstance(exc, SessionExpired):
                zk.stop()
            self.log("broker_registration_retry", broker=self.broker_id, reason=type(exc).__name__)
            self._registration_timer = self.set_timer(REGISTRATION_RETRY_MS, self._register)
            return
        self.controller.startup()

    def _propagate_log_dir_event(self) -> None:
        """Tell the controller a log dir failed, as Kafka's broker does in ZooKeeper mode: a sequential
        znode under ``/log_dir_event_notification`` naming this broker. The controller then asks this
        broker (LeaderAndIsr) which replicas are offline and elects new leaders for them."""
        zk = self.zk
        try:
            if zk is None or zk.session_id is None:
                raise ConnectionLossError("no ZooKeeper session")
            zk.create(
                paths.log_dir_event_path(),
                paths.encode_log_dir_event(self.broker_id),
                sequential=True,
                make_parents=True,
            )
            self.log("log_dir_event_sent", broker=self.broker_id)
        except (ConnectionLossError, SessionExpired):
            # Retried: a controller that never hears of it keeps this broker leading offline replicas.
            self.set_timer(REGISTRATION_RETRY_MS, lambda _now: self._propagate_log_dir_event())

    def _halt(self, reason: str) -> None:
        """Every log dir failed: stop at once, as Kafka's ``Exit.halt(1)`` (no clean shutdown: nothing can
        be written). The ZooKeeper session then expires and the controller moves the leaderships."""
        self.log("broker_halted", broker=self.broker_id, reason=reason)
        self.lose_unflushed_on_crash = False  # the process exits; the page cache keeps what it wrote
        if self.halt_hook is not None:
            self.halt_hook(reason)
            return
        net, node = self.net, self.node_id
        net.after(0, lambda: net.is_up(node) and net.crash(node))

    def _on_session_expired(self) -> None:
        """ZooKeeper said our session is gone: resign, then register again with a new session."""
        self.log("broker_session_expired", broker=self.broker_id)
        self.registered = False
        if self.controller is not None:
            self.controller.on_session_lost()
        if self._registration_timer is None:
            self._register()

    def shutdown(self) -> None:
        """Clean shutdown: close the session (ephemerals go at once) and the logs."""
        if self.controller is not None:
            self.controller.resign("shutdown")
        if self.zk is not None:
            self.zk.close()
        if self.group_manager is not None:
            self.group_manager.shutdown()
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
        if self.rm is not None:
            self.rm.shutdown()
        self.rm = None
        self.group_coordinator = None
        self.group_manager = None
        self.txn_coordinator = None

    def controlled_shutdown(self, on_done: Callable[[], None] | None = None) -> None:
        """Kafka's controlled shutdown: ask the controller to move this broker's leaderships away (up to
        ``controlled.shutdown.max.retries`` more times, ``controlled.shutdown.retry.backoff.ms`` apart
        while some remain), then shut down cleanly; ``on_done`` runs once the broker is down."""
        if self.rm is None:
            if on_done is not None:
                on_done()
            return
        _ControlledShutdown(self, on_done).attempt()

    def on_crash(self) -> None:
        if self.rm is not None:
            self.rm.crash(self.lose_unflushed_on_crash)
        if self.controller is not None:
            self.controller.crash()
        if self.zk is not None:
            self.zk.session_id = None  # the timers died with the node; the ensemble expires the session
        self.rm = None
        self.group_coordinator = None
        self.group_manager = None
        self.txn_coordinator = None
        self.registered = False
        self.broker_epoch = -1  # in-memory: the next incarnation gets a new one when it registers
        self._registration_timer = None

    def on_restart(self, now_ms: int) -> None:
        self.startup()

    def on_tick(self, now_ms: int) -> None:
        if self.rm is not None:
            try:
                self.rm.tick(now_ms)
            except Exception as exc:  # noqa: BLE001 - periodic work that fails must not stop the broker
                self._background_failed("tick", exc)

    def set_timer(self, delay_ms: int, callback_or_token: Any) -> int:
        """Every timer of this broker and its components runs guarded: one that raises is logged and
        the broker goes on (as an exception in a Kafka scheduler task does not stop the broker)."""
        if callable(callback_or_token):
            callback_or_token = partial(self._run_timer, callback_or_token)
        return self.net.set_timer(self.node_id, delay_ms, callback_or_token)

    def _run_timer(self, callback: Callable[[int], Any], now_ms: int) -> None:
        try:
            callback(now_ms)
        except Exception as exc:  # noqa: BLE001 - see set_timer
            self._background_failed("timer", exc)

    def _background_failed(self, what: str, exc: Exception) -> None:
        logger.error("broker %s: unexpected error in a %s", self.broker_id, what, exc_info=exc)
        self.log(f"{what}_failed", broker=self.broker_id, error=f"{type(exc).__name__}: {exc}")

    # -------------------------------------------------------------------------------------- state

    def controller_id(self) -> int | None:
        """The controller this broker believes in (for AlterPartition): metadata cache, else /controller."""
        if self.cache.controller_id >= 0:
            return self.cache.controller_id
        if self.controller is not None and self.controller.active_controller_id >= 0:
            return self.controller.active_controller_id
        return None

    @property
    def is_controller(self) -> bool:
        return self.controller is not None and self.controller.is_active

    # ----------------------------------------------------------------------------------- messages

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        try:
            self._dispatch(src, msg)
        except Exception as exc:  # noqa: BLE001 - one request's failure must not stop the broker
            self._handler_failed(src, msg, exc)

    def _handler_failed(self, src: Any, msg: Any, exc: Exception) -> None:
        """Kafka's ``handleError``: the request that raised is answered with its error (a Kafka error's
        own code, else UNKNOWN_SERVER_ERROR with no message, so nothing internal leaks to the client) and
        logged with its traceback; every other request, and the broker, go on."""
        request = getattr(msg, "request", None)
        api = type(request if request is not None else msg).__name__
        logger.error(
            "broker %s: unexpected error handling %s from %s", self.broker_id, api, src, exc_info=exc
        )
        self.log("request_failed", api=api, src=src, error=f"{type(exc).__name__}: {exc}")
        if not isinstance(msg, RequestEnvelope):
            return
        if isinstance(request, ProduceRequest) and request.acks == 0:
            return  # the client waits for no answer
        if isinstance(exc, KafkaError) and exc.code != UNKNOWN_SERVER_ERROR:
            answer = error_response(request, exc.code, exc.message or None)
        else:
            answer = error_response(request)
        try:
            self.send(src, msg.reply(answer))
        except Exception as again:  # noqa: BLE001 - e.g. the client is gone: nothing more to do
            logger.error("broker %s: could not answer a failed %s: %r", self.broker_id, api, again)

    def _dispatch(self, src: Any, msg: Any) -> None:
        if src == self.zk_id and self.zk is not None and self.zk.on_message(msg):
            return
        if self.rm is None:
            return  # still starting
        if msg.__class__ is RequestEnvelope:
            # Produce and fetch requests, the bulk of the traffic, go straight to the ReplicaManager; the
            # chain below would get there too, after a dozen isinstance checks.
            hot = _RM_HOT.get(msg.request.__class__)
            if hot is not None:
                getattr(self.rm, hot)(msg, src)
                return
        if isinstance(msg, ResponseEnvelope):
            if self.controller is not None and self.controller.on_response(src, msg):
                return
            self.rm.on_response(src, msg)
            return
        if not isinstance(msg, RequestEnvelope):
            return
        req = msg.request
        if isinstance(req, FROM_CONTROLLER):
            self._from_controller(src, msg)
        elif isinstance(req, CONTROLLER_APIS):
            assert self.controller is not None
            self.controller.handle_request(src, msg)
        elif isinstance(req, MetadataRequest):
            self.send(src, msg.reply(self._metadata(req)))
        elif isinstance(req, DescribeClusterRequest):
            self.send(src, msg.reply(self.cache.describe_cluster()))
        elif isinstance(req, DeleteGroupsRequest):
            codes = self.group_manager.delete_groups(req.groups) if self.group_manager is not None else {}
            results = tuple(DeletableGroupResult(group_id=g, error_code=codes.get(g, 0)) for g in req.groups)
            self.send(src, msg.reply(DeleteGroupsResponse(results=results)))
        elif isinstance(req, DescribeConfigsRequest):
            self.send(src, msg.reply(self.admin.describe_configs(req)))
        elif isinstance(req, AlterConfigsRequest):
            self.send(src, msg.reply(self.admin.alter_configs(req)))
        elif isinstance(req, IncrementalAlterConfigsRequest):
            self.send(src, msg.reply(self.admin.incremental_alter_configs(req)))
        elif isinstance(req, FindCoordinatorRequest):
            self.send(src, msg.reply(self._find_coordinator(req)))
        elif isinstance(req, InitProducerIdRequest) and req.transactional_id is None:
            self.send(src, msg.reply(self._init_producer_id(req)))
        elif isinstance(req, _TXN_REQUESTS):
            self._handle_txn_request(src, msg)
        elif isinstance(req, _GROUP_REQUESTS):
            self._handle_group_request(src, msg)
        else:
            handler = _RM_HANDLERS.get(type(req).__name__)
            if handler is None:
                self.log("unsupported_request", api=type(req).__name__, src=src)
                return
            getattr(self.rm, handler)(msg, src)

    # --------------------------------------------------------------------- metadata, auto-creation

    def _metadata(self, req: MetadataRequest) -> MetadataResponse:
        """The cache's answer; with ``auto.create.topics.enable`` and the request's
        ``allow_auto_topic_creation``, each missing topic it names is created (Kafka's
        AutoTopicCreationManager, ZooKeeper mode): LEADER_NOT_AVAILABLE while that is under way, the
        creation's error if it failed (then it is tried again on the next request)."""
        resp = self.cache.metadata(req)
        if req.topics is None or not (
            req.allow_auto_topic_creation and self.config.auto_create_topics_enable
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
        failed = self._auto_create_failed.pop(name, None)
        if failed is not None:
            return failed
        if name in INTERNAL_TOPICS:
            if name == OFFSETS_TOPIC:
                spec, rf = offsets_topic(self.config), self.config.offsets_topic_replication_factor
            else:
                spec, rf = (
                    transaction_state_topic(self.config),
                    self.config.transaction_state_log_replication_factor,
                )
            if len(self.cache.live_brokers) < rf:
                self._create_internal_topic(spec, rf)  # logs why not
                return InvalidReplicationFactorError.code
            self._create_internal_topic(spec, rf)
            return LeaderNotAvailableError.code
        if name in self._auto_creating:
            return LeaderNotAvailableError.code
        controller = self.controller_id()
        if controller is None:
            return LeaderNotAvailableError.code
        spec = CreatableTopic(
            name=name,
            num_partitions=self.config.num_partitions,
            replication_factor=self.config.default_replication_factor,
        )
        self.log(
            "auto_create_topic",
            topic=name,
            partitions=spec.num_partitions,
            replication_factor=spec.replication_factor,
        )
        self._auto_creating[name] = self.rm._send_request(
            controller,
            CreateTopicsRequest(topics=(spec,)),
            _AutoTopicCreation(self, name),
            self.config.controller_socket_timeout_ms,
        )
        return LeaderNotAvailableError.code

    # ----------------------------------------------------------------------------- producer ids

    def _init_producer_id(self, req: InitProducerIdRequest) -> InitProducerIdResponse:
        """An idempotent producer's id: a fresh one with epoch 0 on every call, as Kafka gives when no
        transactional id is named (such a producer bumps its epoch itself, KIP-360)."""
        try:
            pid = self._producer_id_manager().generate()
        except (ConnectionLossError, SessionExpired, CoordinatorNotAvailableError) as exc:
            self.log("producer_id_unavailable", error=repr(exc))
            return InitProducerIdResponse(error_code=CoordinatorNotAvailableError.code)
        self.log("producer_id_allocated", producer_id=pid)
        return InitProducerIdResponse(producer_id=pid, producer_epoch=0)

    def _partition_leader(self, tp: TopicPartition) -> int:
        """The leader of ``tp`` in this broker's metadata cache, -1 when unknown."""
        st = self.cache.partitions.get(tp)
        return NO_LEADER if st is None else st.leader

    def _producer_id_manager(self) -> ProducerIdManager:
        if self.producer_ids is None:
            assert self.zk is not None
            self.producer_ids = ProducerIdManager(self.zk, self.broker_id)
        return self.producer_ids

    def _handle_txn_request(self, src: Any, env: RequestEnvelope) -> None:
        req = env.request
        coord = self.txn_coordinator
        assert coord is not None

        def respond(response: Any) -> None:
            if self.rm is not None and coord is self.txn_coordinator:  # not a previous incarnation's
                self.send(src, env.reply(response))

        if isinstance(req, InitProducerIdRequest):
            coord.handle_init_producer_id(req, respond)
        elif isinstance(req, AddPartitionsToTxnRequest):
            coord.handle_add_partitions(req, respond)
        elif isinstance(req, AddOffsetsToTxnRequest):
            assert self.group_manager is not None
            coord.handle_add_offsets(req, respond, self.group_manager.topic_partition(req.group_id))
        else:
            coord.handle_end_txn(req, respond)

    # ------------------------------------------------------------------------------------ groups

    def _find_coordinator(self, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """The leader of the key's ``__consumer_offsets`` partition, from the metadata cache."""
        unavailable = CoordinatorNotAvailableError.code
        assert self.group_manager is not None and self.txn_coordinator is not None
        if req.key_type == CoordinatorType.TRANSACTION:
            topic = TRANSACTION_STATE_TOPIC
            tp = TopicPartition(topic, self.txn_coordinator.partition_for(req.key))
            spec = transaction_state_topic(self.config)
            rf = self.config.transaction_state_log_replication_factor
        else:
            topic = OFFSETS_TOPIC
            tp = self.group_manager.topic_partition(req.key)
            spec = offsets_topic(self.config)
            rf = self.config.offsets_topic_replication_factor
        if not any(t.topic == topic for t in self.cache.partitions):
            why = self._create_internal_topic(spec, rf)
            return FindCoordinatorResponse(error_code=unavailable, error_message=why)
        st = self.cache.partitions.get(tp)
        if st is None or st.leader == NO_LEADER or st.leader not in self.cache.live_brokers:
            return FindCoordinatorResponse(error_code=unavailable, error_message=f"{tp} has no leader")
        ep = self.cache.live_brokers[st.leader]
        return FindCoordinatorResponse(node_id=ep.node_id, host=ep.host, port=ep.port)

    def _create_internal_topic(self, spec: CreatableTopic, rf: int) -> str:
        """Ask the controller to create an internal topic (once at a time); says why it is not there yet."""
        name = spec.name
        event = "offsets_topic" if name == OFFSETS_TOPIC else "transaction_state_topic"
        config_key = "offsets.topic" if name == OFFSETS_TOPIC else "transaction.state.log"
        alive = len(self.cache.live_brokers)
        if alive < rf:
            # Kafka refuses rather than create the topic under-replicated for good.
            self.log(f"{event}_not_created", alive_brokers=alive, replication_factor=rf)
            return f"{alive} alive broker(s) do not meet {config_key}.replication.factor={rf} for {name}"
        controller = self.controller_id()
        if controller is None:
            return f"no controller to create {name}"
        if self._internal_topic_creation.get(name) is None:
            self.log(f"{event}_create", partitions=spec.num_partitions, replication_factor=rf)
            self._internal_topic_creation[name] = self.rm._send_request(
                controller,
                CreateTopicsRequest(topics=(spec,)),
                _InternalTopicCreation(self, name),
                self.config.controller_socket_timeout_ms,
            )
        return f"{name} is being created"

    def _handle_group_request(self, src: Any, env: RequestEnvelope) -> None:
        """Check that this broker coordinates the group now, then hand the request to the coordinator."""
        req = env.request
        coord, manager = self.group_coordinator, self.group_manager
        assert coord is not None and manager is not None

        def respond(response: Any) -> None:
            if self.rm is not None and coord is self.group_coordinator:  # not a previous incarnation's
                self.send(src, env.reply(response))

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
        if isinstance(req, ListGroupsRequest):

            def listed(r: ListGroupsResponse) -> None:
                if manager.loading:  # some groups are not known yet; Kafka says so with the partial list
                    r = ListGroupsResponse(error_code=CoordinatorLoadInProgressError.code, groups=r.groups)
                respond(r)

            coord.handle_list_groups(req, listed)
            return
        if not req.group_id and not isinstance(req, OffsetFetchRequest):
            code = InvalidGroupIdError.code
        else:
            code = manager.ownership_error(req.group_id)
        if code:
            respond(_group_error(req, code))
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
        else:
            coord.handle_offset_fetch(req, respond)

    def _from_controller(self, src: Any, env: RequestEnvelope) -> None:
        req = env.request
        if req.controller_epoch < self.controller_epoch_seen:
            self.log(
                "stale_request_fenced",
                api=type(req).__name__,
                controller=req.controller_id,
                epoch=req.controller_epoch,
                current_epoch=self.controller_epoch_seen,
            )
            self.send(src, env.reply(req.response_type(error_code=StaleControllerEpochError.code)))
            return
        # Until this incarnation has registered, a controller request was addressed to a previous one
        # (the controller still sees the old ephemeral): acting on it would let a broker that restarted
        # without its unflushed tail lead from a stale ISR. Kafka only serves requests after registering.
        if not self.registered or (req.broker_epoch != -1 and req.broker_epoch < self.broker_epoch):
            self.log("stale_broker_epoch_fenced", api=type(req).__name__, epoch=req.broker_epoch)
            self.send(src, env.reply(req.response_type(error_code=STALE_BROKER_EPOCH)))
            return
        self.controller_epoch_seen = req.controller_epoch
        if isinstance(req, UpdateMetadataRequest):
            # The one cache (the replica manager reads the same object); the fence above already refused
            # an older controller epoch, so its own epoch check cannot fire here.
            deleted = self.cache.update(req)
            self.rm.handle_update_metadata(req)
            if deleted and self.group_manager is not None:
                self.group_manager.on_partitions_deleted(deleted)
            self._configured_topics -= {tp.topic for tp in deleted}
            response: Any = UpdateMetadataResponse()
        elif isinstance(req, LeaderAndIsrRequest):
            self._load_topic_configs({st.tp.topic for st in req.partition_states})
            response = self.rm.handle_leader_and_isr(req)
            if not isinstance(response, LeaderAndIsrResponse):
                response = LeaderAndIsrResponse()
        else:
            for st in req.partition_states:
                if st.delete_partition:
                    self.cache.remove(st.tp)
            response = self.rm.handle_stop_replica(req)
            if not isinstance(response, StopReplicaResponse):
                response = StopReplicaResponse()
        self.send(src, env.reply(response))

    def _load_topic_configs(self, topics: set[str]) -> None:
        """Topic overrides from ``/config/topics/<t>`` (read once per topic, before its replicas open)."""
        setter = getattr(self.rm, "set_topic_config", None)
        if setter is None or self.zk is None:
            return
        for topic in sorted(topics - self._configured_topics):
            try:
                data, _ = self.zk.get(f"{paths.CONFIG_TOPICS}/{topic}")
            except NoNode:
                config: dict[str, str] = {}
            except (ConnectionLossError, SessionExpired):
                continue
            else:
                config = decode_topic_config(data)
            setter(topic, config)
            self._configured_topics.add(topic)

    def _config_changes(self, _event: Any = None) -> None:
        """Kafka's config change notifications: re-read the overrides of every topic a
        ``/config/changes`` entry names (newer than the last one handled), and re-arm the watch."""
        zk = self.zk
        if zk is None or self.rm is None:
            return
        try:
            children = zk.get_children(paths.CONFIG_CHANGES, watch=self._config_changes)
            entries = sorted(
                (int(c[len(CONFIG_CHANGE_PREFIX) :]), c)
                for c in children
                if c.startswith(CONFIG_CHANGE_PREFIX)
            )
            if self._config_change_seq is None:  # startup: overrides are read when topics are first seen
                self._config_change_seq = entries[-1][0] if entries else -1
                return
            for seq, name in entries:
                if seq <= self._config_change_seq:
                    continue
                data, _ = zk.get(f"{paths.CONFIG_CHANGES}/{name}")
                entity = decode_config_change(data)
                if entity.startswith("topics/"):
                    self._reload_topic_config(entity[len("topics/") :])
                self._config_change_seq = seq
        except (ConnectionLossError, SessionExpired, NoNode) as exc:
            self.log("config_change_retry", error=type(exc).__name__)
            self.set_timer(REGISTRATION_RETRY_MS, lambda _now: self._config_changes())

    def _start_authorizer(self) -> None:
        """With ``authorizer.class.name`` set, read the ACLs from the store and follow their changes."""
        if not enabled(self.props):
            return
        if self.authorizer is None:
            self.authorizer = AclAuthorizer(
                self.zk, self.props, on_error=lambda m: self.log("acl_error", error=m)
            )
        self.authorizer.zk = self.zk
        self.authorizer.load()

    def _reload_topic_config(self, topic: str) -> None:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(f"{paths.CONFIG_TOPICS}/{topic}")
            config = decode_topic_config(data)
        except NoNode:
            config = {}
        self.log("topic_config_changed", topic=topic, config=config)
        if topic in self._configured_topics:
            self.rm.set_topic_config(topic, config)
        if self.controller is not None and self.controller.is_active:
            self.controller.on_topic_config_change(topic, config)

    def __repr__(self) -> str:
        return f"KafkaBroker({self.broker_id}, controller={self.is_controller})"


def _group_error(req: Any, code: int) -> Any:
    """The response to a group request that this broker does not serve (one error for everything)."""
    if isinstance(req, JoinGroupRequest):
        return JoinGroupResponse(error_code=code, member_id=req.member_id)
    if isinstance(req, SyncGroupRequest):
        return SyncGroupResponse(error_code=code)
    if isinstance(req, HeartbeatRequest):
        return HeartbeatResponse(error_code=code)
    if isinstance(req, LeaveGroupRequest):
        return LeaveGroupResponse(error_code=code)
    if isinstance(req, OffsetCommitRequest):
        return OffsetCommitResponse(
            partitions=tuple(PartitionError(tp=p.tp, error_code=code) for p in req.partitions)
        )
    if isinstance(req, TxnOffsetCommitRequest):
        return TxnOffsetCommitResponse(
            partitions=tuple(PartitionError(tp=p.tp, error_code=code) for p in req.partitions)
        )
    return OffsetFetchResponse(error_code=code)


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
        b = self.broker
        if b._internal_topic_creation.get(self.topic) == cid:
            b._internal_topic_creation[self.topic] = None  # the next FindCoordinator asks again if needed
            event = "offsets_topic" if self.topic == OFFSETS_TOPIC else "transaction_state_topic"
            b.log(f"{event}_create_result", error_code=code)


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
        b = self.broker
        if b._auto_creating.get(self.topic) != cid:
            return  # a previous incarnation's request
        del b._auto_creating[self.topic]
        if code in (0, TopicAlreadyExistsError.code, NotControllerError.code):
            return
        b.log("auto_create_topic_failed", topic=self.topic, error_code=code)
        failed = b._auto_create_failed
        failed[self.topic] = code
        if len(failed) > self.KEEP_FAILURES:
            del failed[next(iter(failed))]


class _ControlledShutdown:
    """One controlled shutdown in progress: the ControlledShutdown requests and their answers."""

    def __init__(self, broker: KafkaBroker, on_done: Callable[[], None] | None) -> None:
        self.broker = broker
        self.on_done = on_done
        self.tries = 0
        self.finished = False

    def attempt(self, _now_ms: int | None = None) -> None:
        b = self.broker
        controller = b.controller_id()
        if (
            self.finished
            or b.rm is None
            or not b.config.controlled_shutdown_enable
            or controller is None
            or self.tries > b.config.controlled_shutdown_max_retries
        ):
            self.finish("gave up" if self.tries else "skipped")
            return
        self.tries += 1
        b.log("controlled_shutdown_request", broker=b.broker_id, attempt=self.tries, controller=controller)
        req = ControlledShutdownRequest(broker_id=b.broker_id, broker_epoch=b.broker_epoch)
        b.rm._send_request(controller, req, self, b.config.controller_socket_timeout_ms)

    def on_response(self, _cid: int, _request: Any, response: Any) -> None:
        if self.finished:
            return
        if (
            isinstance(response, ControlledShutdownResponse)
            and not response.error_code
            and not response.remaining_partitions
        ):
            self.finish("done")
            return
        remaining = [str(tp) for tp in getattr(response, "remaining_partitions", ())]
        self.broker.log(
            "controlled_shutdown_retry", error_code=getattr(response, "error_code", -1), remaining=remaining
        )
        self.broker.set_timer(self.broker.config.controlled_shutdown_retry_backoff_ms, self.attempt)

    def on_timeout(self, _cid: int, _request: Any) -> None:
        if not self.finished:
            self.attempt()

    def finish(self, how: str) -> None:
        if self.finished:
            return
        self.finished = True
        b = self.broker
        b.log("controlled_shutdown_complete", broker=b.broker_id, outcome=how, attempts=self.tries)
        b.shutdown()
        if self.on_done is not None:
            self.on_done()


_RM_HANDLERS = {
    "ProduceRequest": "handle_produce",
    "FetchRequest": "handle_fetch",
    "ListOffsetsRequest": "handle_list_offsets",
    "OffsetForLeaderEpochRequest": "handle_offset_for_leader_epoch",
    "WriteTxnMarkersRequest": "handle_write_txn_markers",
    "DeleteRecordsRequest": "handle_delete_records",
}
_RM_HOT = {ProduceRequest: "handle_produce", FetchRequest: "handle_fetch"}  # by exact class
_GROUP_REQUESTS = GROUP_APIS + (DescribeGroupsRequest, ListGroupsRequest, TxnOffsetCommitRequest)
_TXN_REQUESTS = (InitProducerIdRequest, AddPartitionsToTxnRequest, AddOffsetsToTxnRequest, EndTxnRequest)

__all__ = ["KafkaBroker"]
