"""KRaft combined mode on the simulator (``process.roles=broker,controller``): three nodes, each a voter of
the metadata quorum and a broker, sharing one node id and one ``__cluster_metadata`` log per node. They
elect a quorum leader, create a topic, take acks=all writes and lose none of them when the node that is
both the active controller and a broker crashes."""

from __future__ import annotations

import pytest

from kafkalite.broker.kafka_raft_server import KafkaRaftServer
from kafkalite.harness.checker import check_history
from kafkalite.host.kraft_cluster import ControllerRole, KRaftCluster
from kafkalite.protocol import CreatableTopic, CreateTopicsRequest, TopicPartition
from kafkalite.protocol.envelope import RequestEnvelope


@pytest.fixture
def cluster():
    c = KRaftCluster(brokers=3, controllers=3, combined=True, seed=3)
    yield c
    c.close()


def _consume(c: KRaftCluster, topic: str, partitions: int, want: int) -> list[bytes]:
    consumer = c.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: list[bytes] = []
    for _ in range(50):
        for recs in consumer.poll(200).values():
            got += [r.value for r in recs]
        if len(got) >= want:
            break
    return got


def test_combined_nodes_share_id_and_metadata_log(cluster: KRaftCluster) -> None:
    c = cluster
    assert sorted(c.controllers) == sorted(c.brokers) == [1, 2, 3], "one node id for both roles"
    assert c.quorum_config.voters == (1, 2, 3)
    for nid, node in c.brokers.items():
        assert isinstance(node, KafkaRaftServer) and isinstance(c.controllers[nid], ControllerRole)
        assert c.controllers[nid].client is node.raft, "the controller and broker share one Raft client"
    leader = c.controller()
    assert leader in (1, 2, 3)
    q = c.describe_quorum()
    assert q.leader_id == leader and [v.replica_id for v in q.current_voters] == [1, 2, 3]
    assert not q.observers, "every node is a voter: no observer fetches the log"
    # the one log is replayed by both roles: the broker's image is the controller's
    assert c.run_until(lambda: all(i == c.image() for i in c.broker_images().values()), 5_000)
    assert not list(c.dir.glob("controller-*")), "no separate controller log dir"


