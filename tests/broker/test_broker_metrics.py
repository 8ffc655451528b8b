"""The broker's metrics under known events: what they count must match what the cluster did."""

from __future__ import annotations

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.host.kraft_cluster import KRaftCluster

TOPIC = "metered"
IN = "kafka.server:type=BrokerTopicMetrics,name={}"
RM = "kafka.server:type=ReplicaManager,name={}"
CTL = "kafka.controller:type=KafkaController,name={}"


def _value(broker, mbean: str) -> float:
    """A broker's metric; 0 for one it never created (no request of that API reached it)."""
    try:
        return broker.metrics.registry.value(mbean)
    except KeyError:
        return 0


def _sum(c: Cluster, mbean: str) -> float:
    return sum(_value(b, mbean) for b in c.brokers.values() if b.metrics is not None)


def _log_bytes(c: Cluster, broker: int) -> int:
    return sum(
        p.log.size_bytes for p in c.brokers[broker].rm.partitions() if p.tp.topic == TOPIC and p.is_leader
    )


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(brokers=3, dir=tmp_path, config={"replica.lag.time.max.ms": 2000})
    c.create_topic(TOPIC, 3, 3)
    return c


def _produce(c: Cluster, n: int, **config) -> None:
    producer = c.producer(acks="all", **config)
    futures = [producer.send(TOPIC, b"x" * 100, partition=i % 3) for i in range(n)]
    assert c.run_until(lambda: all(f.done() for f in futures), 30_000)
    assert all(f.exception() is None for f in futures)


def test_bytes_and_messages_in_count_what_the_leaders_appended(cluster):
    c = cluster
    _produce(c, 300)
    c.run_for(2000)  # the followers catch up
    assert _sum(c, IN.format("MessagesInPerSec")) == 300
    appended = sum(_log_bytes(c, b) for b in c.brokers)
    assert _sum(c, IN.format("BytesInPerSec")) == appended
    assert _sum(c, IN.format(f"BytesInPerSec,topic={TOPIC}")) == appended
    # replication factor 3: every byte a leader took went to two followers
    assert _sum(c, IN.format("ReplicationBytesInPerSec")) == 2 * appended
    assert _sum(c, IN.format("ReplicationBytesOutPerSec")) == 2 * appended
    assert _sum(c, RM.format("UnderReplicatedPartitions")) == 0
    assert _sum(c, RM.format("LeaderCount")) == 3
    assert _sum(c, RM.format("PartitionCount")) == 9


def test_bytes_out_count_what_a_consumer_fetched(cluster):
    c = cluster
    _produce(c, 90)
    consumer = c.consumer(group_id=None, auto_offset_reset="earliest")
    consumer.assign([(TOPIC, p) for p in range(3)])
    got = 0
    for _ in range(20):
        got += sum(len(records) for records in consumer.poll(500).values())
        if got == 90:
            break
    assert got == 90
    assert _sum(c, IN.format("BytesOutPerSec")) == sum(_log_bytes(c, b) for b in c.brokers)


def test_a_dead_follower_leaves_partitions_under_replicated_until_it_is_back(cluster):
    c = cluster
    _produce(c, 30)
    controller = c.controller()
    victim = next(b for b in sorted(c.brokers) if b != controller)
    c.crash(victim)
    assert c.run_until(lambda: _sum(c, RM.format("UnderReplicatedPartitions")) == 2, 30_000)
    # the dead broker led one partition; its leadership moved, nothing went offline
    assert _sum(c, CTL.format("OfflinePartitionsCount")) == 0
    assert c.brokers[victim].metrics is None  # a dead process reports nothing
    c.restart(victim)
    assert c.run_until(lambda: _sum(c, RM.format("UnderReplicatedPartitions")) == 0, 30_000)
    # the leaders took the restarted replica back into their ISR: one expansion per partition
    assert _sum(c, RM.format("IsrExpandsPerSec")) == 3
    assert c.brokers[victim].metrics.registry.value(IN.format("MessagesInPerSec")) == 0


