"""An in-process, ZooKeeper-like coordination store: znodes, sessions, ephemeral nodes, watches.

Kafka's ZooKeeper-mode controller relies on a handful of ZooKeeper guarantees, and this store keeps
exactly those: a totally ordered history (one global ``zxid`` per write transaction), versioned
compare-and-set writes, atomic ``multi`` transactions, ephemeral nodes that vanish when their session
stops heartbeating, and one-shot watches.

It is sans-I/O: no threads, no sockets, no wall clock. Time comes from the injected clock; sessions are
expired at the start of every call and by an explicit ``tick(now_ms)``. Watch callbacks never run in the
middle of an operation: they are queued and invoked, in trigger order, once the outermost call returns
(ZooKeeper's single event thread, made deterministic).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from kafkalite.clock import Clock, ManualClock

# ----------------------------------------------------------------------------------------------- errors


class CoordinationError(Exception):
    """Base class; ``code`` is ZooKeeper's ``KeeperException.Code`` value."""

    code: int = -1

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        name = type(self).__name__
        super().__init__(f"{name}: {message}" if message else name)
        self.path = path
        # Index of the failing op inside a ``multi`` (0 for single operations).
        self.op_index: int = 0


class BadArguments(CoordinationError, ValueError):
    """An invalid path or argument (ZooKeeper rejects these before they reach the server)."""

    code = -8


class NoNode(CoordinationError):
    code = -101


class BadVersion(CoordinationError):
    code = -103


class NoChildrenForEphemerals(CoordinationError):
    code = -108


class NodeExists(CoordinationError):
    code = -110


class NotEmpty(CoordinationError):
    code = -111


class SessionExpired(CoordinationError):
    code = -112


# ------------------------------------------------------------------------------------------ data types


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's metadata, ZooKeeper's field meanings (``version`` is the data version)."""

    czxid: int  # zxid of the transaction that created the node
    mzxid: int  # zxid of the last data change
    pzxid: int  # zxid of the last change to the children list
    ctime: int
    mtime: int
    version: int  # number of data changes
    cversion: int  # number of child creations + deletions
    ephemeral_owner: int  # session id, 0 for persistent nodes
    data_length: int
    num_children: int


class EventType(StrEnum):
    NODE_CREATED = "NodeCreated"
    NODE_DELETED = "NodeDeleted"
    NODE_DATA_CHANGED = "NodeDataChanged"
    NODE_CHILDREN_CHANGED = "NodeChildrenChanged"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """A fired watch. ``session`` owns the watch (None: set without a session); ``zxid`` caused it."""

    type: EventType
    path: str
    session: int | None
    zxid: int


Watcher = Callable[[WatchedEvent], object]
# ``True`` queues the event for ``drain_events``; a callable is invoked after the operation completes.
WatchArg = Watcher | bool | None


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the change log: what a write transaction did, for timelines and checkers."""

    zxid: int
    time_ms: int
    op: str  # create | set | delete | connect | close_session | expire_session
    path: str  # "" for session operations
    session: int  # acting session, 0 when none


# Transaction ops for ``multi`` (named after ZooKeeper's Op.create / setData / delete / check).


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False
    make_parents: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int = -1


Op = Create | SetData | Delete | Check
# ``multi`` results per op: created path, new Stat, None for delete, True for check.
OpResult = str | Stat | bool | None


# ------------------------------------------------------------------------------------------- protocol


@runtime_checkable
class CoordinationClient(Protocol):
    """What the controller and brokers need from ZooKeeper, bound to one session.

    ``CoordinationStore.client`` returns the in-process implementation; a kazoo adapter can implement
    the same methods against a real ensemble (``heartbeat`` would be a no-op there: kazoo pings itself).
    """

    @property
    def session_id(self) -> int: ...

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str: ...

    def get(self, path: str, watch: WatchArg = None) -> tuple[bytes, Stat]: ...

    def set(self, path: str, data: bytes, *, version: int = -1) -> Stat: ...

    def delete(self, path: str, *, version: int = -1) -> None: ...

    def exists(self, path: str, watch: WatchArg = None) -> Stat | None: ...

    def get_children(self, path: str, watch: WatchArg = None) -> list[str]: ...

    def multi(self, ops: Sequence[Op]) -> list[OpResult]: ...

    def heartbeat(self) -> None: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------------- internals


