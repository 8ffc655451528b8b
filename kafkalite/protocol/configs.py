"""Topic and broker configuration: DescribeConfigs, AlterConfigs (replace a resource's overrides) and
IncrementalAlterConfigs (KIP-339: set, delete, append to or subtract from single keys)."""

from __future__ import annotations

from enum import IntEnum

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, message
from kafkalite.protocol.codec.binding import wire


class ConfigResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` codes."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    """Where a described value comes from (``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """A key's value type (DescribeConfigs v3+, KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# ------------------------------------------------------------------------------------ DescribeConfigs


@message
class DescribeConfigsResource(Message):
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    configuration_keys: tuple[str, ...] | None = wire("[]string", "0+", None, nullable="0+")
    """None: every key."""


@message
class ConfigSynonym(Message):
    name: str = wire("string", "1+")
    value: str | None = wire("string", "1+", nullable="0+")
    source: int = wire("int8", "1+")


@message
class DescribedConfig(Message):
    name: str = wire("string")
    value: str | None = wire("string", nullable="0+")
    read_only: bool = wire("bool", "0+", False)
    is_default: bool = wire("bool", "0", False)
    """v0's flag, written as ``config_source == DEFAULT_CONFIG`` whatever this holds, and dropped when read:
    ``config_source`` says it."""
    config_source: int = wire("int8", "1+", ConfigSource.DEFAULT_CONFIG, wire_default=-1)
    is_sensitive: bool = wire("bool", "0+", False)
    synonyms: tuple[ConfigSynonym, ...] = wire("[]struct", "1+", (), items=ConfigSynonym)
    """The values this key would take, most specific first (only when asked for)."""
    config_type: int = wire("int8", "3+", ConfigType.UNKNOWN)
    documentation: str | None = wire("string", "3+", None, nullable="0+")

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw.pop("is_default", None)
        return kw

    def wire_out(self, body: dict, version: int) -> None:
        body["is_default"] = self.config_source == ConfigSource.DEFAULT_CONFIG


@message
class DescribeConfigsResult(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    configs: tuple[DescribedConfig, ...] = wire("[]struct", "0+", (), items=DescribedConfig)


@message
class DescribeConfigsResponse(Response):
    api_key = ApiKey.DESCRIBE_CONFIGS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[DescribeConfigsResult, ...] = wire("[]struct", "0+", (), items=DescribeConfigsResult)


@message
class DescribeConfigsRequest(Request):
    api_key = ApiKey.DESCRIBE_CONFIGS
    response_type = DescribeConfigsResponse
    versions = (0, 4)
    flexible_from = 4
    resources: tuple[DescribeConfigsResource, ...] = wire("[]struct", "0+", (), items=DescribeConfigsResource)
    include_synonyms: bool = wire("bool", "1+", False)
    include_documentation: bool = wire("bool", "3+", False)


# --------------------------------------------------------------------- AlterConfigs / Incremental


@message
class AlterableConfig(Message):
    name: str = wire("string")
    op: int = wire("int8", "0+", AlterConfigOp.SET, name="config_operation")
    """AlterConfigs only sets (its wire entry has no operation); IncrementalAlterConfigs says per key."""
    value: str | None = wire("string", nullable="0+")


@message
class AlterConfigsResource(Message):
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    configs: tuple[AlterableConfig, ...] = wire("[]struct", "0+", (), items=AlterableConfig)


@message
class SetConfig(Message):
    """AlterConfigs' entry on the wire: a key and its value, no operation. ``AlterConfigsRequest`` holds
    ``AlterableConfig``s with ``op`` SET."""

    name: str = wire("string")
    value: str | None = wire("string", nullable="0+")


@message
class SetConfigsResource(Message):
    """AlterConfigs' resource on the wire, with ``SetConfig`` entries; read into an ``AlterConfigsResource``."""

    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    configs: tuple[SetConfig, ...] = wire("[]struct", "0+", (), items=SetConfig)


@message
class AlterConfigsResult(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    resource_type: int = wire("int8")
    resource_name: str = wire("string")


@message
class AlterConfigsResponse(Response):
    api_key = ApiKey.ALTER_CONFIGS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[AlterConfigsResult, ...] = wire(
        "[]struct", "0+", (), name="responses", items=AlterConfigsResult
    )


@message
class AlterConfigsRequest(Request):
    """Replace every override of each resource with the configs given (keys left out return to default)."""

    api_key = ApiKey.ALTER_CONFIGS
    response_type = AlterConfigsResponse
    versions = (0, 2)
    flexible_from = 2
    resources: tuple[AlterConfigsResource, ...] = wire("[]struct", "0+", (), items=SetConfigsResource)
    """Written from each ``AlterConfigsResource`` (its entries' ``op`` is left off)."""
    validate_only: bool = wire("bool", "0+", False)

    @classmethod
    def wire_in(cls, kw: dict, body: dict, version: int) -> dict:
        kw["resources"] = tuple(
            AlterConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=tuple(AlterableConfig(name=c.name, value=c.value) for c in r.configs),
            )
            for r in kw.get("resources", ())
        )
        return kw


@message
class IncrementalAlterConfigsResponse(Response):
    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[AlterConfigsResult, ...] = wire(
        "[]struct", "0+", (), name="responses", items=AlterConfigsResult
    )


@message
class IncrementalAlterConfigsRequest(Request):
    """Change single keys of each resource; the other overrides stay."""

    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    response_type = IncrementalAlterConfigsResponse
    versions = (0, 1)
    flexible_from = 1
    resources: tuple[AlterConfigsResource, ...] = wire("[]struct", "0+", (), items=AlterConfigsResource)
    validate_only: bool = wire("bool", "0+", False)
