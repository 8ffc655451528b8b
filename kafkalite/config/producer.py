"""Producer configuration with Kafka's key names, defaults and validation.

``ProducerConfig.from_props`` takes a dict of Kafka keys (``"linger.ms"``); Python-style keys
(``linger_ms``) are accepted too, so ``Cluster.producer(linger_ms=0)`` works. An unknown key or a bad
value raises ``InvalidConfigError`` naming the key. Defaults are Kafka 4.0's.

``enable.idempotence`` defaults to true, as in Kafka since 3.0. As in Kafka, when it is left unset a
conflicting ``acks`` (0 or 1), ``retries=0`` or more than 5 requests in flight quietly turn it off; when it
is set to true explicitly the same conflict is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.acks import Acks
from kafkalite.common.compression_type import Compression
from kafkalite.config.base import merge_props, parse_bool, parse_choice, parse_int
from kafkalite.errors import InvalidConfigError

__all__ = ["PRODUCER_DEFAULTS", "ProducerConfig"]

INT32_MAX = 2_147_483_647

#: Every key kafkalite's producer understands, with Kafka's default.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "client.id": "",
    "bootstrap.servers": None,  # the Producer's ``bootstrap`` argument wins; kept for real-client parity
    "acks": "all",
    "batch.size": 16384,
    "linger.ms": 5,  # Kafka 4.0 default (KIP-1030); it was 0 before
    "retries": INT32_MAX,
    "delivery.timeout.ms": 120_000,
    "request.timeout.ms": 30_000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "max.in.flight.requests.per.connection": 5,
    "max.request.size": 1_048_576,
    "buffer.memory": 33_554_432,
    "max.block.ms": 60_000,
    "compression.type": "none",
    "enable.idempotence": True,
    "transactional.id": None,
    "transaction.timeout.ms": 60_000,
    "metadata.max.age.ms": 300_000,
    "partitioner.class": None,
    "partitioner.ignore.keys": False,
    "partitioner.adaptive.partitioning.enable": True,
    "partitioner.availability.timeout.ms": 0,
    "key.serializer": None,
    "value.serializer": None,
    # kafkalite only: keep every send's outcome in ``Producer.history`` (off for long benchmarks).
    "kafkalite.history.enabled": True,
}

_INT_KEYS = {
    "batch.size": 0,
    "linger.ms": 0,
    "retries": 0,
    "delivery.timeout.ms": 0,
    "request.timeout.ms": 0,
    "retry.backoff.ms": 0,
    "retry.backoff.max.ms": 0,
    "max.in.flight.requests.per.connection": 1,
    "max.request.size": 0,
    "buffer.memory": 0,
    "max.block.ms": 0,
    "transaction.timeout.ms": 1,
    "metadata.max.age.ms": 0,
    "partitioner.availability.timeout.ms": 0,
}
_BOOL_KEYS = ("enable.idempotence", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable")
_BOOL_KEYS_KL = ("kafkalite.history.enabled",)
_COMPRESSION = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def _as_acks(value: Any) -> Acks:
    try:
        return Acks.parse(value)
    except ValueError:
        raise InvalidConfigError(f"acks must be one of all, -1, 0, 1, got {value!r}") from None


@dataclass(frozen=True)
class ProducerConfig:
    """Validated producer settings: ``props`` keeps every key (Kafka names), typed attributes the hot ones."""

    props: dict[str, Any] = field(default_factory=lambda: dict(PRODUCER_DEFAULTS))
    acks: Acks = Acks.ALL
    batch_size: int = 16384
    linger_ms: int = 5
    retries: int = INT32_MAX
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    max_in_flight: int = 5
    max_request_size: int = 1_048_576
    buffer_memory: int = 33_554_432
    max_block_ms: int = 60_000
    compression: int = Compression.NONE
    metadata_max_age_ms: int = 300_000
    history_enabled: bool = True
    idempotence: bool = False

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> ProducerConfig:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        props, given = merge_props("producer", PRODUCER_DEFAULTS, config)
        for key, minimum in _INT_KEYS.items():
            props[key] = parse_int(key, props[key], low=minimum)
        for key in _BOOL_KEYS + _BOOL_KEYS_KL:
            props[key] = parse_bool(key, props[key])
        acks = _as_acks(props["acks"])
        props["acks"] = acks.config_name
        props["compression.type"] = parse_choice(
            "compression.type", props["compression.type"], tuple(_COMPRESSION)
        )
        tid = props["transactional.id"]
        if tid is not None:
            if not isinstance(tid, str) or not tid:
                raise InvalidConfigError(f"transactional.id must be a non-empty string, got {tid!r}")
            if "enable.idempotence" in given and not props["enable.idempotence"]:
                raise InvalidConfigError("Cannot set a transactional.id without also enabling idempotence.")
            given = {
                **given,
                "enable.idempotence": True,
            }  # a transactional producer is idempotent: conflicts fail
            props["enable.idempotence"] = True
        _check_idempotence(props, given, acks)
        for key in ("key.serializer", "value.serializer"):
            if props[key] is not None and not callable(props[key]):
                raise InvalidConfigError(f"{key} must be a callable (value -> bytes), got {props[key]!r}")
        if not isinstance(props["client.id"], str):
            raise InvalidConfigError(f"client.id must be a string, got {props['client.id']!r}")
        if props["request.timeout.ms"] < 1:
            raise InvalidConfigError("request.timeout.ms must be >= 1")
        # Kafka's rule: a batch must be able to wait linger.ms and then one full request timeout.
        floor = props["linger.ms"] + props["request.timeout.ms"]
        if props["delivery.timeout.ms"] < floor:
            if "delivery.timeout.ms" in given:
                raise InvalidConfigError(
                    f"delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms "
                    f"({props['delivery.timeout.ms']} < {floor})"
                )
            props["delivery.timeout.ms"] = floor
        if props["retry.backoff.max.ms"] < props["retry.backoff.ms"]:
            if "retry.backoff.max.ms" in given:
                raise InvalidConfigError("retry.backoff.max.ms must be >= retry.backoff.ms")
            props["retry.backoff.max.ms"] = props["retry.backoff.ms"]
        return cls(
            props=props,
            acks=acks,
            batch_size=props["batch.size"],
            linger_ms=props["linger.ms"],
            retries=props["retries"],
            delivery_timeout_ms=props["delivery.timeout.ms"],
            request_timeout_ms=props["request.timeout.ms"],
            retry_backoff_ms=props["retry.backoff.ms"],
            retry_backoff_max_ms=props["retry.backoff.max.ms"],
            max_in_flight=props["max.in.flight.requests.per.connection"],
            max_request_size=props["max.request.size"],
            buffer_memory=props["buffer.memory"],
            max_block_ms=props["max.block.ms"],
            compression=_COMPRESSION[props["compression.type"]],
            metadata_max_age_ms=props["metadata.max.age.ms"],
            history_enabled=props["kafkalite.history.enabled"],
            idempotence=props["enable.idempotence"],
        )

    def __getitem__(self, key: str) -> Any:
        return self.props[key]


def _check_idempotence(props: dict[str, Any], given: Any, acks: Acks) -> None:
    """Kafka's idempotence rules: acks=all, retries > 0, at most 5 requests in flight per connection."""
    conflicts = []
    if props["max.in.flight.requests.per.connection"] > 5:
        conflicts.append("Must set max.in.flight.requests.per.connection to at most 5")
    if props["retries"] == 0:
        conflicts.append("Must set retries to non-zero")
    if acks != Acks.ALL:
        conflicts.append("Must set acks to all")
    if not conflicts or not props["enable.idempotence"]:
        return
    if "enable.idempotence" in given:
        raise InvalidConfigError(
            f"{'; '.join(conflicts)} in order to use the idempotent producer (enable.idempotence=true)"
        )
    props["enable.idempotence"] = False  # unset and conflicting: Kafka turns it off rather than fail
