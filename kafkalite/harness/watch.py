"""``MetricsTimeline``: the brokers' metrics sampled over a simulated run, as a monitoring system keeps them.

Every ``sample()`` reads each broker's watch-list metrics (the ones alert rules read) at the current
virtual time. ``cluster_view()`` turns the samples into what a dashboard plots: gauges summed over the
brokers, and counters turned into per-interval increases the way Prometheus's ``increase()`` does, so a
broker that restarts (its counters start again at zero) does not show as a negative rate.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kafkalite.common.metrics import Histogram

__all__ = ["COUNTERS", "GAUGES", "MetricsTimeline"]

RM = "kafka.server:type=ReplicaManager,name="
CTL = "kafka.controller:type=KafkaController,name="
GAUGES = {
    "under_replicated": RM + "UnderReplicatedPartitions",
    "under_min_isr": RM + "UnderMinIsrPartitionCount",
    "offline": CTL + "OfflinePartitionsCount",
    "active_controllers": CTL + "ActiveControllerCount",
    "leaders": RM + "LeaderCount",
}
COUNTERS = {
    "messages_in": "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec",
    "isr_shrinks": RM + "IsrShrinksPerSec",
    "isr_expands": RM + "IsrExpandsPerSec",
}
PRODUCE_TIME = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"


class MetricsTimeline:
    """Samples of every broker of ``cluster`` (a simulated ``Cluster``), one row per broker and time."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.rows: list[dict[str, Any]] = []

    def sample(self) -> None:
        now = self.cluster.net.now_ms()
        for broker, node in sorted(self.cluster.brokers.items()):
            row: dict[str, Any] = {"time_s": now / 1000, "broker": broker, "up": node.metrics is not None}
            if node.metrics is not None:
                metrics = node.metrics.registry.metrics
                by_name = {name.mbean(): m for name, m in metrics.items()}
                for key, mbean in {**GAUGES, **COUNTERS}.items():
                    m = by_name.get(mbean)
                    row[key] = 0 if m is None else m.values(now)["Value" if key in GAUGES else "Count"]
                h = by_name.get(PRODUCE_TIME)
                assert h is None or isinstance(h, Histogram)
                row["produce_count"] = 0 if h is None else h.count
                row["produce_total_ms"] = 0.0 if h is None else h.total
                row["produce_p99_ms"] = 0.0 if h is None or not h.count else h.percentile(0.99)
            self.rows.append(row)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def cluster_view(self) -> pd.DataFrame:
        """One row per sample time: gauges summed over the live brokers, counters as increases since the
        previous sample (a counter that went down was reset by a restart: its new value is the increase),
        the mean produce time over the interval and the worst broker's p99 (its recent sample)."""
        df = self.frame().fillna(0)
        counters = [*COUNTERS, "produce_count", "produce_total_ms"]
        wide = df.pivot(index="time_s", columns="broker", values=counters)
        increase = wide.diff()
        increase = increase.where(increase >= 0, wide)  # a reset: the counter started again from 0
        increase.iloc[0] = wide.iloc[0]
        view = df.groupby("time_s")[list(GAUGES)].sum().astype(int)
        for key in counters:
            view[key] = increase[key].sum(axis=1)
        step_s = pd.Series(view.index, index=view.index).diff().fillna(view.index[0])
        view["messages_in_per_s"] = view.pop("messages_in") / step_s
        count = view.pop("produce_count")
        total = view.pop("produce_total_ms")
        view["produce_mean_ms"] = (total / count).where(count > 0)
        view["produce_p99_ms"] = df.groupby("time_s")["produce_p99_ms"].max()
        view["brokers_up"] = df.groupby("time_s")["up"].sum().astype(int)
        return view
