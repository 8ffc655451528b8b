"""A deterministic, single-threaded discrete-event simulator for kafkalite's sans-I/O nodes.

``SimNetwork`` owns a virtual clock (integer milliseconds), a seeded ``random.Random`` and one event
queue, a heap of ``(time_ms, seq, kind, payload)``: ``seq`` grows with every push, so events due at the
same millisecond run in the order they were scheduled and the same seed gives the same history.

A node is any object with ``on_message(src, msg, now_ms)``. Optional hooks, called when present:
``on_tick(now_ms)`` (every ``tick_ms`` given to ``add_node``), ``on_timer(token, now_ms)`` (a timer set with
a non-callable token), ``on_crash()`` (e.g. drop log bytes that were never fsynced), ``on_restart(now_ms)``
and ``bind(net, node_id)`` (called by ``add_node``; ``BaseNode`` implements it). A node acts on the world
only through the network: ``send``, ``set_timer``, ``cancel_timer``, ``now_ms``, ``log``.

Delivery: each message takes the link's latency (default ``latency_ms`` plus a seeded ``0..jitter_ms``),
plus any injected extra delay. Links are FIFO by default (like a TCP connection): a message never overtakes
an earlier one on the same ``(src, dst)`` link, whatever the jitter.

Faults and what they mean here:

* ``crash(n)``: ``n`` stops; its timers and held messages are dropped, messages already in flight to it are
  dropped when they arrive (its connections are gone), sends to it are dropped. Messages *from* ``n`` that
  are already on the wire still arrive. ``restart(n)`` brings it back and calls ``on_restart``.
* ``pause(n, ms)``: like a GC pause or SIGSTOP. Messages and timers due to ``n`` are held and run, in
  order, the moment it resumes; ticks missed while paused collapse into one.
* ``cut``/``heal``/``partition``/``heal_all``, ``delay``, ``drop``: link faults, applied to messages at send
  time and (for cuts) again at delivery, since a broken connection loses what was in flight.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from heapq import heappop, heappush
from typing import Any, Literal, NamedTuple, Protocol

NodeId = Hashable  # int for brokers, str for clients; must be orderable only if you sort them yourself

_MSG, _TIMER, _TICK, _CALL = 0, 1, 2, 3


class Node(Protocol):
    """The one method a simulated node must have; see the module docstring for the optional hooks."""

    def on_message(self, src: NodeId, msg: Any, now_ms: int) -> None: ...


class BaseNode:
    """Optional convenience base: remembers its network and id and forwards the usual calls."""

    net: SimNetwork
    node_id: NodeId

    def bind(self, net: SimNetwork, node_id: NodeId) -> None:
        self.net = net
        self.node_id = node_id

    def on_message(self, src: NodeId, msg: Any, now_ms: int) -> None:
        raise NotImplementedError

    def send(self, dst: NodeId, msg: Any) -> bool:
        return self.net.send(self.node_id, dst, msg)

    def set_timer(self, delay_ms: int, callback_or_token: Any) -> int:
        return self.net.set_timer(self.node_id, delay_ms, callback_or_token)

    def cancel_timer(self, timer_id: int) -> bool:
        return self.net.cancel_timer(timer_id)

    def now_ms(self) -> int:
        return self.net.now_ms()

    def log(self, event: str, **fields: Any) -> None:
        self.net.log(self.node_id, event, **fields)


class Event(NamedTuple):
    """One line of the event log. ``node`` is None for network-wide events (``partition``, ``heal_all``)."""

    time_ms: int
    node: NodeId | None
    kind: str
    fields: dict[str, Any]

    def __str__(self) -> str:
        who = "-" if self.node is None else str(self.node)
        rest = " ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"{self.time_ms:>8} {who:>10} {self.kind:<9} {rest}".rstrip()


_new_tuple = tuple.__new__


@dataclass(slots=True)
class SimStats:
    """Counters; ``events`` counts processed queue entries (deliveries, drops, timers, ticks, calls)."""

    sent: int = 0
    delivered: int = 0
    dropped: int = 0
    timers_fired: int = 0
    events: int = 0
    wall_s: float = 0.0  # wall time spent inside run_* loops, only for events_per_second

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SimClock:
    """The network's virtual time as a ``kafkalite.clock.Clock``, to hand to logs, brokers and clients."""

    __slots__ = ("_net",)

    def __init__(self, net: SimNetwork) -> None:
        self._net = net

    def now_ms(self) -> int:
        return self._net._now


