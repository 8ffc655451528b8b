"""The compiled batch walks give what a plain walk over the batch headers gives: the fetcher's cut after
the last whole batch (and the offset after it), and scan_plain's batch starts, or None at a bad magic
byte or batch length; a torn tail is never a batch."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("numba")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkalite.records import build_batch, iter_batches  # noqa: E402
from kafkalite.spark.batch_walk import batch_starts, whole_batches  # noqa: E402
from tests.imports import modules_loaded  # noqa: E402

T0 = 1_700_000_000_000


def _batches(sizes: list[int]) -> tuple[bytes, int]:
    data, base = b"", 0
    for n in sizes:
        data += build_batch([(None, b"v" * (i % 40)) for i in range(n)], timestamp=T0, base_offset=base)
        base += n + 2  # gaps between batches, as compaction leaves them
    return data, base


def _plain_cut(data: bytes) -> tuple[int, int]:
    pos, nxt = 0, -1
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + length + 12
        if end > len(data) or length <= 0:
            break
        nxt = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
        pos = end
    return pos, nxt


@given(sizes=st.lists(st.integers(1, 30), max_size=12), torn=st.integers(0, 200))
@settings(max_examples=80, deadline=None)
def test_walks_match_the_plain_walk(sizes, torn):
    data, _ = _batches(sizes)
    data += data[:torn]  # the start of a batch, cut where a fetch may end
    assert whole_batches(data) == _plain_cut(data)
    got = batch_starts(data)
    assert got is not None
    assert got.tolist() == [pos for pos, _ in iter_batches(data)]


def test_a_bad_magic_byte_or_length_stops_the_scan():
    data, _ = _batches([3, 4, 5])
    second = [pos for pos, _ in iter_batches(data)][1]
    bad = bytearray(data)
    bad[second + 16] = 1  # magic v1 in the middle of a v2 fetch
    assert batch_starts(bytes(bad)) is None
    short = bytearray(data)
    short[second + 8 : second + 12] = struct.pack(">i", 10)  # below a batch header's own length
    assert batch_starts(bytes(short)) is None
    assert whole_batches(b"") == (0, -1) and batch_starts(b"").tolist() == []


def test_planning_a_read_does_not_load_numba():
    """Spark plans each read in a fresh Python process that imports the source but decodes nothing: numba
    and its cached code load only where a fetch is decoded."""
    loaded = modules_loaded(
        "import kafkalite.spark.source, kafkalite.spark.stream, kafkalite.spark.wire",
        roots=("numba",),
        suffixes=(".batch_walk", ".record_columns"),
    )
    assert loaded == [], loaded
