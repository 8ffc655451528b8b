"""``SnapshotGenerator``: a node writes its metadata image as a snapshot once enough was committed since its
last one (Kafka's ``image.publisher.SnapshotGenerator``, KIP-630).

Controllers and brokers alike count the bytes of the committed batches they replay; when they reach
``metadata.log.max.record.bytes.between.snapshots``, or ``metadata.log.max.snapshot.interval.ms`` has
passed since the last snapshot with something new committed, the image is written with
``image_records`` (the records that rebuild it) as snapshot ``(image offset + 1, image epoch)``. The
snapshot is of committed state only: the generator sees an image only after its batch is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.image_writer import image_records
from kafkalite.metadata.serde import serialize
from kafkalite.raft.metadata_log import Batch, MetadataLogConfig
from kafkalite.raft.snapshot import SnapshotId

Emit = Callable[[SnapshotId, Sequence[bytes], int], bool]
"""Writes a snapshot: (id, framed records, last contained log timestamp) -> whether it was written."""


class SnapshotGenerator:
    def __init__(self, config: MetadataLogConfig, emit: Emit, now_ms: Callable[[], int]) -> None:
        self.config = config
        self.emit = emit
        self.now_ms = now_ms
        self.bytes_since_last = 0
        self.last_snapshot_ms = now_ms()
        self.written: list[SnapshotId] = []

    def on_commit(self, batch: Batch, image: MetadataImage) -> bool:
        """``image`` is the committed state after ``batch``; snapshot it if a trigger fired."""
        self.bytes_since_last += batch.size_in_bytes
        now = self.now_ms()
        interval = self.config.max_snapshot_interval_ms
        if self.bytes_since_last < self.config.max_record_bytes_between_snapshots and not (
            interval > 0 and now - self.last_snapshot_ms >= interval
        ):
            return False
        sid = SnapshotId(image.offset + 1, image.epoch)
        records = [serialize(r) for r in image_records(image)]
        self.bytes_since_last = 0
        self.last_snapshot_ms = now
        if self.emit(sid, records, batch.append_timestamp):
            self.written.append(sid)
            return True
        return False

    def on_load_snapshot(self) -> None:
        """A snapshot replaced the state: count from it."""
        self.bytes_since_last = 0
        self.last_snapshot_ms = self.now_ms()


__all__ = ["SnapshotGenerator"]
