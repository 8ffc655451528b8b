"""The messages kafkalite's TCP listener serves, declared in ``kafkalite.protocol.codec.schema``'s form, with the
version ranges it advertises in ApiVersions. Field names, types, version ranges and tags follow Kafka's
protocol (the fields of a version a client negotiates must be exactly Kafka's). The data-path and group
APIs stop at the last version before they turned flexible (ApiVersions excepted: its flexible v3 is the
first request every current client sends); the admin APIs are served through their flexible versions,
some of which (DescribeCluster, the reassignment APIs) exist only in flexible form.
"""

from __future__ import annotations

from kafkalite.protocol import REQUEST_TYPES, Request
from kafkalite.protocol.codec.binding import schema_of
from kafkalite.protocol.codec.schema import ANY, A, F, MessageSpec, S  # noqa: F401

_API_VERSIONS_REQUEST = (
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
)
_API_VERSIONS_RESPONSE = (
    F("error_code", "int16", "0+"),
    A(
        "api_keys",
        "0+",
        [
            F("api_key", "int16", "0+"),
            F("min_version", "int16", "0+"),
            F("max_version", "int16", "0+"),
        ],
    ),
    F("throttle_time_ms", "int32", "1+"),
    A(
        "supported_features",
        "3+",
        [
            F("name", "string", "3+"),
            F("min_version", "int16", "3+"),
            F("max_version", "int16", "3+"),
        ],
        tag=0,
    ),
    F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    A(
        "finalized_features",
        "3+",
        [
            F("name", "string", "3+"),
            F("max_version_level", "int16", "3+"),
            F("min_version_level", "int16", "3+"),
        ],
        tag=2,
    ),
    F("zk_migration_ready", "bool", "3+", tag=3, default=False),
)
API_VERSIONS = MessageSpec(18, "ApiVersions", 0, 3, 3, _API_VERSIONS_REQUEST, _API_VERSIONS_RESPONSE)

_METADATA_REQUEST = (
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
        ],
        nullable="1+",
    ),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8+"),
    F("include_topic_authorized_operations", "bool", "8+"),
)
_METADATA_RESPONSE = (
    F("throttle_time_ms", "int32", "3+"),
    A(
        "brokers",
        "0+",
        [
            F("node_id", "int32", "0+"),
            F("host", "string", "0+"),
            F("port", "int32", "0+"),
            F("rack", "string", "1+", nullable="1+"),
        ],
    ),
    F("cluster_id", "string", "2+", nullable="2+"),
    F("controller_id", "int32", "1+", default=-1),
    A(
        "topics",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("name", "string", "0+"),
            F("is_internal", "bool", "1+", default=False),
            A(
                "partitions",
                "0+",
                [
                    F("error_code", "int16", "0+"),
                    F("partition_index", "int32", "0+"),
                    F("leader_id", "int32", "0+"),
                    F("leader_epoch", "int32", "7+", default=-1),
                    F("replica_nodes", "[]int32", "0+"),
                    F("isr_nodes", "[]int32", "0+"),
                    F("offline_replicas", "[]int32", "5+"),
                ],
            ),
            F("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ],
    ),
    F("cluster_authorized_operations", "int32", "8+", default=-2147483648),
)
METADATA = MessageSpec(3, "Metadata", 0, 8, ANY, _METADATA_REQUEST, _METADATA_RESPONSE)


_CREATE_TOPICS_REQUEST = (
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            F("num_partitions", "int32", "0+"),
            F("replication_factor", "int16", "0+"),
            A(
                "assignments",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("broker_ids", "[]int32", "0+"),
                ],
            ),
            A(
                "configs",
                "0+",
                [
                    F("name", "string", "0+"),
                    F("value", "string", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
    F("timeout_ms", "int32", "0+", default=60000),
    F("validate_only", "bool", "1+", default=False),
)
_CREATE_TOPICS_RESPONSE = (
    F("throttle_time_ms", "int32", "2+"),
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "1+", nullable="0+"),
        ],
    ),
)
CREATE_TOPICS = MessageSpec(19, "CreateTopics", 0, 4, ANY, _CREATE_TOPICS_REQUEST, _CREATE_TOPICS_RESPONSE)

_DELETE_TOPICS_REQUEST = (
    F("topic_names", "[]string", "0+"),
    F("timeout_ms", "int32", "0+"),
)
_DELETE_TOPICS_RESPONSE = (
    F("throttle_time_ms", "int32", "1+"),
    A(
        "responses",
        "0+",
        [
            F("name", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "5+", nullable="5+"),
        ],
    ),
)
DELETE_TOPICS = MessageSpec(20, "DeleteTopics", 0, 5, 4, _DELETE_TOPICS_REQUEST, _DELETE_TOPICS_RESPONSE)