def test_a_cut_off_follower_is_shrunk_out_of_the_isr_by_its_leader(cluster):
    c = cluster
    leader = c.leader(TOPIC, 0)
    # not the controller: the leader must still reach it with its AlterPartition
    follower = next(b for b in c.brokers if b not in (leader, c.controller()))
    c.net.cut(leader, follower)
    c.run_for(6000)  # past replica.lag.time.max.ms
    shrinks = c.brokers[leader].metrics.registry.value(RM.format("IsrShrinksPerSec"))
    assert shrinks >= 1
    assert c.brokers[leader].metrics.registry.value(RM.format("UnderReplicatedPartitions")) >= 1


def test_an_offline_partition_is_counted_by_the_active_controller_only(tmp_path):
    c = Cluster(brokers=3, dir=tmp_path)
    controller = c.controller()
    host = next(b for b in sorted(c.brokers) if b != controller)
    c.create_topic("single", 1, 1, replica_assignment={0: [host]})
    assert _sum(c, CTL.format("ActiveControllerCount")) == 1
    assert _sum(c, CTL.format("GlobalPartitionCount")) == 1
    c.crash(host)
    assert c.run_until(lambda: _sum(c, CTL.format("OfflinePartitionsCount")) == 1, 30_000)
    ctl = c.brokers[controller].metrics.registry
    assert ctl.value(CTL.format("OfflinePartitionsCount")) == 1
    c.restart(host)
    assert c.run_until(lambda: _sum(c, CTL.format("OfflinePartitionsCount")) == 0, 30_000)
    assert _sum(c, CTL.format("ActiveControllerCount")) == 1


def test_request_metrics_count_each_api_and_time_it(cluster):
    c = cluster
    _produce(c, 30, linger_ms=0, batch_size=200)
    produces = _sum(c, "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce")
    assert produces == _sum(c, IN.format("TotalProduceRequestsPerSec")) >= 3
    timed = _sum(c, "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce")
    assert timed == produces  # every produce was answered, so every one was timed
    follower_fetches = _sum(c, "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchFollower")
    assert follower_fetches > 0
    assert _sum(c, "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer") == 0


def test_kraft_controllers_report_the_controller_gauges(tmp_path):
    c = KRaftCluster(brokers=3, controllers=3, dir=tmp_path)
    c.create_topic("kraft-metered", 2, 3)
    c.run_for(1000)
    controllers = [n.metrics.registry for n in c.controllers.values() if n.metrics is not None]
    assert len(controllers) == 3
    assert sum(r.value(CTL.format("ActiveControllerCount")) for r in controllers) == 1
    active = next(r for r in controllers if r.value(CTL.format("ActiveControllerCount")) == 1)
    assert active.value(CTL.format("GlobalTopicCount")) == 1
    assert active.value(CTL.format("GlobalPartitionCount")) == 2
    assert active.value(CTL.format("ActiveBrokerCount")) == 3
    assert active.value(CTL.format("OfflinePartitionsCount")) == 0
    # the brokers keep the broker side; no KafkaController gauges there in KRaft mode
    for b in c.brokers.values():
        assert not any(n.domain == "kafka.controller" for n in b.metrics.registry.metrics)
    for b in list(c.brokers):
        c.crash(b)
    assert c.run_until(lambda: active.value(CTL.format("FencedBrokerCount")) == 3, 30_000)
    assert active.value(CTL.format("OfflinePartitionsCount")) == 2


def test_a_combined_node_reports_both_sides(tmp_path):
    c = KRaftCluster(brokers=3, controllers=3, dir=tmp_path, combined=True)
    c.create_topic("combined-metered", 1, 3)
    c.run_for(1000)
    regs = [b.metrics.registry for b in c.brokers.values()]
    assert sum(r.value(CTL.format("ActiveControllerCount")) for r in regs) == 1
    assert sum(r.value(RM.format("LeaderCount")) for r in regs) == 1


def test_requests_never_answered_do_not_pile_up(monkeypatch):
    from kafkalite.broker import broker_metrics
    from kafkalite.protocol import MetadataRequest

    monkeypatch.setattr(broker_metrics, "MAX_PENDING", 10)
    m = broker_metrics.BrokerMetrics(lambda: 0)
    for cid in range(25):
        m.request_received("client", cid, MetadataRequest(topics=None))
    assert len(m._pending) <= 10
    m.request_answered("client", 24)  # the latest is still timed
    assert m.registry.value("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Metadata") == 1
