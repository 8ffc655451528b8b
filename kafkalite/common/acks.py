"""The producer's ``acks``: which replicas must have a batch before its leader answers the Produce request.

Kafka's setting takes ``all``, ``-1``, ``0`` or ``1``; the Produce request carries the number, and the
broker's produce path acts on it (answer never, after the leader's append, or once the ISR has the batch).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class Acks(IntEnum):
    """ALL (-1): every in-sync replica; NONE (0): no answer at all; LEADER (1): the leader's own append."""

    ALL = -1
    NONE = 0
    LEADER = 1

    @property
    def config_name(self) -> str:
        """How the producer's ``acks`` prints it (``all``, ``0``, ``1``)."""
        return "all" if self is Acks.ALL else str(int(self))

    @classmethod
    def parse(cls, value: Any) -> Acks:
        """``all``, ``-1``, ``0``, ``1`` (string or int) or a member; ValueError for anything else."""
        if isinstance(value, str):
            text = value.strip().lower()
            value = -1 if text == "all" else text
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"not an acks level: {value!r}") from None
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"not an acks level: {value!r}")
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"not an acks level: {value!r}") from None


__all__ = ["Acks"]
