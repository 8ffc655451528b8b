"""Kafka's wire primitives: fixed-width big-endian integers, varints, strings, bytes and arrays, in both
the classic encodings (int16/int32 lengths) and the compact ones of flexible versions (KIP-482: unsigned
varint lengths stored plus one, so 0 means null), and the tagged-fields section.

``Reader`` raises ``WireFormatError`` naming the field being read when the bytes run out or a length is
impossible, so a server can answer or close the connection instead of failing with an IndexError.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# Below this a slice is copied into the response: a sendfile call costs more than copying a few pages.
ZERO_COPY_MIN_BYTES = 65_536


class WireFormatError(ValueError):
    """Bytes that are not a valid encoding of what was expected."""


class Reader:
    """Reads primitives from ``buf`` starting at ``pos``; ``field`` names what is being read, for errors."""

    __slots__ = ("buf", "pos", "end", "field")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.field = "?"

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise WireFormatError(
                f"{self.field}: needs {n} bytes at position {p}, only {self.end - p} left"
                if n >= 0
                else f"{self.field}: negative length {n} at position {p}"
            )
        self.pos = p + n
        return p

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._need(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._need(8))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> uuid.UUID:
        p = self._need(16)
        return uuid.UUID(bytes=bytes(self.buf[p : p + 16]))

    def uvarint(self) -> int:
        shift = value = 0
        for _ in range(5):
            b = self.buf[self._need(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise WireFormatError(f"{self.field}: unsigned varint longer than 5 bytes at position {self.pos}")

    def uvarlong(self) -> int:
        shift = value = 0
        for _ in range(10):
            b = self.buf[self._need(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise WireFormatError(f"{self.field}: varlong longer than 10 bytes at position {self.pos}")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        v = self.uvarlong()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> bytes:
        p = self._need(n)
        return bytes(self.buf[p : p + n])

    def _text(self, n: int) -> str:
        p = self._need(n)
        try:
            return bytes(self.buf[p : p + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireFormatError(f"{self.field}: not UTF-8 ({e})") from None

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n == -1 and nullable:
            return None
        return self._text(n)

    def compact_string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1
        if n == -1 and nullable:
            return None
        return self._text(n)

    def bytes_(self, nullable: bool = False) -> bytes | None:
        n = self.int32()
        if n == -1 and nullable:
            return None
        return self.raw(n)

    def compact_bytes(self, nullable: bool = False) -> bytes | None:
        n = self.uvarint() - 1
        if n == -1 and nullable:
            return None
        return self.raw(n)

    def array_length(self, compact: bool) -> int:
        n = self.uvarint() - 1 if compact else self.int32()
        if n > self.end - self.pos:
            raise WireFormatError(
                f"{self.field}: array of {n} entries cannot fit in {self.end - self.pos} bytes"
            )
        return n

    def skip_tagged_fields(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.raw(self.uvarint())
        return out


class Writer:
    """Appends primitives to a bytearray.

    With ``zero_copy``, a ``records`` value that is a file slice (anything with ``read`` and ``len``, such
    as a ``FileSlice``) of ``ZERO_COPY_MIN_BYTES`` or more is not copied in: only its length prefix is
    written, and ``(offset in buf, slice)`` is noted in ``slices`` for the sender to ``sendfile``.
    With ``split``, large records that are sent as bytes (no ``zero_copy``, or bytes already) are kept
    out of ``buf`` the same way, as ``bytes``: the frame is not grown and copied around them.
    """

    __slots__ = ("buf", "zero_copy", "split", "slices")

    def __init__(self, zero_copy: bool = False, split: bool = False) -> None:
        self.buf = bytearray()
        self.zero_copy = zero_copy
        self.split = split
        self.slices: list[tuple[int, object]] = []

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID | bytes | None) -> None:
        if v is None:
            self.buf += bytes(16)
        else:
            self.buf += v.bytes if isinstance(v, uuid.UUID) else bytes(v)

    def uvarint(self, v: int) -> None:
        while v > 0x7F:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 31))

    def varlong(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode("utf-8")
        self.int16(len(data))
        self.buf += data

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.buf += data

    def bytes_(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.int32(-1)
            return
        self.int32(len(v))
        self.buf += v

    def compact_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        self.uvarint(len(v) + 1)
        self.buf += v

    def records(self, v: object, compact: bool) -> None:
        """A ``records`` field: bytes, None, or a file slice (see the class docstring)."""
        if v is None:
            (self.compact_bytes if compact else self.bytes_)(v)
            return
        is_bytes = isinstance(v, bytes | bytearray | memoryview)
        n = len(v)  # type: ignore[arg-type]
        if n < ZERO_COPY_MIN_BYTES or not (self.split or (self.zero_copy and not is_bytes)):
            (self.compact_bytes if compact else self.bytes_)(v if is_bytes else v.read())  # type: ignore[attr-defined,arg-type]
            return
        if compact:
            self.uvarint(n + 1)
        else:
            self.int32(n)
        if is_bytes:
            piece: object = v if v.__class__ is bytes else bytes(v)  # type: ignore[arg-type]
        else:
            piece = v if self.zero_copy else v.read()  # type: ignore[attr-defined]
        self.slices.append((len(self.buf), piece))

    def array_length(self, n: int | None, compact: bool) -> None:
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)
