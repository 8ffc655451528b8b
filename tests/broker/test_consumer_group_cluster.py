"""Consumer groups end to end on a simulated Cluster: the brokers find and host the group coordinator."""

from __future__ import annotations

import pytest

from kafkalite.client.consumer import CommitFailedError, Consumer, ConsumerRebalanceListener
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from tests.group_helpers import group_consumer as consumer
from tests.group_helpers import produce as produce_to

BROKER_CONFIG = {"offsets.topic.num.partitions": 3, "zookeeper.session.timeout.ms": 6000}


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(brokers=3, seed=5, config=BROKER_CONFIG)


def produce(cluster: Cluster, topic: str, n: int, partitions: int, start: int = 0) -> None:
    produce_to(cluster, topic, n, partitions, start, acks="all")


def poll_all(consumers: list[Consumer], rounds: int, ms: int = 200) -> dict[str, list[bytes]]:
    got: dict[str, list[bytes]] = {c.client_id: [] for c in consumers}
    for _ in range(rounds):
        for c in consumers:
            for recs in c.poll(ms).values():
                got[c.client_id].extend(r.value for r in recs)
    return got


def stable(consumers: list[Consumer]) -> bool:
    gens = {c.generation_id for c in consumers}
    return len(gens) == 1 and -1 not in gens and not any(c._coord.rebalance_in_progress() for c in consumers)


def test_group_members_split_the_topic_and_two_groups_each_read_all(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=6, replication_factor=3)
    produce(cluster, "t", 60, 6)
    g1 = [consumer(cluster, f"a{i}", "g1") for i in range(3)]
    g2 = [consumer(cluster, "b0", "g2")]
    for c in g1 + g2:
        c.subscribe(["t"])
    got = poll_all(g1 + g2, 40)
    assert stable(g1) and stable(g2)
    assert sorted(tp for c in g1 for tp in c.assignment()) == [TopicPartition("t", p) for p in range(6)]
    assert all(len(c.assignment()) == 2 for c in g1)
    values = sorted(f"v{i}".encode() for i in range(60))
    assert sorted(v for c in g1 for v in got[c.client_id]) == values  # the group reads each record once
    assert sorted(got["b0"]) == values  # and another group reads all of them again
    coord = cluster.coordinator("g1")
    assert coord is not None and all(c._coord.coordinator == coord for c in g1)


def test_one_partition_four_consumers_and_takeover(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=3)
    produce(cluster, "t", 10, 1)
    group = [consumer(cluster, f"c{i}", auto_commit_interval_ms=500) for i in range(4)]
    for c in group:
        c.subscribe(["t"])
    got = poll_all(group, 30)
    workers = [c for c in group if c.assignment()]
    assert len(workers) == 1 and len(got[workers[0].client_id]) == 10
    assert all(not got[c.client_id] for c in group if c is not workers[0])  # three wait
    cluster.net.crash(workers[0].client_id)
    rest = [c for c in group if c is not workers[0]]
    produce(cluster, "t", 5, 1, start=10)
    got = poll_all(rest, 100)
    new = [c for c in rest if c.assignment()]
    assert len(new) == 1
    assert got[new[0].client_id] == [f"v{i}".encode() for i in range(10, 15)]  # resumed at the commit


def test_stale_generation_commit_is_fenced(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3)
    produce(cluster, "t", 10, 2)
    a = consumer(cluster, "a", enable_auto_commit=False)
    b = consumer(cluster, "b", enable_auto_commit=False)
    a.subscribe(["t"])
    b.subscribe(["t"])
    poll_all([a, b], 30)
    assert stable([a, b])
    cluster.pause("a")  # longer than session.timeout.ms
    for _ in range(100):
        b.poll(200)
        if len(b.assignment()) == 2:
            break
    assert len(b.assignment()) == 2
    cluster.resume("a")
    with pytest.raises(CommitFailedError):
        a.commit_sync()
    poll_all([a, b], 30)
    assert stable([a, b]) and all(len(c.assignment()) == 1 for c in (a, b))


def test_max_poll_interval_exceeded_member_leaves(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3)
    a = consumer(cluster, "a", max_poll_interval_ms=10_000)
    b = consumer(cluster, "b", max_poll_interval_ms=10_000)
    a.subscribe(["t"])
    b.subscribe(["t"])
    poll_all([a, b], 30)
    assert stable([a, b])
    for _ in range(80):
        b.poll(250)
    assert cluster.events("consumer_poll_timeout", node="a")
    assert len(b.assignment()) == 2


