"""DeadlineTimer keeps one timer at a moving deadline and replaces it only when the deadline moves."""

from __future__ import annotations

from kafkalite.net.deadline_timer import DeadlineTimer


class _Timers:
    def __init__(self) -> None:
        self.live: dict[int, tuple[int, object]] = {}
        self.next = 0

    def set_timer(self, delay: int, target: object) -> int:
        self.next += 1
        self.live[self.next] = (delay, target)
        return self.next

    def cancel_timer(self, tid: int) -> None:
        del self.live[tid]


def test_one_timer_replaced_only_when_the_deadline_moves():
    t = _Timers()
    d = DeadlineTimer(t.set_timer, t.cancel_timer, "tick")
    d.arm(100, now_ms=40)
    assert list(t.live.values()) == [(60, "tick")]
    d.arm(100, now_ms=50)  # same deadline: the timer stays
    assert list(t.live) == [1]
    d.arm(80, now_ms=50)  # moved: replaced
    assert list(t.live.values()) == [(30, "tick")] and d.deadline == 80
    d.arm(None, now_ms=60)  # nothing due: no timer
    assert t.live == {} and d.deadline is None


def test_a_deadline_already_past_fires_on_the_next_millisecond_and_rearms_after_firing():
    t = _Timers()
    d = DeadlineTimer(t.set_timer, t.cancel_timer, "tick")
    d.arm(10, now_ms=50)
    assert list(t.live.values()) == [(1, "tick")]
    t.live.clear()  # it ran
    d.fired()
    d.arm(10, now_ms=51)  # the same deadline again after it fired: a new timer
    assert list(t.live.values()) == [(1, "tick")]


def test_forget_drops_the_handle_of_a_timer_that_died_with_its_node():
    t = _Timers()
    d = DeadlineTimer(t.set_timer, t.cancel_timer, "tick")
    d.arm(100, now_ms=0)
    d.forget()
    assert d.deadline is None and list(t.live) == [1]  # not cancelled: the node's timers are gone anyway
