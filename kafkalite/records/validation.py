"""Checking a records section record by record, as a Kafka leader does before it appends a batch.

Kafka's ``LogValidator`` iterates every record of a produced batch, and ``DefaultRecord.readFrom``
refuses one whose length varint, fields, key, value or headers do not fit exactly in the bytes it
declares; the batch must then end right after its last record. Here the same, plus what kafkalite's
readers need to serve the batch: offset deltas 0, 1, ..., n-1 (a consumer that trusts the deltas would
otherwise skip or repeat records), UTF-8 header keys and record attributes 0 (unused in v2).

``check_records`` is cheap for the common batch (a producer's records of one or a few sizes, no
headers): a few runs of alike records, each checked with a handful of C-level byte slices, and the
next batch of a layout seen twice (a producer that fills its batches sends the same one over and over) by
comparing its framing bytes, gathered with byte slices, with the remembered layout's. A batch of
other shapes goes to numpy (``vector``'s tables read the varints of all records at once), and anything
that does not pass to the exact decoder one record at a time, which also says which record is wrong and
how. No Python object is built per record on the first two walks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.records.record import decode_record_tuples
from kafkalite.records.varint import decode_varint
from kafkalite.records.vector import _guess_starts, _run_starts, byte_pairs, varint_tables

# Smallest record: length, attributes, timestamp delta, offset delta, key length, value length, header count.
MIN_RECORD_SIZE = 7
# Offset deltas up to here fit in the two-byte varints the tables read.
_VECTOR_MAX_RECORDS = 8191
_ARANGE = np.arange(_VECTOR_MAX_RECORDS + 1, dtype=np.int64)


def check_records(
    data,
    count: int,
    *,
    null_keys: bool = False,
    ts_deltas: tuple[int, int] | None = None,
    span: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Check that ``data`` (or ``data[span[0]:span[1]]``, bytes) holds exactly ``count`` well-formed
    records with offset deltas 0..count-1, raising ``InvalidRecordError`` that names the first bad record.

    Returns ``(first record without a key, first record whose timestamp delta is outside ts_deltas)``,
    -1 for none; the first is looked for only with ``null_keys`` (a compacted topic), the second only
    with ``ts_deltas`` (inclusive bounds, message.timestamp.before/after.max.ms).
    """
    lo, hi = span if span is not None else (0, len(data))
    fits = count > 0 and count * MIN_RECORD_SIZE <= hi - lo
    if fits and ts_deltas is None:
        plan = _PLANS.get((count, lo, hi))
        if plan is not None and _fits(plan, data):
            return (plan.first_null if null_keys else -1), -1
        runs: list[tuple] = []
        first_null = _check_runs(data, count, lo, hi, runs)  # reads the span in place: no copy
        if first_null is not None:
            _remember_if_repeated(data, count, lo, hi, runs, first_null)
            return (first_null if null_keys else -1), -1
    if span is not None:
        data = data[lo:hi]
    if fits and count <= _VECTOR_MAX_RECORDS:
        found = _check_vectorised(data, count, null_keys, ts_deltas)
        if found is not None:
            return found
    return _check_exact(data, count, null_keys, ts_deltas)


# ===== runs of alike records, with bytes operations ========================================================
# A producer's batch is a few runs of records laid out alike: same length, same key and value lengths, no
# headers, timestamp and offset deltas of the same varint sizes. One record of a run is read exactly; the
# others are then checked a column at a time: every k-th byte of the run (``data[a:b:k]``, one C-level
# slice) must repeat the first record's byte, or for the offset delta be the expected one. Only the data
# and a few small byte strings are touched, so the check stays cheap when the caches are cold, unlike
# numpy calls on large tables.

_OD1 = bytes(range(0, 128, 2))  # offset delta d < 64 as a one-byte zig-zag varint
_OD2 = (
    bytes(((d << 1) & 0x7F) | 0x80 for d in range(_VECTOR_MAX_RECORDS + 1)),  # d >= 64: first byte
    bytes((d << 1) >> 7 for d in range(_VECTOR_MAX_RECORDS + 1)),  # and second
)
# Offset deltas from 8192 to 2**20-1 take three bytes: a full producer batch of small records (1 MB of
# 100-byte values is ~9,000 records) has them. Their columns are made per run (``_od3``).
_OD3_END = 1 << 20
_FLIP = bytes(b ^ 0x80 for b in range(256))  # with translate: bytes >= 0x80 become ASCII
_MAX_RUNS = 16


