"""Typed configuration values, parsed the way Kafka's ConfigDef parses them.

Kafka reads every setting from properties, so a value may arrive as a string (``"16384"``,
``"true"``) or as a Python value; booleans are never numbers, and a bad value is an
``InvalidConfigError`` that names the key, the value and what is allowed. The broker, topic (log)
and producer configurations all parse through these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from kafkalite.errors import InvalidConfigError


def invalid(key: str, value: Any, why: str, allowed: str | None = None) -> InvalidConfigError:
    """The error for a bad ``value`` of ``key``."""
    tail = f"; allowed: {allowed}" if allowed else ""
    return InvalidConfigError(f"invalid value {value!r} for {key!r}: {why}{tail}")


def parse_bool(key: str, value: Any) -> bool:
    """``True``/``False`` or the strings ``true``/``false`` in any case, as Kafka's BOOLEAN type."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "false"):
        return text == "true"
    raise invalid(key, value, "expected true or false")


def _bounded(key: str, value: Any, num: float, low: float | None, high: float | None, allowed: str | None):
    if (low is not None and num < low) or (high is not None and num > high):
        if allowed is None:  # name the bounds, since the caller gave no "allowed" text that would
            allowed = " and ".join(
                p for p in (low is not None and f">= {low}", high is not None and f"<= {high}") if p
            )
        raise invalid(key, value, "out of range", allowed)
    return num


def parse_int(
    key: str, value: Any, *, low: int | None = None, high: int | None = None, allowed: str | None = None
) -> int:
    """An integer (a string of digits, or a float with no fraction), within ``[low, high]``."""
    if isinstance(value, bool):
        raise invalid(key, value, "expected an integer, not a boolean", allowed)
    try:
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError
            value = int(value)
        num = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise invalid(key, value, "expected an integer", allowed) from None
    return _bounded(key, value, num, low, high, allowed)


def parse_float(
    key: str, value: Any, *, low: float | None = None, high: float | None = None, allowed: str | None = None
) -> float:
    """A number within ``[low, high]``."""
    if isinstance(value, bool):
        raise invalid(key, value, "expected a number, not a boolean", allowed)
    try:
        num = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise invalid(key, value, "expected a number", allowed) from None
    return _bounded(key, value, num, low, high, allowed)


def parse_choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    """One of ``allowed`` (case and surrounding spaces ignored), returned in its canonical spelling."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in allowed:
        raise invalid(key, value, "not a recognised value", "one of " + ", ".join(allowed))
    return text


def merge_props(
    kind: str, defaults: Mapping[str, Any], config: Mapping[str, Any] | None
) -> tuple[dict, dict]:
    """``(props, given)``: ``config`` over ``defaults``, keys in Kafka's dotted names.

    A key may also be spelt with underscores (``linger_ms``) so that it can be passed as a Python
    keyword argument. An unknown key, or one given twice in two spellings, names itself in the error.
    """
    given: dict[str, Any] = {}
    for key, value in (config or {}).items():
        name = key if key in defaults else key.replace("_", ".")
        if name not in defaults:
            raise InvalidConfigError(f"unknown {kind} config {key!r}")
        if name in given:
            raise InvalidConfigError(f"{kind} config {name!r} given twice ({key!r})")
        given[name] = value
    return {**defaults, **given}, given


# ------------------------------------------------------------------------------------- declarations

#: Kafka's ConfigDef types (DescribeConfigs v3+ reports them): how a value is parsed and shown.
TYPES = ("BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_CONFIG_KEY = "kafkalite.config"


@dataclass(frozen=True)
class ConfigKey:
    """One setting, declared once: Kafka's name, type, default, valid values and a line of documentation.

    ``low``/``high`` bound a number, ``choices`` list a string's values (for a LIST, each element's),
    ``check`` parses what neither can say (it returns the canonical value or raises through ``invalid``).
    ``acted_on=False`` marks a key kafkalite stores, validates and describes but does not act on.
    ``attr`` is the Python attribute the declaring class gives it (filled in from the field's name).
    """

    name: str
    type: str
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False
    acted_on: bool = True
    check: Callable[[str, Any], Any] | None = None
    valid: str | None = None
    """What is allowed, in words, when ``check`` decides it."""
    attr: str = ""

    def allowed(self) -> str:
        """What values are valid, in the words error messages and descriptions use."""
        if self.valid is not None:
            return self.valid
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.type == "BOOLEAN":
            return "true or false"
        if self.type in ("INT", "SHORT", "LONG", "DOUBLE"):
            lo = "" if self.low is None else f">= {self.low}"
            hi = "" if self.high is None else f"<= {self.high}"
            what = "a number" if self.type == "DOUBLE" else "an integer"
            return f"{what} {' and '.join(p for p in (lo, hi) if p)}".strip()
        what = {"LIST": "a comma-separated list", "CLASS": "a class or callable"}.get(self.type, "a string")
        return what + (" or null" if self.nullable or self.default is None else "")

    def parse(self, value: Any) -> Any:
        """``value`` (a string as a ``.properties`` file gives it, or a Python value) as this key's type."""
        if value is None and (self.nullable or self.default is None):
            return None
        if self.check is not None:
            return self.check(self.name, value)
        if self.type == "BOOLEAN":
            return parse_bool(self.name, value)
        if self.type in ("INT", "SHORT", "LONG"):
            return parse_int(self.name, value, low=self.low, high=self.high, allowed=self.allowed())
        if self.type == "DOUBLE":
            return parse_float(self.name, value, low=self.low, high=self.high, allowed=self.allowed())
        if self.choices:
            text = value.strip() if isinstance(value, str) else None
            if text not in self.choices:
                raise invalid(self.name, value, "not a recognised value", self.allowed())
            return text
        if not isinstance(value, str):
            raise invalid(self.name, value, "expected a string", self.allowed())
        return value

    def render(self, value: Any) -> str | None:
        """A value as Kafka prints it (``true``, ``1024``, a comma-separated list)."""
        if value is None:
            return None
        if hasattr(value, "config_name"):  # an enum: as Kafka spells the setting (acks=all)
            return str(value.config_name)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)


