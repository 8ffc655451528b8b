"""``MetadataLoader``: replays committed metadata batches into a ``MetadataImage`` and hands each new
image, with the delta that made it, to the publishers (Kafka's ``image.loader.MetadataLoader``).

A node's state derived from metadata (a broker's metadata cache and replicas, a test's checker) is a
publisher; it sees the batches in log order, one delta per batch.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkalite.metadata.delta import MetadataDelta
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.serde import deserialize
from kafkalite.raft import Batch

Publisher = Callable[[MetadataDelta, MetadataImage], None]


class MetadataLoader:
    """A ``RaftListener``."""

    def __init__(self, publishers: list[Publisher] | None = None) -> None:
        self.image = MetadataImage()
        self.publishers: list[Publisher] = list(publishers or ())

    def handle_commit(self, batch: Batch) -> None:
        delta = MetadataDelta(self.image)
        for i, value in enumerate(batch.records):
            record, _ = deserialize(value or b"")
            delta.replay(record, batch.base_offset + i)
        self.image = delta.apply(batch.last_offset, batch.epoch)
        for publish in self.publishers:
            publish(delta, self.image)


__all__ = ["MetadataLoader", "Publisher"]
