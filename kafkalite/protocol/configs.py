"""Topic and broker configuration: DescribeConfigs, AlterConfigs (replace a resource's overrides) and
IncrementalAlterConfigs (KIP-339: set, delete, append to or subtract from single keys)."""

from __future__ import annotations

from enum import IntEnum

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, message


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
    resource_type: int
    resource_name: str
    configuration_keys: tuple[str, ...] | None = None
    """None: every key."""


@message
class ConfigSynonym(Message):
    name: str
    value: str | None
    source: int


@message
class DescribedConfig(Message):
    name: str
    value: str | None
    read_only: bool = False
    config_source: int = ConfigSource.DEFAULT_CONFIG
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    """The values this key would take, most specific first (only when asked for)."""
    config_type: int = ConfigType.UNKNOWN
    documentation: str | None = None


@message
class DescribeConfigsResult(Message):
    resource_type: int
    resource_name: str
    error_code: int = NO_ERROR
    error_message: str | None = None
    configs: tuple[DescribedConfig, ...] = ()


@message
class DescribeConfigsResponse(Response):
    api_key = ApiKey.DESCRIBE_CONFIGS
    results: tuple[DescribeConfigsResult, ...] = ()


@message
class DescribeConfigsRequest(Request):
    api_key = ApiKey.DESCRIBE_CONFIGS
    response_type = DescribeConfigsResponse
    resources: tuple[DescribeConfigsResource, ...] = ()
    include_synonyms: bool = False
    include_documentation: bool = False


# --------------------------------------------------------------------- AlterConfigs / Incremental


@message
class AlterableConfig(Message):
    name: str
    value: str | None
    op: int = AlterConfigOp.SET
    """AlterConfigs only sets; IncrementalAlterConfigs says per key."""


@message
class AlterConfigsResource(Message):
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...] = ()


@message
class AlterConfigsResult(Message):
    resource_type: int
    resource_name: str
    error_code: int = NO_ERROR
    error_message: str | None = None


@message
class AlterConfigsResponse(Response):
    api_key = ApiKey.ALTER_CONFIGS
    results: tuple[AlterConfigsResult, ...] = ()


@message
class AlterConfigsRequest(Request):
    """Replace every override of each resource with the configs given (keys left out return to default)."""

    api_key = ApiKey.ALTER_CONFIGS
    response_type = AlterConfigsResponse
    resources: tuple[AlterConfigsResource, ...] = ()
    validate_only: bool = False


@message
class IncrementalAlterConfigsResponse(Response):
    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    results: tuple[AlterConfigsResult, ...] = ()


@message
class IncrementalAlterConfigsRequest(Request):
    """Change single keys of each resource; the other overrides stay."""

    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    response_type = IncrementalAlterConfigsResponse
    resources: tuple[AlterConfigsResource, ...] = ()
    validate_only: bool = False
