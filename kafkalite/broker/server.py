"""``KafkaBroker``: one broker as a node of the simulated network (Kafka's ``KafkaServer`` in ZooKeeper mode).

It owns a ZooKeeper session (``ZkLink``), its registration ``/brokers/ids/<id>`` (ephemeral, so it vanishes
when the session expires), a ``Controller`` component (active only on the elected broker), a
``ReplicaManager`` (partitions, logs, replication), the group coordinator (``GroupCoordinator`` +
``GroupMetadataManager``), the transaction coordinator and the ``AdminManager``. The broker starts, wires,
crashes and restarts them; its messages go to the ZooKeeper session, to whichever component sent the
request being answered, or, for requests, to ``KafkaApis`` (``kafka_apis.py``), which holds the per-API
handlers as Kafka's does. The broker also follows topic config changes (``/config/changes``) and carries
out controlled shutdown.

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
from kafkalite.broker.broker_metrics import BrokerMetrics
from kafkalite.broker.controller.controller import Controller
from kafkalite.broker.controller.topic_admin import decode_topic_config
from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.broker.group.manager import GroupMetadataManager
from kafkalite.broker.kafka_apis import KafkaApis
from kafkalite.broker.metadata_cache import CLUSTER_ID, MetadataCache
from kafkalite.broker.producer_id_manager import ProducerIdManager
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.txn.coordinator import TransactionCoordinator
from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.coordination.store import NodeExists, NoNode, SessionExpired
from kafkalite.coordination.zk_node import ZK_NODE_ID, ConnectionLossError, ZkLink
from kafkalite.metadata.controller.controller_metrics import controller_gauges
from kafkalite.net.sim import BaseNode
from kafkalite.protocol import (
    NO_LEADER,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
)
from kafkalite.security.authorizer import AclAuthorizer, enabled
from kafkalite.storage import log_dir_lock, meta_properties
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.log_dir_lock import LogDirLock

logger = logging.getLogger("kafkalite.broker")

REGISTRATION_RETRY_MS = 1000

ReplicaManagerFactory = Callable[..., Any]


def _default_replica_manager_factory(**kwargs: Any) -> Any:
    return ReplicaManager(**kwargs)


class KafkaBroker(BaseNode):
    """A broker node. Add it to a ``SimNetwork`` next to a ``ZkNode``; it starts by itself.

    Lifecycle and wiring only (Kafka's ``KafkaServer``); the request handlers are ``self.apis``, a
    ``KafkaApis`` made afresh with each incarnation."""

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
        lock_log_dirs: bool = False,
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
        self.metrics: BrokerMetrics | None = None  # this incarnation's (startup makes a fresh set)
        self.request_clock: Callable[[], float] | None = None
        """Request times in ms for the metrics: the TCP host gives a fine wall clock; None uses the
        network's (whole simulated ms, deterministic)."""
        self.zk: ZkLink | None = None
        self.controller: Controller | None = None
        self.cache = MetadataCache()
        self.apis = KafkaApis(self)  # a fresh one each incarnation (startup)
        self.broker_epoch = -1
        self.registered = False
        self._registration_timer: int | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.group_manager: GroupMetadataManager | None = None
        self._incarnation = 0
        self.txn_coordinator: TransactionCoordinator | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.authorizer: Any = None  # an AclAuthorizer when authorizer.class.name is set
        # Real hosts (a broker process, the TCP server) lock their log dirs as Kafka does; a simulation
        # running many brokers of many scenarios in one process opts in only when it wants to.
        self.locks_log_dirs = lock_log_dirs
        self._dir_locks: list[LogDirLock] = []

    # ------------------------------------------------------------------------------------ lifecycle

    def bind(self, net: Any, node_id: Any) -> None:
        super().bind(net, node_id)
        if self.auto_start:
            net.after(0, self._start_if_up)

    def _start_if_up(self) -> None:
        if self.net.is_up(self.node_id) and self.rm is None:
            self.startup()

    def lock_log_dirs(self, held: list[LogDirLock] | None = None) -> None:
        """Take ``<dir>/.lock`` in every log dir (Kafka's ``LogManager`` does before opening a log), or
        adopt locks already ``held`` for them; ``LogDirInUseError`` if another broker holds one.
        Idempotent; released by ``shutdown`` and by a crash (the OS drops a dead process's locks)."""
        if held is not None:
            self._release_log_dirs()
            self._dir_locks = list(held)
        elif not self._dir_locks:
            self._dir_locks = log_dir_lock.lock_log_dirs(self.log_dirs)

    def _make_replica_manager(self) -> Any:
        """This incarnation's ReplicaManager and metrics (both modes build them the same way)."""
        self.metrics = BrokerMetrics(self.now_ms, self.request_clock)
        rm = self._rm_factory(
            broker_id=self.broker_id,
            log_dir=self.log_dirs if len(self.log_dirs) > 1 else self.log_dir,
            file_ops=self.file_ops,
            config=self.config,
            clock=self.net.clock,
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            controller_id=self.controller_id,
            # Straight to the network's log (what BaseNode.log does, minus a call layer and the keyword
            # packing): replication logs several events per produced batch.
            record_event=partial(self.net.record, self.node_id),
            metadata_cache=self.cache,
            metrics=self.metrics,
        )
        self.metrics.replica_manager_gauges(rm)
        return rm

    def _check_meta_properties(self) -> None:
        """Refuse dirs written by another broker id or another cluster, and give the others a version-0
        ``meta.properties`` (ZooKeeper mode writes its own; KRaft needs ``kafkalite storage format``)."""
        meta_properties.verify_dirs(self.log_dirs, self.broker_id, cluster_id=CLUSTER_ID)
        for d in self.log_dirs:
            if meta_properties.read(d) is None:
                meta = meta_properties.MetaProperties(meta_properties.ZK_VERSION, self.broker_id, CLUSTER_ID)
                meta_properties.write(d, meta)

    def _release_log_dirs(self) -> None:
        locks, self._dir_locks = self._dir_locks, []
        for lock in locks:
            lock.release()

    def startup(self) -> None:
        """Lock the log dirs, open the logs, open a ZooKeeper session, register, run for controller."""
        net = self.net
        if self.locks_log_dirs:
            self.lock_log_dirs()
        if self._dir_locks:
            try:
                self._check_meta_properties()
            except meta_properties.MetaPropertiesError:
                self._release_log_dirs()  # a broker that will not start holds nothing
                raise
        self.cache = MetadataCache()
        self.apis = KafkaApis(self)
        self._configured_topics: set[str] = set()
        self._config_change_seq: int | None = None  # the last /config/changes notification handled
        self.producer_ids = None
        self.rm = self._make_replica_manager()
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
        self._controller_gauges()
        self.log("broker_starting", broker=self.broker_id)
        self._register()

    def _controller_gauges(self) -> None:
        """Kafka's KafkaController gauges, read from this broker's controller when it is the active one."""
        assert self.metrics is not None and self.controller is not None
        controller = self.controller

        def offline() -> int:
            ctx = controller.ctx
            if ctx is None:
                return 0
            deleting = ctx.deletion.topics if ctx.deletion is not None else ()
            return sum(
                1
                for tp, info in ctx.partitions()
                if tp.topic not in deleting
                and (info.state is None or info.state.leader not in ctx.live_brokers)
            )

        def partitions() -> int:
            ctx = controller.ctx
            return 0 if ctx is None else sum(len(ps) for ps in ctx.topics.values())

        controller_gauges(
            self.metrics.registry,
            lambda: controller.is_active and self.controller is controller,
            offline,
            partitions,
            lambda: 0 if controller.ctx is None else len(controller.ctx.topics),
        )

    def _start_group_coordinator(self) -> None:
        """A fresh coordinator per incarnation: groups come back by loading ``__consumer_offsets``."""
        self._incarnation += 1
        seed = self.net.node_rng(f"{self.node_id!r}/group-coordinator/{self._incarnation}").getrandbits(64)
        self.group_coordinator = GroupCoordinator(
            self.net.clock,
            self.set_timer,
            self.cancel_timer,
            self.log,
            self.config,
            member_id_seed=seed,
            topics=lambda: self.cache.partition_counts(),
            topic_ids=lambda name: self.cache.topic_id(name),
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
        self.metrics = None  # a stopped process reports nothing; the next incarnation counts from zero
        self._release_log_dirs()
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
        self.metrics = None  # a stopped process reports nothing; the next incarnation counts from zero
        self._release_log_dirs()  # as the OS does for a dead process
        self.group_coordinator = None
        self.group_manager = None
        self.txn_coordinator = None
        self.registered = False
        self.broker_epoch = -1  # in-memory: the next incarnation gets a new one when it registers
        self._registration_timer = None

    def on_restart(self, now_ms: int) -> None:
        self.startup()

    def send(self, dst: Any, msg: Any) -> bool:
        """To the network; an answer to a client's request also stops its request-time clock."""
        if msg.__class__ is ResponseEnvelope and self.metrics is not None:
            self.metrics.request_answered(dst, msg.correlation_id)
        return self.net.send(self.node_id, dst, msg)

    def on_tick(self, now_ms: int) -> None:
        if self.metrics is not None:
            self.metrics.tick(now_ms)
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
        """ZooKeeper's messages to the session; answers to the controller's requests or to the replica
        manager's; requests to ``KafkaApis``. One that raises is answered with its error."""
        try:
            if src == self.zk_id and self.zk is not None and self.zk.on_message(msg):
                return
            if self.rm is None:
                return  # still starting
            if isinstance(msg, ResponseEnvelope):
                if self.controller is not None and self.controller.on_response(src, msg):
                    return
                self.rm.on_response(src, msg)
            elif isinstance(msg, RequestEnvelope):
                self.apis.handle(src, msg)
        except Exception as exc:  # noqa: BLE001 - one request's failure must not stop the broker
            self.apis.handle_error(src, msg, exc)

    # --------------------------------------------------- shared by the coordinators and the handlers

    def _partition_leader(self, tp: TopicPartition) -> int:
        """The leader of ``tp`` in this broker's metadata cache, -1 when unknown."""
        st = self.cache.partitions.get(tp)
        return NO_LEADER if st is None else st.leader

    def _producer_id_manager(self) -> ProducerIdManager:
        if self.producer_ids is None:
            assert self.zk is not None
            self.producer_ids = ProducerIdManager(self.zk, self.broker_id)
        return self.producer_ids

    # ------------------------------------------------------------------------------- topic configs

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


__all__ = ["KafkaBroker"]
