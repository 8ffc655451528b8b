"""A KRaft cluster on the simulator: the ZooKeeper-mode scenarios (create a topic, produce acks=all,
consume, kill a leader broker, kill the active controller) with the metadata quorum instead of ZooKeeper,
and nothing of the ZooKeeper path on the wire."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.errors import KafkaError
from kafkalite.harness.checker import check_history
from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.protocol import (
    CreatableTopic,
    CreateTopicsRequest,
    DescribeClusterRequest,
    LeaderAndIsrRequest,
    MetadataRequest,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from kafkalite.protocol.raft import DescribeQuorumPartition, DescribeQuorumRequest
from kafkalite.raft.kafka_raft_client import METADATA_TP


@pytest.fixture
def cluster():
    c = KRaftCluster(brokers=3, controllers=3, seed=1, log_messages="all")
    yield c
    c.close()


def _converged(c: KRaftCluster, topic: str, p: int) -> bool:
    hw = c.high_watermark(topic, p)
    return hw is not None and len(c.isr(topic, p)) == 3 and set(c.log_end_offsets(topic, p).values()) == {hw}


def test_produce_acks_all_and_consume(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
    producer = c.producer(acks="all", linger_ms=0)
    futures = [producer.send("t", f"v{i}".encode(), partition=i % 2) for i in range(40)]
    assert c.run_until(lambda: all(f.done() for f in futures), 10_000)
    assert all(f.exception() is None for f in futures)
    consumer = c.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    got: list[bytes] = []
    for _ in range(20):
        for recs in consumer.poll(200).values():
            got += [r.value for r in recs]
        if len(got) == 40:
            break
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(40))
    # KRaft mode: no controller-to-broker request of the ZooKeeper path was ever sent
    zk_path = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
    sent = [e for e in c.events("deliver") if isinstance(getattr(e.fields["msg"], "request", None), zk_path)]
    assert not sent, sent[:3]
    # every broker replays the controller's image (an observer is a fetch behind at most)
    assert c.run_until(lambda: all(b == c.image() for b in c.broker_images().values()), 5_000)


def test_acks_all_survives_leader_crash_and_controller_failover(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = c.producer(acks="all", linger_ms=0)
    first = [producer.send("t", f"v{i}".encode()) for i in range(30)]
    assert c.run_until(lambda: all(f.done() for f in first), 10_000)
    old = c.leader("t", 0)
    old_epoch = c.image().brokers[old].epoch
    more = []
    for i in range(30, 90):
        more.append(producer.send("t", f"v{i}".encode()))
        c.run_for(5)
        if i == 40:
            c.crash(old, lose_unflushed=True)
        if i == 60:
            c.net.crash(c.controller())
    assert c.run_until(lambda: all(f.done() for f in more), 60_000)
    new = c.leader("t", 0)
    assert new is not None and new != old, "leadership left the crashed broker"
    assert c.partition_state("t", 0).leader_epoch >= 1
    for cid in c.controllers:
        c.net.restart(cid)
    c.restart(old)
    assert c.run_until(lambda: _converged(c, "t", 0), 60_000), (c.isr("t", 0), c.log_end_offsets("t", 0))
    hw = c.high_watermark("t", 0)
    report = check_history(
        producer.history,
        {("t", p): recs for p, recs in c.read_all("t").items()},
        replicas={("t", 0): c.replica_logs("t", 0)},
        high_watermarks={("t", 0): hw},
    )
    assert report.ok, report
    acked = [s for s in producer.history if s.outcome == "acked"]
    assert len(acked) >= 80
    assert c.run_until(lambda: all(b == c.image() for b in c.broker_images().values()), 10_000)
    assert c.image().brokers[old].epoch > old_epoch, "the restarted broker registered again"


def test_no_zookeeper_in_kraft_mode(cluster: KRaftCluster) -> None:
    assert all(b.zk is None and b.controller is None for b in cluster.brokers.values())
    with pytest.raises(AttributeError, match="no ZooKeeper"):
        _ = cluster.store


def test_topic_configs_and_deletion_go_through_the_metadata_log(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=2, replication_factor=2, config={"retention.ms": 60_000})
    leader = c.leader("t", 0)
    part = c.replica(leader, "t", 0)
    assert part.log.config.retention_ms == 60_000, "the replica took the ConfigRecord's value"
    c.alter_configs("t", set={"retention.ms": 120_000, "min.insync.replicas": 2})
    assert c.run_until(lambda: c.replica(leader, "t", 0).log.config.retention_ms == 120_000, 5000)
    with pytest.raises(KafkaError, match="INVALID_CONFIG"):
        c.alter_configs("t", set={"no.such.key": 1})
    with pytest.raises(KafkaError, match="INVALID_CONFIG"):
        c.create_topic("bad", config={"min.insync.replicas": "many"})
    c.delete_topic("t")
    assert c.image().topic("t") is None and c.image().configs == {}
    assert all(not b.cache.has_topic("t") for b in c.brokers.values())
    c.create_topic("t", partitions=1, replication_factor=3)
    assert c.leader("t", 0) is not None, "a topic of the same name can be created again"


def test_a_broker_forwards_admin_requests_and_metadata_names_a_broker_as_controller(
    cluster: KRaftCluster,
) -> None:
    c = cluster
    meta = c.request(2, MetadataRequest(topics=None))
    assert meta.controller_id in c.brokers, "clients cannot reach controllers: a live broker stands in"
    resp = c.request(
        meta.controller_id,
        CreateTopicsRequest(topics=(CreatableTopic(name="fw", num_partitions=2, replication_factor=2),)),
    )
    assert resp.topics[0].error_code == 0 and c.image().topic("fw") is not None
    c.net.crash(c.controller())  # forwarding follows the quorum's leader
    again = c.request(
        3, CreateTopicsRequest(topics=(CreatableTopic(name="fw2", num_partitions=1, replication_factor=3),))
    )
    assert again.topics[0].error_code == 0


def test_a_consumer_group_on_kraft(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("g", partitions=2, replication_factor=3)
    producer = c.producer(acks="all", linger_ms=0)
    fs = [producer.send("g", f"m{i}".encode()) for i in range(10)]
    assert c.run_until(lambda: all(f.done() for f in fs), 10_000)
    consumer = c.consumer(group_id="readers", auto_offset_reset="earliest")
    consumer.subscribe(["g"])
    got: list[bytes] = []
    for _ in range(60):
        for recs in consumer.poll(200).values():
            got += [r.value for r in recs]
        if len(got) == 10:
            break
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))
    assert c.image().topic("__consumer_offsets") is not None, "created through the controller"


def test_controlled_shutdown_moves_leadership_first(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("s", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
    producer = c.producer(acks="all", linger_ms=0)
    fs = [producer.send("s", f"x{i}".encode(), partition=i % 3) for i in range(30)]
    assert c.run_until(lambda: all(f.done() for f in fs), 10_000)
    victim = c.leader("s", 0)
    c.shutdown(victim, controlled=True)
    img = c.image()
    assert img.brokers[victim].fenced and img.brokers[victim].in_controlled_shutdown
    for p in range(3):
        st = c.partition_state("s", p)
        assert st.leader not in (victim, -1) and victim not in st.isr, st
    more = [producer.send("s", f"y{i}".encode(), partition=i % 3) for i in range(30)]
    assert c.run_until(lambda: all(f.done() for f in more), 10_000)
    assert all(f.exception() is None for f in more), "no write failed: leadership moved before the stop"
    c.restart(victim)
    # back well within broker.session.timeout.ms: a fenced registration holds no session to wait out
    assert c.run_until(lambda: all(len(c.isr("s", p)) == 3 for p in range(3)), 3_000)
    assert not c.image().brokers[victim].in_controlled_shutdown, "a new registration starts afresh"


def test_describe_quorum_shows_voters_and_the_brokers_as_observers(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("q", partitions=1, replication_factor=3)
    c.run_for(1000)
    q = c.describe_quorum()
    assert q.leader_id == c.controller() and q.high_watermark > 0
    assert [v.replica_id for v in q.current_voters] == sorted(c.controllers)
    assert [o.replica_id for o in q.observers] == sorted(c.brokers), "brokers fetch the log as observers"
    assert all(q.high_watermark - o.log_end_offset <= 1 for o in q.observers), "observers keep up"


def test_transactions_on_kraft() -> None:
    # producer ids come from the controller's blocks (AllocateProducerIds), __transaction_state is
    # created through it; read_committed sees the committed transaction only
    c = KRaftCluster(brokers=3, controllers=3, seed=2, config={"transaction.state.log.num.partitions": 2})
    try:
        c.create_topic("t", 1, 3)
        p = c.producer(transactional_id="tx", linger_ms=0, acks="all")
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send("t", f"c{i}".encode(), partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(2):
            p.send("t", f"a{i}".encode(), partition=0)
        p.abort_transaction()
        consumer = c.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
        consumer.assign([TopicPartition("t", 0)])
        got: list[bytes] = []
        for _ in range(20):
            for recs in consumer.poll(200).values():
                got += [r.value for r in recs]
        assert got == [b"c0", b"c1", b"c2"]
        assert c.image().next_producer_id >= 1000, "a block was handed out through the metadata log"
    finally:
        c.close()


def test_rack_aware_placement_from_the_registered_racks() -> None:
    c = KRaftCluster(brokers=6, controllers=3, seed=3, racks=["a", "a", "b", "b", "c", "c"])
    try:
        assert {b.rack for b in c.image().brokers.values()} == {"a", "b", "c"}
        racks = {b: c.image().brokers[b].rack for b in c.brokers}
        for p, replicas in c.create_topic("r", partitions=6, replication_factor=3).items():
            assert len({racks[b] for b in replicas}) == 3, f"partition {p}: {replicas} shares a rack"
    finally:
        c.close()


def test_crash_and_restart_take_controller_ids(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=1, replication_factor=3)
    old = c.controller()
    assert old in c.controllers and old not in c.brokers
    old_epoch = c.controller_epoch()
    c.crash(old)
    assert not c.net.is_up(old) and c.controllers[old].controller is None, "the controller process died"
    assert c.run_until(lambda: c.controller() not in (None, old), 30_000), "another voter took over"
    assert c.controller_epoch() > old_epoch
    c.create_topic("u", partitions=1, replication_factor=3)  # the new active controller serves
    c.restart(old)
    assert c.run_until(lambda: c.controllers[old].client is not None, 5_000)
    assert c.run_until(lambda: c.controllers[old].controller.committed == c.image(), 30_000), (
        "the restarted controller replayed the log up to the leader's"
    )
    with pytest.raises(KeyError, match="no broker or controller 77"):
        c.crash(77)
    with pytest.raises(KeyError, match="no broker or controller 77"):
        c.restart(77)


def test_shutdown_of_the_active_controller_resigns_and_it_restarts(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=1, replication_factor=3)
    old = c.controller()
    c.shutdown(old)  # a clean stop: EndQuorumEpoch to the other voters, then its log closed
    start = c.net.now_ms()
    assert c.run_until(lambda: c.controller() not in (None, old), 2_000), "no successor"
    assert c.net.now_ms() - start < c.quorum_config.fetch_timeout_ms // 2, "the voters waited for a timeout"
    c.create_topic("u", partitions=1, replication_factor=3)
    c.restart(old)
    assert c.run_until(lambda: c.controllers[old].controller is not None, 5_000)
    assert c.run_until(lambda: c.controllers[old].controller.committed == c.image(), 30_000)
    with pytest.raises(KeyError, match="no broker or controller 77"):
        c.shutdown(77)


def _describe_at_broker(c: KRaftCluster, broker: int) -> Any:
    resp = c.request(broker, DescribeQuorumRequest(partitions=(DescribeQuorumPartition(tp=METADATA_TP),)))
    assert resp.error_code == 0 and len(resp.partitions) == 1, resp
    return resp.partitions[0]


def test_a_broker_forwards_describe_quorum_to_the_active_controller(cluster: KRaftCluster) -> None:
    # kafka-metadata-quorum --bootstrap-server: the broker relays the leader's own answer
    c = cluster
    c.create_topic("q", partitions=1, replication_factor=3)
    c.run_for(1000)
    first = c.controller()
    for b in c.brokers:
        q = _describe_at_broker(c, b)
        assert q.error_code == 0 and q.leader_id == first and q.leader_epoch == c.controller_epoch()
        assert q.high_watermark > 0
        assert [v.replica_id for v in q.current_voters] == sorted(c.controllers)
        assert [o.replica_id for o in q.observers] == sorted(c.brokers)
    c.net.crash(first)  # the forwarder follows the quorum to its new leader
    assert c.run_until(lambda: c.controller() not in (None, first), 10_000)
    q = _describe_at_broker(c, min(c.brokers))
    assert q.error_code == 0 and q.leader_id == c.controller() != first
    assert q.leader_epoch == c.controller_epoch() and q.leader_epoch > 1
    assert [v.replica_id for v in q.current_voters] == sorted(c.controllers)


def test_describe_quorum_of_another_partition_is_unknown(cluster: KRaftCluster) -> None:
    c = cluster
    c.run_for(1000)
    other = TopicPartition("q", 0)
    resp = c.request(min(c.brokers), DescribeQuorumRequest(partitions=(DescribeQuorumPartition(tp=other),)))
    assert [(p.tp, p.error_code) for p in resp.partitions] == [(other, 3)], "UNKNOWN_TOPIC_OR_PARTITION"


def test_metadata_and_describe_cluster_carry_the_formatted_cluster_id(cluster: KRaftCluster) -> None:
    # as Kafka's KRaft brokers: the id kafka-storage format wrote, not a fixed name
    c = cluster
    c.run_for(1000)
    meta = c.request(1, MetadataRequest(topics=None))
    desc = c.request(2, DescribeClusterRequest())
    assert meta.cluster_id == desc.cluster_id == c.cluster_id != "kafkalite"
