"""The replicated log: ``__cluster_metadata-0`` as a real kafkalite ``Log`` (Kafka's ``KafkaMetadataLog``).

Batches are record batch v2 on disk with the leader epoch stamped in each header, and the leader epoch
checkpoint says which epoch wrote which offsets, so a follower's truncation on a diverging epoch and a
restart after a crash reuse Kafka's own formats. Every append is fsync'd before the node reports the new
end offset to anyone (a follower's next fetch offset, the leader's own count toward the high watermark).

Snapshots (KIP-630, ``kafkalite.raft.snapshot``) sit beside the segments. The log may start at a
snapshot's end offset instead of 0: ``delete_before_snapshot`` moves the log start offset up to a
snapshot and deletes the segments wholly below it, which ``maybe_clean`` does, as Kafka's, only while
the log and its snapshots exceed ``metadata.max.retention.bytes`` or a snapshot is older than
``metadata.max.retention.ms``, and never past the latest snapshot. A fetch below the log start offset
is then answered with the latest snapshot's id (``validate_offset_and_epoch``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

from kafkalite.raft.snapshot import (
    RawSnapshotWriter,
    SnapshotId,
    SnapshotReader,
    parse_snapshot_name,
    read_snapshot,
    snapshot_filename,
    write_snapshot,
)
from kafkalite.records.batch import build_batch
from kafkalite.records.control import ControlRecordType, control_key
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH
from kafkalite.storage.log import Log

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
MAX_BATCH_SIZE_BYTES = 8 << 20  # the largest batch the metadata log takes, as Kafka's Raft


@dataclass(frozen=True, slots=True)
class MetadataLogConfig:
    """The metadata log's and its snapshots' settings, with Kafka's names and defaults."""

    max_record_bytes_between_snapshots: int = 20 << 20
    """metadata.log.max.record.bytes.between.snapshots: a node snapshots its state once this many bytes
    of committed batches came after its last snapshot."""
    max_snapshot_interval_ms: int = 3_600_000
    """metadata.log.max.snapshot.interval.ms: ... or once the last one is this old and anything new was
    committed since (0 turns the time trigger off)."""
    retention_bytes: int = 100 << 20
    """metadata.max.retention.bytes: log plus snapshots above this let the cleaner drop the oldest
    snapshot and the log below the next one (-1: no size limit)."""
    retention_ms: int = 604_800_000
    """metadata.max.retention.ms: a snapshot older than this (by its last contained record) goes the
    same way (-1: no time limit)."""
    segment_bytes: int = 8 << 20
    """metadata.log.segment.bytes. Kafka's default is 1 GiB; kafkalite keeps its segments at the 8 MiB
    minimum so that deleting what a snapshot covers frees space in a small cluster too."""
    segment_min_bytes: int = 8 << 20
    """metadata.log.segment.min.bytes (internal, for tests): the smallest segment_bytes accepted."""

    KEYS = {
        "metadata.log.max.record.bytes.between.snapshots": "max_record_bytes_between_snapshots",
        "metadata.log.max.snapshot.interval.ms": "max_snapshot_interval_ms",
        "metadata.max.retention.bytes": "retention_bytes",
        "metadata.max.retention.ms": "retention_ms",
        "metadata.log.segment.bytes": "segment_bytes",
        "metadata.log.segment.min.bytes": "segment_min_bytes",
    }

    def __post_init__(self) -> None:
        if self.max_record_bytes_between_snapshots < 1:
            raise ValueError(
                "metadata.log.max.record.bytes.between.snapshots must be >= 1, "
                f"got {self.max_record_bytes_between_snapshots}"
            )
        if self.max_snapshot_interval_ms < 0:
            raise ValueError(
                f"metadata.log.max.snapshot.interval.ms must be >= 0, got {self.max_snapshot_interval_ms}"
            )
        if self.segment_bytes < self.segment_min_bytes:
            raise ValueError(
                f"Cannot set metadata.log.segment.bytes below {self.segment_min_bytes}: {self.segment_bytes}"
            )

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> MetadataLogConfig:
        """The ``metadata.log.*`` / ``metadata.max.retention.*`` keys of ``props``; others are ignored."""
        return cls(**{attr: int(props[k]) for k, attr in cls.KEYS.items() if k in props})


