"""``kafkalite metrics``: scrape the brokers' Prometheus endpoints and show what an operator watches.

The watch list is the short set most Kafka alerting starts from: partitions under-replicated, under
min ISR or offline, exactly one active controller, ISR churn, traffic in and out, request latency, how
idle the request handling is, and what waits in purgatory.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "ALERT_RULES",
    "WATCH",
    "AlertRule",
    "Sample",
    "alert_rules_yaml",
    "consumer_lag",
    "lag_rows",
    "scrape",
    "watch_rows",
]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


# column, metric, labels it must carry, how to show it
WATCH: tuple[tuple[str, str, dict[str, str], str], ...] = (
    ("URP", "kafka_server_replicamanager_underreplicatedpartitions", {}, "{:.0f}"),
    ("UnderMinIsr", "kafka_server_replicamanager_underminisrpartitioncount", {}, "{:.0f}"),
    ("Offline", "kafka_controller_kafkacontroller_offlinepartitionscount", {}, "{:.0f}"),
    ("ActiveCtl", "kafka_controller_kafkacontroller_activecontrollercount", {}, "{:.0f}"),
    ("Leaders", "kafka_server_replicamanager_leadercount", {}, "{:.0f}"),
    ("IsrShrinks", "kafka_server_replicamanager_isrshrinkspersec_total", {}, "{:.0f}"),
    ("IsrExpands", "kafka_server_replicamanager_isrexpandspersec_total", {}, "{:.0f}"),
    ("MsgIn/s", "kafka_server_brokertopicmetrics_messagesinpersec_oneminuterate", {}, "{:.1f}"),
    ("BytesIn/s", "kafka_server_brokertopicmetrics_bytesinpersec_oneminuterate", {}, "{:.0f}"),
    ("BytesOut/s", "kafka_server_brokertopicmetrics_bytesoutpersec_oneminuterate", {}, "{:.0f}"),
    ("ProduceP99ms", "kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.99"}, "{:.2f}"),
    ("FetchP99ms", "kafka_network_requestmetrics_totaltimems", {"request": "FetchConsumer", "quantile": "0.99"}, "{:.2f}"),
    ("Idle", "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", {}, "{:.2f}"),
    ("ProducePurg", "kafka_server_delayedoperationpurgatory_purgatorysize", {"delayedOperation": "Produce"}, "{:.0f}"),
    ("FetchPurg", "kafka_server_delayedoperationpurgatory_purgatorysize", {"delayedOperation": "Fetch"}, "{:.0f}"),
)  # fmt: skip


def scrape(address: str, timeout_s: float = 10.0) -> list[Sample]:
    """Every sample at ``HOST:PORT`` (or a full ``http://...`` URL), as the endpoint exposes it."""
    url = address if "://" in address else f"http://{address}/metrics"
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        text = r.read().decode()
    return [
        Sample(s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def watch_rows(samples: Iterable[Sample]) -> list[tuple[str, ...]]:
    """A header and one row per broker of the watch list; ``-`` where a broker has no such metric (no
    request of that kind reached it yet)."""
    by_broker: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for s in samples:
        broker = s.label("broker")
        if broker is None:
            continue
        rest = tuple((k, v) for k, v in s.labels if k != "broker")
        by_broker.setdefault(broker, {})[(s.name, rest)] = s.value
    rows: list[tuple[str, ...]] = [("Broker", *(c for c, _, _, _ in WATCH))]
    for broker in sorted(by_broker, key=int):
        have = by_broker[broker]
        cells = [broker]
        for _, name, labels, fmt in WATCH:
            value = have.get((name, tuple(sorted(labels.items()))))
            cells.append("-" if value is None else fmt.format(value))
        rows.append(tuple(cells))
    return rows


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule over the endpoint's metric names."""

    alert: str
    expr: str
    for_: str
    severity: str
    summary: str

    def metric_names(self) -> list[str]:
        """The metric names the expression reads (words starting ``kafka_``)."""
        return re.findall(r"\bkafka_[a-z0-9_]+", self.expr)


ALERT_RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "KafkaOfflinePartitions",
        "sum(kafka_controller_kafkacontroller_offlinepartitionscount) > 0",
        "1m", "critical", "Partitions without a leader: their producers and consumers are stopped.",
    ),
    AlertRule(
        "KafkaActiveControllerCount",
        "sum(kafka_controller_kafkacontroller_activecontrollercount) != 1",
        "1m", "critical", "The cluster has no active controller, or more than one.",
    ),
    AlertRule(
        "KafkaUnderMinIsr",
        "sum(kafka_server_replicamanager_underminisrpartitioncount) > 0",
        "1m", "critical", "acks=all produces to these partitions fail with NOT_ENOUGH_REPLICAS.",
    ),
    AlertRule(
        "KafkaUnderReplicatedPartitions",
        "sum(kafka_server_replicamanager_underreplicatedpartitions) > 0",
        "5m", "warning", "Some replicas are out of the ISR: one more failure may stop writes.",
    ),
    AlertRule(
        "KafkaIsrChurn",
        "sum(increase(kafka_server_replicamanager_isrshrinkspersec_total[10m])) > 3",
        "0m", "warning", "Followers keep dropping out of the ISR: a slow disk, network or broker.",
    ),
    AlertRule(
        "KafkaProduceLatencyHigh",
        'max(kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}) > 100',
        "10m", "warning", "The 99th percentile of produce requests takes over 100 ms.",
    ),
    AlertRule(
        "KafkaRequestHandlersBusy",
        "min(kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent) < 0.3",
        "10m", "warning", "A broker spends over 70% of its time handling requests.",
    ),
)  # fmt: skip


def alert_rules_yaml(rules: Iterable[AlertRule] = ALERT_RULES) -> str:
    """The rules as a Prometheus rule file (``rule_files:`` in prometheus.yml loads it)."""
    group = {
        "name": "kafka",
        "rules": [
            {
                "alert": r.alert,
                "expr": r.expr,
                "for": r.for_,
                "labels": {"severity": r.severity},
                "annotations": {"summary": r.summary},
            }
            for r in rules
        ],
    }
    return yaml.safe_dump({"groups": [group]}, sort_keys=False, width=110)


def consumer_lag(cluster: Any) -> list[Sample]:
    """Each group's lag per partition, as ``kafka_consumergroup_lag`` samples: what an exporter beside
    Kafka (Kafka's brokers have no lag metric) computes from the committed offsets and the high
    watermarks. ``cluster`` is a ``Cluster`` or an ``AdminClient``: the same calls as
    ``consumer-groups --describe``."""
    from kafkalite.tools.consumer_groups import describe_group, list_groups  # tools: siblings

    samples = []
    for group in list_groups(cluster):
        _, rows = describe_group(cluster, group)
        for r in rows:
            if r.lag is not None:
                labels = (("consumergroup", group), ("partition", str(r.partition)), ("topic", r.topic))
                samples.append(Sample("kafka_consumergroup_lag", labels, float(r.lag)))
    return samples


def lag_rows(samples: Iterable[Sample]) -> list[tuple[str, ...]]:
    """A header and one row per (group, topic): partitions, total lag and the worst partition's lag."""
    per: dict[tuple[str, str], list[float]] = {}
    for s in samples:
        if s.name == "kafka_consumergroup_lag":
            per.setdefault((s.label("consumergroup") or "", s.label("topic") or ""), []).append(s.value)
    rows: list[tuple[str, ...]] = [("Group", "Topic", "Partitions", "Lag", "MaxLag")]
    for (group, topic), lags in sorted(per.items()):
        rows.append((group, topic, str(len(lags)), f"{sum(lags):.0f}", f"{max(lags):.0f}"))
    return rows
