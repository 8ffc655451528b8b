"""The v2 record batch (magic 2): header layout, building, validation and in-place stamping.

Layout (big-endian), offsets in brackets::

    baseOffset int64 [0]  batchLength int32 [8]  partitionLeaderEpoch int32 [12]  magic int8 [16]
    crc uint32 [17]  attributes int16 [21]  lastOffsetDelta int32 [23]  baseTimestamp int64 [27]
    maxTimestamp int64 [35]  producerId int64 [43]  producerEpoch int16 [51]  baseSequence int32 [53]
    recordsCount int32 [57]  records... [61]

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12`` bytes. The CRC32C
covers attributes through the end, which leaves baseOffset and partitionLeaderEpoch outside it: the
broker can assign offsets and stamp the leader epoch without recomputing the checksum.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from crc32c import crc32c

from kafkalite.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from kafkalite.records.compression import Compression, compress, decompress
from kafkalite.records.encode_fast import encode_values
from kafkalite.records.record import (
    Header,
    Record,
    decode_record_tuples,
    encode_plain_records,
    encode_record,
)
from kafkalite.records.vector import decode_records, decode_sections

MAGIC_V2 = 2
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of the header batchLength does not count
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21  # attributes: first byte under the CRC
MAGIC_OFFSET = 16
CRC_OFFSET = 17
MAX_TIMESTAMP_OFFSET = 35
ATTRIBUTES_OFFSET = 21
# Smallest possible record body: length, attributes, ts delta, offset delta, key len, value len, count.
MIN_RECORD_SIZE = 7
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U32 = struct.Struct(">I")
_H = struct.Struct(">h")
_B = struct.Struct(">b")
assert _HEADER.size == BATCH_HEADER_SIZE


class TimestampType(IntEnum):
    """Attribute bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte batch header, parsed without touching the records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    def as_tuple(self) -> tuple[int, ...]:
        """The fields in declaration order, the shape ``valid_header_fields`` returns (``astuple``
        deep-copies each field, which costs a hot append path more than the append itself)."""
        return (
            self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
            self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
            self.producer_id, self.producer_epoch, self.base_sequence, self.records_count,
        )  # fmt: skip

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on disk / on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_BIT
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """With bit 6 set, baseTimestamp carries the compaction delete horizon (KIP-534)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @classmethod
    def parse(cls, buf, pos: int = 0) -> BatchHeader:
        """Parse the header at ``pos``; short buffer or a magic other than 2 -> ``CorruptRecordError``."""
        have = len(buf) - pos
        if have >= MAGIC_OFFSET + 1:
            magic = buf[pos + MAGIC_OFFSET]
            if magic != MAGIC_V2:
                raise _bad_magic(magic, pos)
        if have < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch at position {pos}: need {BATCH_HEADER_SIZE} header bytes, have {max(have, 0)}"
            )
        return cls(*_HEADER.unpack_from(buf, pos))


def _bad_magic(magic: int, pos: int) -> CorruptRecordError:
    if magic > 127:
        magic -= 256
    return CorruptRecordError(
        f"unknown magic byte {magic} at position {pos} (kafkalite reads record batch v2 only)"
    )


def compute_crc(buf, pos: int = 0, size: int | None = None) -> int:
    """CRC32C of the checksummed part (attributes..end) of the batch at ``pos``."""
    if size is None:
        size = _I.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def valid_header_fields(buf, pos: int = 0, max_size: int | None = None) -> tuple | None:
    """The 13 header fields (in ``BatchHeader`` order) of a batch that passes every check of
    ``validate_batch``, or None when any fails.

    The broker's append path: the same checks on a plain tuple, with no objects and no messages
    built, which halves the Python cost per batch. ``validate_batch`` says what is wrong.
    """
    have = len(buf) - pos
    if have < BATCH_HEADER_SIZE:
        return None
    f = _HEADER.unpack_from(buf, pos)
    length = f[1]
    size = length + LOG_OVERHEAD
    if f[3] != MAGIC_V2 or length < MIN_BATCH_LENGTH or size > have:
        return None
    if max_size is not None and size > max_size:
        return None
    if crc32c(memoryview(buf)[pos + CRC_START : pos + size]) != f[4]:
        return None
    count, last_delta, codec = f[12], f[6], f[5] & COMPRESSION_MASK
    if codec > Compression.ZSTD or count < 0 or last_delta < 0 or (count > 0 and last_delta < count - 1):
        return None
    if codec == 0 and count * MIN_RECORD_SIZE > size - BATCH_HEADER_SIZE:
        return None
    return f


def validate_batch(buf, pos: int = 0, *, max_size: int | None = None, leader: bool = False) -> BatchHeader:
    """Check the batch at ``pos`` without decoding its records; returns its header.

    Checks, in order: magic is 2, the header is complete, batchLength is at least the header's,
    ``max_size`` (-> ``MessageTooLargeError``), the whole batch is present, CRC32C matches, the
    compression codec is known, recordsCount and lastOffsetDelta are consistent. Everything else
    raises ``CorruptRecordError`` naming the position and the values found, except that a leader
    (``leader``) refuses intact bytes whose count and offset range disagree with ``InvalidRecordError``,
    as Kafka's LogValidator does.
    """
    fields = valid_header_fields(buf, pos, max_size)
    if fields is not None:
        return BatchHeader(*fields)
    # Something is wrong: go through the checks again, one by one, to say what.
    h = BatchHeader.parse(buf, pos)
    size = h.batch_length + LOG_OVERHEAD
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has batch_length {h.batch_length}, below the minimum {MIN_BATCH_LENGTH}"
        )
    if max_size is not None and size > max_size:
        raise MessageTooLargeError(
            f"batch at position {pos} is {size} bytes, larger than the limit of {max_size}"
        )
    have = len(buf) - pos
    if have < size:
        raise CorruptRecordError(f"truncated batch at position {pos}: need {size} bytes, have {have}")
    computed = crc32c(memoryview(buf)[pos + CRC_START : pos + size])
    if computed != h.crc:
        raise CorruptRecordError(
            f"CRC32C mismatch in batch at position {pos}: stored 0x{h.crc:08x}, computed 0x{computed:08x}"
        )
    codec = h.attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise CorruptRecordError(f"batch at position {pos} uses unknown compression codec id {codec}")
    n = h.records_count
    inconsistent = InvalidRecordError if leader else CorruptRecordError
    if n < 0:
        raise inconsistent(f"batch at position {pos} has negative records_count {n}")
    if h.last_offset_delta < 0 or (n > 0 and h.last_offset_delta < n - 1):
        raise inconsistent(
            f"batch at position {pos} has last_offset_delta {h.last_offset_delta} inconsistent with "
            f"records_count {n}"
        )
    if codec == 0 and n * MIN_RECORD_SIZE > size - BATCH_HEADER_SIZE:
        raise inconsistent(
            f"batch at position {pos} claims {n} records in only {size - BATCH_HEADER_SIZE} bytes"
        )
    return h


def stamp_batch(
    buf: bytearray | memoryview,
    pos: int = 0,
    *,
    base_offset: int,
    partition_leader_epoch: int | None = None,
    max_timestamp: int | None = None,
) -> None:
    """Rewrite header fields in place, as the leader does on append.

    baseOffset and partitionLeaderEpoch sit outside the CRC, so stamping them keeps the stored CRC
    valid. ``max_timestamp`` is for LOG_APPEND_TIME: it sets maxTimestamp and the timestamp-type bit,
    both inside the CRC range, so the CRC is recomputed (the caller is expected to have validated the
    batch first: a recomputed CRC would otherwise bless corrupt bytes).
    """
    _Q.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _I.pack_into(buf, pos + 12, partition_leader_epoch)
    if max_timestamp is not None:
        (attrs,) = _H.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
        _H.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_BIT)
        _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
        (batch_length,) = _I.unpack_from(buf, pos + 8)
        _U32.pack_into(
            buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + CRC_START : pos + batch_length + 12])
        )


PRODUCER_ID_OFFSET = 43  # producerId int64, producerEpoch int16, baseSequence int32: all under the CRC
_PRODUCER = struct.Struct(">qhi")


def set_producer_fields(
    buf: bytearray, producer_id: int, producer_epoch: int, base_sequence: int, *, transactional: bool = False
) -> bytearray:
    """Write an idempotent producer's id, epoch and first sequence (and the transactional bit) into the
    batch at the start of ``buf``, and recompute the CRC they sit under. Returns ``buf``."""
    _PRODUCER.pack_into(buf, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    (attrs,) = _H.unpack_from(buf, ATTRIBUTES_OFFSET)
    attrs = attrs | TRANSACTIONAL_BIT if transactional else attrs & ~TRANSACTIONAL_BIT
    _H.pack_into(buf, ATTRIBUTES_OFFSET, attrs)
    (batch_length,) = _I.unpack_from(buf, 8)
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START : batch_length + LOG_OVERHEAD]))
    return buf


def iter_batches(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Walk concatenated batches, yielding ``(position, header)`` for each complete batch.

    Header-only, no CRC check. A short tail (torn write) ends the walk quietly; a complete header with
    an unknown magic or an impossible batchLength raises ``CorruptRecordError`` since the walk cannot
    find the next batch from there.
    """
    if end is None:
        end = len(buf)
    unpack = _HEADER.unpack_from
    new = BatchHeader
    while end - pos >= BATCH_HEADER_SIZE:
        fields = unpack(buf, pos)
        batch_length = fields[1]
        if fields[3] != MAGIC_V2:
            raise _bad_magic(buf[pos + MAGIC_OFFSET], pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {pos} has batch_length {batch_length}, below the minimum {MIN_BATCH_LENGTH}"
            )
        nxt = pos + batch_length + LOG_OVERHEAD
        if nxt > end:
            return
        yield pos, new(*fields)
        pos = nxt


