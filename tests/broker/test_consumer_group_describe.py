"""The describe and list APIs for KIP-848's consumer-type groups on a simulated cluster: ConsumerGroupDescribe
(api 69), ListGroups v5 with the group type and the types filter, DescribeGroups answering Dead for a
consumer-type group (as Kafka's DescribeGroups up to v5 does: it knows classic groups only)."""

from __future__ import annotations

import pytest

from kafkalite.errors import GroupIdNotFoundError, NotCoordinatorError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol.consumer_group import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kafkalite.protocol.group import DescribeGroupsRequest, ListGroupsRequest
from tests.group_helpers import group_consumer

FAST = {"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def cluster(make_cluster) -> Cluster:
    c = make_cluster(3, seed=5, config=FAST)
    c.create_topic("orders", partitions=4, replication_factor=1)
    c.create_topic("audit", partitions=2, replication_factor=1)
    return c


def join(c: Cluster, group: str, **kw) -> object:
    req = ConsumerGroupHeartbeatRequest(
        group_id=group, rebalance_timeout_ms=30_000, topic_partitions=(), **kw
    )
    r = c.request(c.coordinator(group), req)
    assert r.error_code == 0, r
    return r


def test_consumer_group_describe_shows_epochs_assignor_and_members(cluster: Cluster) -> None:
    a = join(cluster, "new", subscribed_topic_names=("orders",), instance_id="ia", server_assignor="range")
    b = join(cluster, "new", subscribed_topic_regex="aud.*")
    coord = cluster.coordinator("new")
    [g] = cluster.request(coord, ConsumerGroupDescribeRequest(group_ids=("new",))).groups
    assert g.error_code == 0 and g.group_id == "new"
    assert g.group_epoch == 2 and g.assignment_epoch == 2 and g.assignor_name == "range"
    assert g.group_state == "Reconciling"  # b joined after a's last heartbeat: a has not caught up
    members = {m.member_id: m for m in g.members}
    ma, mb = members[a.member_id], members[b.member_id]
    assert ma.instance_id == "ia" and ma.subscribed_topic_names == ("orders",) and ma.member_epoch == 1
    assert mb.subscribed_topic_regex == "aud.*" and mb.subscribed_topic_names == ()
    assert [(t.topic_name, t.partitions) for t in ma.assignment.topic_partitions] == [
        ("orders", (0, 1, 2, 3))
    ]
    assert [(t.topic_name, t.partitions) for t in mb.target_assignment.topic_partitions] == [
        ("audit", (0, 1))
    ]


def test_consumer_group_describe_answers_group_id_not_found_for_other_groups(cluster: Cluster) -> None:
    coord = cluster.coordinator("missing")
    [g] = cluster.request(coord, ConsumerGroupDescribeRequest(group_ids=("missing",))).groups
    assert g.error_code == GroupIdNotFoundError.code
    other = next(b for b in cluster.brokers if b != coord)
    [g] = cluster.request(other, ConsumerGroupDescribeRequest(group_ids=("missing",))).groups
    assert g.error_code == NotCoordinatorError.code


def test_list_groups_shows_the_type_and_filters_by_it(cluster: Cluster) -> None:
    join(cluster, "new", subscribed_topic_names=("orders",))
    old = group_consumer(cluster, "c1", group="old")
    old.subscribe(["orders"])
    for _ in range(20):
        old.poll(200)
    coord = cluster.coordinator("new")
    assert cluster.coordinator("old") == coord  # one offsets partition: one coordinator for both

    def listed(**kw) -> list[tuple[str, str, str, str]]:
        r = cluster.request(coord, ListGroupsRequest(**kw))
        return [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups]

    assert listed() == [("new", "consumer", "Stable", "consumer"), ("old", "consumer", "Stable", "classic")]
    assert listed(types_filter=("CONSUMER",)) == [("new", "consumer", "Stable", "consumer")]
    assert listed(types_filter=("classic",)) == [("old", "consumer", "Stable", "classic")]
    assert listed(types_filter=("share",)) == []
    assert listed(states_filter=("stable",), types_filter=("consumer", "classic")) == listed()


def test_describe_groups_sees_a_consumer_type_group_as_dead(cluster: Cluster) -> None:
    join(cluster, "new", subscribed_topic_names=("orders",))
    coord = cluster.coordinator("new")
    [g] = cluster.request(coord, DescribeGroupsRequest(groups=("new",))).groups
    assert g.error_code == 0 and g.group_state == "Dead" and g.members == ()


def test_a_consumer_type_group_with_commits_is_listed_once_with_its_type(cluster: Cluster) -> None:
    c = group_consumer(cluster, "c1", group="new", **{"group.protocol": "consumer"})
    c.subscribe(["orders"])
    for _ in range(10):
        c.poll(200)
    c.commit_sync()  # the offsets live on a memberless classic record: it must not be listed as a group
    coord = cluster.coordinator("new")
    r = cluster.request(coord, ListGroupsRequest())
    assert [(g.group_id, g.group_type) for g in r.groups] == [("new", "consumer")]


def test_the_consumer_groups_tool_lists_types_and_states(cluster: Cluster) -> None:
    from kafkalite.tools.consumer_groups import run

    join(cluster, "new", subscribed_topic_names=("orders",))
    old = group_consumer(cluster, "c1", group="old")
    old.subscribe(["orders"])
    for _ in range(20):
        old.poll(200)
    rows = [line.split() for line in run(cluster, "--list --type").splitlines()]
    assert rows == [["GROUP", "TYPE"], ["new", "Consumer"], ["old", "Classic"]]
    rows = [line.split() for line in run(cluster, "--list --type consumer --state").splitlines()]
    assert rows == [["GROUP", "TYPE", "STATE"], ["new", "Consumer", "Stable"]]
    assert run(cluster, "--list").split() == ["new", "old"]
    with pytest.raises(Exception, match="--type and --state go with --list only"):
        run(cluster, "--describe --group new --type")


def test_a_group_converts_between_the_protocols_keeping_its_offsets(cluster: Cluster) -> None:
    from kafkalite.protocol import TopicPartition

    new = group_consumer(
        cluster, "n1", group="g", **{"group.protocol": "consumer", "enable.auto.commit": False}
    )
    new.subscribe(["orders"])
    for _ in range(10):
        new.poll(200)
    tp = TopicPartition("orders", 1)
    new.commit_sync({tp: 7})
    # A classic member joins the live consumer group (the online migration) and gets a share of it.
    early = group_consumer(cluster, "c0", group="g", **{"enable.auto.commit": False})
    early.subscribe(["orders"])
    for _ in range(20):
        early.poll(200)
        new.poll(200)
    assert len(early.assignment()) == len(new.assignment()) == 2
    assert not early.assignment() & new.assignment()
    new.close()  # the last consumer-protocol member leaves: the group is classic again (downgrade)
    old = group_consumer(cluster, "c1", group="g")
    old.subscribe(["orders"])
    for _ in range(30):
        old.poll(200)
        early.poll(200)
    assert len(old.assignment()) == len(early.assignment()) == 2
    assert old.committed([tp])[tp].offset == 7
    r = cluster.request(cluster.coordinator("g"), ListGroupsRequest())
    assert [(g.group_id, g.group_type) for g in r.groups] == [("g", "classic")]
    assert cluster.events("consumer_group_converted")
