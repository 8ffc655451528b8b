"""One description per message: a request or response dataclass whose fields say how they go on the wire.

A message class in ``kafkalite.protocol`` declares each wire field once, as a dataclass field built by
``wire`` (a primitive, an array of primitives, a struct or an array of structs, with Kafka's field name,
version range, nullability and tag), ``wire_partition`` (the partition index of an entry whose topic sits one
level up), ``wire_by_topic`` (Kafka's ``[{topic, [partition entry]}]``, kept as one flat tuple of entries
with a ``TopicPartition`` each) or ``wire_partitions`` (``[{topic, [partition index]}]`` as a tuple of
``TopicPartition``). From that one declaration this module derives the wire schema (``schema_of``, in
``kafkalite.protocol.codec.schema``'s form, which the codec reads and writes) and the two conversions between
the codec's dicts and the dataclasses (``from_wire``, ``to_wire``). Adding a field is one edit.

A field with no ``wire`` declaration is kafkalite's own (the simulator uses it; the wire never carries it).
Where Kafka's message changed shape between versions in a way a field declaration cannot say (LeaveGroup's
single member before v3, for instance), the class adds a ``wire_in`` classmethod and/or a ``wire_out`` method:
``wire_in(cls, kwargs, body, version)`` adjusts the constructor's arguments after the generic conversion,
``wire_out(self, body, version)`` adjusts the dict before it is encoded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import MISSING
from typing import Any

from kafkalite.protocol.codec.schema import NULL, PRIMITIVES, Field, _range
from kafkalite.protocol.topic_partition import TopicPartition

_META = "wire"
_ABSENT = object()

# Kinds of wire binding.
_PLAIN, _PRIMS, _STRUCT, _STRUCTS, _PARTITION, _BY_TOPIC, _TPS = range(7)


@dataclasses.dataclass(frozen=True)
class Binding:
    """How one dataclass attribute is carried on the wire."""

    kind: int
    type: str = ""
    versions: str = "0+"
    name: str | None = None
    nullable: str = ""
    tag: int | None = None
    wire_default: Any = None
    items: type | None = None
    topic: str = ""
    partitions: str = ""
    renames: Mapping[str, str] | None = None
    unwrap: str | tuple[str, ...] | None = None


def _field(default: Any, binding: Binding) -> Any:
    if default is MISSING:
        return dataclasses.field(metadata={_META: binding})
    return dataclasses.field(default=default, metadata={_META: binding})


def wire(
    type: str,
    versions: str = "0+",
    default: Any = MISSING,
    *,
    name: str | None = None,
    nullable: str = "",
    tag: int | None = None,
    wire_default: Any = None,
    items: type | None = None,
    renames: Mapping[str, str] | None = None,
    unwrap: str | tuple[str, ...] | None = None,
) -> Any:
    """A wire field: a primitive (``"int32"``), an array of primitives (``"[]int32"``), a ``"struct"`` or
    an array of structs (``"[]struct"``) of the message class ``items``. ``name`` is Kafka's field name
    where it differs from the attribute's; ``wire_default`` the value Kafka's schema gives an absent field
    where it differs from the dataclass default; ``renames`` gives the items' fields other Kafka names in
    this message (one entry class serves several APIs). ``unwrap`` keeps an array of structs as plain
    values: each item's one field (``"name"``), or a tuple of its fields (``("name", "value")``)."""
    if type in ("struct", "[]struct"):
        if items is None:
            raise ValueError(f"{name or type}: a struct field needs its items class")
        kind = _STRUCT if type == "struct" else _STRUCTS
    else:
        base = type[2:] if type.startswith("[]") else type
        if base not in PRIMITIVES:
            raise ValueError(f"{name}: unknown wire type {type!r}")
        kind = _PRIMS if type.startswith("[]") else _PLAIN
    if unwrap is not None and kind != _STRUCTS:
        raise ValueError(f"{name or type}: only an array of structs unwraps")
    binding = Binding(
        kind, type, versions, name, nullable, tag, wire_default, items, renames=renames, unwrap=unwrap
    )
    return _field(default, binding)


def wire_partition(name: str = "partition_index") -> Any:
    """The ``tp`` of an entry in a ``wire_by_topic`` list: on the wire its partition index, named ``name``,
    with the topic name one level up."""
    return dataclasses.field(metadata={_META: Binding(_PARTITION, "int32", name=name)})


def wire_by_topic(
    name: str,
    items: type,
    versions: str = "0+",
    default: Any = (),
    *,
    topic: str = "name",
    partitions: str = "partitions",
    nullable: str = "",
    renames: Mapping[str, str] | None = None,
) -> Any:
    """Kafka's ``name: [{topic, partitions: [entry]}]`` as one flat tuple of ``items`` entries."""
    return _field(
        default, Binding(_BY_TOPIC, "[]struct", versions, name, nullable, None, None, items, topic, partitions,
                         renames),
    )  # fmt: skip