_CREATE_PARTITIONS_REQUEST = (
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            F("count", "int32", "0+"),
            A(
                "assignments",
                "0+",
                [
                    F("broker_ids", "[]int32", "0+"),
                ],
                nullable="0+",
            ),
        ],
    ),
    F("timeout_ms", "int32", "0+"),
    F("validate_only", "bool", "0+"),
)
_CREATE_PARTITIONS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "results",
        "0+",
        [
            F("name", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
        ],
    ),
)
CREATE_PARTITIONS = MessageSpec(
    37, "CreatePartitions", 0, 3, 2, _CREATE_PARTITIONS_REQUEST, _CREATE_PARTITIONS_RESPONSE
)

_DELETE_RECORDS_REQUEST = (
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            A(
                "partitions",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("offset", "int64", "0+"),
                ],
            ),
        ],
    ),
    F("timeout_ms", "int32", "0+"),
)
_DELETE_RECORDS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            A(
                "partitions",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("low_watermark", "int64", "0+"),
                    F("error_code", "int16", "0+"),
                ],
            ),
        ],
    ),
)
DELETE_RECORDS = MessageSpec(21, "DeleteRecords", 0, 2, 2, _DELETE_RECORDS_REQUEST, _DELETE_RECORDS_RESPONSE)

_DESCRIBE_CONFIGS_REQUEST = (
    A(
        "resources",
        "0+",
        [
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("configuration_keys", "[]string", "0+", nullable="0+"),
        ],
    ),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
)
_DESCRIBE_CONFIGS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "results",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            A(
                "configs",
                "0+",
                [
                    F("name", "string", "0+"),
                    F("value", "string", "0+", nullable="0+"),
                    F("read_only", "bool", "0+"),
                    F("is_default", "bool", "0"),
                    F("config_source", "int8", "1+", default=-1),
                    F("is_sensitive", "bool", "0+"),
                    A(
                        "synonyms",
                        "1+",
                        [
                            F("name", "string", "1+"),
                            F("value", "string", "1+", nullable="0+"),
                            F("source", "int8", "1+"),
                        ],
                    ),
                    F("config_type", "int8", "3+"),
                    F("documentation", "string", "3+", nullable="0+"),
                ],
            ),
        ],
    ),
)
DESCRIBE_CONFIGS = MessageSpec(
    32, "DescribeConfigs", 0, 4, 4, _DESCRIBE_CONFIGS_REQUEST, _DESCRIBE_CONFIGS_RESPONSE
)

