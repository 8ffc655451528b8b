"""Variable-length integers as the v2 record format writes them.

Record bodies use protobuf-style base-128 varints. Signed fields are zigzag mapped first so small
negative numbers (a null length of -1, a negative timestamp delta) stay one byte long. ``varint``
fields hold an int32 and may use at most 5 bytes; ``varlong`` fields hold an int64 and at most 10.
"""

from __future__ import annotations

from kafkalite.errors import CorruptRecordError, InvalidRecordError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# One-byte encodings cover every zigzag value below 128, i.e. -64..63: most lengths and deltas.
_SMALL = {n: bytes([((n << 1) ^ (n >> 63))]) for n in range(-64, 64)}


def _unsigned_bytes(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_uvarint(value: int) -> bytes:
    """Plain (not zigzag) unsigned varint, as used for compact lengths in the Kafka protocol."""
    if value < 0 or value > 0xFFFFFFFF:
        raise InvalidRecordError(f"unsigned varint out of range [0, 2**32-1]: {value}")
    return _unsigned_bytes(value)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 32-bit integer (1 to 5 bytes)."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    if value < INT32_MIN or value > INT32_MAX:
        raise InvalidRecordError(f"varint value out of int32 range: {value}")
    return _unsigned_bytes((value << 1) ^ (value >> 63))


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer (1 to 10 bytes)."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    if value < INT64_MIN or value > INT64_MAX:
        raise InvalidRecordError(f"varlong value out of int64 range: {value}")
    return _unsigned_bytes((value << 1) ^ (value >> 63))


def _read_unsigned(buf, pos: int, max_bytes: int, limit_bits: int, what: str) -> tuple[int, int]:
    start = pos
    result = 0
    shift = 0
    n = len(buf)
    for _ in range(max_bytes):
        if pos >= n:
            raise CorruptRecordError(f"truncated {what} at position {start}: input ends at {n}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> limit_bits:
                raise CorruptRecordError(f"{what} at position {start} does not fit in {limit_bits} bits")
            return result, pos
        shift += 7
    raise CorruptRecordError(f"overlong {what} at position {start}: more than {max_bytes} bytes")


def decode_uvarint(buf, pos: int = 0) -> tuple[int, int]:
    """Read a plain unsigned varint; returns ``(value, new_pos)``."""
    return _read_unsigned(buf, pos, 5, 32, "unsigned varint")


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int32 varint; returns ``(value, new_pos)``."""
    b = buf[pos] if pos < len(buf) else 0x80
    if b < 0x80:  # fast path: one byte
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _read_unsigned(buf, pos, 5, 32, "varint")
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int64 varint; returns ``(value, new_pos)``."""
    b = buf[pos] if pos < len(buf) else 0x80
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _read_unsigned(buf, pos, 10, 64, "varlong")
    return (u >> 1) ^ -(u & 1), pos


def sizeof_varint(value: int) -> int:
    """Encoded size in bytes of a zigzag varint/varlong."""
    u = (value << 1) ^ (value >> 63)
    return (u.bit_length() + 6) // 7 or 1  # `or`, not max(): this runs a few times per produced batch
