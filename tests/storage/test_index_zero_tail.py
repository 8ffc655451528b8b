"""An index file left preallocated (a crash before the trim) ends in zeros; loading finds where its
entries end without testing 10 MB of zeros byte by byte."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.storage.offset_index import _ZERO_BLOCK, OffsetIndex, _nonzero_length

BLOCK = len(_ZERO_BLOCK)


@given(
    head=st.binary(max_size=300),
    zeros=st.sampled_from([0, 1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5]),
    pad=st.integers(0, 2 * BLOCK + 3),
)
def test_nonzero_length_is_rstrip(head: bytes, zeros: int, pad: int) -> None:
    # head, a stretch of zeros, a marker byte and the zero tail: each on either side of block edges.
    data = head + bytes(zeros) + b"\x01" * (pad % 2) + bytes(pad)
    assert _nonzero_length(data) == len(data.rstrip(b"\0")), (len(head), zeros, pad)


def test_untrimmed_index_loads_its_entries_and_is_flagged(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=10 * 2**20)
    for i in range(1, 200):
        index.append(i * 10, i * 4096)
    index.flush()
    # No close: the file keeps its preallocated 10 MB of zeros, as after a crash.
    assert path.stat().st_size == 10 * 2**20, "the file was trimmed"
    loaded = OffsetIndex(path, 0, mutable=False)
    assert list(loaded._keys) == [i * 10 for i in range(1, 200)], "entries lost or gained"
    assert loaded.corrupt_reason == "file was never trimmed (trailing preallocated zeros)", (
        loaded.corrupt_reason
    )
