"""Records sections (record batch v2, uncompressed bytes) to columns, in one compiled pass.

A record's fields are varints whose lengths decide where the next field starts, so finding them is a
walk from record to record. In numpy that walk is dozens of passes over the fetch (one per field and
varint byte); here numba compiles a plain loop that reads each record once, copies its key and value
into the column buffers as it goes, and releases the GIL while it runs (so a read-ahead thread decodes
while Spark's worker serialises the previous batch).

A corrupt section does not raise inside the loop: the loop stops and reports what it found and where,
and ``decode_sections`` raises ``CorruptRecordError`` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from kafkalite.errors import CorruptRecordError

# What the loop reports: 0 for success, else one of these (with the record's index).
_OK, _SHORT, _TOO_LONG, _NEGATIVE, _FIELDS, _SECTION = range(6)


@intrinsic
def _copy(typingctx, dst, dst_at, src, src_at, n):  # noqa: ANN001, ANN202, ARG001
    """``dst[dst_at:dst_at + n] = src[src_at:src_at + n]`` as one memcpy: numba's slice assignment
    costs three times the whole record's decoding, and a byte loop is not vectorised (the arrays might
    overlap, as far as LLVM knows)."""

    def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(
            builder, builder.gep(d.data, [args[1]]), builder.gep(s.data, [args[3]]), args[4], 1
        )
        return context.get_dummy_value()

    return types.void(dst, dst_at, src, src_at, n), codegen


@njit(cache=True, nogil=True)
def _varint(buf, pos, end, max_bytes):  # noqa: ANN001, ANN202
    """(zig-zag value, position after it, status) of the varint at ``pos``, which must end by ``end``.
    (Left to LLVM to inline: numba's own inlining made the loop twice as slow.)"""
    if pos >= end:
        return 0, pos, _SHORT
    b = np.int64(buf[pos])
    if b < 0x80:  # most varints in a record are one byte
        return (b >> 1) ^ -(b & 1), pos + 1, _OK
    u = b & 0x7F
    for i in range(1, max_bytes):
        if pos + i >= end:
            return 0, pos, _SHORT
        c = np.int64(buf[pos + i])
        u |= (c & 0x7F) << (7 * i)
        if c < 0x80:
            return (u >> 1) ^ -(u & 1), pos + i + 1, _OK
    return 0, pos, _TOO_LONG


@njit(cache=True, nogil=True)
def _decode(
    buf, sec_starts, sec_ends, counts, sec_bases, out_i64, key_data, value_data, key_offsets, value_offsets
):  # noqa: ANN001, ANN202, PLR0913
    """Fills the columns; returns (status, record index where it stopped)."""
    i = 0
    koff = 0
    voff = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    for s in range(len(counts)):
        pos = sec_starts[s]
        sec_end = sec_ends[s]
        base_offset = sec_bases[0, s]
        base_ts = sec_bases[1, s]
        log_append = sec_bases[2, s] != 0  # every record has the batch's max timestamp
        for _ in range(counts[s]):
            length, pos, st = _varint(buf, pos, sec_end, 5)
            if st != _OK:
                return st, i
            end = pos + length
            if length <= 0 or end > sec_end:
                return _SECTION, i
            pos += 1  # attributes: unused by records v2
            tsd, pos, st = _varint(buf, pos, end, 10)
            if st != _OK:
                return _FIELDS if st == _SHORT else st, i
            od, pos, st = _varint(buf, pos, end, 5)
            if st != _OK:
                return _FIELDS if st == _SHORT else st, i
            # Key and value are spelled out alike on purpose: one jitted helper for both, returning a
            # 4-tuple, made the whole loop 1.5x slower.
            kl, pos, st = _varint(buf, pos, end, 5)
            if st != _OK:
                return _FIELDS if st == _SHORT else st, i
            if kl < -1:
                return _NEGATIVE, i
            if kl >= 0:
                if pos + kl > end:
                    return _FIELDS, i
                _copy(key_data, koff, buf, pos, kl)
                koff += kl
                pos += kl
            vl, pos, st = _varint(buf, pos, end, 5)
            if st != _OK:
                return _FIELDS if st == _SHORT else st, i
            if vl < -1:
                return _NEGATIVE, i
            if vl >= 0:
                if pos + vl > end:
                    return _FIELDS, i
                _copy(value_data, voff, buf, pos, vl)
                voff += vl
                pos += vl
            hc, pos, st = _varint(buf, pos, end, 5)
            if st != _OK or hc < 0:
                return _FIELDS if st != _TOO_LONG else st, i
            if hc == 0 and pos != end:
                return _FIELDS, i
            out_i64[0, i] = base_offset + od
            out_i64[1, i] = (base_ts if log_append else base_ts + tsd) * 1000  # Spark's microseconds
            out_i64[2, i] = kl
            out_i64[3, i] = vl
            out_i64[4, i] = hc
            out_i64[5, i] = pos  # where the headers start
            out_i64[6, i] = end
            key_offsets[i + 1] = koff
            value_offsets[i + 1] = voff
            i += 1
            pos = end
        if pos != sec_end:
            return _SECTION, i
    return _OK, i


@dataclass
class Columns:
    """One fetch's records as columns: per record its offset and timestamp (microseconds), key and
    value lengths (-1: null) with their bytes packed in ``key_data``/``value_data`` at ``key_offsets``
    and ``value_offsets`` (Arrow's layout), and its headers count, headers start and end in the blob."""

    offset: np.ndarray
    timestamp_us: np.ndarray
    key_length: np.ndarray
    value_length: np.ndarray
    headers_count: np.ndarray
    headers_start: np.ndarray
    record_end: np.ndarray
    key_data: np.ndarray
    value_data: np.ndarray
    key_offsets: np.ndarray
    value_offsets: np.ndarray


def decode_sections(
    blob,
    sec_starts: np.ndarray,
    sec_ends: np.ndarray,
    counts: np.ndarray,
    name: str,
    base_offsets: np.ndarray | None = None,
    timestamps: np.ndarray | None = None,
    log_append: np.ndarray | None = None,
) -> Columns:
    """The records of the sections ``blob[sec_starts[i]:sec_ends[i]]``, section ``i`` holding exactly
    ``counts[i]`` records, its batch's base offset ``base_offsets[i]`` and base timestamp
    ``timestamps[i]`` (its max timestamp when ``log_append[i]``: LOG_APPEND_TIME; each default 0).
    Raises ``CorruptRecordError`` naming ``name`` when a record does not decode."""
    buf = np.frombuffer(blob, np.uint8)
    buf.flags.writeable = False  # one compiled signature for bytes and for a fetch's bytearray view
    if len(sec_ends) and (int(sec_ends.max()) > len(buf) or int(sec_starts.min()) < 0):
        raise ValueError(f"{name}: a records section lies outside the {len(buf)} bytes given")
    total = int(counts.sum())
    room = int((sec_ends - sec_starts).sum())  # the keys and values together fit in the sections
    out = np.empty((7, total), np.int64)
    # From Arrow's memory pool, which keeps its pages: fresh malloc'd buffers this size page-fault
    # on every write into them.
    key_data = np.frombuffer(pa.allocate_buffer(room), np.uint8)
    value_data = np.frombuffer(pa.allocate_buffer(room), np.uint8)
    key_offsets = np.empty(total + 1, np.int32)
    value_offsets = np.empty(total + 1, np.int32)
    sec_bases = np.zeros((3, len(counts)), np.int64)
    for row, given in enumerate((base_offsets, timestamps, log_append)):
        if given is not None:
            sec_bases[row] = given
    status, at = _decode(
        buf,
        sec_starts.astype(np.int64),
        sec_ends.astype(np.int64),
        counts.astype(np.int64),
        sec_bases,
        out,
        key_data,
        value_data,
        key_offsets,
        value_offsets,
    )
    if status != _OK:
        raise CorruptRecordError(f"{name}: {_WHAT[status]} (record {at} of this fetch)")
    return Columns(*out, key_data, value_data, key_offsets, value_offsets)


_WHAT = {
    _SHORT: "a records section ends inside a record length",
    _TOO_LONG: "a varint longer than allowed in a record",
    _NEGATIVE: "a key or value length below -1",
    _FIELDS: "a record's fields do not fit its length",
    _SECTION: "record lengths do not add up to their batch",
}


def warm() -> None:
    """Compile (or load from numba's cache) the loop, so a first read does not pay for it."""
    decode_sections(b"\x00" * 8, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), "warm")


__all__ = ["Columns", "decode_sections", "warm"]

if __name__ == "__main__":  # make setup: compile the Spark source's loops once into numba's cache
    from kafkalite.spark import batch_walk

    warm()
    batch_walk.warm()