def _attributes(compression: int, timestamp_type: int, is_transactional: bool, is_control: bool) -> int:
    attrs = int(compression) & COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attrs |= TRANSACTIONAL_BIT
    if is_control:
        attrs |= CONTROL_BIT
    return attrs


def _split(item) -> tuple:
    """Accept (key, value), (key, value, headers) or anything with .key/.value[/.headers/.timestamp]."""
    if isinstance(item, tuple):
        if len(item) == 2:
            return item[0], item[1], (), None
        if len(item) == 3:
            return item[0], item[1], item[2], None
        raise InvalidRecordError(
            f"record tuple must be (key, value) or (key, value, headers), got {len(item)} items"
        )
    try:
        return item.key, item.value, getattr(item, "headers", ()) or (), getattr(item, "timestamp", None)
    except AttributeError:
        raise InvalidRecordError(f"cannot build a record from {type(item).__name__}") from None


def build_batch(
    records: Iterable,
    *,
    base_offset: int = 0,
    timestamp: int | Sequence[int] | None = None,
    compression: int = Compression.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode records into one v2 batch, byte for byte what a Kafka producer would send.

    ``timestamp`` is one ms value for every record or one per record; when omitted, Record-like items
    keep their own ``timestamp`` and the rest get the current time. Offset deltas are 0, 1, 2, ...
    unless ``offset_deltas`` is given (the cleaner keeps gaps); ``last_offset_delta`` may exceed the
    last record's delta (a compacted batch keeps its original range). ``max_timestamp`` overrides the
    computed maximum (LOG_APPEND_TIME). ``delete_horizon_ms`` sets attribute bit 6 and stores the horizon
    in baseTimestamp, as a compacted batch holding tombstones does.
    """
    records = records if isinstance(records, list | tuple) else list(records)
    n = len(records)
    body = None
    if offset_deltas is None and timestamp is not None:
        # Fast path for plain (key, value[, headers]) tuples: no per-record split or encode_record call.
        if isinstance(timestamp, int):
            stamps = [timestamp] * n
        else:
            stamps = list(timestamp)
            if len(stamps) != n:
                raise InvalidRecordError(f"got {len(stamps)} timestamps for {n} records")
        fast_base = delete_horizon_ms if delete_horizon_ms is not None else (stamps[0] if n else None)
        if fast_base is not None and fast_base.__class__ is int:
            body = encode_plain_records(records, stamps, fast_base)
    if body is not None:
        return _finish_batch(
            body, n, stamps, range(n), base_offset, compression, timestamp_type, producer_id,
            producer_epoch, base_sequence, partition_leader_epoch, is_transactional, is_control,
            last_offset_delta, max_timestamp, delete_horizon_ms,
        )  # fmt: skip
    items = [_split(r) for r in records]
    if isinstance(timestamp, int):
        stamps = [timestamp] * n
    elif timestamp is None:
        now = None
        stamps = []
        for it in items:
            ts = it[3]
            if ts is None:
                if now is None:
                    now = int(time.time() * 1000)
                ts = now
            stamps.append(ts)
    else:
        stamps = list(timestamp)
        if len(stamps) != n:
            raise InvalidRecordError(f"got {len(stamps)} timestamps for {n} records")
    if offset_deltas is None:
        deltas = range(n)
    else:
        deltas = list(offset_deltas)
        if len(deltas) != n:
            raise InvalidRecordError(f"got {len(deltas)} offset deltas for {n} records")
    if n and last_offset_delta is not None and last_offset_delta < deltas[-1]:
        raise InvalidRecordError(
            f"last_offset_delta {last_offset_delta} is below the last record's {deltas[-1]}"
        )
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else (stamps[0] if n else 0)
    body = bytearray()
    for (key, value, headers, _ts), ts, od in zip(items, stamps, deltas, strict=True):
        encode_record(body, od, ts - base_ts, key, value, headers)
    return _finish_batch(
        body, n, stamps, deltas, base_offset, compression, timestamp_type, producer_id, producer_epoch,
        base_sequence, partition_leader_epoch, is_transactional, is_control, last_offset_delta,
        max_timestamp, delete_horizon_ms,
    )  # fmt: skip


def build_values_batch(
    values: list,
    stamps: list,
    compression: int = Compression.NONE,
    *,
    bytes_only: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes | None:
    """``build_batch`` for keyless, headerless records given as a list of values and one timestamp
    each (a producer batch), or None when ``encode_fast`` does not handle them (use ``build_batch``).
    ``bytes_only``: the caller knows every value is ``bytes``."""
    n = len(values)
    if n == 0 or len(stamps) != n or stamps[0].__class__ is not int:
        return None
    body = encode_values(values, stamps, stamps[0], bytes_only=bytes_only)
    if body is None:
        return None
    return _finish_batch(
        body, n, stamps, range(n), 0, compression, TimestampType.CREATE_TIME, producer_id, producer_epoch,
        base_sequence, -1, False, False, None, None, None,
    )  # fmt: skip


def _finish_batch(
    body: bytes | bytearray,
    n: int,
    stamps: list[int],
    deltas: Sequence[int],
    base_offset: int,
    compression: int,
    timestamp_type: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
    last_offset_delta: int | None,
    max_timestamp: int | None,
    delete_horizon_ms: int | None,
) -> bytes:
    """Header, compression and CRC around an encoded records body."""
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if n else 0
    elif n and last_offset_delta < deltas[-1]:
        raise InvalidRecordError(
            f"last_offset_delta {last_offset_delta} is below the last record's {deltas[-1]}"
        )
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = stamps[0] if n else (max_timestamp if max_timestamp is not None else NO_TIMESTAMP)
    if max_timestamp is None:
        max_timestamp = max(stamps) if n else NO_TIMESTAMP
    payload = body if compression == Compression.NONE else compress(compression, bytes(body))

    attrs = _attributes(compression, timestamp_type, is_transactional, is_control)
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_BIT
    # The header is packed on its own and the CRC carried from its tail into the payload, so the
    # payload is copied once (by the join) rather than into a zeroed buffer and then out again.
    try:
        header = bytearray(
            _HEADER.pack(
                base_offset,
                BATCH_HEADER_SIZE + len(payload) - LOG_OVERHEAD,
                partition_leader_epoch,
                MAGIC_V2,
                0,
                attrs,
                last_offset_delta,
                base_ts,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                n,
            )
        )
    except struct.error as e:
        raise InvalidRecordError(f"batch header field out of range: {e}") from None
    _U32.pack_into(header, CRC_OFFSET, crc32c(payload, crc32c(memoryview(header)[CRC_START:])))
    return b"".join((header, payload))


def _records_section(buf, pos: int, h: BatchHeader) -> bytes:
    section = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + h.batch_length + LOG_OVERHEAD]
    codec = h.attributes & COMPRESSION_MASK
    if codec == 0:
        return bytes(section)
    try:
        return decompress(codec, section)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"batch at position {pos}: {e.message}") from None


def decode_batch_tuples(buf, pos: int = 0, *, verify_crc: bool = True) -> tuple[BatchHeader, list[tuple]]:
    """Fast path: the header plus records as ``(offset, timestamp, key, value, headers)`` tuples."""
    h = validate_batch(buf, pos) if verify_crc else BatchHeader.parse(buf, pos)
    data = _records_section(buf, pos, h)
    fixed = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
    try:
        rows = decode_record_tuples(data, h.records_count, h.base_offset, h.base_timestamp, fixed)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"batch at position {pos}: {e.message}") from None
    return h, rows


def decode_batches(
    buf, positions: Iterable[int], *, verify_crc: bool = True, min_offset: int | None = None
) -> list[Record]:
    """The records of the batches at ``positions`` in ``buf``, in order, keeping those at or after
    ``min_offset``: what ``RecordBatch.decode`` of each batch gives, decoded together in one vectorised
    pass (records below ``min_offset`` are checked but never built). Errors are ``RecordBatch.decode``'s.
    """
    positions = list(positions)
    try:
        headers = [validate_batch(buf, p) if verify_crc else BatchHeader.parse(buf, p) for p in positions]
        sections = [_records_section(buf, p, h) for p, h in zip(positions, headers, strict=True)]
    except CorruptRecordError:
        headers = None  # let the batch-by-batch decode below raise in the same order as it always did
    if headers:
        fast = decode_sections(
            sections,
            [h.records_count for h in headers],
            [h.base_offset for h in headers],
            [h.base_timestamp for h in headers],
            [h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None for h in headers],
            min_offset,
        )
        if fast is not None:
            return fast
    out: list[Record] = []
    for p in positions:
        records = RecordBatch.decode(buf, p, verify_crc=verify_crc).records
        out.extend(records if min_offset is None else (r for r in records if r.offset >= min_offset))
    return out


@dataclass(slots=True)
class RecordBatch:
    """A fully decoded batch: its header and its records (absolute offsets and timestamps)."""

    header: BatchHeader
    records: list[Record] = field(default_factory=list)

    @classmethod
    def decode(cls, buf, pos: int = 0, *, verify_crc: bool = True) -> RecordBatch:
        """Validate (CRC included unless ``verify_crc=False``), decompress and decode the batch at ``pos``."""
        h = validate_batch(buf, pos) if verify_crc else BatchHeader.parse(buf, pos)
        data = _records_section(buf, pos, h)
        fixed = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        try:
            records = decode_records(data, h.records_count, h.base_offset, h.base_timestamp, fixed)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"batch at position {pos}: {e.message}") from None
        return cls(h, records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset


__all__ = [
    "valid_header_fields",
    "BATCH_HEADER_SIZE",
    "MAGIC_V2",
    "BatchHeader",
    "Header",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "compute_crc",
    "decode_batch_tuples",
    "decode_batches",
    "iter_batches",
    "stamp_batch",
    "validate_batch",
]
