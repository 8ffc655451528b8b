"""The coordination store served over TCP, for brokers running as separate processes.

The store process runs the ``ZkNode`` on a wall-clock network (sessions expire there, watch events and
pongs leave as messages over ``kafkalite.net.bridge``) and answers the synchronous ``CoordinationClient``
calls (create, get, set, delete, exists, get_children, multi, connect, close) on its RPC port, one
request and one answer at a time per connection, as a ZooKeeper client's calls block.

``RemoteZkLink`` is ``ZkLink`` with the store on the other end of that connection: a call that cannot
reach it raises ``ConnectionLossError``, exactly as a cut link does in the simulator, and the store's own
errors (``NoNode``, ``BadVersion`` with its op index, ...) come back as themselves.

The store process keeps its persistent znodes in ``store.snapshot`` in its directory (``snapshot``:
rewritten before each write is answered), so a cluster stopped and started again finds its topics.
Sessions and ephemeral znodes are not kept, as a ZooKeeper restart loses them: brokers register again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass
from typing import Any

from kafkalite.coordination import store as store_mod
from kafkalite.coordination.snapshot import load_snapshot, save_snapshot
from kafkalite.coordination.store import CoordinationError
from kafkalite.coordination.zk_node import ConnectionLossError, ZkLink
from kafkalite.net.bridge import frame, loads, read_frame

_SIZE = struct.Struct(">I")
_OPS = {"connect", "close_session", "session_alive", "create", "get", "set", "delete", "exists",
        "get_children", "multi"}  # fmt: skip


@dataclass(frozen=True)
class RemoteWatch:
    """A watch argument on the wire: the store process fires it as a ZkWatchEvent to ``owner``."""

    owner: Any
    token: int
    session: int | None


# ------------------------------------------------------------------------------------- server


class StoreRpcServer:
    """Answers ``CoordinationClient`` calls for the ``ZkNode`` of this process's network."""

    def __init__(self, zk: Any, bridge: Any = None) -> None:
        self.zk = zk
        self.bridge = bridge  # connections that open with a hello are bridge links, not RPC
        self._server: asyncio.base_events.Server | None = None

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port)
        return self._server.sockets[0].getsockname()[:2]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            first = await read_frame(reader)
            if first[0] == "hello" and self.bridge is not None:
                await self.bridge.serve(reader, writer, first)
                return
            request = first
            while True:
                op, args, kwargs = request
                writer.write(frame(self._call(op, args, kwargs)))
                request = await read_frame(reader)
        writer.close()

    def _call(self, op: str, args: tuple, kwargs: dict) -> tuple:
        if op not in _OPS:
            return ("err", "BadArguments", f"unknown operation {op!r}", None, 0)
        store = self.zk.store
        args = tuple(self._watch(a) for a in args)
        kwargs = {k: self._watch(v) for k, v in kwargs.items()}
        try:
            return ("ok", getattr(store, op)(*args, **kwargs))
        except CoordinationError as e:
            return ("err", type(e).__name__, str(e), e.path, e.op_index)
        except Exception as e:  # noqa: BLE001 - a bad call gets an answer; the store keeps serving
            return ("err", "CoordinationError", f"{type(e).__name__}: {e}", None, 0)

    def _watch(self, value: Any) -> Any:
        if isinstance(value, RemoteWatch):
            if self.bridge is not None:
                self.bridge.ensure_stand_in(value.owner)  # events wait for its link (re-fired on pings)
            zk, w = self.zk, value
            return lambda event: zk.deliver_watch(w.owner, w.token, event, w.session)
        return value

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


# ------------------------------------------------------------------------------------- client


class _RemoteStore:
    """The calls ``ZkLink`` makes on a ``CoordinationStore``, sent to the store process."""

    def __init__(self, address: tuple[str, int], timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None

    def _sock(self) -> socket.socket:
        if self.sock is None:
            try:
                self.sock = socket.create_connection(self.address, timeout=self.timeout_s)
            except OSError as e:
                raise ConnectionLossError(
                    f"cannot reach the coordination store at {self.address}: {e}"
                ) from e
        return self.sock

    def call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        sock = self._sock()
        try:
            sock.sendall(frame((op, args, kwargs)))
            (size,) = _SIZE.unpack(self._read(sock, 4))
            answer = loads(self._read(sock, size))
        except (OSError, ValueError) as e:
            self.close()
            raise ConnectionLossError(f"lost the coordination store at {self.address}: {e}") from e
        if answer[0] == "ok":
            return answer[1]
        _, name, message, path, op_index = answer
        cls = (
            ConnectionLossError
            if name == "ConnectionLossError"
            else getattr(store_mod, name, CoordinationError)
        )
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.path, err.op_index = path, op_index
        raise err

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the coordination store closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def __getattr__(self, op: str) -> Any:
        if op not in _OPS:
            raise AttributeError(op)
        return lambda *args, **kwargs: self.call(op, *args, **kwargs)


class RemoteZkLink(ZkLink):
    """``ZkLink`` to a store in another process: ``address`` is its RPC port; pings, pongs and watch
    events travel as messages between this network's ``zk`` stand-in and the owner."""

    def __init__(self, net: Any, owner: Any, *, address: tuple[str, int], **kwargs: Any) -> None:
        super().__init__(net, owner, **kwargs)
        self._remote = _RemoteStore(address, timeout_s=max(1.0, self.session_timeout_ms / 3000))

    @property
    def store(self) -> Any:  # type: ignore[override]
        return self._remote

    def reachable(self) -> bool:
        return True  # a call that cannot get through raises ConnectionLossError itself

    def _watch(self, watch: Any) -> Any:
        if watch is None:
            return None
        self._next_token += 1
        token = self._next_token
        self._handlers[token] = watch
        return RemoteWatch(self.owner, token, self.session_id)

    @property
    def alive(self) -> bool:
        return self.session_id is not None and bool(self._remote.session_alive(self.session_id))

    def close(self) -> None:
        sid = self.session_id
        self.stop()
        if sid is not None:
            with contextlib.suppress(CoordinationError):
                self._remote.close_session(sid)
        self._remote.close()


__all__ = ["RemoteWatch", "RemoteZkLink", "StoreRpcServer", "load_snapshot", "save_snapshot"]
