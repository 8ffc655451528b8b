"""KIP-848's ConsumerGroupHeartbeat served by the brokers of a simulated cluster: routed to the group's
coordinator (NOT_COORDINATOR elsewhere), the assignors fed with the brokers' topic metadata (more partitions
bump the group epoch), and OffsetCommit checked against the member epoch (OffsetCommit v9 semantics)."""

from __future__ import annotations

import pytest

from kafkalite.errors import (
    InvalidRequestError,
    NotCoordinatorError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import MetadataRequest, TopicPartition
from kafkalite.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupTopicPartitions,
)
from kafkalite.protocol.group import OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest

FAST = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def cluster(make_cluster) -> Cluster:
    c = make_cluster(3, config=FAST)
    c.create_topic("orders", partitions=6, replication_factor=1)
    return c


def join(c: Cluster, broker: int, group: str = "g", topics: tuple[str, ...] = ("orders",)):
    req = ConsumerGroupHeartbeatRequest(
        group_id=group, rebalance_timeout_ms=30_000, subscribed_topic_names=topics, topic_partitions=()
    )
    return c.request(broker, req)


def topic_id(c: Cluster, name: str):
    """The topic's id as the brokers' metadata has it (KIP-516: drawn by the controller)."""
    [t] = c.request(1, MetadataRequest(topics=[name])).topics
    return t.topic_id


def owned(resp, c: Cluster) -> set[TopicPartition]:
    names = {topic_id(c, n): n for n in ("orders",)}
    return {
        TopicPartition(names[tp.topic_id], p)
        for tp in resp.assignment.topic_partitions
        for p in tp.partitions
    }


def beat(c: Cluster, broker: int, member_id: str, epoch: int, parts: set[TopicPartition], group: str = "g"):
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    tps = tuple(
        ConsumerGroupTopicPartitions(topic_id=topic_id(c, t), partitions=tuple(sorted(ps)))
        for t, ps in sorted(by_topic.items())
    )
    req = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, topic_partitions=tps
    )
    return c.request(broker, req)


def test_the_coordinator_answers_and_assigns_every_partition(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    r = join(cluster, coord)
    assert r.error_code == 0, r
    assert r.member_id and r.member_epoch == 1 and r.heartbeat_interval_ms == 5_000
    assert owned(r, cluster) == {TopicPartition("orders", p) for p in range(6)}


def test_other_brokers_answer_not_coordinator(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    for b in cluster.brokers:
        if b != coord:
            assert join(cluster, b).error_code == NotCoordinatorError.code


def test_an_empty_group_id_is_an_invalid_request(cluster: Cluster) -> None:
    cluster.coordinator("g")
    r = join(cluster, 1, group="")
    assert r.error_code == InvalidRequestError.code and "GroupId" in r.error_message


def test_two_members_split_the_partitions_over_the_broker(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    a = join(cluster, coord)
    a_parts = owned(a, cluster)
    b = join(cluster, coord)
    assert b.error_code == 0 and b.member_epoch >= 1
    # a revokes what the new target moves to b; b gets those once a has released them
    for _ in range(4):
        ra = beat(cluster, coord, a.member_id, a.member_epoch, a_parts)
        a = ra if ra.member_epoch else a
        if ra.assignment is not None:
            a_parts = owned(ra, cluster)
        rb = beat(cluster, coord, b.member_id, b.member_epoch, owned(b, cluster) if b.assignment else set())
        if rb.assignment is not None:
            b = rb
    b_parts = owned(b, cluster)
    assert len(a_parts) == len(b_parts) == 3 and not a_parts & b_parts


def test_more_partitions_bump_the_group_epoch_and_are_assigned(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    r = join(cluster, coord)
    epoch = r.member_epoch
    cluster.create_partitions("orders", 8)
    cluster.run_for(100)  # UpdateMetadata reaches every broker
    r2 = beat(cluster, coord, r.member_id, epoch, owned(r, cluster))
    assert r2.error_code == 0 and r2.member_epoch > epoch
    assert owned(r2, cluster) == {TopicPartition("orders", p) for p in range(8)}


def test_offset_commit_checks_the_member_epoch(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    r = join(cluster, coord)
    tp = TopicPartition("orders", 2)

    def commit(member_id: str, epoch: int, offset: int) -> int:
        req = OffsetCommitRequest(
            group_id="g",
            generation_id=epoch,
            member_id=member_id,
            partitions=(OffsetCommitPartition(tp=tp, committed_offset=offset),),
        )
        return cluster.request(coord, req).partitions[0].error_code

    assert commit(r.member_id, r.member_epoch, 42) == 0
    assert commit(r.member_id, r.member_epoch - 1, 43) == StaleMemberEpochError.code
    assert commit(r.member_id, r.member_epoch + 1, 44) == StaleMemberEpochError.code
    assert commit("stranger", r.member_epoch, 45) == UnknownMemberIdError.code
    assert commit("", -1, 46) == UnknownMemberIdError.code  # the group has members
    fetched = cluster.request(coord, OffsetFetchRequest(group_id="g", partitions=(tp,)))
    assert [(p.tp, p.committed_offset) for p in fetched.partitions] == [(tp, 42)]
    assert cluster.group_offsets("g") == {tp: 42}


def test_offsets_of_subscribed_topics_do_not_expire_while_the_group_has_members(make_cluster) -> None:
    """Kafka's consumer-group offset expiration: a topic some member subscribes to keeps its offsets; the
    others (and all of them once the group is empty) expire by commit time."""
    cfg = {**FAST, "offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000}
    c = make_cluster(3, config=cfg)
    c.create_topic("orders", partitions=6, replication_factor=1)
    c.create_topic("other", partitions=1, replication_factor=1)
    coord = c.coordinator("g")
    r = join(c, coord)
    parts = owned(r, c)
    kept, dropped = TopicPartition("orders", 2), TopicPartition("other", 0)
    req = OffsetCommitRequest(
        group_id="g", generation_id=r.member_epoch, member_id=r.member_id,
        partitions=(OffsetCommitPartition(tp=kept, committed_offset=5),
                    OffsetCommitPartition(tp=dropped, committed_offset=9)),
    )  # fmt: skip
    assert [p.error_code for p in c.request(coord, req).partitions] == [0, 0]
    for _ in range(30):  # two minutes of heartbeats
        c.run_for(4_000)
        assert beat(c, coord, r.member_id, r.member_epoch, parts).error_code == 0
    assert c.group_offsets("g") == {kept: 5}, "the subscribed topic's offset stays, the other expired"
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id=r.member_id, member_epoch=-1)
    assert c.request(coord, leave).error_code == 0
    c.run_for(2_000)
    assert c.group_offsets("g") == {}, "an empty group's offsets expire by commit time"
