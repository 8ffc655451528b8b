"""A small declarative form of Kafka's message schemas and the generic codec that reads and writes it.

A message is a tuple of ``Field``s. A field exists in a range of versions, may be nullable from some
version on, may be a tagged field (flexible versions only, written only when it differs from its
default), and is a primitive, an array of primitives, a struct, or an array of structs. Flexible versions
(KIP-482) switch every string, bytes and array to its compact form and end every struct with a tagged
fields section; ``encode``/``decode`` do that by themselves.

Messages decode to plain dicts keyed by the snake_case field name (``"throttle_time_ms"``); a field absent
in the version read takes its default. ``records`` fields stay raw bytes: batches are never re-encoded
(and a writer may leave a file slice out, for the sender to ``sendfile``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalite.protocol.codec.types import Reader, WireFormatError, Writer

ANY = 0x7FFF  # "and every later version"
NULL = type("Null", (), {"__repr__": lambda self: "NULL"})()
"""A field default that is null (None itself means "the type's zero value")."""

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)


def _range(spec: str) -> tuple[int, int]:
    """``"3+"`` -> (3, ANY), ``"0-2"`` -> (0, 2), ``"1"`` -> (1, 1), ``""`` -> never."""
    if not spec:
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), ANY)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a primitive, "[]primitive", "struct" or "[]struct"
    versions: tuple[int, int]
    fields: tuple[Field, ...] = ()
    nullable: tuple[int, int] = (1, 0)
    tag: int | None = None
    default: Any = None

    def present(self, v: int) -> bool:
        return self.versions[0] <= v <= self.versions[1]

    def nullable_in(self, v: int) -> bool:
        return self.nullable[0] <= v <= self.nullable[1]

    def default_value(self) -> Any:
        if self.default is NULL:
            return None
        if self.default is not None:
            return self.default
        t = self.type
        if t.startswith("[]"):
            return []
        if t == "struct":
            return {f.name: f.default_value() for f in self.fields}
        if t in ("string",):
            return ""
        if t == "bool":
            return False
        if t in ("bytes", "records", "uuid"):
            return None
        if t == "float64":
            return 0.0
        return 0


def F(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    nullable: str = "",
    tag: int | None = None,
    default: Any = None,
) -> Field:
    """A primitive field, or an array of primitives (``"[]int32"``)."""
    base = type[2:] if type.startswith("[]") else type
    if base not in PRIMITIVES:
        raise ValueError(f"{name}: unknown type {type!r}")
    return Field(name, type, _range(versions), (), _range(nullable), tag, default)


def A(name: str, versions: str, fields: list[Field], *, nullable: str = "", tag: int | None = None) -> Field:
    """An array of structs."""
    return Field(name, "[]struct", _range(versions), tuple(fields), _range(nullable), tag)


def S(name: str, versions: str, fields: list[Field], *, tag: int | None = None) -> Field:
    """A single struct."""
    return Field(name, "struct", _range(versions), tuple(fields), (1, 0), tag)


@dataclass(frozen=True)
class MessageSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int  # ANY: no flexible version in the range served
    request: tuple[Field, ...]
    response: tuple[Field, ...]
    _unused: dict = field(default_factory=dict, compare=False, repr=False)

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from


# ------------------------------------------------------------------------------------------- decode


_FIXED_READ = {
    "int32": Reader.int32, "int16": Reader.int16, "int64": Reader.int64, "int8": Reader.int8,
    "bool": Reader.boolean, "uuid": Reader.uuid, "uint16": Reader.uint16, "uint32": Reader.uint32,
    "float64": Reader.float64,
}  # fmt: skip
_FIXED_WRITE = {
    "int32": Writer.int32, "int16": Writer.int16, "int64": Writer.int64, "int8": Writer.int8,
    "bool": Writer.boolean, "uuid": Writer.uuid, "uint16": Writer.uint16, "uint32": Writer.uint32,
    "float64": Writer.float64,
}  # fmt: skip


def _read_primitive(r: Reader, t: str, flexible: bool, nullable: bool) -> Any:
    fixed = _FIXED_READ.get(t)
    if fixed is not None:
        return fixed(r)
    if t == "string":
        return r.compact_string(nullable) if flexible else r.string(nullable)
    if t in ("bytes", "records"):
        return (
            r.compact_bytes(nullable or t == "records") if flexible else r.bytes_(nullable or t == "records")
        )
    raise WireFormatError(f"unknown type {t}")


def _read_value(r: Reader, f: Field, v: int, flexible: bool) -> Any:
    t = f.type
    nullable = f.nullable_in(v)
    if t == "struct":
        # A nullable struct is preceded by a presence byte: -1 null, 1 present (Kafka's generated code).
        if nullable and r.int8() < 0:
            return None
        return read_struct(r, f.fields, v, flexible)
    if t.startswith("[]"):
        n = r.array_length(flexible)
        if n < 0:
            if nullable:
                return None
            raise WireFormatError(f"{r.field}: null array in version {v}, where it is not nullable")
        if t == "[]struct":
            return [read_struct(r, f.fields, v, flexible) for _ in range(n)]
        base = t[2:]
        return [_read_primitive(r, base, flexible, False) for _ in range(n)]
    return _read_primitive(r, t, flexible, nullable)


def read_struct(r: Reader, fields: tuple[Field, ...], v: int, flexible: bool) -> dict:
    out: dict[str, Any] = {}
    tagged = None
    for f in fields:
        if f.tag is not None and flexible:
            if tagged is None:
                tagged = {}
            tagged[f.tag] = f
            out[f.name] = f.default_value()
            continue
        if not f.present(v):
            out[f.name] = f.default_value()
            continue
        r.field = f.name
        out[f.name] = _read_value(r, f, v, flexible)
    if flexible:
        r.field = "tagged fields"
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            f = tagged.get(tag) if tagged else None
            if f is None or not f.present(v):
                r.raw(size)  # a tag this version does not know: skip it
                continue
            end = r.pos + size
            sub = Reader(r.buf, r.pos)
            sub.end = end
            sub.field = f.name
            out[f.name] = _read_value(sub, f, v, flexible)
            r.pos = end
    return out


# ------------------------------------------------------------------------------------------- encode


def _write_primitive(w: Writer, t: str, value: Any, flexible: bool) -> None:
    fixed = _FIXED_WRITE.get(t)
    if fixed is not None:
        fixed(w, value)
    elif t == "string":
        (w.compact_string if flexible else w.string)(value)
    elif t == "records":
        w.records(value, flexible)
    elif t == "bytes":
        (w.compact_bytes if flexible else w.bytes_)(value)
    else:
        raise ValueError(f"unknown type {t}")


def _write_value(w: Writer, f: Field, value: Any, v: int, flexible: bool) -> None:
    t = f.type
    if t == "struct":
        if f.nullable_in(v):
            w.int8(-1 if value is None else 1)
            if value is None:
                return
        write_struct(w, f.fields, value or {}, v, flexible)
        return
    if t.startswith("[]"):
        if value is None:
            if not f.nullable_in(v):
                raise ValueError(f"{f.name}: null array in version {v}, where it is not nullable")
            w.array_length(None, flexible)
            return
        w.array_length(len(value), flexible)
        if t == "[]struct":
            for item in value:
                write_struct(w, f.fields, item, v, flexible)
        else:
            base = t[2:]
            for item in value:
                _write_primitive(w, base, item, flexible)
        return
    if value is None and t == "string" and not f.nullable_in(v):
        value = ""
    _write_primitive(w, t, value, flexible)


def write_struct(w: Writer, fields: tuple[Field, ...], data: dict, v: int, flexible: bool) -> None:
    tagged: list[tuple[Field, Any]] = []
    for f in fields:
        if not f.present(v):
            continue
        value = data.get(f.name)
        if value is None and f.name not in data:
            value = f.default_value()
        if f.tag is not None:
            # A struct left as None is absent: Kafka writes a tagged field only where it is set.
            if value is None and f.type == "struct":
                continue
            if flexible and value != f.default_value():
                tagged.append((f, value))
            continue
        _write_value(w, f, value, v, flexible)
    if flexible:
        w.uvarint(len(tagged))
        for f, value in sorted(tagged, key=lambda x: x[0].tag):
            sub = Writer()
            _write_value(sub, f, value, v, flexible)
            w.uvarint(f.tag)  # type: ignore[arg-type]
            w.uvarint(len(sub.buf))
            w.buf += sub.buf


def encode(fields: tuple[Field, ...], data: dict, version: int, flexible: bool) -> bytes:
    w = Writer()
    write_struct(w, fields, data, version, flexible)
    return bytes(w.buf)


def encode_into(w: Writer, fields: tuple[Field, ...], data: dict, version: int, flexible: bool) -> None:
    """``encode`` onto an existing writer (whose ``zero_copy`` and ``slices`` the caller reads)."""
    write_struct(w, fields, data, version, flexible)


def decode(fields: tuple[Field, ...], buf: bytes | memoryview, version: int, flexible: bool) -> dict:
    return read_struct(Reader(buf), fields, version, flexible)
