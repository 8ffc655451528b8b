"""Compression codecs for the records section of a v2 batch (attributes bits 0-2).

Only the bytes after ``recordsCount`` are compressed; the 61-byte header stays readable so the log can
validate, index and stamp batches without inflating them.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from kafkalite.errors import CorruptRecordError


class Compression(IntEnum):
    """Codec ids as stored in the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Java's snappy-java stream format ("xerial"): 8-byte magic, int32 version, int32 min compatible
# version, then blocks of [int32 compressed length][raw snappy]. Kafka's Java client writes this.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java compresses its input in 32 KiB chunks; matching that keeps output similar to Java's.
XERIAL_BLOCK_SIZE = 32 * 1024
_I32 = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[i : i + XERIAL_BLOCK_SIZE]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("snappy: truncated xerial header")
    pos = len(XERIAL_HEADER)
    out = []
    n = len(data)
    while pos < n:
        if pos + 4 > n:
            raise CorruptRecordError(f"snappy: truncated xerial block length at offset {pos}")
        (blen,) = _I32.unpack_from(data, pos)
        pos += 4
        if blen < 0 or pos + blen > n:
            raise CorruptRecordError(
                f"snappy: xerial block of {blen} bytes at offset {pos} overruns the data"
            )
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + blen])))
        pos += blen
    return b"".join(out)


def compress(codec: int, data: bytes) -> bytes:
    """Compress a records section with the given codec id."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise CorruptRecordError(f"unknown compression codec id {codec} (known: 0 none .. 4 zstd)")


def decompress(codec: int, data) -> bytes:
    """Inflate a records section; corrupt input raises ``CorruptRecordError`` naming the codec."""
    if codec == Compression.NONE:
        return bytes(data)
    try:
        name = Compression(codec).name.lower()
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec} (known: 0 none .. 4 zstd)") from None
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as e:  # cramjam raises its own DecompressionError / ValueError types
        raise CorruptRecordError(f"{name}: cannot decompress records section: {e}") from None
