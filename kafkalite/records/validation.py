"""Checking a records section record by record, as a Kafka leader does before it appends a batch.

Kafka's ``LogValidator`` iterates every record of a produced batch, and ``DefaultRecord.readFrom``
refuses one whose length varint, fields, key, value or headers do not fit exactly in the bytes it
declares; the batch must then end right after its last record. Here the same, plus what kafkalite's
readers need to serve the batch: offset deltas 0, 1, ..., n-1 (a consumer that trusts the deltas would
otherwise skip or repeat records), UTF-8 header keys and record attributes 0 (unused in v2).

``check_records`` is cheap for the common batch (a producer's records of one or a few sizes, no
headers): a handful of numpy calls for all records at once, with ``vector``'s tables for the varints,
and no Python object per record. Anything else, or anything that does not pass, goes through the exact
decoder one record at a time, which also says which record is wrong and how.
"""

from __future__ import annotations

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
    data, count: int, *, null_keys: bool = False, ts_deltas: tuple[int, int] | None = None
) -> tuple[int, int]:
    """Check that ``data`` holds exactly ``count`` well-formed records with offset deltas 0..count-1,
    raising ``InvalidRecordError`` that names the first bad record.

    Returns ``(first record without a key, first record whose timestamp delta is outside ts_deltas)``,
    -1 for none; the first is looked for only with ``null_keys`` (a compacted topic), the second only
    with ``ts_deltas`` (inclusive bounds, message.timestamp.before/after.max.ms).
    """
    if 0 < count <= _VECTOR_MAX_RECORDS and count * MIN_RECORD_SIZE <= len(data):
        found = _check_vectorised(data, count, null_keys, ts_deltas)
        if found is not None:
            return found
    return _check_exact(data, count, null_keys, ts_deltas)


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
