"""The replicated log: ``__cluster_metadata-0`` as a real kafkalite ``Log`` (Kafka's ``KafkaMetadataLog``).

Batches are record batch v2 on disk with the leader epoch stamped in each header, and the leader epoch
checkpoint says which epoch wrote which offsets, so a follower's truncation on a diverging epoch and a
restart after a crash reuse Kafka's own formats. Every append is fsync'd before the node reports the new
end offset to anyone (a follower's next fetch offset, the leader's own count toward the high watermark).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkalite.records.batch import build_batch
from kafkalite.records.control import ControlRecordType, control_key
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH
from kafkalite.storage.log import Log

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
_LOG_CONFIG = {"segment.bytes": 8 << 20, "segment.index.bytes": 64 << 10}


@dataclass(frozen=True, slots=True)
class Batch:
    """A committed batch of the state machine's records (Kafka's ``raft.Batch``)."""

    base_offset: int
    last_offset: int
    epoch: int
    records: tuple[bytes | None, ...]
    append_timestamp: int


def leader_change_value(leader_id: int, voters: Sequence[int]) -> bytes:
    """The LeaderChange control record's value: version 0, the leader, the voters (kafkalite's layout)."""
    return struct.pack(f">hii{len(voters)}i", 0, leader_id, len(voters), *voters)


def parse_leader_change(value: bytes) -> tuple[int, tuple[int, ...]]:
    """``(leader id, voters)`` of a LeaderChange control record's value (``leader_change_value``)."""
    _version, leader, n = struct.unpack_from(">hii", value)
    return leader, struct.unpack_from(f">{n}i", value, 10)


class KafkaMetadataLog:
    """The Raft log of one node, in ``<dir>/__cluster_metadata-0``."""

    def __init__(self, log_dir: str | Path, clock) -> None:
        self.dir = Path(log_dir) / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
        self.log = Log.open(self.dir, _LOG_CONFIG, clock=clock)
        self.clock = clock

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch in the log (0 for an empty log, as Kafka's)."""
        epoch = self.log.leader_epoch_cache.latest_epoch
        return 0 if epoch == UNDEFINED_EPOCH else epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch', end)``: the largest epoch <= ``epoch`` in this log and the offset where it ends."""
        return self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> tuple[int, int] | None:
        """None if this log holds a fetcher's log up to ``offset`` (whose last batch has ``epoch``);
        otherwise the diverging ``(epoch, end_offset)`` the fetcher must truncate to first."""
        if offset == 0:
            return None
        found_epoch, end = self.end_offset_for_epoch(epoch)
        if found_epoch == UNDEFINED_EPOCH:
            return (0, 0)  # nothing in common that we can name: start over
        if found_epoch != epoch or end < offset:
            return (found_epoch, end)
        return None

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
        offset = max(offset, 0)
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
                )
            if n == 0:
                return

    # ------------------------------------------------------------------------------------- closing
    def crash(self, lose_unflushed: bool = True) -> None:
        self.log.crash(lose_unflushed=lose_unflushed)

    def close(self) -> None:
        self.log.close()
