"""Which segments retention removes: by age (retention.ms), by total size (retention.bytes) and by the
log start offset (DeleteRecords).

Kafka applies the three rules in that order, always walking from the oldest segment and stopping at the
first one a rule keeps, so a log only ever loses a prefix. Time-based retention compares a segment's
largest record timestamp (not file times) with the clock: a segment expires once even its newest record
is older than ``retention.ms``. The size rule deletes oldest segments while what remains would still be at
least ``retention.bytes``. The active segment is never deleted here (Kafka itself would roll and then
delete it once every record in it expired; kafkalite leaves that to an explicit ``Log.roll``). Segments
reaching past the high watermark, when one is given, are kept as in Kafka.

Deletion itself (in ``Log``) renames a segment's files to ``*.deleted`` and unlinks them after
``file.delete.delay.ms``, so in-flight reads of the old files can finish.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.storage.log import Log
    from kafkalite.storage.segment import LogSegment


def _prefix(segs: list[LogSegment], high_watermark: int | None, rule) -> list[LogSegment]:
    out = []
    for i, seg in enumerate(segs[:-1]):  # never the active segment
        upper = segs[i + 1].base_offset
        if high_watermark is not None and upper > high_watermark:
            break
        if not rule(seg, upper):
            break
        out.append(seg)
    return out


def retention_ms_breached(
    segs: list[LogSegment], retention_ms: int, now_ms: int, high_watermark: int | None = None
) -> list[LogSegment]:
    """Oldest segments whose newest record is more than ``retention.ms`` old."""
    if retention_ms < 0:
        return []
    return _prefix(segs, high_watermark, lambda seg, _up: now_ms - seg.retention_timestamp > retention_ms)


def retention_bytes_breached(
    segs: list[LogSegment], retention_bytes: int, high_watermark: int | None = None
) -> list[LogSegment]:
    """Oldest segments that can go while at least ``retention.bytes`` remain."""
    if retention_bytes < 0:
        return []
    excess = sum(s.size for s in segs) - retention_bytes

    def rule(seg, _up) -> bool:
        nonlocal excess
        if excess - seg.size >= 0:
            excess -= seg.size
            return True
        return False

    return _prefix(segs, high_watermark, rule)


def log_start_offset_breached(
    segs: list[LogSegment], log_start_offset: int, high_watermark: int | None = None
) -> list[LogSegment]:
    """Oldest segments lying entirely below the log start offset."""
    return _prefix(segs, high_watermark, lambda _seg, upper: upper <= log_start_offset)


def deletable_segments(log: Log, now_ms: int, high_watermark: int | None = None) -> list[LogSegment]:
    """Segments to delete now, oldest first: a prefix of the log, active segment excluded.

    The rules run in Kafka's order, each on what the previous left. With ``cleanup.policy`` lacking
    ``delete`` (pure compaction) only the log start offset applies.
    """
    segs = log.segments
    doomed: list[LogSegment] = []
    if log.config.delete:
        doomed += retention_ms_breached(segs, log.config.retention_ms, now_ms, high_watermark)
        segs = segs[len(doomed) :]
        more = retention_bytes_breached(segs, log.config.retention_bytes, high_watermark)
        doomed += more
        segs = segs[len(more) :]
    doomed += log_start_offset_breached(segs, log.log_start_offset, high_watermark)
    return doomed


__all__ = [
    "deletable_segments",
    "log_start_offset_breached",
    "retention_bytes_breached",
    "retention_ms_breached",
]
