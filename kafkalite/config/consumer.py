"""Consumer configuration with Kafka's key names, defaults and validation.

``ConsumerConfig.from_props`` takes a dict of Kafka keys (``"fetch.max.wait.ms"``); Python-style keys
(``fetch_max_wait_ms``) are accepted too, so ``Cluster.consumer(max_poll_records=10)`` works. An unknown
key or a bad value raises ``InvalidConfigError`` naming the key. Defaults are Kafka's.

``isolation.level=read_committed`` reads only up to the last stable offset and drops the records of
aborted transactions (the brokers list them in each fetch answer), as Kafka's consumer does.

Group keys: ``group.id`` (None: no group, so no commits and no ``subscribe``), ``group.instance.id``
(static membership), ``enable.auto.commit`` (true, but forced off without a ``group.id``, as Kafka does),
``auto.commit.interval.ms``, ``session.timeout.ms``, ``heartbeat.interval.ms`` (must be below the session
timeout), ``max.poll.interval.ms`` and ``partition.assignment.strategy``: a list (or comma-separated
string) of assignors by kafkalite name (``range``), Kafka class name
(``org.apache.kafka.clients.consumer.RangeAssignor``), class or instance, in order of preference.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.config.base import merge_props, parse_bool, parse_choice, parse_int
from kafkalite.errors import InvalidConfigError

__all__ = ["CONSUMER_DEFAULTS", "ConsumerConfig"]

#: Every key kafkalite's consumer understands, with Kafka's default.
CONSUMER_DEFAULTS: dict[str, Any] = {
    "client.id": "",
    "bootstrap.servers": None,  # the Consumer's ``bootstrap`` argument wins; kept for real-client parity
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
    "max.poll.records": 500,
    "auto.offset.reset": "latest",
    "request.timeout.ms": 30_000,
    "default.api.timeout.ms": 60_000,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 300_000,
    "isolation.level": "read_uncommitted",
    "check.crcs": True,
    "group.id": None,
    "group.instance.id": None,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5_000,
    "session.timeout.ms": 45_000,
    "heartbeat.interval.ms": 3_000,
    "max.poll.interval.ms": 300_000,
    "partition.assignment.strategy": ("range", "cooperative-sticky"),
    "allow.auto.create.topics": True,
    "exclude.internal.topics": True,
}

_INT_KEYS = {
    "fetch.min.bytes": 0,
    "fetch.max.wait.ms": 0,
    "fetch.max.bytes": 0,
    "max.partition.fetch.bytes": 0,
    "max.poll.records": 1,
    "request.timeout.ms": 1,
    "default.api.timeout.ms": 0,
    "retry.backoff.ms": 0,
    "metadata.max.age.ms": 0,
    "auto.commit.interval.ms": 0,
    "session.timeout.ms": 1,
    "heartbeat.interval.ms": 1,
    "max.poll.interval.ms": 1,
}
_JAVA_PACKAGE = "org.apache.kafka.clients.consumer."
_JAVA_CLASSES = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "StickyAssignor": "sticky",
    "CooperativeStickyAssignor": "cooperative-sticky",
}
# Kafka's partition.assignment.strategy names classes the consumer instantiates by reflection; kafkalite's
# built-in names resolve the same way, by name in the client's assignors module, so this config (a layer
# below the client) never imports the client.
_ASSIGNORS_MODULE = "kafkalite.client.assignors"
_BUILT_IN_ASSIGNORS = {name: cls for cls, name in _JAVA_CLASSES.items()}
_RESETS = ("earliest", "latest", "none")
_ISOLATION = tuple(level.config_name for level in IsolationLevel)


@dataclass(frozen=True)
class ConsumerConfig:
    """Validated consumer settings: ``props`` keeps every key (Kafka names), typed attributes the rest."""

    props: dict[str, Any] = field(default_factory=lambda: dict(CONSUMER_DEFAULTS))
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    max_poll_records: int = 500
    auto_offset_reset: str = "latest"
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300_000
    check_crcs: bool = True
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    """``isolation.level`` as the enum a Fetch or ListOffsets request carries."""
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = False
    auto_commit_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    assignors: tuple[Any, ...] = ()
    """Assignor instances, in order of preference (from ``partition.assignment.strategy``)."""
    allow_auto_create_topics: bool = True
    exclude_internal_topics: bool = True

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> ConsumerConfig:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        props, _given = merge_props("consumer", CONSUMER_DEFAULTS, config)
        for key, minimum in _INT_KEYS.items():
            props[key] = parse_int(key, props[key], low=minimum)
        props["check.crcs"] = parse_bool("check.crcs", props["check.crcs"])
        props["auto.offset.reset"] = parse_choice("auto.offset.reset", props["auto.offset.reset"], _RESETS)
        props["isolation.level"] = parse_choice("isolation.level", props["isolation.level"], _ISOLATION)
        isolation = IsolationLevel.parse(props["isolation.level"])
        if not isinstance(props["client.id"], str):
            raise InvalidConfigError(f"client.id must be a string, got {props['client.id']!r}")
        for key in ("group.id", "group.instance.id"):
            if props[key] is not None and not isinstance(props[key], str):
                raise InvalidConfigError(f"{key} must be a string or None, got {props[key]!r}")
        if props["group.instance.id"] == "":
            raise InvalidConfigError("group.instance.id must not be empty (None for a dynamic member)")
        for key in ("enable.auto.commit", "allow.auto.create.topics", "exclude.internal.topics"):
            props[key] = parse_bool(key, props[key])
        if props["group.id"] is None:
            if "enable.auto.commit" in _given and props["enable.auto.commit"]:
                raise InvalidConfigError(
                    "enable.auto.commit cannot be set to true when no group.id is given (commits need a group)"
                )
            props["enable.auto.commit"] = False
            if props["group.instance.id"] is not None:
                raise InvalidConfigError("group.instance.id needs a group.id")
        if props["heartbeat.interval.ms"] >= props["session.timeout.ms"]:
            raise InvalidConfigError(
                f"heartbeat.interval.ms ({props['heartbeat.interval.ms']}) must be lower than "
                f"session.timeout.ms ({props['session.timeout.ms']})"
            )
        assignors = parse_assignors(props["partition.assignment.strategy"])
        return cls(
            props=props,
            fetch_min_bytes=props["fetch.min.bytes"],
            fetch_max_wait_ms=props["fetch.max.wait.ms"],
            fetch_max_bytes=props["fetch.max.bytes"],
            max_partition_fetch_bytes=props["max.partition.fetch.bytes"],
            max_poll_records=props["max.poll.records"],
            auto_offset_reset=props["auto.offset.reset"],
            request_timeout_ms=props["request.timeout.ms"],
            default_api_timeout_ms=props["default.api.timeout.ms"],
            retry_backoff_ms=props["retry.backoff.ms"],
            metadata_max_age_ms=props["metadata.max.age.ms"],
            check_crcs=props["check.crcs"],
            isolation_level=isolation,
            group_id=props["group.id"],
            group_instance_id=props["group.instance.id"],
            enable_auto_commit=props["enable.auto.commit"],
            auto_commit_interval_ms=props["auto.commit.interval.ms"],
            session_timeout_ms=props["session.timeout.ms"],
            heartbeat_interval_ms=props["heartbeat.interval.ms"],
            max_poll_interval_ms=props["max.poll.interval.ms"],
            assignors=assignors,
            allow_auto_create_topics=props["allow.auto.create.topics"],
            exclude_internal_topics=props["exclude.internal.topics"],
        )

    def __getitem__(self, key: str) -> Any:
        return self.props[key]


def parse_assignors(value: Any) -> tuple[Any, ...]:
    """``partition.assignment.strategy`` -> assignor instances; a clear error names what is unknown."""
    key = "partition.assignment.strategy"
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value or ())
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        items = [v for v in items if v != ""]
    if not items:
        raise InvalidConfigError(f"{key} must name at least one assignor")
    out = []
    for item in items:
        if isinstance(item, str):
            name = item
            if name.startswith(_JAVA_PACKAGE):
                name = _JAVA_CLASSES.get(name[len(_JAVA_PACKAGE) :], name)
            name = _JAVA_CLASSES.get(name, name)
            cls_name = _BUILT_IN_ASSIGNORS.get(name)
            if cls_name is None:
                raise InvalidConfigError(
                    f"{key}: unknown assignor {item!r}; valid: {', '.join(_BUILT_IN_ASSIGNORS)} "
                    "or their Kafka class names"
                )
            out.append(getattr(importlib.import_module(_ASSIGNORS_MODULE), cls_name)())
        elif isinstance(item, type):
            if not hasattr(item, "assign") or not isinstance(getattr(item, "name", None), str):
                raise InvalidConfigError(f"{key}: {item!r} is not an assignor class (needs name and assign)")
            out.append(item())
        else:
            if not hasattr(item, "assign") or not isinstance(getattr(item, "name", None), str):
                raise InvalidConfigError(f"{key}: {item!r} is not an assignor (needs name and assign)")
            out.append(item)
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"{key} names an assignor twice: {names}")
    return tuple(out)
