"""The Spark decoder's fast paths give what the plain code gives, or step aside for it:

- ``record_columns.decode_sections``, the compiled pass over records sections: the plain decoder's
  fields for any records (null keys and values, headers, long varints), and ``CorruptRecordError`` for a
  section its records do not fill, or a record its fields do not fit;
- ``scan_plain``, a fetch's batch loop for all batches at once: the loop's rows and next offset, or None
  (the loop then runs and raises what it raises)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkalite.errors import CorruptRecordError  # noqa: E402
from kafkalite.records import (  # noqa: E402
    Compression,
    build_batch,
    build_control_batch,
    decode_batch_tuples,
    iter_batches,
    validate_batch,
)
from kafkalite.spark.arrow_records import (  # noqa: E402
    batches_to_arrow,
    scan_plain,
    scanned_to_arrow,
)
from kafkalite.spark.record_columns import decode_sections  # noqa: E402

T0 = 1_700_000_000_000
BATCH_HEADER_SIZE = 61


def _sections(batches: list[list[tuple]]) -> tuple[bytes, bytes, np.ndarray, np.ndarray]:
    """(the batches' bytes, their records sections joined, section bounds, record counts)."""
    data = b""
    base = 0
    for recs in batches:
        data += build_batch(recs, timestamp=T0 + base, base_offset=base)
        base += len(recs)
    sections = [data[pos + BATCH_HEADER_SIZE : pos + h.batch_length + 12] for pos, h in iter_batches(data)]
    bounds = np.cumsum([0, *(len(s) for s in sections)])
    return data, b"".join(sections), bounds, np.array([len(r) for r in batches], np.int64)


header = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8)))
record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(header, max_size=2),
)


def _plain(data: bytes) -> list[tuple]:
    return [r for pos, _ in iter_batches(data) for r in decode_batch_tuples(data, pos)[1]]


@given(
    batches=st.lists(st.lists(record, min_size=1, max_size=12), min_size=1, max_size=40),
    big=st.one_of(st.none(), st.integers(0, 39)),
)
@settings(max_examples=60, deadline=None)
def test_compiled_pass_gives_the_plain_decoders_fields(batches, big):
    if big is not None and big < len(batches):  # one record over 8 KiB: 3-byte length varints
        batches[big] = [*batches[big], (b"k", b"v" * 9000, [])]
    data, blob, bounds, counts = _sections(batches)
    c = decode_sections(blob, bounds[:-1], bounds[1:], counts, "t-0")
    want = _plain(data)
    keys = [None if n < 0 else bytes(c.key_data[c.key_offsets[i] : c.key_offsets[i + 1]])
            for i, n in enumerate(c.key_length.tolist())]  # fmt: skip
    values = [None if n < 0 else bytes(c.value_data[c.value_offsets[i] : c.value_offsets[i + 1]])
              for i, n in enumerate(c.value_length.tolist())]  # fmt: skip
    assert keys == [r[2] for r in want]
    assert values == [r[3] for r in want]
    assert c.headers_count.tolist() == [len(r[4]) for r in want]
    rows = batches_to_arrow(data, list(iter_batches(data)), "t", 0, 0, 10**9, include_headers=True)
    assert rows.column("value").to_pylist() == [r[3] for r in want]
    assert rows.column("key").to_pylist() == [r[2] for r in want]
    assert rows.column("offset").to_pylist() == [r[0] for r in want]
    assert rows.column("timestamp").cast("int64").to_pylist() == [r[1] * 1000 for r in want]
    got_headers = rows.column("headers").to_pylist()
    assert got_headers == [[{"key": h.key, "value": h.value} for h in r[4]] or None for r in want]


def test_compiled_pass_names_a_section_its_records_do_not_fill():
    batches = [[(b"k%d" % i, b"v" * (i * 7 % 50), []) for i in range(1 + b % 5)] for b in range(30)]
    data, blob, bounds, counts = _sections(batches)
    more = counts.copy()
    more[3] += 1  # one batch claims a record more than its section holds
    with pytest.raises(CorruptRecordError, match="t-0: .*record"):
        decode_sections(blob, bounds[:-1], bounds[1:], more, "t-0")
    fewer = counts.copy()
    fewer[5] -= 1  # or one fewer: its last record is left over
    with pytest.raises(CorruptRecordError, match="record lengths do not add up"):
        decode_sections(blob, bounds[:-1], bounds[1:], fewer, "t-0")


