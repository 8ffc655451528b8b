"""Bounded inflation: with a limit, every codec refuses a records section that would inflate past it,
without holding the output (zstd, lz4 and snappy from their framing, gzip by counting as it inflates),
and otherwise returns exactly what the unbounded reader returns."""

from __future__ import annotations

import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.records.compression import GZIP_KEEP, Compression, compress, decompress

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_every_codec_refuses_a_section_inflating_past_the_limit(codec):
    section = b"\0" * (3 << 20)
    payload = compress(codec, section)
    assert decompress(codec, payload, max_size=3 << 20) == section
    with pytest.raises(InvalidRecordError, match="a batch may inflate to at most 1,048,576 bytes"):
        decompress(codec, payload, max_size=1 << 20)


def _gzip_zeros(n_mib: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(z.compress(b"\0" * (1 << 20)) for _ in range(n_mib)) + z.flush()


def test_a_gzip_bomb_is_counted_not_held():
    bomb = _gzip_zeros(200)  # about 199 KB that inflate to 200 MiB
    assert len(bomb) < 250_000
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError, match="a batch may inflate to at most 100,000,000 bytes"):
            decompress(Compression.GZIP, bomb, max_size=100_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < GZIP_KEEP + (8 << 20), f"refusing the bomb held {peak:,} bytes"


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name.lower())
def test_other_codecs_refuse_a_bomb_from_its_framing_alone(codec):
    bomb = compress(codec, b"\0" * (24 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError, match="by its framing"):
            decompress(codec, bomb, max_size=16 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"refusing the bomb held {peak:,} bytes"


def test_gzip_members_are_read_one_after_another_and_trailing_bytes_are_corrupt():
    a, b = compress(Compression.GZIP, b"hello "), compress(Compression.GZIP, b"world")
    assert decompress(Compression.GZIP, a + b, max_size=100) == b"hello world"
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(Compression.GZIP, a + b"\0\0", max_size=100)
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(Compression.GZIP, a[:-3], max_size=100)


def test_gzip_past_the_kept_size_is_inflated_again_and_still_exact():
    data = bytes(range(256)) * ((GZIP_KEEP // 256) + 4096)
    assert decompress(Compression.GZIP, compress(Compression.GZIP, data), max_size=len(data)) == data


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(CODECS),
    st.binary(max_size=3000),
    st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=3),
)
def test_bounded_and_unbounded_inflation_agree_on_any_payload(codec, data, edits):
    payload = bytearray(compress(codec, data))
    for at, byte in edits:
        if at < len(payload):
            payload[at] = byte
    try:
        expected = decompress(codec, bytes(payload))
    except CorruptRecordError:
        expected = None
    try:
        got = decompress(codec, bytes(payload), max_size=1 << 20)
    except CorruptRecordError:
        got = None
    except InvalidRecordError:  # framing that claims more than the limit: refused, never read
        return
    assert got == expected
