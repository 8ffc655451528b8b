"""Kafka's ``kafka-log-dirs --describe`` (each broker's log dirs and the replicas in them, as one JSON
line) and the log-dir half of ``kafka-reassign-partitions``: a reassignment JSON whose ``log_dirs`` names,
per replica, the dir to move it to (``"any"``: leave it where it is)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kafkalite.errors import KafkaError, error_for_code
from kafkalite.protocol import TopicPartition

ANY_LOG_DIR = "any"

# The Java exception class kafka-log-dirs prints in a dir's "error" (the class of the error code).
_JAVA_EXCEPTIONS = {
    56: "org.apache.kafka.common.errors.KafkaStorageException",
    31: "org.apache.kafka.common.errors.ClusterAuthorizationException",
    -1: "org.apache.kafka.common.errors.UnknownServerException",
}


def _error_name(code: int) -> str | None:
    if code == 0:
        return None
    if code in _JAVA_EXCEPTIONS:
        return _JAVA_EXCEPTIONS[code]
    cls = error_for_code(code) or KafkaError
    return getattr(cls, "name", None) or str(code)


def describe(admin: Any, brokers: Sequence[int] = (), topics: Sequence[str] = ()) -> dict:
    """The document kafka-log-dirs prints: every broker asked (all when none named), its dirs, and in each
    the replicas of ``topics`` (all when none named). Its keys are in the order Kafka's tool writes them."""
    admin.metadata()
    cluster = sorted(admin.brokers)
    unknown = sorted(set(brokers) - set(cluster))
    if unknown:
        raise ValueError(
            "ERROR: The given brokers do not exist from --broker-list: "
            f"{','.join(map(str, unknown))}. Current existent brokers: {','.join(map(str, cluster))}"
        )
    chosen = sorted(set(brokers)) if brokers else cluster
    out = []
    for b in chosen:
        resp = admin.describe_log_dirs(b)
        dirs = []
        for r in resp["results"]:
            parts = [
                {
                    "partition": f"{t['name']}-{p['partition_index']}",
                    "size": p["partition_size"],
                    "offsetLag": p["offset_lag"],
                    "isFuture": p["is_future_key"],
                }
                for t in r["topics"]
                if not topics or t["name"] in topics
                for p in t["partitions"]
            ]
            parts.sort(
                key=lambda e: (
                    e["partition"].rpartition("-")[0],
                    int(e["partition"].rpartition("-")[2]),
                    e["isFuture"],
                )
            )
            dirs.append({"partitions": parts, "error": _error_name(r["error_code"]), "logDir": r["log_dir"]})
        out.append({"broker": b, "logDirs": dirs})
    return {"brokers": out, "version": 1}


def format_describe(admin: Any, brokers: Sequence[int] = (), topics: Sequence[str] = ()) -> str:
    """kafka-log-dirs --describe's three lines."""
    doc = describe(admin, brokers, topics)
    asked = ",".join(str(e["broker"]) for e in doc["brokers"])
    return (
        "Querying brokers for log directories information\n"
        f"Received log directory information from brokers {asked}\n"
        f"{json.dumps(doc, separators=(',', ':'))}"
    )


def parse_log_dir_moves(text: str) -> dict[tuple[int, TopicPartition], str]:
    """The replicas a reassignment JSON moves between dirs: ``(broker, partition) -> dir``. Kafka's format,
    ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..],"log_dirs":[..]}]}``;
    ``log_dirs`` (optional) has one entry per replica, ``"any"`` for a replica left where it is."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the reassignment JSON does not parse: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError('the reassignment JSON has no "partitions" list')
    moves: dict[tuple[int, TopicPartition], str] = {}
    for i, entry in enumerate(doc["partitions"]):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"partitions[{i}] needs topic, partition and replicas: {e}") from e
        dirs = entry.get("log_dirs")
        if dirs is None:
            continue
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise ValueError(
                f"partitions[{i}] ({tp}): log_dirs has {len(dirs) if isinstance(dirs, list) else 'no'} "
                f'entries for {len(replicas)} replicas; give one per replica ("any" to leave it)'
            )
        for broker, d in zip(replicas, dirs, strict=True):
            if d != ANY_LOG_DIR:
                moves[(broker, tp)] = str(d)
    return moves


def alter(admin: Any, moves: dict[tuple[int, TopicPartition], str]) -> list[str]:
    """Send each broker its AlterReplicaLogDirs; one line per replica saying whether its move started.
    The replicas named must be the partition's current ones: this moves replicas between the dirs of
    their broker, it does not reassign partitions to other brokers."""
    current = {}
    for t in admin.metadata(sorted({tp.topic for _b, tp in moves}))["topics"]:
        for p in t["partitions"]:
            current[TopicPartition(t["name"], p["partition_index"])] = set(p["replica_nodes"])
    for broker, tp in moves:
        if broker not in current.get(tp, set()):
            raise ValueError(
                f"broker {broker} holds no replica of {tp} (replicas: {sorted(current.get(tp, ()))}); "
                "moving a replica to another broker is a partition reassignment, which this does not do"
            )
    by_broker: dict[int, dict[TopicPartition, str]] = {}
    for (broker, tp), d in moves.items():
        by_broker.setdefault(broker, {})[tp] = d
    lines = []
    for broker in sorted(by_broker):
        codes = admin.alter_replica_log_dirs(broker, by_broker[broker])
        for tp in sorted(by_broker[broker]):
            code = codes.get(tp, -1)
            what = "started" if code == 0 else (getattr(error_for_code(code), "name", None) or str(code))
            lines.append(f"Moving replica {tp} on broker {broker} to {by_broker[broker][tp]}: {what}")
    return lines
