"""Kafka's kafka-configs ``--describe`` for topics and brokers, and config tables for the book, both read
from the keys' declarations (``kafkalite.config``): the broker answers DescribeConfigs with each key's type
and documentation from them, ``config_table`` prints a component's keys, and ``settings_table`` (shown by
``show_settings`` in a chapter) the keys a chapter names, whichever component declares them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kafkalite.config.base import ConfigKey, describe_keys
from kafkalite.config.broker import TOPIC_KEY_SYNONYMS, BrokerConfig
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.config.kraft import KRaftConfig
from kafkalite.config.producer import ProducerConfig
from kafkalite.config.topic import TOPIC_KEYS
from kafkalite.errors import InvalidConfigError
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


_HEADER = ("key", "type", "default", "valid values", "what it sets", "kafkalite acts on it")


def _markdown(rows: Iterable[tuple[str | None, ConfigKey]]) -> str:
    """Markdown table lines for ``(component, key)`` pairs; a component column when any is given."""
    rows = list(rows)
    with_component = any(component for component, _ in rows)
    header = ("component", *_HEADER) if with_component else _HEADER
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for component, spec in rows:
        r = describe_keys({spec.name: spec})[0]
        cells = (f"`{r['name']}`", r["type"], "null" if r["default"] is None else f"`{r['default']}`", r["valid"],
                 r["doc"], "yes" if r["acted_on"] else "no (stored, validated, described)")  # fmt: skip
        if with_component:
            cells = (component or "", *cells)
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def config_table(keys: Mapping[str, ConfigKey]) -> str:
    """A Markdown table of declared keys: name, type, default, valid values, what it does, acted on."""
    return _markdown((None, spec) for spec in keys.values())


# ------------------------------------------------------------------------------- a chapter's settings

#: The components whose keys kafkalite declares, as Kafka's documentation groups them. The broker's include
#: the KRaft keys (``process.roles``, ``node.id``, ``controller.quorum.voters``, ...), which kafkalite
#: declares apart (``KRaftConfig``) and Kafka's documentation lists among the broker configs.
COMPONENTS = ("topic", "broker", "producer", "consumer")


def component_keys(component: str) -> dict[str, ConfigKey]:
    """Every key ``component`` declares, by Kafka name; the broker's are ``BrokerConfig``'s and
    ``KRaftConfig``'s. A broker also takes the broker-level default of a
    topic key under Kafka's broker name (``log.flush.interval.messages`` for ``flush.messages``): that name
    is the topic key's declaration, renamed, unless the broker declares the key itself."""
    if component == "topic":
        return dict(TOPIC_KEYS)
    if component == "producer":
        return dict(ProducerConfig.config_keys())
    if component == "consumer":
        return dict(ConsumerConfig.config_keys())
    if component == "broker":
        keys = {**BrokerConfig.config_keys(), **KRaftConfig.config_keys()}
        for topic_key, broker_key in TOPIC_KEY_SYNONYMS.items():
            if broker_key not in keys:
                spec = TOPIC_KEYS[topic_key]
                doc = f"{spec.doc} (Broker default of topic key {topic_key}.)"
                keys[broker_key] = replace(spec, name=broker_key, doc=doc)
        return keys
    raise InvalidConfigError(f"unknown config component {component!r}; one of {', '.join(COMPONENTS)}")


def declared_setting(name: str) -> tuple[str, ConfigKey]:
    """``(component, key)`` for ``"component:key"`` (``"producer:acks"``), or for a bare Kafka key name that
    exactly one component declares; a name several declare (``min.insync.replicas``: topic and broker) must
    say which. An unknown or ambiguous name is an ``InvalidConfigError`` naming it."""
    component, sep, key_name = name.partition(":")
    if sep:
        spec = component_keys(component).get(key_name)
        if spec is None:
            raise InvalidConfigError(f"config key {key_name!r} is not declared for the {component}")
        return component, spec
    found = [(c, keys[name]) for c in COMPONENTS if name in (keys := component_keys(c))]
    if not found:
        raise InvalidConfigError(f"config key {name!r} is not declared by any of {', '.join(COMPONENTS)}")
    if len(found) > 1:
        which = ", ".join(f"{c}:{name}" for c, _ in found)
        raise InvalidConfigError(f"config key {name!r} is declared by several components: say {which}")
    return found[0]


def settings_table(*names: str) -> str:
    """A Markdown table of the keys ``names`` (see ``declared_setting``), in the order given."""
    return _markdown(declared_setting(name) for name in names)


def show_settings(*names: str) -> Any:
    """``settings_table`` as an IPython ``Markdown`` object, which a chapter's page renders as a table."""
    from IPython.display import Markdown

    return Markdown(settings_table(*names))


__all__ = [
    "COMPONENTS",
    "component_keys",
    "config_table",
    "declared_setting",
    "format_describe_configs",
    "settings_table",
    "show_settings",
]
