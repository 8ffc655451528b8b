"""The controller's gauges under Kafka's names (``kafka.controller:type=KafkaController``).

Both modes report the same four an operator alerts on: ``ActiveControllerCount`` (1 on the active
controller, 0 elsewhere, so the cluster's sum must be exactly 1), ``OfflinePartitionsCount``,
``GlobalPartitionCount`` and ``GlobalTopicCount`` (counted by the active controller, 0 elsewhere). A KRaft
controller adds what its committed image says of the brokers (``ActiveBrokerCount``,
``FencedBrokerCount``) and ``LastCommittedRecordOffset`` of the metadata log, as Kafka's
``ControllerMetadataMetrics`` and ``QuorumControllerMetrics`` do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.common.metrics import MetricsRegistry
from kafkalite.protocol import NO_LEADER

__all__ = ["ControllerMetrics", "controller_gauges", "quorum_controller_gauges"]

DOMAIN = "kafka.controller"
TYPE = "KafkaController"


def controller_gauges(
    registry: MetricsRegistry,
    active: Callable[[], bool],
    offline: Callable[[], int],
    partitions: Callable[[], int],
    topics: Callable[[], int],
) -> None:
    """The four gauges of either mode; the counts are read only while ``active()``."""
    registry.gauge(DOMAIN, TYPE, "ActiveControllerCount", lambda: int(active()))
    registry.gauge(DOMAIN, TYPE, "OfflinePartitionsCount", lambda: offline() if active() else 0)
    registry.gauge(DOMAIN, TYPE, "GlobalPartitionCount", lambda: partitions() if active() else 0)
    registry.gauge(DOMAIN, TYPE, "GlobalTopicCount", lambda: topics() if active() else 0)


def quorum_controller_gauges(registry: MetricsRegistry, controller: Callable[[], Any]) -> None:
    """A KRaft node's gauges, read from its ``QuorumController`` (None while it has none)."""

    def image() -> Any:
        c = controller()
        return None if c is None else c.committed

    def active() -> bool:
        c = controller()
        return c is not None and c.is_active

    def partitions() -> list[Any]:
        img = image()
        return [] if img is None else [p for t in img.topics.values() for p in t.partitions.values()]

    controller_gauges(
        registry,
        active,
        lambda: sum(1 for p in partitions() if p.leader == NO_LEADER),
        lambda: len(partitions()),
        lambda: 0 if image() is None else len(image().topics),
    )

    def brokers(fenced: bool) -> int:
        img = image()
        return (
            0 if img is None or not active() else sum(1 for b in img.brokers.values() if b.fenced == fenced)
        )

    registry.gauge(DOMAIN, TYPE, "ActiveBrokerCount", lambda: brokers(False))
    registry.gauge(DOMAIN, TYPE, "FencedBrokerCount", lambda: brokers(True))
    registry.gauge(
        DOMAIN, TYPE, "LastCommittedRecordOffset", lambda: -1 if image() is None else image().offset
    )


class ControllerMetrics:
    """A controller-only node's metrics (one set per incarnation)."""

    def __init__(self, now_ms: Callable[[], int], controller: Callable[[], Any]) -> None:
        self.registry = MetricsRegistry(now_ms)
        quorum_controller_gauges(self.registry, controller)

    def tick(self, now_ms: int) -> None:
        self.registry.tick(now_ms)
