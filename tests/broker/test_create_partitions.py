"""CreatePartitions through the controller: placement, errors, and what producers and groups do next."""

from __future__ import annotations

import pytest

from kafkalite.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    UnknownTopicOrPartitionError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.metadata.placement import assign_new_partitions
from kafkalite.protocol import TopicPartition
from tests.group_helpers import group_consumer


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(
        brokers=4, seed=7, config={"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
    )


def test_new_partitions_are_placed_as_kafka_places_them_and_come_online(cluster: Cluster) -> None:
    before = cluster.create_topic("t", partitions=2, replication_factor=3)
    after = cluster.create_partitions("t", 5)
    assert {p: after[p] for p in before} == before  # existing partitions keep their replicas
    expected = assign_new_partitions([1, 2, 3, 4], {p: list(r) for p, r in before.items()}, 3)
    assert {p: list(after[p]) for p in (2, 3, 4)} == expected
    for p in (2, 3, 4):
        assert cluster.leader("t", p) == after[p][0] and cluster.isr("t", p) == after[p]
    assert cluster.events("partitions_created")


def test_explicit_assignment_and_errors(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=2)
    after = cluster.create_partitions("t", 3, assignments=[[4, 1]])
    assert after[2] == (4, 1)
    with pytest.raises(
        InvalidPartitionsError, match="currently has 3 partitions, which is higher than the requested 2"
    ):
        cluster.create_partitions("t", 2)
    with pytest.raises(InvalidPartitionsError, match="already has 3 partitions"):
        cluster.create_partitions("t", 3)
    with pytest.raises(UnknownTopicOrPartitionError):
        cluster.create_partitions("nope", 4)
    with pytest.raises(InvalidReplicaAssignmentError, match="by 2 but 1 assignments"):
        cluster.create_partitions("t", 5, assignments=[[1, 2]])
    with pytest.raises(InvalidReplicaAssignmentError, match="Inconsistent replication factor"):
        cluster.create_partitions("t", 4, assignments=[[1, 2, 3]])
    assert len(cluster.read_all("t")) == 3  # a refused request changed nothing


def test_producer_reaches_new_partitions_after_a_metadata_refresh(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=2)
    producer = cluster.producer(linger_ms=0, metadata_max_age_ms=1000)
    first = producer.send("t", b"a")
    assert cluster.run_until(first.done, 10_000)
    cluster.create_partitions("t", 3)
    late = producer.send("t", b"b", partition=2)  # unknown to the producer's metadata yet: it refreshes
    assert cluster.run_until(late.done, 10_000) and late.exception() is None
    assert late.result().partition == 2
    assert [r.value for r in cluster.read_all("t")[2]] == [b"b"]


def test_group_rebalances_when_partitions_are_added(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=2)
    members = [group_consumer(cluster, n, "g", metadata_max_age_ms=1000) for n in ("a", "b")]
    for c in members:
        c.subscribe(["t"])
    for _ in range(30):
        for c in members:
            c.poll(100)
    assert sorted(tp for c in members for tp in c.assignment()) == [TopicPartition("t", p) for p in range(2)]
    generation = members[0].generation_id
    cluster.create_partitions("t", 4)
    producer = cluster.producer(linger_ms=0, metadata_max_age_ms=1000)
    sent = [producer.send("t", f"v{p}".encode(), partition=p) for p in range(4)]
    got: list[bytes] = []
    for _ in range(60):
        for c in members:
            got += [r.value for recs in c.poll(100).values() for r in recs]
    assert all(f.done() and f.exception() is None for f in sent)
    assert members[0].generation_id > generation  # the new partitions made the group rebalance
    assert sorted(tp for c in members for tp in c.assignment()) == [TopicPartition("t", p) for p in range(4)]
    assert sorted(got) == [b"v0", b"v1", b"v2", b"v3"]
