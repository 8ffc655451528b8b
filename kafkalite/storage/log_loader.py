"""Recovery when a partition's log opens (Kafka's ``LogLoader``).

``LogLoader.load`` finishes what a crash interrupted and fills a ``LocalLog``: it removes ``.deleted``
files and unfinished cleaner output (``.cleaned``, ``.tmp``), completes interrupted cleaner swaps
(``.swap``), opens every segment, rebuilds the indexes of closed segments that are missing or
inconsistent, and re-validates every batch of the active segment, truncating a torn or corrupt tail.
A closed segment is never cut: a bad batch found in one is kept and served as an error. Read-only
(a reader beside a live writer), it changes nothing on disk and serves a ``.swap`` file whose segment
the writer already removed. ``RecoveryReport`` says what was found and repaired.

``rebuild_producer_state`` replays the batches past the newest producer snapshot, as Kafka does on open
and after a truncation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kafkalite.errors import KafkaStorageError
from kafkalite.records import iter_batches
from kafkalite.storage.local_log import LocalLog
from kafkalite.storage.producer_state import ProducerStateManager
from kafkalite.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    parse_base_offset,
)


@dataclass
class RecoveryReport:
    """What ``Log.open`` found and repaired (printed in the storage chapter)."""

    dir: str
    read_only: bool
    segments_loaded: int = 0
    recovered_segments: list[int] = field(default_factory=list)
    bytes_truncated: int = 0
    truncations: dict[int, str] = field(default_factory=dict)
    indexes_rebuilt: dict[int, str] = field(default_factory=dict)
    corrupt_batches: dict[int, str] = field(default_factory=dict)
    deleted_files_removed: list[str] = field(default_factory=list)
    cleaned_files_removed: list[str] = field(default_factory=list)
    swaps_completed: list[int] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0

    def __str__(self) -> str:
        lines = [
            f"recovery of {self.dir}{' (read-only, nothing written)' if self.read_only else ''}:",
            f"  segments loaded: {self.segments_loaded}, log offsets [{self.log_start_offset}, {self.log_end_offset}]",
            f"  segments scanned with CRC checks: {self.recovered_segments}",
            f"  bytes truncated: {self.bytes_truncated}",
        ]
        lines += [f"    segment {b}: {why}" for b, why in self.truncations.items()]
        lines += [f"  index rebuilt for segment {b}: {why}" for b, why in self.indexes_rebuilt.items()]
        lines += [f"  kept segment {b} with a {why}" for b, why in self.corrupt_batches.items()]
        if self.deleted_files_removed:
            lines.append(f"  finished deletes: {self.deleted_files_removed}")
        if self.cleaned_files_removed:
            lines.append(f"  dropped unfinished cleaner output: {self.cleaned_files_removed}")
        if self.swaps_completed:
            lines.append(f"  completed cleaner swaps for segments: {self.swaps_completed}")
        return "\n".join(lines)


class LogLoader:
    """Loads the segments of ``local.dir`` into ``local``, writing what it did into ``report``."""

    def __init__(self, local: LocalLog, report: RecoveryReport) -> None:
        self.local = local
        self.dir = local.dir
        self.read_only = local.read_only
        self.report = report

    def load(self, read_log_start: Callable[[], int | None]) -> int:
        """Recover the directory; sets the segments, log end offset and recovery point of the local log,
        and returns the log start offset (from ``read_log_start``, the checkpoint, if it has one)."""
        local, report = self.local, self.report
        names = sorted(os.listdir(self.dir))
        if not self.read_only:
            self._remove_temp_files_and_complete_swaps(names)
            names = sorted(os.listdir(self.dir))
        bases = sorted(b for n in names if n.endswith(LOG_SUFFIX) and (b := parse_base_offset(n)) is not None)
        suffix_of = dict.fromkeys(bases, "")
        if self.read_only:
            # A writer may be mid-swap: serve the swap file if the segment it replaces is already gone.
            for n in names:
                if n.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                    b = parse_base_offset(n)
                    if b is not None and b not in suffix_of:
                        suffix_of[b] = SWAP_SUFFIX
            bases = sorted(suffix_of)

        cp = read_log_start()
        segments = [
            self._load_segment(base, suffix_of[base], active=i == len(bases) - 1)
            for i, base in enumerate(bases)
        ]
        if not segments:
            start = cp if cp is not None else 0
            if self.read_only:
                raise KafkaStorageError(f"log directory {self.dir} holds no segments (opened read-only)")
            segments.append(local.new_segment(start))
        local.set_segments(segments)
        local.leo = segments[-1].next_offset
        start = max(cp if cp is not None else 0, segments[0].base_offset)
        log_start = min(start, local.leo)
        local.recovery_point = local.leo
        local.last_flush_ms = local.clock.now_ms()
        report.segments_loaded = len(segments)
        report.log_start_offset = log_start
        report.log_end_offset = local.leo
        return log_start

    def _remove_temp_files_and_complete_swaps(self, names: list[str]) -> None:
        report = self.report
        swaps: list[int] = []
        for name in names:
            p = self.dir / name
            if name.endswith(DELETED_SUFFIX):
                p.unlink(missing_ok=True)
                report.deleted_files_removed.append(name)
            elif name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp"):
                p.unlink(missing_ok=True)
                report.cleaned_files_removed.append(name)
            elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                base = parse_base_offset(name)
                if base is not None:
                    swaps.append(base)
        for base in swaps:
            self._complete_swap(base)

    def _load_segment(self, base: int, suffix: str, active: bool) -> LogSegment:
        local, report = self.local, self.report
        seg = LogSegment.open(
            self.dir, base, local.config, local.clock, suffix=suffix, read_only=self.read_only,
            file_ops=local.file_ops,
        )  # fmt: skip
        problem = None if active else seg.load_state()
        if active or problem:
            if problem:
                report.indexes_rebuilt[base] = problem
            # A closed segment is never cut: its bad bytes are served as an error, not dropped.
            truncated = seg.recover(truncate=active)
            report.recovered_segments.append(base)
            if seg.bad_batch is not None:
                report.corrupt_batches[base] = seg.bad_batch.describe(self.dir.name)
            if truncated:
                report.bytes_truncated += truncated
                report.truncations[base] = (
                    f"{truncated} bytes{' ignored (read-only)' if self.read_only else ' truncated'}: "
                    f"{seg.last_recovery_reason}"
                )
            if not active:
                seg.on_become_inactive()
        return seg

    def _complete_swap(self, base: int) -> None:
        """Finish a cleaner swap interrupted by a crash: the ``.swap`` segment replaces what it covers."""
        local = self.local
        swap = LogSegment.open(
            self.dir, base, local.config, local.clock, suffix=SWAP_SUFFIX, file_ops=local.file_ops
        )
        swap.recover()
        end = swap.next_offset
        for name in os.listdir(self.dir):
            b = parse_base_offset(name)
            if b is None or name.endswith(SWAP_SUFFIX):
                continue
            if base <= b < max(end, base + 1) and not name.endswith(DELETED_SUFFIX):
                (self.dir / name).unlink(missing_ok=True)
        swap.on_become_inactive()
        swap.change_suffix("")
        swap.close()
        self.report.swaps_completed.append(base)


def rebuild_producer_state(
    ps: ProducerStateManager, local: LocalLog, log_start: int, track: Callable[[tuple, int, object], None]
) -> None:
    """Load the newest snapshot at or below the log end and replay the batches after it (from the log
    start when there is none) through ``track(header fields, base offset, batch bytes)``."""
    off = ps.load_latest(local.leo)
    start = max(off, log_start)
    if off < log_start:
        ps.reset(log_start)
        start = log_start
    for f, data in _iter_header_fields(local, start):
        track(f, f[0], data)
    ps.advance(local.leo)
    if off >= 0 and off < log_start:
        ps.evict_before(log_start)


def _iter_header_fields(local: LocalLog, start: int) -> Iterator[tuple[tuple, memoryview]]:
    """``(header fields, batch bytes)`` of the batches ending at or after ``start``, segment by segment."""
    for seg in local.segments:
        if seg.next_offset <= start or seg.size == 0:
            continue
        seg.write_deferred()
        data = memoryview(os.pread(seg.file.fileno(), seg.size, 0))
        end = seg.bad_batch.position if seg.bad_batch is not None else len(data)
        for pos, h in iter_batches(data, 0, end):
            if h.base_offset + h.last_offset_delta >= start:
                yield h.as_tuple(), data[pos : pos + h.batch_length + 12]


__all__ = ["LogLoader", "RecoveryReport", "rebuild_producer_state"]
