"""Kafka's classic (non-flexible) primitives, for formats laid out by hand: big-endian int16/int32/int64,
strings as an int16 length and UTF-8 bytes, byte arrays as an int32 length (-1 for null in both).

``Writer`` and ``Reader`` are shared by ``__consumer_offsets`` records and the consumer protocol; each
subclass names its error type and, where it must, its own messages.
"""

from __future__ import annotations

import struct
from typing import ClassVar

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Writer:
    """Appends primitives to ``buf``; every method returns the writer, so calls chain."""

    __slots__ = ("buf",)
    error: ClassVar[type[Exception]] = ValueError

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> Writer:
        self.buf += _INT16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += _INT32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += _INT64.pack(v)
        return self

    def string(self, s: str | None) -> Writer:
        if s is None:
            return self.int16(-1)
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise self.error(self.too_long(len(data)))
        self.int16(len(data))
        self.buf += data
        return self

    def nullable_bytes(self, b: bytes | None) -> Writer:
        if b is None:
            return self.int32(-1)
        self.int32(len(b))
        self.buf += b
        return self

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def too_long(self, n: int) -> str:
        return f"string of {n} bytes does not fit an int16 length"


class Reader:
    """Reads primitives from ``data`` in order; bad bytes raise ``error`` with ``what`` in the message.

    A negative length reads as null in a nullable field when it is -1, or any negative length when
    ``any_negative_is_null``; elsewhere it is an error.
    """

    __slots__ = ("data", "pos", "what")
    error: ClassVar[type[Exception]] = ValueError
    any_negative_is_null: ClassVar[bool] = False

    def __init__(self, data: bytes, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def fail(self, message: str) -> Exception:
        return self.error(f"{self.what}: {message}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(self.underflow(n))
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return _INT16.unpack(self.take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self.take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self.take(8))[0]

    def _is_null(self, n: int, nullable: bool) -> bool:
        return nullable and (n == -1 or (n < 0 and self.any_negative_is_null))

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if self._is_null(n, nullable):
            return None
        if n < 0:
            raise self.fail(self.bad_string(n))
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"string is not UTF-8 ({e})") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if self._is_null(n, True) else self.take(n)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected trailing bytes")

    def underflow(self, n: int) -> str:
        return f"needs {n} more bytes at position {self.pos}, has {len(self.data) - self.pos}"

    def bad_string(self, n: int) -> str:
        return f"negative string length {n} at position {self.pos - 2}"


__all__ = ["Reader", "Writer"]
