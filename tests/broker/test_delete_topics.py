"""Topic deletion as Kafka's ZooKeeper-mode controller runs it: the topic leaves every metadata cache,
every replica removes its log, then the znodes go; a dead replica holds the deletion until it is back."""

from __future__ import annotations

import pytest

from kafkalite.coordination import paths
from kafkalite.errors import TopicAlreadyExistsError, TopicDeletionDisabledError, UnknownTopicOrPartitionError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import DeleteTopicsRequest, MetadataRequest, TopicPartition
from tests.group_helpers import group_consumer, produce

CONFIG = {"offsets.topic.num.partitions": 3, "zookeeper.session.timeout.ms": 6000}


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(brokers=3, seed=11, config=CONFIG)


def _log_dirs(cluster: Cluster, topic: str) -> list[str]:
    return sorted(p.name for b in cluster.brokers.values() for p in b.log_dir.glob(f"{topic}-*"))


def test_a_deleted_topic_leaves_metadata_disk_and_znodes_and_can_be_created_again(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3, config={"retention.ms": 1000})
    produce(cluster, "t", 20, 2)
    assert len(_log_dirs(cluster, "t")) == 6
    cluster.delete_topic("t")
    assert _log_dirs(cluster, "t") == []
    for path in (paths.topic_path("t"), f"{paths.CONFIG_TOPICS}/t", paths.delete_topic_path("t")):
        assert cluster.store.exists(path) is None
    for b in cluster.brokers:
        meta = cluster.request(b, MetadataRequest(topics=("t",), allow_auto_topic_creation=False))
        assert meta.topics[0].error_code == UnknownTopicOrPartitionError.code
    assert [e.fields["topic"] for e in cluster.events("topic_deleted")] == ["t"]
    cluster.create_topic("t", partitions=1, replication_factor=2)  # the name is free again, empty
    assert cluster.read_all("t") == {0: []}
    assert cluster.describe_configs("t")["retention.ms"].value == "604800000"  # old overrides are gone


def test_unknown_topics_disabled_deletion_and_recreating_too_early(cluster: Cluster) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        cluster.delete_topic("nope")
    cluster.create_topic("t", partitions=1, replication_factor=3)
    victim = next(b for b in cluster.replicas("t", 0) if b != cluster.controller())
    cluster.crash(victim)  # its replica cannot delete its log: the deletion waits for it
    resp = cluster.request(cluster.controller(), DeleteTopicsRequest(topic_names=("t",)))
    assert resp.topics[0].error_code == 0  # answered once the topic left the metadata
    cluster.run_for(1000)
    assert cluster.store.exists(paths.topic_path("t")) is not None
    with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
        cluster.create_topic("t", partitions=1, replication_factor=1)
    cluster.restart(victim)
    assert cluster.run_until(lambda: cluster.store.exists(paths.topic_path("t")) is None, 60_000)
    assert _log_dirs(cluster, "t") == []  # the returning broker removed its log too

    c2 = Cluster(brokers=1, seed=1, config={"delete.topic.enable": False})
    try:
        c2.create_topic("keep")
        with pytest.raises(TopicDeletionDisabledError):
            c2.delete_topic("keep")
        assert c2.store.exists(paths.topic_path("keep")) is not None
    finally:
        c2.close()


def test_a_controller_failover_finishes_the_deletion(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=3, replication_factor=2)
    ctl = cluster.controller()
    assert ctl is not None
    # Mark it for deletion as an admin tool would, then kill the controller at once.
    cluster.brokers[ctl].zk.create(paths.delete_topic_path("t"), b"", make_parents=True)
    cluster.crash(ctl)
    assert cluster.run_until(lambda: cluster.controller() not in (None, ctl), 60_000)
    new = cluster.controller()
    # The new controller picked the deletion up from the admin znode; the dead broker's replicas hold it.
    assert cluster.run_until(lambda: cluster.events("topic_deletion_started", node=new), 10_000)
    cluster.restart(ctl)
    assert cluster.run_until(lambda: cluster.store.exists(paths.topic_path("t")) is None, 60_000)
    assert cluster.run_until(lambda: _log_dirs(cluster, "t") == [], 10_000)


def test_group_offsets_of_a_deleted_topic_are_forgotten(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3)
    cluster.create_topic("u", partitions=1, replication_factor=3)
    produce(cluster, "t", 10, 2)
    produce(cluster, "u", 4, 1)
    c = group_consumer(cluster, "c0")
    c.subscribe(["t", "u"])
    for _ in range(30):
        c.poll(200)
    c.commit_sync()
    c.close()
    assert set(cluster.group_offsets("g")) == {
        TopicPartition("t", 0),
        TopicPartition("t", 1),
        TopicPartition("u", 0),
    }
    cluster.delete_topic("t")
    cluster.run_for(100)
    assert cluster.group_offsets("g") == {TopicPartition("u", 0): 4}
