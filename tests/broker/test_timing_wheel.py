"""The broker's timing wheel: every task runs at its own millisecond, once, unless cancelled."""

from __future__ import annotations

import heapq
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.timing_wheel import SystemTimer


class NodeTimers:
    """A node's ``set_timer`` / ``cancel_timer`` on a virtual clock."""

    def __init__(self, now: int = 0) -> None:
        self.now = now
        self._heap: list[tuple[int, int]] = []
        self._callbacks: dict[int, object] = {}
        self._ids = itertools.count(1)
        self.set_count = 0

    def set_timer(self, delay_ms: int, callback) -> int:
        assert delay_ms >= 0
        tid = next(self._ids)
        self._callbacks[tid] = callback
        heapq.heappush(self._heap, (self.now + delay_ms, tid))
        self.set_count += 1
        return tid

    def cancel_timer(self, tid: int) -> None:
        self._callbacks.pop(tid, None)

    @property
    def pending(self) -> int:
        return len(self._callbacks)

    def run_until(self, t: int) -> None:
        while self._heap and self._heap[0][0] <= t:
            at, tid = heapq.heappop(self._heap)
            callback = self._callbacks.pop(tid, None)
            if callback is not None:
                self.now = at
                callback(at)
        self.now = t


def make(now: int = 0, errors: list | None = None) -> tuple[SystemTimer, NodeTimers]:
    node = NodeTimers(now)
    sink = errors if errors is not None else []
    return SystemTimer(lambda: node.now, node.set_timer, node.cancel_timer, sink.append), node


def test_each_task_runs_at_its_own_millisecond_on_every_level() -> None:
    timer, node = make(now=7)
    ran: list[tuple[int, int]] = []
    delays = [0, 1, 19, 20, 21, 399, 400, 401, 7_999, 8_000, 30_000, 30_500, 160_001, 3_200_123, 70_000_000]
    for d in delays:
        timer.add(d, lambda d=d: ran.append((d, node.now)))
    assert timer.size == len(delays)
    node.run_until(80_000_000)
    assert ran == [(d, 7 + d) for d in delays]
    assert timer.size == 0 and node.pending == 0


def test_a_cancelled_task_never_runs_and_cancelling_twice_or_late_is_harmless() -> None:
    timer, node = make()
    ran = []
    keep = timer.add(30_000, lambda: ran.append("keep"))
    drop = timer.add(30_000, lambda: ran.append("drop"))
    drop.cancel()
    drop.cancel()
    node.run_until(30_000)
    keep.cancel()  # it already ran
    assert ran == ["keep"] and timer.size == 0


def test_a_task_added_due_runs_from_the_timer_not_inside_add() -> None:
    timer, node = make(now=100)
    ran = []
    timer.add(0, lambda: ran.append(node.now))
    timer.add(-5, lambda: ran.append(node.now))
    assert ran == []
    node.run_until(100)
    assert ran == [100, 100]


def test_tasks_can_add_and_cancel_others_while_they_run() -> None:
    timer, node = make()
    ran = []
    tasks = []

    def first() -> None:
        ran.append("first")
        tasks[0].cancel()  # due in the same millisecond, after this one
        timer.add(0, lambda: ran.append(("again", node.now)))
        timer.add(25, lambda: ran.append(("next", node.now)))

    timer.add(50, first)
    tasks.append(timer.add(50, lambda: ran.append("later")))
    node.run_until(1_000)
    assert ran == ["first", ("again", 50), ("next", 75)]


def test_a_task_that_raises_is_reported_and_the_rest_still_run() -> None:
    errors: list[BaseException] = []
    timer, node = make(errors=errors)
    ran = []

    def bad() -> None:
        raise ValueError("boom")

    timer.add(10, bad)
    timer.add(10, lambda: ran.append("ok"))
    timer.add(11, lambda: ran.append("after"))
    node.run_until(100)
    assert ran == ["ok", "after"]
    assert [str(e) for e in errors] == ["boom"]


def test_tasks_that_come_and_go_share_one_node_timer() -> None:
    # acks=all: a produce's timeout is added and cancelled for every batch.
    timer, node = make()
    for ms in range(5_000):
        node.run_until(ms)
        timer.add(30_000, lambda: None).cancel()
    assert node.set_count == 1
    node.run_until(100_000)  # the timer fires once, finds nothing, and is not set again
    assert node.pending == 0 and node.set_count == 1


def test_shutdown_forgets_every_task_and_the_node_timer() -> None:
    timer, node = make()
    ran = []
    for d in (0, 5, 500, 50_000):
        timer.add(d, lambda: ran.append(1))
    timer.shutdown()
    assert timer.size == 0 and node.pending == 0
    node.run_until(100_000)
    assert ran == []
    timer.add(10, lambda: ran.append(node.now))  # usable again
    node.run_until(100_010)
    assert ran == [100_010]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-3, 200_000)),
        st.tuples(st.just("cancel"), st.integers(0, 1_000)),
        st.tuples(st.just("advance"), st.integers(0, 70_000)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 10_000_000), script=ops)
def test_matches_a_plain_schedule(start: int, script: list[tuple[str, int]]) -> None:
    """Whatever the adds, cancels and waits: a task runs exactly at max(now, its expiration), once."""
    timer, node = make(now=start)
    tasks = []
    expected: dict[int, int] = {}
    ran: dict[int, int] = {}

    def run(i: int) -> None:
        assert i not in ran
        ran[i] = node.now

    for kind, n in script:
        if kind == "add":
            i = len(tasks)
            tasks.append(timer.add(n, lambda i=i: run(i)))
            expected[i] = node.now + max(n, 0)
        elif kind == "cancel" and tasks:
            i = n % len(tasks)
            tasks[i].cancel()
            if i not in ran:
                expected.pop(i, None)
        else:
            node.run_until(node.now + n)
            assert ran == {i: t for i, t in expected.items() if t <= node.now}
    node.run_until(node.now + 300_000)
    assert ran == expected
    assert timer.size == 0
