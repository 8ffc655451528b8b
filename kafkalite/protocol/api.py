"""Kafka's API keys, the topic-partition name, shared sentinels, and the base classes of every message.

A request or response is a frozen, slotted, keyword-only dataclass: plain data, no behaviour. Every field has
a default (Kafka's own default where its message schema gives one, else ``-1`` for ids/epochs/offsets, ``""``
or ``None`` for names, ``()`` for lists), so a message can be built with only the fields that matter.
Lists are tuples, so messages compare and hash by value and a simulator can use them as keys or dedupe them.
Fields that identify one entry of a list (a ``TopicPartition``, a topic or member name) are required.

Per-partition entries carry a ``tp: TopicPartition`` and sit in one flat tuple, instead of Kafka's nesting of
partitions under topics; a wire codec regroups them by topic (it also adds the request header: correlation
id, client id, api version, and the ``throttle_time_ms`` of responses, which kafkalite does not use).
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum
from typing import ClassVar

from kafkalite.protocol.codec.binding import wire, wire_partition
from kafkalite.protocol.topic_partition import TopicPartition


class ApiKey(IntEnum):
    """The number at the start of every Kafka request header that says which API it is."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73


class CoordinatorType(IntEnum):
    GROUP = 0
    TRANSACTION = 1


# Sentinels with Kafka's values.
NO_ERROR = 0
CONSUMER_REPLICA_ID = -1  # replica_id of a fetch or list-offsets from a consumer
DEBUGGING_REPLICA_ID = -2  # a tool reading past the high watermark; OffsetForLeaderEpoch's default replica_id
NO_LEADER = -1  # leader id of a partition without a leader
NO_NODE = -1  # broker/node id "unknown" (e.g. no controller, no coordinator)
UNKNOWN_EPOCH = -1  # leader epoch / partition epoch not known or not given
UNKNOWN_OFFSET = -1  # offset not known (high watermark, log start offset, end offset, committed offset)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset (or LSO under read_committed)
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
MAX_TIMESTAMP = -3  # ListOffsets: the offset of the record with the largest timestamp
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets v8+: the local log's start (the log start without tiering)
LATEST_TIERED_TIMESTAMP = -5  # ListOffsets v9+: the last offset in remote storage (-1 without tiering)
#: Topics only brokers write to (Kafka's ``Topic.INTERNAL_TOPICS``): clients may read them, not produce.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def fast_frozen_init(cls: type) -> type:
    """Give a frozen, slotted dataclass an ``__init__`` that fills its slots through their descriptors.

    The ``__init__`` that ``dataclasses`` writes for a frozen class calls ``object.__setattr__`` once per
    field, which costs about 2.5 µs for a ten-field message; the simulator builds several messages per
    record batch. Setting each slot through its member descriptor gets around the frozen ``__setattr__``
    the same way at a third of the cost. Same signature, same defaults; instances stay frozen.
    """
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if any(f.default_factory is not dataclasses.MISSING for f in fields) or hasattr(cls, "__post_init__"):
        return cls  # not needed by any message so far; keep the generated __init__
    ns: dict[str, object] = {}
    params = []
    kw = False
    for f in fields:
        if f.kw_only and not kw:
            params.append("*")
            kw = True
        ns[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            ns[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"    _set_{f.name}(self, {f.name})\n" for f in fields) or "    pass\n"
    exec(f"def __init__(self, {', '.join(params)}):\n{body}", ns)  # noqa: S102 - generated from field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]
    return cls


def message(cls: type) -> type:
    """Every message class is built with this decorator: frozen, slotted, keyword-only, repr from
    ``Message``, and the faster ``__init__`` of ``fast_frozen_init``."""
    return fast_frozen_init(dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False)(cls))


def _show(value: object) -> str:
    """A repr that is the same on every run: no memory addresses, record bytes as a size, partitions as
    ``topic-partition``."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, TopicPartition):  # as Kafka's logs print it: orders-0
        return str(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        inner = ", ".join(_show(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, IntEnum):  # as a plain int, so equal messages print alike however they were built
        return str(int(value))
    if type(value).__repr__ is object.__repr__:  # e.g. a FileSlice: name its type and size only
        size = len(value) if hasattr(value, "__len__") else None  # type: ignore[arg-type]
        return f"<{type(value).__name__}{'' if size is None else f' {size} bytes'}>"
    return repr(value)


class Message:
    """Base of requests, responses and their entries. Its repr is stable (the simulator's event log prints
    messages) and leaves out fields still at their default, so logs show what a message actually says."""

    __slots__ = ()

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and value == f.default:
                continue
            parts.append(f"{f.name}={_show(value)}")
        return f"{type(self).__name__}({', '.join(parts)})"


class Response(Message):
    """Base of responses; ``api_key`` says which API answered."""

    __slots__ = ()
    api_key: ClassVar[ApiKey]


class Request(Message):
    """Base of requests; ``api_key`` is the API, ``response_type`` the class a broker answers with."""

    __slots__ = ()
    api_key: ClassVar[ApiKey]
    response_type: ClassVar[type[Response]]
    versions: ClassVar[tuple[int, int] | None] = None
    """The versions kafkalite's TCP listener serves (and advertises in ApiVersions); None: not on the wire."""
    flexible_from: ClassVar[int] = 0x7FFF
    """The first flexible version (KIP-482) in Kafka's schema, if the range served reaches it."""


@message
class PartitionError(Message):
    """One partition's outcome where Kafka reports nothing but an error code (Kafka's names:
    ``partition_index``, ``error_code``; a message calling them otherwise passes ``renames``)."""

    tp: TopicPartition = wire_partition()
    error_code: int = wire("int16", "0+", NO_ERROR)
