"""The sparse offset index: ``%020d.index``, 8-byte entries mapping offsets to file positions.

Each entry is a big-endian int32 offset *relative to the segment's base offset* followed by an int32
byte position in the ``.log`` file. Relative offsets are why a segment can hold at most 2^31 offsets and
why an entry costs 8 bytes instead of 12. Entries are sparse (one per ``index.interval.bytes`` of log),
so a lookup answers "the last indexed batch at or before this offset" and the segment finishes with a
short scan of batch headers.

While its segment is active, the index file is preallocated to ``segment.index.bytes`` (rounded down to
a whole number of entries), as Kafka does; on roll or close it is trimmed to the bytes actually used.
Entries live in two in-memory arrays, so lookups never touch the file; the lookup is a plain binary
search and records its step count for the book.

Kafka writes its index through a shared memory map. Here entries reach the file with ``pwrite`` a page
at a time (and on flush, roll and close): on the virtual machines this project runs on, the first store
into each newly mapped page of a sparse file stalled for 0.03 to 3 ms, which made opening and closing a
log take 7.5 ms instead of 2.4. A process crash can lose the entries of the last page; recovery rebuilds
the active segment's indexes from the log anyway, as Kafka's does after an unclean shutdown.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from kafkalite.errors import KafkaStorageError
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

_PAGE = 4096  # entries reach the file a page at a time


_ZERO_BLOCK = bytes(65536)


def _nonzero_length(data: bytes) -> int:
    """``len(data.rstrip(b"\\0"))``, fast on a long run of zeros.

    ``bytes.rstrip`` with an argument tests byte by byte: about 35 ms of CPU for each 10 MiB index a
    crashed broker left preallocated, and the simulated crashes of the book's chapters load such
    indexes by the dozen. Whole 64 KiB blocks of zeros are skipped by comparison (memcmp) first.
    """
    end, block = len(data), len(_ZERO_BLOCK)
    while end >= block and data[end - block : end] == _ZERO_BLOCK:
        end -= block
    start = max(0, end - block)
    return start + len(data[start:end].rstrip(b"\0"))


class CorruptIndexError(KafkaStorageError):
    """An index file failed its sanity check; the owning segment rebuilds it from the log."""


class _Index:
    """Shared machinery of the offset and time indexes: two parallel columns, file mirror, search."""

    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str
    KIND: str

    def __init__(
        self,
        path: str | os.PathLike,
        base_offset: int,
        max_index_size: int = 10485760,
        *,
        mutable: bool = True,
        in_memory: bool = False,
        file_ops: FileOps = OS_FILE_OPS,
    ) -> None:
        self.path = Path(path)
        self.file_ops = file_ops
        self.base_offset = base_offset
        size = self.ENTRY.size
        self.max_index_size = max(0, max_index_size // size * size)
        self.max_entries = self.max_index_size // size
        self._page_entries = max(1, _PAGE // size)
        self.in_memory = in_memory
        self._last_lookup: tuple[array, int] | None = None
        self._keys = array(self.KEY_TYPE)
        self._vals = array(self.VALUE_TYPE)
        self._fd: int | None = None
        self._written = 0  # entries already in the file; the rest wait for a whole page or a flush
        self.corrupt_reason: str | None = None
        self.existed = self.path.exists()
        if self.existed:
            self._load()
        if mutable and not in_memory:
            self._make_mutable()

    # ----- loading / file state -------------------------------------------------------------------
    def _load(self) -> None:
        data = self.path.read_bytes()
        esize = self.ENTRY.size
        if len(data) % esize:
            self.corrupt_reason = f"size {len(data)} is not a multiple of the {esize}-byte entry"
            data = data[: len(data) // esize * esize]
        # Trailing all-zero entries are preallocated space: the file was never trimmed (unclean stop).
        # Real entries are never all zero, so the end of the non-zero bytes, rounded up to whole
        # entries, is where they end.
        used = -(-_nonzero_length(data) // esize) * esize
        if used < len(data) and len(data) > esize:
            self.corrupt_reason = (
                self.corrupt_reason or "file was never trimmed (trailing preallocated zeros)"
            )
            data = data[:used]
        keys, vals = self._keys, self._vals
        for k, v in self.ENTRY.iter_unpack(data):
            keys.append(k)
            vals.append(v)
        if self.corrupt_reason is None:
            self.corrupt_reason = self._check_order()

    def _check_order(self) -> str | None:
        raise NotImplementedError

    def _make_mutable(self) -> None:
        """Open the file read-write, preallocated to the maximum size, and write the entries held."""
        if self._fd is not None or self.in_memory:
            return
        ops = self.file_ops
        fd = ops.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Drop every old byte, then grow: the kernel hands back zeros (a sparse file), so
            # preallocation costs nothing until entries are written.
            ops.ftruncate(fd, 0)
            ops.ftruncate(fd, self.max_index_size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        # Rewrite the entries so file and memory agree even if the old file was corrupt or short.
        self._written = 0
        self._write_pending()

    @property
    def mutable(self) -> bool:
        return self._fd is not None

    def resize(self, max_index_size: int | None = None) -> None:
        """Make the index writable again (preallocated), e.g. when truncation makes its segment active."""
        if max_index_size is not None and self._fd is None:
            size = self.ENTRY.size
            self.max_index_size = max(0, max_index_size // size * size)
            self.max_entries = self.max_index_size // size
        self._make_mutable()

    def trim(self) -> None:
        """Write what waits, shrink the file to the entries in use and close it (segment became inactive)."""
        if self._fd is None:
            return
        fd = self._fd
        try:
            self._write_pending()
            self.file_ops.ftruncate(fd, len(self._keys) * self.ENTRY.size)
        finally:
            os.close(fd)
            self._fd = None

    def flush(self) -> None:
        """Make the entries durable (write what waits, then fsync)."""
        if self._fd is not None:
            self._write_pending()
            self.file_ops.fsync(self._fd)

    def _write_pending(self) -> None:
        """Write the entries not yet in the file, as one ``pwrite``."""
        n = len(self._keys)
        done = self._written
        if done >= n or self._fd is None:
            return
        pack = self.ENTRY.pack
        self._pwrite_all(b"".join(map(pack, self._keys[done:], self._vals[done:])), done * self.ENTRY.size)
        self._written = n

    def _pwrite_all(self, data: bytes, at: int) -> None:
        """``pwrite`` all of ``data`` at ``at``, finishing a short write in a loop."""
        view = memoryview(data)
        while view:
            k = self.file_ops.pwrite(self._fd, view, at)
            if not k:
                raise KafkaStorageError(f"write to {self.path.name} made no progress")
            view, at = view[k:], at + k

    def close(self) -> None:
        self.trim()

    def delete(self) -> None:
        self._drop_file_handles()
        if not self.in_memory:
            self.path.unlink(missing_ok=True)

    def _drop_file_handles(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, new_path: str | os.PathLike) -> None:
        """Rename the file; an open mapping keeps working (POSIX rename keeps the inode)."""
        new_path = Path(new_path)
        if not self.in_memory and self.path.exists():
            self.file_ops.replace(self.path, new_path)
        self.path = new_path

    def reset(self) -> None:
        """Forget every entry (before a rebuild). A file-backed index becomes writable."""
        del self._keys[:]
        del self._vals[:]
        self.corrupt_reason = None
        if self.in_memory:
            return
        self._drop_file_handles()
        self._make_mutable()  # truncates to the (now zero) entries in use, then preallocates

    # ----- entries ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._keys)

    @property
    def entry_count(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes of real entries (what the file holds once trimmed)."""
        return len(self._keys) * self.ENTRY.size

    def _write(self, key: int, value: int) -> None:
        n = len(self._keys)
        if n >= self.max_entries:
            raise KafkaStorageError(f"{self.KIND} {self.path.name} is full ({self.max_entries} entries)")
        if self._fd is None and not self.in_memory:
            raise KafkaStorageError(f"{self.KIND} {self.path.name} is not writable (segment inactive)")
        self._keys.append(key)
        self._vals.append(value)
        if n + 1 - self._written >= self._page_entries:
            self._write_pending()

    def _cut(self, n: int) -> None:
        """Keep only the first ``n`` entries."""
        old = len(self._keys)
        if n >= old:
            return
        del self._keys[n:]
        del self._vals[n:]
        esize = self.ENTRY.size
        if self._fd is not None:
            if n < self._written:  # zero what the file holds past the kept entries, as Kafka's truncate does
                self._pwrite_all(bytes((self._written - n) * esize), n * esize)
                self._written = n
        elif not self.in_memory and self.path.exists():
            fd = self.file_ops.open(self.path, os.O_RDWR)
            try:
                self.file_ops.ftruncate(fd, n * esize)
            finally:
                os.close(fd)

    def _floor(self, column: array, target: int) -> int:
        """Index of the last entry whose ``column`` value is <= target, or -1."""
        self._last_lookup = (column, target)
        return bisect_right(column, target) - 1

    @property
    def last_lookup_steps(self) -> int:
        """Probes the binary search of the last lookup made (replayed on demand: the hot path uses the
        C ``bisect``, which makes the same probes)."""
        if self._last_lookup is None:
            return 0
        column, target = self._last_lookup
        lo, hi, steps = 0, len(column), 0
        while lo < hi:
            steps += 1
            mid = (lo + hi) >> 1
            if target < column[mid]:
                hi = mid
            else:
                lo = mid + 1
        return steps

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name}, base={self.base_offset}, entries={len(self)})"


