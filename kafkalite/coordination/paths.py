"""Kafka's znode layout (ZooKeeper mode) and the JSON it stores there.

Paths and field names follow what a Kafka broker writes, so ``dump()`` of a kafkalite cluster reads like
``zookeeper-shell ... ls /brokers/ids`` on a real one. JSON is compact (no spaces), as Kafka writes it.
Decoders accept the older and newer format versions Kafka readers accept and ignore unknown fields.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.kafka_uuid import uuid_from_str, uuid_to_str
from kafkalite.coordination.store import BadArguments, CoordinationClient, NodeExists

# --------------------------------------------------------------------------------------------- paths

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
CONSUMERS = "/consumers"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"

# Persistent paths a Kafka broker makes sure exist at startup (the ones kafkalite uses).
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    ADMIN_DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
)

# The controller writes /controller_epoch = 1 the first time anyone is elected.
INITIAL_CONTROLLER_EPOCH = 0


def _component(value: object, what: str) -> str:
    text = str(value)
    if not text or "/" in text or text in (".", ".."):
        raise BadArguments(f"invalid {what} {value!r} for a znode path")
    return text


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{_component(topic, 'topic')}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def log_dir_event_path() -> str:
    """The prefix a broker creates a sequential znode with when one of its log dirs failed."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's log dir event JSON: which broker had a log dir fail (event 1)."""
    return json.dumps(
        {"version": 1, "broker": int(broker_id), "event": LOG_DIR_FAILURE_EVENT}, separators=(",", ":")
    ).encode()


def decode_log_dir_event(data: bytes) -> int | None:
    try:
        return int(json.loads(data)["broker"])
    except (ValueError, KeyError, TypeError):
        return None


def delete_topic_path(topic: str) -> str:
    return f"{ADMIN_DELETE_TOPICS}/{_component(topic, 'topic')}"


def isr_change_sequential_prefix() -> str:
    """Pass to ``create(..., sequential=True)``: the store appends the 10-digit sequence number."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def isr_change_path(seq: int) -> str:
    return f"{isr_change_sequential_prefix()}{int(seq):010d}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """The pre-0.9 (ZooKeeper-stored) committed offset of a consumer group."""
    return f"{CONSUMERS}/{_component(group, 'group')}/offsets/{_component(topic, 'topic')}/{int(partition)}"


def parse_broker_path(path: str) -> int:
    """``/brokers/ids/3`` -> 3."""
    prefix = BROKER_IDS + "/"
    if not path.startswith(prefix):
        raise BadArguments(f"{path!r} is not under {BROKER_IDS}")
    return int(path[len(prefix) :])


def parse_partition_state_path(path: str) -> tuple[str, int]:
    """``/brokers/topics/t/partitions/0/state`` -> ("t", 0)."""
    parts = path.split("/")
    if (
        len(parts) != 7
        or parts[1:3] != ["brokers", "topics"]
        or parts[4] != "partitions"
        or parts[6] != "state"
    ):
        raise BadArguments(f"{path!r} is not a partition state path")
    return parts[3], int(parts[5])


def parse_isr_change_seq(name_or_path: str) -> int:
    """``isr_change_0000000007`` (or its full path) -> 7."""
    name = name_or_path.rsplit("/", 1)[-1]
    if not name.startswith(ISR_CHANGE_PREFIX):
        raise BadArguments(f"{name_or_path!r} is not an ISR change notification")
    return int(name[len(ISR_CHANGE_PREFIX) :])


def ensure_persistent_paths(client: CoordinationClient) -> list[str]:
    """Create Kafka's persistent top-level paths that are missing; returns those created."""
    created = []
    for path in PERSISTENT_PATHS:
        with contextlib.suppress(NodeExists):
            created.append(client.create(path, make_parents=True))
    return created


