"""Record batches (v2 bytes) to Arrow columns, for the Spark source.

Decoding record by record in Python costs about 1.5 us per record, which would make the reader, not Spark,
the bottleneck. Here Python only walks the record *lengths* (one varint per record, needed to find where
each record starts); every field after that is decoded for all records of a fetch at once with numpy,
and keys and values are cut out of the fetched bytes by one Arrow ``take`` (a C++ gather), never
as Python ``bytes`` objects.

The key/value trick: the records section holds ``... key ... value ... key ... value ...`` in order, so
a binary array whose offsets are ``0, start_0, end_0, start_1, end_1, ...`` is valid (every even element
is the gap between two fields) and taking its odd elements gives exactly the fields.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from kafkalite.errors import CorruptRecordError
from kafkalite.records import BatchHeader, Compression, decode_varint
from kafkalite.records.batch import (
    CONTROL_BIT,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
)
from kafkalite.records.compression import decompress
from kafkalite.records.vector import PAD as _PAD
from kafkalite.records.vector import (
    VECTOR_WALK_MIN_BATCHES,
    varint_tables,
    varints,
    walk_python,
)

BATCH_HEADER_SIZE = 61
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", HEADERS_TYPE))


def _binary_column(blob: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """``blob[start:start+length]`` per row as a binary array; a negative length is null."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    valid = lengths >= 0
    offsets = np.empty(2 * n + 1, np.int32)
    offsets[0] = 0
    offsets[1::2] = starts
    offsets[2::2] = starts + np.where(valid, lengths, 0)
    validity = None
    if not valid.all():
        bits = np.ones(2 * n, np.bool_)
        bits[1::2] = valid
        validity = pa.py_buffer(np.packbits(bits, bitorder="little"))
    both = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [validity, pa.py_buffer(offsets), blob])
    return both.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64)))


def _headers_column(blob: bytes, starts: np.ndarray, counts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Spark's ``headers`` column: null for a record without headers (as Spark's Kafka source does)."""
    rows: list = [None] * len(starts)
    for i in np.flatnonzero(counts).tolist():
        pos, out = int(starts[i]), []
        for _ in range(int(counts[i])):
            kl, pos = decode_varint(blob, pos)
            if kl < 0 or pos + kl > ends[i]:
                raise CorruptRecordError(f"invalid header key length {kl}")
            key = blob[pos : pos + kl].decode("utf-8")
            pos += kl
            vl, pos = decode_varint(blob, pos)
            value = None if vl < 0 else blob[pos : pos + vl]
            pos += max(vl, 0)
            out.append({"key": key, "value": value})
        if pos != ends[i]:
            raise CorruptRecordError("record headers do not end where the record does")
        rows[i] = out
    return pa.array(rows, HEADERS_TYPE)


def _walk_lockstep(words: np.ndarray, bounds: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Start position of every record, stepping through all batches at once: step ``i`` moves every
    batch that has a record ``i + 1`` there with one lookup in the byte-pair table. None when the plain
    loop is the better choice (few large batches) or the steps do not land exactly on each batch's end
    (a record length that is not a 1- or 2-byte varint above 0: ``walk_python`` then decodes it or says
    what is wrong).

    Batches are ordered by record count, most first, so the batches still moving at step ``i`` are a
    prefix of the row: each step is a few numpy calls on views, never a copy or a mask."""
    nsec = len(counts)
    most = int(counts.max())
    if nsec < VECTOR_WALK_MIN_BATCHES or most * VECTOR_WALK_MIN_BATCHES > int(counts.sum()) * 4:
        return None
    record_step = varint_tables()[3]
    order = np.argsort(-counts, kind="stable")
    sorted_counts = counts[order].tolist()
    # row i holds record i's start in every batch (row ``count``: where the batch's records end)
    pos = np.empty((most + 1, nsec), np.int64)
    pos[0] = bounds[:-1][order]
    step = np.empty(nsec, np.int64)
    limit = len(words) - 1
    k = nsec
    for i in range(most):
        while sorted_counts[k - 1] <= i:
            k -= 1
        here = pos[i, :k]
        record_step.take(words[here], out=step[:k], mode="clip")
        nxt = np.add(here, step[:k], out=pos[i + 1, :k])
        # a length the table cannot read sends a position past the data: it stays at its end
        np.minimum(nxt, limit, out=nxt)
    column = np.empty(nsec, np.int64)
    column[order] = np.arange(nsec)
    flat = pos.reshape(-1)
    if (flat.take(counts * nsec + column) != bounds[1:]).any():
        return None
    total = int(counts.sum())
    first = np.cumsum(counts) - counts
    row = np.arange(total) - np.repeat(first, counts)
    return flat.take(row * nsec + np.repeat(column, counts))


