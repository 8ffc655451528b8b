"""Kafka's ``ZkAdminManager`` for configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Any broker answers them. A topic's overrides live in ``/config/topics/<t>``; an alteration writes them and
a sequential ``/config/changes/config_change_`` notification in one transaction, and every broker (the
controller among them) re-reads the topic's overrides when it sees the notification
(``KafkaBroker._config_changes``), so a new ``retention.ms`` reaches every replica's log.

Described values follow Kafka's precedence: the topic's override (DYNAMIC_TOPIC_CONFIG), else the broker's
``server.properties`` (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG). kafkalite brokers take
no dynamic broker configs: altering a BROKER resource is refused as Kafka refuses a key that is not
dynamically updatable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kafkalite.broker.controller.topic_admin import decode_topic_config, encode_topic_config
from kafkalite.broker.topic_validator import is_valid_topic, validate_topic, validate_topic_configs
from kafkalite.config.broker import TOPIC_KEY_SYNONYMS, BrokerConfig
from kafkalite.config.topic import TOPIC_KEYS
from kafkalite.coordination import paths
from kafkalite.coordination.store import CoordinationError, Create, NoNode, SetData
from kafkalite.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    AlterConfigOp,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResponse,
    AlterConfigsResult,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribedConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

CONFIG_CHANGE_PREFIX = "config_change_"

#: Value types of every topic key, read from the declarations (``config.topic.TOPIC_KEYS``).
TOPIC_CONFIG_TYPES: dict[str, ConfigType] = {name: ConfigType[k.type] for name, k in TOPIC_KEYS.items()}
_KAFKA_DEFAULTS = BrokerConfig()


def render(value: Any) -> str | None:
    """A value as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _topic_values(broker: BrokerConfig) -> dict[str, Any]:
    """Every topic key's value for a topic with no override, under this broker's config."""
    tc = broker.topic_config({})
    return {
        **tc.log.to_props(),
        "min.insync.replicas": tc.min_insync_replicas,
        "unclean.leader.election.enable": tc.unclean_leader_election_enable,
    }


def _unreachable(e: Exception) -> dict[str, Any]:
    """The answer when the coordination store could not be read or written: retriable."""
    return {
        "error_code": RequestTimedOutError.code,
        "error_message": f"coordination store unavailable: {type(e).__name__}",
    }


def _ids(r: Any) -> dict[str, Any]:
    return {"resource_type": r.resource_type, "resource_name": r.resource_name}


