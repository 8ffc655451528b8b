"""Per-log configuration under Kafka's topic-level key names, with Kafka's defaults.

Values may arrive as strings (``"1024"``), as they do in a Kafka ``.properties`` file or an
AlterConfigs request; ``LogConfig.from_props`` parses and range-checks every one of them and names the
key and the allowed values when something is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kafkalite.config.base import invalid, parse_float, parse_int
from kafkalite.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

# Smallest segment that can hold anything: Kafka's floor is the legacy record overhead (14 bytes).
MIN_SEGMENT_BYTES = 14
OFFSET_INDEX_ENTRY = 8


@dataclass(frozen=True)
class LogConfig:
    """The settings one partition's log obeys. Build with ``from_props`` to get Kafka names and checks."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000

    def __post_init__(self) -> None:
        # Validate even when built directly, so a bad value can never reach a running log.
        for f in fields(self):
            spec = _SPECS[_KEY_FOR_FIELD[f.name]]
            object.__setattr__(self, f.name, spec.parse(_KEY_FOR_FIELD[f.name], getattr(self, f.name)))

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **overrides: Any) -> LogConfig:
        """Build from Kafka key names (``{"segment.bytes": "1024"}``); unknown keys are rejected."""
        merged: dict[str, Any] = dict(props or {})
        for name, value in overrides.items():
            merged[_KEY_FOR_FIELD.get(name, name)] = value
        kwargs = {}
        for key, value in merged.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise InvalidConfigError(
                    f"unknown log config key {key!r}; valid keys are: {', '.join(sorted(_SPECS))}"
                )
            kwargs[spec.field] = spec.parse(key, value)
        return cls(**kwargs)

    @classmethod
    def coerce(cls, config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        """Accept a LogConfig, a Kafka-style dict or None (all defaults)."""
        if isinstance(config, LogConfig):
            return config
        return cls.from_props(config)

    def to_props(self) -> dict[str, Any]:
        """The settings under Kafka key names (``describe-configs`` style)."""
        return {key: getattr(self, spec.field) for key, spec in _SPECS.items()}

    def get(self, key: str) -> Any:
        """One value by its Kafka key name."""
        spec = _SPECS.get(key)
        if spec is None:
            raise InvalidConfigError(
                f"unknown log config key {key!r}; valid keys are: {', '.join(sorted(_SPECS))}"
            )
        return getattr(self, spec.field)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with some keys changed (Kafka names), as a dynamic topic config update does."""
        merged = self.to_props()
        merged.update(props)
        return LogConfig.from_props(merged)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY


class _Spec:
    def __init__(
        self, field: str, kind: str, low: float | None = None, high: float | None = None, choices=()
    ):
        self.field, self.kind, self.low, self.high, self.choices = field, kind, low, high, choices

    def allowed(self) -> str:
        if self.kind == "str":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        lo = "" if self.low is None else f">= {self.low}"
        hi = "" if self.high is None else f"<= {self.high}"
        what = "an integer" if self.kind == "int" else "a number"
        return f"{what} {' and '.join(p for p in (lo, hi) if p)}".strip()

    def parse(self, key: str, value: Any):
        if self.kind == "int":
            return parse_int(key, value, low=self.low, high=self.high, allowed=self.allowed())
        if self.kind == "float":
            return parse_float(key, value, low=self.low, high=self.high, allowed=self.allowed())
        text = value.strip() if isinstance(value, str) else None
        if key == "cleanup.policy" and text is not None:
            # "delete,compact" and "compact, delete" mean the same policy: keep one spelling.
            parts = sorted({p.strip() for p in text.split(",") if p.strip()})
            text = "compact,delete" if parts == ["compact", "delete"] else ",".join(parts)
        if text not in self.choices:
            raise invalid(key, value, "not a recognised value", self.allowed())
        return text


_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("segment_bytes", "int", MIN_SEGMENT_BYTES, INT_MAX),
    "segment.ms": _Spec("segment_ms", "int", 1, LONG_MAX),
    "segment.index.bytes": _Spec("segment_index_bytes", "int", OFFSET_INDEX_ENTRY * 1, INT_MAX),
    "index.interval.bytes": _Spec("index_interval_bytes", "int", 0, INT_MAX),
    "flush.messages": _Spec("flush_messages", "int", 1, LONG_MAX),
    "flush.ms": _Spec("flush_ms", "int", 0, LONG_MAX),
    "retention.ms": _Spec("retention_ms", "int", -1, LONG_MAX),
    "retention.bytes": _Spec("retention_bytes", "int", -1, LONG_MAX),
    "cleanup.policy": _Spec("cleanup_policy", "str", choices=("delete", "compact", "compact,delete")),
    "delete.retention.ms": _Spec("delete_retention_ms", "int", 0, LONG_MAX),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", "float", 0.0, 1.0),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", "int", 0, LONG_MAX),
    "max.message.bytes": _Spec("max_message_bytes", "int", 0, INT_MAX),
    "message.timestamp.type": _Spec("message_timestamp_type", "str", choices=("CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": _Spec("message_timestamp_before_max_ms", "int", 0, LONG_MAX),
    "message.timestamp.after.max.ms": _Spec("message_timestamp_after_max_ms", "int", 0, LONG_MAX),
    "file.delete.delay.ms": _Spec("file_delete_delay_ms", "int", 0, LONG_MAX),
}
_KEY_FOR_FIELD = {spec.field: key for key, spec in _SPECS.items()}

__all__ = ["LONG_MAX", "LogConfig"]