def _table_fields(words: np.ndarray, starts: np.ndarray) -> tuple | None:
    """Every record's end and fields from the byte-pair tables; None when one needs a varint of 3
    bytes or more (a key or value over 8 KiB, a far timestamp) or holds an impossible length.

    Tables are read with ``take``: indexing them with the uint16 pairs converts those first, at 4x the
    cost. ``words`` itself is a strided view, which ``take`` would copy whole: it is indexed."""
    val_t, size_t, step_t, record_step_t, size_and_attributes_t = varint_tables()
    try:
        w = words[starts]
        rec_end = starts + record_step_t.take(w)
        p = starts + size_and_attributes_t.take(w)
        w = words[p]
        tsd = val_t.take(w)
        p += size_t.take(w)
        w = words[p]
        od = val_t.take(w)
        p += size_t.take(w)
        w = words[p]
        kl = val_t.take(w)
        key_start = p + size_t.take(w)
        p += step_t.take(w)
        w = words[p]
        vl = val_t.take(w)
        value_start = p + size_t.take(w)
        p += step_t.take(w)
        w = words[p]
    except IndexError:
        return None
    headers_start = p + size_t.take(w)
    if (rec_end >= len(words)).any() or (headers_start >= len(words)).any():
        return None
    return rec_end, tsd, od, kl, key_start, vl, value_start, val_t.take(w), headers_start


def _varint_fields(blob, starts: np.ndarray) -> tuple:
    """The same as ``_table_fields`` for any varint length, a byte column at a time (a negative record
    length gives an end the caller's tiling check rejects)."""
    arr = np.frombuffer(blob + _PAD, np.uint8)
    ln, n0 = varints(arr, starts, 5)
    p = starts + n0
    rec_end = p + ln
    tsd, n1 = varints(arr, p + 1, 10)  # +1: the attributes byte
    q = p + 1 + n1
    od, n2 = varints(arr, q, 5)
    q += n2
    kl, n3 = varints(arr, q, 5)
    key_start = q + n3
    q = key_start + np.maximum(kl, 0)
    vl, n4 = varints(arr, q, 5)
    value_start = q + n4
    q = value_start + np.maximum(vl, 0)
    hc, n5 = varints(arr, q, 5)
    return rec_end, tsd, od, kl, key_start, vl, value_start, hc, q + n5


def batches_to_arrow(
    data,
    batches: Sequence[tuple[int, BatchHeader]],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    include_headers: bool = False,
) -> pa.RecordBatch | None:
    """The records of ``batches`` (positions in ``data``, CRC already checked, control batches already
    dropped) with offsets in ``[start, end)``, as one Arrow batch; None if there are none."""
    sections: list = []
    sec_counts: list[int] = []
    sec_base_off: list[int] = []
    sec_ts: list[int] = []
    sec_fixed: list[int] = []
    view = memoryview(data)
    for pos, h in batches:
        body = view[pos + BATCH_HEADER_SIZE : pos + h.batch_length + 12]
        codec = h.attributes & COMPRESSION_MASK
        sections.append(decompress(codec, body) if codec else body)
        sec_counts.append(h.records_count)
        sec_base_off.append(h.base_offset)
        log_append = bool(h.attributes & TIMESTAMP_TYPE_BIT)
        sec_ts.append(h.max_timestamp if log_append else h.base_timestamp)
        sec_fixed.append(1 if log_append else 0)
    if not sections:
        return None
    sections.append(_PAD)
    return _sections_to_arrow(
        b"".join(sections),
        np.cumsum([0, *(len(x) for x in sections[:-1])]),
        np.array(sec_counts, np.int64),
        np.array(sec_base_off, np.int64),
        np.array(sec_ts, np.int64),
        np.array(sec_fixed, np.bool_),
        topic, partition, start, end, include_headers,
    )  # fmt: skip


