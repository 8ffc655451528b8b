"""``BrokerMetrics``: the broker's meters and gauges under Kafka's MBean names.

One set per broker incarnation (a restart is a new process, whose counts start at zero, as Kafka's do).
What it keeps, and where each is marked:

* ``kafka.server:type=BrokerTopicMetrics`` (Kafka's ``BrokerTopicStats``): ``MessagesInPerSec`` and
  ``BytesInPerSec`` when a leader appends a batch (coordinators' writes too, as in Kafka); ``BytesOutPerSec`` for the bytes a consumer
  fetch returns, ``ReplicationBytesOutPerSec`` / ``ReplicationBytesInPerSec`` for a follower's; each for all
  topics and with a ``topic`` tag, and ``TotalProduceRequestsPerSec`` / ``TotalFetchRequestsPerSec`` /
  ``FailedProduceRequestsPerSec``.
* ``kafka.network:type=RequestMetrics``: ``RequestsPerSec`` and ``TotalTimeMs`` per API (``request`` tag), from
  the request's arrival at the broker to its response leaving; fetches split into ``FetchConsumer`` and
  ``FetchFollower`` as Kafka does.
* ``kafka.server:type=ReplicaManager``: ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` when the controller
  accepts the leader's ISR change, and the gauges ``UnderReplicatedPartitions``, ``UnderMinIsrPartitionCount``,
  ``PartitionCount``, ``LeaderCount``, ``OfflineReplicaCount``.
* ``kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize`` per ``delayedOperation``.
* ``kafka.controller:type=KafkaController`` (``controller_metrics``): in ZooKeeper mode every broker has the
  controller gauges, read from its ``Controller``; in KRaft mode a combined node has them.

The TCP host adds ``RequestHandlerAvgIdlePercent`` (how idle its event loop was); the simulator has no
handler threads, so it has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.common.metrics import Histogram, Meter, MetricsRegistry
from kafkalite.protocol import FetchRequest, ProduceRequest

SERVER = "kafka.server"
NETWORK = "kafka.network"
TOPIC_METRICS = "BrokerTopicMetrics"
MAX_PENDING = 100_000  # requests being timed at once, far above any broker's in-flight count
_API_NAMES: dict[type, str] = {}  # request class -> Kafka's API name (ProduceRequest -> Produce)


class BrokerMetrics:
    """The broker's metrics registry with the handful of calls its components make on their paths."""

    def __init__(self, now_ms: Callable[[], int], request_clock: Callable[[], float] | None = None) -> None:
        self.registry = MetricsRegistry(now_ms)
        # Request times in ms: the simulated clock (whole ms, deterministic) unless the host gives a finer one.
        self.request_clock = request_clock or now_ms
        self._pending: dict[tuple[Any, int], tuple[float, Histogram]] = {}
        self._topic_meters: dict[tuple[str, str], Meter] = {}
        self._topic_in: dict[str, tuple[Meter, Meter]] = {}
        # replication marks run per follower fetch and append: per-topic meters found by topic alone
        self._replication_out: dict[str, Meter] = {}
        self._replication_in: dict[str, Meter] = {}
        self._request_meters: dict[str, tuple[Meter, Histogram]] = {}
        r = self.registry
        self.messages_in = r.meter(SERVER, TOPIC_METRICS, "MessagesInPerSec")
        self.bytes_in = r.meter(SERVER, TOPIC_METRICS, "BytesInPerSec")
        self.bytes_out = r.meter(SERVER, TOPIC_METRICS, "BytesOutPerSec")
        self.replication_bytes_in = r.meter(SERVER, TOPIC_METRICS, "ReplicationBytesInPerSec")
        self.replication_bytes_out = r.meter(SERVER, TOPIC_METRICS, "ReplicationBytesOutPerSec")
        self.produce_requests = r.meter(SERVER, TOPIC_METRICS, "TotalProduceRequestsPerSec")
        self.fetch_requests = r.meter(SERVER, TOPIC_METRICS, "TotalFetchRequestsPerSec")
        self.failed_produce = r.meter(SERVER, TOPIC_METRICS, "FailedProduceRequestsPerSec")
        self.isr_shrinks = r.meter(SERVER, "ReplicaManager", "IsrShrinksPerSec")
        self.isr_expands = r.meter(SERVER, "ReplicaManager", "IsrExpandsPerSec")

    # ------------------------------------------------------------------------------ per topic
    def _topic(self, name: str, topic: str) -> Meter:
        m = self._topic_meters.get((name, topic))
        if m is None:
            m = self._topic_meters[(name, topic)] = self.registry.meter(
                SERVER, TOPIC_METRICS, name, topic=topic
            )
        return m

    def appended(self, topic: str, records: int, size: int) -> None:
        """A leader appended a batch (a client's, or a coordinator's own write; not a follower's copy)."""
        pair = self._topic_in.get(topic)
        if pair is None:
            pair = self._topic_in[topic] = (
                self._topic("MessagesInPerSec", topic),
                self._topic("BytesInPerSec", topic),
            )
        self.messages_in.count += records  # Meter.mark, inlined: this runs once per appended batch
        self.bytes_in.count += size
        pair[0].count += records
        pair[1].count += size

    def fetched(self, topic: str, size: int, *, follower: bool) -> None:
        """A fetch response carries ``size`` bytes of ``topic`` (to a consumer, or to a follower)."""
        if follower:
            self.replication_bytes_out.count += size
            m = self._replication_out.get(topic)
            if m is None:
                m = self._replication_out[topic] = self._topic("ReplicationBytesOutPerSec", topic)
        else:
            self.bytes_out.count += size
            m = self._topic("BytesOutPerSec", topic)
        m.count += size

    def replicated_in(self, topic: str, size: int) -> None:
        """A follower appended ``size`` bytes it fetched from the leader."""
        self.replication_bytes_in.count += size
        m = self._replication_in.get(topic)
        if m is None:
            m = self._replication_in[topic] = self._topic("ReplicationBytesInPerSec", topic)
        m.count += size

    # ------------------------------------------------------------------------------ requests
    def request_received(self, src: Any, correlation_id: int, request: Any) -> None:
        """Start the clock of one request; ``request_answered`` stops it when its response is sent."""
        cls = request.__class__
        if cls is FetchRequest:
            self.fetch_requests.count += 1
            api = "FetchFollower" if request.replica_id >= 0 else "FetchConsumer"
        else:
            if cls is ProduceRequest:
                self.produce_requests.count += 1
            api = _API_NAMES.get(cls) or _API_NAMES.setdefault(cls, cls.__name__.removesuffix("Request"))
        pair = self._request_meters.get(api) or self._request(api)
        pair[0].count += 1
        if len(self._pending) >= MAX_PENDING:
            # requests never answered (their broker dropped them): forget them rather than grow forever
            self._pending.clear()
        self._pending[(src, correlation_id)] = (self.request_clock(), pair[1])

    def request_answered(self, dst: Any, correlation_id: int) -> None:
        started = self._pending.pop((dst, correlation_id), None)
        if started is not None:
            started[1].update(self.request_clock() - started[0])

    def _request(self, api: str) -> tuple[Meter, Histogram]:
        r = self.registry
        pair = self._request_meters[api] = (
            r.meter(NETWORK, "RequestMetrics", "RequestsPerSec", request=api),
            r.histogram(NETWORK, "RequestMetrics", "TotalTimeMs", request=api),
        )
        return pair

    # ------------------------------------------------------------------------------ gauges
    def replica_manager_gauges(self, rm: Any) -> None:
        """Kafka's ReplicaManager gauges, read from ``rm``'s partitions when asked."""
        r = self.registry

        def under_replicated() -> int:
            return sum(1 for p in rm.partitions() if p.is_leader and len(p.isr) < len(p.replicas))

        def under_min_isr() -> int:
            return sum(1 for p in rm.partitions() if p.is_leader and len(p.isr) < rm._min_isr(p.tp.topic))

        r.gauge(SERVER, "ReplicaManager", "UnderReplicatedPartitions", under_replicated)
        r.gauge(SERVER, "ReplicaManager", "UnderMinIsrPartitionCount", under_min_isr)
        r.gauge(SERVER, "ReplicaManager", "PartitionCount", lambda: len(rm.partitions()))
        r.gauge(
            SERVER, "ReplicaManager", "LeaderCount", lambda: sum(1 for p in rm.partitions() if p.is_leader)
        )
        r.gauge(
            SERVER,
            "ReplicaManager",
            "OfflineReplicaCount",
            lambda: sum(1 for p in rm.partitions() if rm.is_offline(p.tp)),
        )
        for op, attr in (
            ("Produce", "produce_purgatory"),
            ("Fetch", "fetch_purgatory"),
            ("DeleteRecords", "delete_records_purgatory"),
        ):
            # read through rm each time: a restart of the replica manager's memory makes new purgatories
            r.gauge(
                SERVER,
                "DelayedOperationPurgatory",
                "PurgatorySize",
                lambda a=attr: sum(len(ops) for ops in getattr(rm, a).watchers.values()),
                delayedOperation=op,
            )

    def tick(self, now_ms: int) -> None:
        self.registry.tick(now_ms)