class Counter(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked = 0

    def on_partitions_revoked(self, partitions: set) -> None:
        self.revoked += len(partitions)


@pytest.mark.parametrize(("strategy", "expected"), [("roundrobin", 6), ("cooperative-sticky", 2)])
def test_revocations_eager_vs_cooperative(cluster: Cluster, strategy: str, expected: int) -> None:
    cluster.create_topic("t", partitions=6, replication_factor=3)
    listeners = [Counter() for _ in range(3)]
    group = [consumer(cluster, f"c{i}", partition_assignment_strategy=strategy) for i in range(3)]
    for c, lst in zip(group[:2], listeners, strict=False):
        c.subscribe(["t"], listener=lst)
    poll_all(group[:2], 30)
    assert stable(group[:2])
    before = sum(lst.revoked for lst in listeners)
    group[2].subscribe(["t"], listener=listeners[2])
    poll_all(group, 40)
    assert stable(group) and all(len(c.assignment()) == 2 for c in group)
    assert sum(lst.revoked for lst in listeners) - before == expected


def test_coordinator_failover_keeps_committed_offsets(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=3)
    produce(cluster, "t", 20, 2)
    group = [consumer(cluster, f"c{i}") for i in range(2)]
    for c in group:
        c.subscribe(["t"])
    got = poll_all(group, 40)
    assert sum(len(v) for v in got.values()) == 20
    for c in group:
        c.commit_sync()
    old = cluster.coordinator("g")
    assert old is not None
    cluster.crash(old)
    produce(cluster, "t", 10, 2, start=20)
    got = poll_all(group, 150)
    new = cluster.coordinator("g")
    assert new is not None and new != old
    assert all(c._coord.coordinator == new for c in group)
    # nothing read twice: the new coordinator loaded the offsets from __consumer_offsets
    assert sorted(v for vs in got.values() for v in vs) == sorted(f"v{i}".encode() for i in range(20, 30))
    assert stable(group)


def test_commit_while_joining(cluster: Cluster) -> None:
    """Before the first join completes there is nothing consumed: commit_sync() returns at once (as Java's
    does); explicit offsets need a generation and raise REBALANCE_IN_PROGRESS."""
    from kafkalite.errors import RebalanceInProgressError

    cluster.create_topic("t", partitions=1, replication_factor=3)
    c = consumer(cluster, "early")
    c.subscribe(["t"])
    c.poll(0)  # starts finding the coordinator and joining; nothing is assigned yet
    assert c.generation_id == -1 and c.assignment() == set()
    c.commit_sync()  # nothing consumed: no error, no request
    with pytest.raises(RebalanceInProgressError):
        c.commit_sync({TopicPartition("t", 0): 3})
    assert cluster.group_offsets("g") == {}


def test_pattern_subscription_leaves_out_internal_topics_only(cluster: Cluster) -> None:
    # exclude.internal.topics (default true) drops topics the brokers mark internal, not every "__" name.
    cluster.create_topic("__audit", partitions=1, replication_factor=3)
    cluster.create_topic("orders", partitions=1, replication_factor=3)
    assert cluster.coordinator("g") is not None  # __consumer_offsets exists from here on
    c = consumer(cluster, "a", "g")
    c.subscribe(pattern=r".*")
    poll_all([c], 20)
    assert c.subscription() == {"__audit", "orders"}


def test_delete_groups_removes_an_empty_group_and_its_offsets_for_good(cluster: Cluster) -> None:
    from kafkalite.errors import GroupIdNotFoundError, InvalidGroupIdError, NonEmptyGroupError
    from kafkalite.protocol import DeleteGroupsRequest

    cluster.create_topic("t", partitions=2, replication_factor=3)
    produce(cluster, "t", 10, 2)
    c = consumer(cluster, "c0")
    c.subscribe(["t"])
    assert sum(len(v) for v in poll_all([c], 30).values()) == 10
    c.commit_sync()
    with pytest.raises(NonEmptyGroupError):
        cluster.delete_group("g")  # a member is still in it
    c.close()
    assert cluster.run_until(lambda: cluster.describe_group("g").group_state == "Empty", 10_000)
    assert cluster.group_offsets("g") == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 5}
    cluster.delete_group("g")
    assert cluster.group_offsets("g") == {}
    assert cluster.describe_group("g").group_state == "Dead"
    with pytest.raises(GroupIdNotFoundError):
        cluster.delete_group("g")
    resp = cluster.request(cluster.coordinator("g"), DeleteGroupsRequest(groups=("",)))
    assert resp.results[0].error_code == InvalidGroupIdError.code
    # The tombstones are in __consumer_offsets: a new coordinator loads nothing for the group.
    cluster.crash(cluster.coordinator("g"))
    cluster.run_for(10_000)
    assert cluster.group_offsets("g") == {}
    assert "g" not in {g.group_id for g in cluster.list_groups()}
