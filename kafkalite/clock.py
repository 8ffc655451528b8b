"""Injected time. Nothing in kafkalite reads the wall clock except ``SystemClock``.

Notebooks and tests pass a ``ManualClock`` so that timestamps, segment rolls and retention happen at
the same virtual moments on every run.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds since the epoch."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError(f"a clock cannot go back (advance by {ms} ms)")
        self._now += ms
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError(f"a clock cannot go back (from {self._now} to {now_ms})")
        self._now = now_ms
