"""Vectorised (numpy) decoding of records sections: many records per numpy call instead of a Python loop.

Its user is the consumer's record decoder (``decode_sections``, which builds ``Record`` objects; the
Spark source has its own compiled pass, ``kafkalite.spark.record_columns``). Python still has to find
where each record starts, since that needs every earlier record's length; ``decode_sections`` guesses
first that all records of a section have one size (what a producer with fixed-size values sends) and
checks the guess with the very comparison that validates record lengths, so the guess costs nothing.

``decode_sections`` is exact or nothing: it handles the common shape (1- or 2-byte varints, no headers
except records decoded one by one with the exact decoder) and returns None for anything else, so the
caller reruns the exact decoder, which gives the same records or raises the same error.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from kafkalite.errors import CorruptRecordError
from kafkalite.records.record import Record, decode_record_tuples
from kafkalite.records.varint import decode_varint

PAD = b"\x00" * 16  # lets the vectorised varint decoders look ahead without bounds checks


# Above this many records per batch (relative to the number of batches) stepping all batches together
# costs more numpy calls than the plain loop costs Python steps.
VECTOR_WALK_MIN_BATCHES = 24


def walk_lockstep(words: np.ndarray, bounds: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Start position of every record, stepping through all batches at once: step ``i`` moves every
    batch from its record ``i`` to record ``i + 1`` with one lookup in the byte-pair table (``words``:
    the byte pair at every position, as ``decode_sections`` builds it). None when the plain loop is the
    better choice (few large batches) or a record length is not a 1- or 2-byte varint above 0 (records
    over 8 KiB, or corrupt ones: ``walk_python`` then says what is wrong)."""
    nsec = len(counts)
    most = int(counts.max())
    if nsec < VECTOR_WALK_MIN_BATCHES or most * VECTOR_WALK_MIN_BATCHES > int(counts.sum()) * 4:
        return None
    record_step = varint_tables()[3]
    pos = bounds[:-1].astype(np.int64)
    out = np.empty((most, nsec), np.int64)
    # Batches with fewer records stop moving once done; a length the table cannot read sends a position
    # to the end of the padding, and the check after the loop sees it.
    steps = None if (counts == most).all() else np.arange(most)[:, None] < counts[None, :]
    limit = len(words) - 1
    for i in range(most):
        out[i] = pos
        pos = pos + record_step[words[pos]]
        if steps is not None:
            pos = np.where(steps[i], pos, out[i])
        np.minimum(pos, limit, out=pos)
    starts = out.T.reshape(-1) if steps is None else out.T[steps.T]
    if (record_step[words[starts]] >= _FAR).any():
        return None
    return starts