def _od3(i: int, k: int) -> tuple[bytes, bytes, bytes]:
    """The three bytes of the zig-zag varints of offset deltas ``i`` to ``i+k-1``, as three columns."""
    z = np.arange(i, i + k, dtype=np.int64) << 1
    return (
        ((z & 0x7F) | 0x80).astype(np.uint8).tobytes(),
        (((z >> 7) & 0x7F) | 0x80).astype(np.uint8).tobytes(),
        (z >> 14).astype(np.uint8).tobytes(),
    )


def _check_runs(data, n: int, lo: int, size: int, runs: list | None = None) -> int | None:
    """Index of the first record without a key (-1: none) when ``data[lo:size]`` is runs of alike plain
    records with offset deltas 0..n-1 that fill it exactly; None when it is not (the other walks decide).
    ``runs`` gets ``(position, first index, records, shape)`` for each run found."""
    pos = lo
    i = 0
    first_null = -1
    for _ in range(_MAX_RUNS):
        shape = _record_shape(data, pos, size, i)
        if shape is None:
            return None
        stride, const_cols, tsd_col, tsd_size, od_col, od_size, keyless = shape
        if keyless and first_null < 0:
            first_null = i
        od_end = 64 if od_size == 1 else _VECTOR_MAX_RECORDS + 1 if od_size == 2 else _OD3_END
        k = min(n - i, (size - pos) // stride, od_end - i)
        hi = pos + k * stride
        m = k  # records of the run that match the first, from the first on
        for c in const_cols:
            col = data[pos + c : hi : stride]
            first = col[:1]
            if col.strip(first):  # some byte differs from the first record's (b"" when none does)
                m = min(m, len(col) - len(col.lstrip(first)))
        ts = data[pos + tsd_col : hi : stride]
        if tsd_size == 2:  # a two-byte varint: first byte >= 0x80, second < 0x80
            flipped = ts.translate(_FLIP)
            if not flipped.isascii():
                m = min(m, _non_ascii(flipped))
            ts = data[pos + tsd_col + 1 : hi : stride]
        if not ts.isascii():
            m = min(m, _non_ascii(ts))
        if od_size == 1:
            col, want = data[pos + od_col : hi : stride], _OD1[i : i + k]
            if col != want:
                m = min(m, _mismatch(col, want))
        else:
            wants = (_OD2[0][i : i + k], _OD2[1][i : i + k]) if od_size == 2 else _od3(i, k)
            for j, want in enumerate(wants):
                col = data[pos + od_col + j : hi : stride]
                if col != want:
                    m = min(m, _mismatch(col, want))
        if runs is not None:
            runs.append((pos, i, m, shape))
        i += m
        pos += m * stride
        if i == n:
            return first_null if pos == size else None
    return None


# ===== a producer's layout, remembered ===================================================================
# A producer sends batch after batch laid out alike: the same record count, section size and runs (only
# keys, values and timestamps differ). Once ``_check_runs`` has walked a second such batch, its layout
# becomes a plan: where every framing byte of every record sits in the section (length, attributes, timestamp and
# offset delta varints, key and value lengths, header count) and what it must be. The next batch of the
# same count and size is then checked by joining those bytes, one strided slice per column of a run, and
# comparing them with the plan's in one go. That is the whole check, not a guess: bytes that equal the
# plan's make each record parse exactly as the planned one did (same length, key and value lengths, no
# headers, the same delta sizes, offset delta i for record i), so the records fill the section as before;
# any other batch is walked afresh. Byte slices, not a numpy gather: they were as fast when hot and
# several times faster in situ, where the leader's caches are cold from the rest of the produce path.


class _Plan(NamedTuple):
    exact: list[slice]  # columns whose every byte is known: lengths, attributes, offset deltas, ...
    want_exact: bytes  # their bytes, joined
    bits: list[slice]  # columns of timestamp delta varints, free but for their continuation bits
    want_bits: bytes  # those bits, joined
    first_null: int  # the first record without a key, -1 for none


# (record count, start and end of the section in its buffer) -> the plan last seen valid
_PLANS: dict[tuple[int, int, int], _Plan] = {}
_MAX_PLANS = 64
_MAX_PLAN_BYTES = 1 << 16  # framing bytes kept per plan; larger batches are walked each time
_TOP_BIT = bytes(b & 0x80 for b in range(256))


def _fits(plan: _Plan, data) -> bool:
    """Whether every framing byte of the section in ``data`` the plan was made for (at the same start
    and of the same size) is what ``plan`` wants."""
    get = data.__getitem__  # map over a bound method: no closure, no Python-level loop
    return (
        b"".join(map(get, plan.exact)) == plan.want_exact
        and b"".join(map(get, plan.bits)).translate(_TOP_BIT) == plan.want_bits
    )


# (record count, start and end of the section) walked once and not remembered: a producer that batches
# by linger.ms sends a new count almost every time, and a plan made for a count that never comes back
# costs half a walk for nothing; a producer that fills batch.size repeats its count from the second on.
_SEEN: dict[tuple[int, int, int], None] = {}


def _remember_if_repeated(data, n: int, lo: int, hi: int, runs: list[tuple], first_null: int) -> None:
    """``_remember`` the layout the second time its count and size come, or when it has a plan already
    (which this batch did not fit, so it replaces it)."""
    key = (n, lo, hi)
    if key in _PLANS or key in _SEEN:
        _SEEN.pop(key, None)
        _remember(data, n, lo, hi, runs, first_null)
        return
    if len(_SEEN) >= _MAX_PLANS:
        _SEEN.pop(next(iter(_SEEN)))
    _SEEN[key] = None


def _remember(data, n: int, lo: int, hi: int, runs: list[tuple], first_null: int) -> None:
    """Keep the layout ``_check_runs`` found in ``data[lo:hi]`` (``runs``) as the plan for its count
    and size."""
    framing = sum(m * (len(shape[1]) + shape[3] + shape[5]) for _, _, m, shape in runs)
    if framing > _MAX_PLAN_BYTES:
        return
    exact, bits = [], []
    for pos, _i, m, (stride, const, tsd_col, tsd_size, od_col, od_size, _keyless) in runs:
        at, end = pos, pos + m * stride
        exact += [slice(at + c, end, stride) for c in (*const, *range(od_col, od_col + od_size))]
        bits += [slice(at + c, end, stride) for c in range(tsd_col, tsd_col + tsd_size)]
    want_exact = b"".join([data[s] for s in exact])
    want_bits = b"".join([data[s] for s in bits]).translate(_TOP_BIT)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.pop(next(iter(_PLANS), None), None)
    _PLANS[(n, lo, hi)] = _Plan(exact, want_exact, bits, want_bits, first_null)


def _record_shape(data, pos: int, size: int, index: int) -> tuple | None:
    """Layout of the plain record at ``pos`` (offset delta ``index``): its size, the columns that must
    repeat in a run of alike records, where its timestamp and offset deltas sit and their sizes, and
    whether it has no key; None if it is not such a record or is not sound."""
    try:
        length, p = decode_varint(data, pos)
        end = p + length
        if length < MIN_RECORD_SIZE - 1 or end > size or data[p]:
            return None
        const = list(range(p + 1 - pos))  # length varint and attributes
        tsd_col = p + 1 - pos
        tsd_size = 1 if data[p + 1] < 0x80 else 2 if data[p + 2] < 0x80 else 0
        od_col = tsd_col + tsd_size
        od, q = decode_varint(data, pos + od_col)
        od_size = q - pos - od_col
        if not tsd_size or od != index or od_size > 3:
            return None
        kl, r = decode_varint(data, q)
        const += range(q - pos, r - pos)
        if kl > 0:
            r += kl
        elif kl < -1:
            return None
        vl, t = decode_varint(data, r)
        const += range(r - pos, t - pos)
        if vl > 0:
            t += vl
        elif vl < -1:
            return None
        if t != end - 1 or data[t]:  # header count 0, last byte of the record
            return None
    except (CorruptRecordError, IndexError):
        return None
    const.append(end - 1 - pos)
    return end - pos, const, tsd_col, tsd_size, od_col, od_size, kl == -1


def _mismatch(a: bytes, b: bytes) -> int:
    """First index where ``a`` and ``b`` (equally long, different) differ."""
    lo, hi = 0, len(a)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _non_ascii(col: bytes) -> int:
    return len(col) - len(col.lstrip(_ASCII))


_ASCII = bytes(range(0x80))


def _first(mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else -1


def _check_vectorised(
    data, n: int, null_keys: bool, ts_deltas: tuple[int, int] | None
) -> tuple[int, int] | None:
    """The answer when every record is sound and the tables can read them; None to ask the exact walk."""
    size = len(data)
    words = byte_pairs(data)
    try:
        starts = _guess_starts(data, 0, size, n)
        if starts is None:
            starts = _run_starts(data, words, 0, size, n)
            if starts is None:
                return None
        val_t, size_t, step_t, record_step_t, size_and_attributes_t = varint_tables()
        # Tables are read with ``take`` (several times faster than ``[]`` with uint16 indices) but the
        # byte pairs with ``[]``: they are an unaligned view, which ``take`` copes with slowly.
        w = words[starts]
        rec_end = starts + record_step_t.take(w)
        attributes = words[starts + size_t.take(w)]
        p = starts + size_and_attributes_t.take(w)
        w = words[p]
        tsd = val_t.take(w) if ts_deltas is not None else None
        p += size_t.take(w)  # timestamp delta
        w = words[p]
        od = val_t.take(w)
        p += size_t.take(w)
        w = words[p]
        kl = val_t.take(w) if null_keys else None
        p += step_t.take(w)  # key
        p += step_t.take(words[p])  # value
        if rec_end[-1] != size or (n > 1 and not (rec_end[:-1] == starts[1:]).all()):
            return None
        if not (od == _ARANGE[:n]).all():
            return None
        # A plain record has attributes 0 and no headers: it ends on its header count, 0, one byte
        # before its end. Others (headers) go through the exact decoder below, one by one.
        plain = (p + 1 == rec_end) & (((words[p] | attributes) & 0xFF) == 0)
    except (IndexError, CorruptRecordError):  # a long varint or a length pointing far past the data
        return None
    all_plain = plain.all()
    if not all_plain:
        odd = np.flatnonzero(~plain).tolist()
        if len(odd) * 4 > n:
            return None  # mostly records with headers: one exact walk is cheaper
        keys, stamps = [], []
        for i in odd:
            try:
                ((_o, t, key, _v, _h),) = decode_record_tuples(
                    data, 1, 0, 0, None, int(starts[i]), int(rec_end[i])
                )
            except CorruptRecordError:
                return None  # the exact walk says what is wrong
            if attributes[i] & 0xFF:
                return None
            keys.append(key is None)
            stamps.append(t)
    first_null = first_late = -1
    if kl is not None:
        missing = kl == -1
        if not all_plain:
            missing[odd] = keys
        first_null = _first(missing)
    if tsd is not None and ts_deltas is not None:
        if not all_plain:
            tsd[odd] = stamps
        first_late = _first((tsd < ts_deltas[0]) | (tsd > ts_deltas[1]))
    return first_null, first_late


def _check_exact(data, n: int, null_keys: bool, ts_deltas: tuple[int, int] | None = None) -> tuple[int, int]:
    """One record at a time with the exact decoder: the reference ``_check_vectorised`` agrees with."""
    size = len(data)
    pos = 0
    first_null = first_late = -1
    for i in range(n):
        if pos >= size:
            raise _bad(i, n, f"the records section ends after {i} records")
        try:
            length, body = decode_varint(data, pos)
        except CorruptRecordError as e:
            raise _bad(i, n, f"unreadable length: {e.message}") from None
        end = body + length
        if length < MIN_RECORD_SIZE - 1 or end > size:
            raise _bad(i, n, f"declares {length} bytes but {size - body} are left in the records section")
        try:
            ((od, tsd, key, _v, _h),) = decode_record_tuples(data, 1, 0, 0, None, pos, end)
        except CorruptRecordError as e:
            raise _bad(i, n, e.message) from None
        if data[body]:
            # Unused in format v2 and 0 from every producer; kafka-python reads this byte as a varint,
            # so any other value could make the batch unreadable there.
            raise _bad(i, n, f"has attributes {data[body]}; record attributes are unused and must be 0")
        if od != i:
            raise _bad(
                i, n, f"has offset delta {od}; the records of a batch take deltas 0 to {n - 1} in order"
            )
        if null_keys and key is None and first_null < 0:
            first_null = i
        if ts_deltas is not None and first_late < 0 and not ts_deltas[0] <= tsd <= ts_deltas[1]:
            first_late = i
        pos = end
    if pos != size:
        raise InvalidRecordError(f"{size - pos} bytes follow the last of the batch's {n} records")
    return first_null, first_late


def _bad(i: int, n: int, what: str) -> InvalidRecordError:
    err = InvalidRecordError(f"record {i} of {n}: {what}")
    err.record_index = i  # type: ignore[attr-defined]
    return err


__all__ = ["MIN_RECORD_SIZE", "check_records"]
