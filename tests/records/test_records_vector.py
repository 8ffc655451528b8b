"""The vectorised record decoder (kafkalite.records.vector) against the exact one: same records for
any batch, the same CorruptRecordError (message included) for any corrupted records section."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.errors import CorruptRecordError
from kafkalite.records import (
    Compression,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    decode_batches,
    iter_batches,
)
from kafkalite.records.batch import BATCH_HEADER_SIZE, _records_section
from kafkalite.records.record import decode_record_tuples
from kafkalite.records.vector import decode_records, decode_sections

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = 1_700_000_000_000


def exact(data, count, base_offset, base_ts, fixed=None) -> list[Record]:
    return [Record(*t) for t in decode_record_tuples(data, count, base_offset, base_ts, fixed)]


def blob(size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=size, max_size=size)


small_sizes = st.sampled_from([0, 1, 7, 60, 100, 200])
any_sizes = small_sizes | st.sampled_from([8190, 8191, 8192, 9000])
headers = st.lists(st.builds(Header, st.text(max_size=5), st.none() | st.binary(max_size=9)), max_size=2)
# Mostly plain records (the fast path), some with headers (decoded one by one exactly).
no_headers = st.one_of(*[st.just([])] * 12, headers)


def records_of(sizes: st.SearchStrategy[int]) -> st.SearchStrategy[tuple]:
    maybe_bytes = st.none() | sizes.flatmap(blob)
    return st.tuples(maybe_bytes, maybe_bytes, no_headers)


deltas = st.sampled_from([0, 1, -1, 63, 64, 8191, 8192, -8193, 2**40, -(2**40)])


@st.composite
def batches(draw):
    """A batch of 16 to 150 records (the fast path's range) with uniform or mixed records."""
    n = draw(st.integers(min_value=16, max_value=150))
    uniform = draw(st.booleans())
    if uniform:  # a producer's batch: one record shape repeated, only offsets differ
        key, value = draw(st.none() | st.binary(max_size=8)), draw(st.none() | st.binary(max_size=120))
        recs = [(key, value)] * n
    else:
        big = draw(st.booleans())  # values over 8 KiB: their record lengths take 3 bytes
        recs = draw(st.lists(records_of(any_sizes if big else small_sizes), min_size=n, max_size=n))
    odd_times = draw(st.integers(0, 2))  # none, a few small deltas, or any deltas (large, negative)
    ts = [T0] * n
    for i in draw(st.lists(st.integers(0, n - 1), max_size=4 if odd_times else 0)):
        ts[i] = T0 + draw(deltas if odd_times == 2 else st.integers(-8000, 8000))
    return build_batch(
        recs,
        base_offset=draw(st.sampled_from([0, 5, 2**40, 2**62 + 1])),
        timestamp=ts,
        compression=draw(st.sampled_from(list(Compression))),
        timestamp_type=draw(st.sampled_from(list(TimestampType))),
        max_timestamp=draw(st.none() | st.just(T0 + 7)),
    )


def _exact_batch(b: bytes) -> list[Record]:
    h = RecordBatch.decode(b, verify_crc=True).header
    data = _records_section(b, 0, h)
    fixed = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    return exact(data, h.records_count, h.base_offset, h.base_timestamp, fixed)


@SETTINGS
@given(b=batches())
def test_fast_decode_matches_exact(b):
    want = _exact_batch(b)
    got = RecordBatch.decode(b).records
    assert got == want
    assert [type(r.key) for r in got] == [type(r.key) for r in want]


@SETTINGS
@given(bs=st.lists(batches(), min_size=1, max_size=4), cut=st.integers(min_value=0, max_value=400))
def test_many_batches_at_once_match_one_by_one(bs, cut):
    buf = b"".join(bs)
    positions = [p for p, _ in iter_batches(buf)]
    want = [r for b in bs for r in _exact_batch(b)]
    assert decode_batches(buf, positions) == want
    if want:
        floor = want[min(cut, len(want) - 1)].offset
        assert decode_batches(buf, positions, min_offset=floor) == [r for r in want if r.offset >= floor]


def test_producer_batch_takes_the_fast_path():
    value = bytes(range(100))
    b = build_batch([(None, value)] * 148, timestamp=T0, base_offset=1000)
    data = b[BATCH_HEADER_SIZE:]
    fast = decode_sections([data], [148], [1000], [T0], [None])
    assert fast is not None and fast == exact(data, 148, 1000, T0)
    keyed = build_batch([(b"k%d" % i, value * (i % 3)) for i in range(40)], timestamp=T0)
    assert decode_sections([keyed[BATCH_HEADER_SIZE:]], [40], [0], [T0], [None]) is not None
    with_headers = build_batch(
        [(None, value, [Header("h", b"v")] if i == 3 else []) for i in range(40)], timestamp=T0
    )
    got = decode_sections([with_headers[BATCH_HEADER_SIZE:]], [40], [0], [T0], [None])
    assert got is not None and got[3].headers == (Header("h", b"v"),) and got[4].headers == ()


def _outcome(fn):
    try:
        return fn()
    except CorruptRecordError as e:
        return ("error", str(e))
    except IndexError as e:  # the exact decoder's own behaviour on some inputs, kept as is
        return ("index", str(e))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    b=batches(),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=3),
    chop=st.integers(min_value=0, max_value=3),
    count_change=st.sampled_from([0, 0, 0, 1, -1]),
)
def test_corrupted_sections_give_the_same_outcome(b, edits, chop, count_change):
    h = RecordBatch.decode(b).header
    data = bytearray(_records_section(b, 0, h))
    for where, byte in edits:
        data[where % len(data)] = byte
    data = bytes(data[: len(data) - chop])
    n = h.records_count + count_change
    want = _outcome(lambda: exact(data, n, h.base_offset, h.base_timestamp))
    got = _outcome(lambda: decode_records(data, n, h.base_offset, h.base_timestamp))
    assert got == want
    many = _outcome(lambda: decode_sections([data, data], [n, n], [0, 0], [T0, T0], [None, None]))
    twice = _outcome(lambda: exact(data, n, 0, T0) * 2)
    assert many is None or many == twice


