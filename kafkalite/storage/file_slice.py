"""A byte range of a segment file: what a fetch returns before anything is copied.

Kafka's ``FileRecords.slice`` hands the network layer a (file, position, size) triple so the kernel can
``sendfile`` the bytes straight from the page cache to the socket. ``FileSlice`` is that triple; ``read``
is one ``pread`` for callers that want the bytes, ``send_to`` is the zero-copy path.
"""

from __future__ import annotations

import io
import os
import select
import socket
from collections.abc import Iterator
from pathlib import Path

from kafkalite.errors import KafkaStorageError
from kafkalite.records import BatchHeader, Record, RecordBatch, iter_batches


class FileSlice:
    """``size`` bytes of ``path`` starting at ``position``; always whole record batches."""

    __slots__ = ("path", "position", "size", "_file")

    def __init__(self, path: str | os.PathLike, position: int, size: int, *, file=None) -> None:
        if position < 0 or size < 0:
            raise ValueError(f"invalid slice position={position} size={size}")
        self.path = path if isinstance(path, Path) else Path(path)
        self.position = position
        self.size = size
        # The segment's open file object when there is one: reads then need no open() and keep working
        # after the file is renamed or unlinked, as Kafka's shared FileChannel does.
        self._file = file

    def __len__(self) -> int:
        return self.size

    @property
    def end_position(self) -> int:
        return self.position + self.size

    def _fd(self) -> tuple[int, bool]:
        f = self._file
        if f is not None:
            if f.closed:
                # Never fall back to the path: a cleaned segment may now carry the same name.
                raise KafkaStorageError(
                    f"segment file {self.path} was closed (segment deleted or log closed)"
                )
            return f.fileno(), False
        try:
            return os.open(self.path, os.O_RDONLY), True
        except FileNotFoundError:
            raise KafkaStorageError(f"segment file {self.path} is gone (deleted or renamed)") from None

    def read(self) -> bytes:
        """The bytes, via one ``pread`` (more only if the kernel returns a short read)."""
        if self.size == 0:
            return b""
        fd, owned = self._fd()
        try:
            data = os.pread(fd, self.size, self.position)
            if len(data) < self.size:
                parts = [data]
                got = len(data)
                while got < self.size:
                    more = os.pread(fd, self.size - got, self.position + got)
                    if not more:
                        raise KafkaStorageError(
                            f"{self.path} ended at {self.position + got}, slice wants {self.end_position}"
                        )
                    parts.append(more)
                    got += len(more)
                data = b"".join(parts)
            return data
        finally:
            if owned:
                os.close(fd)

    def open_reader(self) -> io.FileIO:
        """A file object of its own on the same file, for a sender that seeks (asyncio's ``sendfile``):
        it shares no offset with the segment's, and keeps the bytes readable if the segment is deleted."""
        fd, owned = self._fd()
        if owned:
            return io.FileIO(fd, "r", closefd=True)
        proc = f"/proc/self/fd/{fd}"  # reopens the inode itself, even when unlinked (Linux)
        return io.FileIO(proc if os.path.exists(proc) else self.path, "r")

    def send_to(self, sock: socket.socket) -> int:
        """Copy the slice to a socket with ``os.sendfile`` (zero copy); returns the bytes sent."""
        if self.size == 0:
            return 0
        fd, owned = self._fd()
        out = sock.fileno()
        sent = 0
        try:
            while sent < self.size:
                try:
                    n = os.sendfile(out, fd, self.position + sent, self.size - sent)
                except BlockingIOError:
                    # Non-blocking socket with a full send buffer: wait until it drains.
                    select.select([], [out], [])
                    continue
                if n == 0:
                    raise KafkaStorageError(
                        f"sendfile stopped at {self.position + sent} of {self.path} (file shorter than slice)"
                    )
                sent += n
        finally:
            if owned:
                os.close(fd)
        return sent

    def headers(self) -> Iterator[BatchHeader]:
        """Batch headers in the slice (no CRC check, no record decoding)."""
        data = self.read()
        for _pos, header in iter_batches(data):
            yield header

    def batches(self) -> Iterator[RecordBatch]:
        """Fully decoded batches (CRC-checked)."""
        data = self.read()
        for pos, _header in iter_batches(data):
            yield RecordBatch.decode(data, pos)

    def records(self) -> Iterator[Record]:
        for batch in self.batches():
            yield from batch.records

    def __repr__(self) -> str:
        return f"FileSlice({self.path.name}, position={self.position}, size={self.size})"


__all__ = ["FileSlice"]
