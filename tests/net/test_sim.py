"""Tests for the deterministic simulator: delivery, latency, faults, driving, the event log, schedules."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.clock import Clock
from kafkalite.net.sim import BaseNode, Event, FaultSchedule, SimNetwork

SETTINGS = settings(max_examples=50, deadline=None)


class Recorder(BaseNode):
    """Remembers (time, src, msg) of everything it receives, plus hook calls."""

    def __init__(self) -> None:
        self.got: list[tuple[int, Any, Any]] = []
        self.timers: list[tuple[int, Any]] = []
        self.ticks: list[int] = []
        self.crashes = 0
        self.restarts: list[int] = []

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        self.got.append((now_ms, src, msg))

    def on_timer(self, token: Any, now_ms: int) -> None:
        self.timers.append((now_ms, token))

    def on_tick(self, now_ms: int) -> None:
        self.ticks.append(now_ms)

    def on_crash(self) -> None:
        self.crashes += 1

    def on_restart(self, now_ms: int) -> None:
        self.restarts.append(now_ms)

    @property
    def msgs(self) -> list[Any]:
        return [m for _, _, m in self.got]


class Pinger(BaseNode):
    """Sends ``n`` pings to ``peer`` one after another, each after the previous pong; retries on timeout."""

    def __init__(self, peer: Any, n: int, timeout_ms: int = 0) -> None:
        self.peer, self.n, self.timeout_ms = peer, n, timeout_ms
        self.done = 0
        self.timer: int | None = None

    def start(self) -> None:
        self._ping()

    def _ping(self) -> None:
        self.send(self.peer, ("ping", self.done))
        if self.timeout_ms:
            self.timer = self.set_timer(self.timeout_ms, self._retry)

    def _retry(self, now_ms: int) -> None:
        self.log("retry", seq=self.done)
        self._ping()

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        kind, seq = msg
        if kind == "pong" and seq == self.done:
            if self.timer is not None:
                self.cancel_timer(self.timer)
            self.done += 1
            if self.done < self.n:
                self._ping()


class Ponger(BaseNode):
    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        self.send(src, ("pong", msg[1]))


def two(net: SimNetwork) -> tuple[Recorder, Recorder]:
    return net.add_node(1, Recorder()), net.add_node(2, Recorder())


# ------------------------------------------------------------------------------------------ basics


def test_ping_pong_example() -> None:
    net = SimNetwork(seed=1, latency_ms=3)
    ping = net.add_node("client", Pinger(peer=0, n=10))
    net.add_node(0, Ponger())
    ping.start()
    assert net.run_until(lambda: ping.done == 10, timeout_ms=1_000)
    assert net.now_ms() == 10 * 2 * 3  # one round trip is two one-way latencies
    assert net.stats.sent == net.stats.delivered == 20
    assert [e.kind for e in net.events(node="client")][:2] == ["send", "deliver"]


def test_clock_is_a_kafkalite_clock_and_follows_virtual_time() -> None:
    net = SimNetwork(start_ms=1_000)
    clock: Clock = net.clock
    assert clock.now_ms() == 1_000
    net.run_for(250)
    assert clock.now_ms() == net.now_ms() == 1_250


def test_latency_and_per_link_override() -> None:
    net = SimNetwork(latency_ms=5)
    a, b = two(net)
    net.add_node(3, Recorder())
    net.set_latency(1, 3, 40, one_way=True)
    net.send(1, 2, "x")
    net.send(1, 3, "y")
    net.send(3, 1, "z")  # the override was one way: back uses the default
    net.run_for(100)
    assert b.got == [(5, 1, "x")]
    assert net.node(3).got == [(40, 1, "y")]
    assert a.got == [(5, 3, "z")]


def test_jitter_stays_within_bounds() -> None:
    net = SimNetwork(seed=3, latency_ms=10, jitter_ms=20, fifo=False)
    _, b = two(net)
    for i in range(500):
        net.send(1, 2, i)
    net.run_for(100)
    times = {t for t, _, _ in b.got}
    assert min(times) >= 10 and max(times) <= 30 and len(times) > 10


@SETTINGS
@given(
    seed=st.integers(0, 2**32),
    gaps=st.lists(st.integers(0, 5), min_size=2, max_size=60),
    jitter=st.integers(0, 50),
)
def test_links_are_fifo_even_with_jitter(seed: int, gaps: list[int], jitter: int) -> None:
    net = SimNetwork(seed=seed, latency_ms=2, jitter_ms=jitter)
    _, b = two(net)
    for i, gap in enumerate(gaps):
        net.send(1, 2, i)
        net.run_for(gap)
    net.run_until_idle()
    assert b.msgs == list(range(len(gaps)))
    assert all(t >= 2 for t, _, _ in b.got)


def test_without_fifo_jitter_reorders() -> None:
    net = SimNetwork(seed=5, latency_ms=1, jitter_ms=30, fifo=False)
    _, b = two(net)
    for i in range(100):
        net.send(1, 2, i)
    net.run_until_idle()
    assert sorted(b.msgs) == list(range(100)) and b.msgs != list(range(100))


def test_extra_delay_and_removal() -> None:
    net = SimNetwork(latency_ms=1)
    _, b = two(net)
    net.delay(1, 2, 50)
    net.send(1, 2, "slow")
    net.run_until_idle()
    net.delay(1, 2, 0)
    net.send(1, 2, "fast")
    net.run_until_idle()
    assert b.got == [(51, 1, "slow"), (52, 1, "fast")]


def test_ties_resolve_in_scheduling_order() -> None:
    net = SimNetwork(latency_ms=0)
    order: list[str] = []
    for name in "abcde":
        net.at(10, lambda name=name: order.append(name))
    net.run_for(10)
    assert order == list("abcde")


def test_unknown_destination_and_bad_registration_raise() -> None:
    net = SimNetwork()
    net.add_node(1, Ponger())
    with pytest.raises(KeyError):
        net.send(1, 99, "x")
    with pytest.raises(ValueError):
        net.add_node(1, Ponger())
    with pytest.raises(ValueError):
        net.add_node(2, Ponger(), tick_ms=10)  # no on_tick


# ------------------------------------------------------------------------------------------ timers


def test_timers_fire_cancel_and_tokens() -> None:
    net = SimNetwork()
    a, _ = two(net)
    fired: list[int] = []
    t1 = net.set_timer(1, 10, fired.append)
    t2 = net.set_timer(1, 20, fired.append)
    net.set_timer(1, 30, "token")
    assert net.cancel_timer(t2) is True
    assert net.cancel_timer(t2) is False
    assert net.pending() == 2
    assert net.run_until_idle()
    assert fired == [10] and a.timers == [(30, "token")]
    assert net.cancel_timer(t1) is False  # already fired
    assert net.stats.timers_fired == 2


def test_ticks_run_periodically_and_do_not_block_idle() -> None:
    net = SimNetwork()
    node = net.add_node(1, Recorder(), tick_ms=100)
    net.run_for(350)
    assert node.ticks == [100, 200, 300]
    assert net.run_until_idle(max_ms=10)


# ------------------------------------------------------------------------------------------ driving


def test_run_until_times_out_with_clock_at_deadline() -> None:
    net = SimNetwork()
    two(net)
    assert net.run_until(lambda: False, timeout_ms=500) is False
    assert net.now_ms() == 500


def test_run_until_stops_at_the_satisfying_event() -> None:
    net = SimNetwork(latency_ms=7)
    _, b = two(net)
    net.send(1, 2, "a")
    net.at(100, lambda: net.send(1, 2, "b"))
    assert net.run_until(lambda: len(b.got) == 1, timeout_ms=1_000)
    assert net.now_ms() == 7 and net.pending() == 1


def test_step_runs_one_event_at_a_time() -> None:
    net = SimNetwork(latency_ms=4)
    _, b = two(net)
    net.send(1, 2, "a")
    net.send(1, 2, "b")
    tid = net.set_timer(1, 1, lambda now: None)
    net.cancel_timer(tid)  # dead entries are skipped, not counted as a step
    assert net.step() and b.msgs == ["a"] and net.now_ms() == 4
    assert net.step() and b.msgs == ["a", "b"]
    assert net.step() is False


def test_run_until_idle_reports_stuck_work() -> None:
    net = SimNetwork()
    two(net)
    net.pause(2)  # paused with no end: its message cannot be delivered
    net.send(1, 2, "x")
    assert net.run_until_idle(max_ms=1_000) is False
    assert net.now_ms() == 1_000


def test_driving_is_not_reentrant() -> None:
    net = SimNetwork()
    net.at(1, lambda: net.run_for(1))
    with pytest.raises(RuntimeError):
        net.run_for(5)


def test_cannot_schedule_in_the_past() -> None:
    net = SimNetwork()
    net.run_for(10)
    with pytest.raises(ValueError):
        net.at(5, lambda: None)


# ------------------------------------------------------------------------------------------ crashes


def test_crash_drops_messages_and_timers_and_restart_calls_hook() -> None:
    net = SimNetwork(latency_ms=10)
    a, b = two(net)
    fired: list[int] = []
    net.set_timer(2, 5, fired.append)
    net.send(1, 2, "in flight")
    net.send(2, 1, "from the victim")  # already on the wire: still arrives
    net.at(3, lambda: net.crash(2))
    net.run_for(4)
    assert b.crashes == 1 and not net.is_up(2)
    assert net.send(1, 2, "to a dead node") is False
    with pytest.raises(RuntimeError):
        net.set_timer(2, 1, "x")
    net.run_for(50)
    assert b.got == [] and fired == []
    assert a.msgs == ["from the victim"]
    net.restart(2)
    assert b.restarts == [54] and net.is_up(2)
    net.send(1, 2, "after restart")
    net.run_until_idle()
    assert b.msgs == ["after restart"]
    drops = net.events("drop")
    assert [(e.time_ms, e.fields["reason"]) for e in drops] == [(4, "dst down"), (10, "dst crashed")]
    assert [e.kind for e in net.events(node=2) if e.kind in ("crash", "restart")] == ["crash", "restart"]


def test_message_in_flight_across_crash_and_restart_is_lost() -> None:
    net = SimNetwork(latency_ms=100)
    _, b = two(net)
    net.send(1, 2, "old connection")
    net.at(10, lambda: net.crash(2))
    net.at(20, lambda: net.restart(2))
    net.run_until_idle()
    assert b.got == [] and net.stats.dropped == 1


def test_ticks_stop_on_crash_and_resume_after_restart() -> None:
    net = SimNetwork()
    node = net.add_node(1, Recorder(), tick_ms=100)
    net.at(150, lambda: net.crash(1))
    net.at(420, lambda: net.restart(1))
    net.run_for(700)
    assert node.ticks == [100, 520, 620]


# ------------------------------------------------------------------------------------------ pauses


def test_pause_holds_messages_and_timers_then_delivers_in_order() -> None:
    net = SimNetwork(latency_ms=1)
    _, b = two(net)
    net.set_timer(2, 15, "t")
    net.pause(2, ms=30)
    for i in range(3):
        net.at(10 * i, lambda i=i: net.send(1, 2, i))
    net.run_for(29)
    assert b.got == [] and b.timers == []
    net.run_for(10)
    assert b.got == [(30, 1, 0), (30, 1, 1), (30, 1, 2)]
    assert b.timers == [(30, "t")]
    assert net.events("resume", node=2)[0].fields == {"held": 4}


def test_pause_collapses_missed_ticks() -> None:
    net = SimNetwork()
    node = net.add_node(1, Recorder(), tick_ms=10)
    net.at(5, lambda: net.pause(1, ms=100))
    net.run_for(130)
    assert node.ticks == [105, 115, 125]


def test_manual_resume_and_repause_ignore_the_old_timed_resume() -> None:
    net = SimNetwork()
    _, b = two(net)
    net.pause(2, ms=50)
    net.at(10, lambda: net.resume(2))
    net.at(20, lambda: net.pause(2))  # indefinite: the resume planned for 50 must not end it
    net.at(60, lambda: net.send(1, 2, "x"))
    net.run_for(100)
    assert net.is_paused(2) and b.got == []
    net.resume(2)
    assert b.got == [(100, 1, "x")]


def test_crash_while_paused_loses_held_messages() -> None:
    net = SimNetwork()
    _, b = two(net)
    net.pause(2)
    net.send(1, 2, "x")
    net.set_timer(2, 1, "t")
    net.run_for(5)
    net.crash(2)
    assert net.pending() == 0 and net.stats.dropped == 1
    net.restart(2)
    net.run_for(5)
    assert b.got == [] and b.timers == []


# ------------------------------------------------------------------------------------------ links


def test_two_way_cut_and_heal() -> None:
    net = SimNetwork()
    a, b = two(net)
    net.cut(1, 2)
    assert net.send(1, 2, "x") is False and net.send(2, 1, "y") is False
    net.heal(1, 2)
    net.send(1, 2, "x2")
    net.send(2, 1, "y2")
    net.run_until_idle()
    assert a.msgs == ["y2"] and b.msgs == ["x2"]


def test_one_way_cut() -> None:
    net = SimNetwork()
    a, b = two(net)
    net.cut(1, 2, one_way=True)
    assert net.is_cut(1, 2) and not net.is_cut(2, 1)
    net.send(1, 2, "lost")
    net.send(2, 1, "arrives")
    net.run_until_idle()
    assert a.msgs == ["arrives"] and b.msgs == []


def test_cut_loses_messages_in_flight() -> None:
    net = SimNetwork(latency_ms=10)
    _, b = two(net)
    net.send(1, 2, "x")
    net.at(5, lambda: net.cut(1, 2))
    net.run_until_idle()
    assert b.got == [] and net.events("drop")[0].fields["reason"] == "cut"


def test_partition_groups_and_heal_all() -> None:
    net = SimNetwork()
    nodes = {i: net.add_node(i, Recorder()) for i in (1, 2, 3, 4)}
    net.add_node("c", Recorder())  # in no group: keeps all its links
    net.partition([[1, 2], [3, 4]])
    for src in (1, 2, 3, 4, "c"):
        for dst in (1, 2, 3, 4):
            if src != dst:
                net.send(src, dst, src)
    net.run_until_idle()
    assert sorted(nodes[1].msgs, key=str) == [2, "c"]
    assert sorted(nodes[3].msgs, key=str) == [4, "c"]
    net.heal_all()
    net.send(1, 4, "healed")
    net.run_until_idle()
    assert nodes[4].msgs[-1] == "healed"
    assert net.events("partition")[0].fields == {"groups": [[1, 2], [3, 4]]}


def test_drop_probability_is_seeded_and_about_right() -> None:
    def run(seed: int) -> list[Any]:
        net = SimNetwork(seed=seed, log_messages="none")
        _, b = two(net)
        net.drop(1, 2, 0.3)
        for i in range(10_000):
            net.send(1, 2, i)
        net.run_until_idle()
        assert net.stats.dropped + net.stats.delivered == 10_000
        return b.msgs

    got = run(7)
    assert 0.28 < 1 - len(got) / 10_000 < 0.32
    assert got == run(7) and got != run(8)


def test_heal_clears_drop_and_delay_but_not_latency() -> None:
    net = SimNetwork()
    _, b = two(net)
    net.set_latency(1, 2, 9)
    net.drop(1, 2, 1.0)
    net.delay(1, 2, 100)
    assert net.send(1, 2, "lost") is False
    net.heal(1, 2)
    net.send(1, 2, "x")
    net.run_until_idle()
    assert b.got == [(9, 1, "x")]


# ------------------------------------------------------------------------------------------ the log


def chaos_run(seed: int, log_messages: str = "all") -> SimNetwork:
    """A small lossy, jittery, faulty ping-pong: the history depends on every seeded choice."""
    net = SimNetwork(seed=seed, latency_ms=2, jitter_ms=5, log_messages=log_messages)  # type: ignore[arg-type]
    pingers = [net.add_node(f"c{i}", Pinger(peer=i, n=30, timeout_ms=40)) for i in range(3)]
    for i in range(3):
        net.add_node(i, Ponger())
    net.drop("c0", 0, 0.2)
    FaultSchedule.random(seed, [0, 1, 2], 2_000, gap_ms=(50, 300), fault_ms=(20, 200)).apply(net)
    for p in pingers:
        p.start()
    net.run_for(3_000)
    return net


def test_same_seed_same_history_byte_for_byte() -> None:
    first, second = chaos_run(42), chaos_run(42)
    assert first.format_log() == second.format_log()
    assert len(first.events()) > 100 and first.events("retry")
    assert first.stats.as_dict() | {"wall_s": 0} == second.stats.as_dict() | {"wall_s": 0}
    assert chaos_run(43).format_log() != first.format_log()


def test_jitter_alone_makes_seeds_differ() -> None:
    def log(seed: int) -> str:
        net = SimNetwork(seed=seed, jitter_ms=10)
        a, b = two(net)
        for i in range(20):
            net.send(1, 2, i)
            net.send(2, 1, i)
        net.run_until_idle()
        return net.format_log()

    assert log(1) == log(1) and log(1) != log(2)


def test_message_logging_levels_keep_faults() -> None:
    quiet = chaos_run(42, "none")
    loud = chaos_run(42)
    faults = {"crash", "restart", "pause", "resume", "cut", "heal", "retry"}
    assert quiet.format_log(faults) == loud.format_log(faults)
    assert not quiet.events({"send", "deliver", "drop"})
    drops = chaos_run(42, "drops")
    assert drops.events("drop") == loud.events("drop") and not drops.events("send")


def test_event_filters_and_node_log() -> None:
    net = SimNetwork()
    a, _ = two(net)
    a.log("hello", x=1)
    net.send(1, 2, "m")
    net.run_until_idle()
    assert net.events("hello") == [Event(0, 1, "hello", {"x": 1})]
    assert [e.kind for e in net.events(node=1)] == ["hello", "send"]
    assert [e.kind for e in net.events({"send", "deliver"})] == ["send", "deliver"]
    assert str(net.events("send")[0]) == "       0          1 send      dst=2 msg='m' at=1"


# ------------------------------------------------------------------------------------------ schedules


@SETTINGS
@given(
    seed=st.integers(0, 2**32),
    n_nodes=st.integers(1, 5),
    max_crashed=st.integers(0, 3),
    max_paused=st.integers(0, 2),
    max_cuts=st.integers(0, 3),
)
def test_fault_schedule_is_reproducible_and_respects_constraints(
    seed: int, n_nodes: int, max_crashed: int, max_paused: int, max_cuts: int
) -> None:
    nodes = list(range(n_nodes))
    kw = dict(max_crashed=max_crashed, max_paused=max_paused, max_cuts=max_cuts, gap_ms=(10, 200))
    sched = FaultSchedule.random(seed, nodes, 5_000, **kw)
    assert sched == FaultSchedule.random(seed, nodes, 5_000, **kw)
    assert str(sched) == str(FaultSchedule.random(seed, nodes, 5_000, **kw))
    crashed: set[int] = set()
    paused: set[int] = set()
    cut: set[frozenset[int]] = set()
    times = [f.time_ms for f in sched]
    assert times == sorted(times) and all(0 < t <= 5_000 for t in times)
    for f in sched:
        if f.action == "crash":
            assert f.args[0] not in crashed | paused
            crashed.add(f.args[0])
        elif f.action == "restart":
            crashed.remove(f.args[0])
        elif f.action == "pause":
            assert f.args[0] not in crashed | paused
            paused.add(f.args[0])
        elif f.action == "resume":
            paused.remove(f.args[0])
        elif f.action == "cut":
            pair = frozenset(f.args[:2])
            assert pair not in cut and len(pair) == 2
            cut.add(pair)
        else:
            cut.remove(frozenset(f.args))
        assert len(crashed) <= max_crashed and len(paused) <= max_paused and len(cut) <= max_cuts
    assert not crashed and not paused and not cut  # everything ends by the duration


def test_fault_schedule_applies_to_a_network() -> None:
    sched = FaultSchedule.random(9, [0, 1, 2], 10_000, max_crashed=2)
    assert len(sched) > 10 and str(sched).startswith("FaultSchedule(seed=9,")
    net = SimNetwork(seed=9)
    for i in range(3):
        net.add_node(i, Recorder(), tick_ms=50)
    down_max = 0

    def watch() -> None:
        nonlocal down_max
        down_max = max(down_max, sum(not net.is_up(i) for i in range(3)))

    for t in range(0, 10_001, 5):
        net.at(t, watch)
    sched.apply(net, start_ms=0)
    net.run_for(10_001)
    assert 1 <= down_max <= 2
    assert all(net.is_up(i) and not net.is_paused(i) for i in range(3))
    assert not net.is_cut(0, 1) and not net.is_cut(1, 2) and not net.is_cut(0, 2)
    starts = [f for f in sched if f.action in ("crash", "pause", "cut")]
    assert len(net.events({"crash", "pause", "cut"})) == len(starts)
    assert all(net.node(i).crashes == len(net.events("crash", node=i)) for i in range(3))


def test_fault_schedule_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        FaultSchedule.random(1, [1, 2], 1_000, kinds=("meteor",))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ speed


def test_ping_pong_is_fast_enough() -> None:
    net = SimNetwork(log_messages="none")
    ping = net.add_node("client", Pinger(peer=0, n=20_000))
    net.add_node(0, Ponger())
    ping.start()
    start = time.perf_counter()
    assert net.run_until_idle()
    elapsed = time.perf_counter() - start
    assert net.stats.events == 40_000 and ping.done == 20_000
    assert net.stats.events_per_second > 20_000 and elapsed < 2  # generous: CI machines vary
