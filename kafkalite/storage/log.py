"""A partition's log: an ordered list of segments in one directory, ``<topic>-<partition>``.

Only the last segment (the *active* one) takes appends. ``append`` checks a producer's batch without
decoding its records (size, magic, CRC), stamps the next offset into the header in place and writes the
bytes; ``read`` finds the segment by base offset, the position by the sparse index and returns a
``FileSlice`` of whole batches. ``open`` finishes what a crash interrupted (deletes, cleaner swaps) and
recovers the active segment by re-validating every batch in it.

As in Kafka, ``Log`` (Kafka's ``UnifiedLog``) keeps what is more than files: the log start offset,
producer state, leader epochs and the append paths; ``local_log.LocalLog`` keeps the segment list and
does roll, flush, read, truncate and delete on it; ``log_loader.LogLoader`` is the recovery on open.

Files in the partition directory besides segments (all Kafka's text checkpoint format):
``leader-epoch-checkpoint`` (as in Kafka), and ``log-start-offset-checkpoint`` /
``cleaner-offset-checkpoint`` which Kafka keeps one level up, shared by all partitions of a log dir;
kafkalite keeps them per partition so that independent ``Log`` objects never write the same file.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalite.clock import Clock, SystemClock
from kafkalite.common.kafka_uuid import uuid_to_str
from kafkalite.config.topic import LONG_MAX, LogConfig
from kafkalite.errors import (
    InconsistentTopicIdError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kafkalite.records import (
    BatchHeader,
    decode_batch_tuples,
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
from kafkalite.storage.local_log import LocalLog
from kafkalite.storage.log_dir_failure_channel import LogDirFailureChannel
from kafkalite.storage.log_loader import LogLoader, RecoveryReport, rebuild_producer_state
from kafkalite.storage.log_validator import validate_records
from kafkalite.storage.partition_metadata import PartitionMetadataFile
from kafkalite.storage.producer_state import (
    ProducerBatchInfo,
    ProducerStateManager,
    next_sequence,
)
from kafkalite.storage.retention import deletable_segments
from kafkalite.storage.segment import (
    BadBatch,
    LogSegment,
)
from kafkalite.storage.transaction_index import (
    AbortedTxn,
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


def _topic_partition(dir: Path) -> tuple[str, int]:
    name = dir.name
    if name.endswith(("-future", "-delete")):  # ``<topic>-<partition>.<id>-future``: a log being moved
        name = name.rpartition(".")[0] or name
    topic, _, part = name.rpartition("-")
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
    """One partition's log. Use ``Log.open``.

    It stays over 600 lines for its three append paths (a leader's single batch, a leader's request of
    many, a follower's copy): each is validation, producer and epoch bookkeeping and the segment write
    under one lock, written out in full because it is the hot path ``kafkalite bench produce`` measures."""

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
        self._local = LocalLog(dir, config, clock, read_only, file_ops)
        self._log_start = 0
        self.leader_epoch_cache = LeaderEpochCache(dir / LEADER_EPOCH_CHECKPOINT, file_ops=file_ops)
        self.producer_state = ProducerStateManager(dir, dir.name, file_ops)
        self.leader_epoch_cache.on_io_error = self._io_failure
        self._lock = threading.RLock()
        self._closed = False
        self.recovery_report = RecoveryReport(str(dir), read_only)
        self._partition_metadata = PartitionMetadataFile(dir, file_ops)
        self._topic_id: uuid.UUID | None = None
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

    # ===== topic id (KIP-516) ===========================================================================
    @property
    def topic_id(self) -> uuid.UUID | None:
        """The topic id in this directory's ``partition.metadata``, None while it has none.
        ``KafkaStorageError`` (naming the file) when the file is malformed."""
        if self._topic_id is None:
            self._topic_id = self._partition_metadata.read()
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id this log belongs to (Kafka's ``UnifiedLog.assignTopicId``): written to
        ``partition.metadata`` the first time; ``InconsistentTopicIdError`` when the directory already
        holds another topic's id (a topic of the same name, deleted and created again)."""
        current = self.topic_id
        if current == topic_id:
            return
        if current is not None:
            raise InconsistentTopicIdError(
                f"log {self.dir} belongs to topic id {uuid_to_str(current)}, not {uuid_to_str(topic_id)}"
            )
        self._check_writable()
        try:
            self._partition_metadata.write(topic_id)
        except OSError as e:
            raise self._io_failure(f"Error while writing the partition metadata of {self.dir.name}", e) from e
        self._topic_id = topic_id

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
        local = self._local
        self._log_start = LogLoader(local, self.recovery_report).load(self._read_log_start_checkpoint)
        segments, leo = local.segments, local.leo
        self._epochs = [(e, o) for e, o in self._epoch_checkpoint().read() if o < leo] or []
        if not self.read_only:
            # A crash between moving the log start and rewriting the epoch checkpoint leaves entries
            # below the start; trim them as the live log would have.
            self.leader_epoch_cache.truncate_from_start(self._log_start)
        if not self.read_only and segments[-1].offset_index.mutable is False:
            segments[-1].make_active()
        local.load_aborted()
        if not self.read_only:
            self._rebuild_producer_state()

    # ===== producer state ===============================================================================
    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producer_state, self._local, self._log_start, self._track_producer)

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
                self._local.add_aborted(
                    AbortedTxn(f[9], first, base, base + 1 if unstable is None else unstable)
                )
            return
        self.producer_state.update(_producer_info(f, base))

    # ===== transactions =================================================================================
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction still open in this log (None: none is open)."""
        # A loop, not a comprehension: every fetch asks (for its LSO), and most logs have no transaction.
        first = None
        for e in self.producer_state.producers.values():
            t = e.txn_first_offset
            if t >= 0 and (first is None or t < first):
                first = t
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: below it every transaction is decided; read_committed consumers stop there."""
        unstable = self.first_unstable_offset()
        return high_watermark if unstable is None else min(high_watermark, unstable)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions with records in ``[start, upper)`` (what a read_committed fetch returns)."""
        return self._local.collect_aborted(start, upper)

    @property
    def aborted_transactions(self) -> list[AbortedTxn]:
        return list(self._local.aborted)

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
            for seg in self._local.segments:
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
        return self._local.leo

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def recovery_point(self) -> int:
        """Offsets below this are known to be fsynced."""
        return self._local.recovery_point

    @property
    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` pairs, as in ``leader-epoch-checkpoint``."""
        return list(self._epochs)

    @property
    def pending_deletes(self) -> list[int]:
        """Base offsets of segments renamed to ``.deleted`` and waiting for ``file.delete.delay.ms``."""
        return [s.base_offset for _, s in self._local.pending_deletes]

    def update_config(self, props: Mapping[str, Any]) -> None:
        """Apply changed topic configs (Kafka names) to this log."""
        with self._lock:
            self.config = self._local.config = self.config.with_overrides(props)
            self._refresh_config()

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, offsets=[{self._log_start}, {self._local.leo}], segments={len(self._local.segments)}"
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
            base = self._local.leo
            if f[9] >= 0:  # a producer id: sequences and epochs are checked before anything is written
                dup = self._check_producers([(batch, f)], base, from_coordinator)[0]
                if dup is not None:
                    return _duplicate_info(dup)
            last = base + f[6]
            buf, max_ts, now = self._stamp(batch, base, f[8], leader_epoch)
            seg = self._local.segments[-1]
            if seg._size and seg.should_roll(size, max_ts, last, None if now < 0 else now):
                seg = self._roll_locked()
            seg.append(buf, last, max_ts, last)
            self._local.leo = last + 1
            if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1][0]):
                self._assign_epoch(leader_epoch, base)
            self._local.unflushed += count
            if f[9] >= 0:
                self._track_producer(f, base, batch)
            self._flush_if_due()
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
            dups = self._check_producers(items, self._local.leo, from_coordinator)
            seg = self._local.segments[-1]
            try:
                # f: header fields in BatchHeader order (last delta 6, max ts 8, producer id 9, count 12).
                for (data, f), dup in zip(items, dups, strict=True):
                    if dup is not None:
                        infos.append(_duplicate_info(dup))
                        continue
                    size = len(data)
                    base = self._local.leo
                    last = base + f[6]
                    buf, max_ts, now = self._stamp(data, base, f[8], leader_epoch)
                    if seg._size and seg.should_roll(size, max_ts, last, None if now < 0 else now):
                        seg = self._roll_locked()
                    seg.append(buf, last, max_ts, last, defer=True)
                    self._local.leo = last + 1
                    if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1][0]):
                        self._assign_epoch(leader_epoch, base)
                    self._local.unflushed += f[12]
                    if f[9] >= 0:
                        self._track_producer(f, base, data)
                    infos.append(LogAppendInfo(base, last, max_ts, last, f[12], size, now))
            finally:
                seg.write_deferred()
            self._flush_if_due()
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
            seg = self._local.segments[-1]
            try:
                expected = self._local.leo
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
                    self._local.leo = last + 1
                    self._local.unflushed += count
                    if f[9] >= 0:
                        self._track_producer(f, base, data)
                    infos.append(LogAppendInfo(base, last, max_ts, last, count, size))
            finally:
                seg.write_deferred()
            self._flush_if_due()
        return infos

    def crash(self, lose_unflushed: bool = False) -> int:
        """Simulate the process dying: close every file without flushing or writing checkpoints.

        With ``lose_unflushed`` the bytes past the recovery point (never fsynced) are cut from the files,
        as a power loss would do to the page cache; returns how many offsets were lost. The next
        ``Log.open`` recovers what is left.
        """
        if self._closed:
            return 0
        with self._lock:
            lost = self._local.crash(lose_unflushed and not self.read_only)
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
        old = self._local.segments[-1]
        new = self._local.roll()
        if new is not old and self.producer_state.producers:
            # Kafka snapshots producer state at each roll, so recovery replays at most one segment.
            self.producer_state.advance(self._local.leo)
            self.producer_state.take_snapshot(sync=False)
        return new

    @_handles_io_errors("flushing")
    def flush(self) -> None:
        """fsync every segment holding data past the recovery point."""
        if self.read_only or self._closed:
            return
        with self._lock:
            self._local.flush()

    def _flush_if_due(self) -> None:
        """After an append: flush once flush.messages records are unflushed or flush.ms has passed."""
        local = self._local
        if local.unflushed >= self._flush_messages or (
            self._flush_ms != LONG_MAX and self.clock.now_ms() - local.last_flush_ms >= self._flush_ms
        ):
            local.flush()

    @_handles_io_errors("flushing")
    def maybe_flush(self) -> bool:
        """Apply ``flush.ms`` (what Kafka's periodic log flusher does); returns whether it flushed."""
        if self.read_only or self._flush_ms == LONG_MAX or not self._local.unflushed:
            return False
        if self.clock.now_ms() - self._local.last_flush_ms >= self._flush_ms:
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
                self._local.flush()
                self._write_log_start_checkpoint()
                if self.producer_state.producers or self.producer_state.snapshot_offsets():
                    # A clean shutdown leaves a snapshot at the log end: the next open replays nothing.
                    self.producer_state.advance(self._local.leo)
                    self.producer_state.take_snapshot()
            self._local.close()
            self._closed = True

    # ===== read =========================================================================================
    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is out of range for {self.dir.name}: valid offsets are "
            f"[{self._log_start}, {self._local.leo}] (log start offset, log end offset)"
        )

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
        # The guard of ``_handles_io_errors``, written out: the fetch path is hot enough that the
        # wrapper's extra call shows (a consumer's fetch of 1 MiB spends 10% of its time outside the copy).
        try:
            with self._lock:  # appends under the lock may run their bookkeeping ahead of the write
                start, leo = self._log_start, self._local.leo
                if offset < start or offset > leo:
                    raise self._out_of_range(offset)
                if offset == leo or (max_offset is not None and offset >= max_offset):
                    return FetchDataInfo(offset, self._local.empty_slice(), start, leo)
                fs, bad = self._local.read(offset, max_bytes, max_offset, min_one, verify)
                return FetchDataInfo(offset, fs, start, leo, bad)
        except OSError as e:
            raise self._io_failure(
                f"Error while reading records from {self.dir.name} in dir {self.dir.parent}", e
            ) from e

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
        end = self._local.leo if end is None else end
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
            return self._local.leo, -1
        if timestamp_ms == MAX_TIMESTAMP:
            best = max(self._local.segments, key=lambda s: s.largest_timestamp)
            if best.largest_timestamp < 0:
                return None
            return best.offset_of_max_timestamp, best.largest_timestamp
        if timestamp_ms < 0:
            raise InvalidRecordError(f"invalid timestamp {timestamp_ms} (use >= 0, or -1, -2, -3)")
        for seg in self._local.segments:
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
            if offset >= self._local.leo:
                # Nothing to cut, but an epoch entry starting at the log end goes, as in Kafka: a
                # replica elected leader that appended nothing before losing leadership holds an
                # epoch the new leader never had, and would keep "diverging" at this very offset.
                self.leader_epoch_cache.truncate_from_end(self._local.leo)
                return False
            if self._local.truncate_to(offset):  # every segment went: the log restarts at offset
                self._log_start = offset
                self._write_log_start_checkpoint()
            if self._log_start > self._local.leo:
                self._log_start = self._local.leo
                self._write_log_start_checkpoint()
            self.leader_epoch_cache.truncate_from_end(self._local.leo)
            leo = self._local.leo
            self._local.drop_aborted(lambda e: e.last_offset < leo)
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
            self._local.replace_all_segments(offset)
            self._log_start = offset
            self._write_log_start_checkpoint()
            self._local.recovery_point = offset
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots(above=-1)
            self.producer_state.reset(offset)
            self._local.drop_aborted(lambda e: False)

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
            if before_offset > self._local.leo or before_offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.dir.name} to {before_offset}: valid range is "
                    f"[{self._log_start}, {self._local.leo}]"
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
            self._local.remove_segments(doomed)
            first_base = self._local.segments[0].base_offset
            self._local.drop_aborted(lambda e: e.last_offset >= first_base)  # their .txnindex went with them
            new_start = max(self._log_start, self._local.segments[0].base_offset)
            if new_start != self._log_start:
                self._raise_log_start(new_start)
            else:
                self._write_log_start_checkpoint()
            return [s.base_offset for s in doomed]

    @_handles_io_errors("deleting segments of")
    def run_scheduled_deletes(self) -> list[int]:
        """Unlink ``.deleted`` segments whose delay has passed; returns their base offsets."""
        return self._local.run_scheduled_deletes()

    # ===== hooks for the cleaner ========================================================================
    @_handles_io_errors("swapping cleaned segments into")
    def _replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap a cleaned segment in for ``old`` (files of ``new`` carry the ``.swap`` suffix)."""
        with self._lock:
            self._local.replace_segments(old, new)

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