class OffsetIndex(_Index):
    """Sparse map from offset to ``.log`` byte position for one segment."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"
    KIND = "offset index"

    def _check_order(self) -> str | None:
        keys, vals = self._keys, self._vals
        if keys and keys[0] < 0:
            return f"first entry has negative relative offset {keys[0]}"
        if not all(map(int.__lt__, keys, keys[1:])):
            return "relative offsets are not strictly increasing"
        if not all(map(int.__lt__, vals, vals[1:])):
            return "positions are not strictly increasing"
        return None

    def validate_against(self, log_size: int, next_offset: int) -> str | None:
        """Reason this index cannot belong to a log of this size/offset range, or None."""
        if self.corrupt_reason:
            return self.corrupt_reason
        if self._vals and (self._vals[-1] >= log_size or self._vals[0] < 0):
            return f"last entry points at position {self._vals[-1]}, past the log's {log_size} bytes"
        if self._keys and self.base_offset + self._keys[-1] >= next_offset:
            return f"last entry offset {self.base_offset + self._keys[-1]} is past the log end {next_offset}"
        return None

    @property
    def entries(self) -> list[tuple[int, int]]:
        """``(relative_offset, position)`` pairs, oldest first."""
        return list(zip(self._keys, self._vals, strict=True))

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or the base offset when empty."""
        return self.base_offset + self._keys[-1] if self._keys else self.base_offset

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(offset, position)`` of the last entry, ``(base, 0)`` when empty."""
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._vals[-1]

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must grow (Kafka refuses anything else)."""
        rel = offset - self.base_offset
        if self._keys and (rel <= self._keys[-1] or position <= self._vals[-1]):
            raise KafkaStorageError(
                f"offset index entry ({offset}, {position}) does not follow the last entry "
                f"({self.base_offset + self._keys[-1]}, {self._vals[-1]}) in {self.path.name}"
            )
        if not 0 <= rel <= 0x7FFFFFFF:
            raise KafkaStorageError(f"offset {offset} does not fit segment {self.base_offset}'s int32 index")
        self._write(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or before ``offset``; ``(base, 0)`` if none."""
        i = self._floor(self._keys, offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._vals[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Last entry whose position is <= ``position`` (used to end a fetch on a batch boundary)."""
        i = bisect_right(self._vals, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._vals[i]

    def batch_at_position(
        self, position: int, dense_from: int, log_size: int
    ) -> tuple[int, int, int, int] | None:
        """The batch holding byte ``position`` as the index alone tells it, when every batch from
        ``dense_from`` to the log's end (``log_size``) has an entry: (its position, its end, the last
        offset of the batch before it or -1 when that batch has no entry, its last offset). None when
        the entry at or before ``position`` lies before ``dense_from`` (the batch may end sooner)."""
        vals = self._vals
        i = bisect_right(vals, position) - 1
        if i < 0 or vals[i] < dense_from:
            return None
        end = vals[i + 1] if i + 1 < len(vals) else log_size
        base = self.base_offset
        prev = base + self._keys[i - 1] if i > 0 and vals[i - 1] >= dense_from else -1
        return vals[i], end, prev, base + self._keys[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for ``offset`` and later."""
        self._cut(bisect_right(self._keys, offset - self.base_offset - 1))


__all__ = ["CorruptIndexError", "OffsetIndex"]
