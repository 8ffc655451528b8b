"""``LogManager``: the broker's periodic log housekeeping, as Kafka's ``LogManager`` schedules it.

Every ``log.retention.check.interval.ms`` each replica's log drops the segments that ``retention.ms``,
``retention.bytes`` or the log start offset condemn; every ``log.cleaner.backoff.ms`` the cleaner compacts
the logs of ``cleanup.policy=compact`` topics whose dirty ratio reached ``min.cleanable.dirty.ratio``.
Both stop at the partition's high watermark: what the leader has not committed may still be truncated, so
it neither makes a segment deletable nor supersedes an older value of its key.

The broker calls ``tick`` from its own tick, so no timer exists while nothing is due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kafkalite.errors import KafkaError
from kafkalite.storage.cleaner import LogCleaner

__all__ = ["LogManager"]


class LogManager:
    """Retention and compaction for the partitions one broker hosts (leaders and followers alike)."""

    def __init__(self, config: Any, now_ms: int, log_event: Callable[..., None]) -> None:
        self.retention_check_interval_ms: int = config.log_retention_check_interval_ms
        self.cleaner_enabled: bool = config.log_cleaner_enable
        self.cleaner_backoff_ms: int = config.log_cleaner_backoff_ms
        self._log_event = log_event
        self._cleaner = LogCleaner()
        self._last_retention_ms = now_ms
        self._last_clean_ms = now_ms

    def tick(self, now_ms: int, partitions: Iterable[Any]) -> None:
        """Run whatever is due; ``partitions`` have ``tp``, ``log`` and ``high_watermark``."""
        retention_due = now_ms - self._last_retention_ms >= self.retention_check_interval_ms
        clean_due = self.cleaner_enabled and now_ms - self._last_clean_ms >= self.cleaner_backoff_ms
        if not (retention_due or clean_due):
            return
        if retention_due:
            self._last_retention_ms = now_ms
        if clean_due:
            self._last_clean_ms = now_ms
        for p in list(partitions):
            if retention_due:
                self.apply_retention(p)
            if clean_due and p.log.config.compact:
                self.maybe_clean(p)

    def apply_retention(self, p: Any) -> list[int]:
        """Delete the segments retention condemns below the HW; returns their base offsets."""
        try:
            deleted = p.log.delete_old_segments(high_watermark=p.high_watermark)
        except KafkaError as exc:  # a closed or read-only log: skip it this round, as Kafka logs and goes on
            self._log_event("retention_failed", tp=str(p.tp), error=str(exc))
            return []
        if deleted:
            self._log_event(
                "log_retention", tp=str(p.tp), segments=deleted, log_start_offset=p.log.log_start_offset
            )
        return deleted

    def maybe_clean(self, p: Any) -> bool:
        """Compact ``p``'s log if its dirty ratio says so; True when a pass ran."""
        hw = p.high_watermark
        if not self._cleaner.needs_cleaning(p.log, hw):
            return False
        try:
            stats = self._cleaner.clean(p.log, force=False, high_watermark=hw)
        except KafkaError as exc:
            self._log_event("cleaner_failed", tp=str(p.tp), error=str(exc))
            return False
        self._log_event(
            "log_cleaned",
            tp=str(p.tp),
            first_dirty_offset=stats.first_dirty_offset,
            end_offset=stats.end_offset,
            dirty_ratio=round(stats.dirty_ratio, 3),
            records_removed=stats.records_removed,
        )
        return True
