"""One log segment: ``%020d.log`` plus its ``.index`` and ``.timeindex``.

The file name is the segment's base offset, zero-padded to 20 digits so that a directory listing sorts
segments in offset order. The ``.log`` file is nothing but record batches back to back, exactly as
producers sent them except for the base offset (and leader epoch) the leader stamped in. Every
``index.interval.bytes`` of appended data the segment adds one offset-index entry (the last offset of the
batch being written and the batch's position) and, if the maximum timestamp grew, one time-index entry.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalite.clock import Clock
from kafkalite.config.topic import LogConfig
from kafkalite.errors import CorruptRecordError, KafkaStorageError
from kafkalite.records import BatchHeader, decode_batch_tuples, validate_batch
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.file_slice import FileSlice
from kafkalite.storage.offset_index import OffsetIndex
from kafkalite.storage.time_index import NO_TIMESTAMP, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_SIZE = 61
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp: the first 43 header bytes, all a scan needs.
_SCAN = struct.Struct(">qiibIhiqq")
_SCAN_CHUNK = 4096
_READ_HINTS = 8  # batch boundaries remembered for readers (a few followers and consumers per partition)
_RECOVER_CHUNK = 1 << 20
_INT_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BadBatch:
    """The first batch of a segment that fails its CRC or cannot be parsed.

    ``offset`` is the base offset the batch has (or, when its header is unreadable, the offset it should
    have: one past the batch before it); ``size`` is its length when the header can still be read (so
    the bytes can be served as they are and the consumer's CRC check fails on them), else None."""

    segment: str
    position: int
    offset: int
    size: int | None
    reason: str

    def describe(self, tp: str) -> str:
        return (
            f"corrupt record batch in {tp} at offset {self.offset} (position {self.position} of segment "
            f"{self.segment}): {self.reason}"
        )


def segment_file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_base_offset(name: str) -> int | None:
    """Base offset from a segment file name, ``None`` if the name is not a segment file."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class LogSegment:
    """A ``.log`` file and its two indexes. Create with ``LogSegment.create`` / ``LogSegment.open``.

    It stays whole, over 600 lines, as Kafka's ``LogSegment`` does: append, recovery, the lazy CRC check
    and reads all work on the same file descriptor, size, indexes and verified-up-to mark, and each of
    those parts needs the others' bookkeeping to stay consistent."""

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        suffix: str = "",
        read_only: bool = False,
        new: bool = False,
        file_ops: FileOps = OS_FILE_OPS,
    ) -> None:
        self.dir = Path(dir)
        self.file_ops = file_ops
        self._os_write = file_ops.write  # the hot path: one attribute, no wrapper
        self.base_offset = base_offset
        self.suffix = suffix
        self.read_only = read_only
        self._log_path: tuple[str, Path] | None = None
        self._config = config
        self._interval = config.index_interval_bytes
        self._clock = clock
        log_path = self.log_path
        if new:
            if read_only:
                raise KafkaStorageError("cannot create a segment in read-only mode")
            fd = file_ops.open(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            self._file = io.FileIO(fd, "r+", closefd=True)
            for p in (self.index_path, self.timeindex_path):
                p.unlink(missing_ok=True)
        elif read_only:
            self._file = io.FileIO(log_path, "r")
        else:
            self._file = io.FileIO(file_ops.open(log_path, os.O_RDWR), "r+", closefd=True)
        self._fd = self._file.fileno()
        self._size = os.fstat(self._fd).st_size
        if not read_only:
            self._file.seek(self._size)
        self.created_ms = clock.now_ms() if new else os.stat(log_path).st_mtime_ns // 1_000_000
        mutable = new
        self.offset_index = OffsetIndex(
            self.index_path, base_offset, config.segment_index_bytes, mutable=mutable, in_memory=read_only,
            file_ops=file_ops,
        )  # fmt: skip
        self.time_index = TimeIndex(
            self.timeindex_path, base_offset, config.segment_index_bytes, mutable=mutable, in_memory=read_only,
            file_ops=file_ops,
        )  # fmt: skip
        self._next_offset = base_offset
        self._max_ts = NO_TIMESTAMP
        self._offset_of_max_ts = base_offset
        self._first_batch_ts: int | None = None  # Kafka's "rollingBasedTimestamp"
        self._bytes_since_index = 0
        # Every batch starting at or after this position has an offset-index entry, so the index alone
        # tells where such a batch ends (the next entry's position): a fetch ends on a batch boundary
        # without reading a header. Known only for batches this process appended or recovery scanned;
        # a segment loaded as it was starts with nothing known (its size).
        self._dense_from = self._size
        self.last_recovery_reason: str | None = None
        self._deferred: list = []
        # next offset -> its batch position, left by recent reads. Several, not one: the followers of a
        # partition (and its consumers) fetch at different offsets, and each continues where it stopped.
        self._read_hints: dict[int, int] = {}
        # Every batch of a segment written (or CRC-scanned by recovery) by this process was validated.
        # One loaded from disk as it was (a closed segment after a restart) is checked lazily, the first
        # time a verifying read covers its bytes: ``verified_to`` is how far that got, ``bad_batch`` what
        # stopped it.
        self.trusted = new
        self.verified_to = 0
        self._verified_next = base_offset
        self.bad_batch: BadBatch | None = None

    # ----- construction ----------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        dir: str | os.PathLike,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        suffix: str = "",
        file_ops: FileOps = OS_FILE_OPS,
    ) -> LogSegment:
        """A new, empty, active segment (indexes preallocated)."""
        return cls(Path(dir), base_offset, config, clock, suffix=suffix, new=True, file_ops=file_ops)

    @classmethod
    def open(
        cls,
        dir: str | os.PathLike,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        suffix: str = "",
        read_only: bool = False,
        file_ops: FileOps = OS_FILE_OPS,
    ) -> LogSegment:
        """An existing segment, trusted as written (call ``load_state`` or ``recover`` next)."""
        return cls(
            Path(dir), base_offset, config, clock, suffix=suffix, read_only=read_only, file_ops=file_ops
        )

    # ----- paths / basic properties ----------------------------------------------------------------
    def _path(self, ext: str) -> Path:
        return self.dir / f"{segment_file_stem(self.base_offset)}{ext}{self.suffix}"

    @property
    def log_path(self) -> Path:
        cached = self._log_path
        if cached is None or cached[0] != self.suffix:
            cached = self._log_path = (self.suffix, self._path(LOG_SUFFIX))
        return cached[1]

    @property
    def index_path(self) -> Path:
        return self._path(INDEX_SUFFIX)

    @property
    def timeindex_path(self) -> Path:
        return self._path(TIMEINDEX_SUFFIX)

    @property
    def size(self) -> int:
        """Bytes of valid batches in the ``.log`` file."""
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (the base offset when empty)."""
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        """Largest batch max-timestamp seen, -1 if no batch carried a timestamp."""
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_ts

    @property
    def retention_timestamp(self) -> int:
        """What time-based retention compares: largest timestamp, else when the segment was created."""
        return self._max_ts if self._max_ts >= 0 else self.created_ms

    @property
    def rolling_timestamp(self) -> int | None:
        """First batch's max timestamp: ``segment.ms`` counts from here (creation time if none)."""
        return self._first_batch_ts

    @property
    def file(self):
        return self._file

    def __repr__(self) -> str:
        return (
            f"LogSegment(base={self.base_offset}, next={self._next_offset}, size={self._size}"
            f"{', ' + self.suffix if self.suffix else ''})"
        )

    # ----- loading ---------------------------------------------------------------------------------
    def index_problem(self) -> str | None:
        """Why the indexes on disk cannot be trusted for this segment, or None."""
        if not self.offset_index.existed:
            return "offset index missing"
        if not self.time_index.existed:
            return "time index missing"
        return self.offset_index.corrupt_reason or self.time_index.corrupt_reason

    def load_state(self) -> str | None:
        """Restore next offset and max timestamp of an inactive segment from its indexes plus a short scan.

        Returns a reason when the indexes do not agree with the log (the caller then recovers).
        """
        problem = self.index_problem()
        if problem:
            return problem
        _, pos = self.offset_index.last_entry
        last_end = pos
        next_offset = self.offset_index.last_offset + 1 if len(self.offset_index) else self.base_offset
        tail_max, tail_off = NO_TIMESTAMP, self.base_offset
        try:
            for p, _base, size, last, max_ts in self.scan(pos, self._size):
                last_end = p + size
                next_offset = last + 1
                if max_ts > tail_max:
                    tail_max, tail_off = max_ts, last
        except CorruptRecordError as e:
            return f"log does not parse after the last index entry: {e.message}"
        if last_end != self._size:
            return f"log has {self._size - last_end} trailing bytes that are not a whole batch"
        problem = self.offset_index.validate_against(
            self._size, next_offset
        ) or self.time_index.validate_against(next_offset)
        if problem:
            return problem
        self._next_offset = next_offset
        ts, off = self.time_index.last_entry
        if tail_max > ts:
            ts, off = tail_max, tail_off
        self._max_ts, self._offset_of_max_ts = ts, off
        if self._size:
            self._first_batch_ts = self._first_batch_timestamp()
        self._bytes_since_index = self._size - pos
        return None

    def _first_batch_timestamp(self) -> int | None:
        for _p, _b, _s, _l, max_ts in self.scan(0, min(self._size, MIN_BATCH_SIZE)):
            return max_ts
        return None

    def recover(self, *, truncate: bool = True) -> int:
        """Rebuild both indexes from a CRC-checked scan and cut any torn/corrupt tail.

        Returns the number of bytes truncated. In read-only mode nothing on disk changes: the segment just
        serves the valid prefix, with indexes rebuilt in memory. ``truncate=False`` (a closed segment
        whose index had to be rebuilt) cuts nothing: a batch failing its CRC is indexed like the others and
        remembered as ``bad_batch``, and an unreadable header ends what the segment serves, without
        destroying the bytes behind it.
        """
        self._read_hints.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts, self._offset_of_max_ts = NO_TIMESTAMP, self.base_offset
        self._first_batch_ts = None
        self._next_offset = self.base_offset
        self.last_recovery_reason = None
        interval = self._interval
        last_entry_pos = 0
        dense_from = 0
        valid = 0
        limit = os.fstat(self._fd).st_size
        self.bad_batch = None
        for pos, h in self._iter_valid(limit, tolerate_crc=not truncate):
            size = h.batch_length + LOG_OVERHEAD
            last = h.base_offset + h.last_offset_delta
            if pos == 0:
                self._first_batch_ts = h.max_timestamp
            if h.max_timestamp > self._max_ts:
                self._max_ts, self._offset_of_max_ts = h.max_timestamp, last
            if pos - last_entry_pos > interval:
                self.offset_index.append(last, pos)
                self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts)
                last_entry_pos = pos
            else:
                dense_from = pos + size
            valid = pos + size
            self._next_offset = last + 1
        truncated = limit - valid
        self._dense_from = dense_from
        if not truncate:
            if truncated:
                self.bad_batch = self.bad_batch or BadBatch(
                    self.log_path.name,
                    valid,
                    self._next_offset,
                    None,
                    self.last_recovery_reason or "unreadable",
                )
            self._size = valid
            self._bytes_since_index = valid - last_entry_pos
            self.trusted = self.bad_batch is None
            self.verified_to = valid
            return 0
        if truncated and not self.read_only:
            self.file_ops.ftruncate(self._fd, valid)
            self._file.seek(valid)
        self._size = valid
        self._bytes_since_index = valid - last_entry_pos
        self.trusted = True
        return truncated

    def _iter_valid(self, limit: int, *, tolerate_crc: bool = False) -> Iterator[tuple[int, BatchHeader]]:
        """Batches that pass full validation, in order; stops at the first bad or torn one.

        ``tolerate_crc``: a whole batch whose header reads fine but whose CRC (or record section) does not
        check out is yielded all the same, the first one remembered in ``bad_batch``."""
        fd = self._fd
        buf = b""
        buf_start = 0
        pos = 0
        expected = self.base_offset
        while pos < limit:
            off = pos - buf_start
            if len(buf) - off < MIN_BATCH_SIZE:
                buf = os.pread(fd, min(_RECOVER_CHUNK, limit - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < MIN_BATCH_SIZE:
                    self.last_recovery_reason = (
                        f"torn batch header at position {pos}: {len(buf)} of {MIN_BATCH_SIZE} bytes"
                    )
                    return
            (length,) = struct.unpack_from(">i", buf, off + 8)
            size = length + LOG_OVERHEAD
            if size < MIN_BATCH_SIZE or size > limit - pos:
                if size < MIN_BATCH_SIZE:
                    self.last_recovery_reason = f"impossible batch length {length} at position {pos}"
                else:
                    self.last_recovery_reason = (
                        f"torn batch at position {pos}: {limit - pos} of {size} bytes present"
                    )
                return
            if len(buf) - off < size:
                buf = os.pread(fd, max(_RECOVER_CHUNK, size), pos)[: limit - pos]
                buf_start, off = pos, 0
            try:
                h = validate_batch(buf, off, max_size=None)
            except CorruptRecordError as e:
                if not tolerate_crc or buf[off + 16] != 2:
                    self.last_recovery_reason = f"at position {pos}: {e.message}"
                    return
                h = BatchHeader.parse(buf, off)
                if self.bad_batch is None:
                    self.bad_batch = BadBatch(
                        self.log_path.name, pos, max(h.base_offset, expected), size, e.message
                    )
            if h.base_offset < expected:
                self.last_recovery_reason = (
                    f"batch at position {pos} has base offset {h.base_offset}, expected >= {expected}"
                )
                return
            if h.base_offset + h.last_offset_delta - self.base_offset > _INT_MAX:
                self.last_recovery_reason = f"batch at position {pos} is beyond the segment's offset range"
                return
            expected = h.base_offset + h.last_offset_delta + 1
            yield pos, h
            pos += size

    def verify(self, start: int, end: int) -> BadBatch | None:
        """CRC-check the batches in ``[start, end)`` that this process has not checked yet; returns the
        segment's first bad batch if one lies at or after ``start`` (found now or before).

        ``start`` must be a batch boundary. Checked bytes stay checked (``verified_to``), so a segment
        loaded from disk costs one pass over each byte read, the first time a consumer reads it.
        """
        bad = self.bad_batch
        if self.trusted or (bad is None and end <= self.verified_to):
            return None
        if bad is not None:
            return bad if bad.position >= start else None
        pos = self.verified_to if start <= self.verified_to else start
        expected = self._verified_next if pos == self.verified_to else -1
        fd = self._fd
        limit = self._size
        while pos < end:
            head = os.pread(fd, LOG_OVERHEAD + 5, pos)
            if len(head) < LOG_OVERHEAD + 5:
                break  # the segment's end
            base, length = struct.unpack_from(">qi", head)
            size = length + LOG_OVERHEAD
            offset = base if expected < 0 else expected
            if head[16] != 2 or size < MIN_BATCH_SIZE or pos + size > limit:
                why = f"unreadable batch header (magic {head[16]}, batch length {length})"
                self.bad_batch = BadBatch(self.log_path.name, pos, offset, None, why)
                return self.bad_batch
            data = os.pread(fd, size, pos)
            try:
                h = validate_batch(data, 0, max_size=None)
            except CorruptRecordError as e:
                # The message counts from the batch just read; the position in the file is ``pos``.
                why = e.message.replace(" in batch at position 0", "").replace(" at position 0", "")
                self.bad_batch = BadBatch(self.log_path.name, pos, offset, size, why)
                return self.bad_batch
            if expected >= 0 and h.base_offset != expected:
                why = f"base offset {h.base_offset} where offset {expected} was due"
                self.bad_batch = BadBatch(self.log_path.name, pos, expected, size, why)
                return self.bad_batch
            pos += size
            expected = h.base_offset + h.last_offset_delta + 1
            if pos > self.verified_to and (start <= self.verified_to):
                self.verified_to, self._verified_next = pos, expected
        return None

    # ----- scanning (header only) --------------------------------------------------------------------
    def scan(self, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
        """Walk batch headers in ``[start, end)``: yields (position, base, size, last_offset, max_ts).

        No CRC check: used on data that was validated on append or recovery.
        """
        fd = self._fd
        unpack = _SCAN.unpack_from
        buf = b""
        buf_start = start
        pos = start
        while end - pos >= MIN_BATCH_SIZE:
            off = pos - buf_start
            if len(buf) - off < _SCAN.size:
                buf = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < _SCAN.size:
                    return
            base, length, _ple, magic, _crc, _attrs, lod, _bts, max_ts = unpack(buf, off)
            size = length + LOG_OVERHEAD
            if magic != 2 or size < MIN_BATCH_SIZE:
                raise CorruptRecordError(
                    f"bad batch header at position {pos} of segment {self.log_path.name} in {self.dir.name} "
                    f"(magic {magic}, length {length})"
                )
            if pos + size > end:
                return
            yield pos, base, size, base + lod, max_ts
            pos += size

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, int, int, int] | None:
        """(position, size, base_offset, last_offset) of the first batch whose last offset >= ``offset``."""
        _, pos = self.offset_index.lookup(offset)
        pos = max(pos, start_position)
        for p, base, size, last, _ts in self.scan(pos, self._size):
            if last >= offset:
                return p, size, base, last
        return None

    # ----- append ----------------------------------------------------------------------------------
    def append(
        self, data, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, *, defer: bool = False
    ) -> int:
        """Write one stamped batch; returns the position it was written at.

        ``defer`` queues the bytes for one combined write by ``write_deferred`` (the caller holds the
        log lock until then, so nobody sees the bookkeeping run ahead of the file).
        """
        pos = self._size
        size = len(data)
        if defer:
            self._deferred.append(data)
        else:
            self._write(data, size)
        if pos == 0:
            self._first_batch_ts = max_timestamp
        if max_timestamp > self._max_ts:
            self._max_ts = max_timestamp
            self._offset_of_max_ts = offset_of_max_timestamp
        if self._bytes_since_index > self._interval:
            self.offset_index.append(last_offset, pos)
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts)
            self._bytes_since_index = 0
        else:
            self._dense_from = pos + size  # a batch without an entry: the index is dense only past it
        self._bytes_since_index += size
        self._size = pos + size
        self._next_offset = last_offset + 1
        return pos

    def _write(self, data, size: int, done: int = 0) -> None:
        """Write ``data`` from byte ``done`` on; a short write (rare on regular files) is finished in a loop."""
        if done == 0:
            done = self._os_write(self._fd, data)
        if done != size:
            view = memoryview(data)
            while done < size:
                n = self._os_write(self._fd, view[done:])
                if not n:
                    raise KafkaStorageError(f"write to {self.log_path} made no progress")
                done += n

    def write_deferred(self) -> None:
        """Write buffers queued by ``append(..., defer=True)`` with as few system calls as IOV_MAX allows."""
        bufs, self._deferred = self._deferred, []
        for i in range(0, len(bufs), 1024):  # IOV_MAX
            chunk = bufs[i : i + 1024]
            want = sum(len(b) for b in chunk)
            done = self.file_ops.writev(self._fd, chunk)
            if done != want:  # a short vectored write: finish the rest as one buffer
                self._write(b"".join(chunk), want, done)

    def should_roll(
        self, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int | None
    ) -> str | None:
        """Why the next batch must go to a new segment (Kafka's rules), or None."""
        size = self._size
        if size == 0:
            return None
        if size > self._config.segment_bytes - batch_size:
            return "segment.bytes"
        if self.offset_index.is_full or self.time_index.is_full:
            return "index full"
        if last_offset - self.base_offset > _INT_MAX:
            return "offset range"
        first = self._first_batch_ts
        if first is not None and first >= 0 and max_timestamp >= 0:
            waited = max_timestamp - first
        else:
            waited = (now_ms if now_ms is not None else self._clock.now_ms()) - self.created_ms
        if waited > self._config.segment_ms:
            return "segment.ms"
        return None

    # ----- read ------------------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_position: int | None = None,
        min_one: bool = True,
        verify: bool = False,
    ) -> FileSlice | None:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (at least one batch if
        ``min_one``) and never past ``max_position``. None if no batch here reaches ``offset``.

        ``verify`` (the broker's fetch path): the bytes are CRC-checked first if this process has not
        checked them yet. The slice then ends before a bad batch; a read starting at it returns that batch
        alone (whose CRC the consumer will find wrong), or raises ``CorruptRecordError`` when not even its
        header can be read."""
        hints = self._read_hints
        start = hints.get(offset)
        if start is not None:
            # A reader continuing where its last fetch ended: the batch boundary is already known.
            if start >= self._size:
                return None
        else:
            found = self.translate_offset(offset)
            if found is None:
                return None
            start = found[0]
        end_limit = self._size if max_position is None else min(max_position, self._size)
        if start >= end_limit:
            return FileSlice(self.log_path, start, 0, file=self._file)
        want = start + max_bytes
        next_offset = -1
        if want >= end_limit:
            end = end_limit
            if max_position is None:
                next_offset = self._next_offset
        elif (found := self.offset_index.batch_at_position(want, self._dense_from, self._size)) and (
            (found[0] > start and found[2] >= 0) or (found[0] == start and min_one)
        ):
            # The batch holding byte ``want`` is indexed, and so is the one before it (or it is the
            # first): the index says where the fetch ends, no header needs reading. The next fetch is
            # remembered under the offset a reader asks for next, one past the last offset served (the
            # scan below uses the batch's base offset: the same, unless compaction left a gap).
            p, p_end, prev_last, last = found
            if p == start:
                end, next_offset = p_end, last + 1
            else:
                end, next_offset = p, prev_last + 1
        else:
            _, p = self.offset_index.lookup_position(want)
            end = p = max(p, start)
            for q, base, size, last, _t in self.scan(p, end_limit):
                if q + size > want:
                    if q == start and min_one:
                        end, next_offset = q + size, last + 1
                    else:  # the batch at q is where the next fetch will start
                        end, next_offset = q, base
                    break
                end, next_offset = q + size, last + 1
            if end == start and min_one:
                for _q, _b, size, last, _t in self.scan(start, end_limit):
                    end, next_offset = start + size, last + 1
                    break
        if verify and not self.trusted:
            bad = self.verify(start, end)
            if bad is not None and bad.position < end:
                next_offset = -1
                if bad.position > start:
                    end = bad.position  # serve the good batches before it
                elif bad.size is not None:
                    end = start + bad.size  # the bad batch alone: the consumer's CRC check says where
                else:
                    raise CorruptRecordError(bad.describe(f"{self.dir.name}"))
        if next_offset >= 0:
            hints[next_offset] = end
            if len(hints) > _READ_HINTS:
                del hints[next(iter(hints))]  # the oldest
        return FileSlice(self.log_path, start, end - start, file=self._file)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int = 0) -> tuple[int, int] | None:
        """Earliest ``(offset, timestamp)`` at or after ``start_offset`` with timestamp >= ``timestamp``."""
        # Strictly-below lookup: the entry (T, O) with T < ts proves every offset <= O is too early.
        _, off = self.time_index.lookup(timestamp - 1)
        _, pos = self.offset_index.lookup(max(off, start_offset))
        for p, _base, size, last, max_ts in self.scan(pos, self._size):
            if max_ts >= timestamp and last >= start_offset:
                _h, rows = decode_batch_tuples(os.pread(self._fd, size, p))
                for offset, ts, *_rest in rows:
                    if ts >= timestamp and offset >= start_offset:
                        return offset, ts
        return None

    # ----- mutation ---------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        if self.read_only:
            raise KafkaStorageError("cannot truncate a segment opened read-only")
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        self._read_hints.clear()
        self._dense_from = min(self._dense_from, position)
        removed = self._size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.file_ops.ftruncate(self._fd, position)
        self._file.seek(position)
        self._size = position
        # Recompute what the cut may have removed: next offset, max timestamp, index spacing.
        last_pos = self.offset_index.last_entry[1]
        ts, off = self.time_index.last_entry
        nxt = self.offset_index.last_offset + 1 if len(self.offset_index) else self.base_offset
        for _p, _b, _s, last, max_ts in self.scan(last_pos, position):
            nxt = last + 1
            if max_ts > ts:
                ts, off = max_ts, last
        self._next_offset = nxt
        self._max_ts, self._offset_of_max_ts = ts, off
        self._bytes_since_index = position - last_pos
        if position == 0:
            self._first_batch_ts = None
            self.created_ms = self._clock.now_ms()
        return removed

    def make_active(self) -> None:
        """Reopen the indexes for writing (after truncation made this the last segment)."""
        self.offset_index.resize(self._config.segment_index_bytes)
        self.time_index.resize(self._config.segment_index_bytes)

    def on_become_inactive(self) -> None:
        """On roll: record the final max timestamp and trim indexes to their real size."""
        if self._max_ts >= 0 and (self.time_index.mutable or self.time_index.in_memory):
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        """fsync the log and both indexes."""
        if self.read_only:
            return
        self.file_ops.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        if not self._file.closed:
            if not self.read_only:
                self.on_become_inactive()
            self._file.close()

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all three files (``.cleaned`` -> ``.swap`` -> final, or -> ``.deleted``)."""
        old_paths = (self.log_path, self.index_path, self.timeindex_path)
        self.suffix = new_suffix
        new_paths = (self.log_path, self.index_path, self.timeindex_path)
        if self.read_only:
            raise KafkaStorageError("cannot rename segment files in read-only mode")
        for old, new in zip(old_paths, new_paths, strict=True):
            if old.exists():
                self.file_ops.replace(old, new)
        self.offset_index.path, self.time_index.path = new_paths[1], new_paths[2]

    def delete_files(self) -> list[Path]:
        """Close and unlink all files; returns the paths removed."""
        self.offset_index.delete()
        self.time_index.delete()
        if not self._file.closed:
            self._file.close()
        removed = []
        for p in (self.log_path, self.index_path, self.timeindex_path):
            if p.exists():
                p.unlink()
            removed.append(p)
        return removed

    def set_modified_time(self, ms: int) -> None:
        """Stamp the ``.log`` mtime (the cleaner records when it rewrote the segment, per the clock)."""
        if not self.read_only:
            ns = ms * 1_000_000
            os.utime(self.log_path, ns=(ns, ns))


__all__ = ["BadBatch", "LogSegment", "parse_base_offset", "segment_file_stem"]
