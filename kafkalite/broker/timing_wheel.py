"""Kafka's hierarchical timing wheel (``SystemTimer``, ``TimingWheel``, ``TimerTaskList``, ``TimerTask``).

A broker keeps a timeout for every request that waits: each acks=all produce in the purgatory, each
long-polling fetch, each request it sends itself. Nearly all of them are cancelled long before they
fire, so adding and cancelling must be cheap. The wheel makes both O(1):

- level 0 has ``wheel_size`` buckets of ``tick_ms`` each; level ``n + 1`` has buckets as wide as the
  whole of level ``n``, and is created the first time a task lands that far out;
- a task goes into the lowest level whose span covers it, and cancelling takes it out of its bucket;
- the buckets, not the tasks, wait in a queue ordered by expiration. When one comes due the wheel's
  clock moves to it and each task in it is added again, which drops it one level closer (or runs it).

With Kafka's defaults (1 ms ticks, 20 buckets) a 30 s produce timeout sits in a bucket 8 s wide that it
shares with every other timeout set in those 8 s. Sans-I/O: ``SystemTimer`` reads time through
``now_ms`` and waits through one ``set_timer`` at the earliest bucket's expiration.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from kafkalite.net.deadline_timer import DeadlineTimer

__all__ = ["SystemTimer", "TimerTask", "TimerTaskList", "TimingWheel"]


class TimerTask:
    """``run()`` once ``expiration_ms`` has come, unless ``cancel()`` ran first."""

    __slots__ = ("expiration_ms", "run", "bucket")

    def __init__(self, expiration_ms: int, run: Callable[[], Any]) -> None:
        self.expiration_ms = expiration_ms
        self.run = run
        self.bucket: TimerTaskList | None = None  # where the task waits; None once it ran or was cancelled

    def cancel(self) -> None:
        bucket = self.bucket
        if bucket is not None:
            self.bucket = None
            del bucket.tasks[self]
            # The bucket stays queued even when empty: under acks=all one task comes and goes per batch,
            # and the next one usually lands in the same bucket.
            bucket.timer.size -= 1


class TimerTaskList:
    """One bucket: its tasks in the order they came (a dict as an ordered set) and when it expires."""

    __slots__ = ("tasks", "expiration_ms", "timer")

    def __init__(self, timer: SystemTimer) -> None:
        self.tasks: dict[TimerTask, None] = {}
        self.expiration_ms = -1  # -1: not queued
        self.timer = timer


class TimingWheel:
    """One level: ``wheel_size`` buckets of ``tick_ms``, covering ``interval_ms`` from ``current_ms``."""

    __slots__ = ("tick_ms", "wheel_size", "interval_ms", "current_ms", "buckets", "overflow", "_timer")

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int, timer: SystemTimer) -> None:
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.current_ms = start_ms - start_ms % tick_ms  # a multiple of tick_ms
        self.buckets = [TimerTaskList(timer) for _ in range(wheel_size)]
        self.overflow: TimingWheel | None = None
        self._timer = timer

    def add(self, task: TimerTask) -> TimerTaskList | None:
        """Put ``task`` in its bucket; returns the bucket when it must be (re)queued at a new expiration.

        Raises ``_Due`` when the task's time has come (within this level's first tick)."""
        wheel = self
        exp = task.expiration_ms
        while True:
            if exp < wheel.current_ms + wheel.tick_ms:
                raise _Due
            if exp < wheel.current_ms + wheel.interval_ms:
                virtual_id = exp // wheel.tick_ms
                bucket = wheel.buckets[virtual_id % wheel.wheel_size]
                bucket.tasks[task] = None
                task.bucket = bucket
                start = virtual_id * wheel.tick_ms
                if bucket.expiration_ms != start:
                    # a bucket flushed and reused for a later round of this level: queue it again
                    bucket.expiration_ms = start
                    return bucket
                return None
            if wheel.overflow is None:
                wheel.overflow = TimingWheel(
                    wheel.interval_ms, wheel.wheel_size, wheel.current_ms, wheel._timer
                )
            wheel = wheel.overflow

    def advance_clock(self, time_ms: int) -> None:
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel.current_ms + wheel.tick_ms:
            wheel.current_ms = time_ms - time_ms % wheel.tick_ms
            time_ms = wheel.current_ms
            wheel = wheel.overflow


class _Due(Exception):
    """A task added at or past its expiration: it runs at once (from the timer, never inside ``add``)."""


class SystemTimer:
    """Kafka's ``SystemTimer``: ``add(delay_ms, run)`` returns a task to cancel; due tasks run from one
    node timer, each guarded (``on_error`` gets what one raised, and the others still run)."""

    def __init__(
        self,
        now_ms: Callable[[], int],
        set_timer: Callable[[int, Callable[[int], None]], Any],
        cancel_timer: Callable[[Any], Any],
        on_error: Callable[[BaseException], None],
        *,
        tick_ms: int = 1,
        wheel_size: int = 20,
    ) -> None:
        self._now_ms = now_ms
        self._on_error = on_error
        self._wheel = TimingWheel(tick_ms, wheel_size, now_ms(), self)
        self._queue: list[tuple[int, int, TimerTaskList]] = []  # Kafka's DelayQueue of buckets
        self._seq = 0
        self._due = TimerTaskList(self)  # tasks added already expired: run by the next firing
        # The node's one timer, at the earliest queued bucket; a task due now runs in this millisecond.
        self._node_timer = DeadlineTimer(set_timer, cancel_timer, self._fire, min_delay_ms=0)
        self.size = 0
        """Tasks waiting (Kafka's ``SystemTimer.size``)."""

    def add(self, delay_ms: int, run: Callable[[], Any]) -> TimerTask:
        task = TimerTask(self._now_ms() + (delay_ms if delay_ms > 0 else 0), run)
        self.size += 1
        try:
            bucket = self._wheel.add(task)
        except _Due:
            bucket = self._due
            bucket.tasks[task] = None
            task.bucket = bucket
            self._arm(self._now_ms())
            return task
        if bucket is not None:
            self._enqueue(bucket)
            self._arm(bucket.expiration_ms)
        return task

    def _enqueue(self, bucket: TimerTaskList) -> None:
        self._seq += 1
        heappush(self._queue, (bucket.expiration_ms, self._seq, bucket))

    def shutdown(self) -> None:
        """Forget every task (the broker stopped; its requests are gone with it)."""
        for bucket in [self._due, *(entry[2] for entry in self._queue)]:
            for task in bucket.tasks:
                task.bucket = None
            bucket.tasks.clear()
        self._drop_queue()
        self.size = 0
        self._node_timer.cancel()

    def _arm(self, at: int) -> None:
        armed = self._node_timer.deadline
        if armed is None or at < armed:  # only an earlier bucket moves the timer
            self._node_timer.arm(at, self._now_ms())

    def _fire(self, now: int) -> None:
        self._node_timer.fired()
        queue = self._queue
        self._flush(self._due)
        while queue and queue[0][0] <= now:
            exp, _seq, bucket = heappop(queue)
            self._wheel.advance_clock(exp)
            self._flush(bucket)
            self._flush(self._due)
        if self.size == 0:
            self._drop_queue()  # every task ran or was cancelled: the node timer is not set again
        elif queue:
            self._arm(queue[0][0])

    def _drop_queue(self) -> None:
        for _exp, _seq, bucket in self._queue:
            bucket.expiration_ms = -1
        self._queue.clear()

    def _flush(self, bucket: TimerTaskList) -> None:
        """Take every task out of ``bucket``: each goes one level down, or runs when its time has come."""
        bucket.expiration_ms = -1  # a task that lands here again while this runs queues it anew
        for task in list(bucket.tasks):
            if task.bucket is not bucket:
                continue  # cancelled by a task that ran before it
            del bucket.tasks[task]
            task.bucket = None
            if bucket is not self._due:
                try:
                    requeued = self._wheel.add(task)
                except _Due:
                    pass
                else:
                    if requeued is not None:
                        self._enqueue(requeued)
                    continue
            self.size -= 1
            try:
                task.run()
            except Exception as exc:  # noqa: BLE001 - one failing timeout must not stop the others
                self._on_error(exc)