# Lengths are what the walk reads; the bytes themselves are cheap filler.
small = st.none() | small_sizes.map(lambda n: b"\x01" * n)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(
        st.lists(st.tuples(small, small, no_headers), min_size=1, max_size=8), min_size=1, max_size=4
    ),
    copies=st.integers(24, 30),
    damage=st.none() | st.tuples(st.integers(min_value=0), st.integers(0, 255)),
)
def test_lockstep_walk_finds_the_plain_walks_starts(shapes, copies, damage):
    """The table-driven walk over many batches at once returns the plain walk's record starts; on
    damaged data it returns those or None (the plain walk then names the damage)."""
    sections = [build_batch(shapes[i % len(shapes)]) for i in range(copies)]  # >= 24 batches
    got, want, counts = _walks(sections, damage)
    if damage is None and max(counts) * 6 <= sum(counts):  # balanced: the walk does not defer
        assert got is not None and got.tolist() == want
    elif got is not None and not isinstance(want, tuple):
        assert got.tolist() == want


def test_lockstep_walk_leaves_records_over_8_kib_to_the_plain_walk():
    sections = [build_batch([(b"k", b"\x01" * 100)] * 4) for _ in range(30)]
    got, want, _ = _walks(sections, None)
    assert got is not None and got.tolist() == want
    sections[7] = build_batch([(b"k", b"\x01" * 100), (b"k", b"\x01" * 9000), (b"k", b"")])
    got, want, _ = _walks(sections, None)
    assert got is None and len(want) == 4 * 29 + 3


def _walks(sections, damage):
    """(lockstep walk, plain walk or its error, counts) over the records sections of ``sections``."""
    import numpy as np

    from kafkalite.records.vector import byte_pairs, walk_lockstep, walk_python

    headers = [RecordBatch.decode(b).header for b in sections]
    bodies = [_records_section(b, 0, h) for b, h in zip(sections, headers, strict=True)]
    counts = [h.records_count for h in headers]
    data = bytearray(b"".join(bodies))
    if damage is not None:
        data[damage[0] % len(data)] = damage[1]
    data = bytes(data)
    bounds = np.cumsum([0, *(len(x) for x in bodies)])
    got = walk_lockstep(byte_pairs(data), bounds, np.array(counts, np.int64))
    return got, _outcome(lambda: walk_python(data, bounds.tolist(), counts, "t-0").tolist()), counts
