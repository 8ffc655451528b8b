"""``MetadataLoader``: replays committed metadata batches into a ``MetadataImage`` and hands each new
image, with the delta that made it, to the publishers (Kafka's ``image.loader.MetadataLoader``).

A node's state derived from metadata (a broker's metadata cache and replicas, a test's checker) is a
publisher; it sees the batches in log order, one delta per batch. A snapshot (KIP-630) replaces the
image whole: the publishers get a delta from the old image to it (topics gone from it removed, every
partition in it changed), so a broker that was away while topics came and went catches up.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkalite.metadata.delta import MetadataDelta, replay_all
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import RemoveTopicRecord, TopicRecord
from kafkalite.metadata.serde import deserialize
from kafkalite.raft import Batch
from kafkalite.raft.snapshot import SnapshotReader

Publisher = Callable[[MetadataDelta, MetadataImage], None]


def snapshot_image(reader: SnapshotReader) -> MetadataImage:
    """The image a snapshot holds: its records replayed into an empty image, as of its last offset."""
    sid = reader.snapshot_id
    return replay_all([deserialize(v)[0] for v in reader.records], offset=sid.end_offset - 1, epoch=sid.epoch)


def snapshot_delta(old: MetadataImage, reader: SnapshotReader) -> MetadataDelta:
    """What changed from ``old`` to the snapshot's image, as a delta over ``old`` (Kafka's loader does
    the same with a delta that forgets whatever the snapshot does not name)."""
    delta = MetadataDelta(old)
    records = [deserialize(v)[0] for v in reader.records]
    ids = {r.topic_id for r in records if isinstance(r, TopicRecord)}
    for tid in old.topics:
        if tid not in ids:
            delta.replay(RemoveTopicRecord(topic_id=tid))
    for r in records:
        delta.replay(r)
    return delta


class MetadataLoader:
    """A ``RaftListener``; ``snapshot_generator`` (if set) snapshots the image as it grows."""

    def __init__(self, publishers: list[Publisher] | None = None) -> None:
        self.image = MetadataImage()
        self.publishers: list[Publisher] = list(publishers or ())
        self.snapshot_generator = None

    def handle_commit(self, batch: Batch) -> None:
        delta = MetadataDelta(self.image)
        for i, value in enumerate(batch.records):
            record, _ = deserialize(value or b"")
            delta.replay(record, batch.base_offset + i)
        self.image = delta.apply(batch.last_offset, batch.epoch)
        for publish in self.publishers:
            publish(delta, self.image)
        if self.snapshot_generator is not None:
            self.snapshot_generator.on_commit(batch, self.image)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        delta = snapshot_delta(self.image, reader)
        self.image = snapshot_image(reader)
        for publish in self.publishers:
            publish(delta, self.image)
        if self.snapshot_generator is not None:
            self.snapshot_generator.on_load_snapshot()


__all__ = ["MetadataLoader", "Publisher", "snapshot_delta", "snapshot_image"]
