"""The simulator's network stretched over TCP, so kafkalite's nodes can run in separate processes.

Each process keeps its own ``SimNetwork``, driven by the wall clock, with its real nodes (a broker, or the
coordination store's ``ZkNode``) and a ``RemoteNode`` stand-in for every node that lives elsewhere. A
message sent to a stand-in travels over a TCP link to the process hosting that node and is put on that
process's network as coming from the sender's stand-in there. Nodes do not know the difference: the same
broker code runs in one simulated network or across processes.

Links are per pair of processes and carry frames in order (TCP), so a link keeps the simulator's FIFO
order. A frame for a peer whose address is known waits while its link is being dialled (as Kafka's
controller queues requests for a broker it is still connecting to: an UpdateMetadata sent once at start
must not be lost to a race with the dial), up to ``PENDING_MAX`` frames and ``PENDING_MS`` of age; past
that, and for a peer with no known address, a frame is dropped as a partitioned network drops it, and the
protocols above time out and retry. A connection starts with a hello naming the node ids its sender
hosts, so answers can flow back over a connection the other side opened.

Messages are kafkalite's own frozen dataclasses. They are pickled, and unpickled only from an allow list
of kafkalite modules and plain builtins: a peer can send data, never code to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import pickle
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.net.sim import BaseNode
from kafkalite.storage.file_slice import FileSlice

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">I")
MAX_FRAME = 256 << 20
RECONNECT_MS = 200
PENDING_MAX = 10_000
PENDING_MS = 30_000

_SAFE_BUILTINS = {
    "tuple", "list", "dict", "set", "frozenset", "bytes", "bytearray", "int", "float", "str", "bool",
    "complex", "slice", "range", "NoneType", "getattr",
}  # fmt: skip
_SAFE_MODULE_PREFIXES = ("kafkalite.protocol", "kafkalite.coordination", "kafkalite.host.server")
_SAFE_OTHER = {
    ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"),
    ("pathlib", "Path"),
    ("enum", "Enum"),
    # the enums protocol messages carry (FetchRequest/ListOffsetsRequest.isolation_level, ProduceRequest.acks)
    ("kafkalite.common.isolation_level", "IsolationLevel"),
    ("kafkalite.common.acks", "Acks"),
    # topic ids and KRaft's incarnation ids: a value type whose state is one int
    ("uuid", "UUID"),
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if module.startswith(_SAFE_MODULE_PREFIXES) or (module, name) in _SAFE_OTHER:
            return super().find_class(module, name)
        if module == "copyreg" and name == "_reconstructor":
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a peer")


def dumps(obj: Any) -> bytes:
    return pickle.dumps(_plain(obj), protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    return _Unpickler(io.BytesIO(data)).load()


def _plain(obj: Any) -> Any:
    """Record slices become bytes before they leave the process (a file offset means nothing elsewhere)."""
    if isinstance(obj, FileSlice | memoryview):
        return bytes(obj.read() if isinstance(obj, FileSlice) else obj)
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(_plain(x) for x in obj)
    fields = getattr(type(obj), "__dataclass_fields__", None)
    if fields:
        changed = {}
        for name in fields:
            value = getattr(obj, name)
            new = _plain(value)
            if new is not value:
                changed[name] = new
        if changed:
            return dataclasses.replace(obj, **changed)
    return obj


def frame(obj: Any) -> bytes:
    body = dumps(obj)
    return _SIZE.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes from a peer exceeds {MAX_FRAME}")
    return loads(await reader.readexactly(size))


class RemoteNode(BaseNode):
    """Stands in for node ``remote_id`` of another process: what it receives goes over the bridge."""

    def __init__(self, bridge: NetBridge, remote_id: Any) -> None:
        self.bridge = bridge
        self.remote_id = remote_id

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        self.bridge.forward(src, self.remote_id, msg)


class NetBridge:
    """Links this process's ``SimNetwork`` to its peers. ``peers`` maps a remote node id to the
    ``(host, port)`` of the process hosting it (ids not listed are reached only over connections the
    other side opens); ``local`` are the node ids hosted here."""

    def __init__(
        self,
        net: Any,
        local: Iterable[Any],
        peers: Mapping[Any, tuple[str, int]],
        *,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.net = net
        self.local = list(local)
        self.peers = dict(peers)
        self.wake = wake
        self._routes: dict[Any, asyncio.StreamWriter] = {}  # remote node id -> a live connection
        self._dialing: set[tuple[str, int]] = set()
        self._pending: dict[Any, deque[tuple[float, bytes]]] = {}  # waiting for a link to a known peer
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.frames_in = self.frames_out = self.dropped = 0
        for rid in self.peers:
            self.ensure_stand_in(rid)

    def ensure_stand_in(self, rid: Any) -> None:
        if rid not in self.local and rid not in self.net.node_ids:
            self.net.add_node(rid, RemoteNode(self, rid))

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._accept, host, port)
        return self._server.sockets[0].getsockname()[:2]

    # --------------------------------------------------------------------------------- sending

    def forward(self, src: Any, dst: Any, msg: Any) -> None:
        writer = self._routes.get(dst)
        try:
            data = frame((src, dst, msg))
        except Exception as e:  # noqa: BLE001 - a message that cannot be sent is a dropped message
            log.warning("dropping a message to %r: %s", dst, e)
            self.dropped += 1
            return
        if writer is None or writer.is_closing():
            self._routes.pop(dst, None)
            if dst in self.peers:
                queue = self._pending.setdefault(dst, deque())
                if len(queue) >= PENDING_MAX:
                    queue.popleft()
                    self.dropped += 1
                queue.append((time.monotonic(), data))
            else:
                self.dropped += 1
            self._dial_for(dst)
            return
        writer.write(data)
        self.frames_out += 1

    def _drop_aged(self, rids: Iterable[Any]) -> None:
        oldest = time.monotonic() - PENDING_MS / 1000
        for rid in rids:
            queue = self._pending.get(rid)
            while queue and queue[0][0] < oldest:
                queue.popleft()
                self.dropped += 1

    def _flush_pending(self, rid: Any, writer: asyncio.StreamWriter) -> None:
        self._drop_aged([rid])
        for _at, data in self._pending.pop(rid, ()):
            writer.write(data)
            self.frames_out += 1

    def _dial_for(self, dst: Any) -> None:
        addr = self.peers.get(dst)
        if addr is None or addr in self._dialing:
            return
        self._dialing.add(addr)
        self._spawn(self._dial(addr))

    async def _dial(self, addr: tuple[str, int]) -> None:
        try:
            reader, writer = await asyncio.open_connection(*addr)
        except OSError:
            await asyncio.sleep(RECONNECT_MS / 1000)
            self._dialing.discard(addr)
            waiting = [rid for rid, a in self.peers.items() if a == addr and self._pending.get(rid)]
            if waiting:  # frames are queued for it: keep dialling until it answers or they age out
                self._drop_aged(waiting)
                self._dial_for(waiting[0])
            return
        self._dialing.discard(addr)
        await self._run(reader, writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._run(reader, writer)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: tuple) -> None:
        """Run a connection another server accepted and whose first frame, the hello, it already read."""
        await self._run(reader, writer, hello)

    async def _run(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: tuple | None = None
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        writer.write(frame(("hello", tuple(self.local))))
        hosted: tuple = ()
        try:
            kind, hosted = hello if hello is not None else await read_frame(reader)
            if kind != "hello":
                raise ValueError("a peer skipped its hello")
            for rid in hosted:
                self.ensure_stand_in(rid)
                self._routes[rid] = writer
                self._flush_pending(rid, writer)
            while True:
                src, dst, msg = await read_frame(reader)
                self.frames_in += 1
                if dst not in self.local:
                    continue
                self.ensure_stand_in(src)
                self.net.send(src, dst, msg)
                self.wake()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception as e:  # noqa: BLE001 - a bad peer costs its connection, not the process
            log.warning("closing a bridge connection: %s", e)
        finally:
            for rid in hosted:
                if self._routes.get(rid) is writer:
                    del self._routes[rid]
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def connect_all(self) -> None:
        """Dial every peer once now (later sends dial again while a link is down)."""
        for addr in sorted(set(self.peers.values())):
            if addr not in self._dialing:
                self._dialing.add(addr)
                self._spawn(self._dial(addr))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._routes.values()):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


__all__ = ["NetBridge", "RemoteNode", "dumps", "frame", "loads", "read_frame"]
