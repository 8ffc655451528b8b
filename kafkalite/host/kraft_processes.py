"""A KRaft-mode kafkalite cluster as separate processes: one per controller, one per broker, or (combined
mode) one per node that is both.

Each node starts from a server.properties-style config with Kafka's keys: ``process.roles``, ``node.id``,
``controller.quorum.voters`` (``id@host:port``: where each controller's bridge listens, which carries the
Raft traffic and the brokers' registrations, heartbeats and AlterPartition), ``log.dirs``, and for a broker
``metadata.log.dir`` and ``listeners`` (its Kafka listener). As Kafka's, a node refuses to start on a
directory that ``kafkalite storage format`` has not formatted for its cluster and node id.

``ControllerProcess`` hosts a ``ControllerServer`` (a Raft voter running the ``QuorumController``);
``KRaftBrokerProcess`` hosts a ``BrokerServer`` (a Raft observer replaying ``__cluster_metadata``) behind
its Kafka listener, with its replica traffic to the other brokers on its own bridge port.
``KRaftCombinedProcess`` hosts a ``KafkaRaftServer``, both roles on one node id (combined mode).
``start_kraft_cluster`` formats every node's directories with one new cluster id, as
``kafka-storage format`` would, writes each node's config, launches the processes and waits until every
broker is registered and unfenced; ``stop_cluster`` in ``processes`` stops brokers, then controllers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkalite.broker.broker_server import BrokerServer
from kafkalite.broker.kafka_raft_server import KafkaRaftServer
from kafkalite.config.base import parse_int
from kafkalite.config.broker import BrokerConfig
from kafkalite.config.kraft import KRaftConfig
from kafkalite.host.metadata_quorum import NOT_LEADER_OR_FOLLOWER, ControllerListener
from kafkalite.host.processes import (
    BrokerProcess,
    _alive,
    _reap,
    _signal,
    _spawn,
    _state,
    _wait_gone,
    _wait_port,
    _wait_ready,
    free_port,
    parse_address,
    restart_broker,
)
from kafkalite.host.prometheus import LoopIdle, MetricsEndpoint
from kafkalite.host.server import EVENT_LOG_LIMIT, drive, internal_topic_defaults, wall_ms
from kafkalite.metadata.bootstrap import parse_add_scram, write_bootstrap
from kafkalite.metadata.controller import ControllerSettings
from kafkalite.metadata.controller.controller_server import ControllerServer
from kafkalite.metadata.placement import assign_replicas
from kafkalite.net.bridge import NetBridge
from kafkalite.net.sim import SimNetwork
from kafkalite.protocol.raft import DescribeQuorumResponse
from kafkalite.raft import QuorumConfig
from kafkalite.raft.metadata_log import MetadataLogConfig
from kafkalite.security.listeners import parse_listeners
from kafkalite.storage import meta_properties

KRAFT_KEYS = frozenset(
    {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names", "metadata.log.dir"}
)
"""Keys a KRaft node reads itself; the rest of its config is the broker's."""


def _kraft_config(props: Mapping[str, Any]) -> KRaftConfig:
    keys = KRaftConfig.config_keys()
    return KRaftConfig.from_props({k: v for k, v in props.items() if k in keys})


def _node_cluster_id(dirs: list[Path], node_id: int) -> str:
    """The cluster id the node's formatted directories name (Kafka reads it from meta.properties)."""
    cid = meta_properties.verify_dirs(dirs, node_id, require_formatted=True)
    if cid is None:
        raise meta_properties.MetaPropertiesError(f"the directories {dirs} name no cluster id")
    return cid


def _log_dirs(props: Mapping[str, Any]) -> list[Path]:
    raw = str(props.get("log.dirs", props.get("log.dir", "")))
    dirs = [Path(d.strip()) for d in raw.split(",") if d.strip()]
    if not dirs:
        raise ValueError("a KRaft node needs log.dirs")
    return dirs