_ALTER_CONFIGS_REQUEST = (
    A(
        "resources",
        "0+",
        [
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            A(
                "configs",
                "0+",
                [
                    F("name", "string", "0+"),
                    F("value", "string", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
    F("validate_only", "bool", "0+"),
)
_ALTER_CONFIGS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "responses",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
        ],
    ),
)
ALTER_CONFIGS = MessageSpec(33, "AlterConfigs", 0, 2, 2, _ALTER_CONFIGS_REQUEST, _ALTER_CONFIGS_RESPONSE)

_INCREMENTAL_ALTER_CONFIGS_REQUEST = (
    A(
        "resources",
        "0+",
        [
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            A(
                "configs",
                "0+",
                [
                    F("name", "string", "0+"),
                    F("config_operation", "int8", "0+"),
                    F("value", "string", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
    F("validate_only", "bool", "0+"),
)
_INCREMENTAL_ALTER_CONFIGS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "responses",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
        ],
    ),
)
INCREMENTAL_ALTER_CONFIGS = MessageSpec(
    44,
    "IncrementalAlterConfigs",
    0,
    1,
    1,
    _INCREMENTAL_ALTER_CONFIGS_REQUEST,
    _INCREMENTAL_ALTER_CONFIGS_RESPONSE,
)

_DESCRIBE_CLUSTER_REQUEST = (
    F("include_cluster_authorized_operations", "bool", "0+"),
    F("endpoint_type", "int8", "1+", default=1),
)
_DESCRIBE_CLUSTER_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    F("endpoint_type", "int8", "1+", default=1),
    F("cluster_id", "string", "0+"),
    F("controller_id", "int32", "0+", default=-1),
    A(
        "brokers",
        "0+",
        [
            F("broker_id", "int32", "0+"),
            F("host", "string", "0+"),
            F("port", "int32", "0+"),
            F("rack", "string", "0+", nullable="0+"),
        ],
    ),
    F("cluster_authorized_operations", "int32", "0+", default=-2147483648),
)
DESCRIBE_CLUSTER = MessageSpec(
    60, "DescribeCluster", 0, 1, 0, _DESCRIBE_CLUSTER_REQUEST, _DESCRIBE_CLUSTER_RESPONSE
)

_ELECT_LEADERS_REQUEST = (
    F("election_type", "int8", "1+"),
    A(
        "topic_partitions",
        "0+",
        [
            F("topic", "string", "0+"),
            F("partitions", "[]int32", "0+"),
        ],
        nullable="0+",
    ),
    F("timeout_ms", "int32", "0+", default=60000),
)
_ELECT_LEADERS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "1+"),
    A(
        "replica_election_results",
        "0+",
        [
            F("topic", "string", "0+"),
            A(
                "partition_result",
                "0+",
                [
                    F("partition_id", "int32", "0+"),
                    F("error_code", "int16", "0+"),
                    F("error_message", "string", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
)
ELECT_LEADERS = MessageSpec(43, "ElectLeaders", 0, 2, 2, _ELECT_LEADERS_REQUEST, _ELECT_LEADERS_RESPONSE)

_ALTER_PARTITION_REASSIGNMENTS_REQUEST = (
    F("timeout_ms", "int32", "0+", default=60000),
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            A(
                "partitions",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("replicas", "[]int32", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
)
_ALTER_PARTITION_REASSIGNMENTS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    A(
        "responses",
        "0+",
        [
            F("name", "string", "0+"),
            A(
                "partitions",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("error_code", "int16", "0+"),
                    F("error_message", "string", "0+", nullable="0+"),
                ],
            ),
        ],
    ),
)
ALTER_PARTITION_REASSIGNMENTS = MessageSpec(
    45,
    "AlterPartitionReassignments",
    0,
    0,
    0,
    _ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    _ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
)

_LIST_PARTITION_REASSIGNMENTS_REQUEST = (
    F("timeout_ms", "int32", "0+", default=60000),
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            F("partition_indexes", "[]int32", "0+"),
        ],
        nullable="0+",
    ),
)
_LIST_PARTITION_REASSIGNMENTS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    A(
        "topics",
        "0+",
        [
            F("name", "string", "0+"),
            A(
                "partitions",
                "0+",
                [
                    F("partition_index", "int32", "0+"),
                    F("replicas", "[]int32", "0+"),
                    F("adding_replicas", "[]int32", "0+"),
                    F("removing_replicas", "[]int32", "0+"),
                ],
            ),
        ],
    ),
)
LIST_PARTITION_REASSIGNMENTS = MessageSpec(
    46,
    "ListPartitionReassignments",
    0,
    0,
    0,
    _LIST_PARTITION_REASSIGNMENTS_REQUEST,
    _LIST_PARTITION_REASSIGNMENTS_RESPONSE,
)


# ------------------------------------------------------------------ security: SASL, ACLs, SCRAM users

_SASL_HANDSHAKE_REQUEST = (F("mechanism", "string", "0+"),)
_SASL_HANDSHAKE_RESPONSE = (
    F("error_code", "int16", "0+"),
    F("mechanisms", "[]string", "0+"),
)
SASL_HANDSHAKE = MessageSpec(
    17, "SaslHandshake", 0, 1, ANY, _SASL_HANDSHAKE_REQUEST, _SASL_HANDSHAKE_RESPONSE
)

_SASL_AUTHENTICATE_REQUEST = (F("auth_bytes", "bytes", "0+"),)
_SASL_AUTHENTICATE_RESPONSE = (
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    F("auth_bytes", "bytes", "0+"),
    F("session_lifetime_ms", "int64", "1+"),
)
SASL_AUTHENTICATE = MessageSpec(
    36, "SaslAuthenticate", 0, 2, 2, _SASL_AUTHENTICATE_REQUEST, _SASL_AUTHENTICATE_RESPONSE
)

_CREATE_ACLS_REQUEST = (
    A(
        "creations",
        "0+",
        [
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("resource_pattern_type", "int8", "1+", default=3),
            F("principal", "string", "0+"),
            F("host", "string", "0+"),
            F("operation", "int8", "0+"),
            F("permission_type", "int8", "0+"),
        ],
    ),
)
_CREATE_ACLS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "results",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
        ],
    ),
)
CREATE_ACLS = MessageSpec(30, "CreateAcls", 0, 3, 2, _CREATE_ACLS_REQUEST, _CREATE_ACLS_RESPONSE)

