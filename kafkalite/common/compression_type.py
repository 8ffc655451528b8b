"""Kafka's ``CompressionType``: the codec ids a record batch stores in the low three attribute bits.

Both the producer's ``compression.type`` setting and the record batch codecs (``kafkalite.records``) name
them, so they sit below both.
"""

from __future__ import annotations

from enum import IntEnum


class Compression(IntEnum):
    """Codec ids as stored in the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4
