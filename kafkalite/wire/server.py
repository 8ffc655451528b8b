"""kafkalite's brokers on real TCP sockets, speaking Kafka's protocol to real clients.

One asyncio event loop (no thread per connection) runs the listeners and drives the same sans-I/O nodes
the book runs in the simulator: the cluster's ``SimNetwork`` is advanced to the wall clock (its virtual
clock starts at the epoch milliseconds of start-up and is kept level with real time by ``_pump``), so
brokers, controller, coordinators and the ZooKeeper-like store behave exactly as in every chapter, only
in real time. Each TCP connection is a node of that network: a decoded request goes to its broker as a
``RequestEnvelope`` and the broker's ``ResponseEnvelope`` comes back to the connection, which encodes it.

Per connection, responses go out in request order (Kafka clients rely on it) though the broker may
finish them out of order (an acks=all produce waits for the followers, a metadata request does not);
a produce with acks=0 gets no response at all, as in Kafka. A frame larger than
``socket.request.max.bytes``, or one that does not decode, closes that connection and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kafkalite.net.sim import BaseNode
from kafkalite.protocol import RequestEnvelope, ResponseEnvelope
from kafkalite.wire.adapter import api_versions_body, to_body, to_request
from kafkalite.wire.header import API_VERSIONS_KEY, UnsupportedVersion, decode_request, encode_response
from kafkalite.wire.types import WireFormatError

log = logging.getLogger("kafkalite.wire")

SOCKET_REQUEST_MAX_BYTES = 104_857_600  # Kafka's socket.request.max.bytes default
UNSUPPORTED_VERSION = 35
PRODUCE_KEY = 0
_SIZE = struct.Struct(">i")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def drive(net: Any, wake: asyncio.Event, running: Callable[[], bool]) -> None:
    """Keep ``net``'s virtual clock level with the wall clock, running what falls due, until ``running()``
    turns false; ``wake`` cuts a wait short when something arrived from outside (a request, a frame)."""
    while running():
        now = wall_ms()
        if now > net.now_ms():
            net.run_for(now - net.now_ms())
        else:
            net.run_for(0)
        nxt = net.next_event_ms()
        delay = 0.05 if nxt is None else min(0.05, max(0.0, (nxt - wall_ms()) / 1000))
        wake.clear()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=delay)
        else:
            await asyncio.sleep(0)


@dataclass
class ServerStats:
    connections_open: int = 0
    connections_total: int = 0
    requests: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    closed_bad_frames: int = 0
    by_api: dict[int, int] = field(default_factory=dict)


class ConnectionId(NamedTuple):
    """A client connection's node id: unique by number, shown as the client's address (Kafka's
    DescribeGroups reports a member's host as ``/127.0.0.1``)."""

    number: int
    host: str

    def __str__(self) -> str:
        return self.host


class ClientConnection(BaseNode):
    """One TCP connection to one broker, as a node of the cluster's network."""

    def __init__(self, server: WireServer, broker_id: int, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.broker_id = broker_id
        self.writer = writer
        self.pending: dict[int, tuple[int, int, int]] = {}  # correlation id -> (slot, api key, version)
        self.ready: dict[int, bytes | None] = {}  # slot -> encoded response (None: nothing to send)
        self.next_slot = 0
        self.next_write = 0
        self.closed = False

    def submit(self, frame: bytes) -> None:
        """Handle one request frame (without its size prefix)."""
        stats = self.server.stats
        try:
            header, body = decode_request(frame)
        except UnsupportedVersion as e:
            h = e.header
            if h.api_key == API_VERSIONS_KEY:
                # Kafka answers an ApiVersions it cannot read in v0, with the versions it can: the client
                # then retries with one of them.
                slot = self._slot()
                self._finish(
                    slot,
                    encode_response(
                        API_VERSIONS_KEY, 0, h.correlation_id, api_versions_body(UNSUPPORTED_VERSION)
                    ),
                )
                return
            log.info("closing connection: %s", e)
            stats.closed_bad_frames += 1
            self.close()
            return
        except WireFormatError as e:
            log.info("closing connection: malformed request (%s)", e)
            stats.closed_bad_frames += 1
            self.close()
            return
        stats.requests += 1
        stats.by_api[header.api_key] = stats.by_api.get(header.api_key, 0) + 1
        slot = self._slot()
        key, version, corr = header.api_key, header.api_version, header.correlation_id
        if key == API_VERSIONS_KEY:
            self._finish(slot, encode_response(key, version, corr, api_versions_body()))
            return
        request = to_request(key, version, body)
        if key == PRODUCE_KEY and request.acks == 0:
            self._finish(slot, None)  # acks=0: the client waits for nothing
        else:
            self.pending[corr] = (slot, key, version)
        self.server.net.send(
            self.node_id, self.broker_id, RequestEnvelope(corr, header.client_id or "", request)
        )
        self.server.wake()

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if not isinstance(msg, ResponseEnvelope):
            return
        entry = self.pending.pop(msg.correlation_id, None)
        if entry is None:
            return
        slot, key, version = entry
        self._finish(slot, encode_response(key, version, msg.correlation_id, to_body(msg.response)))

    def _slot(self) -> int:
        s = self.next_slot
        self.next_slot += 1
        return s

    def _finish(self, slot: int, data: bytes | None) -> None:
        self.ready[slot] = data
        while self.next_write in self.ready:
            out = self.ready.pop(self.next_write)
            self.next_write += 1
            if out is not None and not self.closed:
                self.writer.write(out)
                self.server.stats.bytes_out += len(out)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()


class WireServer:
    """TCP listeners for every broker of a ``Cluster`` driven in real time (see the module docstring).

    ``ports`` maps broker id to port (0: any free port; ``addresses`` tells which one was taken).
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        host: str = "127.0.0.1",
        ports: Mapping[int, int] | None = None,
        log_dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
    ) -> None:
        self.brokers = brokers
        self.host = host
        self.ports = dict(ports or {})
        self.log_dir = log_dir
        # Like the sample server.properties of a small Kafka install: internal topics get as many
        # replicas as there are brokers, up to Kafka's 3 (a 1-broker cluster could not create them).
        self.config = {"offsets.topic.replication.factor": min(3, brokers), **(config or {})}
        self.max_request_bytes = max_request_bytes
        self.cluster: Any = None
        self.net: Any = None
        self.stats = ServerStats()
        self.addresses: dict[int, tuple[str, int]] = {}
        self._servers: dict[int, asyncio.base_events.Server] = {}
        self._conns: dict[int, set[ClientConnection]] = {}
        self._wake_event: asyncio.Event | None = None
        self._pump_task: asyncio.Task | None = None
        self._conn_ids = itertools.count(1)
        self._running = False
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Bind the listeners, start the cluster on them and begin driving it."""
        from kafkalite.cluster import Cluster

        socks = {}
        for b in range(1, self.brokers + 1):
            socks[b] = await self._listen(b, self.ports.get(b, 0))
        self.addresses = socks
        self.cluster = Cluster(
            brokers=self.brokers,
            dir=self.log_dir,
            config=self.config,
            latency_ms=0,
            start_ms=wall_ms(),
            listeners=socks,
        )
        self.net = self.cluster.net
        self._wake_event = asyncio.Event()
        self._running = True
        self._pump_task = asyncio.create_task(self._pump())

    async def _listen(self, broker_id: int, port: int) -> tuple[str, int]:
        server = await asyncio.start_server(
            lambda r, w, b=broker_id: self._serve(b, r, w), self.host, port, reuse_address=True
        )
        self._servers[broker_id] = server
        return (self.host, server.sockets[0].getsockname()[1])

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.addresses.values())

    def crash_broker(self, broker_id: int) -> None:
        """Kill a broker as kill -9 would: its listener and connections vanish, its unflushed state too."""
        server = self._servers.pop(broker_id, None)
        if server is not None:
            server.close()
        for conn in list(self._conns.get(broker_id, ())):
            conn.close()
        self.cluster.crash(broker_id)

    async def stop_broker(self, broker_id: int, *, controlled: bool = True) -> None:
        """Stop one broker cleanly, as SIGTERM stops a Kafka broker: with ``controlled`` its leaderships
        move to other ISR members first, then its listener and connections close."""
        done = asyncio.Event()
        node = self.cluster.brokers[broker_id]
        if controlled:
            node.controlled_shutdown(done.set)
            self.wake()
            await done.wait()
        else:
            node.shutdown()
        self.net.crash(broker_id)
        server = self._servers.pop(broker_id, None)
        if server is not None:
            server.close()
        for conn in list(self._conns.get(broker_id, ())):
            conn.close()

    async def restart_broker(self, broker_id: int) -> None:
        """Bring a crashed broker back on its port: it recovers its logs and rejoins."""
        await self._listen(broker_id, self.addresses[broker_id][1])
        self.cluster.restart(broker_id)
        self.wake()

    def wake(self) -> None:
        if self._wake_event is not None:
            self._wake_event.set()

    async def _pump(self) -> None:
        await drive(self.net, self._wake_event, lambda: self._running)

    async def _serve(
        self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self.net is None:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        conn = ClientConnection(self, broker_id, writer)
        self._conns.setdefault(broker_id, set()).add(conn)
        peer = writer.get_extra_info("peername")
        node_id = ConnectionId(next(self._conn_ids), peer[0] if isinstance(peer, tuple) else "unknown")
        self.net.add_node(node_id, conn)
        self.stats.connections_open += 1
        self.stats.connections_total += 1
        try:
            while not conn.closed:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 0 or size > self.max_request_bytes:
                    log.warning(
                        "closing connection from %s: request of %d bytes exceeds socket.request.max.bytes=%d",
                        writer.get_extra_info("peername"), size, self.max_request_bytes,
                    )  # fmt: skip
                    self.stats.closed_bad_frames += 1
                    break
                frame = await reader.readexactly(size)
                self.stats.bytes_in += size + 4
                conn.submit(frame)
                if writer.transport.get_write_buffer_size() > 4 << 20:
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            conn.close()
            self._conns.get(broker_id, set()).discard(conn)
            self.stats.connections_open -= 1
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def stop(self) -> None:
        self._running = False
        self.wake()
        if self._pump_task is not None:
            await self._pump_task
        for s in self._servers.values():
            s.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for s in self._servers.values():
            await s.wait_closed()
        if self.cluster is not None:
            self.cluster.close()

    # ------------------------------------------------------------------------------- conveniences

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 1, **config: Any
    ) -> None:
        """Create a topic from inside the loop (between pumps); the cluster runs ahead of the wall clock
        only as long as the creation takes in virtual time."""
        self.cluster.create_topic(name, partitions, replication_factor, config=config or None)


class BackgroundServer:
    """A ``WireServer`` on its own event loop in a daemon thread: for tests, notebooks and benchmarks,
    where the caller's thread runs blocking Kafka clients. ``call`` runs a function on the loop."""

    def __init__(self, brokers: int = 1, **kwargs: Any) -> None:
        import threading

        self.server = WireServer(brokers, **kwargs)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafkalite-wire", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap_servers

    def call(self, fn: Any, *args: Any, timeout: float = 60, **kwargs: Any) -> Any:
        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 1, **config: Any
    ) -> None:
        self.call(self.server.create_topic, name, partitions, replication_factor, **config)

    def crash_broker(self, broker_id: int) -> None:
        self.call(self.server.crash_broker, broker_id)

    def stop_broker(self, broker_id: int, *, controlled: bool = True) -> None:
        asyncio.run_coroutine_threadsafe(
            self.server.stop_broker(broker_id, controlled=controlled), self.loop
        ).result(120)

    def restart_broker(self, broker_id: int) -> None:
        asyncio.run_coroutine_threadsafe(self.server.restart_broker(broker_id), self.loop).result(60)

    def close(self) -> None:
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