def wire_partitions(
    name: str,
    versions: str = "0+",
    default: Any = (),
    *,
    topic: str = "name",
    partitions: str = "partitions",
    nullable: str = "",
) -> Any:
    """Kafka's ``name: [{topic, partitions: [int32]}]`` as a flat tuple of ``TopicPartition``."""
    return _field(
        default, Binding(_TPS, "[]struct", versions, name, nullable, None, None, None, topic, partitions)
    )


# ------------------------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class _Step:
    attr: str
    wname: str
    b: Binding


_PLANS: dict[tuple[type, Any], tuple[_Step, ...]] = {}
_SCHEMAS: dict[tuple[type, Any], tuple[Field, ...]] = {}


def _renames_key(renames: Mapping[str, str] | None) -> Any:
    return None if not renames else tuple(sorted(renames.items()))


def plan_of(cls: type, renames: Mapping[str, str] | None = None) -> tuple[_Step, ...]:
    """The wire fields of ``cls`` in declaration order (which is Kafka's field order)."""
    key = (cls, _renames_key(renames))
    plan = _PLANS.get(key)
    if plan is None:
        steps = []
        for f in dataclasses.fields(cls):
            b = f.metadata.get(_META)
            if b is None:
                continue
            wname = (renames or {}).get(f.name) or b.name or f.name
            steps.append(_Step(f.name, wname, b))
        plan = _PLANS[key] = tuple(steps)
    return plan


def _default_of(cls: type, attr: str, b: Binding) -> Any:
    if b.wire_default is not None:
        return b.wire_default
    for f in dataclasses.fields(cls):
        if f.name == attr:
            d = f.default
            if d is None and b.nullable:
                return NULL  # absent in an older version means null, as in Kafka's generated code
            if d is MISSING or isinstance(d, tuple) or d is None:
                return None
            if b.kind == _PLAIN and b.type in ("bytes", "records"):
                return None  # Kafka's schemas default bytes to null / empty alike; the codec writes b""
            return d
    return None


def schema_of(cls: type, renames: Mapping[str, str] | None = None) -> tuple[Field, ...]:
    """The wire schema (``kafkalite.protocol.codec.schema`` fields) the declarations of ``cls`` describe."""
    key = (cls, _renames_key(renames))
    schema = _SCHEMAS.get(key)
    if schema is not None:
        return schema
    out = []
    for s in plan_of(cls, renames):
        b = s.b
        vers, null = _range(b.versions), _range(b.nullable)
        if b.kind in (_PLAIN, _PRIMS):
            out.append(Field(s.wname, b.type, vers, (), null, b.tag, _default_of(cls, s.attr, b)))
        elif b.kind == _PARTITION:
            out.append(Field(s.wname, "int32", (0, 0x7FFF), (), (1, 0), None, None))
        elif b.kind in (_STRUCT, _STRUCTS):
            inner = schema_of(b.items, b.renames)  # type: ignore[arg-type]
            out.append(Field(s.wname, b.type, vers, inner, null, b.tag, None))
        else:
            part = (
                Field(b.partitions, "[]int32", vers)
                if b.kind == _TPS
                else Field(b.partitions, "[]struct", vers, schema_of(b.items, b.renames))  # type: ignore[arg-type]
            )
            topic = (Field(b.topic, "string", vers), part)
            out.append(Field(s.wname, "[]struct", vers, topic, null, None, None))
    schema = _SCHEMAS[key] = tuple(out)
    return schema


# ---------------------------------------------------------------------------------------- conversions
#
# Each (class, renames) gets two small functions generated from its plan, the first time it is converted:
# the listener converts every request and response, and a walk over the plan per message would cost
# several times the hand-written adapters these declarations replaced.

_READERS: dict[tuple[type, Any], Any] = {}
_WRITERS: dict[tuple[type, Any], Any] = {}


def from_wire(cls: type, body: dict, version: int, renames: Mapping[str, str] | None = None,
              topic: str | None = None) -> Any:  # fmt: skip
    """The ``cls`` instance a decoded wire dict describes (``topic``: the enclosing topic's name). A field
    missing from ``body`` (the schema it was read with lacks it) keeps its dataclass default."""
    key = (cls, _renames_key(renames))
    fn = _READERS.get(key) or _compile_reader(cls, renames, key)
    return fn(body, version, topic)


def to_wire(msg: Any, version: int, renames: Mapping[str, str] | None = None) -> dict:
    """The wire dict of a message, ready for the codec's ``encode``."""
    key = (type(msg), _renames_key(renames))
    fn = _WRITERS.get(key) or _compile_writer(type(msg), renames, key)
    return fn(msg, version)


