"""``MetadataRecordSerde``: how a metadata record sits in a record's value in ``__cluster_metadata``.

Kafka's ``ApiMessageAndVersion`` frame: the frame version (1), the record's api key and its version, each
an unsigned varint, then the record's body in that (always flexible) version. Nothing may follow the body.
"""

from __future__ import annotations

from kafkalite.metadata.records import RECORD_TYPES, MetadataRecord
from kafkalite.protocol.codec.binding import from_wire, schema_of, to_wire
from kafkalite.protocol.codec.schema import encode, read_struct
from kafkalite.protocol.codec.types import Reader, WireFormatError, Writer

FRAME_VERSION = 1


class MetadataParseError(ValueError):
    """A metadata record that cannot be read (Kafka's ``MetadataParseException``)."""


def serialize(record: MetadataRecord, version: int | None = None) -> bytes:
    """The framed bytes of ``record`` in ``version`` (default: the version kafkalite writes)."""
    cls = type(record)
    v = record.write_version() if version is None else version
    lo, hi = cls.valid_versions
    if not lo <= v <= hi:
        raise ValueError(f"{cls.__name__} has versions {lo}-{hi}, not {v}")
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(cls.api_key)
    w.uvarint(v)
    return bytes(w.buf) + encode(schema_of(cls), to_wire(record, v), v, True)


def deserialize(data: bytes) -> tuple[MetadataRecord, int]:
    """The record framed in ``data`` and the version it was written in."""
    r = Reader(data)
    try:
        frame = r.uvarint()
        if frame != FRAME_VERSION:
            raise MetadataParseError(
                f"unknown metadata record frame version {frame} (only {FRAME_VERSION} is supported)"
            )
        api_key, version = r.uvarint(), r.uvarint()
    except WireFormatError as e:
        raise MetadataParseError(f"unreadable metadata record frame: {e}") from None
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        raise MetadataParseError(f"unknown metadata record type {api_key}")
    lo, hi = cls.valid_versions
    if not lo <= version <= hi:
        raise MetadataParseError(f"{cls.__name__} version {version} is outside {lo}-{hi}")
    fields = schema_of(cls)
    try:
        r2 = Reader(data, r.pos)
        body = read_struct(r2, fields, version, True)
    except (WireFormatError, ValueError) as e:
        raise MetadataParseError(f"unreadable {cls.__name__} v{version}: {e}") from None
    if r2.pos != len(data):
        raise MetadataParseError(f"{len(data) - r2.pos} byte(s) of garbage after {cls.__name__}")
    return from_wire(cls, body, version), version


__all__ = ["FRAME_VERSION", "MetadataParseError", "deserialize", "serialize"]
