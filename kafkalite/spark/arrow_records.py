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

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from kafkalite.errors import CorruptRecordError
from kafkalite.records import BatchHeader, decode_varint
from kafkalite.records.compression import decompress
from kafkalite.records.vector import PAD as _PAD
from kafkalite.records.vector import (
    VECTOR_WALK_MIN_BATCHES,
    byte_pairs,
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
    blob = b"".join(sections)
    bounds = np.cumsum([0, *(len(x) for x in sections)])
    counts = np.array(sec_counts, np.int64)
    name = f"{topic}-{partition}"
    words = byte_pairs(blob)
    starts = _walk_lockstep(words, bounds, counts)
    if starts is None:
        starts = walk_python(blob, bounds.tolist(), sec_counts, name)
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

    offsets = np.repeat(np.array(sec_base_off, np.int64), counts) + od
    fixed = np.repeat(np.array(sec_fixed, np.bool_), counts)
    ts_ms = np.repeat(np.array(sec_ts, np.int64), counts) + np.where(fixed, 0, tsd)
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


__all__ = ["ARROW_SCHEMA", "ARROW_SCHEMA_WITH_HEADERS", "HEADERS_TYPE", "batches_to_arrow"]