class _Timer:
    __slots__ = ("tid", "node", "target")

    def __init__(self, tid: int, node: NodeId, target: Any) -> None:
        self.tid = tid
        self.node = node
        self.target = target


class _NodeState:
    __slots__ = ("node", "on_message", "up", "paused", "pause_gen", "inc", "held", "tick_ms", "tick_held")

    def __init__(self, node: Any, tick_ms: int | None) -> None:
        self.node = node
        self.on_message = node.on_message  # bound once: delivery is the hot path
        self.up = True
        self.paused = False
        self.pause_gen = 0
        self.inc = 0  # incarnation: bumped by crash so stale messages and ticks can be recognised
        self.held: list[tuple[int, Any]] = []
        self.tick_ms = tick_ms
        self.tick_held = False


LogMessages = Literal["all", "drops", "none"]


class SimNetwork:
    """Deterministic discrete-event network: nodes, virtual time, latency, faults and an event log.

    ``log_messages`` sets how much traffic goes into the event log: ``"all"`` (send, deliver, drop),
    ``"drops"`` or ``"none"``; faults and ``log()`` calls are always recorded. Messages are stored by
    reference, never copied: a node must not mutate a message after sending it.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        latency_ms: int = 1,
        jitter_ms: int = 0,
        fifo: bool = True,
        start_ms: int = 0,
        log_messages: LogMessages = "all",
    ) -> None:
        if latency_ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0")
        if log_messages not in ("all", "drops", "none"):
            raise ValueError(f"log_messages must be 'all', 'drops' or 'none', not {log_messages!r}")
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = SimClock(self)
        self.stats = SimStats()
        self._now = start_ms
        self._seq = 0
        self._heap: list[tuple[int, int, int, Any]] = []
        self._live = 0  # pending messages, timers and calls, held ones included; ticks excluded
        self._running = False
        self._nodes: dict[NodeId, _NodeState] = {}
        # Live timers only. The heap holds just the id, so a cancelled timer's callback (and whatever its
        # closure keeps alive, e.g. a whole produce request) is freed at once instead of when its entry
        # surfaces -- often never within a run, and the garbage collector kept scanning it.
        self._timers: dict[int, _Timer] = {}
        self._next_tid = 0
        self._latency = latency_ms
        self._jitter = jitter_ms
        self._fifo = fifo
        self._link_latency: dict[tuple[NodeId, NodeId], tuple[int, int]] = {}
        self._link_last: dict[tuple[NodeId, NodeId], int] = {}
        self._cuts: set[tuple[NodeId, NodeId]] = set()
        self._delays: dict[tuple[NodeId, NodeId], int] = {}
        self._drops: dict[tuple[NodeId, NodeId], float] = {}
        self._tampers: dict[tuple[NodeId, NodeId], Callable[[Any], Any]] = {}
        self._log_traffic = log_messages == "all"
        self._log_drops = log_messages != "none"
        self._events: list[Event] | deque[Event] = []
        #: False: a message to a node the network does not know raises KeyError (a typo in a test).
        #: True: it is dropped, as a packet to a closed connection (the TCP drivers, whose client
        #: connections join with ``add_node`` and leave with ``remove_node``).
        self.drop_to_unknown = False

    # ----------------------------------------------------------------------------------------- nodes

    def add_node(self, node_id: NodeId, node: Any, *, tick_ms: int | None = None) -> Any:
        """Register ``node`` under ``node_id``; with ``tick_ms`` its ``on_tick`` runs every ``tick_ms``."""
        if node_id in self._nodes:
            raise ValueError(f"node {node_id!r} already registered")
        if tick_ms is not None and (tick_ms <= 0 or not hasattr(node, "on_tick")):
            raise ValueError("tick_ms needs a value > 0 and a node with on_tick")
        st = _NodeState(node, tick_ms)
        self._nodes[node_id] = st
        bind = getattr(node, "bind", None)
        if bind is not None:
            bind(self, node_id)
        if st.tick_ms:
            self._push(self._now + st.tick_ms, _TICK, (node_id, st.inc))
        return node

    def remove_node(self, node_id: NodeId) -> None:
        """Forget ``node_id`` and everything the network keeps for it (timers, held messages, link state),
        as a closed connection leaves nothing behind. Messages still in flight to it are dropped."""
        st = self._nodes.pop(node_id, None)
        if st is None:
            return
        self._drop_held(st.held)
        dead = [tid for tid, timer in self._timers.items() if timer.node == node_id]
        for tid in dead:
            del self._timers[tid]
        self._live -= len(dead)
        for links in (self._link_last, self._link_latency, self._delays, self._drops, self._tampers):
            for link in [k for k in links if node_id in k]:
                del links[link]
        self._cuts = {link for link in self._cuts if node_id not in link}

    def node(self, node_id: NodeId) -> Any:
        return self._nodes[node_id].node

    @property
    def node_ids(self) -> list[NodeId]:
        """Registered ids in registration order."""
        return list(self._nodes)

    def is_up(self, node_id: NodeId) -> bool:
        return self._nodes[node_id].up

    def is_paused(self, node_id: NodeId) -> bool:
        return self._nodes[node_id].paused

    def node_rng(self, node_id: NodeId) -> random.Random:
        """A ``Random`` for one node, derived from the network seed, so nodes never share a stream."""
        return random.Random(f"{self.seed}/{node_id!r}")  # str seeds hash with sha512: stable across runs

    # ---------------------------------------------------------------------------------- node actions

    def now_ms(self) -> int:
        return self._now

    def send(self, src: NodeId, dst: NodeId, msg: Any) -> bool:
        """Put ``msg`` on the ``src -> dst`` link; False if it was dropped at once (cut, down, random)."""
        st = self._nodes.get(dst)
        if st is None:
            if self.drop_to_unknown:
                self.stats.sent += 1
                return self._drop(src, dst, msg, "dst gone")
            raise KeyError(f"unknown destination node {dst!r}")
        self.stats.sent += 1
        link = (src, dst)
        if not st.up:
            return self._drop(src, dst, msg, "dst down")
        if self._cuts and link in self._cuts:
            return self._drop(src, dst, msg, "cut")
        if self._drops:
            p = self._drops.get(link)
            if p and self.rng.random() < p:
                return self._drop(src, dst, msg, "random")
        if self._tampers:
            tamper = self._tampers.get(link)
            if tamper is not None:
                changed = tamper(msg)
                if changed is None:
                    return self._drop(src, dst, msg, "tampered")
                msg = changed
        now = self._now
        lat = self._link_latency.get(link) if self._link_latency else None
        base, jitter = (self._latency, self._jitter) if lat is None else lat
        t = now + base
        if jitter:
            t += self.rng.randint(0, jitter)
        if self._delays:
            t += self._delays.get(link, 0)
        if self._fifo:
            # Ties then resolve by seq, i.e. send order, which is what keeps the link FIFO.
            last = self._link_last.get(link, t)
            if t < last:
                t = last
            self._link_last[link] = t
        self._seq += 1
        heappush(self._heap, (t, self._seq, _MSG, (src, dst, msg, st.inc)))
        self._live += 1
        if self._log_traffic:
            self._events.append(Event(now, src, "send", {"dst": dst, "msg": msg, "at": t}))
        return True

    def set_timer(self, node: NodeId, delay_ms: int, callback_or_token: Any) -> int:
        """Run ``callback(now_ms)`` (or ``node.on_timer(token, now_ms)``) after ``delay_ms``; returns an id."""
        st = self._nodes[node]
        if not st.up:
            raise RuntimeError(f"node {node!r} is down and cannot set timers")
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self._next_tid += 1
        timer = _Timer(self._next_tid, node, callback_or_token)
        self._timers[timer.tid] = timer
        self._live += 1
        self._push(self._now + delay_ms, _TIMER, timer.tid)
        return timer.tid

    def cancel_timer(self, timer_id: int) -> bool:
        """Cancel a pending timer; False if it already fired, was cancelled or died with its node."""
        if self._timers.pop(timer_id, None) is None:
            return False
        self._live -= 1  # the heap entry stays and is skipped when it surfaces
        return True

    def log(self, node: NodeId | None, event: str, **fields: Any) -> None:
        """Append a structured event at the current virtual time."""
        self.record(node, event, fields)

    def record(self, node: NodeId | None, event: str, fields: dict[str, Any]) -> None:
        """``log`` with the fields as a dict the caller built (and hands over): no keyword packing."""
        # tuple.__new__ skips the NamedTuple's Python-level __new__: brokers log several events per batch.
        self._events.append(_new_tuple(Event, (self._now, node, event, fields)))

    # ------------------------------------------------------------------------------------ scheduling

    def at(self, time_ms: int, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` at virtual ``time_ms`` (for scheduled faults and test drivers)."""
        if time_ms < self._now:
            raise ValueError(f"cannot schedule in the past ({time_ms} < now {self._now})")
        self._live += 1
        self._push(time_ms, _CALL, fn)

    def after(self, delay_ms: int, fn: Callable[[], Any]) -> None:
        self.at(self._now + delay_ms, fn)

    def next_event_ms(self) -> int | None:
        """The time of the next event in the queue (ticks included), or None when it is empty."""
        return self._heap[0][0] if self._heap else None

    def pending(self) -> int:
        """Messages, timers and scheduled calls not yet run (held ones included, ticks excluded)."""
        return self._live

    # ---------------------------------------------------------------------------------------- faults

    def crash(self, node: NodeId) -> None:
        """Stop ``node``: timers and held messages are lost, in-flight messages to it will be dropped."""
        st = self._nodes[node]
        if not st.up:
            return
        st.up = False
        st.paused = False
        st.tick_held = False
        st.pause_gen += 1
        st.inc += 1
        held, st.held = st.held, []
        n_held = self._drop_held(held)
        dead = [tid for tid, timer in self._timers.items() if timer.node == node]
        for tid in dead:
            del self._timers[tid]
        self._live -= len(dead)
        self._events.append(Event(self._now, node, "crash", {"timers": len(dead), "held": n_held}))
        hook = getattr(st.node, "on_crash", None)
        if hook is not None:
            hook()

    def restart(self, node: NodeId) -> None:
        """Bring a crashed node back; calls ``on_restart(now_ms)`` so it can recover its state."""
        st = self._nodes[node]
        if st.up:
            return
        st.up = True
        self._events.append(Event(self._now, node, "restart", {}))
        if st.tick_ms:
            self._push(self._now + st.tick_ms, _TICK, (node, st.inc))
        hook = getattr(st.node, "on_restart", None)
        if hook is not None:
            hook(self._now)

    def pause(self, node: NodeId, ms: int | None = None) -> None:
        """Freeze ``node`` (for ``ms``, or until ``resume``): its messages and timers wait for it."""
        st = self._nodes[node]
        if not st.up or st.paused:
            return
        st.paused = True
        st.pause_gen += 1
        self._events.append(Event(self._now, node, "pause", {"ms": ms}))
        if ms is not None:
            self.after(ms, partial(self._timed_resume, node, st.pause_gen))

    def resume(self, node: NodeId) -> None:
        """Unfreeze ``node`` and run, in arrival order, everything that was held for it."""
        st = self._nodes[node]
        if not st.up or not st.paused:
            return
        st.paused = False
        self._events.append(Event(self._now, node, "resume", {"held": len(st.held)}))
        held, st.held = st.held, []
        for i, (kind, payload) in enumerate(held):
            if not st.up:  # a handler crashed it mid-flush
                self._drop_held(held[i:])
                return
            if st.paused:  # a handler paused it again: keep the rest, in order
                st.held[:0] = held[i:]
                return
            if kind == _MSG:
                self._live -= 1
                self.stats.events += 1
                self._deliver(st, payload, self._now)
            else:
                timer = self._timers.pop(payload, None)
                if timer is not None:
                    self._live -= 1
                    self.stats.events += 1
                    self._fire(st, timer, self._now)
        if st.tick_held and st.up and not st.paused:
            st.tick_held = False
            self.stats.events += 1
            self._tick(node, st, self._now)

    def cut(self, a: NodeId, b: NodeId, one_way: bool = False) -> None:
        """Break the link ``a -> b`` (and ``b -> a`` unless ``one_way``); in-flight messages are lost."""
        self._cuts.add((a, b))
        if not one_way:
            self._cuts.add((b, a))
        self._events.append(Event(self._now, a, "cut", {"peer": b, "one_way": one_way}))

    def heal(self, a: NodeId, b: NodeId) -> None:
        """Restore both directions between ``a`` and ``b``: no cut, no extra delay, no random drops."""
        for link in ((a, b), (b, a)):
            self._cuts.discard(link)
            self._delays.pop(link, None)
            self._drops.pop(link, None)
            self._tampers.pop(link, None)
        self._events.append(Event(self._now, a, "heal", {"peer": b}))

    def partition(self, groups: Iterable[Iterable[NodeId]]) -> None:
        """Cut every link between different groups; nodes in no group keep all their links."""
        groups = [list(g) for g in groups]
        for i, g in enumerate(groups):
            for h in groups[i + 1 :]:
                for a in g:
                    for b in h:
                        self._cuts.add((a, b))
                        self._cuts.add((b, a))
        self._events.append(Event(self._now, None, "partition", {"groups": groups}))

    def heal_all(self) -> None:
        """Remove every link fault (cuts, extra delays, drop probabilities); latencies stay."""
        self._cuts.clear()
        self._delays.clear()
        self._drops.clear()
        self._tampers.clear()
        self._events.append(Event(self._now, None, "heal_all", {}))

    def delay(self, a: NodeId, b: NodeId, extra_ms: int, one_way: bool = False) -> None:
        """Add ``extra_ms`` to every message on ``a -> b`` (and back unless ``one_way``); 0 removes it."""
        if extra_ms < 0:
            raise ValueError("extra_ms must be >= 0")
        for link in ((a, b),) if one_way else ((a, b), (b, a)):
            if extra_ms:
                self._delays[link] = extra_ms
            else:
                self._delays.pop(link, None)
        self._events.append(
            Event(self._now, a, "delay", {"peer": b, "extra_ms": extra_ms, "one_way": one_way})
        )

    def drop(self, a: NodeId, b: NodeId, probability: float, one_way: bool = False) -> None:
        """Drop each message on ``a -> b`` (and back unless ``one_way``) with ``probability``, seeded."""
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be in [0, 1]")
        for link in ((a, b),) if one_way else ((a, b), (b, a)):
            if probability:
                self._drops[link] = probability
            else:
                self._drops.pop(link, None)
        self._events.append(Event(self._now, a, "lossy", {"peer": b, "p": probability, "one_way": one_way}))

    def tamper(self, a: NodeId, b: NodeId, fn: Callable[[Any], Any] | None) -> None:
        """Pass every message on ``a -> b`` through ``fn`` as it is sent: it returns the message to
        deliver (changed or not) or None to drop it. Models corruption in flight; None removes it."""
        if fn is None:
            self._tampers.pop((a, b), None)
        else:
            self._tampers[(a, b)] = fn
        self._events.append(Event(self._now, a, "tamper", {"peer": b, "on": fn is not None}))

    def set_latency(
        self, a: NodeId, b: NodeId, latency_ms: int, jitter_ms: int = 0, one_way: bool = False
    ) -> None:
        """Override the default latency on ``a -> b`` (and back unless ``one_way``); not a fault."""
        if latency_ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0")
        for link in ((a, b),) if one_way else ((a, b), (b, a)):
            self._link_latency[link] = (latency_ms, jitter_ms)

    def is_cut(self, a: NodeId, b: NodeId) -> bool:
        return (a, b) in self._cuts

    # --------------------------------------------------------------------------------------- driving

    def step(self) -> bool:
        """Run the next event whatever its time; False if nothing is left."""
        self._enter()
        try:
            heap = self._heap
            while heap:
                t, _, kind, payload = heappop(heap)
                self._now = t
                if self._dispatch(t, kind, payload):
                    self.stats.events += 1
                    return True
            return False
        finally:
            self._running = False

    def run_for(self, ms: int) -> None:
        """Run every event due within ``ms`` and leave the clock at ``now + ms``."""
        if ms < 0:
            raise ValueError("ms must be >= 0")
        self._run(self._now + ms, None)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Run until ``predicate()`` holds (True, clock at that event) or ``timeout_ms`` passes (False)."""
        if predicate():
            return True
        return self._run(self._now + timeout_ms, predicate)

    def run_until_idle(self, max_ms: int = 3_600_000) -> bool:
        """Run until no message, timer or scheduled call is pending (True) or ``max_ms`` passes (False).

        Periodic ticks do not count as pending work, so a cluster of ticking brokers can still go idle.
        """
        if self._live == 0:
            return True
        return self._run(self._now + max_ms, self._idle)

    # -------------------------------------------------------------------------------------- the log

    def events(self, kind: str | Collection[str] | None = None, node: NodeId | None = None) -> list[Event]:
        """Logged events in order, optionally only of ``kind`` (a name or a set of names) and ``node``."""
        kinds = {kind} if isinstance(kind, str) else (set(kind) if kind is not None else None)
        return [
            e for e in self._events if (kinds is None or e.kind in kinds) and (node is None or e.node == node)
        ]

    def format_log(self, kind: str | Collection[str] | None = None, node: NodeId | None = None) -> str:
        """The event log as text, one event a line: identical for identical runs."""
        return "\n".join(str(e) for e in self.events(kind, node))

    def clear_log(self) -> None:
        self._events.clear()

    def limit_log(self, max_events: int) -> None:
        """Keep only the newest ``max_events`` events from now on. A long-running TCP broker logs
        several events per batch for as long as it runs; unbounded, that log is a slow memory leak."""
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._events = deque(self._events, maxlen=max_events)

    # ------------------------------------------------------------------------------------- internals

    def _push(self, t: int, kind: int, payload: Any) -> None:
        self._seq += 1
        heappush(self._heap, (t, self._seq, kind, payload))

    def _idle(self) -> bool:
        return self._live == 0

    def _enter(self) -> None:
        if self._running:
            raise RuntimeError("SimNetwork is already running (run_* and step are not reentrant)")
        self._running = True

    def _run(self, deadline: int, until: Callable[[], bool] | None) -> bool:
        self._enter()
        heap = self._heap
        dispatch = self._dispatch
        n = 0
        wall0 = time.perf_counter()
        try:
            while heap and heap[0][0] <= deadline:
                t, _, kind, payload = heappop(heap)
                self._now = t
                if dispatch(t, kind, payload):
                    n += 1
                    if until is not None and until():
                        return True
            if deadline > self._now:
                self._now = deadline
            return False
        finally:
            self._running = False
            self.stats.events += n
            self.stats.wall_s += time.perf_counter() - wall0

    def _dispatch(self, t: int, kind: int, payload: Any) -> bool:
        """Run one queue entry; False if it was dead (cancelled timer, stale tick) and did nothing."""
        if kind == _MSG:
            src, dst, msg, inc = payload
            st = self._nodes.get(dst)
            if st is None:  # removed while the message was on its way
                self._live -= 1
                self._drop(src, dst, msg, "dst gone")
            elif st.inc != inc:
                self._live -= 1
                self._drop(src, dst, msg, "dst crashed")
            elif self._cuts and (src, dst) in self._cuts:
                self._live -= 1
                self._drop(src, dst, msg, "cut")
            elif st.paused:
                st.held.append((kind, payload))
            else:
                self._live -= 1
                self._deliver(st, payload, t)
            return True
        if kind == _TIMER:
            timer = self._timers.get(payload)  # payload: the timer id
            if timer is None:
                return False
            st = self._nodes[timer.node]
            if st.paused:
                st.held.append((kind, payload))
            else:
                del self._timers[payload]
                self._live -= 1
                self._fire(st, timer, t)
            return True
        if kind == _TICK:
            node, inc = payload
            st = self._nodes.get(node)
            if st is None or st.inc != inc or not st.up:
                return False
            if st.paused:
                st.tick_held = True  # missed ticks collapse into one, run on resume
            else:
                self._tick(node, st, t)
            return True
        self._live -= 1
        payload()
        return True

    def _deliver(self, st: _NodeState, payload: tuple, t: int) -> None:
        src, dst, msg, _ = payload
        self.stats.delivered += 1
        if self._log_traffic:
            self._events.append(Event(t, dst, "deliver", {"src": src, "msg": msg}))
        st.on_message(src, msg, t)

    def _fire(self, st: _NodeState, timer: _Timer, t: int) -> None:
        self.stats.timers_fired += 1
        target = timer.target
        if callable(target):
            target(t)
        else:
            st.node.on_timer(target, t)

    def _tick(self, node: NodeId, st: _NodeState, t: int) -> None:
        # Re-arm first so a tick handler that crashes its own node leaves no live chain behind.
        self._push(t + st.tick_ms, _TICK, (node, st.inc))
        st.node.on_tick(t)

    def _drop(self, src: NodeId, dst: NodeId, msg: Any, reason: str) -> bool:
        self.stats.dropped += 1
        if self._log_drops:
            self._events.append(Event(self._now, src, "drop", {"dst": dst, "msg": msg, "reason": reason}))
        return False

    def _drop_held(self, held: list[tuple[int, Any]]) -> int:
        """Drop held messages of a crashed node (held timers die with the node's timer table)."""
        n = 0
        for kind, payload in held:
            if kind == _MSG:
                n += 1
                self._live -= 1
                self._drop(payload[0], payload[1], payload[2], "dst crashed")
        return n

    def _timed_resume(self, node: NodeId, gen: int) -> None:
        st = self._nodes.get(node)
        if st is not None and st.paused and st.pause_gen == gen:
            self.resume(node)


# ------------------------------------------------------------------------------------ fault schedules


@dataclass(frozen=True, slots=True)
class Fault:
    """One scheduled action: ``SimNetwork.<action>(*args)`` at ``time_ms`` after the schedule starts."""

    time_ms: int
    action: Literal["crash", "restart", "pause", "resume", "cut", "heal"]
    args: tuple

    def __str__(self) -> str:
        if self.action == "cut":
            a, b, one_way = self.args
            what = f"cut {a} {'->' if one_way else '<->'} {b}"
        elif self.action == "heal":
            what = f"heal {self.args[0]} <-> {self.args[1]}"
        else:
            what = f"{self.action} {self.args[0]}"
        return f"{self.time_ms:>8} ms  {what}"


FaultKind = Literal["crash", "pause", "cut"]


@dataclass(frozen=True)
class FaultSchedule:
    """A list of faults, each a start action paired with its end (restart, resume, heal).

    ``random`` builds one from a seed; ``apply`` schedules it on a network with ``SimNetwork.at``.
    Every fault ends by ``duration_ms`` so a test can then check that the system recovers.
    """

    faults: tuple[Fault, ...]
    seed: int | None = None

    def __iter__(self) -> Iterator[Fault]:
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def __str__(self) -> str:
        head = f"FaultSchedule(seed={self.seed}, {len(self.faults)} actions)"
        return "\n".join([head, *(str(f) for f in self.faults)])

    @classmethod
    def random(
        cls,
        seed: int,
        nodes: Sequence[NodeId],
        duration_ms: int,
        *,
        kinds: Collection[FaultKind] = ("crash", "pause", "cut"),
        max_crashed: int = 1,
        max_paused: int = 1,
        max_cuts: int = 1,
        gap_ms: tuple[int, int] = (100, 1000),
        fault_ms: tuple[int, int] = (100, 2000),
        one_way_ratio: float = 0.3,
    ) -> FaultSchedule:
        """A reproducible random schedule over ``nodes`` (their order matters) within ``duration_ms``.

        A new fault is tried every ``gap_ms`` (uniform) and lasts ``fault_ms`` (uniform, clipped to the
        end). Constraints hold at every instant: at most ``max_crashed`` nodes down, ``max_paused`` paused,
        ``max_cuts`` pairs cut; a node is never crashed and paused at once; a pair is cut once at a time.
        A draw that would break one is skipped; the schedule depends only on the arguments.
        """
        unknown = set(kinds) - {"crash", "pause", "cut"}
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of crash, pause, cut (got {sorted(kinds)})")
        rng = random.Random(seed)
        kinds = sorted(kinds)  # a set's order is not stable across runs
        faults: list[Fault] = []
        active: list[tuple[int, str, Any]] = []  # (end_ms, kind, node or frozenset pair)
        t = 0
        while True:
            t += rng.randint(*gap_ms)
            if t >= duration_ms:
                break
            active = [a for a in active if a[0] > t]
            kind = rng.choice(kinds)
            end = min(t + rng.randint(*fault_ms), duration_ms)
            busy = {a[2] for a in active if a[1] != "cut"}
            if kind in ("crash", "pause"):
                limit = max_crashed if kind == "crash" else max_paused
                candidates = [n for n in nodes if n not in busy]
                if not candidates:
                    continue
                n = rng.choice(candidates)
                if sum(1 for a in active if a[1] == kind) >= limit:
                    continue
                stop = "restart" if kind == "crash" else "resume"
                faults += [Fault(t, kind, (n,)), Fault(end, stop, (n,))]
                active.append((end, kind, n))
            else:
                if len(nodes) < 2:
                    continue
                a, b = rng.sample(list(nodes), 2)
                one_way = rng.random() < one_way_ratio
                pair = frozenset((a, b))
                cuts = [x for x in active if x[1] == "cut"]
                if len(cuts) >= max_cuts or any(x[2] == pair for x in cuts):
                    continue
                faults += [Fault(t, "cut", (a, b, one_way)), Fault(end, "heal", (a, b))]
                active.append((end, "cut", pair))
        # Stable sort: an end and a new start at the same instant keep end-first order.
        faults.sort(key=lambda f: f.time_ms)
        return cls(tuple(faults), seed)

    def apply(self, net: SimNetwork, start_ms: int | None = None) -> None:
        """Schedule every action on ``net``, relative to ``start_ms`` (default: now)."""
        base = net.now_ms() if start_ms is None else start_ms
        for f in self.faults:
            net.at(base + f.time_ms, partial(getattr(net, f.action), *f.args))
