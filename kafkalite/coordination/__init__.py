"""A ZooKeeper-like coordination store for the controller: znodes, sessions, ephemerals, watches.

``CoordinationStore`` is the whole ensemble as one deterministic, sans-I/O object; ``StoreClient`` (from
``store.client(timeout_ms)``) is one session's view of it and implements ``CoordinationClient``, the
narrow interface the controller and brokers use. ``paths`` holds Kafka's znode layout and JSON formats.
"""

from kafkalite.coordination.store import (
    BadArguments,
    BadVersion,
    Change,
    Check,
    CoordinationClient,
    CoordinationError,
    CoordinationStore,
    Create,
    Delete,
    EventType,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    Op,
    OpResult,
    SessionExpired,
    SetData,
    Stat,
    StoreClient,
    WatchedEvent,
    Watcher,
    parent_of,
    validate_path,
)

__all__ = [
    "BadArguments",
    "BadVersion",
    "Change",
    "Check",
    "CoordinationClient",
    "CoordinationError",
    "CoordinationStore",
    "Create",
    "Delete",
    "EventType",
    "NoChildrenForEphemerals",
    "NoNode",
    "NodeExists",
    "NotEmpty",
    "Op",
    "OpResult",
    "SessionExpired",
    "SetData",
    "Stat",
    "StoreClient",
    "WatchedEvent",
    "Watcher",
    "parent_of",
    "validate_path",
]
