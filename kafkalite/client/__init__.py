"""Kafka's clients: ``Producer`` (with its partitioners) and ``Consumer`` (with the group assignors)."""

from __future__ import annotations

from typing import Any

__all__ = ["Consumer", "Producer"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a light submodule (partitioner, assignors) does not load the producer.
    if name == "Producer":
        from kafkalite.client.producer import Producer

        return Producer
    if name == "Consumer":
        from kafkalite.client.consumer import Consumer

        return Consumer
    raise AttributeError(f"module 'kafkalite.client' has no attribute {name!r}")
