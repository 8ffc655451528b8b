"""``BrokerServer``: a broker in KRaft mode on the simulator (Kafka's ``BrokerServer``).

The same replica manager, request handlers and coordinators as the ZooKeeper-mode ``KafkaBroker``; what
differs is where metadata comes from. There is no ZooKeeper session and no controller on the broker: it
fetches ``__cluster_metadata`` as an observer of the controllers' Raft quorum, replays it into a
``MetadataImage`` (``MetadataLoader``) and applies what changed to its metadata cache and replicas
(``BrokerMetadataPublisher``); it registers and heartbeats to the active controller
(``BrokerLifecycleManager``), sends its leaders' ISR changes there (AlterPartition), gets producer id
blocks from it (AllocateProducerIds) and forwards it the clients' admin requests (``ForwardingManager``),
ACL and SCRAM changes included. No LeaderAndIsr, UpdateMetadata or StopReplica crosses the network.

With several log dirs (JBOD in KRaft, KIP-858) the broker registers their ids (``meta.properties``
directory.id), tells the controller where it put each replica (``AssignmentsManager``), and when a dir
fails reports it in its heartbeats, so the controller moves the leaderships of the partitions in it.

The metadata log lives in ``metadata_log_dir`` (Kafka's ``metadata.log.dir``), apart from the partition
logs so the log manager never mistakes it for a partition.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from kafkalite.broker.broker_metadata_publisher import BrokerMetadataPublisher
from kafkalite.broker.forwarding_manager import FORWARDED, ForwardingManager
from kafkalite.broker.kafka_apis import KafkaApis
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.rpc_producer_id_manager import RPCProducerIdManager
from kafkalite.broker.server import KafkaBroker
from kafkalite.common.kafka_uuid import uuid_from_str
from kafkalite.common.scram import ScramCredential
from kafkalite.metadata.assignments_manager import AssignmentsManager
from kafkalite.metadata.broker_lifecycle_manager import BrokerLifecycleManager
from kafkalite.metadata.controller.scram_control import MECHANISM_NAMES
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.metadata_loader import MetadataLoader
from kafkalite.metadata.snapshot_generator import SnapshotGenerator
from kafkalite.protocol.broker_lifecycle import Listener
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope
from kafkalite.raft import KafkaRaftClient, QuorumConfig, RaftRequest, RaftResponse
from kafkalite.raft.epoch_state import NEVER
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.security.authorizer import enabled as authorizer_enabled
from kafkalite.security.standard_authorizer import StandardAuthorizer
from kafkalite.storage import meta_properties
from kafkalite.storage.file_ops import OS_FILE_OPS

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
"""Written in the first log dir by a clean shutdown, with the broker epoch it ends (Kafka's
``CleanShutdownFileHandler``): the next start reads and removes it and registers with that epoch as
PreviousBrokerEpoch, so the controller knows the shutdown was clean (KIP-966)."""


def write_clean_shutdown(log_dir: str | Path, broker_epoch: int) -> None:
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
    OS_FILE_OPS.replace_atomically(Path(log_dir) / CLEAN_SHUTDOWN_FILE, data)


def read_clean_shutdown(log_dir: str | Path) -> int:
    """The epoch a clean shutdown left in ``log_dir``, -1 without one (a crash); the file is removed, so
    a crash after this start is not taken for a clean shutdown."""
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        epoch = int(json.loads(path.read_bytes())["brokerEpoch"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return -1
    path.unlink(missing_ok=True)
    return epoch


_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class BrokerServer(KafkaBroker):
    """A KRaft broker node: ``quorum`` names the controllers, ``cluster_id`` the cluster it registers in."""

    kraft = True
    """Its ACLs and SCRAM users are in the metadata log; the listener forwards changes to them here."""

    def __init__(
        self,
        broker_id: int,
        log_dir: Any,
        config: Any = None,
        *,
        quorum: QuorumConfig,
        cluster_id: str,
        metadata_log_dir: str | Path,
        heartbeat_interval_ms: int = 2000,
        on_image: Any = None,
        log_config: MetadataLogConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(broker_id, log_dir, config, **kwargs)
        self.quorum_config = quorum
        self.cluster_id = cluster_id
        self.metadata_log_dir = Path(metadata_log_dir)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.on_image = on_image
        """Called with (broker id, image) after each replayed batch: for checkers."""
        self.log_config = log_config or MetadataLogConfig()
        """The metadata log's and its snapshots' settings (``metadata.log.*``)."""
        self.raft: KafkaRaftClient | None = None
        self.loader: MetadataLoader | None = None
        self.publisher: BrokerMetadataPublisher | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.pids: RPCProducerIdManager | None = None
        self.forwarding: ForwardingManager | None = None
        self.assignments: AssignmentsManager | None = None
        self.dir_ids: dict[Path, uuid.UUID] = {}
        """Each log dir's id (its ``meta.properties`` directory.id), by the replica manager's path."""
        self._assigned: MetadataImage | None = None
        self._raft_timer: int | None = None
        self._raft_at = NEVER

    # ------------------------------------------------------------------------------ life cycle
    def startup(self) -> None:
        net = self.net
        # As Kafka's: every dir formatted (kafkalite storage format) for this cluster and this node.
        meta_properties.verify_dirs(
            [*self.log_dirs, self.metadata_log_dir],
            self.broker_id,
            cluster_id=self.cluster_id,
            require_formatted=True,
        )
        if self.locks_log_dirs:
            self.lock_log_dirs()
        self.cache = MetadataCache(self.cluster_id)
        self.apis = KafkaApis(self)
        self._configured_topics: set[str] = set()
        self._config_change_seq = None
        self.zk = None
        self.controller = None
        self.admin = None
        # KRaft's authorizer: the ACLs come from the metadata log (authorizer.class.name, as in Kafka)
        self.authorizer = StandardAuthorizer(self.props) if authorizer_enabled(self.props) else None
        self.rm = self._make_replica_manager()
        self.rm.on_halt = self._halt
        self.rm.on_log_dir_event = self._on_log_dir_offline
        self.dir_ids = _dir_ids(self.rm.log_dirs)
        self._assigned = None
        self._start_group_coordinator()
        self.publisher = publisher = BrokerMetadataPublisher(self)
        self.loader = MetadataLoader([publisher.on_delta])
        if self.on_image is not None:
            hook = self.on_image
            self.loader.publishers.append(lambda _delta, image: hook(self.broker_id, image))
        self.raft = KafkaRaftClient(
            self.broker_id,
            self.quorum_config,
            self.metadata_log_dir,
            self,
            net.node_rng(f"{self.node_id!r}/raft/{net.now_ms()}"),
            net.clock,
            listener=self._metadata_listener(),
            on_transition=self._raft_transition,
            log_config=self.log_config,
        )
        raft = self.raft
        self.loader.snapshot_generator = SnapshotGenerator(
            self.log_config,
            lambda sid, records, ts: raft.create_snapshot(sid, records, ts, net.now_ms()),
            net.now_ms,
        )
        self.raft.start(net.now_ms())
        self.lifecycle = BrokerLifecycleManager(
            self.broker_id,
            self.cluster_id,
            tuple(_listener(e) for e in self.endpoints),
            rng=net.node_rng(f"{self.node_id!r}/incarnation/{net.now_ms()}"),
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            controllers=lambda: (self.controller_id(), self.quorum_config.voters),
            metadata_offset=lambda: self.loader.image.offset if self.loader else -1,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            rack=self.config.broker_rack,
            log=self.log,
            log_dirs=self._online_dir_ids,
            offline_dirs=self._offline_dir_ids,
            dir_failure_timeout_ms=self.config.log_dir_failure_timeout_ms,
            on_fatal=self._halt,
            previous_broker_epoch=read_clean_shutdown(self.log_dirs[0]),
        )
        self.assignments = AssignmentsManager(
            self.broker_id,
            lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
            self.controller_id,
            self.send,
            self.set_timer,
            self.cancel_timer,
        )
        self.forwarding = ForwardingManager(
            self.broker_id, self.controller_id, self.send, self.set_timer, net.now_ms
        )
        self.pids = RPCProducerIdManager(
            self.broker_id, lambda: self.broker_epoch, self.controller_id, self.send, net.now_ms
        )
        self.log("broker_starting", broker=self.broker_id, mode="kraft")
        self.lifecycle.start()

    def shutdown(self) -> None:
        """Clean shutdown: stop heartbeating, close the metadata log, then what ``KafkaBroker`` closes."""
        if self.lifecycle is not None:
            self.lifecycle.stop()
            if self.lifecycle.broker_epoch >= 0:
                write_clean_shutdown(self.log_dirs[0], self.lifecycle.broker_epoch)
        if self.assignments is not None:
            self.assignments.close()
        if self.raft is not None:
            self.raft.close()
        if self._raft_timer is not None:
            self.cancel_timer(self._raft_timer)
        self._raft_timer, self._raft_at = None, NEVER
        self.raft = self.lifecycle = self.loader = self.publisher = self.pids = self.forwarding = None
        self.assignments = None
        super().shutdown()
        self.registered = False

    def controlled_shutdown(self, on_done: Any = None) -> None:
        """Kafka's controlled shutdown in KRaft mode: heartbeats ask to shut down; the controller moves
        the leaderships away and answers should_shut_down; then the broker shuts down."""

        def done() -> None:
            self.shutdown()
            if on_done is not None:
                on_done()

        if self.lifecycle is None:
            done()
            return
        self.lifecycle.begin_controlled_shutdown(done)

    def on_crash(self) -> None:
        if self.raft is not None:
            self.raft.crash()
        self.raft = self.lifecycle = self.loader = self.publisher = self.pids = self.forwarding = None
        self.assignments = None
        self._raft_timer, self._raft_at = None, NEVER
        super().on_crash()

    def _metadata_listener(self) -> Any:
        """What replays the committed metadata log: the loader (a combined node adds its controller)."""
        return self.loader

    _raft_transition: Any = None
    """Called with (node id, Raft state) on each transition; only a combined node's controller asks."""

    # ----------------------------------------------------------------------------------- state
    def controller_id(self) -> int | None:
        """The active controller as this observer of the quorum knows it (the Raft leader)."""
        if self.raft is None:
            return None
        leader, _ = self.raft.leader_and_epoch()
        return leader if leader >= 0 else None

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism`` (``SCRAM-SHA-256``) as of the published metadata."""
        if self.publisher is None:
            return None
        types = {name: t for t, name in MECHANISM_NAMES.items()}
        return self.publisher.published.scram.get((user, types.get(mechanism, 0)))

    def _producer_id_manager(self) -> Any:
        assert self.pids is not None
        return self.pids

    def _sync_registration(self) -> None:
        lc = self.lifecycle
        if lc is not None:
            self.broker_epoch = lc.broker_epoch
            self.registered = lc.broker_epoch >= 0 and not lc.fenced
            if self.registered and self.pids is not None:
                self.pids.prefetch()

    # -------------------------------------------------------------------------- NetworkChannel
    def wakeup_at(self, time_ms: int) -> None:
        if time_ms == self._raft_at and self._raft_timer is not None:
            return
        if self._raft_timer is not None:
            self.cancel_timer(self._raft_timer)
            self._raft_timer = None
        self._raft_at = time_ms
        if time_ms < NEVER:
            self._raft_timer = self.set_timer(max(0, time_ms - self.now_ms()), self._raft_poll)

    def _raft_poll(self, now_ms: int) -> None:
        self._raft_timer, self._raft_at = None, NEVER
        if self.raft is not None:
            self.raft.poll(now_ms)
            self._publish()

    def _publish(self) -> None:
        """Apply the replayed metadata, but only once it holds this incarnation's own registration (Kafka's
        initial catch-up): an image from before it may still name this broker leader with a log the crash
        cut short, while the controller is about to move that leadership (it does when the new
        incarnation registers)."""
        lc, loader = self.lifecycle, self.loader
        if self.publisher is None or loader is None or lc is None:
            return
        if lc.broker_epoch < 0 or loader.image.offset < lc.broker_epoch:
            return
        # Clients cannot reach the controllers: Metadata names a live broker as the controller, as Kafka's
        # KRaft brokers do, and that broker forwards what only the controller can do.
        live = loader.image.unfenced_brokers()
        self.publisher.publish(loader.image, live[0] if live else -1)
        self._reconcile_assignments(loader.image)

    # -------------------------------------------------------------------------- log dirs (KIP-858)
    def _online_dir_ids(self) -> list[uuid.UUID]:
        rm = self.rm
        offline = rm.offline_dirs if rm is not None else {}
        return [i for d, i in self.dir_ids.items() if d not in offline]

    def _offline_dir_ids(self) -> list[uuid.UUID]:
        rm = self.rm
        return [self.dir_ids[d] for d in (rm.offline_dirs if rm is not None else ()) if d in self.dir_ids]

    def _on_log_dir_offline(self) -> None:
        """A log dir failed and others remain: report it in a heartbeat now (Kafka's
        ``DirectoryEventHandler.handleFailure``); the controller moves the leaderships away."""
        self.log(
            "log_dir_failure_propagated",
            broker=self.broker_id,
            dirs=[str(u) for u in self._offline_dir_ids()],
        )
        if self.lifecycle is not None:
            self.lifecycle.heartbeat_now()

    def _reconcile_assignments(self, image: MetadataImage) -> None:
        """Hand the ``AssignmentsManager`` every replica here whose registration names another dir than
        the one holding its log (Kafka's ``maybeUpdateTopicAssignment``)."""
        if self.assignments is None or self.rm is None or image is self._assigned or not self.dir_ids:
            return
        self._assigned = image
        wanted = {}
        for p in self.rm.partitions():
            d = self.dir_ids.get(p.log.dir.parent)
            t = image.topic(p.tp.topic)
            part = None if t is None else t.partitions.get(p.tp.partition)
            if d is None or t is None or part is None or self.broker_id not in part.replicas:
                continue
            if part.directory(self.broker_id) != d:
                wanted[(t.id, p.tp.partition)] = d
        self.assignments.reconcile(wanted)

    # ------------------------------------------------------------------------------- messages
    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, RaftRequest | RaftResponse):
            if self.raft is not None:
                self.raft.handle(src, msg, now_ms)
                self._publish()
            return
        if isinstance(msg, ResponseEnvelope):
            if self.lifecycle is not None and self.lifecycle.on_response(src, msg):
                self._sync_registration()
                self._publish()
                return
            if self.pids is not None and self.pids.on_response(msg):
                return
            if self.assignments is not None and self.assignments.on_response(msg):
                return
            if self.forwarding is not None and self.forwarding.on_response(msg):
                return
        if (
            isinstance(msg, RequestEnvelope)
            and isinstance(msg.request, FORWARDED)
            and self.forwarding is not None
        ):
            if self.metrics is not None:
                self.metrics.request_received(src, msg.correlation_id, msg.request)
            self.forwarding.forward(src, msg)
            return
        if isinstance(msg, RequestEnvelope | ResponseEnvelope):
            super().on_message(src, msg, now_ms)


def _dir_ids(dirs: list[Path]) -> dict[Path, uuid.UUID]:
    """Each log dir's ``directory.id`` (written by ``kafkalite storage format``); a dir without one is left
    out (its replicas stay unassigned, as a broker's from before KIP-858)."""
    out = {}
    for d in dirs:
        try:
            meta = meta_properties.read(d)
        except meta_properties.MetaPropertiesError:
            continue
        if meta is not None and meta.directory_id is not None:
            out[d] = uuid_from_str(meta.directory_id)
    return out


def _listener(endpoint: str) -> Listener:
    name, _, address = endpoint.partition("://")
    host, _, port = address.rpartition(":")
    return Listener(name=name, host=host, port=int(port), security_protocol=_SECURITY_PROTOCOLS.get(name, 0))
