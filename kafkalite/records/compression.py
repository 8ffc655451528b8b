"""Compression codecs for the records section of a v2 batch (attributes bits 0-2).

Only the bytes after ``recordsCount`` are compressed; the 61-byte header stays readable so the log can
validate, index and stamp batches without inflating them.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from kafkalite.common.compression_type import Compression
from kafkalite.errors import CorruptRecordError, InvalidRecordError

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


def decompress(codec: int, data, max_size: int | None = None) -> bytes:
    """Inflate a records section; corrupt input raises ``CorruptRecordError`` naming the codec.

    With ``max_size`` (the broker validating a produced batch) an output larger than that raises
    ``InvalidRecordError`` before it is ever held in memory: zstd, lz4 and snappy declare their sizes
    in their framing, which is read first; gzip is inflated in steps and only counted past a few MiB.
    """
    if codec == Compression.NONE:
        return bytes(data)
    try:
        name = Compression(codec).name.lower()
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec} (known: 0 none .. 4 zstd)") from None
    try:
        if max_size is not None:
            if codec == Compression.GZIP:
                return _gzip_bounded(data, max_size)
            declared = _declared_size(codec, data)
            if declared > max_size:
                raise _too_large(name, max_size, f"may inflate to {declared:,} bytes (by its framing)")
        out = _inflate(codec, data)
    except (CorruptRecordError, InvalidRecordError):
        raise
    except Exception as e:  # cramjam and zlib raise their own DecompressionError / ValueError / zlib.error
        raise CorruptRecordError(f"{name}: cannot decompress records section: {e}") from None
    if max_size is not None and len(out) > max_size:
        raise _too_large(name, max_size, f"inflates to {len(out):,} bytes")
    return out


def _inflate(codec: int, data) -> bytes:
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == Compression.SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    return bytes(cramjam.zstd.decompress(data))


# ===== bounded inflation (the broker's validation of produced batches) ==================================

# The most bytes one batch's records section may inflate to on a broker. It is librdkafka's default
# receive.message.max.bytes (100 MB), the most a confluent-kafka consumer inflates a zstd batch to, so a
# larger batch would be appended yet unreadable there; it is also below Kafka's socket.request.max.bytes
# (104,857,600), the largest request a broker reads, so no client could have sent the same records
# uncompressed either. Kafka itself bounds each record instead (max.decompressed.message.bytes).
MAX_INFLATED_BYTES = 100_000_000
# Gzip declares no size: it is inflated GZIP_STEP bytes at a time, the output kept while it stays
# within GZIP_KEEP and only counted beyond (then inflated again once it is known to fit), so refusing a
# bomb costs about GZIP_KEEP of memory whatever it expands to.
GZIP_STEP = 1 << 20
GZIP_KEEP = 4 << 20


def _too_large(name: str, max_size: int, what: str) -> InvalidRecordError:
    return InvalidRecordError(
        f"{name} records section {what}: a batch may inflate to at most {max_size:,} bytes"
    )


def _gzip_bounded(data, max_size: int) -> bytes:
    """Gzip members one after another (as ``cramjam.gzip.decompress`` reads them), at most ``max_size``
    bytes of output, of which at most ``GZIP_KEEP`` (plus one step) is held at a time."""
    kept: list[bytes] | None = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(31)  # gzip header and trailer, as Kafka's GZIPInputStream expects
        chunk = d.decompress(rest, GZIP_STEP)
        while True:
            total += len(chunk)
            if total > max_size:
                raise _too_large("gzip", max_size, "inflates past the limit")
            if kept is not None:
                if total <= GZIP_KEEP:
                    kept.append(chunk)
                else:
                    kept = None  # from here on only count: the bytes are inflated again below
            if d.eof:
                break
            tail = d.unconsumed_tail
            chunk = d.decompress(tail, GZIP_STEP)
            if not chunk and not tail:
                raise CorruptRecordError("gzip: cannot decompress records section: truncated stream")
        rest = d.unused_data
        if not rest:
            break
    if kept is None:
        return bytes(cramjam.gzip.decompress(data))
    return b"".join(kept)


def _declared_size(codec: int, data) -> int:
    """The most bytes the section can inflate to, from its framing alone (nothing is inflated)."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    if codec == Compression.SNAPPY:
        return _snappy_size(view)
    if codec == Compression.LZ4:
        return _lz4_size(view)
    return _zstd_size(view)