def _compile_reader(cls: type, renames: Mapping[str, str] | None, key: Any) -> Any:
    ns: dict[str, Any] = {"_A": _ABSENT, "TP": TopicPartition, "cls": cls, "_plain": _plain}
    lines = ["def read(body, version, topic):", "    kw = {}", "    get = body.get"]
    for n, s in enumerate(plan_of(cls, renames)):
        b, a = s.b, repr(s.attr)
        if b.kind == _PARTITION:
            lines.append(f"    kw[{a}] = TP(topic, body[{s.wname!r}])")
            continue
        lines += [f"    v = get({s.wname!r}, _A)", "    if v is not _A:"]
        if b.kind == _PLAIN:
            lines.append(f"        kw[{a}] = v")
            continue
        if b.kind in (_STRUCT, _STRUCTS, _BY_TOPIC):
            ns[f"R{n}"] = _reader_of(b.items, b.renames)  # type: ignore[arg-type]
        if b.kind == _PRIMS:
            expr = "tuple(v)"
        elif b.kind == _STRUCT:
            expr = f"R{n}(v, version, None)"
        elif b.kind == _STRUCTS and b.unwrap is None:
            expr = f"tuple([R{n}(x, version, None) for x in v])"
        elif b.kind == _STRUCTS and isinstance(b.unwrap, str):
            expr = f"tuple([_plain(x[{b.unwrap!r}]) for x in v])"
        elif b.kind == _STRUCTS:
            inner = ", ".join(f"_plain(x[{f!r}])" for f in b.unwrap)  # type: ignore[union-attr]
            expr = f"tuple([({inner},) for x in v])"
        elif b.kind == _BY_TOPIC:
            expr = f"tuple([R{n}(p, version, t[{b.topic!r}]) for t in v for p in t[{b.partitions!r}]])"
        else:
            expr = f"tuple([TP(t[{b.topic!r}], i) for t in v for i in t[{b.partitions!r}]])"
        lines.append(f"        kw[{a}] = None if v is None else {expr}")
    if getattr(cls, "wire_in", None) is not None:
        lines.append("    kw = cls.wire_in(kw, body, version)")
    lines.append("    return cls(**kw)")
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the class's own declarations
    _READERS[key] = ns["read"]
    return ns["read"]


def _reader_of(cls: type, renames: Mapping[str, str] | None) -> Any:
    key = (cls, _renames_key(renames))
    return _READERS.get(key) or _compile_reader(cls, renames, key)


def _writer_of(cls: type, renames: Mapping[str, str] | None) -> Any:
    key = (cls, _renames_key(renames))
    return _WRITERS.get(key) or _compile_writer(cls, renames, key)


def _compile_writer(cls: type, renames: Mapping[str, str] | None, key: Any) -> Any:
    ns: dict[str, Any] = {"_listed": _listed, "_bytes": _bytes, "_group": _group, "_group_tps": _group_tps}
    lines = ["def write(msg, version):", "    d = {}"]
    for n, s in enumerate(plan_of(cls, renames)):
        b, w = s.b, repr(s.wname)
        v = f"msg.{s.attr}"
        if b.kind == _PLAIN:
            conv = f"_bytes({v})" if b.type in ("bytes", "records") else v
            lines.append(f"    d[{w}] = {conv}")
            continue
        if b.kind == _PARTITION:
            lines.append(f"    d[{w}] = {v}.partition")
            continue
        if b.kind in (_STRUCT, _STRUCTS, _BY_TOPIC):
            ns[f"W{n}"] = _writer_of(b.items, b.renames)  # type: ignore[arg-type]
        if b.kind == _PRIMS:
            expr = "list(v)"
        elif b.kind == _STRUCT:
            expr = f"W{n}(v, version)"
        elif b.kind == _STRUCTS and b.unwrap is None:
            expr = f"[W{n}(x, version) for x in v]"
        elif b.kind == _STRUCTS and isinstance(b.unwrap, str):
            expr = f"[{{{b.unwrap!r}: _listed(x)}} for x in v]"
        elif b.kind == _STRUCTS:
            inner = ", ".join(f"{f!r}: _listed(x[{i}])" for i, f in enumerate(b.unwrap))  # type: ignore[arg-type]
            expr = f"[{{{inner}}} for x in v]"
        elif b.kind == _BY_TOPIC:
            expr = f"_group(v, W{n}, version, {b.topic!r}, {b.partitions!r})"
        else:
            expr = f"_group_tps(v, {b.topic!r}, {b.partitions!r})"
        lines += [f"    v = {v}", f"    d[{w}] = None if v is None else {expr}"]
    if getattr(cls, "wire_out", None) is not None:
        lines.append("    msg.wire_out(d, version)")
    lines.append("    return d")
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the class's own declarations
    _WRITERS[key] = ns["write"]
    return ns["write"]


def _plain(value: Any) -> Any:
    """An unwrapped item's value as the dataclass keeps it: arrays as tuples."""
    return tuple(value) if isinstance(value, list) else value


def _listed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _bytes(value: Any) -> Any:
    """Bytes as bytes; a file slice left as it is, for the sender to ``sendfile``."""
    return bytes(value) if isinstance(value, bytearray | memoryview) else value


def _group(entries: Any, write: Any, version: int, topic: str, partitions: str) -> list[dict]:
    """Entries regrouped by topic, in the order each topic first appears."""
    out: dict[str, list] = {}
    for e in entries:
        tp = e.tp
        got = out.get(tp.topic)
        if got is None:
            got = out[tp.topic] = []
        got.append(write(e, version))
    return [{topic: t, partitions: ps} for t, ps in out.items()]


def _group_tps(tps: Any, topic: str, partitions: str) -> list[dict]:
    out: dict[str, list] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return [{topic: t, partitions: ps} for t, ps in out.items()]
