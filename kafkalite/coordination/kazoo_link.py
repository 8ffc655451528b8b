"""A broker's session with a real ZooKeeper ensemble, through kazoo.

``KazooZkLink`` is ``ZkLink`` with Apache ZooKeeper on the other end: the same calls (create, get, set,
delete, exists, get_children, multi), the same errors (``NoNode``, ``BadVersion`` with its op index,
``ConnectionLossError`` when the ensemble cannot be reached, ``SessionExpired``), and the same znodes,
so a kafkalite broker registers, elects its controller and stores topics exactly where Kafka would.

kazoo runs its own thread for the socket, the pings and the watch callbacks. Nothing of the broker runs
there: a fired watch and a lost session are handed to the broker's event loop (``call_soon_threadsafe``)
and run between two steps of the broker, as a ZkWatchEvent message does in the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from kafkalite.coordination.store import (
    BadArguments,
    BadVersion,
    Check,
    CoordinationError,
    Create,
    Delete,
    EventType,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    Op,
    OpResult,
    SessionExpired,
    SetData,
    Stat,
    WatchedEvent,
)
from kafkalite.coordination.zk_node import ConnectionLossError, ZkLink


def _errors() -> dict[type, type[CoordinationError]]:
    from kazoo import exceptions as k  # optional: only a real ZooKeeper needs kazoo

    return {
        k.NoNodeError: NoNode,
        k.NodeExistsError: NodeExists,
        k.BadVersionError: BadVersion,
        k.NotEmptyError: NotEmpty,
        k.NoChildrenForEphemeralsError: NoChildrenForEphemerals,
        k.BadArgumentsError: BadArguments,
        k.SessionExpiredError: SessionExpired,
        k.ConnectionLoss: ConnectionLossError,
        k.ConnectionClosedError: ConnectionLossError,
        k.OperationTimeoutError: ConnectionLossError,
    }


_EVENTS = {
    "CREATED": EventType.NODE_CREATED,
    "DELETED": EventType.NODE_DELETED,
    "CHANGED": EventType.NODE_DATA_CHANGED,
    "CHILD": EventType.NODE_CHILDREN_CHANGED,
}


def _stat(z: Any) -> Stat:
    return Stat(z.czxid, z.mzxid, z.pzxid, z.ctime, z.mtime, z.version, z.cversion, z.ephemeralOwner,
                z.dataLength, z.numChildren)  # fmt: skip


class KazooZkLink(ZkLink):
    """``ZkLink`` to Apache ZooKeeper. ``hosts`` is Kafka's ``zookeeper.connect`` (``h1:2181,h2:2181/chroot``);
    ``wake`` nudges the broker's event loop after a watch or an expiry ran on it."""

    def __init__(
        self, net: Any, owner: Any, *, hosts: str, wake: Callable[[], None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(net, owner, **kwargs)
        from kazoo.client import KazooClient  # optional: only a real ZooKeeper needs kazoo

        self.hosts = hosts
        self._wake = wake or (lambda: None)
        self._loop = asyncio.get_running_loop()
        self._map = _errors()
        self._client = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
        self._client.add_listener(self._state_changed)
        self._started = False

    # ------------------------------------------------------------------------------------ session

    @property
    def store(self) -> Any:  # type: ignore[override]
        raise AttributeError("a real ZooKeeper has no in-process store")

    def reachable(self) -> bool:
        return True  # a call that cannot get through raises ConnectionLossError itself

    def connect(self) -> int:
        """Start the client if needed and wait for a session (kazoo opens a new one after an expiry)."""
        self._handlers.clear()
        try:
            if not self._started:
                self._make_chroot()
                self._client.start(timeout=max(1.0, self.session_timeout_ms / 3000))
                self._started = True
            elif not self._client.connected:
                raise ConnectionLossError(f"broker {self.owner}: ZooKeeper at {self.hosts} not connected")
        except Exception as e:  # kazoo raises its timeout as a plain Exception subclass
            if isinstance(e, CoordinationError):
                raise
            raise ConnectionLossError(
                f"broker {self.owner} cannot reach ZooKeeper at {self.hosts}: {e}"
            ) from e
        self.session_id = self._client.client_id[0]
        return self.session_id

    @property
    def alive(self) -> bool:
        return self.session_id is not None and self._client.connected

    def _make_chroot(self) -> None:
        """Create the connect string's chroot (``/kafka`` of ``h:2181/kafka``) if missing, as Kafka does."""
        from kazoo.client import KazooClient  # optional: only a real ZooKeeper needs kazoo

        servers, slash, chroot = self.hosts.partition("/")
        if not slash or not chroot.strip("/"):
            return
        plain = KazooClient(hosts=servers, timeout=self.session_timeout_ms / 1000)
        plain.start(timeout=max(1.0, self.session_timeout_ms / 3000))
        try:
            plain.ensure_path("/" + chroot.strip("/"))
        finally:
            plain.stop()
            plain.close()

    def _arm_ping(self) -> None:
        pass  # kazoo pings the ensemble itself

    def _send_ping(self) -> None:
        pass

    def stop(self) -> None:
        """Forget the session (after an expiry): the next ``connect`` takes kazoo's new one."""
        self.session_id = None
        self._handlers.clear()

    def close(self) -> None:
        """Close the session now (clean shutdown: the broker's ephemeral znodes go at once)."""
        self.stop()
        if self._started:
            self._started = False
            with contextlib.suppress(Exception):
                self._client.stop()
            self._client.close()

    def _state_changed(self, state: str) -> None:  # kazoo's thread
        if state == "LOST":
            self._loop.call_soon_threadsafe(self._expired)

    def _expired(self) -> None:
        if self.session_id is None:
            return
        self.stop()
        if self.on_expired is not None:
            self.on_expired()
        self._wake()

    # ------------------------------------------------------------------------------------ calls

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.session_id is None:
            raise SessionExpired("no session")
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise self._translate(e) from e

    def _translate(self, e: Exception, index: int = 0) -> Exception:
        for kazoo_cls, ours in self._map.items():
            if isinstance(e, kazoo_cls):
                out = ours(str(e) or kazoo_cls.__name__)
                out.op_index = index
                return out
        return e

    def _watch(self, watch: Callable[[WatchedEvent], None] | None) -> Any:
        if watch is None:
            return None
        sid = self.session_id

        def fired(event: Any) -> None:  # kazoo's thread
            kind = _EVENTS.get(event.type)
            if kind is None:
                return  # a session event (NONE): not a znode change
            ours = WatchedEvent(kind, event.path, sid, 0)
            self._loop.call_soon_threadsafe(self._fire, watch, ours)

        return fired

    def _fire(self, watch: Callable[[WatchedEvent], None], event: WatchedEvent) -> None:
        if self.session_id == event.session:  # watches die with their session
            watch(event)
            self._wake()  # whatever the handler sent goes out now, not at the loop's next timer

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        return self._call(
            self._client.create, path, bytes(data), ephemeral=ephemeral, sequence=sequential,
            makepath=make_parents,
        )  # fmt: skip

    def get(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> tuple[bytes, Stat]:
        data, z = self._call(self._client.get, path, watch=self._watch(watch))
        return data, _stat(z)

    def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        return _stat(self._call(self._client.set, path, bytes(data), version=version))

    def delete(self, path: str, *, version: int = -1) -> None:
        self._call(self._client.delete, path, version=version)

    def exists(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> Stat | None:
        z = self._call(self._client.exists, path, watch=self._watch(watch))
        return None if z is None else _stat(z)

    def get_children(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> list[str]:
        return self._call(self._client.get_children, path, watch=self._watch(watch))

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """One ZooKeeper transaction; the first failing op's error carries its index. ZooKeeper's multi
        cannot create parents, so those of ``make_parents`` creates are made first (persistent, empty),
        as Kafka's own client does before such writes."""
        from kazoo.exceptions import RolledBackError  # optional: only a real ZooKeeper needs kazoo

        for op in ops:
            if isinstance(op, Create) and op.make_parents:
                parent = op.path.rsplit("/", 1)[0]
                if parent:
                    self._call(self._client.ensure_path, parent)
        txn = self._client.transaction()
        for op in ops:
            if isinstance(op, Create):
                txn.create(op.path, bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetData):
                txn.set_data(op.path, bytes(op.data), version=op.version)
            elif isinstance(op, Delete):
                txn.delete(op.path, version=op.version)
            elif isinstance(op, Check):
                txn.check(op.path, op.version)
            else:
                raise BadArguments(f"not a multi op: {op!r}")
        results = self._call(txn.commit)
        for i, r in enumerate(results):
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise self._translate(r, i)
        out: list[OpResult] = []
        for op, r in zip(ops, results, strict=True):
            if isinstance(op, SetData):
                out.append(_stat(r))
            elif isinstance(op, Delete):
                out.append(None)
            elif isinstance(op, Check):
                out.append(True)
            else:
                out.append(r)
        return out

    def heartbeat(self) -> None:
        if self.session_id is None or not self._client.connected:
            raise ConnectionLossError(f"broker {self.owner}: ZooKeeper at {self.hosts} not connected")


__all__ = ["KazooZkLink"]
