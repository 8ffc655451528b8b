"""Metadata snapshots (KIP-630): the state machine at one committed offset, as a file of record batches.

A snapshot is named by its id, ``(end offset, epoch)``: it holds everything below ``end_offset``, and
``epoch`` is the epoch of the last batch it covers, so a log that continues after it can be checked
against it like any other batch. The file is ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``
in the metadata log's partition directory, written as record batch v2 (each batch stamped with the
snapshot's epoch, offsets counting from 0 inside the file): first a control batch with the
SnapshotHeader record (version, the append time of the last record covered), then the state's records,
then a control batch with the SnapshotFooter record. A reader refuses a file without both, or with a
bad CRC, so a torn copy is never mistaken for a snapshot.

A snapshot is written to ``<id>-<random>.checkpoint.part`` and renamed into place only once complete and
fsync'd (``RawSnapshotWriter.freeze``): a crash leaves at most a ``.part`` file, which the log deletes
when it opens, as Kafka's does. A follower downloading a snapshot with FetchSnapshot appends the
leader's bytes to such a writer chunk by chunk.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kafkalite.errors import CorruptRecordError
from kafkalite.records.batch import RecordBatch, build_batch, iter_batches
from kafkalite.records.control import ControlRecordType, control_key, control_type

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETE_SUFFIX = SUFFIX + ".deleted"
_NAME = re.compile(r"^(\d{20})-(\d{10})(\.checkpoint(?:\.deleted)?|-.*\.checkpoint\.part)$")
_HEADER_VALUE = struct.Struct(">hq")  # SnapshotHeaderRecord v0: Version, LastContainedLogTimestamp
_FOOTER_VALUE = struct.Struct(">h")  # SnapshotFooterRecord v0: Version
_NO_TAGS = b"\x00"  # both records are flexible: an empty tagged-field section ends each
BATCH_BYTES = 64 << 10
"""Records per data batch are cut at about this many bytes of values (Kafka cuts at its batch size)."""


class SnapshotId(NamedTuple):
    """Kafka's ``OffsetAndEpoch`` naming a snapshot: it covers offsets below ``end_offset``."""

    end_offset: int
    epoch: int


class CorruptSnapshotError(CorruptRecordError):
    """A snapshot file that is not a whole snapshot: the error names the file and what is wrong."""


def snapshot_filename(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_name(name: str) -> tuple[SnapshotId, str] | None:
    """``(id, kind)`` of a snapshot file name, kind ``""`` (complete), ``"partial"`` or ``"deleted"``;
    None for any other file."""
    m = _NAME.match(name)
    if m is None:
        return None
    kind = "partial" if m.group(3).endswith(".part") else "deleted" if m.group(3).endswith("deleted") else ""
    return SnapshotId(int(m.group(1)), int(m.group(2))), kind


def header_value(last_contained_timestamp: int) -> bytes:
    return _HEADER_VALUE.pack(0, last_contained_timestamp) + _NO_TAGS


def footer_value() -> bytes:
    return _FOOTER_VALUE.pack(0) + _NO_TAGS


def snapshot_batches(
    snapshot_id: SnapshotId,
    records: Sequence[bytes],
    last_contained_timestamp: int,
    now_ms: int,
    batch_bytes: int = BATCH_BYTES,
) -> Iterable[bytes]:
    """The batches of a snapshot holding ``records`` (each a framed metadata record): header, data, footer."""
    epoch = snapshot_id.epoch
    yield build_batch(
        [(control_key(ControlRecordType.SNAPSHOT_HEADER), header_value(last_contained_timestamp))],
        timestamp=now_ms,
        partition_leader_epoch=epoch,
        is_control=True,
    )
    offset, chunk, size = 1, [], 0
    for r in records:
        chunk.append((None, r))
        size += len(r)
        if size >= batch_bytes:
            yield build_batch(chunk, base_offset=offset, timestamp=now_ms, partition_leader_epoch=epoch)
            offset, chunk, size = offset + len(chunk), [], 0
    if chunk:
        yield build_batch(chunk, base_offset=offset, timestamp=now_ms, partition_leader_epoch=epoch)
        offset += len(chunk)
    yield build_batch(
        [(control_key(ControlRecordType.SNAPSHOT_FOOTER), footer_value())],
        base_offset=offset,
        timestamp=now_ms,
        partition_leader_epoch=epoch,
        is_control=True,
    )


class RawSnapshotWriter:
    """Bytes of one snapshot going into ``<id>-*.checkpoint.part``; ``freeze`` makes it the snapshot."""

    def __init__(self, directory: str | Path, snapshot_id: SnapshotId) -> None:
        self.dir = Path(directory)
        self.snapshot_id = snapshot_id
        fd, name = tempfile.mkstemp(
            prefix=f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}-",
            suffix=PARTIAL_SUFFIX,
            dir=self.dir,
        )
        self.partial = Path(name)
        self._file = os.fdopen(fd, "wb")
        self.size = 0
        self.frozen = False

    @property
    def path(self) -> Path:
        return self.dir / snapshot_filename(self.snapshot_id)

    def append(self, data: bytes) -> None:
        if self.frozen:
            raise ValueError(f"snapshot {self.snapshot_id} is frozen: nothing may be appended")
        self._file.write(data)
        self.size += len(data)

    def freeze(self) -> Path:
        """fsync, check it reads back as a whole snapshot, then rename it into place (and fsync the dir)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        try:
            read_snapshot(self.partial, self.snapshot_id)
        except CorruptSnapshotError:
            self.partial.unlink(missing_ok=True)
            raise
        os.replace(self.partial, self.path)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self.frozen = True
        return self.path

    def close(self) -> None:
        """Close the file and leave the ``.part`` behind (the process is going away; the next start
        deletes it)."""
        if not self._file.closed:
            self._file.close()

    def abandon(self) -> None:
        """Give up on it (the leader changed, or deleted the snapshot): remove the partial file."""
        if not self.frozen:
            self.close()
            self.partial.unlink(missing_ok=True)


def write_snapshot(
    directory: str | Path,
    snapshot_id: SnapshotId,
    records: Sequence[bytes],
    last_contained_timestamp: int,
    now_ms: int,
    batch_bytes: int = BATCH_BYTES,
) -> Path:
    """Write a complete snapshot file of ``records`` and return its path."""
    w = RawSnapshotWriter(directory, snapshot_id)
    try:
        for b in snapshot_batches(snapshot_id, records, last_contained_timestamp, now_ms, batch_bytes):
            w.append(b)
        return w.freeze()
    except BaseException:
        w.abandon()
        raise


@dataclass(frozen=True)
class SnapshotReader:
    """A whole snapshot read back: its id, the header's last contained log timestamp, the records."""

    snapshot_id: SnapshotId
    last_contained_timestamp: int
    records: tuple[bytes, ...]
    size_in_bytes: int