def key(
    name: str,
    type: str,
    default: Any,
    doc: str,
    **spec: Any,
) -> Any:
    """Declare a config class's attribute as the Kafka key ``name`` (see ``ConfigKey``)."""
    if type not in TYPES:
        raise ValueError(f"unknown config type {type!r} for {name!r}")
    return field(default=default, metadata={_CONFIG_KEY: ConfigKey(name, type, default, doc, **spec)})


def declared_keys(cls: type) -> dict[str, ConfigKey]:
    """The keys a dataclass declares with ``key(...)``, by Kafka name, in declaration order."""
    cached = cls.__dict__.get("_declared_keys")
    if cached is None:
        cached = {}
        for f in fields(cls):
            spec = f.metadata.get(_CONFIG_KEY)
            if spec is not None:
                cached[spec.name] = replace(spec, attr=f.name)
        cls._declared_keys = cached  # type: ignore[attr-defined]
    return cached


class DeclaredConfig:
    """The base of a dataclass whose fields are declared with ``key(...)``.

    ``from_props`` parses Kafka-named keys (a field name works too), validates every value against its
    declaration and refuses an unknown key; ``to_props`` gives every key under its Kafka name; values set
    directly as keyword fields are parsed the same way, so a bad value never reaches a running component.
    """

    KIND: ClassVar[str] = "config"

    def __post_init__(self) -> None:
        for spec in declared_keys(type(self)).values():
            object.__setattr__(self, spec.attr, spec.parse(getattr(self, spec.attr)))

    @classmethod
    def config_keys(cls) -> dict[str, ConfigKey]:
        return declared_keys(cls)

    @classmethod
    def unknown(cls, name: str) -> InvalidConfigError:
        return InvalidConfigError(
            f"unknown {cls.KIND} config key {name!r}; valid keys are: {', '.join(sorted(cls.config_keys()))}"
        )

    @classmethod
    def parse_props(cls, props: Mapping[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for the class: each Kafka key parsed, an unknown key refused."""
        keys = cls.config_keys()
        by_attr = {spec.attr: spec for spec in keys.values()}
        merged: dict[str, Any] = dict(props or {})
        for name, value in overrides.items():
            merged[by_attr[name].name if name in by_attr else name] = value
        kwargs = {}
        for name, value in merged.items():
            spec = keys.get(name)
            if spec is None:
                raise cls.unknown(name)
            kwargs[spec.attr] = spec.parse(value)
        return kwargs

    def to_props(self) -> dict[str, Any]:
        """Every key under its Kafka name (``describe-configs`` style)."""
        return {name: getattr(self, spec.attr) for name, spec in self.config_keys().items()}

    def get(self, name: str) -> Any:
        """One value by its Kafka key name."""
        spec = self.config_keys().get(name)
        if spec is None:
            raise self.unknown(name)
        return getattr(self, spec.attr)


def describe_keys(keys: Mapping[str, ConfigKey]) -> list[dict[str, Any]]:
    """One row per key (name, type, default, valid values, documentation, acted on): a config table."""
    return [
        {
            "name": k.name,
            "type": k.type,
            "default": k.render(k.default),
            "valid": k.allowed(),
            "doc": k.doc,
            "acted_on": k.acted_on,
        }
        for k in keys.values()
    ]


def choice_of(*choices: str) -> Callable[[str, Any], str]:
    """A ``check`` for a client string key: one of ``choices``, case and surrounding spaces ignored."""
    return lambda name, value: parse_choice(name, value, choices)


def as_is(_name: str, value: Any) -> Any:
    """A ``check`` for a key whose value kafkalite passes on unparsed (a class, a list, an address)."""
    return value


def check_client_id(_name: str, value: Any) -> str:
    """The ``check`` of a client's ``client.id``: any string, the empty one included."""
    if not isinstance(value, str):
        raise InvalidConfigError(f"client.id must be a string, got {value!r}")
    return value


def prop_value(value: Any) -> Any:
    """A typed value as a client's ``props`` show it: an enum by its config spelling (``all``)."""
    return getattr(value, "config_name", value)


class ClientConfig(DeclaredConfig):
    """The base of the producer's and the consumer's configs: ``props`` holds every key under its Kafka name
    (enums spelt as in a ``.properties`` file); ``from_props`` also takes ``snake_case`` keys, so that they
    can be Python keyword arguments, and hands the parsed values and the keys given to ``check``, where a
    subclass applies the rules that tie keys together."""

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every key with Kafka's default, as ``props`` shows it."""
        return {name: prop_value(spec.default) for name, spec in cls.config_keys().items()}

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> Any:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        keys = cls.config_keys()
        props, given = merge_props(cls.KIND, {n: s.default for n, s in keys.items()}, config)
        for name, spec in keys.items():
            props[name] = spec.parse(props[name])
        extra = cls.check(props, given)
        return cls(**{spec.attr: props[name] for name, spec in keys.items()}, **extra)

    @classmethod
    def check(cls, props: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
        """Rules across keys: may change ``props`` (Kafka's derived defaults) and return non-key fields."""
        return {}

    @property
    def props(self) -> dict[str, Any]:
        return {name: prop_value(getattr(self, spec.attr)) for name, spec in self.config_keys().items()}

    def __getitem__(self, name: str) -> Any:
        spec = self.config_keys().get(name)
        if spec is None:
            raise KeyError(name)
        return prop_value(getattr(self, spec.attr))
