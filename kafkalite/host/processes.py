"""A kafkalite cluster as separate processes: one for the coordination store, one per broker.

``StoreProcess`` serves the ZooKeeper-like store on one port (RPC calls, and bridge links for pings and
watch events). ``BrokerProcess`` runs one ``KafkaBroker`` on its own wall-clock network: Kafka clients
reach it on its listener, other brokers over an inter-broker bridge port, and its store calls go to the
store process (``RemoteZkLink``). ``start_cluster`` / ``stop_cluster`` launch and stop a whole cluster of
such processes and keep their pids and ports in ``<dir>/cluster.json``.

SIGTERM stops a broker as Kafka's does: controlled shutdown first (its leaderships move away), then its
logs close. ``kill -9`` loses nothing acknowledged with ``acks=all``: the other replicas have it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.broker.server import KafkaBroker
from kafkalite.common.procfs import exited
from kafkalite.coordination.kazoo_link import KazooZkLink
from kafkalite.coordination.remote import RemoteZkLink, StoreRpcServer
from kafkalite.coordination.snapshot import keep_snapshot
from kafkalite.coordination.store import CoordinationStore
from kafkalite.coordination.zk_node import ZK_NODE_ID, ZkNode
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.server import (
    EVENT_LOG_LIMIT,
    WireServer,
    drive,
    halt_process,
    internal_topic_defaults,
    wall_ms,
)
from kafkalite.net.bridge import NetBridge
from kafkalite.net.sim import SimNetwork
from kafkalite.storage.log_dir_lock import lock_log_dirs

BROKER_TICK_MS = 100
ZK_TICK_MS = 100


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"an address looks like HOST:PORT, got {text!r}")
    return host, int(port)


def parse_peers(text: str) -> dict[int, tuple[str, int]]:
    """``"2=127.0.0.1:19093,3=127.0.0.1:19094"`` -> {2: (host, port), 3: (host, port)}."""
    out = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        bid, sep, addr = entry.partition("=")
        if not sep or not bid.isdigit():
            raise ValueError(f"--peers entries look like ID=HOST:PORT, got {entry!r}")
        out[int(bid)] = parse_address(addr)
    return out


class StoreProcess:
    """The coordination store of a multi-process cluster."""

    def __init__(self, host: str, port: int, data_dir: str | Path) -> None:
        self.host, self.port = host, port
        self.dir = Path(data_dir)
        self.address: tuple[str, int] | None = None
        self._running = False

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.net = SimNetwork(0, latency_ms=0, log_messages="none", start_ms=wall_ms())
        self.net.limit_log(EVENT_LOG_LIMIT)
        store = CoordinationStore(self.net.clock)
        keep_snapshot(store, self.dir)  # every acknowledged write is in store.snapshot first
        self.zk = self.net.add_node(ZK_NODE_ID, ZkNode(store), tick_ms=ZK_TICK_MS)
        self.wake_event = asyncio.Event()
        self.bridge = NetBridge(self.net, [ZK_NODE_ID], {}, wake=self.wake_event.set)
        self.rpc = StoreRpcServer(self.zk, bridge=self.bridge)
        self.address = await self.rpc.listen(self.host, self.port)
        self._running = True
        self._pump = asyncio.create_task(drive(self.net, self.wake_event, lambda: self._running))

    async def stop(self) -> None:
        self._running = False
        self.wake_event.set()
        await self._pump
        await self.rpc.close()
        await self.bridge.close()


class BrokerProcess(WireServer):
    """One broker as its own process: Kafka listener, inter-broker bridge, and either kafkalite's store
    (``store``: its RPC address) or a real ZooKeeper ensemble (``zookeeper``: Kafka's connect string)."""

    def __init__(
        self,
        broker_id: int,
        *,
        host: str,
        port: int,
        log_dir: str | Path | Sequence[str | Path],
        store: tuple[str, int] | None = None,
        zookeeper: str | None = None,
        bridge_port: int,
        peers: Mapping[int, tuple[str, int]],
        config: Mapping[str, Any] | None = None,
    ) -> None:
        # Kafka's log.dirs: one directory, or several (JBOD), each partition replica in one of them
        dirs = [log_dir] if isinstance(log_dir, str | Path) else list(log_dir)
        if not dirs:
            raise ValueError("a broker needs at least one log dir")
        self.log_dirs = [Path(d) for d in dirs]
        super().__init__(1, host=host, ports={broker_id: port}, log_dir=self.log_dirs[0], config=config)
        self.broker_id = broker_id
        if (store is None) == (zookeeper is None):
            raise ValueError("a broker needs either kafkalite's store or a ZooKeeper connect string")
        self.store_address = store
        self.zookeeper = zookeeper
        self.bridge_port = bridge_port
        self.peers = dict(peers)
        self.node: Any = None
        self.controlled_shutdown_timeout_s: float | None = None
        """How long ``stop`` waits for the controller to approve a controlled shutdown (None: no limit)."""

    async def start(self) -> None:
        # before any port opens: a broker refused its log dir must not be reachable for a moment
        locks = lock_log_dirs(self._locked_dirs())
        try:
            sock = await self._listen(self.broker_id, self.ports[self.broker_id])
        except BaseException:
            for lock in locks:
                lock.release()
            raise
        self.addresses = {self.broker_id: sock}
        self.net = SimNetwork(self.broker_id, latency_ms=0, log_messages="none", start_ms=wall_ms())
        self.net.drop_to_unknown = True  # answers to client connections that have closed
        self.net.limit_log(EVENT_LOG_LIMIT)  # a broker process runs for weeks: only recent events
        self._wake_event = asyncio.Event()
        self.bridge = NetBridge(self.net, [self.broker_id], self._remotes(), wake=self.wake)
        await self.bridge.listen(self.host, self.bridge_port)
        node = self._make_node(sock)
        node.halt_hook = halt_process  # its last log dir failed: the process exits, as Kafka's does
        node.lock_log_dirs(held=locks)
        self.instrument(node)
        self.node = self.net.add_node(self.broker_id, node, tick_ms=BROKER_TICK_MS)
        await self.start_metrics()
        await self.bridge.connect_all()
        self._running = True
        self._pump_task = asyncio.create_task(self._pump())

    def _locked_dirs(self) -> list[Path]:
        """The log dirs this process locks before it opens a port."""
        return list(self.log_dirs)

    def _remotes(self) -> dict[Any, tuple[str, int]]:
        """The bridge's peers: the other brokers and, with kafkalite's store, the store."""
        return dict(self.peers) if self.zookeeper else {ZK_NODE_ID: self.store_address, **self.peers}

    def _make_node(self, sock: tuple[str, int]) -> Any:
        """The broker node this process hosts, listening at ``sock``."""
        return KafkaBroker(
            self.broker_id,
            list(self.log_dirs),
            self.config,
            host=sock[0],
            port=sock[1],
            zk_link_factory=partial(KazooZkLink, hosts=self.zookeeper, wake=self.wake)
            if self.zookeeper
            else partial(RemoteZkLink, address=self.store_address),
            endpoints=self.registered_endpoints(self.broker_id),
            lock_log_dirs=True,
        )

    def broker_node(self, broker_id: int) -> Any:
        return self.node

    def _port(self, listener: Any, broker_id: int, port: int) -> int:
        return port if listener is self.listeners[0] else listener.port  # one broker: the ports as given

    async def stop(self, *, controlled: bool = True) -> None:  # type: ignore[override]
        if self.node is not None and self.node.rm is not None:
            if controlled:
                done = asyncio.Event()
                self.node.controlled_shutdown(done.set)
                self.wake()
                try:
                    await asyncio.wait_for(done.wait(), self.controlled_shutdown_timeout_s)
                except TimeoutError:  # as Kafka's: no controller approved in time; shut down anyway
                    self.node.log("controlled_shutdown_timed_out", broker=self.broker_id)
                    self.node.shutdown()
            else:
                self.node.shutdown()
        self._running = False
        self.wake()
        if self._pump_task is not None:
            await self._pump_task
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        for group in self._servers.values():
            for srv in group:
                srv.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.bridge.close()


async def run_until_signalled(server: Any) -> None:
    """Start ``server``, then stop it cleanly on SIGINT or SIGTERM (one that arrives while it is still
    starting, say right after it printed its address, stops it as soon as it has started)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    await stop.wait()
    await server.stop()


# ---------------------------------------------------------------------------------- a cluster


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _log_dir_arg(home: Path, count: int) -> str:
    """``--log-dir`` of a broker process: its home, or ``count`` dirs in it (JBOD), comma-separated."""
    return str(home) if count <= 1 else ",".join(str(home / f"dir-{i}") for i in range(count))


def start_cluster(
    directory: str | Path,
    brokers: int = 3,
    *,
    host: str = "127.0.0.1",
    base_port: int = 0,
    config: Mapping[str, str] | None = None,
    zookeeper: str | None = None,
    timeout_s: float = 60.0,
    extra_listeners: Sequence[str] = (),
    log_dirs_per_broker: int = 1,
) -> dict[str, Any]:
    """Launch the store and ``brokers`` broker processes, wait until every broker has registered and a
    controller is elected, and write ``<directory>/cluster.json``. ``base_port`` 0: free ports.
    ``zookeeper`` (Kafka's ``zookeeper.connect``): use that ZooKeeper ensemble instead of starting the store.
    ``extra_listeners``: more listeners per broker besides PLAINTEXT (which the brokers use among
    themselves), named by their security protocol (``SASL_SSL``, ...) on free ports; ``config`` carries
    their TLS and SASL settings, and ``state["bootstrap"][name]`` their bootstrap servers.
    ``log_dirs_per_broker`` > 1: each broker's log.dirs are ``broker-N/dir-0``, ``broker-N/dir-1``, ...."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "cluster.json").exists() and _alive(json.loads((d / "cluster.json").read_text())):
        raise RuntimeError(f"a cluster from {d} is already running; stop it first")
    (d / "logs").mkdir(exist_ok=True)
    store_port = free_port(host)
    ports = {b: (base_port + b - 1 if base_port else free_port(host)) for b in range(1, brokers + 1)}
    bridges = {b: free_port(host) for b in range(1, brokers + 1)}
    # a whole-cluster stop ends with a broker that has no one to hand its leaderships to; with Kafka's
    # 5 s backoff its three retries would hold `cluster stop` for 20 s
    props = {**{k: str(v) for k, v in internal_topic_defaults(brokers).items()},
             "controlled.shutdown.retry.backoff.ms": "1000", **(config or {})}  # fmt: skip
    exe = [sys.executable, "-m", "kafkalite.cli"]
    state: dict[str, Any] = {"host": host, "brokers": {}}
    if zookeeper:
        state["zookeeper"] = zookeeper
        coordination = ["--zookeeper", zookeeper]
    else:
        store_cmd = [*exe, "zookeeper", "start", "--host", host, "--port", str(store_port),
                     "--dir", str(d / "store")]  # fmt: skip
        state["store"] = {"port": store_port, "pid": _spawn(store_cmd, d / "logs" / "store.log")}
        _wait_port(host, store_port, timeout_s)
        coordination = ["--store", f"{host}:{store_port}"]
    extra = {name: {b: free_port(host) for b in ports} for name in extra_listeners}
    for b in range(1, brokers + 1):
        peers = ",".join(f"{o}={host}:{bridges[o]}" for o in range(1, brokers + 1) if o != b)
        listeners = ",".join(
            [f"PLAINTEXT://{host}:{ports[b]}", *(f"{n}://{host}:{p[b]}" for n, p in extra.items())]
        )
        cmd = [*exe, "server", "start", "--broker-id", str(b), *coordination,
               "--listeners", listeners, "--log-dir", _log_dir_arg(d / f"broker-{b}", log_dirs_per_broker),
               "--inter-broker-port", str(bridges[b])]  # fmt: skip
        if peers:
            cmd += ["--peers", peers]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        pid = _spawn(cmd, d / "logs" / f"broker-{b}.log")
        state["brokers"][str(b)] = {"pid": pid, "port": ports[b], "bridge_port": bridges[b], "cmd": cmd}
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    bootstrap = ",".join(f"{host}:{ports[b]}" for b in ports)
    _wait_ready(bootstrap, brokers, timeout_s)
    state["bootstrap_servers"] = bootstrap
    state["bootstrap"] = {
        "PLAINTEXT": bootstrap,
        **{n: ",".join(f"{host}:{p[b]}" for b in sorted(p)) for n, p in extra.items()},
    }
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    return state


def stop_cluster(directory: str | Path, *, timeout_s: float = 60.0) -> list[int]:
    """SIGTERM every broker (controlled shutdown), then the store or (KRaft) the controllers; returns the
    pids stopped. KRaft combined nodes stop after the broker-only ones, as controllers do."""
    state = _state(directory)
    stopped = []
    # KRaft combined nodes (a "roles" entry) after the broker-only ones: they are the quorum, which the
    # broker-only nodes need for their controlled shutdown
    order = sorted(state["brokers"].items(), key=lambda kv: ("roles" in kv[1], int(kv[0])))
    pids = [b["pid"] for _, b in order]
    for pid in pids:
        if _signal(pid, signal.SIGTERM):
            stopped.append(pid)
        _wait_gone(pid, timeout_s)  # one at a time: each hands its leaderships to the others
    for _, c in sorted(state.get("controllers", {}).items()):  # KRaft: the quorum goes last
        if _signal(c["pid"], signal.SIGTERM):
            stopped.append(c["pid"])
    for _, c in sorted(state.get("controllers", {}).items()):
        _wait_gone(c["pid"], timeout_s)
    if "store" in state:  # not with an outside ZooKeeper, which is not ours to stop
        if _signal(state["store"]["pid"], signal.SIGTERM):
            stopped.append(state["store"]["pid"])
        _wait_gone(state["store"]["pid"], timeout_s)
    return stopped


def signal_broker(directory: str | Path, broker_id: int, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to one broker of a running cluster and wait until its process is gone."""
    pid = _state(directory)["brokers"][str(broker_id)]["pid"]
    _signal(pid, sig)
    _wait_gone(pid, 60.0)


def restart_broker(directory: str | Path, broker_id: int, *, timeout_s: float = 60.0) -> int:
    """Start a stopped (or killed) broker again on its old ports and log directory, and wait until every
    broker lists it; returns its pid. It recovers its logs, and the controller brings it back into the ISRs."""
    d = Path(directory)
    state = _state(d)
    entry = state["brokers"][str(broker_id)]
    if not _reap(entry["pid"]):
        raise RuntimeError(f"broker {broker_id} is still running (pid {entry['pid']})")
    entry["pid"] = _spawn(entry["cmd"], d / "logs" / f"broker-{broker_id}.log")
    (d / "cluster.json").write_text(json.dumps(state, indent=2))
    _wait_port(state["host"], entry["port"], timeout_s)
    # back when every broker counts it live again (a topic created sooner could not place a replica on it)
    live = [b for b in state["brokers"].values() if not _reap(b["pid"])]
    _wait_ready(",".join(f"{state['host']}:{b['port']}" for b in live), len(live), timeout_s)
    return entry["pid"]


def _state(directory: str | Path) -> dict[str, Any]:
    return json.loads((Path(directory) / "cluster.json").read_text())


def _spawn(cmd: list[str], log_path: Path) -> int:
    out = open(log_path, "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    return proc.pid


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _reap(pid: int) -> bool:
    """True when ``pid`` is gone (reaping it if it is our child)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return exited(pid)  # a zombie: gone, though init has not reaped it yet


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _reap(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _reap(pid)
            return
        time.sleep(0.05)


def _alive(state: dict) -> bool:
    pids = [b["pid"] for b in state["brokers"].values()]
    pids += [c["pid"] for c in state.get("controllers", {}).values()]
    if "store" in state:
        pids.append(state["store"]["pid"])
    return any(not _reap(p) for p in pids)


def _wait_port(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s} s") from None
            time.sleep(0.05)


def _wait_ready(bootstrap: str, brokers: int, timeout_s: float) -> None:
    """Wait until every broker, asked on its own, knows all ``brokers`` and the controller: a client that
    bootstraps from any of them then finds the controller at once."""
    deadline = time.monotonic() + timeout_s
    last: Exception | str | None = None
    pending = bootstrap.split(",")
    while time.monotonic() < deadline:
        try:
            with AdminClient(pending[0], timeout_s=5) as admin:
                if len(admin.brokers) == brokers and admin.controller_id >= 0:
                    pending.pop(0)
                    if not pending:
                        return
                    continue
                last = f"{pending[0]} knows {len(admin.brokers)} brokers, controller {admin.controller_id}"
        except Exception as e:  # noqa: BLE001 - still starting
            last = e
        time.sleep(0.1)
    raise TimeoutError(f"the cluster was not ready after {timeout_s} s (last: {last})")


__all__ = [
    "BrokerProcess", "StoreProcess", "parse_address", "parse_peers", "restart_broker", "run_until_signalled",
    "signal_broker", "start_cluster", "stop_cluster",
]  # fmt: skip
