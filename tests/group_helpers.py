"""Helpers shared by the consumer group tests (coordinator node and full cluster)."""

from __future__ import annotations

from typing import Any

from kafkalite.client.consumer import Consumer
from kafkalite.host.cluster import Cluster


def group_consumer(cluster: Cluster, name: str, group: str = "g", **cfg: Any) -> Consumer:
    """A member of ``group`` reading from the earliest offset, with a 10 s session and 1 s heartbeats."""
    props = {"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
             "heartbeat.interval.ms": 1_000, **cfg}  # fmt: skip
    return cluster.consumer(name, config=props)


def produce(
    cluster: Cluster, topic: str, n: int, partitions: int, start: int = 0, **producer_cfg: Any
) -> None:
    """Send ``v{start}``..``v{start + n - 1}`` round-robin over ``partitions`` and wait for every answer."""
    producer = cluster.producer(linger_ms=0, **producer_cfg)
    futs = [producer.send(topic, f"v{i}".encode(), partition=i % partitions) for i in range(start, start + n)]
    assert cluster.run_until(lambda: all(f.done() for f in futs), 30_000)
