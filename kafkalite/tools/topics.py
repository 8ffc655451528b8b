"""Kafka's ``kafka-topics --describe`` output, from a running cluster's Metadata and DescribeConfigs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkalite.common.kafka_uuid import ZERO_UUID, uuid_to_str
from kafkalite.errors import KafkaError, error_for_code
from kafkalite.protocol import ConfigSource


def format_describe(admin: Any, names: Sequence[str]) -> str:
    """One summary line per topic (count, replication factor, overrides), then one line per partition."""
    lines = []
    meta = {t["name"]: t for t in admin.metadata(list(names))["topics"]}
    for name in names:
        t = meta[name]
        if t["error_code"]:
            cls = error_for_code(t["error_code"]) or KafkaError
            raise cls(f"Topic '{name}' does not exist as expected" if t["error_code"] == 3 else name)
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        rf = len(parts[0]["replica_nodes"]) if parts else 0
        overrides = ",".join(
            f"{k}={v}"
            for k, (v, source) in sorted(admin.topic_configs(name).items())
            if source != ConfigSource.DEFAULT_CONFIG
        )
        # Kafka 2.8+ prints the id after the name, when the broker gave one (Metadata v10+)
        tid = t.get("topic_id")
        id_text = f"\tTopicId: {uuid_to_str(tid)}" if tid is not None and tid != ZERO_UUID else ""
        lines.append(
            f"Topic: {name}{id_text}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\t"
            f"Configs: {overrides}"
        )
        for p in parts:
            leader = p["leader_id"] if p["leader_id"] >= 0 else "none"
            lines.append(
                f"\tTopic: {name}\tPartition: {p['partition_index']}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, p['replica_nodes']))}\tIsr: {','.join(map(str, p['isr_nodes']))}"
            )
    return "\n".join(lines)
