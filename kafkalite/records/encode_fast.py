"""Encoding a producer batch's records section with per-batch work instead of a Python loop per record.

The producer's common batch is keyless records with bytes values and no headers, whose timestamps come
in a few runs of equal milliseconds. Each record is then ``glue + value`` where the glue (previous
record's header count, length varint, attributes, timestamp delta, offset delta, null key, value length)
depends only on the offset delta, the value length and the timestamp delta. ``encode_values`` builds the
glues with C-level list operations (table lookups through ``map``, slice assignment, one ``b"".join``)
and, when every value has one length, reuses whole glue lists cached across batches.

Exact or nothing: anything outside that shape (keys, None values, headers, non-bytes values, records or
batches too large for two-byte varints, non-int timestamps) returns None and the caller uses the exact
encoder. Byte for byte the output equals ``encode_plain_records``.
"""

from __future__ import annotations

from itertools import groupby

import numpy as np

from kafkalite.records.record import _UVARINT, _UVARINT_LIMIT, _uvarint_bytes
from kafkalite.records.varint import INT64_MAX, INT64_MIN

# Offset deltas and value lengths below this use one- or two-byte varints, so a record's length stays
# below 2**13 and its length varint comes from the table too.
_MAX_RECORDS = 1 << 13
_MAX_VALUE = (1 << 13) - 32  # leaves room for the other fields (at most 1 + 10 + 2 + 1 + 2 + 1 bytes)

# Offset delta varint followed by the null key's length (zigzag(-1) = 1), for every offset delta.
_ODK = [_UVARINT[od << 1] + b"\x01" for od in range(_MAX_RECORDS)]
_ODK_LEN = np.fromiter(map(len, _ODK), np.int64, _MAX_RECORDS)
# The previous record's header count (0) followed by this record's length varint.
_TRAIL_LEN = [b"\x00" + b for b in _UVARINT]

# (value length, attributes + timestamp delta bytes) -> glue of each offset delta, built as needed.
_GLUES: dict[tuple[int, bytes], list[bytes]] = {}
_GLUES_MAX_KEYS = 512


def _ts_part(ts: object, base_ts: int, cache: dict) -> bytes | None:
    """Attributes byte plus timestamp delta varint, or None if ``ts`` is not an int in range."""
    part = cache.get(ts)
    if part is None:
        if ts.__class__ is not int:
            return None
        d = ts - base_ts  # type: ignore[operator]
        if not INT64_MIN <= d <= INT64_MAX:
            return None
        u = (d << 1) ^ (d >> 63)
        part = b"\x00" + (_UVARINT[u] if u < _UVARINT_LIMIT else _uvarint_bytes(u))
        cache[ts] = part
    return part


def _glues(vlen: int, ts_b: bytes, upto: int) -> list[bytes]:
    """Glue for offset deltas ``0 .. upto - 1`` of records with ``vlen``-byte values and timestamp ``ts_b``."""
    key = (vlen, ts_b)
    glues = _GLUES.get(key)
    if glues is None:
        if len(_GLUES) >= _GLUES_MAX_KEYS:
            _GLUES.clear()  # unusual: many value sizes or timestamp deltas; rebuilding is cheap
        glues = _GLUES[key] = []
    have = len(glues)
    if have < upto:
        vl_b = _UVARINT[vlen << 1]
        fixed = len(ts_b) + len(vl_b) + vlen + 1  # + the header count
        tail = b"\x00"
        glues.extend(
            (tail if od else b"") + _UVARINT[(fixed + len(_ODK[od])) << 1] + ts_b + _ODK[od] + vl_b
            for od in range(have, upto)
        )
    return glues


def encode_values(values: list, stamps: list, base_ts: int, *, bytes_only: bool = False) -> bytes | None:
    """Records section for keyless, headerless records with bytes ``values`` and per-record ``stamps``
    (timestamps; deltas against ``base_ts``), offset deltas 0, 1, 2, ...; None if the shape is not handled.
    ``bytes_only`` is the caller's word that every value is ``bytes`` (a producer batch knows), which
    skips that check.
    """
    n = len(values)
    if n == 0 or n >= _MAX_RECORDS or len(stamps) != n:
        return None
    if not bytes_only and set(map(type, values)) != {bytes}:
        return None
    try:
        lens = set(map(len, values))
    except TypeError:  # a None value: not this shape
        return None
    if max(lens) > _MAX_VALUE:
        return None
    ts_cache: dict = {}
    first = stamps[0]
    if stamps.count(first) == n:
        ts_b = _ts_part(first, base_ts, ts_cache)
        if ts_b is None:
            return None
        runs = [(ts_b, n)]
    else:
        runs = []
        for ts, group in groupby(stamps):
            ts_b = _ts_part(ts, base_ts, ts_cache)
            if ts_b is None:
                return None
            runs.append((ts_b, len(list(group))))
    if len(lens) == 1 and len(runs) * 8 <= n:
        # One value size and few timestamp runs: each run's glues are a slice of a cached list.
        vlen = lens.pop()
        parts: list = [None] * (2 * n + 1)
        parts[1 : 2 * n : 2] = values
        parts[2 * n] = b"\x00"  # the last record's header count
        lo = 0
        for ts_b, count in runs:
            hi = lo + count
            parts[2 * lo : 2 * hi : 2] = _glues(vlen, ts_b, hi)[lo:hi]
            lo = hi
        return b"".join(parts)
    return _encode_mixed(values, runs, n)


def _encode_mixed(values: list, runs: list, n: int) -> bytes:
    """Any value sizes, any timestamp runs: glue pieces per record from tables, lengths with numpy."""
    vl = np.fromiter(map(len, values), np.int64, n)
    ts_parts: list[bytes] = []
    for ts_b, count in runs:
        ts_parts += [ts_b] * count
    ts_len = np.fromiter(map(len, ts_parts), np.int64, n) if len(runs) > 1 else len(runs[0][0])
    vl_u = (vl << 1).tolist()
    vl_len = np.where(vl < 64, 1, 2)
    rec_u = ((ts_len + _ODK_LEN[:n] + vl_len + vl + 1) << 1).tolist()
    length = list(map(_TRAIL_LEN.__getitem__, rec_u))
    length[0] = _UVARINT[rec_u[0]]  # the first record has no previous header count
    pieces: list = [None] * (5 * n)
    pieces[0::5] = length
    pieces[1::5] = ts_parts
    pieces[2::5] = _ODK[:n]
    pieces[3::5] = list(map(_UVARINT.__getitem__, vl_u))
    pieces[4::5] = values
    pieces.append(b"\x00")
    return b"".join(pieces)
