"""``KRaftCluster``: a simulated Kafka cluster in KRaft mode, beside the ZooKeeper-mode ``Cluster``.

Controllers ``CONTROLLER_BASE + 1 ..`` form the metadata quorum (``ControllerServer``: a Raft voter
running the ``QuorumController``); brokers ``1..N`` are ``BrokerServer``s, observers of the quorum. The
same facade as ``Cluster`` (``create_topic``, ``producer``, ``consumer``, ``crash`` and ``restart`` of a
broker or a controller, readers of leaders,
ISRs and replicas), with the readers looking at the active controller's committed ``MetadataImage``
instead of ZooKeeper. Timeouts are Kafka's defaults unless ``quorum`` / the ``broker.*`` keys say
otherwise, the metadata log's and its snapshots' by ``log_config``. ``on_transition`` (controller id, Raft state) and ``on_image`` (node id, image after each
committed batch, controllers and brokers alike) let a checker watch every node; ``racks`` gives broker
``i`` the ``broker.rack`` ``racks[i - 1]``, which it registers, and placement is then rack-aware.
``combined=True`` runs the controllers on brokers ``1..controllers`` instead, each a ``KafkaRaftServer``
(``process.roles=broker,controller``: one node id, one Raft client and log for both roles); the rest of
the brokers are broker-only. ``log_dirs_per_broker`` > 1 gives each broker that many log dirs (JBOD,
``broker-N/dir-I``) and ``file_ops`` is the door their storage writes through (a ``DiskFaults`` fails a
dir), as in ``Cluster``. ``features`` are the feature levels the cluster is formatted with besides
``metadata.version`` (``kafka-storage format --feature``): ``{"eligible.leader.replicas.version": 1}``
turns on KIP-966's eligible leader replicas, off by default as in Kafka 4.0.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.broker.broker_server import BrokerServer
from kafkalite.broker.kafka_raft_server import KafkaRaftServer
from kafkalite.config.broker import BrokerConfig
from kafkalite.errors import KafkaError, NotControllerError, RequestTimedOutError, error_for_code
from kafkalite.host.cluster import BROKER_TICK_MS, Cluster, _Admin
from kafkalite.metadata.controller import ControllerSettings
from kafkalite.metadata.controller.controller_server import ControllerServer
from kafkalite.metadata.image import MetadataImage, PartitionRegistration
from kafkalite.metadata.placement import assign_replicas
from kafkalite.net.sim import SimNetwork
from kafkalite.protocol import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    ReplicaAssignment,
    TopicPartition,
)
from kafkalite.raft import QuorumConfig
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.meta_properties import format_dirs, random_uuid

CONTROLLER_BASE = 3000
DEFAULT_CLUSTER_ID = "4L6g3nShT-eMCtK--X86sw"


class KRaftCluster(Cluster):
    def __init__(
        self,
        brokers: int = 3,
        controllers: int = 3,
        seed: int = 0,
        dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        topic_defaults: Mapping[str, Any] | None = None,
        latency_ms: int = 1,
        *,
        log_messages: str = "none",
        cluster_id: str = DEFAULT_CLUSTER_ID,
        quorum: Mapping[str, Any] | None = None,
        heartbeat_interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        start_timeout_ms: int = 30_000,
        on_transition: Callable[[int, Any], None] | None = None,
        on_image: Callable[[int, MetadataImage], None] | None = None,
        racks: Sequence[str | None] | None = None,
        log_config: MetadataLogConfig | None = None,
        combined: bool = False,
        log_dirs_per_broker: int = 1,
        file_ops: FileOps = OS_FILE_OPS,
        features: Mapping[str, int] | None = None,
    ) -> None:
        if combined and not 0 < controllers <= brokers:
            raise ValueError(f"combined mode runs the {controllers} controllers on brokers: 1..{brokers}")
        self.combined = combined
        self.net = SimNetwork(seed, latency_ms=latency_ms, log_messages=log_messages)
        self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-kraft-") if dir is None else None
        self.dir = Path(self._tmp.name if self._tmp is not None else dir)  # type: ignore[arg-type]
        self.topic_defaults = dict(topic_defaults or {})
        self.cluster_id = cluster_id
        base = 0 if combined else CONTROLLER_BASE
        voters = tuple(base + i for i in range(1, controllers + 1))
        self.quorum_config = QuorumConfig(voters=voters, **dict(quorum or {}))
        bcfg = BrokerConfig.coerce(dict(config or {}))
        settings = ControllerSettings.from_broker_config(
            cluster_id,
            bcfg,
            broker_session_timeout_ms=session_timeout_ms,
            bootstrap_features=tuple(sorted((features or {}).items())),
        )
        # kafkalite storage format, for every node, before any starts; the directory ids come from the
        # seed (they are in the metadata records since KIP-858), so a run is the same every time
        dir_rng = random.Random(f"{seed}/directory.id")
        fmt = partial(format_dirs, ignore_formatted=True, new_uuid=lambda: random_uuid(dir_rng.randbytes))
        for c in () if combined else voters:
            fmt([self.dir / f"controller-{c}"], cluster_id, c)
        for b in range(1, brokers + 1):
            fmt([*self._log_dirs(b, log_dirs_per_broker), self.dir / f"broker-{b}-metadata"], cluster_id, b)
        self.controllers: dict[int, Any] = {}
        """Each voter's controller side: a ``ControllerServer``, or a ``ControllerRole`` of a combined node."""
        self.controllers = {
            c: self.net.add_node(
                c,
                ControllerServer(
                    self.quorum_config,
                    self.dir / f"controller-{c}",
                    settings,
                    assign_replicas,
                    on_transition=on_transition,
                    on_image=on_image,
                    log_config=log_config,
                ),
            )
            for c in (() if combined else voters)
        }
        self.brokers: dict[int, BrokerServer] = {}  # type: ignore[assignment]
        for b in range(1, brokers + 1):
            props = dict(config or {})
            if racks is not None:
                props["broker.rack"] = racks[b - 1]
            common: dict[str, Any] = {
                "quorum": self.quorum_config,
                "cluster_id": cluster_id,
                "metadata_log_dir": self.dir / f"broker-{b}-metadata",
                "heartbeat_interval_ms": heartbeat_interval_ms,
                "on_image": on_image,
                "log_config": log_config,
                "file_ops": file_ops,
            }
            if b in voters and combined:
                node = KafkaRaftServer(
                    b, self._log_dirs(b, log_dirs_per_broker), props, settings=settings, placer=assign_replicas,
                    on_transition=on_transition, **common,
                )  # fmt: skip
                self.controllers[b] = ControllerRole(node)
            else:
                node = BrokerServer(b, self._log_dirs(b, log_dirs_per_broker), props, **common)
            self.brokers[b] = self.net.add_node(b, node, tick_ms=BROKER_TICK_MS)
        self._admin: _Admin = self.net.add_node("admin", _Admin())
        self._clients = 0
        if not self.run_until(self._all_brokers_unfenced, start_timeout_ms):
            raise RuntimeError("the KRaft cluster did not elect a controller and unfence its brokers")

    # ------------------------------------------------------------------------------ controllers
    def _log_dirs(self, broker: int, count: int) -> list[Path]:
        """Broker ``broker``'s log.dirs: ``broker-N``, or ``count`` > 1 dirs in it (JBOD)."""
        home = self.dir / f"broker-{broker}"
        return [home] if count <= 1 else [home / f"dir-{i}" for i in range(count)]

    def active_controller(self) -> Any:
        live = [
            c
            for cid, c in self.controllers.items()
            if self.net.is_up(cid) and c.controller is not None and c.controller.is_active
        ]
        return max(live, key=lambda c: c.controller.active_epoch) if live else None  # type: ignore[union-attr]

    def controller(self) -> int | None:
        act = self.active_controller()
        return None if act is None else act.node_id

    def controller_epoch(self) -> int:
        act = self.active_controller()
        return -1 if act is None else act.controller.active_epoch  # type: ignore[union-attr]

    def image(self) -> MetadataImage:
        """The committed metadata, as the active controller (or any controller, between two) has it."""
        act = self.active_controller()
        if act is not None:
            return act.controller.committed  # type: ignore[union-attr]
        live = [c.controller.committed for c in self.controllers.values() if c.controller is not None]
        return max(live, key=lambda i: i.offset) if live else MetadataImage()

    def describe_quorum(self) -> Any:
        """DescribeQuorum as the quorum's leader answers it (leader, epoch, high watermark, each voter's
        and observer's log end offset and fetch times), what ``kafka-metadata-quorum describe`` prints."""
        for c in self.controllers.values():
            if c.client is not None and self.net.is_up(c.node_id) and c.client.quorum.is_leader():
                return c.client.describe_quorum().partitions[0]
        return None

    # ----------------------------------------------------------------------------------- faults
    def crash(self, node: int, lose_unflushed: bool = False) -> None:  # type: ignore[override]
        """Crash broker or controller ``node``; a combined node loses both roles. ``lose_unflushed`` is for
        a broker's partition logs: a controller's metadata log always loses what was never fsynced, which
        is nothing it acknowledged (the Raft client fsyncs before it answers)."""
        if node in self.brokers:
            super().crash(node, lose_unflushed)
        elif node in self.controllers:
            self.net.crash(node)
        else:
            raise KeyError(f"no broker or controller {node}: {self._node_ids()}")

    def shutdown(self, node: int, *, controlled: bool = True, timeout_ms: int = 60_000) -> None:  # type: ignore[override]
        """Stop broker or controller ``node`` cleanly. A broker (a combined node too) as ``Cluster.shutdown``
        does; a controller resigns its Raft leadership if it has it (EndQuorumEpoch, so the other voters
        elect at once) and closes its log. ``restart`` brings it back."""
        if node in self.brokers:
            super().shutdown(node, controlled=controlled, timeout_ms=timeout_ms)
            return
        if node not in self.controllers:
            raise KeyError(f"no broker or controller {node}: {self._node_ids()}")
        client = self.controllers[node].client
        if client is not None and self.net.is_up(node):
            client.resign(self.net.now_ms())
            client.close()
        self.net.crash(node)

    def restart(self, node: int) -> None:  # type: ignore[override]
        """Start crashed broker or controller ``node`` again over its own directories."""
        if node not in self.brokers and node not in self.controllers:
            raise KeyError(f"no broker or controller {node}: {self._node_ids()}")
        self.net.restart(node)

    def _node_ids(self) -> str:
        return f"brokers {sorted(self.brokers)}, controllers {sorted(self.controllers)}"

    def _all_brokers_unfenced(self) -> bool:
        img = self.image() if self.active_controller() else None
        if img is None or img.unfenced_brokers() != sorted(self.brokers):
            return False
        return all(b.registered for b in self.brokers.values())

    @property
    def store(self):  # noqa: ANN201 - there is no ZooKeeper in KRaft mode
        raise AttributeError("a KRaft cluster has no ZooKeeper store: read image() instead")

    # ---------------------------------------------------------------------------------- admin
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        replica_assignment: Mapping[int, Any] | None = None,
        timeout_ms: int = 30_000,
    ) -> dict[int, tuple[int, ...]]:
        """CreateTopics at the active controller, then wait until every partition's leader leads it."""
        merged = {**self.topic_defaults, **(config or {})}
        configs = tuple((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in merged.items())
        if replica_assignment is None:
            topic = CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor, configs=configs
            )
        else:
            topic = CreatableTopic(
                name=name,
                assignments=tuple(
                    ReplicaAssignment(partition=p, broker_ids=tuple(ids))
                    for p, ids in replica_assignment.items()
                ),
                configs=configs,
            )
        result = self.controller_request(CreateTopicsRequest(topics=(topic,)), timeout_ms).topics[0]
        if result.error_code:
            raise (error_for_code(result.error_code) or KafkaError)(result.error_message or "")
        if not self.run_until(
            lambda: all(self._partition_ready(name, p) for p in range(partitions)), timeout_ms
        ):
            raise RequestTimedOutError(
                f"topic {name} has no leader for every partition after {timeout_ms} ms"
            )
        return self._assignment(name, partitions)

    def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> None:
        """DeleteTopics at the active controller (a RemoveTopicRecord); waits until no live broker holds
        a replica of it any more."""
        result = self.controller_request(DeleteTopicsRequest(topic_names=(name,)), timeout_ms).topics[0]
        if result.error_code:
            raise (error_for_code(result.error_code) or KafkaError)(
                result.error_message or f"DeleteTopics {name!r}"
            )

        def gone() -> bool:
            return all(
                b.rm is None or not any(p.tp.topic == name for p in b.rm.partitions())
                for b in self.brokers.values()
            )

        if not self.run_until(gone, timeout_ms):
            raise RequestTimedOutError(f"topic {name} still has replicas after {timeout_ms} ms")

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, Any] | None = None,  # noqa: A002 - Kafka's operation name
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs at the active controller (ConfigRecords); then run until every live
        broker has replayed them."""
        ops = [
            AlterableConfig(name=k, value=str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (set or {}).items()
        ]
        ops += [AlterableConfig(name=k, value=None, op=AlterConfigOp.DELETE) for k in delete]
        res = AlterConfigsResource(
            resource_type=ConfigResourceType.TOPIC, resource_name=topic, configs=tuple(ops)
        )
        req = IncrementalAlterConfigsRequest(resources=(res,), validate_only=validate_only)
        result = self.controller_request(req).results[0]
        if result.error_code:
            raise (error_for_code(result.error_code) or KafkaError)(result.error_message or "")
        self.run_until(
            lambda: all(i.offset >= self.image().offset for i in self.broker_images().values()), 5000
        )

    def controller_request(self, req: Any, timeout_ms: int = 30_000) -> Any:
        """Send ``req`` to the active controller, again elsewhere on NOT_CONTROLLER or no answer."""
        deadline = self.net.now_ms() + timeout_ms
        while True:
            left = deadline - self.net.now_ms()
            if left <= 0 or not self.run_until(lambda: self.controller() is not None, left):
                raise RequestTimedOutError(f"no active controller answered {type(req).__name__}")
            try:
                resp = self.request(self.controller(), req, min(5000, max(1, deadline - self.net.now_ms())))
            except RequestTimedOutError:
                continue
            if getattr(resp, "error_code", 0) != NotControllerError.code:
                return resp

    # -------------------------------------------------------------------------------- readers
    def partition_state(self, topic: str, partition: int) -> PartitionRegistration | None:  # type: ignore[override]
        """The partition as the committed metadata says (leader, leader epoch, ISR, partition epoch)."""
        return self.image().partition(topic, partition)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        st = self.partition_state(topic, partition)
        return () if st is None else st.replicas

    def _assignment(self, topic: str, count: int) -> dict[int, tuple[int, ...]]:
        return {p: self.replicas(topic, p) for p in range(count)}

    def _topic_partitions_of(self, topic: str) -> list[tuple[str, int]]:
        t = self.image().topic(topic)
        return [] if t is None else [(topic, p) for p in sorted(t.partitions)]

    def read_all(self, topic: str) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for _, p in self._topic_partitions_of(topic):
            leader = self.leader(topic, p)
            part = None if leader is None else self.replica(leader, topic, p)
            out[p] = [] if part is None else list(part.log.iter_records(None, part.high_watermark))
        return out

    def broker_images(self) -> dict[int, MetadataImage]:
        """Each live broker's replayed image."""
        return {
            b: node.loader.image
            for b, node in self.brokers.items()
            if self.net.is_up(b) and node.loader is not None
        }

    def close(self) -> None:
        for cid, c in self.controllers.items():
            # a combined node's Raft client closes with its broker, in Cluster.close
            if self.net.is_up(cid) and c.client is not None and cid not in self.brokers:
                c.client.close()
        super().close()


class ControllerRole:
    """The controller side of a combined node (``KafkaRaftServer``), read as a ``ControllerServer`` is:
    ``node_id``, ``client`` (the Raft client both roles share) and ``controller``; None while it is down."""

    def __init__(self, node: KafkaRaftServer) -> None:
        self.node = node

    @property
    def node_id(self) -> int:
        return self.node.broker_id

    @property
    def client(self) -> Any:
        return self.node.raft

    @property
    def controller(self) -> Any:
        return self.node.quorum_controller


__all__ = ["CONTROLLER_BASE", "ControllerRole", "KRaftCluster", "TopicPartition"]
