"""Per-partition producer state: what makes an idempotent producer's retries harmless (KIP-98).

For every producer id that wrote to the partition the log keeps its epoch and the sequence ranges and
offsets of its last five batches (Kafka's ``ProducerStateEntry``). A leader checks each client batch
against it before the batch gets offsets:

- a batch equal to one of the five remembered ones is a retry: it is not written again, and the producer
  gets the offsets the first copy got;
- a batch from an older epoch is refused (INVALID_PRODUCER_EPOCH);
- a batch whose first sequence does not follow the last one is refused (OUT_OF_ORDER_SEQUENCE_NUMBER),
  except from a producer the partition knows nothing of (its state was removed with old data), whose
  sequence is accepted as Kafka accepts it since KIP-360;
- a new epoch must start at sequence 0.

Followers and log recovery replay batches without checks, so every replica ends with the same state.

The state is saved beside the segments as ``<offset>.snapshot`` files in Kafka's layout (version int16 = 1,
CRC32C uint32 of what follows, int32 count, then 46 bytes per producer: id int64, epoch int16, last
sequence int32, last offset int64, offset delta int32, timestamp int64, coordinator epoch int32, first
offset of the open transaction int64). A snapshot only holds each producer's *last* batch, as Kafka's does.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import crc32c

from kafkalite.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
)
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_SEQUENCE = -1
NO_EPOCH = -1
MAX_SEQUENCE = 0x7FFFFFFF

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


def next_sequence(seq: int, delta: int) -> int:
    """``seq + delta`` on Kafka's sequence ring: sequences wrap from 2**31-1 to 0."""
    return (seq + delta) & MAX_SEQUENCE


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class BatchMetadata(NamedTuple):
    """One remembered batch: its sequence range and where it landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    """What a partition remembers of one producer id."""

    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch", "txn_first_offset", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.txn_first_offset = -1
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy(self) -> ProducerStateEntry:
        e = ProducerStateEntry(self.producer_id, self.epoch)
        e.batches.extend(self.batches)
        e.coordinator_epoch = self.coordinator_epoch
        e.txn_first_offset = self.txn_first_offset
        e.last_timestamp = self.last_timestamp
        return e

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.epoch}, last_seq={self.last_seq}, "
            f"last_offset={self.last_offset}, txn_first_offset={self.txn_first_offset})"
        )


class ProducerBatchInfo(NamedTuple):
    """The producer fields of one batch header, with the offsets it has (or would get) in the log."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool


