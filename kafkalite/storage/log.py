"""A partition's log: an ordered list of segments in one directory, ``<topic>-<partition>``.

Only the last segment (the *active* one) takes appends. ``append`` checks a producer's batch without
decoding its records (size, magic, CRC), stamps the next offset into the header in place and writes the
bytes; ``read`` finds the segment by base offset, the position by the sparse index and returns a
``FileSlice`` of whole batches. ``open`` finishes what a crash interrupted (deletes, cleaner swaps) and
recovers the active segment by re-validating every batch in it.

Files in the partition directory besides segments (all Kafka's text checkpoint format):
``leader-epoch-checkpoint`` (as in Kafka), and ``log-start-offset-checkpoint`` /
``cleaner-offset-checkpoint`` which Kafka keeps one level up, shared by all partitions of a log dir;
kafkalite keeps them per partition so that independent ``Log`` objects never write the same file.
"""

from __future__ import annotations

import functools
import os
import threading
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalite.clock import Clock, SystemClock
from kafkalite.config.topic import LONG_MAX, LogConfig
from kafkalite.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kafkalite.records import (
    BatchHeader,
    decode_batch_tuples,
    iter_batches,
    parse_control_record,
    stamp_batch,
    valid_header_fields,
    validate_batch,
)
from kafkalite.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT
from kafkalite.storage.checkpoint import LeaderEpochCheckpoint, OffsetCheckpoint
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.file_slice import FileSlice
from kafkalite.storage.leader_epoch import LeaderEpochCache
from kafkalite.storage.log_dir_failure_channel import LogDirFailureChannel
from kafkalite.storage.log_validator import validate_records
from kafkalite.storage.producer_state import (
    ProducerBatchInfo,
    ProducerStateManager,
    next_sequence,
)
from kafkalite.storage.retention import deletable_segments
from kafkalite.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    BadBatch,
    LogSegment,
    parse_base_offset,
)
from kafkalite.storage.transaction_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    append_txn_index,
    read_txn_index,
    txn_index_path,
    write_txn_index,
)

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# Special timestamps of Kafka's ListOffsets request.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did. ``offset_of_max_timestamp`` is the last offset of the batch holding the max
    timestamp (Kafka's "shallow" offset; finding the exact record would need decoding)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int
    size: int
    log_append_time: int = -1
    duplicate: bool = False
    """An idempotent producer's retry of a batch already in the log: nothing was written, and the
    offsets are those the first copy got."""


@dataclass(slots=True)
class FetchDataInfo:
    fetch_offset: int
    records: FileSlice
    log_start_offset: int
    log_end_offset: int
    bad_batch: BadBatch | None = None
    """A verifying read that stopped before, or consists of, a batch failing its CRC."""


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


def _topic_partition(dir: Path) -> tuple[str, int]:
    topic, _, part = dir.name.rpartition("-")
    if topic and part.isdigit():
        return topic, int(part)
    return dir.name, 0


def _handles_io_errors(what: str):
    """Turn an ``OSError`` from the disk into ``KafkaStorageError`` after reporting the log dir (Kafka's
    ``maybeHandleIOException`` around every log operation)."""

    def wrap(fn):
        @functools.wraps(fn)
        def guarded(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except OSError as e:
                raise self._io_failure(
                    f"Error while {what} {self.dir.name} in dir {self.dir.parent}", e
                ) from e

        return guarded

    return wrap


class Log:
    """One partition's log. Use ``Log.open``."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        clock: Clock,
        read_only: bool,
        file_ops: FileOps = OS_FILE_OPS,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.dir = dir
        self.file_ops = file_ops
        self.failure_channel = failure_channel
        self.failed: str | None = None  # why this log stopped taking writes (its disk failed)
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.topic, self.partition = _topic_partition(dir)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start = 0
        self._recovery_point = 0
        self._unflushed = 0
        self._last_flush_ms = 0
        self.leader_epoch_cache = LeaderEpochCache(dir / LEADER_EPOCH_CHECKPOINT, file_ops=file_ops)
        self.producer_state = ProducerStateManager(dir, dir.name, file_ops)
        self.leader_epoch_cache.on_io_error = self._io_failure
        self._aborted: list[AbortedTxn] = []  # aborted transactions, in marker order (the .txnindex files)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._lock = threading.RLock()
        self._closed = False
        self.recovery_report = RecoveryReport(str(dir), read_only)
        self._refresh_config()

    def _refresh_config(self) -> None:
        c = self.config
        self._max_message_bytes = c.max_message_bytes
        self._segment_bytes = c.segment_bytes
        self._compact = c.compact
        self._log_append_time = c.log_append_time
        bounds = (c.message_timestamp_before_max_ms, c.message_timestamp_after_max_ms)
        # Kafka checks record timestamps of CreateTime topics only, and there only when bounded.
        self._timestamp_bounds = None if c.log_append_time or bounds == (LONG_MAX, LONG_MAX) else bounds
        self._flush_messages = c.flush_messages
        self._flush_ms = c.flush_ms

    @property
    def _epochs(self) -> list[tuple[int, int]]:
        # The leader-epoch entries live in the cache; older code here reads and replaces the list.
        return self.leader_epoch_cache._entries

    @_epochs.setter
    def _epochs(self, entries: list[tuple[int, int]]) -> None:
        self.leader_epoch_cache._set(entries, persist=False)

    # ===== opening / recovery ===========================================================================
    @classmethod
    def open(
        cls,
        dir: str | os.PathLike,
        config: LogConfig | Mapping[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        file_ops: FileOps = OS_FILE_OPS,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> Log:
        """Open (creating if needed, unless ``read_only``) the partition directory and recover it.

        ``file_ops`` is the door every write goes through (``DiskFaults`` in tests); an ``OSError`` from
        the disk reports the log directory (the partition directory's parent) to ``failure_channel`` and
        raises ``KafkaStorageError``, here and in every later call."""
        path = Path(dir)
        log = cls(
            path, LogConfig.coerce(config), clock or SystemClock(), read_only, file_ops, failure_channel
        )
        try:
            if not path.is_dir():
                if read_only:
                    raise KafkaStorageError(f"log directory {path} does not exist (opened read-only)")
                path.mkdir(parents=True, exist_ok=True)
            log._load()
        except OSError as e:
            raise log._io_failure(f"Error while loading log dir {path.parent} for {path.name}", e) from e
        return log

    # ===== disk failures ================================================================================
    def _io_failure(self, message: str, error: OSError) -> KafkaStorageError:
        """The disk under this log failed: stop taking writes, report the log dir, and return the error
        to raise (Kafka's ``maybeHandleIOException``)."""
        if self.failed is None:
            self.failed = f"{message}: {error}"
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(self.dir.parent, message, error)
        return KafkaStorageError(f"{message}: {error}")

    def _load(self) -> None:
        report = self.recovery_report
        names = sorted(os.listdir(self.dir))
        swaps: list[int] = []
        if not self.read_only:
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

        cp = self._read_log_start_checkpoint()
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            seg = LogSegment.open(
                self.dir, base, self.config, self.clock, suffix=suffix_of[base], read_only=self.read_only,
                file_ops=self.file_ops,
            )  # fmt: skip
            active = i == len(bases) - 1
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
            segments.append(seg)
        if not segments:
            start = cp if cp is not None else 0
            if self.read_only:
                raise KafkaStorageError(f"log directory {self.dir} holds no segments (opened read-only)")
            segments.append(
                LogSegment.create(self.dir, start, self.config, self.clock, file_ops=self.file_ops)
            )
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset
        start = max(cp if cp is not None else 0, segments[0].base_offset)
        self._log_start = min(start, self._leo)
        self._recovery_point = self._leo
        self._last_flush_ms = self.clock.now_ms()
        self.recovery_report.segments_loaded = len(segments)
        self.recovery_report.log_start_offset = self._log_start
        self.recovery_report.log_end_offset = self._leo
        self._epochs = [(e, o) for e, o in self._epoch_checkpoint().read() if o < self._leo] or []
        if not self.read_only:
            # A crash between moving the log start and rewriting the epoch checkpoint leaves entries
            # below the start; trim them as the live log would have.
            self.leader_epoch_cache.truncate_from_start(self._log_start)
        if not self.read_only and segments[-1].offset_index.mutable is False:
            segments[-1].make_active()
        self._aborted = [
            e for seg in segments for e in read_txn_index(txn_index_path(self.dir, seg.base_offset))
        ]
        if not self.read_only:
            self._rebuild_producer_state()

    # ===== producer state ===============================================================================
    def _rebuild_producer_state(self) -> None:
        """Load the newest snapshot at or below the log end and replay the batches after it (from the
        log start when there is none), as Kafka does on open and after a truncation."""
        ps = self.producer_state
        off = ps.load_latest(self._leo)
        start = max(off, self._log_start)
        if off < self._log_start:
            ps.reset(self._log_start)
            start = self._log_start
        for f, data in self._iter_header_fields(start):
            self._track_producer(f, f[0], data)
        ps.advance(self._leo)
        if off >= 0 and off < self._log_start:
            ps.evict_before(self._log_start)

    def _iter_header_fields(self, start: int):
        """``(header fields, batch bytes)`` of the batches ending at or after ``start``, segment by segment."""
        for seg in self._segments:
            if seg.next_offset <= start or seg.size == 0:
                continue
            seg.write_deferred()
            data = memoryview(os.pread(seg.file.fileno(), seg.size, 0))
            end = seg.bad_batch.position if seg.bad_batch is not None else len(data)
            for pos, h in iter_batches(data, 0, end):
                if h.base_offset + h.last_offset_delta >= start:
                    yield h.as_tuple(), data[pos : pos + h.batch_length + 12]

    def _track_producer(self, f: tuple, base: int, data) -> None:
        """Fold one appended batch (header fields ``f``, first offset ``base``) into the producer state."""
        if f[9] < 0:
            return
        if f[5] & CONTROL_BIT:
            _h, rows = decode_batch_tuples(data, verify_crc=False)
            if not rows:
                return  # an empty control batch: the cleaner removed its transaction entirely
            marker = parse_control_record(rows[0][2], rows[0][3])
            first = self.producer_state.complete_txn(f[9], f[10], marker.coordinator_epoch, base, f[8])
            if first >= 0 and not marker.is_commit:
                unstable = self.first_unstable_offset()
                self._add_aborted(AbortedTxn(f[9], first, base, base + 1 if unstable is None else unstable))
            return
        self.producer_state.update(_producer_info(f, base))

    # ===== transactions =================================================================================
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction still open in this log (None: none is open)."""
        firsts = [
            e.txn_first_offset for e in self.producer_state.producers.values() if e.txn_first_offset >= 0
        ]
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: below it every transaction is decided; read_committed consumers stop there."""
        unstable = self.first_unstable_offset()
        return high_watermark if unstable is None else min(high_watermark, unstable)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions with records in ``[start, upper)`` (what a read_committed fetch returns)."""
        return [e for e in self._aborted if e.last_offset >= start and e.first_offset < upper]

    @property
    def aborted_transactions(self) -> list[AbortedTxn]:
        return list(self._aborted)

    def _add_aborted(self, entry: AbortedTxn) -> None:
        if entry in self._aborted:
            return  # replaying a marker whose entry the .txnindex file already holds
        self._aborted.append(entry)
        if not self.read_only:
            base = self._bases[bisect_right(self._bases, entry.last_offset) - 1]
            append_txn_index(txn_index_path(self.dir, base), entry, self.file_ops)

    def _drop_aborted(self, keep) -> None:
        """Keep only the entries ``keep(entry)`` accepts, rewriting the .txnindex files that changed."""
        kept = [e for e in self._aborted if keep(e)]
        if len(kept) == len(self._aborted):
            return
        self._aborted = kept
        if self.read_only:
            return
        by_base: dict[int, list[AbortedTxn]] = {b: [] for b in self._bases}
        for e in kept:
            i = bisect_right(self._bases, e.last_offset) - 1
            if i >= 0:
                by_base[self._bases[i]].append(e)
        for name in os.listdir(self.dir):
            if name.endswith(TXN_INDEX_SUFFIX):
                base = parse_base_offset(name)
                if base is not None and base not in by_base:
                    (self.dir / name).unlink(missing_ok=True)
        for base, entries in by_base.items():
            if entries != read_txn_index(txn_index_path(self.dir, base)):
                write_txn_index(txn_index_path(self.dir, base), entries, self.file_ops)

    def _check_marker_epoch(self, f: tuple, offset: int) -> None:
        entry = self.producer_state.producers.get(f[9])
        if entry is not None and f[10] < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {f[9]} at offset {offset} in {self.dir.name} has epoch {f[10]}, "
                f"older than the producer's epoch {entry.epoch}"
            )

    def _check_producers(self, items: list, base: int, from_coordinator: bool = False) -> list:
        """Kafka's producer-state validation of a leader append: per batch, the remembered batch it
        duplicates, or None. Raises (nothing written) when a batch must be refused."""
        infos = []
        off = base
        for _data, f in items:
            if f[9] >= 0 and not f[5] & CONTROL_BIT and not from_coordinator:
                infos.append(_producer_info(f, off))
            else:
                if f[9] >= 0:
                    self._check_marker_epoch(f, off)
                infos.append(None)
            off += f[6] + 1
        wanted = [i for i in infos if i is not None]
        if not wanted:
            return [None] * len(items)
        dups = iter(self.producer_state.check_client_batches(wanted))
        return [None if i is None else next(dups) for i in infos]

    def _complete_swap(self, base: int) -> None:
        """Finish a cleaner swap interrupted by a crash: the ``.swap`` segment replaces what it covers."""
        swap = LogSegment.open(
            self.dir, base, self.config, self.clock, suffix=SWAP_SUFFIX, file_ops=self.file_ops
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
        self.recovery_report.swaps_completed.append(base)

    def _read_log_start_checkpoint(self) -> int | None:
        offsets = OffsetCheckpoint(self.dir / LOG_START_OFFSET_CHECKPOINT).read()
        return offsets.get((self.topic, self.partition))

    def _write_log_start_checkpoint(self) -> None:
        if not self.read_only:
            OffsetCheckpoint(self.dir / LOG_START_OFFSET_CHECKPOINT, self.file_ops).write(
                {(self.topic, self.partition): self._log_start}
            )

    def _epoch_checkpoint(self) -> LeaderEpochCheckpoint:
        return LeaderEpochCheckpoint(self.dir / LEADER_EPOCH_CHECKPOINT, self.file_ops)

    def refresh(self) -> None:
        """Re-read the directory (a read-only reader catching up with a live writer)."""
        with self._lock:
            for seg in self._segments:
                seg.file.close()
            self.recovery_report = RecoveryReport(str(self.dir), self.read_only)
            self._load()

    # ===== properties ===================================================================================
    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def recovery_point(self) -> int:
        """Offsets below this are known to be fsynced."""
        return self._recovery_point

    @property
    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` pairs, as in ``leader-epoch-checkpoint``."""
        return list(self._epochs)

    @property
    def pending_deletes(self) -> list[int]:
        """Base offsets of segments renamed to ``.deleted`` and waiting for ``file.delete.delay.ms``."""
        return [s.base_offset for _, s in self._pending_deletes]

    def update_config(self, props: Mapping[str, Any]) -> None:
        """Apply changed topic configs (Kafka names) to this log."""
        with self._lock:
            self.config = self.config.with_overrides(props)
            self._refresh_config()

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, offsets=[{self._log_start}, {self._leo}], segments={len(self._segments)}"
            f"{', read-only' if self.read_only else ''})"
        )

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ===== append =======================================================================================
    def _check_writable(self) -> None:
        if self.read_only:
            raise KafkaStorageError(f"log {self.dir.name} was opened read-only")
        if self._closed:
            raise KafkaStorageError(f"log {self.dir.name} is closed")
        if self.failed is not None:
            raise KafkaStorageError(f"log {self.dir.name} is offline: {self.failed}")

    @_handles_io_errors("appending records to")
    def append(
        self, batch, *, leader_epoch: int = -1, from_coordinator: bool = False, from_client: bool = False
    ) -> LogAppendInfo:
        """Validate, stamp and append one producer batch (several concatenated batches also work).

        As a Kafka leader, every record is checked before anything is written (``log_validator``).
        ``from_coordinator``: a coordinator's own append (transactional offsets, markers): Kafka checks
        only the producer epoch of those, not sequences, which coordinators do not keep.
        ``from_client``: a producer's request, which may not write control batches."""
        self._check_writable()
        f = valid_header_fields(batch, 0, self._max_message_bytes)
        if f is None:  # something is wrong: validate_batch raises the error that names it
            f = validate_batch(batch, 0, max_size=self._max_message_bytes, leader=True).as_tuple()
        size = f[1] + 12
        if size != len(batch):
            items = self._validate_all(batch, leader=True, from_client=from_client)
            return _merge_infos(self._append_validated(items, leader_epoch, from_coordinator), len(batch))
        count = f[12]
        if size > self._segment_bytes:
            self._check_batch(batch, 0, BatchHeader(*f), size)
        validate_records(batch, 0, f, self.dir.name, **self._validation(from_client))
        with self._lock:
            base = self._leo
            if f[9] >= 0:  # a producer id: sequences and epochs are checked before anything is written
                dup = self._check_producers([(batch, f)], base, from_coordinator)[0]
                if dup is not None:
                    return _duplicate_info(dup)
            last = base + f[6]
            buf, max_ts, now = self._stamp(batch, base, f[8], leader_epoch)
            seg = self._segments[-1]
            if seg._size and seg.should_roll(size, max_ts, last, None if now < 0 else now):
                seg = self._roll_locked()
            seg.append(buf, last, max_ts, last)
            self._leo = last + 1
            if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1][0]):
                self._assign_epoch(leader_epoch, base)
            self._unflushed += count
            if f[9] >= 0:
                self._track_producer(f, base, batch)
            if self._unflushed >= self._flush_messages or (
                self._flush_ms != LONG_MAX and self.clock.now_ms() - self._last_flush_ms >= self._flush_ms
            ):
                self._flush_locked()
        return LogAppendInfo(base, last, max_ts, last, count, size, now)

    @_handles_io_errors("appending records to")
    def append_many(self, batches: Iterable, *, leader_epoch: int = -1) -> list[LogAppendInfo]:
        """Append several batches with one write per segment touched (Kafka writes a produce request's
        whole record set at once). Every batch is validated before anything is written."""
        self._check_writable()
        items = []
        for data in batches:
            items += self._validate_all(data, leader=True)
        return self._append_validated(items, leader_epoch)

    def _stamp(self, batch, base: int, max_ts: int, leader_epoch: int):
        """A stamped copy of one validated batch, its max timestamp, and the append time (or -1).

        With CreateTime only the 16 bytes before the CRC change. LogAppendTime also rewrites
        maxTimestamp inside the CRC range, so ``stamp_batch`` recomputes the CRC. Copying the batch
        and writing one buffer measured faster than writing a new prefix and the producer's bytes
        with one ``writev``.
        """
        buf = bytearray(batch)
        epoch = leader_epoch if leader_epoch >= 0 else None
        if self._log_append_time:
            now = self.clock.now_ms()
            stamp_batch(buf, 0, base_offset=base, partition_leader_epoch=epoch, max_timestamp=now)
            return buf, now, now
        stamp_batch(buf, 0, base_offset=base, partition_leader_epoch=epoch)
        return buf, max_ts, -1

    def _validation(self, from_client: bool) -> dict:
        """``validate_records`` settings from this log's config (Kafka's LogValidator inputs)."""
        opts: dict = {"compact": self._compact, "from_client": from_client}
        if self._timestamp_bounds is not None:
            opts["now_ms"] = self.clock.now_ms()
            opts["timestamp_bounds"] = self._timestamp_bounds
        return opts

    def _check_batch(self, data, pos: int, h, size: int) -> None:
        if h.records_count == 0:
            raise InvalidRecordError(f"record batch at position {pos} holds no records")
        if size > self._segment_bytes:
            raise RecordListTooLargeError(
                f"batch of {size} bytes exceeds segment.bytes={self._segment_bytes} of {self.dir.name}"
            )
        if self._compact:
            self._check_keys(data, pos)

    def _validate_all(self, data, *, leader: bool = False, from_client: bool = False) -> list:
        """Split a buffer of concatenated batches, validating each (CRC included; as the leader, every
        record too); nothing is written on failure. Items are ``(slice, header field tuple)``, the
        fields in ``BatchHeader`` order."""
        view = memoryview(data)
        out = []
        pos = 0
        end = len(view)
        max_size = self._max_message_bytes
        while pos < end:
            # The plain-tuple check first (no objects built); validate_batch raises the error that names
            # what is wrong, so the slow path is only taken by bad data.
            f = valid_header_fields(view, pos, max_size)
            if f is None:
                f = validate_batch(view, pos, max_size=max_size, leader=leader).as_tuple()
            size = f[1] + 12
            if leader:
                if size > self._segment_bytes:
                    self._check_batch(view, pos, BatchHeader(*f), size)
                validate_records(view, pos, f, self.dir.name, **self._validation(from_client))
            elif f[12] == 0 or size > self._segment_bytes or self._compact:
                self._check_batch(view, pos, BatchHeader(*f), size)
            out.append((view[pos : pos + size], f))
            pos += size
        return out

    def _append_validated(
        self, items: list, leader_epoch: int, from_coordinator: bool = False
    ) -> list[LogAppendInfo]:
        infos = []
        with self._lock:
            dups = self._check_producers(items, self._leo, from_coordinator)
            seg = self._segments[-1]
            try:
                # f: header fields in BatchHeader order (last delta 6, max ts 8, producer id 9, count 12).
                for (data, f), dup in zip(items, dups, strict=True):
                    if dup is not None:
                        infos.append(_duplicate_info(dup))
                        continue
                    size = len(data)
                    base = self._leo
                    last = base + f[6]
                    buf, max_ts, now = self._stamp(data, base, f[8], leader_epoch)
                    if seg._size and seg.should_roll(size, max_ts, last, None if now < 0 else now):
                        seg = self._roll_locked()
                    seg.append(buf, last, max_ts, last, defer=True)
                    self._leo = last + 1
                    if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1][0]):
                        self._assign_epoch(leader_epoch, base)
                    self._unflushed += f[12]
                    if f[9] >= 0:
                        self._track_producer(f, base, data)
                    infos.append(LogAppendInfo(base, last, max_ts, last, f[12], size, now))
            finally:
                seg.write_deferred()
            if self._unflushed >= self._flush_messages or (
                self._flush_ms != LONG_MAX and self.clock.now_ms() - self._last_flush_ms >= self._flush_ms
            ):
                self._flush_locked()
        return infos

    def _check_keys(self, buf, pos: int) -> None:
        _, rows = decode_batch_tuples(buf, pos, verify_crc=False)
        for row in rows:
            if row[2] is None:
                raise InvalidRecordError(
                    f"compacted topic {self.topic} (cleanup.policy={self.config.cleanup_policy}) cannot accept "
                    f"a record without a key (offset delta {row[0] - _base_of(buf, pos)} in the batch)"
                )

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.leader_epoch_cache.assign(epoch, start_offset)

    @_handles_io_errors("appending records as a follower to")
    def append_as_follower(self, records) -> list[LogAppendInfo]:
        """Append a leader's batches as they are: offsets and leader epochs already stamped.

        Kafka's ``appendAsFollower``: every batch is validated (CRC, sizes) but never re-stamped; the
        first must start at the log end offset and each must follow the previous one without a gap
        (``InvalidRecordError`` otherwise: the follower would have a hole or an overlap). Each batch's
        partitionLeaderEpoch feeds the leader-epoch cache, which is how followers learn epochs.
        """
        self._check_writable()
        # Header fields as tuples (BatchHeader order): base 0, leader epoch 2, last delta 6, max ts 8,
        # count 12. This runs for every batch on every follower.
        items = self._validate_all(records)
        infos: list[LogAppendInfo] = []
        if not items:
            return infos
        with self._lock:
            seg = self._segments[-1]
            try:
                expected = self._leo
                for _data, f in items:
                    if f[0] != expected:
                        raise InvalidRecordError(
                            f"follower append to {self.dir.name}: batch starts at offset {f[0]} "
                            f"but the log end offset is {expected}"
                        )
                    expected = f[0] + f[6] + 1
                for data, f in items:
                    size = len(data)
                    base, epoch, max_ts, count = f[0], f[2], f[8], f[12]
                    last = base + f[6]
                    if seg._size and seg.should_roll(size, max_ts, last, None):
                        seg = self._roll_locked()
                    # The slice itself, not a copy: write_deferred below writes it before we return.
                    seg.append(data, last, max_ts, last, defer=True)
                    if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1][0]):
                        self._assign_epoch(epoch, base)
                    self._leo = last + 1
                    self._unflushed += count
                    if f[9] >= 0:
                        self._track_producer(f, base, data)
                    infos.append(LogAppendInfo(base, last, max_ts, last, count, size))
            finally:
                seg.write_deferred()
            if self._unflushed >= self._flush_messages or (
                self._flush_ms != LONG_MAX and self.clock.now_ms() - self._last_flush_ms >= self._flush_ms
            ):
                self._flush_locked()
        return infos

    def crash(self, lose_unflushed: bool = False) -> int:
        """Simulate the process dying: close every file without flushing or writing checkpoints.

        With ``lose_unflushed`` the bytes past the recovery point (never fsynced) are cut from the files,
        as a power loss would do to the page cache; returns how many offsets were lost. The next
        ``Log.open`` recovers what is left.
        """
        if self._closed:
            return 0
        lost = 0
        with self._lock:
            if lose_unflushed and not self.read_only and self._recovery_point < self._leo:
                rp = self._recovery_point
                lost = self._leo - rp
                for seg in self._segments:
                    seg.write_deferred()
                    if seg.base_offset > rp or (seg.base_offset == rp and seg is not self._segments[0]):
                        seg.delete_files()
                        continue
                    found = seg.translate_offset(rp)
                    if found is not None:
                        seg._file.truncate(found[0])
                        seg.offset_index.delete()
                        seg.time_index.delete()
                        for p in (seg.index_path, seg.timeindex_path):
                            p.unlink(missing_ok=True)
            for seg in self._segments:
                seg.offset_index._drop_file_handles()
                seg.time_index._drop_file_handles()
                if not seg._file.closed:
                    seg._file.close()
            for _, seg in self._pending_deletes:
                seg.file.close()
            self._closed = True
        return lost

    # ===== roll / flush =================================================================================
    @_handles_io_errors("rolling a new segment of")
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self._check_writable()
        with self._lock:
            return self._roll_locked()

    def _roll_locked(self) -> LogSegment:
        old = self._segments[-1]
        old.write_deferred()
        if old.size == 0:
            return old
        old.on_become_inactive()
        # Kafka flushes the finished segment right after a roll (asynchronously); so do we, synchronously.
        old.flush()
        new = LogSegment.create(self.dir, self._leo, self.config, self.clock, file_ops=self.file_ops)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        if self.producer_state.producers:
            # Kafka snapshots producer state at each roll, so recovery replays at most one segment.
            self.producer_state.advance(self._leo)
            self.producer_state.take_snapshot(sync=False)
        return new

    @_handles_io_errors("flushing")
    def flush(self) -> None:
        """fsync every segment holding data past the recovery point."""
        if self.read_only or self._closed:
            return
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        for seg in reversed(self._segments):
            seg.flush()
            if seg.base_offset <= self._recovery_point:
                break
        self._recovery_point = self._leo
        self._unflushed = 0
        self._last_flush_ms = self.clock.now_ms()

    @_handles_io_errors("flushing")
    def maybe_flush(self) -> bool:
        """Apply ``flush.ms`` (what Kafka's periodic log flusher does); returns whether it flushed."""
        if self.read_only or self._flush_ms == LONG_MAX or not self._unflushed:
            return False
        if self.clock.now_ms() - self._last_flush_ms >= self._flush_ms:
            self.flush()
            return True
        return False

    @_handles_io_errors("closing")
    def close(self) -> None:
        """Flush, trim the active segment's indexes and close every file."""
        if self._closed:
            return
        with self._lock:
            if not self.read_only:
                self._flush_locked()
                self._write_log_start_checkpoint()
                if self.producer_state.producers or self.producer_state.snapshot_offsets():
                    # A clean shutdown leaves a snapshot at the log end: the next open replays nothing.
                    self.producer_state.advance(self._leo)
                    self.producer_state.take_snapshot()
            for seg in self._segments:
                seg.close()
            for _, seg in self._pending_deletes:
                seg.file.close()
            self._closed = True

    # ===== read =========================================================================================
    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is out of range for {self.dir.name}: valid offsets are "
            f"[{self._log_start}, {self._leo}] (log start offset, log end offset)"
        )

    @_handles_io_errors("reading records from")
    def read(
        self,
        offset: int,
        max_bytes: int = 1 << 20,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
        verify: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one containing ``offset``: at least one (if ``min_one``), otherwise up to
        ``max_bytes``; nothing at or past ``max_offset`` (the high watermark) is returned.

        ``verify`` (the broker's fetch path): segments loaded from disk are CRC-checked the first time
        their bytes are read; a read stops before a bad batch, and one starting at it gets that batch
        alone, or ``CorruptRecordError`` naming partition, segment, position and offset when its header
        cannot be read (``FetchDataInfo.bad_batch`` tells which)."""
        with self._lock:  # appends under the lock may run their bookkeeping ahead of the write
            return self._read_locked(offset, max_bytes, max_offset, min_one, verify)

    def _read_locked(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool, verify: bool = False
    ) -> FetchDataInfo:
        start, leo = self._log_start, self._leo
        if offset < start or offset > leo:
            raise self._out_of_range(offset)
        segs = self._segments
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return FetchDataInfo(offset, self._empty_slice(), start, leo)
        i = bisect_right(self._bases, offset) - 1
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
                    return FetchDataInfo(offset, fs, start, leo, bad)
                return FetchDataInfo(offset, fs, start, leo)
            if bad is not None and bad.size is None and offset >= bad.offset:
                # Behind an unreadable header: the offsets up to the next segment cannot be served.
                raise CorruptRecordError(bad.describe(self.dir.name))
            i += 1
        return FetchDataInfo(offset, self._empty_slice(), start, leo)

    def _empty_slice(self) -> FileSlice:
        seg = self._segments[-1]
        return FileSlice(seg.log_path, seg.size, 0, file=seg.file)

    def read_records(self, offset: int, max_bytes: int = 1 << 20, *, max_offset: int | None = None) -> list:
        """Convenience: decoded records of ``read`` at or after ``offset`` (and below ``max_offset``)."""
        fs = self.read(offset, max_bytes, max_offset=max_offset).records
        return [
            r for r in fs.records() if r.offset >= offset and (max_offset is None or r.offset < max_offset)
        ]

    def iter_records(
        self, start: int | None = None, end: int | None = None, *, fetch_max_bytes: int = 1 << 20
    ):
        """Every record in ``[start, end)`` (default: the whole log), fetching batch slices across segments
        the way a consumer's fetch loop does. Control records (transaction markers) are skipped."""
        offset = self._log_start if start is None else start
        end = self._leo if end is None else end
        while offset < end:
            batches = list(self.read(offset, fetch_max_bytes, max_offset=end).records.batches())
            if not batches:
                return
            for batch in batches:
                if not batch.header.is_control:
                    yield from (r for r in batch.records if offset <= r.offset < end)
                offset = max(offset, batch.header.next_offset)

    @_handles_io_errors("looking up a timestamp in")
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """Earliest ``(offset, timestamp)`` whose timestamp >= ``timestamp_ms`` (Kafka's ListOffsets).

        The special values -2 (earliest), -1 (latest) and -3 (max timestamp) return offsets with
        timestamp -1 (or the max timestamp for -3), as Kafka does.
        """
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return self._log_start, -1
        if timestamp_ms == LATEST_TIMESTAMP:
            return self._leo, -1
        if timestamp_ms == MAX_TIMESTAMP:
            best = max(self._segments, key=lambda s: s.largest_timestamp)
            if best.largest_timestamp < 0:
                return None
            return best.offset_of_max_timestamp, best.largest_timestamp
        if timestamp_ms < 0:
            raise InvalidRecordError(f"invalid timestamp {timestamp_ms} (use >= 0, or -1, -2, -3)")
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp_ms and seg.next_offset > self._log_start:
                found = seg.find_offset_by_timestamp(timestamp_ms, self._log_start)
                if found is not None:
                    return found
        return None

    # ===== truncation / deletion ========================================================================
    @_handles_io_errors("truncating")
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at ``offset`` and beyond (a follower diverged); returns whether anything went."""
        self._check_writable()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate {self.dir.name} to negative offset {offset}")
        with self._lock:
            if offset >= self._leo:
                # Nothing to cut, but an epoch entry starting at the log end goes, as in Kafka: a
                # replica elected leader that appended nothing before losing leadership holds an
                # epoch the new leader never had, and would keep "diverging" at this very offset.
                self.leader_epoch_cache.truncate_from_end(self._leo)
                return False
            if offset < self._segments[0].base_offset:
                self._replace_all_segments(offset)
            else:
                keep = [s for s in self._segments if s.base_offset <= offset]
                doomed = [s for s in self._segments if s.base_offset > offset]
                self._segments, self._bases = keep, [s.base_offset for s in keep]
                self._delete_segments(doomed)
                active = keep[-1]
                active.truncate_to(offset)
                active.make_active()
            self._leo = self._segments[-1].next_offset
            if self._log_start > self._leo:
                self._log_start = self._leo
                self._write_log_start_checkpoint()
            self._recovery_point = min(self._recovery_point, self._leo)
            self.leader_epoch_cache.truncate_from_end(self._leo)
            leo = self._leo
            self._drop_aborted(lambda e: e.last_offset < leo)
            if self.producer_state.producers or self.producer_state.snapshot_offsets():
                self._rebuild_producer_state()
            return True

    @_handles_io_errors("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and restart the log, empty, at ``offset`` (Kafka's ``truncateFullyAndStartAt``:
        a follower whose whole log is older than the leader's log start)."""
        self._check_writable()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot restart {self.dir.name} at negative offset {offset}")
        with self._lock:
            self._replace_all_segments(offset)
            self._leo = offset
            self._recovery_point = offset
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots(above=-1)
            self.producer_state.reset(offset)
            self._drop_aborted(lambda e: False)

    def _replace_all_segments(self, offset: int) -> None:
        doomed = list(self._segments)
        self._segments, self._bases = [], []
        self._delete_segments(doomed)
        seg = LogSegment.create(self.dir, offset, self.config, self.clock, file_ops=self.file_ops)
        self._segments, self._bases = [seg], [offset]
        self._log_start = offset
        self._write_log_start_checkpoint()

    def _raise_log_start(self, offset: int) -> None:
        self._log_start = offset
        self._write_log_start_checkpoint()
        # Epoch entries must point into the log: OffsetForLeaderEpoch for an epoch whose records are
        # gone then answers the new log start, not an offset this log can no longer serve.
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.evict_before(offset)

    @_handles_io_errors("deleting records of")
    def delete_records(self, before_offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset up to ``before_offset``; returns the new one.

        Segments entirely below it are removed by the next ``delete_old_segments``.
        """
        self._check_writable()
        with self._lock:
            if before_offset > self._leo or before_offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.dir.name} to {before_offset}: valid range is "
                    f"[{self._log_start}, {self._leo}]"
                )
            if before_offset > self._log_start:
                self._raise_log_start(before_offset)
            return self._log_start

    @_handles_io_errors("deleting segments of")
    def delete_old_segments(self, *, high_watermark: int | None = None) -> list[int]:
        """Apply retention.ms, retention.bytes and the log start offset; returns deleted base offsets."""
        self._check_writable()
        with self._lock:
            self.run_scheduled_deletes()
            doomed = deletable_segments(self, self.clock.now_ms(), high_watermark)
            if not doomed:
                return []
            gone = {id(s) for s in doomed}
            self._segments = [s for s in self._segments if id(s) not in gone]
            self._bases = [s.base_offset for s in self._segments]
            self._delete_segments(doomed)
            first_base = self._segments[0].base_offset
            self._drop_aborted(lambda e: e.last_offset >= first_base)  # their .txnindex went with them
            new_start = max(self._log_start, self._segments[0].base_offset)
            if new_start != self._log_start:
                self._raise_log_start(new_start)
            else:
                self._write_log_start_checkpoint()
            return [s.base_offset for s in doomed]

    def _delete_segments(self, segments: list[LogSegment]) -> None:
        """Rename to ``.deleted`` now; unlink after ``file.delete.delay.ms`` (at once if it is 0)."""
        for seg in segments:
            seg.change_suffix(DELETED_SUFFIX)
            txn_index_path(self.dir, seg.base_offset).unlink(missing_ok=True)
        self._schedule_deletes(segments)

    def _schedule_deletes(self, segments: list[LogSegment]) -> None:
        delay = self.config.file_delete_delay_ms
        due = self.clock.now_ms() + delay
        for seg in segments:
            if delay <= 0:
                seg.delete_files()
            else:
                self._pending_deletes.append((due, seg))

    @_handles_io_errors("deleting segments of")
    def run_scheduled_deletes(self) -> list[int]:
        """Unlink ``.deleted`` segments whose delay has passed; returns their base offsets."""
        if not self._pending_deletes:
            return []
        now = self.clock.now_ms()
        done, waiting = [], []
        for due, seg in self._pending_deletes:
            if due <= now:
                seg.delete_files()
                done.append(seg.base_offset)
            else:
                waiting.append((due, seg))
        self._pending_deletes = waiting
        return done

    # ===== hooks for the cleaner ========================================================================
    @_handles_io_errors("swapping cleaned segments into")
    def _replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap a cleaned segment in for ``old`` (files of ``new`` carry the ``.swap`` suffix)."""
        with self._lock:
            idx = self._segments.index(old[0])
            gone = {id(s) for s in old}
            rest = [s for s in self._segments if id(s) not in gone]
            rest.insert(idx, new)
            # Old files become ".deleted" before the swap file takes their name: a crash in between
            # leaves a ".swap" that open() completes and ".deleted" files it removes.
            for seg in old:
                seg.change_suffix(DELETED_SUFFIX)
            new.change_suffix("")
            self._segments = rest
            self._bases = [s.base_offset for s in rest]
            self._schedule_deletes(old)

    def _read_cleaner_checkpoint(self) -> int | None:
        return OffsetCheckpoint(self.dir / CLEANER_OFFSET_CHECKPOINT).read().get((self.topic, self.partition))

    @_handles_io_errors("writing the cleaner checkpoint of")
    def _write_cleaner_checkpoint(self, offset: int) -> None:
        OffsetCheckpoint(self.dir / CLEANER_OFFSET_CHECKPOINT, self.file_ops).write(
            {(self.topic, self.partition): offset}
        )


def _merge_infos(infos: list[LogAppendInfo], size: int) -> LogAppendInfo:
    if len(infos) == 1:
        return infos[0]
    best = max(infos, key=lambda i: i.max_timestamp)
    return LogAppendInfo(
        infos[0].first_offset,
        infos[-1].last_offset,
        best.max_timestamp,
        best.offset_of_max_timestamp,
        sum(i.num_records for i in infos),
        size,
        infos[-1].log_append_time,
        all(i.duplicate for i in infos),
    )


def _duplicate_info(dup: ProducerBatchInfo) -> LogAppendInfo:
    """The answer to a retried batch the log already holds: where it went the first time, nothing new."""
    return LogAppendInfo(
        dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset, 0, 0, duplicate=True
    )


def _producer_info(f: tuple, base: int) -> ProducerBatchInfo:
    """The producer fields of a batch header tuple (BatchHeader order) placed at offset ``base``."""
    return ProducerBatchInfo(
        f[9],
        f[10],
        f[11],
        next_sequence(f[11], f[6]),
        base,
        base + f[6],
        f[8],
        bool(f[5] & TRANSACTIONAL_BIT),
    )


def _base_of(buf, pos: int) -> int:
    return int.from_bytes(bytes(buf[pos : pos + 8]), "big", signed=True)


__all__ = ["FetchDataInfo", "Log", "LogAppendInfo", "RecoveryReport"]
