"""Log compaction (``cleanup.policy=compact``): keep only the latest record for every key.

One pass, as Kafka's cleaner thread does for one log:

1. The *dirty* section runs from the cleaner checkpoint (``cleaner-offset-checkpoint``; the log start
   offset the first time) to the first segment that may not be cleaned yet: the active segment, or an
   earlier one holding records younger than ``min.compaction.lag.ms``.
2. An *offset map* ``key -> last offset`` is built over the dirty section. (Kafka stores 16-byte MD5
   digests of keys in a fixed-size hash table to bound memory; a dict of keys is the same idea.)
3. Every segment below the end of the dirty section is rewritten: a record survives if no later record
   with its key exists in the map. Batches keep their base offset, last offset delta, timestamps,
   producer fields and compression, so offsets never move; a batch left with no records is dropped
   (kept as an empty batch when it carries a producer id, so idempotent producer state survives).
   Batches with nothing removed are copied byte for byte.
4. Tombstones (null values) follow KIP-534: the first time the cleaner keeps a tombstone, the rewritten
   batch gets a *delete horizon* of now + ``delete.retention.ms`` (attribute bit 6, stored in
   baseTimestamp). A later pass after the horizon removes the tombstone, giving consumers
   ``delete.retention.ms`` to see the delete.

Crash safety: the rewrite goes to ``<base>.log.cleaned`` (+ indexes), is renamed to ``.swap`` once
complete, then the old files become ``.deleted`` and the swap files take the real names. ``Log.open``
removes ``.cleaned`` leftovers and completes any ``.swap``, so a crash at any point loses nothing.
Transactional data (aborted records, markers) is copied unchanged: kafkalite does not clean it.
Kafka also merges small adjacent segments into one cleaned segment; kafkalite rewrites segment by segment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafkalite.clock import Clock
from kafkalite.errors import InvalidConfigError
from kafkalite.records import build_batch, decode_batch_tuples
from kafkalite.storage.log import Log
from kafkalite.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment

_CONTROL_BIT = 0x20


@dataclass
class CleanerStats:
    """Before/after figures of one cleaning pass."""

    first_dirty_offset: int = 0
    end_offset: int = 0
    dirty_ratio: float = 0.0
    keys_in_map: int = 0
    segments_cleaned: list[int] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0
    batches_before: int = 0
    batches_after: int = 0
    records_before: int = 0
    records_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    tombstones_horizon_set: int = 0

    def __str__(self) -> str:
        saved = self.bytes_before - self.bytes_after
        pct = 100.0 * saved / self.bytes_before if self.bytes_before else 0.0
        return (
            f"cleaned offsets [{self.first_dirty_offset}, {self.end_offset}) of {len(self.segments_cleaned)} "
            f"segment(s), dirty ratio {self.dirty_ratio:.2f}, {self.keys_in_map} keys in the offset map\n"
            f"  bytes {self.bytes_before} -> {self.bytes_after} ({pct:.1f}% reclaimed), "
            f"records {self.records_before} -> {self.records_after} "
            f"({self.records_removed} removed, {self.tombstones_removed} of them tombstones)"
        )


class LogCleaner:
    """Compacts logs whose ``cleanup.policy`` includes ``compact``."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock

    # ----- planning --------------------------------------------------------------------------------
    def cleanable_range(
        self, log: Log, now_ms: int | None = None, high_watermark: int | None = None
    ) -> tuple[int, int]:
        """``(first_dirty_offset, first_uncleanable_offset)`` of the log.

        With ``high_watermark``, only segments wholly below it are cleanable: a record above it may still
        be truncated away, and must not be what makes an older, committed value of its key disappear.
        """
        now = self._now(log) if now_ms is None else now_ms
        segs = log.segments
        checkpoint = log._read_cleaner_checkpoint()
        first_dirty = log.log_start_offset if checkpoint is None else max(checkpoint, log.log_start_offset)
        end = segs[-1].base_offset
        if high_watermark is not None:
            end = next((seg.base_offset for seg in segs if seg.next_offset > high_watermark), end)
        lag = log.config.min_compaction_lag_ms
        if lag > 0:
            for seg in segs[:-1]:
                if seg.next_offset > first_dirty and seg.largest_timestamp > now - lag:
                    end = seg.base_offset
                    break
        return min(first_dirty, end), end

    def dirty_ratio(self, log: Log, high_watermark: int | None = None) -> float:
        """Bytes in the dirty section over bytes in the cleanable part of the log."""
        first_dirty, end = self.cleanable_range(log, high_watermark=high_watermark)
        clean = dirty = 0
        for seg in log.segments:
            if seg.base_offset >= end:
                break
            if seg.base_offset >= first_dirty or seg.next_offset > first_dirty:
                dirty += seg.size
            else:
                clean += seg.size
        total = clean + dirty
        return dirty / total if total else 0.0

    def needs_cleaning(self, log: Log, high_watermark: int | None = None) -> bool:
        return (
            log.config.compact
            and len(log.segments) > 1  # the active segment is never cleaned
            and self.dirty_ratio(log, high_watermark) >= log.config.min_cleanable_dirty_ratio
        )

    def _now(self, log: Log) -> int:
        return (self.clock or log.clock).now_ms()

    # ----- cleaning --------------------------------------------------------------------------------
    def clean(self, log: Log, *, force: bool = True, high_watermark: int | None = None) -> CleanerStats:
        """One compaction pass. Without ``force`` it only runs at ``min.cleanable.dirty.ratio``;
        ``high_watermark`` bounds the cleanable part (see ``cleanable_range``)."""
        if not log.config.compact:
            raise InvalidConfigError(
                f"log {log.name} has cleanup.policy={log.config.cleanup_policy}; compaction needs 'compact'"
            )
        log._check_writable()
        now = self._now(log)
        first_dirty, end = self.cleanable_range(log, now, high_watermark)
        stats = CleanerStats(
            first_dirty_offset=first_dirty, end_offset=end, dirty_ratio=self.dirty_ratio(log, high_watermark)
        )
        # An explicit (forced) pass also runs with nothing dirty: tombstones whose delete horizon has
        # passed still have to go.
        if end <= log.segments[0].base_offset or (
            not force and (end <= first_dirty or stats.dirty_ratio < log.config.min_cleanable_dirty_ratio)
        ):
            return stats
        with log._lock:
            offset_map = self._build_offset_map(log, first_dirty, end)
            stats.keys_in_map = len(offset_map)
            horizon_for_new = now + log.config.delete_retention_ms
            for seg in log.segments:
                if seg.base_offset >= end:
                    break
                self._clean_segment(log, seg, offset_map, now, horizon_for_new, stats)
            log._write_cleaner_checkpoint(end)
        return stats

    def _build_offset_map(self, log: Log, first_dirty: int, end: int) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        for seg in log.segments:
            if seg.base_offset >= end:
                break
            if seg.next_offset <= first_dirty:
                continue
            fd = seg.file.fileno()
            for pos, _base, size, last, _ts in seg.scan(0, seg.size):
                if last < first_dirty:
                    continue
                h, rows = decode_batch_tuples(os.pread(fd, size, pos))
                if h.attributes & _CONTROL_BIT:
                    continue
                for offset, _t, key, _v, _hd in rows:
                    if key is not None and first_dirty <= offset < end:
                        offset_map[key] = offset
        return offset_map

    def _clean_segment(
        self,
        log: Log,
        seg: LogSegment,
        offset_map: dict[bytes, int],
        now: int,
        horizon_for_new: int,
        stats: CleanerStats,
    ) -> None:
        cleaned = LogSegment.create(
            log.dir, seg.base_offset, log.config, log.clock, suffix=CLEANED_SUFFIX, file_ops=log.file_ops
        )
        fd = seg.file.fileno()
        changed = False
        try:
            for pos, _base, size, _last, _ts in seg.scan(0, seg.size):
                raw = os.pread(fd, size, pos)
                h, rows = decode_batch_tuples(raw)
                stats.batches_before += 1
                stats.records_before += len(rows)
                if h.attributes & _CONTROL_BIT:
                    out = raw
                    stats.records_after += len(rows)
                else:
                    out = self._filter_batch(raw, h, rows, offset_map, now, horizon_for_new, stats)
                if out is not raw:
                    changed = True
                if out is None:
                    continue
                stats.batches_after += 1
                last = h.base_offset + h.last_offset_delta
                max_ts = int.from_bytes(out[35:43], "big", signed=True)
                cleaned.append(out, last, max_ts, last)
            if not changed:  # nothing to reclaim: keep the original files untouched
                cleaned.delete_files()
                stats.bytes_before += seg.size
                stats.bytes_after += seg.size
                return
            cleaned.flush()
            cleaned.on_become_inactive()
            cleaned.change_suffix(SWAP_SUFFIX)
        except BaseException:
            cleaned.delete_files()
            raise
        stats.segments_cleaned.append(seg.base_offset)
        stats.bytes_before += seg.size
        stats.bytes_after += cleaned.size
        log._replace_segments([seg], cleaned)

    def _filter_batch(self, raw, h, rows, offset_map, now, horizon_for_new, stats) -> bytes | None:
        horizon = h.delete_horizon_ms
        kept = []
        tombstone_kept = False
        for row in rows:
            offset, _ts, key, value, _headers = row
            if key is not None:
                latest = offset_map.get(key)
                if latest is not None and offset < latest:
                    stats.records_removed += 1
                    if value is None:
                        stats.tombstones_removed += 1
                    continue
                if value is None:
                    if horizon is not None and now >= horizon:
                        stats.records_removed += 1
                        stats.tombstones_removed += 1
                        continue
                    tombstone_kept = True
            kept.append(row)
        stats.records_after += len(kept)
        needs_horizon = tombstone_kept and horizon is None
        if len(kept) == len(rows) and not needs_horizon:
            return raw
        if not kept and h.producer_id < 0:
            return None
        if needs_horizon:
            horizon = horizon_for_new
            stats.tombstones_horizon_set += sum(1 for r in kept if r[3] is None)
        elif not tombstone_kept:
            horizon = None
        return build_batch(
            [(k, v, hd) for _o, _t, k, v, hd in kept],
            base_offset=h.base_offset,
            timestamp=[t for _o, t, *_ in kept],
            compression=h.compression,
            timestamp_type=h.timestamp_type,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            partition_leader_epoch=h.partition_leader_epoch,
            is_transactional=h.is_transactional,
            offset_deltas=[o - h.base_offset for o, *_ in kept],
            last_offset_delta=h.last_offset_delta,
            max_timestamp=h.max_timestamp if h.timestamp_type == 1 or not kept else None,
            delete_horizon_ms=horizon,
        )


__all__ = ["CleanerStats", "LogCleaner"]
