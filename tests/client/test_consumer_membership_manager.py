"""kafkalite's own consumer under ``group.protocol=consumer`` (KIP-848) against a simulated cluster:
ConsumerGroupHeartbeat membership, incremental reconciliation (revoke, commit, then acknowledge before the
partitions move), fencing and rejoin with epoch 0, leaving with -1 / -2, ``group.remote.assignor``."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.client.consumer import Consumer, ConsumerRebalanceListener
from kafkalite.client.consumer_coordinator import ConsumerCoordinator
from kafkalite.client.consumer_membership_manager import ConsumerMembershipManager, MemberState
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.errors import InvalidConfigError, UnsupportedAssignorError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tests.group_helpers import produce

FAST = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def cluster(make_cluster) -> Cluster:
    c = make_cluster(3, seed=11, config=FAST)
    c.create_topic("t", partitions=6, replication_factor=1)
    return c


class Recorder(ConsumerRebalanceListener):
    """Every callback, with the virtual time it ran at."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.calls: list[tuple[int, str, set[TopicPartition]]] = []

    def _add(self, kind: str, partitions: set) -> None:
        self.calls.append((self.cluster.net._now, kind, set(partitions)))

    def on_partitions_revoked(self, partitions: set) -> None:
        self._add("revoked", partitions)

    def on_partitions_assigned(self, partitions: set) -> None:
        self._add("assigned", partitions)

    def on_partitions_lost(self, partitions: set) -> None:
        self._add("lost", partitions)


def member(cluster: Cluster, name: str, listener: Any = None, **cfg: Any) -> Consumer:
    props = {"group.id": "g", "group.protocol": "consumer", "auto.offset.reset": "earliest", **cfg}
    c = cluster.consumer(name, config=props)
    c.subscribe(["t"], listener=listener)
    return c


def poll_all(consumers: list[Consumer], rounds: int, seen: list | None = None, ms: int = 200) -> list:
    seen = [] if seen is None else seen
    for _ in range(rounds):
        for c in consumers:
            for tp, recs in c.poll(ms).items():
                seen += [(tp, r.offset) for r in recs]
    return seen


def stable(consumers: list[Consumer]) -> bool:
    return all(c._coord.state is MemberState.STABLE for c in consumers)


def group(cluster: Cluster):
    coord = cluster.brokers[cluster.coordinator("g")].group_coordinator
    return coord.consumer.groups["g"]


def test_group_protocol_config_picks_the_membership(cluster: Cluster) -> None:
    assert ConsumerConfig.from_props({"group.id": "g"}).group_protocol == "classic"  # Kafka's default
    assert (
        ConsumerConfig.from_props({"group.id": "g", "group.protocol": "CONSUMER"}).group_protocol
        == "consumer"
    )
    with pytest.raises(
        InvalidConfigError, match="group.remote.assignor cannot be set when group.protocol=classic"
    ):
        ConsumerConfig.from_props({"group.id": "g", "group.remote.assignor": "range"})
    with pytest.raises(InvalidConfigError, match="group.protocol"):
        ConsumerConfig.from_props({"group.id": "g", "group.protocol": "eager"})
    classic = cluster.consumer("x", config={"group.id": "g"})
    new = cluster.consumer("y", config={"group.id": "g", "group.protocol": "consumer"})
    assert type(classic._coord) is ConsumerCoordinator
    assert isinstance(new._coord, ConsumerMembershipManager)


