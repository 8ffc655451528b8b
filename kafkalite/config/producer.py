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
from dataclasses import dataclass
from typing import Any

from kafkalite.common.acks import Acks
from kafkalite.common.compression_type import Compression
from kafkalite.config.base import INT_MAX, ClientConfig, as_is, check_client_id, choice_of, key
from kafkalite.errors import InvalidConfigError

__all__ = ["PRODUCER_DEFAULTS", "ProducerConfig"]

INT32_MAX = INT_MAX
_COMPRESSION = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def _as_acks(_name: str, value: Any) -> Acks:
    try:
        return Acks.parse(value)
    except ValueError:
        raise InvalidConfigError(f"acks must be one of all, -1, 0, 1, got {value!r}") from None


def _transactional_id(_name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidConfigError(f"transactional.id must be a non-empty string, got {value!r}")
    return value


def _serializer(name: str, value: Any) -> Any:
    if not callable(value):
        raise InvalidConfigError(f"{name} must be a callable (value -> bytes), got {value!r}")
    return value


@dataclass(frozen=True)
class ProducerConfig(ClientConfig):
    """Validated producer settings: one typed attribute per key; ``props`` / ``cfg["linger.ms"]`` give them
    under Kafka's names."""

    KIND = "producer"

    client_id: str = key(
        "client.id", "STRING", "", "A name for the producer in the brokers' logs.", check=check_client_id
    )
    bootstrap_servers: Any = key(
        "bootstrap.servers", "LIST", None,
        "Brokers to find the cluster through (the Producer's bootstrap argument wins).", check=as_is,
    )  # fmt: skip
    acks: Acks = key(
        "acks", "STRING", Acks.ALL, "Replicas that must have a batch before it is acknowledged: all, 0 or 1.",
        check=_as_acks, valid="one of all, -1, 0, 1",
    )  # fmt: skip
    batch_size: int = key(
        "batch.size", "INT", 16384, "Bytes a partition's batch grows to before it is sent.", low=0
    )
    linger_ms: int = key(
        "linger.ms",
        "LONG",
        5,
        "How long a batch waits for more records (Kafka 4.0's default; 0 before).",
        low=0,
    )
    retries: int = key("retries", "INT", INT32_MAX, "How often a failed batch is resent.", low=0)
    delivery_timeout_ms: int = key(
        "delivery.timeout.ms", "INT", 120_000, "Upper bound on the time from send to its outcome.", low=0
    )
    request_timeout_ms: int = key(
        "request.timeout.ms", "INT", 30_000, "How long the producer waits for a request's answer.", low=1
    )
    retry_backoff_ms: int = key("retry.backoff.ms", "LONG", 100, "First pause before a retry.", low=0)
    retry_backoff_max_ms: int = key(
        "retry.backoff.max.ms", "LONG", 1000, "Longest pause before a retry (the backoff grows to it).", low=0
    )
    max_in_flight_requests_per_connection: int = key(
        "max.in.flight.requests.per.connection", "INT", 5, "Unanswered Produce requests per broker.", low=1
    )
    max_request_size: int = key("max.request.size", "INT", 1_048_576, "Largest Produce request.", low=0)
    buffer_memory: int = key(
        "buffer.memory", "LONG", 33_554_432, "Bytes of records waiting to be sent.", low=0
    )
    max_block_ms: int = key(
        "max.block.ms",
        "LONG",
        60_000,
        "How long send() may block on a full buffer or missing metadata.",
        low=0,
    )
    compression_type: str = key(
        "compression.type", "STRING", "none", "Codec of the producer's batches.",
        choices=tuple(_COMPRESSION), check=choice_of(*_COMPRESSION),
    )  # fmt: skip
    enable_idempotence: bool = key(
        "enable.idempotence", "BOOLEAN", True, "Producer ids and sequence numbers: no duplicates on retry."
    )
    transactional_id: str | None = key(
        "transactional.id", "STRING", None, "Makes the producer transactional under this stable id.",
        nullable=True, check=_transactional_id,
    )  # fmt: skip
    transaction_timeout_ms: int = key(
        "transaction.timeout.ms",
        "INT",
        60_000,
        "A transaction open longer is aborted by its coordinator.",
        low=1,
    )
    metadata_max_age_ms: int = key(
        "metadata.max.age.ms", "LONG", 300_000, "Metadata older than this is refreshed.", low=0
    )
    partitioner_class: Any = key(
        "partitioner.class", "CLASS", None, "A custom partitioner (None: the built-in one).", check=as_is
    )
    partitioner_ignore_keys: bool = key(
        "partitioner.ignore.keys", "BOOLEAN", False, "Place keyed records as unkeyed ones are placed."
    )
    partitioner_adaptive_partitioning_enable: bool = key(
        "partitioner.adaptive.partitioning.enable", "BOOLEAN", True,
        "Send more unkeyed records to faster brokers.",
    )  # fmt: skip
    partitioner_availability_timeout_ms: int = key(
        "partitioner.availability.timeout.ms", "LONG", 0,
        "Skip a broker that has not drained its batches for this long (0: never).", low=0,
    )  # fmt: skip
    key_serializer: Any = key(
        "key.serializer", "CLASS", None, "A callable turning a key into bytes.", check=_serializer
    )
    value_serializer: Any = key(
        "value.serializer", "CLASS", None, "A callable turning a value into bytes.", check=_serializer
    )
    # kafkalite only: keep every send's outcome in ``Producer.history`` (off for long benchmarks).
    kafkalite_history_enabled: bool = key(
        "kafkalite.history.enabled", "BOOLEAN", True, "kafkalite: keep every send's outcome in the history."
    )

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None) -> ProducerConfig:
        """Validate ``config`` (Kafka keys or their ``snake_case`` spelling) over the defaults."""
        return super().from_props(config)

    @classmethod
    def check(cls, props: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
        if props["transactional.id"] is not None:
            if "enable.idempotence" in given and not props["enable.idempotence"]:
                raise InvalidConfigError("Cannot set a transactional.id without also enabling idempotence.")
            given = {
                **given,
                "enable.idempotence": True,
            }  # a transactional producer is idempotent: conflicts fail
            props["enable.idempotence"] = True
        _check_idempotence(props, given, props["acks"])
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
        return {}

    @property
    def max_in_flight(self) -> int:
        return self.max_in_flight_requests_per_connection

    @property
    def compression(self) -> Compression:
        """``compression.type`` as the codec id a record batch stores."""
        return _COMPRESSION[self.compression_type]

    @property
    def idempotence(self) -> bool:
        return self.enable_idempotence

    @property
    def history_enabled(self) -> bool:
        return self.kafkalite_history_enabled


#: Every key kafkalite's producer understands, with Kafka's default.
PRODUCER_DEFAULTS: dict[str, Any] = ProducerConfig.defaults()


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