def test_combined_acks_all_survives_active_controller_node_crash(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
    producer = c.producer(acks="all", linger_ms=0)
    first = [producer.send("t", f"v{i}".encode(), partition=i % 2) for i in range(30)]
    assert c.run_until(lambda: all(f.done() for f in first), 10_000)
    assert all(f.exception() is None for f in first)
    victim = c.controller()
    assert victim is not None
    leads = [p for p in range(2) if c.leader("t", p) == victim]
    more = []
    for i in range(30, 100):
        more.append(producer.send("t", f"v{i}".encode(), partition=i % 2))
        c.run_for(5)
        if i == 50:
            c.crash(victim, lose_unflushed=True)  # both roles go down with the node
            assert not c.net.is_up(victim) and c.controllers[victim].controller is None
    assert c.run_until(lambda: all(f.done() for f in more), 60_000)
    new = c.controller()
    assert new is not None and new != victim, "another voter became the active controller"
    assert c.controller_epoch() > 0
    for p in leads:
        assert c.leader("t", p) not in (None, victim), "the crashed node's leaderships moved"
    assert victim in c.image().brokers and c.image().brokers[victim].fenced, "its broker was fenced"
    c.restart(victim)
    assert c.run_until(lambda: c.image().unfenced_brokers() == [1, 2, 3], 60_000)
    assert c.run_until(lambda: all(c.high_watermark("t", p) is not None for p in range(2)), 10_000)
    hws = {("t", p): c.high_watermark("t", p) for p in range(2)}
    report = check_history(
        producer.history,
        {("t", p): recs for p, recs in c.read_all("t").items()},
        replicas={("t", p): c.replica_logs("t", p) for p in range(2)},
        high_watermarks=hws,
    )
    assert report.ok, report
    sent = [f"v{i}".encode() for i in range(100)]
    acked = {v for v, f in zip(sent, [*first, *more], strict=True) if f.exception() is None}
    assert len(acked) >= 90, len(acked)
    got = _consume(c, "t", 2, len(acked))
    assert acked <= set(got), sorted(acked - set(got))[:5]
    # the restarted node is a voter again, caught up, and replays the same image
    assert c.run_until(lambda: all(i == c.image() for i in c.broker_images().values()), 10_000)
    assert victim in {v.replica_id for v in c.describe_quorum().current_voters}


def test_combined_with_broker_only_nodes() -> None:
    with KRaftCluster(brokers=4, controllers=3, combined=True, seed=5) as c:
        assert sorted(c.controllers) == [1, 2, 3] and not isinstance(c.brokers[4], KafkaRaftServer)
        assert [o.replica_id for o in c.describe_quorum().observers] == [4], "broker 4 observes"
        c.create_topic("t", partitions=1, replication_factor=4)
        assert len(c.isr("t", 0)) == 4


def test_combined_needs_a_broker_per_controller() -> None:
    with pytest.raises(ValueError, match="combined mode"):
        KRaftCluster(brokers=2, controllers=3, combined=True)


def test_a_combined_node_back_from_a_crash_loads_the_snapshot_into_both_roles() -> None:
    from tests.metadata.kraft_harness import SMALL_SNAPSHOTS

    with KRaftCluster(brokers=3, controllers=3, combined=True, seed=4, log_config=SMALL_SNAPSHOTS) as c:
        c.create_topic("kept", partitions=1, replication_factor=3)
        leader = c.controller()
        victim = next(n for n in (1, 2, 3) if n != leader)
        c.crash(victim)
        for i in range(12):
            c.create_topic(
                f"new{i}", partitions=1, replica_assignment={0: tuple(n for n in (1, 2, 3) if n != victim)}
            )
        act = c.active_controller()
        assert c.run_until(lambda: act.client.log.start_offset > 0, 20_000), (
            "the leader never cleaned its log"
        )
        c.restart(victim)
        node = c.brokers[victim]
        assert c.run_until(
            lambda: (
                node.loader is not None
                and node.loader.image == c.image()
                and node.quorum_controller.committed == c.image()
            ),
            30_000,
        ), "the broker and the controller of the node replay the same state"
        assert node.raft.stats.snapshots_loaded == 1 and node.raft.stats.snapshot_fetches >= 1
        assert c.image().topic("new11") is not None and node.loader.image.topic("new11") is not None
        assert c.run_until(lambda: node.registered, 30_000)


def test_controlled_shutdown_of_the_active_controllers_node_resigns_first(cluster: KRaftCluster) -> None:
    c = cluster
    c.create_topic("t", partitions=3, replication_factor=3)
    node = c.controller()
    fetch_timeout = c.quorum_config.fetch_timeout_ms
    c.shutdown(node, controlled=True)  # its leaderships move, then it resigns: EndQuorumEpoch
    start = c.net.now_ms()
    assert c.run_until(lambda: c.controller() not in (None, node), fetch_timeout), "no successor"
    # the others did not wait for their fetch timeout to notice the leader was gone
    assert c.net.now_ms() - start < fetch_timeout // 2, c.net.now_ms() - start
    assert all(c.leader("t", p) not in (None, node) for p in range(3))
    c.restart(node)
    assert c.run_until(lambda: c.image().unfenced_brokers() == [1, 2, 3], 30_000)
    assert c.run_until(lambda: all(len(c.isr("t", p)) == 3 for p in range(3)), 30_000)


def test_a_crashed_combined_node_sends_nothing() -> None:
    # A crash is the process dying: its controller does not answer the requests it was holding (they time
    # out at their senders, who go to the next controller), and neither role sends anything until restart.
    with KRaftCluster(brokers=3, controllers=3, combined=True, seed=6, log_messages="all") as c:
        c.create_topic("t", partitions=3, replication_factor=3)
        node = c.controller()
        producer = c.producer(acks="all", linger_ms=0)
        futures = [producer.send("t", b"x", partition=p) for p in range(3)]
        # a CreateTopics a broker forwards: the controller holds it until its records are committed
        create = CreateTopicsRequest(
            topics=(CreatableTopic(name="u", num_partitions=1, replication_factor=3),)
        )
        c.net.send("admin", node, RequestEnvelope(7, "broker-1-forwarding", create))
        c.run_for(1)
        assert c.controllers[node].controller._waiting, "the request is not held yet"
        c.crash(node)
        c.run_for(15_000)
        log = c.events(("crash", "send"), node)
        crashed = next(i for i, e in enumerate(log) if e.kind == "crash")
        assert not log[crashed + 1 :], log[crashed + 1 : crashed + 4]
        assert c.run_until(lambda: all(f.done() for f in futures), 30_000)
        c.restart(node)
        assert c.run_until(lambda: c.image().unfenced_brokers() == [1, 2, 3], 30_000)
