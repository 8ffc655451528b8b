"""The Spark decoder's lockstep walk of record starts: the same starts as the plain walk, or None
(the plain walk then decodes or rejects), for batches of unequal record counts and sizes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkalite.errors import CorruptRecordError  # noqa: E402
from kafkalite.records import build_batch, decode_batch_tuples, iter_batches  # noqa: E402
from kafkalite.records.vector import byte_pairs, walk_python  # noqa: E402
from kafkalite.spark.arrow_records import _walk_lockstep, batches_to_arrow  # noqa: E402

T0 = 1_700_000_000_000
BATCH_HEADER_SIZE = 61


def _sections(batches: list[list[tuple]]) -> tuple[bytes, bytes, np.ndarray, np.ndarray]:
    """(the batches' bytes, their records sections joined, section bounds, record counts)."""
    data = b""
    base = 0
    for recs in batches:
        data += build_batch(recs, timestamp=T0, base_offset=base)
        base += len(recs)
    sections = [data[pos + BATCH_HEADER_SIZE : pos + h.batch_length + 12] for pos, h in iter_batches(data)]
    bounds = np.cumsum([0, *(len(s) for s in sections)])
    return data, b"".join(sections), bounds, np.array([len(r) for r in batches], np.int64)


record = st.tuples(st.one_of(st.none(), st.binary(max_size=12)), st.binary(max_size=300))


@given(
    batches=st.lists(st.lists(record, min_size=1, max_size=12), min_size=24, max_size=60),
    big=st.one_of(st.none(), st.integers(0, 59)),
)
@settings(max_examples=40, deadline=None)
def test_lockstep_walk_finds_the_plain_walks_starts(batches, big):
    if big is not None and big < len(batches):  # one record over 8 KiB: a 3-byte length varint
        batches[big] = [*batches[big], (b"k", b"v" * 9000)]
    data, blob, bounds, counts = _sections(batches)
    want = walk_python(blob, bounds.tolist(), counts.tolist(), "t-0")
    got = _walk_lockstep(byte_pairs(blob), bounds, counts)
    if got is None:
        assert big is not None and big < len(batches), "only the long record may send it to the plain walk"
    else:
        assert got.tolist() == want.tolist()
    rows = batches_to_arrow(data, list(iter_batches(data)), "t", 0, 0, 10**9)
    expected = [r for pos, _ in iter_batches(data) for r in decode_batch_tuples(data, pos)[1]]
    assert rows.column("value").to_pylist() == [r[3] for r in expected]
    assert rows.column("key").to_pylist() == [r[2] for r in expected]


def test_lockstep_walk_gives_up_on_a_section_its_records_do_not_fill():
    batches = [[(b"k%d" % i, b"v" * (i * 7 % 50)) for i in range(1 + b % 5)] for b in range(30)]
    data, blob, bounds, counts = _sections(batches)
    counts[3] += 1  # one batch claims a record more than its section holds
    assert _walk_lockstep(byte_pairs(blob), bounds, counts) is None
    with pytest.raises(CorruptRecordError, match="does not hold exactly"):
        walk_python(blob, bounds.tolist(), counts.tolist(), "t-0")