def test_one_member_gets_every_partition_by_heartbeat(cluster: Cluster) -> None:
    produce(cluster, "t", 60, 6)
    a = member(cluster, "a")
    seen = poll_all([a], 10)
    assert sorted(seen) == sorted({(TopicPartition("t", i % 6), i // 6) for i in range(60)})
    assert a._coord.member_epoch == 1 and a.generation_id == 1 and a.member_id
    assert stable([a])
    # The classic protocol's requests never went out: no JoinGroup, only heartbeats.
    assert not cluster.events("consumer_joined", node="a")
    assert cluster.events("consumer_group_join")


def test_a_new_member_gets_partitions_only_after_the_old_owner_revoked_them(cluster: Cluster) -> None:
    produce(cluster, "t", 120, 6)
    ra, rb = Recorder(cluster), Recorder(cluster)
    a = member(cluster, "a", ra)
    seen = poll_all([a], 3)
    b = member(cluster, "b", rb)
    poll_all([a, b], 40, seen)
    produce(cluster, "t", 120, 6, start=120)
    poll_all([a, b], 20, seen)
    assert stable([a, b])
    assert a.assignment() | b.assignment() == {TopicPartition("t", p) for p in range(6)}
    assert len(a.assignment()) == len(b.assignment()) == 3
    # Auto-commit before the revocation: b starts where a stopped, so every record is read exactly once.
    assert len(seen) == 240 and len(set(seen)) == 240
    revoked = [(t, ps) for t, kind, ps in ra.calls if kind == "revoked"]
    assert revoked and revoked[0][1] == b.assignment(), ra.calls
    b_added = [(t, ps) for t, kind, ps in rb.calls if kind == "assigned" and ps]
    assert b_added and b_added[0][1] == b.assignment()
    assert revoked[0][0] <= b_added[0][0], "b took partitions before a revoked them"
    # a only ever revoked what moved: the other three stayed with it throughout.
    assert [kind for _, kind, _ in ra.calls] == ["assigned", "revoked", "assigned"]


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_0(cluster: Cluster) -> None:
    rec = Recorder(cluster)
    a = member(cluster, "a", rec)
    poll_all([a], 5)
    old_id = a.member_id
    proto = cluster.brokers[cluster.coordinator("g")].group_coordinator.consumer
    proto.fence_member(group(cluster), old_id, "test")  # as a session expiry would
    poll_all([a], 40)  # the next heartbeat is answered UNKNOWN_MEMBER_ID
    assert [kind for _, kind, _ in rec.calls][:3] == ["assigned", "lost", "assigned"], rec.calls
    assert rec.calls[1][2] == {TopicPartition("t", p) for p in range(6)}
    assert a.member_id == old_id and stable([a]) and a._coord.member_epoch > 1
    assert a.assignment() == {TopicPartition("t", p) for p in range(6)}
    assert cluster.events("consumer_fenced", node="a")


def test_close_leaves_with_epoch_minus_1_and_the_partitions_move_at_once(cluster: Cluster) -> None:
    a = member(cluster, "a")
    b = member(cluster, "b")
    poll_all([a, b], 40)
    assert stable([a, b]) and len(group(cluster).members) == 2
    a.close()
    assert len(group(cluster).members) == 1  # gone at once, not after a session timeout
    poll_all([b], 40)
    assert b.assignment() == {TopicPartition("t", p) for p in range(6)}


def test_a_static_member_leaves_with_minus_2_and_gets_its_partitions_back(cluster: Cluster) -> None:
    a = member(cluster, "a", **{"group.instance.id": "ia"})
    b = member(cluster, "b", **{"group.instance.id": "ib"})
    poll_all([a, b], 40)
    mine = a.assignment()
    assert len(mine) == 3
    epoch = group(cluster).group_epoch
    a.close()
    g = group(cluster)
    assert len(g.members) == 2 and g.members[g.static_members["ia"]].member_epoch == -2
    a2 = member(cluster, "a2", **{"group.instance.id": "ia"})
    poll_all([a2, b], 30)
    assert a2.assignment() == mine and stable([a2, b])
    assert group(cluster).group_epoch == epoch, "a static rejoin must not cause a reassignment"


def test_group_remote_assignor_picks_the_brokers_assignor(cluster: Cluster) -> None:
    a = member(cluster, "a", **{"group.remote.assignor": "range"})
    poll_all([a], 5)
    targets = cluster.events("consumer_group_target")
    assert targets and targets[-1].fields["assignor"] == "range"


def test_an_unknown_remote_assignor_is_fatal(cluster: Cluster) -> None:
    a = member(cluster, "a", **{"group.remote.assignor": "nope"})
    with pytest.raises(UnsupportedAssignorError):
        poll_all([a], 5)


def test_heartbeats_carry_only_what_changed(cluster: Cluster) -> None:
    a = member(cluster, "a")
    poll_all([a], 5)
    req, _ = a._coord._request()
    assert isinstance(req, ConsumerGroupHeartbeatRequest)
    assert req.member_epoch == 1 and req.subscribed_topic_names is None and req.topic_partitions is None
    assert req.rebalance_timeout_ms == -1


def test_a_subscription_pattern_is_resolved_by_the_broker(cluster: Cluster) -> None:
    from kafkalite.client.consumer import SubscriptionPattern

    for name in ("logs-a", "logs-b", "other"):
        cluster.create_topic(name, partitions=2, replication_factor=1)
    c = cluster.consumer("r", config={"group.id": "g", "group.protocol": "consumer"})
    c.subscribe(pattern=SubscriptionPattern("logs-.*"))
    poll_all([c], 10)
    assert c.assignment() == {TopicPartition(t, p) for t in ("logs-a", "logs-b") for p in range(2)}
    member_ = next(iter(group(cluster).members.values()))
    assert member_.subscribed_topic_regex == "logs-.*" and not member_.subscribed_topic_names
    cluster.create_topic("logs-c", partitions=1, replication_factor=1)
    poll_all([c], 60)  # the next heartbeat sees the new topic; the member names it from fresh metadata
    assert TopicPartition("logs-c", 0) in c.assignment()
    classic = cluster.consumer("k", config={"group.id": "k"})
    with pytest.raises(ValueError, match="group.protocol=consumer"):
        classic.subscribe(pattern=SubscriptionPattern("logs-.*"))


def test_the_brokers_group_consumer_assignors_pick_the_default(make_cluster) -> None:
    c = make_cluster(1, seed=2, config={**FAST, "offsets.topic.replication.factor": 1,
                                        "group.consumer.assignors": "range,uniform"})  # fmt: skip
    c.create_topic("t", partitions=4, replication_factor=1)
    a = member(c, "a")
    poll_all([a], 5)
    assert c.events("consumer_group_target")[-1].fields["assignor"] == "range"
    with pytest.raises(InvalidConfigError, match="group.consumer.assignors"):
        make_cluster(1, config={"group.consumer.assignors": "sticky"})


def test_a_static_members_partitions_wait_for_it_until_its_session_expires(cluster: Cluster) -> None:
    a = member(cluster, "a", **{"group.instance.id": "ia"})
    b = member(cluster, "b", **{"group.instance.id": "ib"})
    poll_all([a, b], 40)
    a.close()
    poll_all([b], 150)  # 30 s: within group.consumer.session.timeout.ms (45 s), nobody takes a's share
    assert len(b.assignment()) == 3
    poll_all([b], 125)  # past it: a is fenced and b gets everything
    assert b.assignment() == {TopicPartition("t", p) for p in range(6)}
    assert "ia" not in group(cluster).static_members


def test_the_member_heartbeats_at_the_interval_the_broker_gives(make_cluster) -> None:
    c = make_cluster(1, seed=2, config={**FAST, "offsets.topic.replication.factor": 1,
                                        "group.consumer.heartbeat.interval.ms": 400})  # fmt: skip
    c.create_topic("t", partitions=2, replication_factor=1)
    a = member(c, "a")
    assert a._coord.heartbeat_interval_ms == 5_000  # until the broker says otherwise
    a.poll(0)
    c.run_until(lambda: a._coord.member_epoch > 0, 5_000)
    assert a._coord.heartbeat_interval_ms == 400 and a.metrics["heartbeat-total"] == 1
    c.run_for(450)  # the second heartbeat is due 400 ms after the join's answer, not 5 s after the join
    assert a.metrics["heartbeat-total"] == 2
    poll_all([a], 20)  # 4 s: one heartbeat per 400 ms
    assert 11 <= a.metrics["heartbeat-total"] <= 13


def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll(cluster: Cluster) -> None:
    rec = Recorder(cluster)
    a = member(cluster, "a", rec, **{"max.poll.interval.ms": 5_000})
    b = member(cluster, "b", **{"max.poll.interval.ms": 60_000})
    poll_all([a, b], 40)
    assert len(a.assignment()) == 3
    poll_all([b], 50)  # 10 s without a's application polling: a leaves (epoch -1), b takes everything
    assert cluster.events("consumer_poll_timeout", node="a")
    assert b.assignment() == {TopicPartition("t", p) for p in range(6)}
    poll_all([a, b], 40)  # a's next poll reports its partitions lost, and it rejoins
    assert "lost" in [kind for _, kind, _ in rec.calls]
    assert len(a.assignment()) == len(b.assignment()) == 3 and stable([a, b])


def test_group_id_not_found_to_a_member_with_an_epoch_is_fatal(cluster: Cluster) -> None:
    """As Kafka's consumer: the member goes FATAL (its partitions lost, its error raised by the next poll)
    and sends nothing more to the group, neither heartbeat nor rejoin nor leave."""
    from kafkalite.errors import GroupIdNotFoundError

    rec = Recorder(cluster)
    a = member(cluster, "a", listener=rec)
    cluster.run_until(lambda: (poll_all([a], 1), stable([a]) and a.assignment())[1], 30_000)
    owned = set(a.assignment())
    assert len(owned) == 6 and a._coord.member_epoch > 0
    coordinator = cluster.brokers[cluster.coordinator("g")].group_coordinator
    coordinator.consumer.unload_group("g")  # the coordinator no longer has the group
    with pytest.raises(GroupIdNotFoundError):
        poll_all([a], 30)
    assert a._coord.state is MemberState.FATAL
    assert rec.calls[-1][1:] == ("lost", owned) and a.assignment() == set()
    beats = a.metrics["heartbeat-total"]
    poll_all([a], 30)  # the error is raised once; the member stays out of the group
    a.close()
    assert a._coord.state is MemberState.FATAL
    assert "g" not in coordinator.consumer.groups, "the fatal member did not rejoin"
    assert a.metrics["heartbeat-total"] == beats, "nor heartbeat"
    assert not cluster.events("consumer_left"), "nor leave"
