"""Hand-made record batches for the poison-batch tests: ``raw_batch`` wraps any records section in a
correct v2 header and CRC, so that only what is inside the records is wrong."""

from __future__ import annotations

import functools
import struct
import zlib

from crc32c import crc32c

from kafkalite.records import Compression, build_batch
from kafkalite.records.compression import compress
from kafkalite.records.record import encode_record

T0 = 1_700_000_000_000
CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
HEADER = struct.Struct(">qiibIhiqqqhii")


def raw_batch(
    section: bytes,
    count: int,
    *,
    codec: int = 0,
    last_offset_delta: int | None = None,
    producer_id: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    payload: bytes | None = None,
) -> bytes:
    """A v2 batch around ``section`` (compressed with ``codec``, or ``payload`` as given) whose header
    and CRC are right, whatever the section holds."""
    if payload is None:
        payload = section if codec == 0 else compress(codec, section)
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    header = bytearray(
        HEADER.pack(0, 49 + len(payload), -1, 2, 0, codec | attributes, lod, T0, T0,
                     producer_id, 0 if producer_id >= 0 else -1, base_sequence, count)
    )  # fmt: skip
    struct.pack_into(">I", header, 17, crc32c(payload, crc32c(bytes(header[21:]))))
    return bytes(header) + payload


def records(values, *, deltas=None, keys=None, headers=None) -> bytes:
    """A records section: one record per value, offset deltas 0..n-1 unless ``deltas``."""
    out = bytearray()
    for i, v in enumerate(values):
        key = None if keys is None else keys[i]
        hs = () if headers is None else headers[i]
        encode_record(out, i if deltas is None else deltas[i], 0, key, v, hs)
    return bytes(out)


GOOD = records([b"a", b"bb", b"ccc"])


def second_record(section: bytes) -> int:
    return 1 + section[0] // 2  # the first record's length varint is one byte in these sections


@functools.cache
def poison_batches() -> dict[str, bytes]:
    """Every kind of malformed batch of the issue, each with a correct header and CRC."""
    at = second_record(GOOD)
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    bomb_payload = b"".join(bomb.compress(zeros) for _ in range(200)) + bomb.flush()
    bad_inner = GOOD[:at] + b"\x7e" + GOOD[at + 1 :]
    return {
        "length varint past the end": raw_batch(bad_inner, 3),
        "negative record length": raw_batch(GOOD[:at] + b"\x03" + GOOD[at + 1 :], 3),
        "overlong length varint": raw_batch(GOOD[:at] + b"\xff" * 6 + GOOD[at + 1 :], 3),
        "lastOffsetDelta beyond the count": raw_batch(GOOD, 3, last_offset_delta=5),
        "lastOffsetDelta below the count": raw_batch(GOOD, 3, last_offset_delta=1),
        "more records than counted": raw_batch(GOOD, 2),
        "fewer records than counted": raw_batch(GOOD, 4),
        "offset deltas swapped": raw_batch(records([b"a", b"b", b"c"], deltas=[0, 2, 1]), 3),
        "offset deltas repeated": raw_batch(records([b"a", b"b", b"c"], deltas=[0, 0, 1]), 3),
        "offset deltas from 1": raw_batch(
            records([b"a", b"b", b"c"], deltas=[1, 2, 3]), 3, last_offset_delta=2
        ),
        "trailing bytes": raw_batch(GOOD + b"\x00\x00", 3),
        "key overruns its record": raw_batch(records([b"v"], keys=[b"k"]).replace(b"\x02k", b"\x0ck"), 1),
        "header key not utf-8": raw_batch(records([b"v"], headers=[[(b"\xff\xfe", b"x")]]), 1),
        "record attributes set": raw_batch(GOOD[:1] + b"\x80" + GOOD[2:], 3),
        "gzip bomb": raw_batch(b"", 1, codec=Compression.GZIP, payload=bomb_payload),
        **{f"{c.name.lower()} with a bad inner record": raw_batch(bad_inner, 3, codec=c) for c in CODECS},
    }


def good_batch(values) -> bytes:
    return build_batch([(None, v) for v in values], timestamp=T0)
