"""The brokers' metrics on their Prometheus endpoint, scraped over HTTP while real clients use them."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.cli import kafkalite
from kafkalite.host.server import BackgroundServer
from kafkalite.tools.metrics import ALERT_RULES, alert_rules_yaml


def _scrape(address: tuple[str, int], path: str = "/metrics") -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_shows_what_a_real_producer_sent():
    with BackgroundServer(2, config={"metrics.port": 0}) as srv:
        srv.create_topic("scraped", 2, 2)
        producer = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all", "linger.ms": 5})
        for i in range(500):
            producer.produce("scraped", b"x" * 100, partition=i % 2)
        assert producer.flush(30) == 0
        endpoint = srv.server.metrics_endpoint
        assert endpoint is not None and endpoint.address is not None
        samples = _scrape(endpoint.address)
        brokers = frozenset({("broker", "1")}), frozenset({("broker", "2")})

        def total(name: str, **labels: str) -> float:
            return sum(samples.get((name, b | frozenset(labels.items())), 0.0) for b in brokers)

        stored = sum(
            p.log.size_bytes
            for node in srv.server.cluster.brokers.values()
            for p in node.rm.partitions()
            if p.tp.topic == "scraped" and p.is_leader
        )
        assert total("kafka_server_brokertopicmetrics_messagesinpersec_total") == 500
        assert total("kafka_server_brokertopicmetrics_bytesinpersec_total", topic="scraped") == stored
        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total("kafka_server_replicamanager_leadercount") == 2
        produces = total("kafka_network_requestmetrics_totaltimems_count", request="Produce")
        assert produces == total("kafka_network_requestmetrics_requestspersec_total", request="Produce") > 0
        p99 = [v for (n, labels), v in samples.items() if n == "kafka_network_requestmetrics_totaltimems"
               and ("quantile", "0.99") in labels and ("request", "Produce") in labels]  # fmt: skip
        assert p99 and all(v > 0 for v in p99)  # wall-clock times in fractional ms, not rounded to 0
        idle = [v for (n, _), v in samples.items() if n.endswith("requesthandleravgidlepercent")]
        assert len(idle) == 2 and all(0.0 <= v <= 1.0 for v in idle)
        # every alert rule reads metrics this endpoint really has
        names = {n for n, _ in samples}
        for rule in ALERT_RULES:
            assert rule.metric_names() and set(rule.metric_names()) <= names, rule.alert
        assert [r["alert"] for r in yaml.safe_load(alert_rules_yaml())["groups"][0]["rules"]] == [
            r.alert for r in ALERT_RULES
        ]


def test_only_metrics_is_served():
    with BackgroundServer(1, config={"metrics.port": 0}) as srv:
        address = srv.server.metrics_endpoint.address
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://{address[0]}:{address[1]}/admin", timeout=10)
        assert err.value.code == 404
        assert _scrape(address)  # and the endpoint still answers


def test_no_endpoint_without_metrics_port():
    with BackgroundServer(1) as srv:
        assert srv.server.metrics_endpoint is None


def test_the_metrics_command_shows_the_watch_list_per_broker():
    with BackgroundServer(2, config={"metrics.port": 0}) as srv:
        srv.create_topic("watched", 2, 2)
        producer = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all"})
        for i in range(50):
            producer.produce("watched", b"y" * 10, partition=i % 2)
        assert producer.flush(30) == 0
        host, port = srv.server.metrics_endpoint.address
        result = CliRunner().invoke(kafkalite, ["metrics", "--metrics-server", f"{host}:{port}"])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        head = lines[0].split()
        assert head[:5] == ["Broker", "URP", "UnderMinIsr", "Offline", "ActiveCtl"]
        rows = {line.split()[0]: dict(zip(head, line.split(), strict=True)) for line in lines[1:]}
        assert set(rows) == {"1", "2"}
        assert sum(int(r["ActiveCtl"]) for r in rows.values()) == 1
        assert all(r["URP"] == "0" and r["Leaders"] == "1" for r in rows.values())
        raw = CliRunner().invoke(kafkalite, ["metrics", "--metrics-server", f"{host}:{port}", "--all"])
        assert 'kafka_server_brokertopicmetrics_messagesinpersec_total{broker="1"}' in raw.output


def test_the_metrics_command_names_an_endpoint_it_cannot_reach():
    result = CliRunner().invoke(kafkalite, ["metrics", "--metrics-server", "127.0.0.1:1"])
    assert result.exit_code != 0
    assert "127.0.0.1:1" in result.output


def test_the_metrics_command_shows_each_groups_lag():
    with BackgroundServer(1, config={"metrics.port": 0}) as srv:
        srv.create_topic("lagged", 2, 1)
        producer = Producer({"bootstrap.servers": srv.bootstrap_servers})
        for i in range(40):
            producer.produce("lagged", b"z", partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": srv.bootstrap_servers, "group.id": "slow-readers",
             "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )  # fmt: skip
        consumer.assign([TopicPartition("lagged", 0, 5), TopicPartition("lagged", 1, 12)])
        consumer.commit(
            offsets=[TopicPartition("lagged", 0, 5), TopicPartition("lagged", 1, 12)], asynchronous=False
        )
        consumer.close()
        host, port = srv.server.metrics_endpoint.address
        args = ["metrics", "--metrics-server", f"{host}:{port}", "--bootstrap-server", srv.bootstrap_servers]
        result = CliRunner().invoke(kafkalite, args)
        assert result.exit_code == 0, result.output
        lag_table = result.output.split("\n\n")[1].splitlines()
        assert lag_table[0].split() == ["Group", "Topic", "Partitions", "Lag", "MaxLag"]
        assert lag_table[1].split() == ["slow-readers", "lagged", "2", str(15 + 8), "15"]
        raw = CliRunner().invoke(kafkalite, [*args, "--all"])
        assert (
            'kafka_consumergroup_lag{consumergroup="slow-readers",partition="0",topic="lagged"} 15'
            in raw.output
        )


def test_loop_idle_reads_the_process_cpu_clock_once_per_sampling_interval(monkeypatch):
    """The loop samples its idleness every turn; the process's CPU clock (a system call that sums every
    thread) is read only when 50 ms of wall time have passed, not on every turn."""
    from kafkalite.host import prometheus

    wall = [100.0]
    reads = []
    monkeypatch.setattr(prometheus.time, "monotonic", lambda: wall[0])
    monkeypatch.setattr(prometheus.time, "process_time", lambda: reads.append(1) or 0.0)
    idle = prometheus.LoopIdle()
    reads.clear()
    for _ in range(1000):
        wall[0] += 0.0001  # 1,000 turns in 100 ms
        idle.sample()
    assert len(reads) == 2, f"the CPU clock was read {len(reads)} times in 1,000 turns over 100 ms"
    assert idle.value == 1.0, "a loop that used no CPU is wholly idle"