_DESCRIBE_ACLS_REQUEST = (
    F("resource_type_filter", "int8", "0+"),
    F("resource_name_filter", "string", "0+", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", "0+", nullable="0+"),
    F("host_filter", "string", "0+", nullable="0+"),
    F("operation", "int8", "0+"),
    F("permission_type", "int8", "0+"),
)
_DESCRIBE_ACLS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    A(
        "resources",
        "0+",
        [
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("pattern_type", "int8", "1+", default=3),
            A(
                "acls",
                "0+",
                [
                    F("principal", "string", "0+"),
                    F("host", "string", "0+"),
                    F("operation", "int8", "0+"),
                    F("permission_type", "int8", "0+"),
                ],
            ),
        ],
    ),
)
DESCRIBE_ACLS = MessageSpec(29, "DescribeAcls", 0, 3, 2, _DESCRIBE_ACLS_REQUEST, _DESCRIBE_ACLS_RESPONSE)

_DELETE_ACLS_REQUEST = (
    A(
        "filters",
        "0+",
        [
            F("resource_type_filter", "int8", "0+"),
            F("resource_name_filter", "string", "0+", nullable="0+"),
            F("pattern_type_filter", "int8", "1+", default=3),
            F("principal_filter", "string", "0+", nullable="0+"),
            F("host_filter", "string", "0+", nullable="0+"),
            F("operation", "int8", "0+"),
            F("permission_type", "int8", "0+"),
        ],
    ),
)
_DELETE_ACLS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "filter_results",
        "0+",
        [
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            A(
                "matching_acls",
                "0+",
                [
                    F("error_code", "int16", "0+"),
                    F("error_message", "string", "0+", nullable="0+"),
                    F("resource_type", "int8", "0+"),
                    F("resource_name", "string", "0+"),
                    F("pattern_type", "int8", "1+", default=3),
                    F("principal", "string", "0+"),
                    F("host", "string", "0+"),
                    F("operation", "int8", "0+"),
                    F("permission_type", "int8", "0+"),
                ],
            ),
        ],
    ),
)
DELETE_ACLS = MessageSpec(31, "DeleteAcls", 0, 3, 2, _DELETE_ACLS_REQUEST, _DELETE_ACLS_RESPONSE)

_ALTER_USER_SCRAM_CREDENTIALS_REQUEST = (
    A(
        "deletions",
        "0+",
        [
            F("name", "string", "0+"),
            F("mechanism", "int8", "0+"),
        ],
    ),
    A(
        "upsertions",
        "0+",
        [
            F("name", "string", "0+"),
            F("mechanism", "int8", "0+"),
            F("iterations", "int32", "0+"),
            F("salt", "bytes", "0+"),
            F("salted_password", "bytes", "0+"),
        ],
    ),
)
_ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    A(
        "results",
        "0+",
        [
            F("user", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
        ],
    ),
)
ALTER_USER_SCRAM_CREDENTIALS = MessageSpec(
    51,
    "AlterUserScramCredentials",
    0,
    0,
    0,
    _ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
    _ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
)

_DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = (
    A(
        "users",
        "0+",
        [
            F("name", "string", "0+"),
        ],
        nullable="0+",
    ),
)
_DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = (
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+"),
    A(
        "results",
        "0+",
        [
            F("user", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            A(
                "credential_infos",
                "0+",
                [
                    F("mechanism", "int8", "0+"),
                    F("iterations", "int32", "0+"),
                ],
            ),
        ],
    ),
)
DESCRIBE_USER_SCRAM_CREDENTIALS = MessageSpec(
    50,
    "DescribeUserScramCredentials",
    0,
    0,
    0,
    _DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
    _DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
)


def spec_of(cls: type[Request]) -> MessageSpec:
    """The wire spec of an API whose request and response dataclasses declare their fields."""
    lo, hi = cls.versions  # type: ignore[misc]
    name = cls.__name__.removesuffix("Request")
    return MessageSpec(
        cls.api_key, name, lo, hi, cls.flexible_from, schema_of(cls), schema_of(cls.response_type)
    )


SPECS: dict[int, MessageSpec] = {
    **{int(k): spec_of(c) for k, c in REQUEST_TYPES.items() if c.versions is not None},
    **{s.api_key: s
    for s in (
        API_VERSIONS, METADATA,         CREATE_TOPICS,
                CREATE_PARTITIONS, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLUSTER, DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS, DELETE_TOPICS, SASL_HANDSHAKE, SASL_AUTHENTICATE,
        CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS, ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS,
    )},
}  # fmt: skip


def supported_versions() -> list[tuple[int, int, int]]:
    """``(api_key, min_version, max_version)`` of every API served, for the ApiVersions answer."""
    return [(k, s.min_version, s.max_version) for k, s in sorted(SPECS.items())]
