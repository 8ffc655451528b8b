"""``ConfigurationControlManager``: topic config overrides as ConfigRecords, on the active controller.

A SET writes the key's value, a DELETE a null value (the key falls back to the broker default). The
whole resulting override set is validated before anything is written, with the brokers' own parsers, so
a broker never replays a value it cannot apply: INVALID_CONFIG names the key. Only topic resources: a
broker's dynamic configs are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkalite.config.broker import BrokerConfig
from kafkalite.config.topic import REPLICATION_KEYS, LogConfig
from kafkalite.errors import InvalidConfigError, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from kafkalite.metadata.delta import TOPIC_RESOURCE
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import ConfigRecord
from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.configs import AlterConfigOp, AlterConfigsResource, AlterConfigsResult

_DEFAULTS = BrokerConfig()


def validate_topic_config(props: Mapping[str, str]) -> None:
    """Raise INVALID_CONFIG for an unknown topic key or a value its parser refuses."""
    known = set(LogConfig.config_keys()) | set(REPLICATION_KEYS)
    for key in props:
        if key not in known:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
    try:
        _DEFAULTS.topic_config(dict(props))
    except KafkaError as e:
        raise InvalidConfigError(e.message) from None
    except ValueError as e:
        raise InvalidConfigError(str(e)) from None


def config_records(topic: str, configs: Iterable[tuple[str, str | None]]) -> list[ConfigRecord]:
    return [
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic, name=k, value=v) for k, v in configs
    ]


def incremental_alter(
    image: MetadataImage, res: AlterConfigsResource
) -> tuple[list[ConfigRecord], AlterConfigsResult]:
    def result(code: int = NO_ERROR, msg: str | None = None) -> AlterConfigsResult:
        return AlterConfigsResult(
            error_code=code,
            error_message=msg,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
        )

    try:
        if res.resource_type != TOPIC_RESOURCE:
            raise InvalidRequestError(
                f"kafkalite's controller alters topic configs only, not type {res.resource_type}"
            )
        if image.topic(res.resource_name) is None:
            raise UnknownTopicOrPartitionError(f"topic {res.resource_name} does not exist")
        current = dict(image.configs.get((TOPIC_RESOURCE, res.resource_name), {}))
        changes: list[tuple[str, str | None]] = []
        for c in res.configs:
            if c.op == AlterConfigOp.SET:
                current[c.name] = c.value or ""
                changes.append((c.name, c.value))
            elif c.op == AlterConfigOp.DELETE:
                current.pop(c.name, None)
                changes.append((c.name, None))
            else:
                raise InvalidRequestError(f"{c.name}: APPEND and SUBTRACT are not supported")
        validate_topic_config(current)
    except KafkaError as e:
        return [], result(e.code, e.message)
    return config_records(res.resource_name, changes), result()