# ---------------------------------------------------------------------------------------------- JSON


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadArguments(f"{what}: not JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise BadArguments(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral), format version 4.

    ``host``/``port`` repeat the PLAINTEXT endpoint for pre-0.10 clients (null/-1 without one), and
    ``timestamp`` is a string of epoch milliseconds, as Kafka writes them.
    """

    broker_id: int
    endpoints: tuple[str, ...]  # "LISTENER://host:port"
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    timestamp: int = 0
    rack: str | None = None
    jmx_port: int = -1

    def __post_init__(self) -> None:
        # Without an explicit map, each listener is named after its security protocol (Kafka's default).
        if not self.listener_security_protocol_map:
            default = {ep.partition("://")[0]: ep.partition("://")[0] for ep in self.endpoints}
            object.__setattr__(self, "listener_security_protocol_map", default)

    def encode(self) -> bytes:
        host: str | None = None
        port = -1
        for ep in self.endpoints:
            listener, _, hostport = ep.partition("://")
            protocol = self.listener_security_protocol_map.get(listener, listener)
            if protocol == "PLAINTEXT":
                host, _, port_s = hostport.rpartition(":")
                port = int(port_s)
                break
        obj: dict[str, Any] = {
            "listener_security_protocol_map": dict(self.listener_security_protocol_map),
            "endpoints": list(self.endpoints),
            "jmx_port": self.jmx_port,
            "host": host,
            "timestamp": str(self.timestamp),
            "port": port,
            "version": 4,
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        return _dumps(obj)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        obj = _loads(data, f"broker {broker_id} registration")
        endpoints = obj.get("endpoints")
        if endpoints is None:  # version 1: host and port only
            endpoints = [f"PLAINTEXT://{obj['host']}:{obj['port']}"]
        return cls(
            broker_id=broker_id,
            endpoints=tuple(endpoints),
            listener_security_protocol_map=dict(obj.get("listener_security_protocol_map") or {}),
            timestamp=int(obj.get("timestamp", 0)),
            rack=obj.get("rack"),
            jmx_port=int(obj.get("jmx_port", -1)),
        )


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: partition -> replica list, and since Kafka 2.8 (format version 3) the
    topic's id (KIP-516), in Kafka's ``Uuid`` string form. A znode of an older version has no id."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None

    def encode(self) -> bytes:
        def enc(m: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        obj: dict[str, Any] = {
            "version": 3,
            "partitions": enc(self.partitions),
            "adding_replicas": enc(self.adding_replicas),
            "removing_replicas": enc(self.removing_replicas),
        }
        if self.topic_id is not None:
            obj["topic_id"] = uuid_to_str(self.topic_id)
        return _dumps(obj)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        obj = _loads(data, "topic assignment")

        def dec(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (obj.get(key) or {}).items()}

        tid = obj.get("topic_id")
        if tid is not None:
            try:
                tid = uuid_from_str(str(tid))
            except ValueError as e:
                raise BadArguments(f"topic assignment znode has a bad topic_id: {e}") from None
        return cls(dec("partitions"), dec("adding_replicas"), dec("removing_replicas"), tid)


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``: Kafka's LeaderIsrAndControllerEpoch (version 1).

    Its znode version (the Stat's, not this JSON's ``version`` field) is what Kafka calls the
    partition's zkVersion and uses for conditional ISR updates.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        obj = _loads(data, "partition state")
        return cls(
            leader=int(obj["leader"]),
            leader_epoch=int(obj["leader_epoch"]),
            isr=tuple(int(b) for b in obj["isr"]),
            controller_epoch=int(obj["controller_epoch"]),
        )


@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller`` (ephemeral): who the controller is, since ``timestamp`` (a string in the JSON)."""

    broker_id: int
    timestamp: int = 0

    def encode(self) -> bytes:
        return _dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp)})

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        # Kafka 0.8 wrote a bare broker id here; readers still accept it.
        text = data.decode().strip()
        if text.lstrip("-").isdigit():
            return cls(int(text))
        obj = _loads(data, "controller registration")
        return cls(int(obj["brokerid"]), int(obj.get("timestamp", 0)))


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as bare decimal text, not JSON."""
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    """``/admin/preferred_replica_election`` and ``isr_change_<seq>``: a list of topic-partitions."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": int(p)} for t, p in partitions]})


def decode_partition_list(data: bytes) -> list[tuple[str, int]]:
    obj = _loads(data, "partition list")
    return [(str(e["topic"]), int(e["partition"])) for e in obj.get("partitions", [])]


def encode_reassignment(reassignment: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    """``/admin/reassign_partitions``: target replica lists per topic-partition."""
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": int(p), "replicas": [int(b) for b in r]}
                for (t, p), r in reassignment.items()
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    obj = _loads(data, "partition reassignment")
    return {
        (str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
        for e in obj.get("partitions", [])
    }


def encode_consumer_offset(offset: int) -> bytes:
    """``/consumers/<group>/offsets/<topic>/<partition>``: the offset as decimal text."""
    return str(int(offset)).encode()


def decode_consumer_offset(data: bytes) -> int:
    return int(data.decode())
