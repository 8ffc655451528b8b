"""ZooKeeper as a node of the simulated network, and the link a broker uses to reach it.

``ZkNode`` (node id ``"zk"``) wraps a ``CoordinationStore`` whose clock is the network's. Sessions live on
real messages: a client's ``ZkLink`` sends a ``ZkPing`` every third of its session timeout, and the node
refreshes the session when (if) the ping arrives; the node's tick expires sessions whose pings stopped, so a
crashed, paused or cut-off broker loses its ephemeral znodes (``/brokers/ids/<id>``, ``/controller``) after
``zookeeper.session.timeout.ms``, as with a real ensemble.

Reads and writes are in-process calls, to keep the controller synchronous, but each is gated by reachability:
``ZkLink`` raises ``ConnectionLossError`` (ZooKeeper's CONNECTIONLOSS) when its owner could not have talked
to ``"zk"`` at this instant (either node down or paused, or the link cut). Watch events are *not* in-process:
the node sends each one as a ``ZkWatchEvent`` message, so they are delayed like any other message. As with a
real ensemble they are not lost while the session lives (ZooKeeper re-fires them after a reconnect): the node
keeps each event until the client acknowledges it in a later ping, and resends the unacknowledged ones on
every ping. Events die with their session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.coordination.store import (
    CoordinationError,
    CoordinationStore,
    Op,
    OpResult,
    SessionExpired,
    Stat,
    WatchedEvent,
)

ZK_NODE_ID = "zk"


class ConnectionLossError(CoordinationError):
    """The client could not reach the ensemble (ZooKeeper's CONNECTIONLOSS); the call had no effect."""

    code = -4


# ---------------------------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class ZkPing:
    """Client -> zk: keep ``session_id`` alive; ``acks`` are the watch tokens received since the last ping."""

    session_id: int
    acks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ZkPong:
    """zk -> client: the session is alive."""

    session_id: int


@dataclass(frozen=True, slots=True)
class ZkSessionExpired:
    """zk -> client: the session is gone (answer to a ping of a dead session, as ZooKeeper's Expired)."""

    session_id: int


@dataclass(frozen=True, slots=True)
class ZkWatchEvent:
    """zk -> client: a watch the client set fired. ``token`` names the client's handler."""

    token: int
    event: WatchedEvent


# -------------------------------------------------------------------------------------------------- node


class ZkNode:
    """The ensemble on the network: answers pings, expires sessions each tick, sends watch events."""

    def __init__(self, store: CoordinationStore | None = None) -> None:
        self._store = store
        self.net: Any = None
        self.node_id: Any = None
        # session -> token -> (owner, event): fired watches not yet acknowledged by the client
        self._pending: dict[int, dict[int, tuple[Any, WatchedEvent]]] = {}

    def bind(self, net: Any, node_id: Any) -> None:
        self.net = net
        self.node_id = node_id
        if self._store is None:
            self._store = CoordinationStore(net.clock)
        self._store.on_session_expired = self._session_expired

    @property
    def store(self) -> CoordinationStore:
        assert self._store is not None, "ZkNode is not on a network yet"
        return self._store

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if isinstance(msg, ZkPing):
            try:
                self.store.heartbeat(msg.session_id)
            except SessionExpired:
                self._pending.pop(msg.session_id, None)
                self.net.send(self.node_id, src, ZkSessionExpired(msg.session_id))
                return
            self.net.send(self.node_id, src, ZkPong(msg.session_id))
            pending = self._pending.get(msg.session_id)
            if pending:
                for token in msg.acks:
                    pending.pop(token, None)
                # The link works again (this ping came through): re-fire what may have been lost.
                for token, (owner, event) in sorted(pending.items()):
                    self.net.send(self.node_id, owner, ZkWatchEvent(token, event))

    def on_tick(self, now_ms: int) -> None:
        self.store.tick(now_ms)  # expiries are logged by ``_session_expired``

    def _session_expired(self, sid: int) -> None:
        """The store ended ``sid`` by expiry: on a tick, or in the expiry pass of any store operation
        (a broker's call, a reader), which would otherwise leave no trace in the event log."""
        self._pending.pop(sid, None)
        self.net.log(self.node_id, "zk_session_expired", session=sid)

    def on_crash(self) -> None:  # pragma: no cover - the ensemble is assumed highly available
        pass

    def deliver_watch(self, owner: Any, token: int, event: WatchedEvent, session: int | None = None) -> None:
        """Called by the store (after the operation) when a client's watch fires."""
        if session is not None and self.store.session_alive(session):
            self._pending.setdefault(session, {})[token] = (owner, event)
        if self.net.is_up(self.node_id):
            self.net.send(self.node_id, owner, ZkWatchEvent(token, event))


# -------------------------------------------------------------------------------------------------- link


class ZkLink:
    """One broker's session with ``ZkNode``: the ``CoordinationClient`` calls, gated by reachability.

    ``watch`` arguments are callables ``handler(event)``; they run when the ``ZkWatchEvent`` message reaches
    the owner, which must pass messages from ``"zk"`` to ``on_message``. ``on_expired`` runs when the owner
    learns that its session is gone (ZooKeeper's Expired state): it must open a new one with ``connect``.
    """

    def __init__(
        self,
        net: Any,
        owner: Any,
        *,
        session_timeout_ms: int = 18_000,
        zk_id: Any = ZK_NODE_ID,
        on_expired: Callable[[], None] | None = None,
    ) -> None:
        self.net = net
        self.owner = owner
        self.zk_id = zk_id
        self.session_timeout_ms = session_timeout_ms
        self.on_expired = on_expired
        self.session_id: int | None = None
        self._handlers: dict[int, Callable[[WatchedEvent], None]] = {}
        self._next_token = 0
        self._ping_timer: int | None = None
        self._acks: list[int] = []  # watch tokens received, to acknowledge in the next ping

    # ------------------------------------------------------------------------------------ session

    @property
    def zk(self) -> ZkNode:
        return self.net.node(self.zk_id)

    @property
    def store(self) -> CoordinationStore:
        return self.zk.store

    def reachable(self) -> bool:
        """Whether owner and zk could exchange a request and its answer right now."""
        net = self.net
        for n in (self.owner, self.zk_id):
            if not net.is_up(n) or net.is_paused(n):
                return False
        return not (net.is_cut(self.owner, self.zk_id) or net.is_cut(self.zk_id, self.owner))

    def connect(self) -> int:
        """Open a new session (dropping any handlers of the old one) and start pinging."""
        self._check()
        self.session_id = self.store.connect(self.session_timeout_ms)
        self._handlers.clear()
        self._acks.clear()
        self._arm_ping()
        return self.session_id

    @property
    def alive(self) -> bool:
        """The session is open as the ensemble sees it (an oracle for tests; a broker cannot know it)."""
        return self.session_id is not None and self.store.session_alive(self.session_id)

    def stop(self) -> None:
        """Forget the session without closing it (a crash: the ensemble expires it later)."""
        self.session_id = None
        self._handlers.clear()
        self._acks.clear()
        if self._ping_timer is not None:
            self.net.cancel_timer(self._ping_timer)
            self._ping_timer = None

    def close(self) -> None:
        """Close the session now (clean shutdown: ephemerals go at once)."""
        sid = self.session_id
        self.stop()
        if sid is not None and self.reachable():
            self.store.close_session(sid)

    def _arm_ping(self) -> None:
        if self._ping_timer is not None:
            self.net.cancel_timer(self._ping_timer)
        interval = max(1, self.session_timeout_ms // 3)
        self._ping_timer = self.net.set_timer(self.owner, interval, self._ping)

    def _ping(self, now_ms: int) -> None:
        self._ping_timer = None
        if self.session_id is None:
            return
        self._send_ping()
        self._arm_ping()

    def _send_ping(self) -> None:
        assert self.session_id is not None
        self.net.send(self.owner, self.zk_id, ZkPing(self.session_id, tuple(self._acks)))
        self._acks.clear()  # a lost ping only means a duplicate event later, which is ignored

    def on_message(self, msg: Any) -> bool:
        """Handle a message from zk; False if it is not a ZooKeeper message."""
        if isinstance(msg, ZkWatchEvent):
            if self.session_id is not None:
                self._acks.append(msg.token)
            handler = self._handlers.pop(msg.token, None)
            if handler is not None:
                handler(msg.event)
            return True
        if isinstance(msg, ZkSessionExpired):
            if msg.session_id == self.session_id:
                self.stop()
                if self.on_expired is not None:
                    self.on_expired()
            return True
        return isinstance(msg, ZkPong)

    # ------------------------------------------------------------------------------------ calls

    def _check(self) -> None:
        if not self.reachable():
            raise ConnectionLossError(f"broker {self.owner} cannot reach {self.zk_id}")

    def _sid(self) -> int:
        self._check()
        if self.session_id is None:
            raise SessionExpired("no session")
        return self.session_id

    def _watch(self, watch: Callable[[WatchedEvent], None] | None) -> Any:
        if watch is None:
            return None
        self._next_token += 1
        token = self._next_token
        self._handlers[token] = watch
        zk, owner, sid = self.zk, self.owner, self.session_id
        return lambda event: zk.deliver_watch(owner, token, event, sid)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        sid = self._sid()
        return self.store.create(
            path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents, session=sid
        )

    def get(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> tuple[bytes, Stat]:
        sid = self._sid()
        return self.store.get(path, self._watch(watch), session=sid)

    def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        sid = self._sid()
        return self.store.set(path, data, version=version, session=sid)

    def delete(self, path: str, *, version: int = -1) -> None:
        sid = self._sid()
        self.store.delete(path, version=version, session=sid)

    def exists(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> Stat | None:
        sid = self._sid()
        return self.store.exists(path, self._watch(watch), session=sid)

    def get_children(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> list[str]:
        sid = self._sid()
        return self.store.get_children(path, self._watch(watch), session=sid)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        sid = self._sid()
        return self.store.multi(ops, session=sid)

    def heartbeat(self) -> None:
        self._sid()
        self._send_ping()
