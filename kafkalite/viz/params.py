"""Range checks for a chapter's parameters cell.

papermill can inject any value into a chapter. A value the chapter cannot run with should stop it at
once, with an error that names the knob and what it accepts, not fail later in an unrelated cell::

    check_params(
        SEED=(SEED, int, 0, 2**32 - 1),
        LATENCY_MS=(LATENCY_MS, int, 1, 1_000),
        ACKS=(ACKS, [0, 1, "all"]),
    )

A spec is ``(value, kind, low, high)`` for a number or ``(value, choices)`` for one of a few values
(a list, so that the error lists them in a stable order);
``low`` and ``high`` are inclusive, and either may be ``None`` for no bound.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

Spec = tuple[Any, ...]


def check_param(
    name: str, value: Any, kind: type | tuple[type, ...], low: Any = None, high: Any = None
) -> None:
    """Raise ``ValueError`` unless ``value`` is a ``kind`` in ``[low, high]``.

    ``bool`` is not accepted as an ``int`` (``True`` is a mistake for a count), and an ``int`` is
    accepted where a ``float`` is asked for."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        kinds = (*kinds, int)
    wanted = _describe(kinds, low, high)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    if low is not None and value < low or high is not None and value > high:
        raise ValueError(f"{name} must be {wanted}, got {value!r}")


def check_choice(name: str, value: Any, choices: Collection[Any]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    # 1 == True in Python: compare types too, so that True is not taken for acks=1.
    if not any(value == c and type(value) is type(c) for c in choices):
        shown = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")


def check_params(**specs: Spec) -> None:
    """Check each ``NAME=(value, kind, low, high)`` or ``NAME=(value, choices)``; see the module."""
    for name, spec in specs.items():
        if len(spec) == 2 and not _is_kind(spec[1]):
            check_choice(name, spec[0], spec[1])
        elif 2 <= len(spec) <= 4:
            check_param(name, *spec)
        else:
            raise TypeError(f"{name}: a spec is (value, kind, low, high) or (value, choices), got {spec!r}")


def _is_kind(kind: Any) -> bool:
    if isinstance(kind, tuple):
        return bool(kind) and all(isinstance(k, type) for k in kind)
    return isinstance(kind, type)


def _describe(kinds: tuple[type, ...], low: Any, high: Any) -> str:
    shown = [k.__name__ for k in kinds if not (k is int and float in kinds)]
    what = " or ".join(dict.fromkeys(shown))
    if low is not None and high is not None:
        return f"{what} in [{low}, {high}]"
    if low is not None:
        return f"{what} >= {low}"
    if high is not None:
        return f"{what} <= {high}"
    return f"{what}"


__all__ = ["check_choice", "check_param", "check_params"]
