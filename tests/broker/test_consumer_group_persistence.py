"""KIP-848 consumer groups survive a coordinator failover: every change is written to the group's
``__consumer_offsets`` partition as Kafka's consumer group records (epoch, subscription metadata, member
subscriptions, target assignment, current assignments; tombstones for what goes), and the broker that
takes over the partition rebuilds the groups from them, so members keep their epochs and partitions."""

from __future__ import annotations

import pytest

from kafkalite.client.consumer import Consumer, ConsumerRebalanceListener
from kafkalite.client.consumer_membership_manager import MemberState
from kafkalite.errors import NonEmptyGroupError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from tests.group_helpers import produce

CONFIG = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: set) -> None:
        self.calls.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions: set) -> None:
        self.calls.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions: set) -> None:
        self.calls.append(("lost", frozenset(partitions)))


def poll_all(consumers: list[Consumer], rounds: int, seen: list, ms: int = 200) -> list:
    for _ in range(rounds):
        for c in consumers:
            for tp, recs in c.poll(ms).items():
                seen += [(tp, r.offset) for r in recs]
    return seen


def test_members_keep_their_epochs_and_partitions_across_a_coordinator_failover(make_cluster) -> None:
    cluster: Cluster = make_cluster(3, seed=7, config=CONFIG)
    cluster.create_topic("t", partitions=6, replication_factor=3)
    produce(cluster, "t", 60, 6, acks="all")
    listeners = {n: Recorder() for n in "abc"}
    members = []
    for n in "abc":
        c = cluster.consumer(n, config={"group.id": "g", "group.protocol": "consumer",
                                        "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe(["t"], listener=listeners[n])
        members.append(c)
    seen = poll_all(members, 40, [])
    assert all(c._coord.state is MemberState.STABLE for c in members)
    assert sorted(seen) == sorted({(TopicPartition("t", i % 6), i // 6) for i in range(60)})
    before = {c.client_id: (c._coord.member_id, c._coord.member_epoch, c.assignment()) for c in members}
    calls_before = {n: len(r.calls) for n, r in listeners.items()}
    old = cluster.coordinator("g")
    old_group = cluster.brokers[old].group_coordinator.consumer.groups["g"]
    epochs = (old_group.group_epoch, old_group.assignment_epoch)

    cluster.crash(old)
    produce(cluster, "t", 30, 6, start=60, acks="all")
    seen = poll_all(members, 150, [])

    new = cluster.coordinator("g")
    assert new is not None and new != old
    group = cluster.brokers[new].group_coordinator.consumer.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == epochs  # nothing rebalanced
    after = {c.client_id: (c._coord.member_id, c._coord.member_epoch, c.assignment()) for c in members}
    assert after == before
    assert {n: len(r.calls) for n, r in listeners.items()} == calls_before  # no revoke, no loss
    assert all(c._coord.coordinator == new for c in members)
    # every new record read once, by the member that kept its partition
    assert sorted(seen) == sorted({(TopicPartition("t", i % 6), i // 6) for i in range(60, 90)})
    assert not cluster.events("consumer_fenced")


def test_delete_groups_refuses_a_consumer_group_with_members_and_tombstones_an_empty_one(
    make_cluster,
) -> None:
    cluster: Cluster = make_cluster(3, seed=3, config=CONFIG)
    cluster.create_topic("t", partitions=2, replication_factor=3)
    produce(cluster, "t", 10, 2, acks="all")
    c = cluster.consumer("c", config={"group.id": "g", "group.protocol": "consumer",
                                      "auto.offset.reset": "earliest"})  # fmt: skip
    c.subscribe(["t"])
    assert len(poll_all([c], 30, [])) == 10
    c.commit_sync()
    with pytest.raises(NonEmptyGroupError):
        cluster.delete_group("g")  # a member still consumes: neither the group nor its offsets go
    assert cluster.group_offsets("g") == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 5}
    c.close()
    coord = cluster.coordinator("g")
    assert cluster.run_until(
        lambda: not cluster.brokers[coord].group_coordinator.consumer.groups["g"].members, 5_000
    )
    cluster.delete_group("g")
    assert cluster.group_offsets("g") == {}
    assert "g" not in cluster.brokers[coord].group_coordinator.consumer.groups
    # The tombstones are in __consumer_offsets: a new coordinator loads no group "g".
    cluster.crash(coord)
    cluster.run_for(10_000)
    new = cluster.coordinator("g")
    assert new != coord and "g" not in cluster.brokers[new].group_coordinator.consumer.groups
    assert "g" not in {g.group_id for g in cluster.list_groups()}