def _controller_settings(props: Mapping[str, Any], cluster_id: str) -> ControllerSettings:
    """The quorum controller's settings from a node's config: the session timeout and the broker keys the
    controller applies when it creates topics."""
    bcfg = BrokerConfig.coerce({k: v for k, v in props.items() if _broker_key(k)})
    return ControllerSettings.from_broker_config(
        cluster_id, bcfg, broker_session_timeout_ms=int(props.get("broker.session.timeout.ms", 9000))
    )


class ControllerProcess:
    """One KRaft controller as its own process, reached by the others and the brokers on its voter address."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.kraft = _kraft_config(props)
        if self.kraft.process_roles != ("controller",):
            raise ValueError(
                f"process.roles must be controller here, got {','.join(self.kraft.process_roles)}"
            )
        self.node_id = self.kraft.node_id
        self.voters: dict[int, tuple[str, int]] = self.kraft.controller_quorum_voters
        self.quorum = QuorumConfig.from_props(props)
        # Kafka's controller keeps __cluster_metadata in metadata.log.dir, else the first of log.dirs
        self.log_dir = Path(str(props.get("metadata.log.dir") or _log_dirs(props)[0]))
        self.props = dict(props)
        self.loop_idle = LoopIdle()
        self._running = False

    async def start(self) -> None:
        cluster_id = _node_cluster_id([self.log_dir], self.node_id)  # before any port opens
        settings = _controller_settings(self.props, cluster_id)
        self.net = SimNetwork(self.node_id, latency_ms=0, log_messages="none", start_ms=wall_ms())
        self.net.drop_to_unknown = True
        self.net.limit_log(EVENT_LOG_LIMIT)
        self.wake_event = asyncio.Event()
        others = {v: a for v, a in self.voters.items() if v != self.node_id}
        self.bridge = NetBridge(self.net, [self.node_id], others, wake=self.wake_event.set)
        host, port = self.voters[self.node_id]
        await self.bridge.listen(host, port)
        self.node = self.net.add_node(
            self.node_id,
            ControllerServer(
                self.quorum,
                self.log_dir,
                settings,
                assign_replicas,
                log_config=MetadataLogConfig.from_props(self.props),
            ),
        )
        await self.bridge.connect_all()
        self.listener: ControllerListener | None = None
        if self.props.get(
            "listeners"
        ):  # the Kafka-protocol side: DescribeQuorum for kafkalite metadata-quorum
            first = parse_listeners(
                str(self.props["listeners"]), self.props.get("listener.security.protocol.map")
            )[0]
            self.listener = ControllerListener(self._describe, lambda: (cluster_id, self._leader()))
            await self.listener.listen(first.host, first.port)
        self.metrics_endpoint: MetricsEndpoint | None = None
        port = self.props.get("metrics.port")
        if port not in (None, ""):
            # as a broker's: node N serves on metrics.port + N - 1 (0: a free port)
            port = parse_int("metrics.port", port, low=0)
            self.metrics_endpoint = MetricsEndpoint(lambda: {self.node_id: self.node.metrics}, self.loop_idle)
            await self.metrics_endpoint.start(host, port + self.node_id - 1 if port else 0)
        self._running = True
        self._pump = asyncio.create_task(
            drive(self.net, self.wake_event, lambda: self._running, self.loop_idle.sample)
        )

    def _leader(self) -> int:
        return -1 if self.node.client is None else self.node.client.leader_and_epoch()[0]

    def _describe(self) -> DescribeQuorumResponse:
        if self.node.client is None:
            return DescribeQuorumResponse(error_code=NOT_LEADER_OR_FOLLOWER)
        return self.node.client.describe_quorum()

    async def stop(self) -> None:
        if self.listener is not None:
            await self.listener.close()
        if self.node.client is not None:
            self.node.client.close()
        self._running = False
        self.wake_event.set()
        await self._pump
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        await self.bridge.close()


class KRaftBrokerProcess(BrokerProcess):
    """One KRaft broker as its own process: Kafka listener, replica bridge, metadata from the quorum."""

    ROLES: tuple[str, ...] = ("broker",)
    """``process.roles`` this process runs (sorted)."""

    def __init__(
        self,
        props: Mapping[str, Any],
        *,
        host: str,
        port: int,
        bridge_port: int,
        peers: Mapping[int, tuple[str, int]],
    ) -> None:
        kraft = _kraft_config(props)
        if sorted(kraft.process_roles) != list(self.ROLES):
            want = ",".join(self.ROLES)
            raise ValueError(f"process.roles must be {want} here, got {','.join(kraft.process_roles)}")
        dirs = _log_dirs(props)
        broker_props = {k: v for k, v in props.items() if _broker_key(k)}
        # store: a placeholder the ZooKeeper-mode constructor asks for; start() below never dials it
        super().__init__(
            kraft.node_id, host=host, port=port, log_dir=dirs[0], store=("unused", 0), bridge_port=bridge_port,
            peers={**peers, **kraft.controller_quorum_voters}, config=broker_props,
        )  # fmt: skip
        self.quorum = QuorumConfig.from_props(props)
        self.metadata_log_dir = Path(str(props.get("metadata.log.dir") or dirs[0]))
        self.log_dirs = dirs
        self.kraft = kraft

    async def start(self) -> None:
        # the dirs' cluster id first: an unformatted dir is refused before anything is locked or opened
        self.cluster_id = _node_cluster_id([*self.log_dirs, self.metadata_log_dir], self.broker_id)
        await super().start()

    def _locked_dirs(self) -> list[Path]:
        return list(self.log_dirs)

    def _remotes(self) -> dict[Any, tuple[str, int]]:
        # the other brokers and the controllers' voter addresses (a combined node is one of those)
        return {n: a for n, a in self.peers.items() if n != self.broker_id}

    def _make_node(self, sock: tuple[str, int]) -> Any:
        broker_id, dirs, config, kwargs = self._node_args(sock)
        return BrokerServer(broker_id, dirs, config, **kwargs)

    def _node_args(self, sock: tuple[str, int]) -> tuple[int, Any, Any, dict]:
        """The broker side's arguments: what a broker-only node and a combined one share."""
        dirs = self.log_dirs if len(self.log_dirs) > 1 else self.log_dirs[0]
        return (
            self.broker_id,
            dirs,
            self.config,
            dict(
                quorum=self.quorum,
                cluster_id=self.cluster_id,
                metadata_log_dir=self.metadata_log_dir,
                heartbeat_interval_ms=self.kraft.broker_heartbeat_interval_ms,
                host=sock[0],
                port=sock[1],
                endpoints=self.registered_endpoints(self.broker_id),
                lock_log_dirs=True,
                log_config=MetadataLogConfig.from_props(self.config),
            ),
        )


