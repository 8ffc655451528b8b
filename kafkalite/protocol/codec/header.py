"""Request and response headers, and whole frames: the int32 size, the header, the body.

Request header v1 is api key, api version, correlation id and a nullable client id; v2 (flexible requests)
adds a tagged-fields section. Response header v0 is the correlation id; v1 (flexible responses) adds
tagged fields, except for ApiVersions, whose response always uses v0 so that a client that does not yet
know the broker's versions can read it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkalite.protocol.codec.messages import SPECS
from kafkalite.protocol.codec.schema import MessageSpec, decode, encode, encode_into
from kafkalite.protocol.codec.types import Reader, WireFormatError, Writer

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class UnsupportedVersion(WireFormatError):
    """A request for an API or version this listener does not serve; the header could still be read."""

    def __init__(self, header: RequestHeader, message: str) -> None:
        super().__init__(message)
        self.header = header


def spec_for(api_key: int, version: int) -> MessageSpec | None:
    spec = SPECS.get(api_key)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        return None
    return spec


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, dict]:
    """Header and body of one request frame (without its size prefix)."""
    r = Reader(frame)
    r.field = "request header"
    api_key, version, corr = r.int16(), r.int16(), r.int32()
    r.field = "client_id"
    client_id = r.string(nullable=True)
    header = RequestHeader(api_key, version, corr, client_id)
    spec = spec_for(api_key, version)
    if spec is None:
        raise UnsupportedVersion(header, f"api key {api_key} version {version} is not served here")
    flexible = spec.flexible(version)
    if flexible:
        r.field = "request header tagged fields"
        r.skip_tagged_fields()
    body = decode(spec.request, memoryview(frame)[r.pos :], version, flexible)
    return header, body


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """A whole request frame, size prefix included (the client side, for tests and tools)."""
    spec = spec_for(api_key, version)
    if spec is None:
        raise ValueError(f"api key {api_key} version {version} is not known")
    w = Writer()
    w.int16(api_key)
    w.int16(version)
    w.int32(correlation_id)
    w.string(client_id)
    flexible = spec.flexible(version)
    if flexible:
        w.empty_tagged_fields()
    payload = bytes(w.buf) + encode(spec.request, body, version, flexible)
    return _SIZE.pack(len(payload)) + payload


def encode_response(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    """A whole response frame, size prefix included."""
    (frame,) = encode_response_parts(api_key, version, correlation_id, body)
    return frame  # type: ignore[return-value]


def encode_response_parts(
    api_key: int,
    version: int,
    correlation_id: int,
    body: dict,
    *,
    zero_copy: bool = False,
    split: bool = False,
) -> list[bytes | object]:
    """A whole response frame as the pieces to send in order: ``bytes``, and with ``zero_copy`` the file
    slices of large ``records`` fields, left uncopied for ``sendfile``. With ``split`` large records
    sent as bytes are pieces of their own too, not copied into the frame. The size prefix counts them."""
    spec = SPECS[api_key]
    flexible = spec.flexible(version)
    w = Writer(zero_copy, split)
    w.int32(0)  # the size, filled in below
    w.int32(correlation_id)
    if flexible and api_key != API_VERSIONS_KEY:
        w.empty_tagged_fields()
    encode_into(w, spec.response, body, version, flexible)
    buf = w.buf
    buf[:4] = _SIZE.pack(len(buf) - 4 + sum(len(s) for _, s in w.slices))  # type: ignore[arg-type]
    if not w.slices:
        return [bytes(buf)]
    parts: list[bytes | object] = []
    start = 0
    for at, piece in w.slices:
        parts += [bytes(buf[start:at]), piece]
        start = at
    parts.append(bytes(buf[start:]))
    return parts


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, dict]:
    """Correlation id and body of one response frame (without its size prefix)."""
    spec = SPECS[api_key]
    flexible = spec.flexible(version)
    r = Reader(frame)
    r.field = "response header"
    corr = r.int32()
    if flexible and api_key != API_VERSIONS_KEY:
        r.skip_tagged_fields()
    return corr, decode(spec.response, memoryview(frame)[r.pos :], version, flexible)
