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

``group.protocol`` picks the group protocol, as in Kafka: ``classic`` (the default; JoinGroup/SyncGroup, the
leader assigns) or ``consumer`` (KIP-848; ConsumerGroupHeartbeat, the broker assigns with
``group.remote.assignor`` or its default). Under ``consumer`` the session timeout and heartbeat interval are
the broker's (``group.consumer.session.timeout.ms``, ``group.consumer.heartbeat.interval.ms``), so
``session.timeout.ms``, ``heartbeat.interval.ms`` and ``partition.assignment.strategy`` are not used.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.config.base import ClientConfig, as_is, check_client_id, choice_of, key, parse_choice
from kafkalite.errors import InvalidConfigError

__all__ = ["CONSUMER_DEFAULTS", "ConsumerConfig"]

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
_GROUP_PROTOCOLS = ("classic", "consumer")


def _isolation_level(name: str, value: Any) -> IsolationLevel:
    return IsolationLevel.parse(
        value if isinstance(value, IsolationLevel) else parse_choice(name, value, _ISOLATION)
    )


def _optional_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidConfigError(f"{name} must be a string or None, got {value!r}")
    return value


@dataclass(frozen=True)
class ConsumerConfig(ClientConfig):
    """Validated consumer settings: one typed attribute per key; ``props`` / ``cfg["group.id"]`` give them
    under Kafka's names."""

    KIND = "consumer"

    client_id: str = key(
        "client.id", "STRING", "", "A name for the consumer in the brokers' logs.", check=check_client_id
    )
    bootstrap_servers: Any = key(
        "bootstrap.servers", "LIST", None,
        "Brokers to find the cluster through (the Consumer's bootstrap argument wins).", check=as_is,
    )  # fmt: skip
    fetch_min_bytes: int = key(
        "fetch.min.bytes", "INT", 1, "Bytes a fetch waits for before it is answered.", low=0
    )
    fetch_max_wait_ms: int = key(
        "fetch.max.wait.ms", "INT", 500, "Longest a fetch waits at the broker for fetch.min.bytes.", low=0
    )
    fetch_max_bytes: int = key(
        "fetch.max.bytes", "INT", 52_428_800, "Bytes one fetch response may hold.", low=0
    )
    max_partition_fetch_bytes: int = key(
        "max.partition.fetch.bytes", "INT", 1_048_576, "Bytes a fetch returns per partition.", low=0
    )
    max_poll_records: int = key("max.poll.records", "INT", 500, "Most records one poll() returns.", low=1)
    auto_offset_reset: str = key(
        "auto.offset.reset", "STRING", "latest", "Where to start with no committed offset, or one out of range.",
        choices=_RESETS, check=choice_of(*_RESETS),
    )  # fmt: skip
    request_timeout_ms: int = key(
        "request.timeout.ms", "INT", 30_000, "How long the consumer waits for a request's answer.", low=1
    )
    default_api_timeout_ms: int = key(
        "default.api.timeout.ms", "INT", 60_000, "Timeout of blocking calls given none.", low=0
    )
    retry_backoff_ms: int = key(
        "retry.backoff.ms", "LONG", 100, "Pause before a failed request is retried.", low=0
    )
    metadata_max_age_ms: int = key(
        "metadata.max.age.ms", "LONG", 300_000, "Metadata older than this is refreshed.", low=0
    )
    isolation_level: IsolationLevel = key(
        "isolation.level", "STRING", IsolationLevel.READ_UNCOMMITTED,
        "read_committed reads only below the last stable offset and drops aborted transactions.",
        choices=_ISOLATION, check=_isolation_level,
    )  # fmt: skip
    check_crcs: bool = key("check.crcs", "BOOLEAN", True, "Verify the CRC of every batch fetched.")
    group_id: str | None = key(
        "group.id", "STRING", None, "The consumer group (None: no group, so no commits and no subscribe).",
        nullable=True, check=_optional_str,
    )  # fmt: skip
    group_instance_id: str | None = key(
        "group.instance.id", "STRING", None, "A static member's id (None: a dynamic member).",
        nullable=True, check=_optional_str,
    )  # fmt: skip
    enable_auto_commit: bool = key(
        "enable.auto.commit", "BOOLEAN", True, "Commit polled offsets in the background (needs a group.id)."
    )
    auto_commit_interval_ms: int = key(
        "auto.commit.interval.ms", "INT", 5_000, "How often offsets are auto-committed.", low=0
    )
    session_timeout_ms: int = key(
        "session.timeout.ms", "INT", 45_000, "A member silent this long is removed from its group.", low=1
    )
    heartbeat_interval_ms: int = key(
        "heartbeat.interval.ms",
        "INT",
        3_000,
        "How often a member heartbeats (below session.timeout.ms).",
        low=1,
    )
    max_poll_interval_ms: int = key(
        "max.poll.interval.ms",
        "INT",
        300_000,
        "A member that does not poll this long leaves its group.",
        low=1,
    )
    partition_assignment_strategy: Any = key(
        "partition.assignment.strategy", "LIST", ("range", "cooperative-sticky"),
        "Assignors by name, Kafka class name, class or instance, in order of preference.", check=as_is,
    )  # fmt: skip
    group_protocol: str = key(
        "group.protocol", "STRING", "classic",
        "classic (JoinGroup/SyncGroup, client-side assignors) or consumer (KIP-848's ConsumerGroupHeartbeat, "
        "server-side assignors).", choices=_GROUP_PROTOCOLS, check=choice_of(*_GROUP_PROTOCOLS),
    )  # fmt: skip
    group_remote_assignor: str | None = key(
        "group.remote.assignor", "STRING", None,
        "The server-side assignor a consumer-protocol member asks for (None: the broker's default).",
        nullable=True, check=_optional_str,
    )  # fmt: skip
    allow_auto_create_topics: bool = key(
        "allow.auto.create.topics", "BOOLEAN", True, "Let a subscription create a missing topic."
    )
    exclude_internal_topics: bool = key(
        "exclude.internal.topics", "BOOLEAN", True, "Keep internal topics out of pattern subscriptions."
    )
    assignors: tuple[Any, ...] = field(default=())
    """Assignor instances, in order of preference (from ``partition.assignment.strategy``)."""

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> ConsumerConfig:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        return super().from_props(config)

    @classmethod
    def check(cls, props: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
        if props["group.instance.id"] == "":
            raise InvalidConfigError("group.instance.id must not be empty (None for a dynamic member)")
        if props["group.id"] is None:
            if "enable.auto.commit" in given and props["enable.auto.commit"]:
                raise InvalidConfigError(
                    "enable.auto.commit cannot be set to true when no group.id is given (commits need a group)"
                )
            props["enable.auto.commit"] = False
            if props["group.instance.id"] is not None:
                raise InvalidConfigError("group.instance.id needs a group.id")
        if props["group.protocol"] == "classic" and props["group.remote.assignor"]:
            # Kafka's ConsumerConfig.checkGroupRemoteAssignor: a server-side assignor means nothing to a
            # classic member, whose leader assigns with partition.assignment.strategy.
            raise InvalidConfigError("group.remote.assignor cannot be set when group.protocol=classic")
        if props["heartbeat.interval.ms"] >= props["session.timeout.ms"]:
            raise InvalidConfigError(
                f"heartbeat.interval.ms ({props['heartbeat.interval.ms']}) must be lower than "
                f"session.timeout.ms ({props['session.timeout.ms']})"
            )
        return {"assignors": parse_assignors(props["partition.assignment.strategy"])}


#: Every key kafkalite's consumer understands, with Kafka's default.
CONSUMER_DEFAULTS: dict[str, Any] = ConsumerConfig.defaults()


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
