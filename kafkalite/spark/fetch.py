"""A Spark task's fetch loop over one partition's segment files, without opening a ``Log``.

``Log.open`` (even read-only) re-validates the whole active segment and rebuilds its indexes: needed to
learn where valid data ends, which planning already did, and a third of a task's time when every task
paid it again. A task only needs whole batches from the one holding its start offset, below the end
fixed at planning (every batch below that end was complete then). So it lists the ``.log`` files, finds
its start by walking batch headers, and reads the files in ``fetch_max_bytes`` slices; the caller checks
every batch's CRC, as a Kafka consumer does.

Things a writer may do meanwhile, and what happens: appends (a torn batch at the tail lies beyond the
planned end, never read); retention deletes old segments or DeleteRecords moves the log start (the
caller sees ``log_start`` move past its position: data loss); the cleaner swaps a segment for its
compacted copy (same base offset, same offsets minus removed records; a ``.swap`` file is used while the
plain name is missing, and a vanished file is looked up again).
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from pathlib import Path

from kafkalite.storage.checkpoint import OffsetCheckpoint

_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, at byte 23 of a batch
_HEAD_BYTES = 27
LOG_OVERHEAD = 12
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


def _base_offset(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class SegmentFetcher:
    """Reads whole record batches of one partition directory by offset. Use as a context manager."""

    def __init__(self, dir: str | os.PathLike) -> None:
        self.dir = Path(dir)
        self.topic, _, part = self.dir.name.rpartition("-")
        self.partition = int(part) if part.isdigit() else 0
        self._segments: list[tuple[int, str]] = []
        self._bases: list[int] = []
        self._fds: dict[str, int] = {}
        self._hint: tuple[str, int, int] | None = None  # (file, next offset, its position)
        self._buffer = bytearray()
        self._list()

    def _list(self) -> None:
        plain: dict[int, str] = {}
        swaps: dict[int, str] = {}
        for name in os.listdir(self.dir):
            base = _base_offset(name)
            if base is None:
                continue
            if name.endswith(".log"):
                plain[base] = name
            elif name.endswith(".log.swap"):
                swaps[base] = name
        for base, name in swaps.items():  # mid-swap: the cleaned copy stands in for a missing original
            plain.setdefault(base, name)
        self._segments = [(b, str(self.dir / n)) for b, n in sorted(plain.items())]
        self._bases = [b for b, _ in self._segments]

    @property
    def log_start(self) -> int | None:
        """Lowest offset still served: the first segment's base, or the DeleteRecords checkpoint if higher."""
        self._list()
        if not self._segments:
            return None
        cp = OffsetCheckpoint(self.dir / LOG_START_OFFSET_CHECKPOINT).read().get((self.topic, self.partition))
        return max(self._segments[0][0], cp or 0)

    def _fd(self, path: str) -> int | None:
        fd = self._fds.get(path)
        if fd is None:
            try:
                fd = self._fds[path] = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return None
        return fd

    def _position(self, fd: int, size: int, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= ``offset`` (header walk), None if none."""
        pos = 0
        while pos + _HEAD_BYTES <= size:
            head = os.pread(fd, _HEAD_BYTES, pos)
            if len(head) < _HEAD_BYTES:
                return None
            base, length = _HEAD.unpack_from(head)
            if base + _LAST_DELTA.unpack_from(head, 23)[0] >= offset:
                return pos
            pos += length + LOG_OVERHEAD
        return None

    def fetch(self, offset: int, max_bytes: int) -> memoryview | bytes:
        """Whole batches from the one holding ``offset`` (at least one, up to ``max_bytes`` otherwise);
        empty when no batch at or after ``offset`` exists.

        A view on what was read, cut after the last whole batch (slicing bytes would copy them), valid
        until the next fetch: every fetch reads into the same buffer, which spares a fresh buffer's page
        faults each time. Copy what must outlive it (the Arrow decoder does)."""
        for _attempt in range(3):
            i = max(0, bisect_right(self._bases, offset) - 1)
            missing = False
            for _base, path in self._segments[i:]:
                fd = self._fd(path)
                if fd is None:  # deleted or renamed by the cleaner since we listed: list again
                    missing = True
                    break
                size = os.fstat(fd).st_size
                hint = self._hint
                if hint is not None and hint[0] == path and hint[1] == offset:
                    pos: int | None = hint[2]
                else:
                    pos = self._position(fd, size, offset)
                if pos is None or pos + _HEAD_BYTES > size:
                    continue  # nothing here at or after offset: the next segment
                data = self._read(fd, min(max_bytes, size - pos), pos)
                # numba loads on a task's first fetch: a planning process never pays for it
                from kafkalite.spark.batch_walk import whole_batches

                cut, nxt = whole_batches(data)
                if cut == 0:  # the first batch is larger than max_bytes
                    _, length = _HEAD.unpack_from(data)
                    if pos + length + LOG_OVERHEAD > size:
                        return b""  # a torn batch being written: beyond anything planned
                    data = os.pread(fd, length + LOG_OVERHEAD, pos)
                    cut, nxt = whole_batches(data)
                self._hint = (path, nxt, pos + cut)
                return data[:cut]
            if not missing:
                return b""
            self._list()
            self._hint = None
        return b""

    def _read(self, fd: int, n: int, pos: int) -> memoryview:
        if len(self._buffer) < n:
            self._buffer = bytearray(n)
        view = memoryview(self._buffer)[:n]
        got = os.preadv(fd, [view], pos)
        return view[:got]

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> SegmentFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SegmentFetcher"]
