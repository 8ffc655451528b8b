"""End to end: brokers with real replication, the controller, and the producer on one SimNetwork."""

from __future__ import annotations

import pytest

from kafkalite.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from kafkalite.harness.checker import check_history
from kafkalite.host.cluster import Cluster


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(brokers=3, seed=1, config={"zookeeper.session.timeout.ms": 6000})


def test_create_topic_elects_leaders(cluster: Cluster) -> None:
    assignment = cluster.create_topic("orders", partitions=3, replication_factor=3)
    for p, replicas in assignment.items():
        assert cluster.leader("orders", p) == replicas[0]
        assert cluster.isr("orders", p) == replicas
    with pytest.raises(InvalidReplicationFactorError):
        cluster.create_topic("too-big", 1, 4)


def test_acks_all_survives_leader_crash(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", linger_ms=0)
    futures = [producer.send("t", f"v{i}".encode()) for i in range(50)]
    assert cluster.run_until(lambda: all(f.done() for f in futures), 10_000)
    old = cluster.leader("t", 0)
    more = []
    for i in range(50, 100):
        more.append(producer.send("t", f"v{i}".encode()))
        cluster.run_for(5)
        if i == 60:
            cluster.crash(old)
    cluster.run_until(lambda: all(f.done() for f in more), 60_000)
    new = cluster.leader("t", 0)
    assert new is not None and new != old
    assert cluster.partition_state("t", 0).leader_epoch >= 1
    cluster.restart(old)
    cluster.run_until(lambda: len(cluster.isr("t", 0)) == 3, 60_000)
    hw = cluster.high_watermark("t", 0)
    cluster.run_until(lambda: set(cluster.log_end_offsets("t", 0).values()) == {hw}, 10_000)
    report = check_history(
        producer.history,
        {("t", p): recs for p, recs in cluster.read_all("t").items()},
        replicas={("t", 0): cluster.replica_logs("t", 0)},
        high_watermarks={("t", 0): hw},
    )
    assert report.ok, report
    acked = [s for s in producer.history if s.outcome == "acked"]
    assert len(acked) >= 90
    kinds = {e.kind for e in cluster.events()}
    assert {"controller_elected", "leader_elected", "broker_failure"} <= kinds


def _run(seed: int) -> str:
    c = Cluster(brokers=3, seed=seed, config={"zookeeper.session.timeout.ms": 6000})
    try:
        c.create_topic("t", partitions=2, replication_factor=3)
        p = c.producer(acks="all", linger_ms=0)
        fs = [p.send("t", f"v{i}".encode(), key=str(i).encode()) for i in range(20)]
        c.run_for(20)
        c.crash(c.leader("t", 0))
        c.run_until(lambda: all(f.done() for f in fs), 30_000)
        c.run_for(8_000)  # past zookeeper.session.timeout.ms: the controller sees the failure
        kinds = ["controller_elected", "leader_elected", "isr_changed", "partition_offline", "broker_failure"]
        return c.format_log(kinds)
    finally:
        c.close()


def test_same_seed_same_controller_timeline() -> None:
    first = _run(3)
    assert first == _run(3)
    assert "leader_elected" in first and "broker_failure" in first


def test_create_topic_with_a_replica_assignment(cluster: Cluster) -> None:
    """Replicas placed by hand, first broker preferred, as kafka-topics.sh --replica-assignment does."""
    assignment = cluster.create_topic("placed", 2, 2, replica_assignment={0: (3, 2), 1: (2, 3)})
    assert assignment == {0: (3, 2), 1: (2, 3)}
    assert cluster.leader("placed", 0) == 3 and cluster.leader("placed", 1) == 2
    assert cluster.isr("placed", 0) == (3, 2)


def test_create_topic_refuses_an_assignment_that_disagrees(cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="does not give 1 partitions 3 replicas each"):
        cluster.create_topic("bad", 1, 3, replica_assignment={0: (1, 2)})
    with pytest.raises(InvalidReplicaAssignmentError):
        cluster.create_topic("bad", 1, 2, replica_assignment={0: (1, 1)})