@dataclass(slots=True)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children: set[str] = field(default_factory=set)

    def copy(self) -> _Node:
        return replace(self, children=set(self.children))

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )


@dataclass(slots=True)
class _Session:
    id: int
    timeout_ms: int
    last_heartbeat_ms: int


@dataclass(slots=True)
class _Txn:
    zxid: int
    now: int
    session: int
    # Copy of every node touched (None: did not exist), restored on rollback.
    saved: dict[str, _Node | None] = field(default_factory=dict)
    # (path, event, fire data watches, fire child watches), applied only on commit.
    triggers: list[tuple[str, EventType, bool, bool]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _operation(
    fn: Callable[Concatenate[CoordinationStore, _P], _R],
) -> Callable[Concatenate[CoordinationStore, _P], _R]:
    """Expire due sessions first, and deliver queued watch events once the outermost call returns."""

    @functools.wraps(fn)
    def wrapper(self: CoordinationStore, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self._depth += 1
        try:
            self._expire_due(self._clock.now_ms())
            return fn(self, *args, **kwargs)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._deliver()

    return wrapper


def validate_path(path: str, *, sequential: bool = False) -> None:
    """Raise ``BadArguments`` unless ``path`` is a valid znode path.

    A sequential create may end in ``/`` (the counter becomes the whole last component), as in ZooKeeper.
    """
    if not isinstance(path, str):
        raise BadArguments(f"path must be a str, got {type(path).__name__}", path=None)
    checked = path + "0" if sequential else path
    if not checked.startswith("/"):
        raise BadArguments(f"path {path!r} must be absolute (start with '/')", path=path)
    if checked == "/":
        return
    if checked.endswith("/"):
        raise BadArguments(f"path {path!r} must not end with '/'", path=path)
    if "\x00" in checked:
        raise BadArguments(f"path {path!r} contains a null character", path=path)
    for component in checked[1:].split("/"):
        if component == "":
            raise BadArguments(f"path {path!r} has an empty component ('//')", path=path)
        if component in (".", ".."):
            raise BadArguments(f"path {path!r} has a relative component {component!r}", path=path)


def parent_of(path: str) -> str:
    """The parent path (``/`` for top-level nodes)."""
    return path[: path.rindex("/")] or "/"


def _join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"znode data must be bytes, got {type(data).__name__}")


# ------------------------------------------------------------------------------------------- the store


class CoordinationStore:
    """The whole ensemble as one deterministic object; see the module docstring."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else ManualClock()
        self._now = self._clock.now_ms()
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, self._now, self._now)}
        self._sessions: dict[int, _Session] = {}
        self._next_session = 1
        self._data_watches: dict[str, list[tuple[int | None, Watcher | bool]]] = {}
        self._child_watches: dict[str, list[tuple[int | None, Watcher | bool]]] = {}
        self._pending: list[tuple[Watcher | bool, WatchedEvent]] = []
        self._events: list[WatchedEvent] = []
        self._log: list[Change] = []
        self._txn: _Txn | None = None
        self._depth = 0
        self._delivering = False
        # Called with each session id that ends by expiry, whichever call noticed it (a tick or any
        # operation's expiry pass): the ensemble's node logs it and forgets the session's watches.
        self.on_session_expired: Callable[[int], None] | None = None
        # Called with the zxid of each client write (create, set, delete, multi) once its changes are in
        # place and before it is acknowledged: where the store makes it durable (``snapshot``). If it
        # raises, the write is rolled back and the caller gets the error. Sessions ending take no part:
        # what they delete (ephemeral znodes) is never persisted.
        self.before_commit: Callable[[int], None] | None = None

    # -------------------------------------------------------------------------------- sessions

    @property
    def zxid(self) -> int:
        """The zxid of the last committed write transaction."""
        return self._zxid

    @_operation
    def connect(self, timeout_ms: int) -> int:
        """Open a session; it lives while heartbeats arrive at most ``timeout_ms`` apart."""
        if timeout_ms <= 0:
            raise BadArguments(f"session timeout must be positive, got {timeout_ms}")
        sid = self._next_session
        self._next_session += 1
        self._sessions[sid] = _Session(sid, timeout_ms, self._now)
        self._zxid += 1
        self._log.append(Change(self._zxid, self._now, "connect", "", sid))
        return sid

    def client(self, timeout_ms: int) -> StoreClient:
        """Open a session and return a ``CoordinationClient`` bound to it."""
        return StoreClient(self, self.connect(timeout_ms))

    @_operation
    def heartbeat(self, session_id: int) -> None:
        """A client's ping: refresh the session, or raise ``SessionExpired`` if it is already gone."""
        self._session(session_id).last_heartbeat_ms = self._now

    @_operation
    def close_session(self, session_id: int) -> None:
        """End a session now, deleting its ephemeral nodes. Closing a dead session is a no-op."""
        if session_id in self._sessions:
            self._end_session(session_id, "close_session")

    def tick(self, now_ms: int | None = None) -> list[int]:
        """Advance store time to ``now_ms`` (default: the clock) and return the sessions it expired."""
        # Not an ``_operation``: its expiry pass would hide the expired sessions from the result.
        self._depth += 1
        try:
            clock_now = self._clock.now_ms()
            return self._expire_due(clock_now if now_ms is None else max(clock_now, now_ms))
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._deliver()

    def session_alive(self, session_id: int) -> bool:
        """Whether the session is open (as of the last call or tick; does not expire anything)."""
        return session_id in self._sessions

    def sessions(self) -> dict[int, dict[str, int]]:
        """Open sessions: id -> timeout_ms, last_heartbeat_ms, deadline_ms (for the book)."""
        return {
            s.id: {
                "timeout_ms": s.timeout_ms,
                "last_heartbeat_ms": s.last_heartbeat_ms,
                "deadline_ms": s.last_heartbeat_ms + s.timeout_ms,
            }
            for s in self._sessions.values()
        }

    def _session(self, session_id: int) -> _Session:
        sess = self._sessions.get(session_id)
        if sess is None:
            raise SessionExpired(f"session 0x{session_id:x} has expired or was closed")
        return sess

    def _expire_due(self, now: int) -> list[int]:
        # Time never goes back: a tick(now) ahead of the clock is not undone by the next clock read.
        self._now = max(self._now, now)
        due = sorted(
            (s.last_heartbeat_ms + s.timeout_ms, s.id)
            for s in self._sessions.values()
            if self._now - s.last_heartbeat_ms > s.timeout_ms
        )
        for _, sid in due:
            self._end_session(sid, "expire_session")
            if self.on_session_expired is not None:
                self.on_session_expired(sid)
        return [sid for _, sid in due]

    def _end_session(self, sid: int, op: str) -> None:
        del self._sessions[sid]
        # Like a disconnected ZooKeeper client, a dead session's watches will never be delivered.
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                kept = [w for w in table[path] if w[0] != sid]
                if kept:
                    table[path] = kept
                else:
                    del table[path]
        owned = sorted(p for p, n in self._nodes.items() if n.ephemeral_owner == sid)
        txn = self._begin(sid)
        txn.changes.append(Change(txn.zxid, txn.now, op, "", sid))
        for path in owned:
            self._apply_delete(txn, path, -1)
        self._commit(txn)

    # -------------------------------------------------------------------------------- reads

    @_operation
    def get(self, path: str, watch: WatchArg = None, *, session: int | None = None) -> tuple[bytes, Stat]:
        """Data and Stat of ``path`` (NoNode if missing); ``watch`` fires on its next set or delete."""
        node = self._read(path, session)
        if node is None:
            raise NoNode(f"{path} does not exist", path=path)
        self._add_watch(self._data_watches, path, watch, session)
        return node.data, node.stat()

    @_operation
    def exists(self, path: str, watch: WatchArg = None, *, session: int | None = None) -> Stat | None:
        """Stat of ``path`` or None; the watch is set either way (fires on create, set or delete)."""
        node = self._read(path, session)
        self._add_watch(self._data_watches, path, watch, session)
        return node.stat() if node is not None else None

    @_operation
    def get_children(self, path: str, watch: WatchArg = None, *, session: int | None = None) -> list[str]:
        """Sorted child names (NoNode if missing); ``watch`` fires when children change or it is deleted."""
        node = self._read(path, session)
        if node is None:
            raise NoNode(f"{path} does not exist", path=path)
        self._add_watch(self._child_watches, path, watch, session)
        return sorted(node.children)

    def _read(self, path: str, session: int | None) -> _Node | None:
        validate_path(path)
        if session is not None:
            self._session(session)
        return self._nodes.get(path)

    def _add_watch(
        self,
        table: dict[str, list[tuple[int | None, Watcher | bool]]],
        path: str,
        watch: WatchArg,
        session: int | None,
    ) -> None:
        if watch is None or watch is False:
            return
        if watch is not True and not callable(watch):
            raise BadArguments(f"watch must be a callable, True or None, got {watch!r}", path=path)
        entry = (session, watch)
        watchers = table.setdefault(path, [])
        # ZooKeeper keeps a set: the same watcher registered twice on a path fires once.
        if entry not in watchers:
            watchers.append(entry)

    # -------------------------------------------------------------------------------- writes

    @_operation
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        session: int | None = None,
        make_parents: bool = False,
    ) -> str:
        """Create a znode and return its actual path (with the 10-digit suffix when sequential)."""
        op = Create(path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents)
        result = self._transact([op], session)[0]
        assert isinstance(result, str)
        return result

    @_operation
    def set(self, path: str, data: bytes, *, version: int = -1, session: int | None = None) -> Stat:
        """Replace the data if ``version`` is -1 or matches (else BadVersion); returns the new Stat."""
        result = self._transact([SetData(path, data, version)], session)[0]
        assert isinstance(result, Stat)
        return result

    @_operation
    def delete(self, path: str, *, version: int = -1, session: int | None = None) -> None:
        """Delete a childless znode (NotEmpty otherwise) if ``version`` is -1 or matches."""
        self._transact([Delete(path, version)], session)

    @_operation
    def multi(self, ops: Iterable[Op], *, session: int | None = None) -> list[OpResult]:
        """Apply all ops as one transaction (one zxid) or none; the error carries ``op_index``."""
        return self._transact(list(ops), session)

    def _transact(self, ops: list[Op], session: int | None) -> list[OpResult]:
        if session is not None:
            self._session(session)
        txn = self._begin(session or 0)
        results: list[OpResult] = []
        for i, op in enumerate(ops):
            try:
                results.append(self._apply(txn, op))
            except CoordinationError as exc:
                self._rollback(txn)
                exc.op_index = i
                raise
            except BaseException:
                self._rollback(txn)
                raise
        if txn.changes:
            if self.before_commit is not None:
                try:
                    self.before_commit(txn.zxid)
                except BaseException:
                    self._rollback(txn)
                    raise
            self._commit(txn)
        else:
            self._rollback(txn)  # a multi of checks only changes nothing and takes no zxid
        return results

    def _begin(self, session: int) -> _Txn:
        assert self._txn is None, "transactions do not nest"
        self._txn = _Txn(zxid=self._zxid + 1, now=self._now, session=session)
        return self._txn

    def _commit(self, txn: _Txn) -> None:
        self._zxid = txn.zxid
        self._log.extend(txn.changes)
        for path, etype, data, child in txn.triggers:
            self._trigger(path, etype, data=data, child=child, zxid=txn.zxid)
        self._txn = None

    def _rollback(self, txn: _Txn) -> None:
        for path, saved in txn.saved.items():
            if saved is None:
                self._nodes.pop(path, None)
            else:
                self._nodes[path] = saved
        self._txn = None

    def _touch(self, txn: _Txn, path: str) -> None:
        if path not in txn.saved:
            node = self._nodes.get(path)
            txn.saved[path] = node.copy() if node is not None else None

    def _apply(self, txn: _Txn, op: Op) -> OpResult:
        if isinstance(op, Create):
            return self._apply_create(txn, op)
        if isinstance(op, SetData):
            return self._apply_set(txn, op.path, _as_bytes(op.data), op.version)
        if isinstance(op, Delete):
            self._apply_delete(txn, op.path, op.version)
            return None
        if isinstance(op, Check):
            validate_path(op.path)
            self._check_version(self._existing(op.path), op.path, op.version)
            return True
        raise BadArguments(f"unknown op {op!r}")

    def _existing(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(f"{path} does not exist", path=path)
        return node

    @staticmethod
    def _check_version(node: _Node, path: str, version: int) -> None:
        if version != -1 and version != node.version:
            raise BadVersion(f"{path} is at version {node.version}, expected {version}", path=path)

    def _apply_create(self, txn: _Txn, op: Create) -> str:
        validate_path(op.path, sequential=op.sequential)
        if op.path == "/" and not op.sequential:
            raise NodeExists("/ always exists", path="/")
        data = _as_bytes(op.data)
        if op.ephemeral and not txn.session:
            raise BadArguments(f"ephemeral node {op.path} needs a session", path=op.path)
        parent_path = parent_of(op.path + "0") if op.sequential else parent_of(op.path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            if not op.make_parents:
                raise NoNode(f"parent {parent_path} of {op.path} does not exist", path=parent_path)
            self._apply_create(txn, Create(parent_path, make_parents=True))
            parent = self._nodes[parent_path]
        # ZooKeeper's sequence number is the parent's cversion, so deletions also advance it.
        path = f"{op.path}{parent.cversion:010d}" if op.sequential else op.path
        if path in self._nodes:
            raise NodeExists(f"{path} already exists", path=path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemerals(f"{parent_path} is ephemeral and cannot have children", path=path)
        self._touch(txn, parent_path)
        self._touch(txn, path)
        parent = self._nodes[parent_path]
        parent.children.add(path[len(parent_path) :].lstrip("/"))
        parent.cversion += 1
        parent.pzxid = txn.zxid
        self._nodes[path] = _Node(
            data,
            czxid=txn.zxid,
            mzxid=txn.zxid,
            pzxid=txn.zxid,
            ctime=txn.now,
            mtime=txn.now,
            ephemeral_owner=txn.session if op.ephemeral else 0,
        )
        txn.changes.append(Change(txn.zxid, txn.now, "create", path, txn.session))
        txn.triggers.append((path, EventType.NODE_CREATED, True, False))
        txn.triggers.append((parent_path, EventType.NODE_CHILDREN_CHANGED, False, True))
        return path

    def _apply_set(self, txn: _Txn, path: str, data: bytes, version: int) -> Stat:
        validate_path(path)
        self._check_version(self._existing(path), path, version)
        self._touch(txn, path)
        node = self._nodes[path]
        node.data = data
        node.version += 1
        node.mzxid = txn.zxid
        node.mtime = txn.now
        txn.changes.append(Change(txn.zxid, txn.now, "set", path, txn.session))
        txn.triggers.append((path, EventType.NODE_DATA_CHANGED, True, False))
        return node.stat()

    def _apply_delete(self, txn: _Txn, path: str, version: int) -> None:
        validate_path(path)
        if path == "/":
            raise BadArguments("the root node cannot be deleted", path=path)
        node = self._existing(path)
        self._check_version(node, path, version)
        if node.children:
            raise NotEmpty(f"{path} has {len(node.children)} children", path=path)
        parent_path = parent_of(path)
        self._touch(txn, path)
        self._touch(txn, parent_path)
        del self._nodes[path]
        parent = self._nodes[parent_path]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = txn.zxid
        txn.changes.append(Change(txn.zxid, txn.now, "delete", path, txn.session))
        txn.triggers.append((path, EventType.NODE_DELETED, True, True))
        txn.triggers.append((parent_path, EventType.NODE_CHILDREN_CHANGED, False, True))

    # -------------------------------------------------------------------------------- watches

    def _trigger(self, path: str, etype: EventType, *, data: bool, child: bool, zxid: int) -> None:
        fired: list[tuple[int | None, Watcher | bool]] = []
        if data:
            fired.extend(self._data_watches.pop(path, []))
        if child:
            # A watcher set by both get and get_children hears about a deletion once.
            fired.extend(w for w in self._child_watches.pop(path, []) if w not in fired)
        for owner, target in fired:
            self._pending.append((target, WatchedEvent(etype, path, owner, zxid)))

    def _deliver(self) -> None:
        if self._delivering:
            return  # a callback's own store calls: the outer loop delivers what they trigger
        self._delivering = True
        first_error: BaseException | None = None
        try:
            while self._pending:
                target, event = self._pending.pop(0)
                if target is True:
                    self._events.append(event)
                    continue
                try:
                    target(event)  # type: ignore[operator]
                except Exception as exc:  # keep delivering the rest, then surface the bug
                    if first_error is None:
                        first_error = exc
        finally:
            self._delivering = False
        if first_error is not None:
            raise first_error

    def drain_events(self, session: int | None = None) -> list[WatchedEvent]:
        """Fired ``watch=True`` events in order, removed from the queue (only ``session``'s if given)."""
        if session is None:
            events, self._events = self._events, []
            return events
        events = [e for e in self._events if e.session == session]
        self._events = [e for e in self._events if e.session != session]
        return events

    def watches(self) -> dict[str, dict[str, int]]:
        """Outstanding watch counts per path: {"data": n, "child": m} (for the book)."""
        out: dict[str, dict[str, int]] = {}
        for kind, table in (("data", self._data_watches), ("child", self._child_watches)):
            for path, ws in table.items():
                out.setdefault(path, {"data": 0, "child": 0})[kind] = len(ws)
        return dict(sorted(out.items()))

    # -------------------------------------------------------------------------------- observability

    def dump(self) -> dict[str, tuple[bytes, Stat]]:
        """Every znode, sorted by path: path -> (data, Stat)."""
        return {p: (self._nodes[p].data, self._nodes[p].stat()) for p in sorted(self._nodes)}

    def change_log(self, since_zxid: int = 0) -> list[Change]:
        """Committed changes with zxid > ``since_zxid``, in order (a multi shares one zxid)."""
        return [c for c in self._log if c.zxid > since_zxid]

    def format_tree(self, path: str = "/") -> str:
        """An indented text rendering of the subtree under ``path``, data shown when short."""
        validate_path(path)
        lines: list[str] = []

        def walk(p: str, depth: int) -> None:
            node = self._existing(p)
            name = p if depth == 0 else p.rsplit("/", 1)[1]
            text = node.data.decode("utf-8", "replace")
            shown = (
                f" = {text}" if text and len(text) <= 240 else (f" ({len(node.data)} bytes)" if text else "")
            )
            eph = f" [ephemeral 0x{node.ephemeral_owner:x}]" if node.ephemeral_owner else ""
            lines.append(f"{'  ' * depth}{name}{eph}{shown}")
            for child in sorted(node.children):
                walk(_join(p, child), depth + 1)

        walk(path, 0)
        return "\n".join(lines)


class StoreClient:
    """The in-process ``CoordinationClient``: a ``CoordinationStore`` seen through one session."""

    def __init__(self, store: CoordinationStore, session_id: int) -> None:
        self.store = store
        self._session_id = session_id

    @property
    def session_id(self) -> int:
        return self._session_id

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        return self.store.create(
            path,
            data,
            ephemeral=ephemeral,
            sequential=sequential,
            session=self._session_id,
            make_parents=make_parents,
        )

    def get(self, path: str, watch: WatchArg = None) -> tuple[bytes, Stat]:
        return self.store.get(path, watch, session=self._session_id)

    def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        return self.store.set(path, data, version=version, session=self._session_id)

    def delete(self, path: str, *, version: int = -1) -> None:
        self.store.delete(path, version=version, session=self._session_id)

    def exists(self, path: str, watch: WatchArg = None) -> Stat | None:
        return self.store.exists(path, watch, session=self._session_id)

    def get_children(self, path: str, watch: WatchArg = None) -> list[str]:
        return self.store.get_children(path, watch, session=self._session_id)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return self.store.multi(ops, session=self._session_id)

    def heartbeat(self) -> None:
        self.store.heartbeat(self._session_id)

    def close(self) -> None:
        self.store.close_session(self._session_id)

    def drain_events(self) -> list[WatchedEvent]:
        """This session's fired ``watch=True`` events."""
        return self.store.drain_events(self._session_id)

    @property
    def alive(self) -> bool:
        return self.store.session_alive(self._session_id)

    def __repr__(self) -> str:
        return f"StoreClient(session=0x{self._session_id:x}, alive={self.alive})"
