"""Kafka's kafka-configs ``--describe`` for topics and brokers, and config tables for the book, both read
from the keys' declarations (``kafkalite.config``): the broker answers DescribeConfigs with each key's type
and documentation from them, and ``config_table`` prints them directly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafkalite.config.base import ConfigKey, describe_keys
from kafkalite.protocol import ConfigSource

_SOURCES = {s.value: s.name for s in ConfigSource}
_DYNAMIC = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG,
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
}


def _value(c: Mapping[str, Any]) -> str:
    return "null" if c.get("value") is None else str(c["value"])


def format_describe_configs(kind: str, name: str, configs: Sequence[Mapping[str, Any]], every: bool) -> str:
    """kafka-configs' answer: ``key=value sensitive=false synonyms={SOURCE:key=value, ...}`` per key, only
    the dynamic (overridden) ones unless ``every`` (``--all``)."""
    lines = [f"{'All' if every else 'Dynamic'} configs for {kind} {name} are:"]
    for c in sorted(configs, key=lambda c: c["name"]):
        if not every and c.get("config_source") not in _DYNAMIC:
            continue
        synonyms = ", ".join(
            f"{_SOURCES.get(s['source'], s['source'])}:{s['name']}={_value(s)}"
            for s in c.get("synonyms") or ()
        )
        sensitive = "true" if c.get("is_sensitive") else "false"
        lines.append(f"  {c['name']}={_value(c)} sensitive={sensitive} synonyms={{{synonyms}}}")
    return "\n".join(lines)


def config_table(keys: Mapping[str, ConfigKey]) -> str:
    """A Markdown table of declared keys: name, type, default, valid values, what it does, acted on."""
    rows = ["| key | type | default | valid values | what it sets | kafkalite acts on it |", "|---" * 6 + "|"]
    for r in describe_keys(keys):
        cells = (f"`{r['name']}`", r["type"], "null" if r["default"] is None else f"`{r['default']}`", r["valid"],
                 r["doc"], "yes" if r["acted_on"] else "no (stored, validated, described)")  # fmt: skip
        rows.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


__all__ = ["config_table", "format_describe_configs"]