def encode_config_change(entity_path: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": entity_path}, separators=(",", ":")).encode()


def decode_config_change(data: bytes) -> str:
    """The entity (``topics/orders``) a ``/config/changes`` notification names."""
    return str(json.loads(data).get("entity_path", ""))


class AdminManager:
    """Describes and alters configs for one broker; ``zk`` is its coordination client."""

    def __init__(self, broker_id: int, config: BrokerConfig, zk: Callable[[], Any]) -> None:
        self.broker_id = broker_id
        self.config = config
        self._zk = zk
        self._static_defaults = _topic_values(config)
        self._kafka_defaults = _topic_values(_KAFKA_DEFAULTS)

    # ------------------------------------------------------------------------------------ describe

    def describe_configs(self, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
        out = []
        for r in req.resources:
            try:
                if r.resource_type == ConfigResourceType.TOPIC:
                    configs = self._describe_topic(r, req.include_synonyms, req.include_documentation)
                elif r.resource_type == ConfigResourceType.BROKER:
                    configs = self._describe_broker(r, req.include_synonyms)
                else:
                    raise InvalidRequestError(f"Unsupported resource type: {r.resource_type}")
            except CoordinationError as e:
                out.append(DescribeConfigsResult(**_ids(r), **_unreachable(e)))
                continue
            except KafkaError as e:
                out.append(
                    DescribeConfigsResult(**_ids(r), error_code=e.code, error_message=str(e) or e.name)
                )
                continue
            out.append(DescribeConfigsResult(**_ids(r), configs=tuple(configs)))
        return DescribeConfigsResponse(results=tuple(out))

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's overrides as stored; UNKNOWN_TOPIC_OR_PARTITION if there is no such topic."""
        zk = self._zk()
        if not is_valid_topic(topic) or zk.exists(paths.topic_path(topic)) is None:
            raise UnknownTopicOrPartitionError(f"Topic {topic} does not exist")
        try:
            data, _ = zk.get(f"{paths.CONFIG_TOPICS}/{topic}")
        except NoNode:
            return {}
        return decode_topic_config(data)

    def _describe_topic(
        self, r: DescribeConfigsResource, synonyms: bool, documentation: bool = False
    ) -> list[DescribedConfig]:
        validate_topic(r.resource_name)  # Kafka's DescribeConfigs: INVALID_TOPIC_EXCEPTION first
        overrides = self.topic_overrides(r.resource_name)
        explicit = self.config.log_props
        out = []
        for key in sorted(TOPIC_CONFIG_TYPES):
            if r.configuration_keys is not None and key not in r.configuration_keys:
                continue
            chain: list[ConfigSynonym] = []
            if key in overrides:
                chain.append(
                    ConfigSynonym(name=key, value=overrides[key], source=ConfigSource.DYNAMIC_TOPIC_CONFIG)
                )
            broker_key = TOPIC_KEY_SYNONYMS.get(key)
            if broker_key is not None:
                if key in explicit or self._broker_key_static(broker_key):
                    chain.append(
                        ConfigSynonym(
                            name=broker_key,
                            value=render(self._static_defaults[key]),
                            source=ConfigSource.STATIC_BROKER_CONFIG,
                        )
                    )
                chain.append(
                    ConfigSynonym(
                        name=broker_key,
                        value=render(self._kafka_defaults[key]),
                        source=ConfigSource.DEFAULT_CONFIG,
                    )
                )
            # A key with no broker synonym and no override is Kafka's default, with no synonyms to list.
            value = chain[0].value if chain else render(self._kafka_defaults[key])
            source = chain[0].source if chain else ConfigSource.DEFAULT_CONFIG
            out.append(
                DescribedConfig(
                    name=key,
                    value=value,
                    config_source=source,
                    synonyms=tuple(chain) if synonyms else (),
                    config_type=TOPIC_CONFIG_TYPES[key],
                    documentation=TOPIC_KEYS[key].doc if documentation else None,
                )
            )
        return out

    def _broker_key_static(self, key: str) -> bool:
        """A broker-level key (``min.insync.replicas``) given in this broker's config, not defaulted."""
        spec = BrokerConfig.config_keys().get(key)
        return spec is not None and getattr(self.config, spec.attr) != spec.default

    def _describe_broker(self, r: DescribeConfigsResource, synonyms: bool) -> list[DescribedConfig]:
        if r.resource_name not in ("", str(self.broker_id)):
            raise InvalidRequestError(
                f"Unexpected broker id, expected {self.broker_id} or empty string, but received {r.resource_name}"
            )
        if r.resource_name == "":
            return []  # cluster-wide dynamic defaults: kafkalite has none
        values: dict[str, tuple[Any, bool]] = {}
        declared = BrokerConfig.config_keys()
        for key, spec in declared.items():
            value = getattr(self.config, spec.attr)
            values[key] = (value, value != spec.default)
        log_keys = set(TOPIC_KEY_SYNONYMS.values())
        for topic_key, broker_key in TOPIC_KEY_SYNONYMS.items():
            if broker_key not in values:
                values[broker_key] = (self._static_defaults[topic_key], topic_key in self.config.log_props)
        for key, value in self.config.extra.items():
            values[key] = (value, True)
        out = []
        for key in sorted(values):
            if r.configuration_keys is not None and key not in r.configuration_keys:
                continue
            value, static = values[key]
            source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
            # As Kafka: a password, or a key with no declared type (a per-listener override such as
            # listener.name.sasl_ssl.plain.sasl.jaas.config), may be a secret, so its value is never sent.
            sensitive = declared[key].type == "PASSWORD" if key in declared else key not in log_keys
            shown = None if sensitive else render(value)
            out.append(
                DescribedConfig(
                    name=key,
                    value=shown,
                    read_only=True,
                    config_source=source,
                    is_sensitive=sensitive,
                    synonyms=(ConfigSynonym(name=key, value=shown, source=source),) if synonyms else (),
                )
            )
        return out

    # --------------------------------------------------------------------------------------- alter

    def alter_configs(self, req: AlterConfigsRequest) -> AlterConfigsResponse:
        """Legacy AlterConfigs: the given set replaces the resource's overrides."""

        def new_overrides(r: AlterConfigsResource, _old: dict[str, str]) -> dict[str, str]:
            for c in r.configs:
                if c.value is None:
                    raise InvalidRequestError(f"Null value not supported for : {c.name}")
            return {c.name: c.value for c in r.configs}  # type: ignore[misc]

        return AlterConfigsResponse(results=self._alter(req.resources, req.validate_only, new_overrides))

    def incremental_alter_configs(
        self, req: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        """KIP-339: SET, DELETE, APPEND or SUBTRACT single keys; other overrides stay."""
        return IncrementalAlterConfigsResponse(
            results=self._alter(req.resources, req.validate_only, self._apply_ops)
        )

    def _apply_ops(self, r: AlterConfigsResource, old: dict[str, str]) -> dict[str, str]:
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            raise InvalidRequestError(
                f"Error due to duplicate config keys: {sorted({n for n in names if names.count(n) > 1})}"
            )
        new = dict(old)
        for c in r.configs:
            if c.op == AlterConfigOp.SET:
                new[c.name] = c.value or ""
            elif c.op == AlterConfigOp.DELETE:
                new.pop(c.name, None)
            elif c.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
                if TOPIC_CONFIG_TYPES.get(c.name) != ConfigType.LIST:
                    verb = "append" if c.op == AlterConfigOp.APPEND else "subtract"
                    raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {c.name}")
                current = new.get(c.name)
                if current is None:
                    current = render(self._kafka_defaults[c.name]) or ""
                items = [v.strip() for v in current.split(",") if v.strip()]
                given = [v.strip() for v in (c.value or "").split(",") if v.strip()]
                if c.op == AlterConfigOp.APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                new[c.name] = ",".join(items)
            else:
                raise InvalidRequestError(f"Unknown config operation {c.op} for {c.name}")
        return new

    def _alter(
        self,
        resources: tuple[AlterConfigsResource, ...],
        validate_only: bool,
        change: Callable[[AlterConfigsResource, dict[str, str]], dict[str, str]],
    ) -> tuple[AlterConfigsResult, ...]:
        seen = [(r.resource_type, r.resource_name) for r in resources]
        out = []
        for r in resources:
            try:
                if seen.count((r.resource_type, r.resource_name)) > 1:
                    raise InvalidRequestError("Error due to duplicate resource in the request")
                if r.resource_type == ConfigResourceType.BROKER:
                    keys = ", ".join(sorted(c.name for c in r.configs))
                    raise InvalidRequestError(f"Cannot update these configs dynamically: {{{keys}}}")
                if r.resource_type != ConfigResourceType.TOPIC:
                    raise InvalidRequestError(f"Unsupported resource type: {r.resource_type}")
                old = self.topic_overrides(r.resource_name)
                new = change(r, old)
                self._validate_topic_config(new)
                if not validate_only:
                    self._write_topic_config(r.resource_name, new)
            except CoordinationError as e:
                out.append(AlterConfigsResult(**_ids(r), **_unreachable(e)))
                continue
            except KafkaError as e:
                out.append(AlterConfigsResult(**_ids(r), error_code=e.code, error_message=str(e) or e.name))
                continue
            out.append(AlterConfigsResult(**_ids(r)))
        return tuple(out)

    def _validate_topic_config(self, overrides: dict[str, str]) -> None:
        validate_topic_configs(self.config, overrides)

    def _write_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        zk = self._zk()
        path = f"{paths.CONFIG_TOPICS}/{topic}"
        write: Any = (
            SetData(path, encode_topic_config(overrides))
            if zk.exists(path) is not None
            else Create(path, encode_topic_config(overrides), make_parents=True)
        )
        change = Create(
            f"{paths.CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
            encode_config_change(f"topics/{topic}"),
            sequential=True,
            make_parents=True,
        )
        zk.multi([write, change])


__all__ = ["CONFIG_CHANGE_PREFIX", "AdminManager", "decode_config_change", "encode_config_change", "render"]
