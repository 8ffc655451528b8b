"""``TopicPartition``, the name of one partition: the one type the wire bindings and every message share."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition's full name. Orders by topic, then partition; prints as Kafka does, ``"orders-0"``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


__all__ = ["TopicPartition"]
