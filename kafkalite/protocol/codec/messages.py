"""The messages kafkalite's TCP listener serves, declared in ``kafkalite.protocol.codec.schema``'s form, with the
version ranges it advertises in ApiVersions. Field names, types, version ranges and tags follow Kafka's
protocol (the fields of a version a client negotiates must be exactly Kafka's). The admin APIs are served
through their flexible versions, some of which (DescribeCluster, the reassignment APIs) exist only in
flexible form.

The data-path and group APIs are served up to Kafka 3.9's maxima where kafkalite has the semantics a
version adds, flexible versions included; where it lacks them, the range stops below, for these reasons:

* Produce <= 9 (3.9: 11): v10 is KIP-951 (CurrentLeader and NodeEndpoints tagged onto a
  NOT_LEADER_OR_FOLLOWER answer), v11 KIP-890 (the partition joins the transaction on the produce itself,
  with no AddPartitionsToTxn from the client).
* Fetch <= 12 (3.9: 17): v13 names topics by TopicId (answering UNKNOWN_TOPIC_ID), v15 ReplicaState,
  v16 KIP-951's leader hints, v17 the replica's directory id. v12 brings the diverging epoch to consumers.
* OffsetFetch <= 6 (3.9: 9): v7 asks require_stable (KIP-447: UNSTABLE_OFFSET_COMMIT while a transaction
  holds offsets of the group), v8 batches groups, v9 adds the member id and epoch of KIP-848.
* FindCoordinator <= 3 (3.9: 5): v4 batches coordinator keys, v5 is KIP-890's TRANSACTION_ABORTABLE.
* InitProducerId <= 2 (3.9: 5): v3 is KIP-360 (the producer's current id and epoch, bumped in place),
  v4 answers PRODUCER_FENCED, v5 KIP-890.
* AddPartitionsToTxn <= 3 (3.9: 5): v4 is the brokers' batched, verify-only form, v5 KIP-890;
  AddOffsetsToTxn, EndTxn and TxnOffsetCommit <= 3 (3.9: 4): v4 is KIP-890.

At their 3.9 maxima: ListOffsets 9 (MAX_TIMESTAMP; EARLIEST_LOCAL_TIMESTAMP and LATEST_TIERED_TIMESTAMP
answered as Kafka does without tiered storage), Metadata 12, OffsetCommit 9 (a KIP-848 member must use
it), JoinGroup 9 (KIP-814's SkipAssignment; below v9 the previous leader id, as Kafka), Heartbeat 4,
LeaveGroup 5, SyncGroup 5, DescribeGroups 5, ListGroups 5. ApiVersions stays at 3, its flexible version
and the first request every current client sends.
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
        API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS, ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS,
    )},
}  # fmt: skip


DESCRIBE_QUORUM = SPECS[55]
"""DescribeQuorum, which a controller's listener serves and a KRaft broker's forwards to the controller."""

KRAFT_ONLY_APIS = frozenset({55})
"""APIs a ZooKeeper-mode broker neither lists in ApiVersions nor reads: Kafka scopes each API to listener
types, and DescribeQuorum's are only ``broker`` (KRaft) and ``controller``, not ``zkBroker``."""


def supported_versions(kraft: bool = False) -> list[tuple[int, int, int]]:
    """``(api_key, min_version, max_version)`` of every API a broker serves, for the ApiVersions answer;
    ``kraft``: a KRaft broker's, which adds ``KRAFT_ONLY_APIS``."""
    return [
        (k, s.min_version, s.max_version)
        for k, s in sorted(SPECS.items())
        if kraft or k not in KRAFT_ONLY_APIS
    ]