@given(batches=st.lists(st.lists(record, min_size=1, max_size=6), min_size=1, max_size=6), data=st.data())
@settings(max_examples=80, deadline=None)
def test_compiled_pass_rejects_or_decodes_any_corrupted_byte(batches, data):
    """A flipped byte anywhere in a section either still decodes (a byte of a key or value) or raises
    CorruptRecordError, never anything else, and never reads past the section."""
    _, blob, bounds, counts = _sections(batches)
    at = data.draw(st.integers(0, len(blob) - 1))
    bad = bytearray(blob)
    bad[at] ^= data.draw(st.integers(1, 255))
    try:
        c = decode_sections(bytes(bad), bounds[:-1], bounds[1:], counts, "t-0")
    except CorruptRecordError:
        return
    assert len(c.offset) == int(counts.sum())
    assert (c.record_end <= bounds[1:].max()).all()


def _loop(data: bytes, offset: int, end: int) -> tuple[list, int]:
    """The per-batch loop of ``source.read_range``: (batches to decode, the offset after the fetch)."""
    picked = []
    for pos, h in iter_batches(data):
        if h.base_offset >= end:
            return picked, end
        nxt = h.base_offset + h.last_offset_delta + 1
        if nxt <= offset:
            continue
        validate_batch(data, pos)
        if not h.attributes & 0x20:
            picked.append((pos, h))
        offset = nxt
    return picked, offset


fetch_strategy = st.lists(
    st.tuples(
        st.sampled_from(["data", "data", "data", "gzip", "control"]),
        st.integers(1, 30),  # records
        st.integers(0, 3),  # offsets left out before the batch (compaction, a marker)
    ),
    min_size=1,
    max_size=40,
)


@given(batches=fetch_strategy, cut=st.floats(0, 1), stop=st.floats(0, 1.2), torn=st.integers(0, 70))
@settings(max_examples=80, deadline=None)
def test_scan_gives_the_loops_rows_and_offset(batches, cut, stop, torn):
    data, base = b"", 0
    for kind, n, gap in batches:
        base += gap
        if kind == "control":
            data += build_control_batch(True, 7, 0, base_offset=base, timestamp=T0)
            n = 1
        else:
            recs = [(b"k%d" % (base + i), b"v" * ((base + i) * 7 % 60)) for i in range(n)]
            codec = Compression.GZIP if kind == "gzip" else Compression.NONE
            data += build_batch(recs, timestamp=T0 + base, base_offset=base, compression=codec)
        base += n
    data += data[:torn]  # a torn tail: the start of a batch, as a fetch may end
    offset, end = int(base * cut), max(1, int(base * stop))
    picked, want_offset = _loop(data, offset, end)
    scan = scan_plain(data, offset, end)
    if scan is None:
        assert not picked and want_offset in (offset, end), "it steps aside only when the loop reads nothing"
        return
    assert scan.offset == want_offset
    got = scanned_to_arrow(data, scan, "t", 0, offset, end)
    want = batches_to_arrow(data, picked, "t", 0, offset, end)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.equals(want)


def test_scan_steps_aside_for_a_corrupt_batch():
    data = b"".join(build_batch([(b"k", b"v%d" % i)], timestamp=T0, base_offset=i) for i in range(30))
    bad = bytearray(data)
    pos = [p for p, _ in iter_batches(data)][15]
    bad[pos + BATCH_HEADER_SIZE + 3] ^= 0xFF  # a byte of batch 15's records: its CRC no longer matches
    assert scan_plain(data, 0, 30) is not None
    assert scan_plain(bytes(bad), 0, 30) is None
    with pytest.raises(CorruptRecordError):
        _loop(bytes(bad), 0, 30)
