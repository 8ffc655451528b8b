"""Typed configuration values, parsed the way Kafka's ConfigDef parses them.

Kafka reads every setting from properties, so a value may arrive as a string (``"16384"``,
``"true"``) or as a Python value; booleans are never numbers, and a bad value is an
``InvalidConfigError`` that names the key, the value and what is allowed. The broker, topic (log)
and producer configurations all parse through these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