class ProducerStateManager:
    """The producer table of one partition log, its checks, and its ``.snapshot`` files."""

    def __init__(self, dir: Path, name: str, file_ops: FileOps = OS_FILE_OPS) -> None:
        self.dir = dir
        self.name = name
        self.file_ops = file_ops
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state reflects every batch below this offset

    # ------------------------------------------------------------------------------------- checks

    def check_client_batches(self, batches: Iterable[ProducerBatchInfo]) -> list[BatchMetadata | None]:
        """Validate client batches in order, without changing the table. Returns, per batch, the
        remembered batch it duplicates (to answer with its offsets, writing nothing) or None.

        Raises Kafka's error for the first batch that must be refused; nothing is written then.
        """
        # The table itself is read, never written: a producer's entry is copied into the scratch table
        # only when a later batch of the same request must see this one (most requests carry one).
        batches = list(batches)
        scratch: dict[int, ProducerStateEntry] = {}
        out: list[BatchMetadata | None] = []
        last = len(batches) - 1
        for i, b in enumerate(batches):
            entry = scratch.get(b.producer_id)
            if entry is None:
                entry = self.producers.get(b.producer_id) or ProducerStateEntry(b.producer_id)
                if i < last:
                    entry = scratch[b.producer_id] = entry.copy()
            dup = entry.find_duplicate(b.epoch, b.first_seq, b.last_seq)
            if dup is not None:
                out.append(dup)
                continue
            self._check(entry, b)
            if i < last:
                _add(entry, b)
            out.append(None)
        return out

    def _where(self, b: ProducerBatchInfo) -> str:
        return f"producer {b.producer_id} at offset {b.first_offset} in {self.name}"

    def _check(self, entry: ProducerStateEntry, b: ProducerBatchInfo) -> None:
        if b.epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch of {self._where(b)} is {b.epoch}, which is smaller than the last seen epoch "
                f"{entry.epoch}"
            )
        if b.epoch != entry.epoch:
            if b.first_seq != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"invalid sequence number for new epoch of {self._where(b)}: {b.epoch} (request epoch), "
                    f"{b.first_seq} (seq. number), {entry.epoch} (current producer epoch)"
                )
        else:
            last = entry.last_seq
            in_sequence = b.first_seq == last + 1 or (b.first_seq == 0 and last == MAX_SEQUENCE)
            if entry.epoch != NO_EPOCH and last != NO_SEQUENCE and not in_sequence:
                raise OutOfOrderSequenceNumberError(
                    f"out of order sequence number for {self._where(b)}: {b.first_seq} (incoming seq. "
                    f"number), {last} (current end sequence number)"
                )
        if entry.txn_first_offset >= 0 and not b.is_transactional:
            raise InvalidTxnStateError(f"expected a transactional write from {self._where(b)}")

    # ------------------------------------------------------------------------------------ updates

    def update(self, b: ProducerBatchInfo) -> None:
        """Record an appended data batch (leader, follower and recovery alike: no checks)."""
        entry = self.producers.get(b.producer_id)
        if entry is None:
            entry = self.producers[b.producer_id] = ProducerStateEntry(b.producer_id)
        _add(entry, b)
        self.map_end_offset = b.last_offset + 1

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int, offset: int, ts: int) -> int:
        """Apply a COMMIT/ABORT marker at ``offset``; returns the first offset of the transaction it
        ends, or -1 when the producer had none open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        first = entry.txn_first_offset
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.txn_first_offset = -1
        entry.last_timestamp = ts
        self.map_end_offset = offset + 1
        return first

    def advance(self, offset: int) -> None:
        """Batches without a producer id up to ``offset`` (exclusive) have been seen."""
        if offset > self.map_end_offset:
            self.map_end_offset = offset

    def evict_before(self, log_start: int) -> None:
        """Forget producers whose last write is gone below the new log start (Kafka does the same when
        retention or DeleteRecords removes their data), unless a transaction of theirs is open."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and 0 <= e.last_offset < log_start
        ]
        for pid in gone:
            del self.producers[pid]
        self.delete_snapshots(below=log_start)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop producers idle longer than ``producer.id.expiration.ms`` (with no open transaction)."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return gone

    def reset(self, offset: int) -> None:
        self.producers.clear()
        self.map_end_offset = offset

    # ---------------------------------------------------------------------------------- snapshots

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    out.append(int(stem))
        return sorted(out)

    def take_snapshot(self, sync: bool = True) -> Path:
        """Write the table as ``<map end offset>.snapshot`` (tmp file, fsync, rename)."""
        path = self.dir / snapshot_name(self.map_end_offset)
        data = encode_snapshot(self.producers.values())
        tmp = path.with_name(path.name + ".tmp")
        self.file_ops.write_file(tmp, data, sync=sync)
        self.file_ops.replace(tmp, path)
        return path

    def load_latest(self, upto: int) -> int:
        """Load the newest readable snapshot at or below ``upto``; returns its offset, or -1 when none.
        Snapshots above ``upto`` (a truncated log) and unreadable ones are deleted."""
        self.producers.clear()
        for off in reversed(self.snapshot_offsets()):
            path = self.dir / snapshot_name(off)
            if off > upto:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes(), str(path))
            except CorruptRecordError:
                path.unlink(missing_ok=True)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.map_end_offset = off
            return off
        self.map_end_offset = 0
        return -1

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        offsets = self.snapshot_offsets()
        keep_latest = offsets[-1] if offsets else None
        for off in offsets:
            doomed = (below is not None and off < below and off != keep_latest) or (
                above is not None and off > above
            )
            if doomed:
                (self.dir / snapshot_name(off)).unlink(missing_ok=True)


def _add(entry: ProducerStateEntry, b: ProducerBatchInfo) -> None:
    if b.epoch != entry.epoch:
        # A new epoch starts a fresh sequence space: older batches can no longer be duplicates.
        entry.epoch = b.epoch
        entry.batches.clear()
    entry.batches.append(
        BatchMetadata(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp)
    )
    entry.last_timestamp = b.max_timestamp
    if b.is_transactional and entry.txn_first_offset < 0:
        entry.txn_first_offset = b.first_offset


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    n = 0
    for e in sorted(entries, key=lambda e: e.producer_id):
        last = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(
            e.producer_id,
            e.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            (last.last_offset - last.first_offset) if last else 0,
            e.last_timestamp,
            e.coordinator_epoch,
            e.txn_first_offset,
        )
        n += 1
    tail = struct.pack(">i", n) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(tail)) + tail


def decode_snapshot(data: bytes, where: str = "snapshot") -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size:
        raise CorruptRecordError(f"{where}: {len(data)} bytes is too short for a producer snapshot")
    version, crc, n = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"{where}: unknown producer snapshot version {version}")
    if crc32c.crc32c(data[6:]) != crc:
        raise CorruptRecordError(f"{where}: producer snapshot CRC does not match its contents")
    if n < 0 or len(data) != _HEAD.size + n * _ENTRY.size:
        raise CorruptRecordError(f"{where}: {n} entries do not fit {len(data)} bytes")
    out = []
    for i in range(n):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _ENTRY.unpack_from(
            data, _HEAD.size + i * _ENTRY.size
        )
        e = ProducerStateEntry(pid, epoch)
        if last_off >= 0:
            first_seq = next_sequence(last_seq, -delta) if last_seq >= 0 else NO_SEQUENCE
            e.batches.append(BatchMetadata(first_seq, last_seq, last_off - delta, last_off, ts))
        e.coordinator_epoch = coord
        e.txn_first_offset = txn_first
        e.last_timestamp = ts
        out.append(e)
    return out