def walk_python(blob, bounds: Sequence[int], counts: Sequence[int], name: str) -> np.ndarray:
    """Start position of every record, one Python step per record; section ``i`` spans
    ``bounds[i]:bounds[i + 1]`` and must hold exactly ``counts[i]`` records."""
    starts: list[int] = []
    add = starts.append
    for sec, count in enumerate(counts):
        pos = bounds[sec]
        for _ in range(count):
            add(pos)
            b = blob[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
            elif blob[pos + 1] < 0x80:
                pos += 2 + (((b & 0x7F) | (blob[pos + 1] << 7)) >> 1)
            else:
                ln, pos = decode_varint(blob, pos)
                pos += ln
        if pos != bounds[sec + 1]:
            raise CorruptRecordError(
                f"{name}: a records section of {bounds[sec + 1] - bounds[sec]} bytes does not hold "
                f"exactly {count} records"
            )
    return np.array(starts, np.int64)


# Every little-endian byte pair -> facts about a varint of at most 2 bytes starting with it, one row per
# pair: its zig-zag value, its size, its size plus the bytes it announces as a key or value length (-1:
# none) and as a record length, and its size plus one (a record length is followed by the attributes
# byte). A varint needing 3 bytes or more, or an impossible length, gets _FAR instead: every position
# computed from it lands far past the data, where no record can end, so the fast path gives up.
_FAR = 1 << 40
_TABLES: tuple[np.ndarray, ...] | None = None


def byte_pairs(blob) -> np.ndarray:
    """The little-endian byte pair at every position of ``blob`` (zero padding after its end), what the
    tables below are indexed with."""
    padded = bytes(blob) + PAD
    return np.ndarray((len(padded) - 1,), "<u2", padded, 0, (1,))


def varint_tables() -> tuple[np.ndarray, ...]:
    """The five int64 arrays above (value, size, step, record step, size + 1), built on first use."""
    global _TABLES
    if _TABLES is None:
        w = np.arange(1 << 16, dtype=np.int64)
        b0, b1 = w & 0xFF, w >> 8
        two = b0 >= 0x80
        u = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
        val = (u >> 1) ^ -(u & 1)
        size = np.where(two, np.where(b1 >= 0x80, _FAR, 2), 1)
        step = np.where(val >= -1, size + np.maximum(val, 0), _FAR)
        record_step = np.where(val > 0, size + val, _FAR)
        _TABLES = (val, size, step, record_step, size + 1)
    return _TABLES


# Offsets and timestamps are added in int64: bases beyond this leave no room for a 2-byte delta.
_SAFE_BASE = 1 << 62
# Frozen dataclass __init__ goes through object.__setattr__ per field; mapping the slot setters over
# whole lists builds the same objects without a Python-level loop.
_new = object.__new__
_SETTERS = tuple(getattr(Record, f).__set__ for f in ("offset", "timestamp", "key", "value", "headers"))


def build_records(offsets, timestamps, keys, values, headers) -> list[Record]:
    """``Record`` objects from five equally long iterables (already validated field values)."""
    out = list(map(_new, repeat(Record, len(offsets))))
    drain = deque(maxlen=0).extend
    for setter, column in zip(_SETTERS, (offsets, timestamps, keys, values, headers), strict=True):
        drain(map(setter, out, column))
    return out


def _cut(data, starts: np.ndarray, lengths: np.ndarray) -> list:
    """``data[start:start+length]`` per record, None where the length is -1."""
    first = int(lengths[0])
    if (lengths == first).all():
        if first < 0:
            return [None] * len(starts)
        return [data[a : a + first] for a in starts.tolist()]
    s = starts.tolist()
    if (lengths >= 0).all():
        return [data[a:b] for a, b in zip(s, (starts + lengths).tolist(), strict=True)]
    return [None if n < 0 else data[a : a + n] for a, n in zip(s, lengths.tolist(), strict=True)]


def _record_size(blob, pos: int) -> int:
    """Size of the record at ``pos`` (its length varint included) when that varint has 1 or 2 bytes;
    0 otherwise."""
    b = blob[pos]
    if b < 0x80:
        u, size = b, 1
    elif blob[pos + 1] < 0x80:
        u, size = (b & 0x7F) | (blob[pos + 1] << 7), 2
    else:
        return 0
    length = (u >> 1) ^ -(u & 1)
    return size + length if length > 0 else 0


# A producer's batch: records of one size except that the offset delta takes a second byte from
# record 64 on (zig-zag 128) to record 8191.
_OFFSET_DELTA_GROWS = 64


def _guess_starts(blob, lo: int, hi: int, n: int) -> np.ndarray | None:
    """Record starts in ``lo:hi`` if the ``n`` records are a producer's fixed-size ones (see above); the
    caller's length check proves or refutes the guess. None when the sizes cannot add up."""
    first = _record_size(blob, lo)
    grown = max(n - _OFFSET_DELTA_GROWS, 0)
    if not first or n > 8192 or n * first + grown != hi - lo:
        return None
    starts = np.arange(lo, lo + n * first, first, dtype=np.int64)
    if grown:
        starts[_OFFSET_DELTA_GROWS + 1 :] += np.arange(1, grown, dtype=np.int64)
    return starts


# Runs of equally sized records a section may be cut into before the plain walk takes over.
_MAX_RUNS = 8


def _run_starts(blob, words: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray | None:
    """Start of each of the ``n`` records in ``lo:hi``; None when they do not fill it exactly.

    Records come in runs of one size. Each run is guessed from its first record and checked at once: a
    start is right when the record before it is right and has the guessed size, so the run ends at the
    first record of another size, which begins the next run. After ``_MAX_RUNS`` runs, a plain walk.
    """
    record_step = varint_tables()[3]
    out = []
    pos = lo
    for _ in range(_MAX_RUNS):
        stride = _record_size(blob, pos)
        k = min(n, (hi - pos) // stride) if stride else 0
        if k == 0:
            return None
        run = np.arange(pos, pos + k * stride, stride, dtype=np.int64)
        same = record_step[words[run]] == stride
        m = k if same.all() else int(same.argmin())
        out.append(run[:m] if m < k else run)
        pos += m * stride
        n -= m
        if n == 0:
            break
    else:
        out.append(walk_python(blob, [pos, hi], [n], ""))
        pos = hi
    if pos != hi:
        return None
    return np.concatenate(out) if len(out) > 1 else out[0]


def record_fields(words: np.ndarray, starts: np.ndarray) -> tuple:
    """Every record's end, varints and field positions, a few numpy calls per field for all records;
    the last item is where each record's header count sits. IndexError after an odd field."""
    val_t, size_t, step_t, record_step_t, size_and_attributes_t = varint_tables()
    w = words[starts]
    rec_end = starts + record_step_t[w]
    p = starts + size_and_attributes_t[w]
    w = words[p]
    tsd = val_t[w]
    p += size_t[w]
    w = words[p]
    od = val_t[w]
    p += size_t[w]
    w = words[p]
    kl = val_t[w]
    key_start = p + size_t[w]
    p += step_t[w]
    w = words[p]
    vl = val_t[w]
    value_start = p + size_t[w]
    p += step_t[w]
    return rec_end, tsd, od, kl, key_start, vl, value_start, p


def _tiles(starts: np.ndarray, rec_end: np.ndarray, counts: Sequence[int], bounds: Sequence[int]) -> bool:
    """True when each record ends where the next starts, and each section's last where it ends."""
    if len(counts) == 1:
        return rec_end[-1] == bounds[1] and (len(starts) == 1 or (rec_end[:-1] == starts[1:]).all())
    nxt = np.empty_like(rec_end)
    nxt[:-1] = starts[1:]
    e = 0
    for n, hi in zip(counts, bounds[1:], strict=True):
        e += n
        if n:
            nxt[e - 1] = hi
    return bool((rec_end == nxt).all())


def _locate(
    blob, words: np.ndarray, counts: Sequence[int], bounds: Sequence[int], guess: bool
) -> tuple | None:
    """Record starts and fields of every section, or None if they do not tile the sections."""
    parts = []
    for i, n in enumerate(counts):
        lo, hi = bounds[i], bounds[i + 1]
        if n <= 0:
            if n < 0 or lo != hi:
                return None
            continue
        starts = _guess_starts(blob, lo, hi, n) if guess else None
        if starts is None:
            if guess:
                return None
            starts = _run_starts(blob, words, lo, hi, n)
            if starts is None:
                return None
        parts.append(starts)
    if not parts:
        return ()
    starts = np.concatenate(parts) if len(parts) > 1 else parts[0]
    fields = record_fields(words, starts)
    if not _tiles(starts, fields[0], counts, bounds):
        return None
    return starts, *fields


def decode_sections(
    sections: Sequence,
    counts: Sequence[int],
    base_offsets: Sequence[int],
    base_timestamps: Sequence[int],
    fixed_timestamps: Sequence[int | None],
    min_offset: int | None = None,
) -> list[Record] | None:
    """Records of several records sections, in order, as ``decode_records`` would return them for each
    (only those with ``offset >= min_offset`` when given); None whenever that is not certain."""
    nsec = len(sections)
    if nsec == 1:
        blob = sections[0]  # slicing the caller's object keeps the exact decoder's result types
        bounds = [0, len(blob)]
    else:
        blob = b"".join(sections)
        bounds = [0]
        for sec in sections:
            bounds.append(bounds[-1] + len(sec))
    for b in (*base_offsets, *base_timestamps):
        if not -_SAFE_BASE < b < _SAFE_BASE:
            return None
    words = byte_pairs(blob)
    try:
        located = _locate(blob, words, counts, bounds, True) or _locate(blob, words, counts, bounds, False)
        if located is None or located == ():
            return None if located is None else []
        starts, rec_end, tsd, od, kl, key_start, vl, value_start, p = located
        # Plain record: its fields end on a header count of 0 right at its end.
        plain = (p + 1 == rec_end) & (words[p] & 0xFF == 0)
    except (CorruptRecordError, IndexError):  # long varints, or corrupt lengths pointing past the data
        return None

    if nsec == 1:
        offsets = od + base_offsets[0]
        fixed = fixed_timestamps[0]
        stamps = None if fixed is not None else tsd + base_timestamps[0]
    else:
        reps = np.asarray(counts, np.int64)
        offsets = od + np.repeat(np.asarray(base_offsets, np.int64), reps)
        use_delta = [f is None for f in fixed_timestamps]
        bases = [b if f is None else f for b, f in zip(base_timestamps, fixed_timestamps, strict=True)]
        stamps = np.repeat(np.asarray(bases, np.int64), reps)
        if all(use_delta):
            stamps += tsd
        elif any(use_delta):
            stamps += np.where(np.repeat(np.asarray(use_delta, np.bool_), reps), tsd, 0)
    special = {}
    if not plain.all():
        special = _decode_odd(blob, starts, rec_end, plain, counts, base_offsets,
                              base_timestamps, fixed_timestamps)  # fmt: skip
        if special is None:
            return None
        if stamps is None:
            stamps = np.full(len(starts), fixed, np.int64)
        for i, row in special.items():
            offsets[i], stamps[i] = row[0], row[1]

    if min_offset is not None and not (keep := offsets >= min_offset).all():
        idx = np.flatnonzero(keep)
        if not len(idx):
            return []
        offsets, key_start, kl, value_start, vl = (
            offsets[idx], key_start[idx], kl[idx], value_start[idx], vl[idx]
        )  # fmt: skip
        if stamps is not None:
            stamps = stamps[idx]
        if special:
            new_pos = (np.cumsum(keep) - 1).tolist()
            special = {new_pos[i]: row for i, row in special.items() if keep[i]}
    total = len(offsets)
    keys = _cut(blob, key_start, kl)
    values = _cut(blob, value_start, vl)
    stamps_l = repeat(fixed, total) if stamps is None else stamps.tolist()
    headers: list | repeat = repeat((), total)
    if special:
        headers = [()] * total
        for i, (_o, _t, k, v, h) in special.items():
            keys[i], values[i], headers[i] = k, v, h
    return build_records(offsets.tolist(), stamps_l, keys, values, headers)


def _decode_odd(
    blob, starts, rec_end, plain, counts, base_offsets, base_timestamps, fixed_timestamps
) -> dict[int, tuple] | None:
    """The records that are not plain (headers, anything odd) through the exact decoder, one by one
    within their known bounds, by index; None if any is corrupt or they are too many."""
    odd = np.flatnonzero(~plain)
    if len(odd) * 4 > len(starts):  # mostly odd: the exact decoder over the whole section is cheaper
        return None
    sec_of = np.repeat(np.arange(len(counts)), np.asarray(counts, np.int64))
    out = {}
    for i in odd.tolist():
        s = int(sec_of[i])
        try:
            (out[i],) = decode_record_tuples(
                blob, 1, base_offsets[s], base_timestamps[s], fixed_timestamps[s],
                int(starts[i]), int(rec_end[i]),
            )  # fmt: skip
        except CorruptRecordError:
            return None
    return out


__all__ = [
    "PAD",
    "build_records",
    "byte_pairs",
    "decode_sections",
    "record_fields",
    "varint_tables",
    "walk_lockstep",
    "walk_python",
]


# Below this many records numpy's fixed cost per call outweighs what it saves per record.
_VECTOR_MIN_RECORDS = 16


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
    pos: int = 0,
    end: int | None = None,
) -> list[Record]:
    """Like ``decode_record_tuples`` but returns ``Record`` objects, through ``decode_sections`` when there are
    enough records for numpy to pay."""
    if count >= _VECTOR_MIN_RECORDS:
        if end is None:
            end = len(data)
        section = data if pos == 0 and end == len(data) else data[pos:end]
        fast = decode_sections([section], [count], [base_offset], [base_timestamp], [fixed_timestamp])
        if fast is not None:
            return fast
    out = []
    append = out.append
    _set_offset, _set_timestamp, _set_key, _set_value, _set_headers = _SETTERS
    for o, t, k, v, h in decode_record_tuples(
        data, count, base_offset, base_timestamp, fixed_timestamp, pos, end
    ):
        r = _new(Record)
        _set_offset(r, o)
        _set_timestamp(r, t)
        _set_key(r, k)
        _set_value(r, v)
        _set_headers(r, h)
        append(r)
    return out
