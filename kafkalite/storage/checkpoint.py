"""Kafka's checkpoint files: a version line, an entry-count line, then one entry per line.

Used here for ``leader-epoch-checkpoint`` (``epoch startOffset``), ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint`` (``topic partition offset``). Writes are atomic the way Kafka does them:
write ``<name>.tmp``, fsync it, rename over the old file, fsync the directory, so a crash leaves either
the old or the new content, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from kafkalite.errors import KafkaStorageError
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

CHECKPOINT_VERSION = 0


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so a rename inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointFile:
    """A checkpoint file of whitespace-separated entries; entries are tuples of strings/ints."""

    def __init__(
        self,
        path: str | os.PathLike,
        version: int = CHECKPOINT_VERSION,
        fields: int | None = None,
        file_ops: FileOps = OS_FILE_OPS,
    ):
        self.path = Path(path)
        self.version = version
        self.fields = fields
        self.file_ops = file_ops

    def write(self, entries: Iterable[Sequence[object]]) -> None:
        rows = [" ".join(str(x) for x in entry) for entry in entries]
        text = f"{self.version}\n{len(rows)}\n" + "".join(r + "\n" for r in rows)
        self.file_ops.replace_atomically(self.path, text.encode("utf-8"))

    def read(self) -> list[tuple[str, ...]]:
        """Entries as string tuples; a missing file is empty; a malformed one raises KafkaStorageError."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []

        def bad(why: str) -> KafkaStorageError:
            return KafkaStorageError(f"malformed checkpoint file {self.path}: {why}")

        if len(lines) < 2:
            raise bad("missing version or entry-count line")
        try:
            version, count = int(lines[0]), int(lines[1])
        except ValueError:
            raise bad(f"expected integers on the first two lines, got {lines[:2]!r}") from None
        if version != self.version:
            raise bad(f"unsupported version {version} (expected {self.version})")
        body = [ln.split() for ln in lines[2:] if ln.strip()]
        if len(body) != count:
            raise bad(f"header says {count} entries, found {len(body)}")
        if self.fields is not None:
            for row in body:
                if len(row) != self.fields:
                    raise bad(f"entry {' '.join(row)!r} should have {self.fields} fields")
        return [tuple(row) for row in body]


class OffsetCheckpoint:
    """``topic partition offset`` entries (log start offsets, cleaner positions, recovery points)."""

    def __init__(self, path: str | os.PathLike, file_ops: FileOps = OS_FILE_OPS):
        self._file = CheckpointFile(path, fields=3, file_ops=file_ops)
        self.path = self._file.path

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        self._file.write((t, p, o) for (t, p), o in sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(t, int(p)): int(o) for t, p, o in self._file.read()}
        except ValueError as e:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: {e}") from None


class LeaderEpochCheckpoint:
    """``epoch startOffset`` entries: the first offset written under each leader epoch."""

    FILE_NAME = "leader-epoch-checkpoint"

    def __init__(self, path: str | os.PathLike, file_ops: FileOps = OS_FILE_OPS):
        self._file = CheckpointFile(path, fields=2, file_ops=file_ops)
        self.path = self._file.path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(entries)

    def read(self) -> list[tuple[int, int]]:
        try:
            return [(int(e), int(o)) for e, o in self._file.read()]
        except ValueError as e:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: {e}") from None


__all__ = ["CheckpointFile", "LeaderEpochCheckpoint", "OffsetCheckpoint", "fsync_dir"]
