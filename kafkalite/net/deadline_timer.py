"""``DeadlineTimer``: one timer of a node kept at a deadline that moves.

A component such as the quorum controller says when it next needs to run (``next_deadline_ms``); its node
polls it after every message and keeps exactly one timer at that time. Re-arming on every message would
flood the timer queue, so the timer is replaced only when the deadline changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["DeadlineTimer"]


class DeadlineTimer:
    """A timer at ``deadline`` or none; ``target`` is what ``set_timer`` runs (a callback or a token).
    ``min_delay_ms``: the least delay it is set with (1 by default: a deadline already past runs in the
    next millisecond, not the current one)."""

    def __init__(
        self,
        set_timer: Callable[[int, Any], int],
        cancel_timer: Callable[[int], Any],
        target: Any,
        *,
        min_delay_ms: int = 1,
    ) -> None:
        self._set_timer = set_timer
        self._cancel_timer = cancel_timer
        self._target = target
        self._min_delay_ms = min_delay_ms
        self._timer: int | None = None
        self.deadline: int | None = None

    def arm(self, deadline: int | None, now_ms: int) -> None:
        """Keep the timer at ``deadline`` (None: no timer), replacing it only if the deadline moved."""
        if deadline == self.deadline and (self._timer is not None or deadline is None):
            return
        self.cancel()
        self.deadline = deadline
        if deadline is not None:
            self._timer = self._set_timer(max(self._min_delay_ms, deadline - now_ms), self._target)

    def fired(self) -> None:
        """The timer ran: there is none left to cancel."""
        self._timer, self.deadline = None, None

    def cancel(self) -> None:
        if self._timer is not None:
            self._cancel_timer(self._timer)
        self.fired()

    def forget(self) -> None:
        """The node died with its timers: drop the handle without cancelling."""
        self.fired()
