"""Kafka's ``IsolationLevel``: what a consumer may read of transactional data.

The consumer's ``isolation.level`` setting names it (``read_committed``), a Fetch or ListOffsets request
carries its id, and the broker bounds what it answers by it, so it sits below the config, the protocol
and the broker alike.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class IsolationLevel(IntEnum):
    """READ_COMMITTED reads only below the last stable offset and skips batches of aborted transactions."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @property
    def config_name(self) -> str:
        """The spelling of ``isolation.level`` (``read_committed``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: Any) -> IsolationLevel:
        """An ``isolation.level`` value (``read_committed``, any case) or a member; ValueError otherwise."""
        if isinstance(value, cls):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        for member in cls:
            if member.config_name == text:
                return member
        raise ValueError(f"not an isolation level: {value!r}")


__all__ = ["IsolationLevel"]
