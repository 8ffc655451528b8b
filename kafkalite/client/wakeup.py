"""The single timer a client's event loop runs on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Wakeup:
    """Run ``callback(now_ms)`` at the earliest time anyone asked for, with one timer on the network.

    A client asks "run no later than t" many times per loop (linger expiry, request deadlines,
    backoffs); only an earlier request moves the timer.
    """

    __slots__ = ("_node", "_callback", "at", "_timer")

    def __init__(self, node: Any, callback: Callable[[int], None]) -> None:
        self._node = node
        self._callback = callback
        self.at: int | None = None  # when the loop runs next, None if nothing is scheduled
        self._timer: int | None = None

    def schedule(self, at: int) -> None:
        if self.at is not None and self.at <= at:
            return
        self.cancel()
        now = self._node.now_ms()
        self.at = max(at, now)
        self._timer = self._node.set_timer(self.at - now, self._fire)

    def cancel(self) -> None:
        """Drop the pending run (a crashed node's timers are gone anyway; this forgets them too)."""
        if self._timer is not None:
            self._node.cancel_timer(self._timer)
        self.at = self._timer = None

    def _fire(self, now_ms: int) -> None:
        self.at = self._timer = None
        self._callback(now_ms)