class KRaftCombinedProcess(KRaftBrokerProcess):
    """One combined KRaft node as its own process, ``process.roles=broker,controller`` (Kafka's combined
    mode): a ``KafkaRaftServer``, a voter running the quorum controller and a broker replaying the same
    ``__cluster_metadata`` log, under one ``node.id``.

    Its ``listeners`` hold the broker's listeners and its controller listener, the one
    ``controller.listener.names`` names; as Kafka's, the broker registers and advertises only the others,
    so clients never reach the controller listener, which serves DescribeQuorum
    (``kafkalite metadata-quorum``). Its bridge listens on its ``controller.quorum.voters`` address and
    carries both the Raft traffic and the replica fetches of the other brokers.
    """

    ROLES = ("broker", "controller")

    def __init__(self, props: Mapping[str, Any], *, peers: Mapping[int, tuple[str, int]]) -> None:
        kraft = _kraft_config(props)
        if "listeners" not in props:
            raise ValueError("a combined node needs listeners: the broker's and its controller listener")
        listeners = parse_listeners(str(props["listeners"]), props.get("listener.security.protocol.map"))
        names = set(kraft.controller_listener_names)
        controller = [x for x in listeners if x.name in names]
        broker = [x for x in listeners if x.name not in names]
        missing = sorted(names - {x.name for x in controller})
        if missing:
            raise ValueError(
                f"controller.listener.names {','.join(missing)} must be in listeners when process.roles "
                "has controller"
            )
        if not broker:
            raise ValueError("listeners has no broker listener: every entry is a controller listener")
        advertised = str(props.get("advertised.listeners") or "")
        if any(f"{n}://" in advertised.upper() for n in names):
            raise ValueError(
                "advertised.listeners must not hold a controller listener when process.roles has broker: "
                "clients send their requests to brokers, never to controllers"
            )
        self.controller_listener_address = (controller[0].host, controller[0].port)
        broker_props = dict(props)
        broker_props["listeners"] = ",".join(f"{x.name}://{x.host}:{x.port}" for x in broker)
        host, voter_port = kraft.controller_quorum_voters[kraft.node_id]
        super().__init__(
            broker_props, host=broker[0].host, port=broker[0].port, bridge_port=voter_port, peers=peers
        )
        self.props = dict(props)
        self.controller_listener: ControllerListener | None = None
        # The last voters to stop have no quorum left to approve their controlled shutdown: past the
        # session timeout, after which the controller would fence the broker anyway, they shut down.
        self.controlled_shutdown_timeout_s = kraft.broker_session_timeout_ms / 1000

    async def start(self) -> None:
        await super().start()
        self.controller_listener = ControllerListener(self._describe, self._cluster)
        await self.controller_listener.listen(*self.controller_listener_address)

    def _make_node(self, sock: tuple[str, int]) -> Any:
        broker_id, dirs, config, kwargs = self._node_args(sock)
        return KafkaRaftServer(
            broker_id,
            dirs,
            config,
            settings=_controller_settings(self.props, self.cluster_id),
            placer=assign_replicas,
            **kwargs,
        )

    def _describe(self) -> DescribeQuorumResponse:
        raft = None if self.node is None else self.node.raft
        if raft is None:
            return DescribeQuorumResponse(error_code=NOT_LEADER_OR_FOLLOWER)
        return raft.describe_quorum()

    def _cluster(self) -> tuple[str, int]:
        raft = None if self.node is None else self.node.raft
        return self.cluster_id, -1 if raft is None else raft.leader_and_epoch()[0]

    async def stop(self, *, controlled: bool = True) -> None:  # type: ignore[override]
        if self.controller_listener is not None:
            await self.controller_listener.close()
        await super().stop(controlled=controlled)


