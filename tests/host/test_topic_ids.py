"""Topic ids (KIP-516) in both modes: every broker answers Metadata with the topic's real id (KRaft: the
TopicRecord's; ZooKeeper: the one in ``/brokers/topics/<t>``), the ids survive restarts and controller
failover, and each replica's directory carries it in ``partition.metadata``."""

from __future__ import annotations

import json
import uuid

import pytest

from kafkalite.common.kafka_uuid import uuid_from_str, uuid_to_str
from kafkalite.host.cluster import Cluster
from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.protocol import MetadataRequest
from kafkalite.protocol.metadata import NO_TOPIC_ID
from kafkalite.storage.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadataFile
from tests.metadata.kraft_harness import SMALL_SNAPSHOTS


def _ids(c, broker: int, *topics: str) -> dict[str, uuid.UUID]:
    resp = c.request(broker, MetadataRequest(topics=list(topics)))
    return {t.name: t.topic_id for t in resp.topics}


def _eventually(c, check, timeout_ms: int = 30_000) -> bool:
    """``check()`` (which may send requests itself, so not inside ``run_until``) within ``timeout_ms``."""
    for _ in range(timeout_ms // 500):
        if check():
            return True
        c.run_for(500)
    return check()


def _disk_ids(c, topic: str) -> dict[int, uuid.UUID | None]:
    """broker -> the id in its ``<topic>-0/partition.metadata``."""
    return {
        b: PartitionMetadataFile(c.dir / f"broker-{b}" / f"{topic}-0").read()
        for b in c.brokers
        if (c.dir / f"broker-{b}" / f"{topic}-0").is_dir()
    }


def test_kraft_metadata_answers_the_controllers_id_on_every_broker_and_on_disk() -> None:
    c = KRaftCluster(brokers=3, controllers=3, seed=3)
    try:
        c.create_topic("a", partitions=1, replication_factor=3)
        c.create_topic("b", partitions=1, replication_factor=2)
        img = c.image()
        want = {"a": img.topic("a").id, "b": img.topic("b").id}
        assert _eventually(c, lambda: all(_ids(c, b, "a", "b") == want for b in c.brokers), 10_000), [
            _ids(c, b, "a", "b") for b in c.brokers
        ]
        assert _disk_ids(c, "a") == {1: want["a"], 2: want["a"], 3: want["a"]}
        assert set(_disk_ids(c, "b").values()) == {want["b"]}
        # by id as well as by name (Metadata v12 asks with ids)
        resp = c.request(2, MetadataRequest(topics=[], topic_ids=(want["b"],)))
        assert [(t.name, t.topic_id) for t in resp.topics] == [("b", want["b"])]
        # stable over a broker restart and an active controller failover
        c.crash(1)
        c.net.crash(c.controller())
        c.restart(1)
        assert _eventually(c, lambda: all(_ids(c, b, "a", "b") == want for b in c.brokers), 30_000)
        assert c.image().topic("a").id == want["a"]
    finally:
        c.close()


def test_kraft_a_topic_recreated_while_a_broker_was_down_has_its_old_log_removed_by_id() -> None:
    # Broker 3 misses the deletion and the re-creation of "t" and comes back to a snapshot that shows
    # only the new "t". The name matches its old log; the id in partition.metadata does not.
    c = KRaftCluster(brokers=3, controllers=3, seed=2, log_config=SMALL_SNAPSHOTS)
    try:
        c.create_topic("t", partitions=1, replication_factor=3)
        producer = c.producer(acks="all", linger_ms=0)
        sent = [producer.send("t", f"old{i}".encode()) for i in range(20)]
        assert c.run_until(lambda: all(f.done() for f in sent), 10_000)
        old_id = c.image().topic("t").id
        assert c.run_until(lambda: _disk_ids(c, "t").get(3) == old_id, 10_000)
        c.crash(3)
        c.delete_topic("t")
        c.create_topic("t", partitions=1, replica_assignment={0: (1, 2, 3)})
        new_id = c.image().topic("t").id
        assert new_id != old_id
        for i in range(10):  # enough metadata for the controllers to snapshot past the deletion
            c.create_topic(f"pad{i}", partitions=1, replica_assignment={0: (1, 2)})
        act = c.active_controller()
        assert c.run_until(lambda: act.client.log.start_offset > 0, 10_000)
        c.restart(3)
        b3 = c.brokers[3]
        assert c.run_until(lambda: b3.loader is not None and b3.loader.image == c.image(), 20_000)
        assert b3.raft.stats.snapshots_loaded == 1
        assert c.run_until(lambda: _disk_ids(c, "t").get(3) == new_id, 30_000), _disk_ids(c, "t")
        b3_log = b"".join(f.read_bytes() for f in (c.dir / "broker-3" / "t-0").glob("*.log"))
        assert b"old1" not in b3_log, "broker 3 still holds the deleted topic's records"
        stray = [e for e in c.events("stray_replica") if e.fields["tp"] == "t-0"]
        assert stray and stray[0].fields["broker"] == 3, "the old log was found stray by its id"
        assert _eventually(c, lambda: _ids(c, 3, "t") == {"t": new_id}, 10_000)
    finally:
        c.close()


def test_zookeeper_mode_ids_live_in_the_topic_znode_and_survive_failover() -> None:
    c = Cluster(brokers=3, seed=4)
    try:
        c.create_topic("z", partitions=1, replication_factor=3)
        data, _ = c.store.get("/brokers/topics/z")
        znode = json.loads(data)
        assert znode["version"] == 3, znode
        tid = uuid_from_str(znode["topic_id"])
        assert tid != NO_TOPIC_ID
        assert _eventually(c, lambda: all(_ids(c, b, "z") == {"z": tid} for b in c.brokers), 10_000)
        assert c.run_until(lambda: set(_disk_ids(c, "z").values()) == {tid}, 10_000), _disk_ids(c, "z")
        controller = c.controller()
        c.crash(controller)
        c.restart(controller)
        assert c.run_until(lambda: c.controller() not in (None, -1), 30_000)
        assert _eventually(c, lambda: all(_ids(c, b, "z") == {"z": tid} for b in c.brokers), 30_000)
        assert json.loads(c.store.get("/brokers/topics/z")[0])["topic_id"] == znode["topic_id"]
    finally:
        c.close()


def test_zookeeper_mode_gives_a_topic_without_an_id_one_at_failover() -> None:
    # A znode written before Kafka 2.8 has no topic_id; the controller adds one when it loads the topic.
    c = Cluster(brokers=1, seed=5)
    try:
        c.create_topic("old", partitions=1, replication_factor=1)
        obj = json.loads(c.store.get("/brokers/topics/old")[0])
        obj.pop("topic_id")
        obj["version"] = 2
        c.store.set("/brokers/topics/old", json.dumps(obj).encode())
        c.crash(1)
        c.restart(1)
        assert c.run_until(lambda: "topic_id" in json.loads(c.store.get("/brokers/topics/old")[0]), 30_000)
        tid = uuid_from_str(json.loads(c.store.get("/brokers/topics/old")[0])["topic_id"])
        assert _eventually(c, lambda: _ids(c, 1, "old") == {"old": tid}, 30_000)
    finally:
        c.close()


def test_confluent_kafka_describe_topics_sees_the_brokers_id_and_the_one_on_disk() -> None:
    # librdkafka's DescribeTopics reads Metadata v12 and prints the id in Kafka's Uuid form.
    confluent = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(1) as srv:
        srv.create_topic("described", 2, 1)
        admin = AdminClient({"bootstrap.servers": srv.bootstrap_servers})
        got = admin.describe_topics(confluent.TopicCollection(["described"]))["described"].result(30)
        cluster = srv.server.cluster
        tid = srv.call(lambda: cluster.brokers[1].cache.topic_id("described"))
        assert tid != NO_TOPIC_ID
        assert str(got.topic_id) == uuid_to_str(tid)
        on_disk = PartitionMetadataFile(cluster.dir / "broker-1" / "described-1").read()
        assert on_disk == tid


def test_kraft_a_log_without_partition_metadata_keeps_its_records_and_gets_the_file() -> None:
    # A log written before kafkalite kept ids has no partition.metadata: matched by name, it is kept,
    # and the file is written when its replica starts.
    c = KRaftCluster(brokers=3, controllers=3, seed=6)
    try:
        c.create_topic("t", partitions=1, replication_factor=3)
        producer = c.producer(acks="all", linger_ms=0)
        sent = [producer.send("t", f"v{i}".encode()) for i in range(10)]
        assert c.run_until(lambda: all(f.done() for f in sent), 10_000)
        tid = c.image().topic("t").id
        assert c.run_until(lambda: _disk_ids(c, "t").get(2) == tid, 10_000)
        c.crash(2)
        (c.dir / "broker-2" / "t-0" / PARTITION_METADATA_FILE).unlink()
        c.restart(2)
        assert c.run_until(lambda: _disk_ids(c, "t").get(2) == tid, 30_000), _disk_ids(c, "t")
        assert not [e for e in c.events("stray_replica") if e.fields["tp"] == "t-0"]
        assert c.run_until(lambda: c.log_end_offsets("t", 0).get(2) == 10, 30_000), c.log_end_offsets("t", 0)
    finally:
        c.close()


def test_a_replica_refuses_a_leader_and_isr_with_another_topic_id() -> None:
    # ZooKeeper mode: the controller's LeaderAndIsr names the topic's id; a log holding another one
    # answers INCONSISTENT_TOPIC_ID and stays as it was.
    from kafkalite.errors import InconsistentTopicIdError
    from kafkalite.protocol import LeaderAndIsrPartitionState, LeaderAndIsrRequest, TopicPartition

    c = Cluster(brokers=1, seed=7)
    try:
        c.create_topic("z", partitions=1, replication_factor=1)
        rm = c.brokers[1].rm
        p = rm.partition(TopicPartition("z", 0))
        tid = p.log.topic_id
        assert tid is not None
        st = LeaderAndIsrPartitionState(
            tp=TopicPartition("z", 0),
            controller_epoch=c.controller_epoch(),
            leader=1,
            leader_epoch=p.leader_epoch + 1,
            isr=(1,),
            partition_epoch=p.partition_epoch + 1,
            replicas=(1,),
            topic_id=uuid.uuid4(),
        )
        resp = rm.handle_leader_and_isr(
            LeaderAndIsrRequest(
                controller_id=1, controller_epoch=c.controller_epoch(), partition_states=(st,)
            )
        )
        assert [e.error_code for e in resp.partition_errors] == [InconsistentTopicIdError.code]
        assert PartitionMetadataFile(p.log.dir).read() == tid
    finally:
        c.close()