class ValidOffsetAndEpoch(NamedTuple):
    """A leader's verdict on a fetcher's (offset, last epoch): Kafka's ``ValidOffsetAndEpoch``."""

    kind: str
    """``valid``; ``diverging`` (truncate to ``offset`` of ``epoch`` first); ``snapshot`` (fetch the
    snapshot ``(offset, epoch)``: the log no longer holds where the fetcher is)."""
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Batch:
    """A committed batch of the state machine's records (Kafka's ``raft.Batch``)."""

    base_offset: int
    last_offset: int
    epoch: int
    records: tuple[bytes | None, ...]
    append_timestamp: int
    size_in_bytes: int = 0
    """The batch's bytes in the log (what the snapshot generator counts)."""


def leader_change_value(leader_id: int, voters: Sequence[int]) -> bytes:
    """The LeaderChange control record's value: version 0, the leader, the voters (kafkalite's layout)."""
    return struct.pack(f">hii{len(voters)}i", 0, leader_id, len(voters), *voters)


def parse_leader_change(value: bytes) -> tuple[int, tuple[int, ...]]:
    """``(leader id, voters)`` of a LeaderChange control record's value (``leader_change_value``)."""
    _version, leader, n = struct.unpack_from(">hii", value)
    return leader, struct.unpack_from(f">{n}i", value, 10)


