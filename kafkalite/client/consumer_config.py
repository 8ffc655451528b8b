"""Consumer configuration with Kafka's key names, defaults and validation.

``ConsumerConfig.from_props`` takes a dict of Kafka keys (``"fetch.max.wait.ms"``); Python-style keys
(``fetch_max_wait_ms``) are accepted too, so ``Cluster.consumer(max_poll_records=10)`` works. An unknown
key or a bad value raises ``InvalidConfigError`` naming the key. Defaults are Kafka's.

``isolation.level=read_committed`` is rejected: kafkalite's brokers have no transactions yet (no last
stable offset apart from the high watermark, no aborted-transaction index), so the consumer could not
honour it. Consumer-group keys (``group.id``, ``enable.auto.commit``...) arrive with group membership.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.config import merge_props, parse_bool, parse_choice, parse_int
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
}
_RESETS = ("earliest", "latest", "none")
_ISOLATION = ("read_uncommitted", "read_committed")


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

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> ConsumerConfig:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        props, _given = merge_props("consumer", CONSUMER_DEFAULTS, config)
        for key, minimum in _INT_KEYS.items():
            props[key] = parse_int(key, props[key], low=minimum)
        props["check.crcs"] = parse_bool("check.crcs", props["check.crcs"])
        props["auto.offset.reset"] = parse_choice("auto.offset.reset", props["auto.offset.reset"], _RESETS)
        props["isolation.level"] = parse_choice("isolation.level", props["isolation.level"], _ISOLATION)
        if props["isolation.level"] == "read_committed":
            raise InvalidConfigError(
                "isolation.level=read_committed is not supported yet: kafkalite's brokers have no "
                "transactions (no last stable offset, no aborted-transaction index); use read_uncommitted"
            )
        if not isinstance(props["client.id"], str):
            raise InvalidConfigError(f"client.id must be a string, got {props['client.id']!r}")
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
        )

    def __getitem__(self, key: str) -> Any:
        return self.props[key]
