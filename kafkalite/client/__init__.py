"""Kafka's clients: the producer (``Producer``), its partitioners and the consumer assignors."""

from __future__ import annotations

from typing import Any

__all__ = ["Producer"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a light submodule (partitioner, assignors) does not load the producer.
    if name == "Producer":
        from kafkalite.client.producer import Producer

        return Producer
    raise AttributeError(f"module 'kafkalite.client' has no attribute {name!r}")
