"""The segment files of one partition directory (Kafka's ``LocalLog``).

``LocalLog`` keeps the ordered segment list, the log end offset, the recovery point (offsets below it
are fsynced) and the aborted-transaction index files, and does what touches only those: roll, flush,
read across segments, truncate, delete (rename to ``.deleted``, unlink after ``file.delete.delay.ms``)
and the cleaner's swap. It knows nothing of producers, leader epochs or the log start offset: ``Log``
(Kafka's ``UnifiedLog``) keeps those, and calls in here under its lock; ``LocalLog`` has none of its
own. An ``OSError`` passes through to ``Log``, which reports the log directory.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from kafkalite.clock import Clock
from kafkalite.config.topic import LogConfig
from kafkalite.errors import CorruptRecordError
from kafkalite.storage.file_ops import FileOps
from kafkalite.storage.file_slice import FileSlice
from kafkalite.storage.segment import DELETED_SUFFIX, BadBatch, LogSegment, parse_base_offset
from kafkalite.storage.transaction_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    append_txn_index,
    read_txn_index,
    txn_index_path,
    write_txn_index,
)


class LocalLog:
    """The segments of ``dir``; ``LogLoader`` fills it when the log opens."""

    def __init__(
        self, dir: Path, config: LogConfig, clock: Clock, read_only: bool, file_ops: FileOps
    ) -> None:
        self.dir = dir
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.file_ops = file_ops
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []  # the segments' base offsets, for bisect
        self.leo = 0
        self.recovery_point = 0
        self.unflushed = 0  # records appended since the last flush (flush.messages)
        self.last_flush_ms = 0
        self.aborted: list[AbortedTxn] = []  # aborted transactions, in marker order (the .txnindex files)
        self.pending_deletes: list[tuple[int, LogSegment]] = []

    def set_segments(self, segments: list[LogSegment]) -> None:
        self.segments = segments
        self.bases = [s.base_offset for s in segments]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(self.dir, base_offset, self.config, self.clock, file_ops=self.file_ops)

    # ===== roll / flush / close =========================================================================
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset; the active one stays if it is empty."""
        old = self.segments[-1]
        old.write_deferred()
        if old.size == 0:
            return old
        old.on_become_inactive()
        # Kafka flushes the finished segment right after a roll (asynchronously); so do we, synchronously.
        old.flush()
        new = self.new_segment(self.leo)
        self.segments.append(new)
        self.bases.append(new.base_offset)
        return new

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point."""
        for seg in reversed(self.segments):
            seg.flush()
            if seg.base_offset <= self.recovery_point:
                break
        self.recovery_point = self.leo
        self.unflushed = 0
        self.last_flush_ms = self.clock.now_ms()

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        for _, seg in self.pending_deletes:
            seg.file.close()

    def crash(self, lose_unflushed: bool) -> int:
        """Close every file without flushing; with ``lose_unflushed`` first cut the bytes past the
        recovery point, as a power loss would. Returns how many offsets were lost."""
        lost = 0
        if lose_unflushed and self.recovery_point < self.leo:
            rp = self.recovery_point
            lost = self.leo - rp
            for seg in self.segments:
                seg.write_deferred()
                if seg.base_offset > rp or (seg.base_offset == rp and seg is not self.segments[0]):
                    seg.delete_files()
                    continue
                found = seg.translate_offset(rp)
                if found is not None:
                    seg._file.truncate(found[0])
                    seg.offset_index.delete()
                    seg.time_index.delete()
                    for p in (seg.index_path, seg.timeindex_path):
                        p.unlink(missing_ok=True)
        for seg in self.segments:
            seg.offset_index._drop_file_handles()
            seg.time_index._drop_file_handles()
            if not seg._file.closed:
                seg._file.close()
        for _, seg in self.pending_deletes:
            seg.file.close()
        return lost

    # ===== read =========================================================================================
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool, verify: bool
    ) -> tuple[FileSlice, BadBatch | None]:
        """Whole batches from the segment holding ``offset`` on (``offset`` is below the log end), and the
        bad batch the slice stops before or consists of, when ``verify`` found one."""
        segs = self.segments
        i = bisect_right(self.bases, offset) - 1
        while 0 <= i < len(segs):
            seg = segs[i]
            max_pos = None
            if max_offset is not None and max_offset < seg.next_offset:
                found = seg.translate_offset(max_offset)
                max_pos = found[0] if found else None
            fs = seg.read(offset, max_bytes, max_position=max_pos, min_one=min_one, verify=verify)
            bad = seg.bad_batch
            if fs is not None:
                if bad is not None and verify and bad.position in (fs.position, fs.end_position):
                    return fs, bad
                return fs, None
            if bad is not None and bad.size is None and offset >= bad.offset:
                # Behind an unreadable header: the offsets up to the next segment cannot be served.
                raise CorruptRecordError(bad.describe(self.dir.name))
            i += 1
        return self.empty_slice(), None

    def empty_slice(self) -> FileSlice:
        seg = self.segments[-1]
        return FileSlice(seg.log_path, seg.size, 0, file=seg.file)

    # ===== truncation / deletion ========================================================================
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at ``offset`` and beyond (``offset`` is below the log end). Returns True when
        ``offset`` lies below the first segment, so the log restarted, empty, at ``offset``."""
        restarted = offset < self.segments[0].base_offset
        if restarted:
            self.replace_all_segments(offset)
        else:
            keep = [s for s in self.segments if s.base_offset <= offset]
            doomed = [s for s in self.segments if s.base_offset > offset]
            self.set_segments(keep)
            self.delete_segments(doomed)
            active = keep[-1]
            active.truncate_to(offset)
            active.make_active()
        self.leo = self.segments[-1].next_offset
        self.recovery_point = min(self.recovery_point, self.leo)
        return restarted

    def replace_all_segments(self, offset: int) -> None:
        """Delete every segment and start one, empty, at ``offset``."""
        doomed = list(self.segments)
        self.set_segments([])
        self.delete_segments(doomed)
        self.set_segments([self.new_segment(offset)])
        self.leo = offset

    def remove_segments(self, doomed: list[LogSegment]) -> None:
        """Take ``doomed`` (a prefix, by retention) out of the list and delete them."""
        gone = {id(s) for s in doomed}
        self.set_segments([s for s in self.segments if id(s) not in gone])
        self.delete_segments(doomed)

    def delete_segments(self, segments: list[LogSegment]) -> None:
        """Rename to ``.deleted`` now; unlink after ``file.delete.delay.ms`` (at once if it is 0)."""
        for seg in segments:
            seg.change_suffix(DELETED_SUFFIX)
            txn_index_path(self.dir, seg.base_offset).unlink(missing_ok=True)
        self.schedule_deletes(segments)

    def schedule_deletes(self, segments: list[LogSegment]) -> None:
        delay = self.config.file_delete_delay_ms
        due = self.clock.now_ms() + delay
        for seg in segments:
            if delay <= 0:
                seg.delete_files()
            else:
                self.pending_deletes.append((due, seg))

    def run_scheduled_deletes(self) -> list[int]:
        """Unlink ``.deleted`` segments whose delay has passed; returns their base offsets."""
        if not self.pending_deletes:
            return []
        now = self.clock.now_ms()
        done, waiting = [], []
        for due, seg in self.pending_deletes:
            if due <= now:
                seg.delete_files()
                done.append(seg.base_offset)
            else:
                waiting.append((due, seg))
        self.pending_deletes = waiting
        return done

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap a cleaned segment in for ``old`` (files of ``new`` carry the ``.swap`` suffix)."""
        idx = self.segments.index(old[0])
        gone = {id(s) for s in old}
        rest = [s for s in self.segments if id(s) not in gone]
        rest.insert(idx, new)
        # Old files become ".deleted" before the swap file takes their name: a crash in between
        # leaves a ".swap" that open() completes and ".deleted" files it removes.
        for seg in old:
            seg.change_suffix(DELETED_SUFFIX)
        new.change_suffix("")
        self.set_segments(rest)
        self.schedule_deletes(old)

    # ===== aborted transactions (.txnindex) =============================================================
    def load_aborted(self) -> None:
        self.aborted = [
            e for seg in self.segments for e in read_txn_index(txn_index_path(self.dir, seg.base_offset))
        ]

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions with records in ``[start, upper)`` (what a read_committed fetch returns)."""
        return [e for e in self.aborted if e.last_offset >= start and e.first_offset < upper]

    def add_aborted(self, entry: AbortedTxn) -> None:
        if entry in self.aborted:
            return  # replaying a marker whose entry the .txnindex file already holds
        self.aborted.append(entry)
        if not self.read_only:
            base = self.bases[bisect_right(self.bases, entry.last_offset) - 1]
            append_txn_index(txn_index_path(self.dir, base), entry, self.file_ops)

    def drop_aborted(self, keep: Callable[[AbortedTxn], bool]) -> None:
        """Keep only the entries ``keep(entry)`` accepts, rewriting the .txnindex files that changed."""
        kept = [e for e in self.aborted if keep(e)]
        if len(kept) == len(self.aborted):
            return
        self.aborted = kept
        if self.read_only:
            return
        by_base: dict[int, list[AbortedTxn]] = {b: [] for b in self.bases}
        for e in kept:
            i = bisect_right(self.bases, e.last_offset) - 1
            if i >= 0:
                by_base[self.bases[i]].append(e)
        for name in os.listdir(self.dir):
            if name.endswith(TXN_INDEX_SUFFIX):
                base = parse_base_offset(name)
                if base is not None and base not in by_base:
                    (self.dir / name).unlink(missing_ok=True)
        for base, entries in by_base.items():
            if entries != read_txn_index(txn_index_path(self.dir, base)):
                write_txn_index(txn_index_path(self.dir, base), entries, self.file_ops)


__all__ = ["LocalLog"]