class KafkaMetadataLog:
    """The Raft log of one node, in ``<dir>/__cluster_metadata-0``, with its snapshots."""

    def __init__(self, log_dir: str | Path, clock, config: MetadataLogConfig | None = None) -> None:
        self.config = config or MetadataLogConfig()
        self.dir = Path(log_dir) / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
        # As Kafka's: no time or size retention on the segments themselves; only snapshots move the start.
        props = {
            "segment.bytes": self.config.segment_bytes,
            "segment.index.bytes": 64 << 10,
            "retention.ms": -1,
            "retention.bytes": -1,
            "file.delete.delay.ms": 0,
            # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES, which its metadata log takes as max.message.bytes
            "max.message.bytes": MAX_BATCH_SIZE_BYTES,
        }
        self.log = Log.open(self.dir, props, clock=clock)
        self.clock = clock
        self.snapshots: dict[SnapshotId, None] = {}
        self._recover_snapshots()
        # A follower that crashed after downloading a snapshot but before truncating its log: do it now.
        self.truncate_to_latest_snapshot()

    def _recover_snapshots(self) -> None:
        """Keep the complete snapshots at or above the log start; delete partial, deleted and older ones."""
        start = self.log.log_start_offset
        keep: list[SnapshotId] = []
        for path in sorted(self.dir.iterdir()):
            parsed = parse_snapshot_name(path.name)
            if parsed is None:
                continue
            sid, kind = parsed
            if kind or sid.end_offset < start:
                path.unlink(missing_ok=True)
            else:
                keep.append(sid)
        keep.sort()
        if start > 0 and not (keep and keep[-1].end_offset >= start):
            raise RuntimeError(
                f"Inconsistent snapshot state in {self.dir}: the log starts at {start} but no snapshot "
                f"reaches it (latest: {keep[-1] if keep else None})"
            )
        self.snapshots = dict.fromkeys(keep)

    # ------------------------------------------------------------------------------------- offsets
    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self.snapshots) if self.snapshots else None

    def earliest_snapshot_id(self) -> SnapshotId | None:
        return min(self.snapshots) if self.snapshots else None

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch in the log (0 for an empty log, as Kafka's); for a log that is
        empty after a snapshot, the snapshot's epoch."""
        epoch = self.log.leader_epoch_cache.latest_epoch
        if epoch != UNDEFINED_EPOCH:
            return epoch
        latest = self.latest_snapshot_id()
        if latest is None:
            return 0
        if latest.end_offset == self.start_offset == self.end_offset:
            return latest.epoch
        raise RuntimeError(
            f"{self.dir}: no epoch in the log but a snapshot {latest}; expected it to end at the log's start "
            f"{self.start_offset} and end {self.end_offset}"
        )

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch', end)``: the largest epoch <= ``epoch`` in this log and the offset where it ends; for
        an epoch older than the log, the snapshot the log starts at."""
        found, end = self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)
        earliest = self.earliest_snapshot_id()
        if found == UNDEFINED_EPOCH:
            return self.last_fetched_epoch, self.end_offset
        if earliest is not None and end == earliest.end_offset and found == epoch:
            return earliest.epoch, earliest.end_offset
        return found, end

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """Whether this log holds a fetcher's log up to ``offset`` (whose last batch has ``epoch``): valid,
        the diverging ``(end, epoch)`` the fetcher must truncate to, or the snapshot it must fetch."""
        if self.start_offset == 0 and offset == 0:
            return ValidOffsetAndEpoch("valid", 0, 0)
        earliest = self.earliest_snapshot_id()
        if earliest is not None and (
            offset < self.start_offset
            or (offset == self.start_offset and epoch != earliest.epoch)
            or epoch < earliest.epoch
        ):
            latest = self.latest_snapshot_id()
            assert latest is not None
            return ValidOffsetAndEpoch("snapshot", latest.end_offset, latest.epoch)
        found_epoch, end = self.end_offset_for_epoch(epoch)
        if found_epoch != epoch or end < offset:
            return ValidOffsetAndEpoch("diverging", end, found_epoch)
        return ValidOffsetAndEpoch("valid", offset, epoch)

    # ------------------------------------------------------------------------------------- writing
    def append_as_leader(self, records: Sequence[bytes], epoch: int, now_ms: int) -> tuple[int, int]:
        """Append one batch of ``records`` in ``epoch``; returns its (first, last) offsets, fsync'd."""
        batch = build_batch([(None, r) for r in records], timestamp=now_ms, partition_leader_epoch=epoch)
        info = self.log.append(batch, leader_epoch=epoch)
        self.log.flush()
        return info.first_offset, info.last_offset

    def append_leader_change(self, epoch: int, leader_id: int, voters: Sequence[int], now_ms: int) -> int:
        """The new leader's first batch: a LeaderChange control record stamped with its epoch."""
        key = control_key(ControlRecordType.LEADER_CHANGE)
        batch = build_batch(
            [(key, leader_change_value(leader_id, voters))],
            timestamp=now_ms,
            partition_leader_epoch=epoch,
            is_control=True,
        )
        info = self.log.append(batch, leader_epoch=epoch)
        self.log.flush()
        return info.first_offset

    def append_as_follower(self, records: bytes) -> None:
        self.log.append_as_follower(records)
        self.log.flush()

    def truncate_to(self, offset: int) -> bool:
        return self.log.truncate_to(offset)

    def truncate_to_end_offset(self, epoch: int, end_offset: int) -> int:
        """Truncate where the leader's diverging ``(epoch, end_offset)`` says our logs part; returns the
        new end. As Kafka's ``ReplicatedLog.truncateToEndOffset``: if we have that epoch too, keep the
        shorter of the two; if we do not, cut where our own largest epoch below it ends (the leader's
        answer alone can point past our divergence, and would leave us diverging forever)."""
        if epoch == 0:
            offset = min(end_offset, self.end_offset)
        else:
            local_epoch, local_end = self.end_offset_for_epoch(epoch)
            offset = min(local_end, end_offset) if local_epoch == epoch else local_end
        offset = max(offset, self.start_offset)
        self.log.truncate_to(offset)
        return offset

    # ------------------------------------------------------------------------------------- reading
    def read(self, offset: int, max_bytes: int = 1 << 20) -> bytes:
        """Whole batches from ``offset`` (uncommitted ones too: followers need them), as bytes."""
        return self.log.read(offset, max_bytes).records.read()

    def committed_batches(self, start: int, high_watermark: int) -> Iterator[Batch]:
        """The batches in [start, high_watermark), control batches skipped, in order."""
        offset = start
        while offset < high_watermark:
            fs = self.log.read(offset, 1 << 20, max_offset=high_watermark).records
            n = 0
            for b in fs.batches():
                n += 1
                h = b.header
                offset = h.base_offset + h.last_offset_delta + 1
                if h.is_control:
                    continue
                yield Batch(
                    h.base_offset,
                    h.base_offset + h.last_offset_delta,
                    h.partition_leader_epoch,
                    tuple(r.value for r in b.records),
                    h.max_timestamp,
                    h.size,
                )
            if n == 0:
                return

    # ----------------------------------------------------------------------------------- snapshots
    def snapshot_path(self, snapshot_id: SnapshotId) -> Path:
        return self.dir / snapshot_filename(snapshot_id)

    def create_snapshot(
        self,
        snapshot_id: SnapshotId,
        records: Sequence[bytes],
        last_contained_timestamp: int,
        high_watermark: int,
        now_ms: int,
    ) -> Path | None:
        """Write the state machine's ``records`` as of ``snapshot_id`` (Kafka's ``createNewSnapshot``
        checks, then the writer); None if the log already starts past it or the snapshot exists."""
        if snapshot_id.end_offset < self.start_offset or snapshot_id in self.snapshots:
            return None
        if snapshot_id.end_offset > high_watermark:
            raise ValueError(
                f"cannot snapshot at {snapshot_id}: past the high watermark {high_watermark} (not committed)"
            )
        valid = self.validate_offset_and_epoch(snapshot_id.end_offset, snapshot_id.epoch)
        if valid.kind != "valid":
            raise ValueError(f"snapshot id {snapshot_id} is not valid according to the log: {valid}")
        path = write_snapshot(self.dir, snapshot_id, records, last_contained_timestamp, now_ms)
        self.snapshots[snapshot_id] = None
        return path

    def create_new_snapshot_unchecked(self, snapshot_id: SnapshotId) -> RawSnapshotWriter | None:
        """A writer for a snapshot a follower downloads (its offsets lie past this log: no checks)."""
        if snapshot_id in self.snapshots:
            return None
        return RawSnapshotWriter(self.dir, snapshot_id)

    def on_snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        self.snapshots[snapshot_id] = None

    def read_snapshot(self, snapshot_id: SnapshotId) -> SnapshotReader:
        return read_snapshot(self.snapshot_path(snapshot_id), snapshot_id)

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        if snapshot_id not in self.snapshots:
            return None
        try:
            return self.snapshot_path(snapshot_id).stat().st_size
        except FileNotFoundError:
            del self.snapshots[snapshot_id]
            return None

    def read_snapshot_bytes(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Raw bytes of a snapshot file from ``position`` (FetchSnapshot's unaligned records)."""
        with open(self.snapshot_path(snapshot_id), "rb") as f:
            f.seek(position)
            return f.read(max_bytes)

    def truncate_to_latest_snapshot(self) -> bool:
        """If the latest snapshot lies past this log (a downloaded one), drop the log and restart it at
        the snapshot; snapshots before it go. True if it did."""
        latest = self.latest_snapshot_id()
        log_epoch = self.log.leader_epoch_cache.latest_epoch
        log_epoch = 0 if log_epoch == UNDEFINED_EPOCH else log_epoch
        if latest is None or not (
            latest.epoch > log_epoch or (latest.epoch == log_epoch and latest.end_offset > self.end_offset)
        ):
            return False
        self.log.truncate_fully_and_start_at(latest.end_offset)
        self._forget_snapshots_before(latest)
        return True

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Move the log start offset up to ``snapshot_id`` and delete the segments and snapshots below it
        (Kafka's ``deleteBeforeSnapshot``: only to a snapshot we have, never past the latest)."""
        latest = self.latest_snapshot_id()
        if (
            latest is None
            or snapshot_id not in self.snapshots
            or not self.start_offset < snapshot_id.end_offset <= latest.end_offset
            or snapshot_id.end_offset > self.end_offset
        ):
            return False
        self.log.delete_records(snapshot_id.end_offset)
        deleted = self.log.delete_old_segments()
        forgotten = self._forget_snapshots_before(snapshot_id)
        return bool(deleted or forgotten)

    def maybe_clean(self, now_ms: int) -> bool:
        """Kafka's ``maybeClean``: while log plus snapshots exceed ``metadata.max.retention.bytes``, or
        the oldest snapshot is older than ``metadata.max.retention.ms``, drop the oldest snapshot and the
        log up to the next one; the latest snapshot always stays."""
        cleaned = False
        cfg = self.config
        if cfg.retention_bytes >= 0:
            sizes = {s: self.snapshot_size(s) or 0 for s in list(self.snapshots)}
            total = sum(sizes.values())
            for old, nxt in pairwise(sorted(sizes)):
                if self.log.size_bytes + total <= cfg.retention_bytes:
                    break
                total -= sizes[old]
                if not self.delete_before_snapshot(nxt):
                    break
                cleaned = True
        if cfg.retention_ms >= 0:
            ids = sorted(self.snapshots)
            for old, nxt in pairwise(ids):
                if now_ms - self.read_snapshot(old).last_contained_timestamp <= cfg.retention_ms:
                    break
                if not self.delete_before_snapshot(nxt):
                    break
                cleaned = True
        return cleaned

    def _forget_snapshots_before(self, snapshot_id: SnapshotId) -> list[SnapshotId]:
        gone = [s for s in self.snapshots if s < snapshot_id]
        for s in gone:
            del self.snapshots[s]
            self.snapshot_path(s).unlink(missing_ok=True)
        return gone

    # ------------------------------------------------------------------------------------- closing
    def crash(self, lose_unflushed: bool = True) -> None:
        self.log.crash(lose_unflushed=lose_unflushed)

    def close(self) -> None:
        self.log.close()