def _broker_key(key: str) -> bool:
    return key not in KRAFT_KEYS and not key.startswith("controller.quorum.")


def write_properties(path: Path, props: Mapping[str, Any]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def start_kraft_cluster(
    directory: str | Path,
    brokers: int = 3,
    controllers: int = 3,
    *,
    host: str = "127.0.0.1",
    config: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
    extra_listeners: Sequence[str] = (),
    add_scram: Sequence[str] = (),
    combined: bool = False,
) -> dict[str, Any]:
    """Format, configure and launch ``controllers`` controller and ``brokers`` broker processes; wait until
    every broker is registered and unfenced; write ``<directory>/cluster.json``. Controllers get node ids
    ``3001..``, brokers ``1..``, as in ``KRaftCluster``.

    As ``start_cluster``: ``extra_listeners`` are more listeners per broker besides PLAINTEXT, named by
    their security protocol (``SASL_SSL``, ...) on free ports, with their TLS and SASL settings in ``config``
    (``authorizer.class.name`` and ``super.users`` too), and ``state["bootstrap"][name]`` their bootstrap
    servers. ``add_scram`` (``SCRAM-SHA-256=[name=admin,password=admin-secret]``, as ``kafka-storage format
    --add-scram``) goes into every controller's bootstrap file: the first active controller writes those
    users, so they can authenticate before anyone could have created them over the API.

    ``combined``: Kafka's combined mode. Brokers ``1..controllers`` are also the controllers, each one
    process with ``process.roles=broker,controller`` (``KRaftCombinedProcess``): node ids ``1..``, the
    voter address its bridge, a ``CONTROLLER`` listener (in ``controller.listener.names``, not advertised)
    for DescribeQuorum, and the bootstrap file in its ``metadata.log.dir``. Their ``cluster.json`` entries
    are under ``brokers``, with ``roles`` and ``listener``; ``controllers`` is empty."""
    from kafkalite.host.kraft_cluster import CONTROLLER_BASE

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "cluster.json").exists() and _alive(json.loads((d / "cluster.json").read_text())):
        raise RuntimeError(f"a cluster from {d} is already running; stop it first")
    (d / "logs").mkdir(exist_ok=True)
    (d / "config").mkdir(exist_ok=True)
    cluster_id = meta_properties.random_uuid()
    scram = [parse_add_scram(x) for x in add_scram]  # a bad argument fails before anything starts
    if combined and not 0 < controllers <= brokers:
        raise ValueError(f"combined mode runs the {controllers} controllers on brokers: 1..{brokers}")
    cids = [(0 if combined else CONTROLLER_BASE) + i for i in range(1, controllers + 1)]
    voter_ports = {c: free_port(host) for c in cids}
    voters = ",".join(f"{c}@{host}:{voter_ports[c]}" for c in cids)
    common = {"controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER"}
    # The metadata log's and its snapshots' settings (metadata.log.*, metadata.max.*) are every node's.
    common.update({k: str(v) for k, v in (config or {}).items() if k.startswith("metadata.")})
    ports = {b: free_port(host) for b in range(1, brokers + 1)}
    # a combined node's bridge is its voter address
    bridges = {b: voter_ports[b] if combined and b in voter_ports else free_port(host) for b in ports}
    exe = [sys.executable, "-m", "kafkalite.cli", "server", "start"]
    state: dict[str, Any] = {"host": host, "kraft": True, "cluster_id": cluster_id, "voters": voters,
                             "controllers": {}, "brokers": {}}  # fmt: skip
    for c in () if combined else cids:
        listener = f"{host}:{free_port(host)}"  # DescribeQuorum over Kafka's protocol
        props = {
            "process.roles": "controller",
            "node.id": c,
            **common,
            "listeners": f"CONTROLLER://{listener}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(d / f"controller-{c}"),
        }
        meta_properties.format_dirs([props["log.dirs"]], cluster_id, c)
        if scram:
            write_bootstrap(props["log.dirs"], scram)
        cfg = d / "config" / f"controller-{c}.properties"
        write_properties(cfg, props)
        cmd = [*exe, "--config-file", str(cfg)]
        pid = _spawn(cmd, d / "logs" / f"controller-{c}.log")
        state["controllers"][str(c)] = {"pid": pid, "cmd": cmd, "listener": listener}
    defaults = {k: str(v) for k, v in internal_topic_defaults(brokers).items()}
    extra = {name.upper(): {b: free_port(host) for b in ports} for name in extra_listeners}
    for b in range(1, brokers + 1):
        both = combined and b in voter_ports
        names = [f"PLAINTEXT://{host}:{ports[b]}", *(f"{n}://{host}:{p[b]}" for n, p in extra.items())]
        controller_listener = f"{host}:{free_port(host)}" if both else None
        if both:
            names.append(f"CONTROLLER://{controller_listener}")
        props = {
            "process.roles": "broker,controller" if both else "broker", "node.id": b, **common, **defaults,
            "listeners": ",".join(names), "log.dirs": str(d / f"broker-{b}"),
            "metadata.log.dir": str(d / f"broker-{b}-metadata"), **(config or {}),
        }  # fmt: skip
        if both:
            given = (config or {}).get("listener.security.protocol.map")
            props["listener.security.protocol.map"] = ",".join(filter(None, [given, "CONTROLLER:PLAINTEXT"]))
        meta_properties.format_dirs([*_log_dirs(props), props["metadata.log.dir"]], cluster_id, b)
        if both and scram:
            write_bootstrap(props["metadata.log.dir"], scram)
        cfg = d / "config" / f"broker-{b}.properties"
        write_properties(cfg, props)
        # the other brokers' bridges; a combined node reaches the other voters through controller.quorum.voters
        peers = ",".join(
            f"{o}={host}:{bridges[o]}" for o in ports if o != b and not (both and o in voter_ports)
        )
        cmd = [*exe, "--config-file", str(cfg)]
        if not both:
            cmd += ["--inter-broker-port", str(bridges[b])]
        if peers:
            cmd += ["--peers", peers]
        pid = _spawn(cmd, d / "logs" / f"broker-{b}.log")
        state["brokers"][str(b)] = {"pid": pid, "port": ports[b], "bridge_port": bridges[b], "cmd": cmd}
        if both:
            state["brokers"][str(b)].update(roles=props["process.roles"], listener=controller_listener)
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    bootstrap = ",".join(f"{host}:{ports[b]}" for b in ports)
    try:
        _wait_ready(bootstrap, brokers, timeout_s)
    except TimeoutError as e:
        raise TimeoutError(f"{e}{_dead_nodes(d, state)}") from None
    state["bootstrap_servers"] = bootstrap
    state["bootstrap"] = {
        "PLAINTEXT": bootstrap,
        **{n: ",".join(f"{host}:{p[b]}" for b in sorted(p)) for n, p in extra.items()},
    }
    state["bootstrap_controllers"] = ",".join(
        c["listener"] for c in [*state["controllers"].values(), *state["brokers"].values()] if "listener" in c
    )
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    return state