def _need(data, pos: int, n: int, what: str) -> None:
    if pos + n > len(data):
        raise CorruptRecordError(f"{what}: framing truncated at offset {pos}")


def _snappy_size(data) -> int:
    """Snappy states each block's inflated length up front (a varint): the exact total."""
    if bytes(data[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _snappy_block_size(data, 0)
    pos, n, total = len(XERIAL_HEADER), len(data), 0
    _need(data, 0, pos, "snappy")
    while pos < n:
        _need(data, pos, 4, "snappy")
        (blen,) = _I32.unpack_from(data, pos)
        pos += 4
        if blen < 0:
            raise CorruptRecordError(f"snappy: negative xerial block length at offset {pos - 4}")
        _need(data, pos, blen, "snappy")
        total += _snappy_block_size(data, pos)
        pos += blen
    return total


def _snappy_block_size(data, pos: int) -> int:
    u = shift = 0
    for i in range(5):
        _need(data, pos + i, 1, "snappy")
        b = data[pos + i]
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u
        shift += 7
    raise CorruptRecordError(f"snappy: overlong length preamble at offset {pos}")


_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_SKIPPABLE_MASK, _SKIPPABLE = 0xFFFFFFF0, 0x184D2A50  # skippable frames, shared by lz4 and zstd
_U32LE = struct.Struct("<I")


def _lz4_size(data) -> int:
    """LZ4 frames: an uncompressed block holds its own size, a compressed one at most the frame's
    block maximum size (64 KiB .. 4 MiB, byte BD)."""
    pos, n, total = 0, len(data), 0
    while pos < n:
        _need(data, pos, 4, "lz4")
        (magic,) = _U32LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE:
            _need(data, pos + 4, 4, "lz4")
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError(f"lz4: no frame magic at offset {pos}")
        _need(data, pos + 4, 3, "lz4")
        flg, bd = data[pos + 4], data[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if flg >> 6 != 1 or block_max is None:
            raise CorruptRecordError(f"lz4: unsupported frame descriptor at offset {pos + 4}")
        block_checksum = 4 if flg & 0x10 else 0
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        while True:
            _need(data, pos, 4, "lz4")
            (word,) = _U32LE.unpack_from(data, pos)
            pos += 4
            if word == 0:  # end mark
                break
            size = word & 0x7FFFFFFF
            total += size if word >> 31 else block_max
            pos += size + block_checksum
        pos += 4 if flg & 0x04 else 0  # content checksum
    if pos > n:
        raise CorruptRecordError("lz4: framing overruns the records section")
    return total


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10
_ZSTD_FCS_BYTES = (0, 2, 4, 8)
_ZSTD_DICT_BYTES = (0, 1, 2, 4)


def _zstd_size(data) -> int:
    """Zstandard frames: raw and RLE blocks state their size, a compressed block inflates to at most
    128 KiB (the format's block maximum)."""
    pos, n, total = 0, len(data), 0
    while pos < n:
        _need(data, pos, 4, "zstd")
        (magic,) = _U32LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE:
            _need(data, pos + 4, 4, "zstd")
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"zstd: no frame magic at offset {pos}")
        _need(data, pos + 4, 1, "zstd")
        fhd = data[pos + 4]
        single_segment = fhd & 0x20
        fcs = _ZSTD_FCS_BYTES[fhd >> 6] or (1 if single_segment else 0)
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_BYTES[fhd & 3] + fcs
        while True:
            _need(data, pos, 3, "zstd")
            header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            pos += 3
            kind, size = (header >> 1) & 3, header >> 3
            if kind == 3:
                raise CorruptRecordError(f"zstd: reserved block type at offset {pos - 3}")
            total += _ZSTD_BLOCK_MAX if kind == 2 else size
            pos += 1 if kind == 1 else size
            if header & 1:  # last block
                break
        pos += 4 if fhd & 0x04 else 0  # content checksum
    if pos > n:
        raise CorruptRecordError("zstd: framing overruns the records section")
    return total
