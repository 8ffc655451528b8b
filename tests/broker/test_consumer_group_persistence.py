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


def test_a_rolling_upgrade_from_classic_to_consumer_keeps_every_record(make_cluster) -> None:
    """Three classic consumers are replaced one at a time by consumer-protocol ones while records keep
    coming: the first heartbeat converts the live group (no empty moment, offsets kept), the classic members
    go on through JoinGroup/SyncGroup/Heartbeat, and no record is lost."""
    cluster: Cluster = make_cluster(3, seed=9, config=CONFIG)
    cluster.create_topic("t", partitions=6, replication_factor=3)
    sent = 0

    def more(n: int) -> None:
        nonlocal sent
        produce(cluster, "t", n, 6, start=sent, acks="all")
        sent += n

    def member(name: str, protocol: str) -> Consumer:
        c = cluster.consumer(name, config={"group.id": "g", "group.protocol": protocol,
                                           "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe(["t"])
        return c

    more(60)
    members = [member(f"classic{i}", "classic") for i in range(3)]
    seen = poll_all(members, 30, [])
    for i in range(3):
        members[i].close()  # a rolling restart: each instance comes back speaking the consumer protocol
        members[i] = member(f"new{i}", "consumer")
        more(30)
        poll_all(members, 40, seen)
        coord = cluster.brokers[cluster.coordinator("g")].group_coordinator
        assert "g" in coord.consumer.groups  # a consumer group from the first new member on
        assert not coord.groups["g"].members  # (the classic side keeps only the offsets)
    more(30)
    poll_all(members, 40, seen)
    group = cluster.brokers[cluster.coordinator("g")].group_coordinator.consumer.groups["g"]
    assert not any(m.uses_classic_protocol for m in group.members.values())
    assert sorted(tp for c in members for tp in c.assignment()) == [TopicPartition("t", p) for p in range(6)]
    assert set(seen) == {(TopicPartition("t", i % 6), i // 6) for i in range(sent)}  # nothing lost
    [converted] = cluster.events("consumer_group_converted")
    assert converted.fields["to"] == "consumer" and len(converted.fields["members"]) == 2