def _sections_to_arrow(
    blob: bytes,
    bounds: np.ndarray,
    counts: np.ndarray,
    base_offsets: np.ndarray,
    timestamps: np.ndarray,
    fixed_ts: np.ndarray,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """The rows of records sections joined in ``blob``, which ends in ``PAD`` (joined with it: a copy
    fewer than padding it here) (section ``i`` spans ``bounds[i]:bounds[i+1]``
    and holds ``counts[i]`` records; ``timestamps[i]`` is its base timestamp, or its max timestamp when
    ``fixed_ts[i]``, log append time) with offsets in ``[start, end)``."""
    name = f"{topic}-{partition}"
    words = np.ndarray((len(blob) - 1,), "<u2", blob, 0, (1,))  # byte_pairs, on the padding already there
    starts = _walk_lockstep(words, bounds, counts)
    if starts is None:
        starts = walk_python(blob, bounds.tolist(), counts.tolist(), name)
    located = _table_fields(words, starts)
    if located is None:
        located = _varint_fields(blob, starts)
    rec_end, tsd, od, kl, key_start, vl, value_start, hc, headers_start = located
    nxt = np.empty_like(rec_end)
    nxt[:-1] = starts[1:]
    nxt[np.cumsum(counts) - 1] = bounds[1:]  # each section's last record ends where the section does
    if (rec_end != nxt).any():
        raise CorruptRecordError(f"{name}: record lengths do not add up to their batch")
    if (headers_start > rec_end).any() or ((hc == 0) & (headers_start != rec_end)).any():
        raise CorruptRecordError(f"{name}: a record's fields do not fit its length")

    offsets = np.repeat(base_offsets, counts) + od
    fixed = np.repeat(fixed_ts, counts)
    ts_ms = np.repeat(timestamps, counts) + np.where(fixed, 0, tsd)
    lo, hi = 0, len(offsets)
    if offsets[0] < start or offsets[-1] >= end:
        lo, hi = int(np.searchsorted(offsets, start)), int(np.searchsorted(offsets, end))
        if lo >= hi:
            return None
        sl = slice(lo, hi)
        offsets, ts_ms, fixed = offsets[sl], ts_ms[sl], fixed[sl]
        key_start, kl, value_start, vl = key_start[sl], kl[sl], value_start[sl], vl[sl]
        hc, headers_start, rec_end = hc[sl], headers_start[sl], rec_end[sl]
    n = hi - lo
    buf = pa.py_buffer(blob)
    columns = [
        _binary_column(buf, key_start, kl),
        _binary_column(buf, value_start, vl),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(offsets),
        pa.array(ts_ms * 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(fixed.astype(np.int32)),
    ]
    schema = ARROW_SCHEMA
    if include_headers:
        columns.append(_headers_column(blob, headers_start, hc, rec_end))
        schema = ARROW_SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# The 61 header bytes of a batch as one numpy record (big-endian, packed).
HEADER_DTYPE = np.dtype(
    [("base_offset", ">i8"), ("batch_length", ">i4"), ("leader_epoch", ">i4"), ("magic", "i1"),
     ("crc", ">u4"), ("attributes", ">i2"), ("last_offset_delta", ">i4"), ("base_timestamp", ">i8"),
     ("max_timestamp", ">i8"), ("producer_id", ">i8"), ("producer_epoch", ">i2"),
     ("base_sequence", ">i4"), ("records_count", ">i4")]
)  # fmt: skip
_LENGTH = struct.Struct(">i")
_HEADER_BYTES = np.arange(BATCH_HEADER_SIZE)


@dataclass
class PlainScan:
    """What ``scan_plain`` found: the batches to turn into rows (positions, headers), the offset after
    the fetch and whether the fetch moved the reader on."""

    positions: np.ndarray
    headers: np.ndarray
    offset: int
    advanced: bool


def scan_plain(data, offset: int, end: int) -> PlainScan | None:
    """The batch loop of a fetch, for all batches at once: walk ``data``'s batches, skip those wholly
    below ``offset``, stop at the first at or beyond ``end``, check every other one as
    ``validate_batch`` does (CRC included) and keep those that are not control batches.

    None whenever the per-batch loop could decide otherwise or has something to say: a bad magic or
    batch length, a batch failing a check, offsets that do not grow, nothing to read. The caller then
    runs that loop, which gives the same rows or raises the error naming what is wrong. Aborted
    transactions are the caller's to rule out (this keeps every data batch)."""
    positions = []
    add = positions.append
    unpack = _LENGTH.unpack_from
    pos, n = 0, len(data)
    while n - pos >= BATCH_HEADER_SIZE:
        length = unpack(data, pos + 8)[0]
        if data[pos + MAGIC_OFFSET] != MAGIC_V2 or length < MIN_BATCH_LENGTH:
            return None
        nxt = pos + length + LOG_OVERHEAD
        if nxt > n:  # a torn tail ends the walk quietly, as iter_batches does
            break
        add(pos)
        pos = nxt
    if not positions:
        return None
    at = np.array(positions, np.int64)
    h = np.frombuffer(data, np.uint8)[at[:, None] + _HEADER_BYTES].view(HEADER_DTYPE).reshape(-1)
    base = h["base_offset"].astype(np.int64)
    nxt_off = base + h["last_offset_delta"] + 1
    beyond = np.flatnonzero(base >= end)
    stop = int(beyond[0]) if len(beyond) else len(at)
    if stop > 1 and (nxt_off[1:stop] <= nxt_off[: stop - 1]).any():
        return None
    first = int(np.searchsorted(nxt_off[:stop], offset, side="right"))  # batches wholly below: skipped
    if first == stop:
        return None if stop == len(at) else PlainScan(at[:0], h[:0], end, True)
    at, h = at[first:stop], h[first:stop]
    size = h["batch_length"].astype(np.int64) + LOG_OVERHEAD
    count = h["records_count"].astype(np.int64)
    last_delta = h["last_offset_delta"].astype(np.int64)
    codec = h["attributes"] & COMPRESSION_MASK
    bad = (
        (codec > Compression.ZSTD) | (count < 0) | (last_delta < 0) | ((count > 0) & (last_delta < count - 1))
        | ((codec == 0) & (count * MIN_RECORD_SIZE > size - BATCH_HEADER_SIZE))
    )  # fmt: skip
    if bad.any():
        return None
    view = memoryview(data)
    crcs = [crc32c(view[p + CRC_START : p + z]) for p, z in zip(at.tolist(), size.tolist(), strict=True)]
    if (np.array(crcs, np.uint32) != h["crc"]).any():
        return None
    data_batches = (h["attributes"] & CONTROL_BIT) == 0
    new_offset = end if stop < len(nxt_off) else int(nxt_off[stop - 1])
    return PlainScan(at[data_batches], h[data_batches], new_offset, True)


def scanned_to_arrow(
    data, scan: PlainScan, topic: str, partition: int, start: int, end: int, *, include_headers: bool = False
) -> pa.RecordBatch | None:
    """``batches_to_arrow`` for what ``scan_plain`` kept."""
    h = scan.headers
    if not len(h):
        return None
    if (h["attributes"] & COMPRESSION_MASK).any():
        picked = [
            (p, BatchHeader(*(int(x) for x in row)))
            for p, row in zip(scan.positions.tolist(), h.tolist(), strict=True)
        ]
        return batches_to_arrow(data, picked, topic, partition, start, end, include_headers=include_headers)
    lengths = h["batch_length"].astype(np.int64) - (BATCH_HEADER_SIZE - LOG_OVERHEAD)
    view = memoryview(data)
    at = (scan.positions + BATCH_HEADER_SIZE).tolist()
    blob = b"".join([*(view[p : p + z] for p, z in zip(at, lengths.tolist(), strict=True)), _PAD])
    log_append = (h["attributes"] & TIMESTAMP_TYPE_BIT) != 0
    return _sections_to_arrow(
        blob,
        np.concatenate([[0], np.cumsum(lengths)]),
        h["records_count"].astype(np.int64),
        h["base_offset"].astype(np.int64),
        np.where(log_append, h["max_timestamp"], h["base_timestamp"]).astype(np.int64),
        log_append,
        topic, partition, start, end, include_headers,
    )  # fmt: skip


__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "HEADERS_TYPE",
    "PlainScan",
    "batches_to_arrow",
    "scan_plain",
    "scanned_to_arrow",
]