def read_snapshot(path: str | Path, snapshot_id: SnapshotId | None = None) -> SnapshotReader:
    """Read and check a snapshot file (CRCs, header first, footer last, every batch in the snapshot's
    epoch); ``snapshot_id`` defaults to the one its name gives."""
    path = Path(path)
    if snapshot_id is None:
        parsed = parse_snapshot_name(path.name)
        if parsed is None:
            raise CorruptSnapshotError(
                f"{path.name} is not a snapshot file name (<offset>-<epoch>.checkpoint)"
            )
        snapshot_id = parsed[0]
    data = path.read_bytes()

    def bad(why: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"snapshot {path.name}: {why}")

    try:
        batches = [RecordBatch.decode(data, pos) for pos, _ in iter_batches(data)]
    except CorruptRecordError as e:
        raise bad(str(e)) from None
    used = sum(b.header.size for b in batches)
    if used != len(data):
        raise bad(f"{len(data) - used} byte(s) after the last whole batch (a torn copy?)")
    if len(batches) < 2:
        raise bad("it needs at least a header batch and a footer batch")
    first, last = batches[0], batches[-1]
    if (
        not first.header.is_control
        or len(first) != 1
        or control_type(first.records[0].key) != (ControlRecordType.SNAPSHOT_HEADER)
    ):
        raise bad("the first batch is not a SnapshotHeader control record")
    if (
        not last.header.is_control
        or len(last) != 1
        or control_type(last.records[0].key) != (ControlRecordType.SNAPSHOT_FOOTER)
    ):
        raise bad("the last batch is not a SnapshotFooter control record (incomplete snapshot)")
    header = first.records[0].value or b""
    if len(header) < _HEADER_VALUE.size:
        raise bad(f"SnapshotHeader value of {len(header)} bytes")
    _version, last_ts = _HEADER_VALUE.unpack_from(header)
    records: list[bytes] = []
    for b in batches[1:-1]:
        if b.header.partition_leader_epoch != snapshot_id.epoch:
            raise bad(f"batch at offset {b.base_offset} has epoch {b.header.partition_leader_epoch}")
        if b.header.is_control:
            raise bad(f"unexpected control batch at offset {b.base_offset}")
        records += [r.value or b"" for r in b.records]
    return SnapshotReader(snapshot_id, last_ts, tuple(records), len(data))


__all__ = [
    "DELETE_SUFFIX",
    "PARTIAL_SUFFIX",
    "SUFFIX",
    "CorruptSnapshotError",
    "RawSnapshotWriter",
    "SnapshotId",
    "SnapshotReader",
    "parse_snapshot_name",
    "read_snapshot",
    "snapshot_batches",
    "snapshot_filename",
    "write_snapshot",
]
