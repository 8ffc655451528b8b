"""One record inside a v2 batch: its dataclasses and its body encoding.

A record body is ``length varint`` followed by ``attributes int8`` (always 0), ``timestampDelta varlong``,
``offsetDelta varint``, ``keyLength varint`` + key, ``valueLength varint`` + value and a header array
(``count varint``, then per header ``keyLength varint`` + UTF-8 key, ``valueLength varint`` + value).
Lengths of -1 mean null. Offsets and timestamps are deltas against the batch header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.records.varint import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, decode_varint, sizeof_varint


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and an optional byte value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with its absolute offset and timestamp filled in."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _put_uvarint(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _as_bytes(data, what: str) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidRecordError(f"record {what} must be bytes, str or None, not {type(data).__name__}")


def _norm_headers(headers) -> list[tuple[bytes, bytes | None]]:
    out = []
    for h in headers:
        if isinstance(h, Header):
            k, v = h.key, h.value
        else:
            k, v = h
        if k is None:
            raise InvalidRecordError("record header key must not be null")
        kb = k.encode("utf-8") if isinstance(k, str) else _as_bytes(k, "header key")
        out.append((kb, _as_bytes(v, "header value")))
    return out


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable = (),
) -> None:
    """Append one length-prefixed record body to ``out``."""
    if not INT32_MIN <= offset_delta <= INT32_MAX:
        raise InvalidRecordError(f"offset delta {offset_delta} out of int32 range")
    if not INT64_MIN <= timestamp_delta <= INT64_MAX:
        raise InvalidRecordError(f"timestamp delta {timestamp_delta} out of int64 range")
    key = _as_bytes(key, "key")
    value = _as_bytes(value, "value")
    body = bytearray(b"\x00")  # attributes: unused in v2, always 0
    _put_uvarint(body, (timestamp_delta << 1) ^ (timestamp_delta >> 63))
    _put_uvarint(body, (offset_delta << 1) ^ (offset_delta >> 63))
    if key is None:
        body.append(1)  # zigzag(-1)
    else:
        _put_uvarint(body, len(key) << 1)
        body += key
    if value is None:
        body.append(1)
    else:
        _put_uvarint(body, len(value) << 1)
        body += value
    hs = _norm_headers(headers) if headers else ()
    _put_uvarint(body, len(hs) << 1)
    for hk, hv in hs:
        _put_uvarint(body, len(hk) << 1)
        body += hk
        if hv is None:
            body.append(1)
        else:
            _put_uvarint(body, len(hv) << 1)
            body += hv
    _put_uvarint(out, len(body) << 1)
    out += body


# What a record can add beyond its key, value and headers: attributes (1), the longest timestamp delta
# varlong (10), offset delta varint (5) and length varint (5). Kafka's DefaultRecord.MAX_RECORD_OVERHEAD.
MAX_RECORD_OVERHEAD = 21


def _field_size(data) -> int:
    return 1 if data is None else sizeof_varint(len(data)) + len(data)


def _headers_size(headers) -> int:
    if not headers:
        return 1
    hs = _norm_headers(headers)
    return sizeof_varint(len(hs)) + sum(_field_size(hk) + _field_size(hv) for hk, hv in hs)


def record_size(offset_delta: int, timestamp_delta: int, key, value, headers=None) -> int:
    """Exact encoded size of one record, its length varint included (Kafka's
    ``DefaultRecord.sizeInBytes``): what a producer counts to decide whether a batch has room."""
    body = (
        1
        + sizeof_varint(timestamp_delta)
        + sizeof_varint(offset_delta)
        + _field_size(key)
        + _field_size(value)
        + _headers_size(headers)
    )
    return body + sizeof_varint(body)


def record_size_upper_bound(key, value, headers=None) -> int:
    """The most one record can take whatever its deltas (Kafka's ``DefaultRecord.recordSizeUpperBound``)."""
    return MAX_RECORD_OVERHEAD + _field_size(key) + _field_size(value) + _headers_size(headers)


# Unsigned varint bytes of every value below 2**14 (one or two bytes): zigzag lengths up to 8191 and
# the deltas of a normal batch come out of this table instead of a loop per byte.
_UVARINT_LIMIT = 1 << 14
_UVARINT = [bytes([u]) if u < 0x80 else bytes([(u & 0x7F) | 0x80, u >> 7]) for u in range(_UVARINT_LIMIT)]


def _uvarint_bytes(u: int) -> bytes:
    out = bytearray()
    _put_uvarint(out, u)
    return bytes(out)


def encode_plain_records(records, stamps, base_ts: int) -> bytes | None:
    """Fast path of ``encode_record`` over a whole batch: records body for offset deltas 0, 1, 2, ...

    Handles ``(key, value)`` / ``(key, value, headers)`` tuples with bytes-or-None key and value and no
    headers, which is what the producer sends; returns None at the first record it does not handle (the
    caller then uses ``encode_record``, which also raises the errors). Byte for byte the same output.
    """
    parts: list[bytes] = []
    add = parts.extend  # one call per record; b"".join copies each piece once
    table = _UVARINT
    limit = _UVARINT_LIMIT
    bytes_ = bytes
    last_ts = None
    ts_b = b""
    ts_len = 0
    for od, (rec, ts) in enumerate(zip(records, stamps, strict=True)):
        if rec.__class__ is not tuple:
            return None
        if len(rec) == 3:
            key, value, headers = rec
            if headers:
                return None
        elif len(rec) == 2:
            key, value = rec
        else:
            return None
        if ts != last_ts:  # records of a batch mostly share a millisecond: encode the delta once
            if ts.__class__ is not int:
                return None
            d = ts - base_ts
            if not INT64_MIN <= d <= INT64_MAX:
                return None
            u = (d << 1) ^ (d >> 63)
            ts_b = b"\x00" + (table[u] if u < limit else _uvarint_bytes(u))  # attributes byte, ts delta
            ts_len = len(ts_b)
            last_ts = ts
        u = od << 1
        od_b = table[u] if u < limit else _uvarint_bytes(u)
        if key is None:
            if value.__class__ is bytes_:  # the producer's common record: no key
                vl = len(value)
                u = vl << 1
                vl_b = table[u] if u < limit else _uvarint_bytes(u)
                u = (ts_len + len(od_b) + len(vl_b) + vl + 2) << 1  # + null key length + header count
                add((table[u] if u < limit else _uvarint_bytes(u), ts_b, od_b, b"\x01", vl_b, value, b"\x00"))
                continue
            key_b = b"\x01"
        elif key.__class__ is bytes_:
            u = len(key) << 1
            key_b = (table[u] if u < limit else _uvarint_bytes(u)) + key
        else:
            return None
        if value is None:
            value = b""
            vl_b = b"\x01"
        elif value.__class__ is bytes_:
            u = len(value) << 1
            vl_b = table[u] if u < limit else _uvarint_bytes(u)
        else:
            return None
        u = (ts_len + len(od_b) + len(key_b) + len(vl_b) + len(value) + 1) << 1
        add((table[u] if u < limit else _uvarint_bytes(u), ts_b, od_b, key_b, vl_b, value, b"\x00"))
    return b"".join(parts)


def _bad(msg: str, pos: int) -> CorruptRecordError:
    return CorruptRecordError(f"{msg} at position {pos} of the records section")


def decode_record_tuples(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
    pos: int = 0,
    end: int | None = None,
) -> list[tuple]:
    """Decode ``count`` records from ``data[pos:end]`` as plain tuples.

    Each tuple is ``(offset, timestamp, key, value, headers)``; headers is a tuple of ``Header``.
    ``fixed_timestamp`` replaces every record timestamp (LOG_APPEND_TIME batches). The section must
    hold exactly ``count`` records; anything else raises ``CorruptRecordError``.
    """
    if end is None:
        end = len(data)
    out = []
    append = out.append
    # Varints are inlined: almost all of them are one or two bytes and a call per field would
    # dominate the cost of decoding small records.
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = decode_varint(data, pos)
            start = pos
            stop = pos + length
            if length < 0 or stop > end:
                raise _bad(f"record length {length} exceeds the {end - pos} bytes left", start)
            pos += 1  # attributes, unused
            b = data[pos]
            if b < 0x80:
                tsd = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                u = 0
                shift = 0
                p0 = pos
                while True:
                    b = data[pos]
                    pos += 1
                    u |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift > 63:
                        raise _bad("overlong timestamp delta varlong", p0)
                tsd = (u >> 1) ^ -(u & 1)
            b = data[pos]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                od = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                od, pos = decode_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                kl = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                kl, pos = decode_varint(data, pos)
            if kl >= 0:
                key = data[pos : pos + kl]
                pos += kl
            elif kl == -1:
                key = None
            else:
                raise _bad(f"invalid key length {kl}", pos)
            b = data[pos]
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                vl = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                vl, pos = decode_varint(data, pos)
            if vl >= 0:
                value = data[pos : pos + vl]
                pos += vl
            elif vl == -1:
                value = None
            else:
                raise _bad(f"invalid value length {vl}", pos)
            b = data[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                hc, pos = decode_varint(data, pos)
                if hc < 0:
                    raise _bad(f"invalid header count {hc}", pos)
                hl = []
                for _h in range(hc):
                    hkl, pos = decode_varint(data, pos)
                    if hkl < 0:
                        raise _bad(f"invalid header key length {hkl}", pos)
                    if pos + hkl > stop:
                        raise _bad("header key overruns its record", pos)
                    try:
                        hk = data[pos : pos + hkl].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _bad("header key is not valid UTF-8", pos) from None
                    pos += hkl
                    hvl, pos = decode_varint(data, pos)
                    if hvl >= 0:
                        hv = data[pos : pos + hvl]
                        pos += hvl
                    elif hvl == -1:
                        hv = None
                    else:
                        raise _bad(f"invalid header value length {hvl}", pos)
                    hl.append(Header(hk, hv))
                headers = tuple(hl)
            if pos != stop:
                raise _bad(f"record declares {length} bytes but its fields use {pos - start}", start)
            append(
                (
                    base_offset + od,
                    base_timestamp + tsd if fixed_timestamp is None else fixed_timestamp,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise _bad(f"records section ends inside a record (expected {count} records)", pos) from None
    if pos != end:
        raise _bad(f"{end - pos} unexpected bytes after {count} records", pos)
    return out


# Frozen dataclass __init__ goes through object.__setattr__ per field; setting the slots directly
# builds the same object in half the time, which matters when a consumer decodes millions of records.
_new = object.__new__
_set_offset = Record.offset.__set__  # type: ignore[attr-defined]
_set_timestamp = Record.timestamp.__set__  # type: ignore[attr-defined]
_set_key = Record.key.__set__  # type: ignore[attr-defined]
_set_value = Record.value.__set__  # type: ignore[attr-defined]
_set_headers = Record.headers.__set__  # type: ignore[attr-defined]