def _dead_nodes(d: Path, state: dict[str, Any]) -> str:
    """Which nodes exited during start-up, with the last line each logged (say, an unformatted dir)."""
    out = []
    for kind in ("controller", "broker"):
        for nid, entry in state[f"{kind}s"].items():
            if _reap(entry["pid"]):
                lines = (d / "logs" / f"{kind}-{nid}.log").read_text(errors="replace").strip().splitlines()
                out.append(f"{kind} {nid} exited: {lines[-1] if lines else 'no output'}")
    return "".join(f"; {x}" for x in out)


def _combined(state: dict[str, Any], node_id: int) -> bool:
    return "roles" in state["brokers"].get(str(node_id), {})


def signal_controller(directory: str | Path, node_id: int, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to one controller of a running KRaft cluster and wait until its process is gone (a
    combined node's process: both its roles)."""
    state = _state(directory)
    pid = state["brokers" if _combined(state, node_id) else "controllers"][str(node_id)]["pid"]
    _signal(pid, sig)
    _wait_gone(pid, 60.0)


def restart_controller(directory: str | Path, node_id: int, *, timeout_s: float = 60.0) -> int:
    """Start a stopped (or killed) controller again on its old ports and log dir; returns its pid. It
    replays its Raft log and rejoins the quorum as a voter. A combined node restarts as a broker does
    (``restart_broker``), its controller with it."""
    d = Path(directory)
    state = _state(d)
    if _combined(state, node_id):
        return restart_broker(d, node_id, timeout_s=timeout_s)
    entry = state["controllers"][str(node_id)]
    if not _reap(entry["pid"]):
        raise RuntimeError(f"controller {node_id} is still running (pid {entry['pid']})")
    entry["pid"] = _spawn(entry["cmd"], d / "logs" / f"controller-{node_id}.log")
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    host, port = parse_address(entry["listener"])
    _wait_port(host, port, timeout_s)
    return entry["pid"]


__all__ = [
    "ControllerProcess", "KRaftBrokerProcess", "KRaftCombinedProcess", "restart_controller", "signal_controller", "start_kraft_cluster",
]  # fmt: skip
