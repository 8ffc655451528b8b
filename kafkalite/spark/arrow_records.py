"""Record batches (v2 bytes) to Arrow columns, for the Spark source.

Decoding record by record in Python objects costs about 1.5 us per record, which would make the reader,
not Spark, the bottleneck. Here a fetch's batches are checked and picked all at once (``scan_plain``:
headers in one numpy gather, CRCs in C), and their records sections go to ``record_columns``, one
compiled pass that fills Arrow's buffers (keys and values packed with their offsets, and the deltas
that give each row its offset and timestamp). Compressed batches are inflated and joined first.

The two compiled modules (``batch_walk``, ``record_columns``) are imported where a fetch is first
decoded, not here: Spark plans every read in a fresh Python process that imports this module but decodes
nothing, and loading numba and its cached code there cost about a second of CPU each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from kafkalite.errors import CorruptRecordError
from kafkalite.records import BatchHeader, Compression, decode_varint
from kafkalite.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    CRC_START,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
)
from kafkalite.records.compression import decompress

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


def _headers_column(blob, starts: np.ndarray, counts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Spark's ``headers`` column: null for a record without headers (as Spark's Kafka source does)."""
    rows: list = [None] * len(starts)
    blob = blob if isinstance(blob, bytes) else bytes(blob)  # a fetch's view: headers are rare
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
    lengths = np.array([len(x) for x in sections], np.int64)
    sec_starts = np.cumsum(lengths) - lengths
    return _sections_to_arrow(
        b"".join(sections),
        sec_starts,
        sec_starts + lengths,
        np.array(sec_counts, np.int64),
        np.array(sec_base_off, np.int64),
        np.array(sec_ts, np.int64),
        np.array(sec_fixed, np.bool_),
        topic, partition, start, end, include_headers,
    )  # fmt: skip


def _binary_column(n: int, offsets: np.ndarray, data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Arrow binary array from packed bytes and their offsets; a negative length is null."""
    validity = None
    if (lengths < 0).any():
        validity = pa.py_buffer(np.packbits(lengths >= 0, bitorder="little"))
    return pa.BinaryArray.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _sections_to_arrow(
    blob,
    sec_starts: np.ndarray,
    sec_ends: np.ndarray,
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
    """The rows of the records sections in ``blob`` with offsets in ``[start, end)``. Section ``i``
    spans ``sec_starts[i]:sec_ends[i]`` and holds ``counts[i]`` records; ``timestamps[i]`` is its base
    timestamp, or its max timestamp when ``fixed_ts[i]`` (log append time)."""
    from kafkalite.spark.record_columns import decode_sections  # numba: see the module's docstring

    c = decode_sections(
        blob, sec_starts, sec_ends, counts, f"{topic}-{partition}", base_offsets, timestamps, fixed_ts
    )
    offsets = c.offset
    total = len(offsets)
    lo, hi = 0, total
    if offsets[0] < start or offsets[-1] >= end:
        lo, hi = int(np.searchsorted(offsets, start)), int(np.searchsorted(offsets, end))
        if lo >= hi:
            return None
    n = hi - lo
    sl = slice(lo, hi)
    if fixed_ts.any():
        ts_type = pa.array(np.repeat(fixed_ts, counts)[sl].astype(np.int32))
    else:
        ts_type = pa.array(np.zeros(n, np.int32))
    columns = [
        _binary_column(total, c.key_offsets, c.key_data, c.key_length).slice(lo, n),
        _binary_column(total, c.value_offsets, c.value_data, c.value_length).slice(lo, n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(offsets[sl]),
        pa.Array.from_buffers(
            ARROW_SCHEMA.field("timestamp").type, n, [None, pa.py_buffer(c.timestamp_us[sl])]
        ),
        ts_type,
    ]
    schema = ARROW_SCHEMA
    if include_headers:
        columns.append(_headers_column(blob, c.headers_start[sl], c.headers_count[sl], c.record_end[sl]))
        schema = ARROW_SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# The 61 header bytes of a batch as one numpy record (big-endian, packed).
HEADER_DTYPE = np.dtype(
    [("base_offset", ">i8"), ("batch_length", ">i4"), ("leader_epoch", ">i4"), ("magic", "i1"),
     ("crc", ">u4"), ("attributes", ">i2"), ("last_offset_delta", ">i4"), ("base_timestamp", ">i8"),
     ("max_timestamp", ">i8"), ("producer_id", ">i8"), ("producer_epoch", ">i2"),
     ("base_sequence", ">i4"), ("records_count", ">i4")]
)  # fmt: skip
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
    from kafkalite.spark.batch_walk import batch_starts  # numba: see the module's docstring

    at = batch_starts(data)
    if at is None or not len(at):
        return None
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
    sec_starts = scan.positions + BATCH_HEADER_SIZE
    log_append = (h["attributes"] & TIMESTAMP_TYPE_BIT) != 0
    return _sections_to_arrow(
        data,  # the records stay where they were fetched: the decoder reads them in place
        sec_starts,
        sec_starts + lengths,
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
