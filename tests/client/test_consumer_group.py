"""Consumer groups from the client side, against a GroupCoordinator hosted on a small test node.

The data path (metadata, fetch, ListOffsets) is a real simulated Cluster; FindCoordinator is pointed at
node 100, which wraps ``kafkalite.broker.group.coordinator.GroupCoordinator`` directly, so these tests do not
depend on the brokers' group routing (tests/broker/test_consumer_group_cluster.py covers that)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.client.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    IllegalStateError,
    OffsetAndMetadata,
)
from kafkalite.client.consumer_coordinator import ConsumerCoordinator
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.errors import InvalidConfigError, InvalidGroupIdError
from kafkalite.host.cluster import Cluster
from kafkalite.net.sim import BaseNode
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.group import (
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.group_helpers import group_consumer, produce

COORD = 100
G = "g"


class CoordinatorNode(BaseNode):
    """A node that only coordinates groups: FindCoordinator answers itself."""

    def __init__(self, config: dict | None = None) -> None:
        self.config = config

    def bind(self, net: Any, node_id: Any) -> None:
        super().bind(net, node_id)
        self.gc = GroupCoordinator(
            net.clock,
            lambda d, cb: net.set_timer(node_id, d, cb),
            net.cancel_timer,
            lambda ev, **f: self.log(ev, **f),
            self.config,
        )

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        req = msg.request

        def reply(resp: Any) -> None:
            if self.net.is_up(src):
                self.send(src, msg.reply(resp))

        gc = self.gc
        if isinstance(req, FindCoordinatorRequest):
            reply(FindCoordinatorResponse(node_id=self.node_id, host="coordinator", port=9092))
        elif isinstance(req, JoinGroupRequest):
            gc.handle_join_group(req, reply, client_id=msg.client_id, client_host=str(src))
        else:
            handler = {
                SyncGroupRequest: gc.handle_sync_group,
                HeartbeatRequest: gc.handle_heartbeat,
                LeaveGroupRequest: gc.handle_leave_group,
                OffsetCommitRequest: gc.handle_offset_commit,
                OffsetFetchRequest: gc.handle_offset_fetch,
                DescribeGroupsRequest: gc.handle_describe_groups,
                ListGroupsRequest: gc.handle_list_groups,
            }[type(req)]
            handler(req, reply)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch):
    c = Cluster(brokers=3, seed=11, config={"zookeeper.session.timeout.ms": 6000})
    c.gc_node = c.net.add_node(COORD, CoordinatorNode({"group.initial.rebalance.delay.ms": 0}))
    monkeypatch.setattr(ConsumerCoordinator, "_find_target", lambda self, now: COORD)
    yield c
    c.close()


def poll_round(consumers: list[Consumer], ms: int = 200) -> dict[str, list]:
    got: dict[str, list] = {}
    for c in consumers:
        for tp, recs in c.poll(ms).items():
            got.setdefault(c.client_id, []).extend((tp, r.offset) for r in recs)
    return got


def settle(consumers: list[Consumer], rounds: int = 40, ms: int = 200) -> list:
    """Poll every consumer in turn until the group is stable with every member assigned."""
    seen: list = []
    for _ in range(rounds):
        for recs in poll_round(consumers, ms).values():
            seen.extend(recs)
        gens = {c.generation_id for c in consumers}
        quiet = all(
            not c._coord.rejoin_needed and c._coord._pending_assignment is None and not c._coord._prepared
            for c in consumers
        )
        if len(gens) == 1 and -1 not in gens and quiet:
            return seen
    raise AssertionError(f"group did not settle: {[(c.client_id, c.generation_id) for c in consumers]}")


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set]] = []

    def on_partitions_revoked(self, partitions: set) -> None:
        self.calls.append(("revoked", set(partitions)))

    def on_partitions_assigned(self, partitions: set) -> None:
        self.calls.append(("assigned", set(partitions)))

    def on_partitions_lost(self, partitions: set) -> None:
        self.calls.append(("lost", set(partitions)))

    def count(self, kind: str) -> int:
        return sum(len(p) for k, p in self.calls if k == kind)


def assert_partitioned(consumers: list[Consumer], n: int, topic: str = "t") -> None:
    owned = [tp for c in consumers for tp in c.assignment()]
    assert sorted(owned) == [TopicPartition(topic, p) for p in range(n)]


# --------------------------------------------------------------------------------------- config


def test_group_config_defaults_and_errors() -> None:
    cfg = ConsumerConfig.from_props({"group.id": "x"})
    assert (cfg.enable_auto_commit, cfg.auto_commit_interval_ms) == (True, 5000)
    assert (cfg.session_timeout_ms, cfg.heartbeat_interval_ms, cfg.max_poll_interval_ms) == (
        45_000,
        3000,
        300_000,
    )
    assert [a.name for a in cfg.assignors] == ["range", "cooperative-sticky"]
    assert ConsumerConfig.from_props({}).enable_auto_commit is False  # no group: nothing to commit to
    cls = ConsumerConfig.from_props(
        {
            "group.id": "x",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        }
    )
    assert [a.name for a in cls.assignors] == ["roundrobin"]
    with pytest.raises(InvalidConfigError, match="unknown assignor 'fancy'"):
        ConsumerConfig.from_props({"group.id": "x", "partition.assignment.strategy": ["fancy"]})
    with pytest.raises(InvalidConfigError, match="heartbeat.interval.ms"):
        ConsumerConfig.from_props({"group.id": "x", "session.timeout.ms": 3000})
    with pytest.raises(InvalidConfigError, match="enable.auto.commit"):
        ConsumerConfig.from_props({"enable.auto.commit": True})


def test_subscribe_needs_group_id_and_excludes_assign(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    plain = cluster.consumer("plain")
    with pytest.raises(InvalidGroupIdError):
        plain.subscribe(["t"])
    with pytest.raises(InvalidGroupIdError):
        plain.commit_sync({TopicPartition("t", 0): 1})
    c = group_consumer(cluster, "c1")
    c.subscribe(["t"])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        c.assign([TopicPartition("t", 0)])
    with pytest.raises(ValueError, match="either topics or pattern"):
        c.subscribe(["t"], pattern="t.*")
    assert c.subscription() == {"t"}


# --------------------------------------------------------------------------------------- groups


def test_group_shares_partitions_and_reads_everything_once(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=6, replication_factor=1)
    produce(cluster, "t", 120, 6)
    # Auto-commit commits before every rebalance: what one member returned is not read again by another.
    consumers = [group_consumer(cluster, f"c{i}") for i in range(3)]
    for c in consumers:
        c.subscribe(["t"])
    seen = settle(consumers)
    assert_partitioned(consumers, 6)
    assert all(len(c.assignment()) == 2 for c in consumers)
    for _ in range(10):
        for recs in poll_round(consumers).values():
            seen.extend(recs)
    assert len(seen) == 120 and len(set(seen)) == 120
    gen = consumers[0].generation_id
    assert gen >= 1 and all(c.generation_id == gen for c in consumers)
    assert len({c.member_id for c in consumers}) == 3
    joined = cluster.events("consumer_assigned")
    assert {e.node for e in joined} == {"c0", "c1", "c2"}


def test_committed_offsets_are_the_start_position(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    produce(cluster, "t", 20, 2)
    a = group_consumer(cluster, "a", enable_auto_commit=False)
    a.subscribe(["t"])
    got = settle([a])
    for _ in range(40):
        got += [(tp, r.offset) for tp, rs in a.poll(500).items() for r in rs]
    assert len(got) == 20
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    a.commit_sync({tp0: 4, tp1: OffsetAndMetadata(7, "half-way")})
    assert a.committed([tp0, tp1, TopicPartition("t", 9)]) == {
        tp0: OffsetAndMetadata(4, ""),
        tp1: OffsetAndMetadata(7, "half-way"),
        TopicPartition("t", 9): None,
    }
    a.close()
    b = group_consumer(cluster, "b", enable_auto_commit=False)
    b.subscribe(["t"])
    seen = settle([b])
    for _ in range(5):
        seen += [(tp, r.offset) for tp, rs in b.poll(300).items() for r in rs]
    firsts = {tp: min(o for t, o in seen if t == tp) for tp in (tp0, tp1)}
    assert len(seen) == (10 - 4) + (10 - 7)
    assert firsts == {tp0: 4, tp1: 7}


def test_auto_commit_commits_what_poll_returned(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, "t", 10, 1)
    c = group_consumer(cluster, "c", auto_commit_interval_ms=1000)
    c.subscribe(["t"])
    got = []
    for _ in range(20):
        got += [r for rs in c.poll(300).values() for r in rs]
    assert len(got) == 10
    tp = TopicPartition("t", 0)
    assert cluster.gc_node.gc.offsets[G][tp].offset == 10
    assert cluster.events("consumer_commit", node="c")
    produce(cluster, "t", 5, 1)
    got = [r for _ in range(5) for rs in c.poll(300).values() for r in rs]
    assert len(got) == 5
    c.close()  # close commits too
    assert cluster.gc_node.gc.offsets[G][tp].offset == 15


@pytest.mark.parametrize(
    ("strategy", "revoked_when_third_joins"),
    [("range", 6), ("cooperative-sticky", 2)],
)
def test_eager_revokes_everything_cooperative_only_what_moves(
    cluster: Cluster, strategy: str, revoked_when_third_joins: int
) -> None:
    cluster.create_topic("t", partitions=6, replication_factor=1)
    listeners = [Recorder() for _ in range(3)]
    consumers = [group_consumer(cluster, f"c{i}", partition_assignment_strategy=[strategy]) for i in range(3)]
    for c, lst in zip(consumers[:2], listeners, strict=False):
        c.subscribe(["t"], listener=lst)
    settle(consumers[:2])
    assert_partitioned(consumers[:2], 6)
    before = sum(lst.count("revoked") for lst in listeners)
    gen_before = consumers[0].generation_id
    consumers[2].subscribe(["t"], listener=listeners[2])
    settle(consumers)
    assert_partitioned(consumers, 6)
    assert all(len(c.assignment()) == 2 for c in consumers)
    revoked = sum(lst.count("revoked") for lst in listeners) - before
    assert revoked == revoked_when_third_joins
    if strategy == "cooperative-sticky":
        assert consumers[0]._coord.protocol.value == "COOPERATIVE"
        # two rebalances: one to revoke, one to hand the revoked partitions to the newcomer
        assert consumers[0].generation_id == gen_before + 2
        assert listeners[2].count("assigned") == 2
    else:
        assert consumers[0].generation_id == gen_before + 1


def test_session_timeout_moves_partitions_and_fences_commit(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    produce(cluster, "t", 10, 2)
    lst = Recorder()
    a = group_consumer(cluster, "a", enable_auto_commit=False)
    b = group_consumer(cluster, "b", enable_auto_commit=False)
    a.subscribe(["t"], listener=lst)
    b.subscribe(["t"])
    settle([a, b])
    old_gen = a.generation_id
    poll_round([a, b])
    cluster.pause("a")  # a GC pause longer than session.timeout.ms (10 s)
    for _ in range(80):
        b.poll(200)
        if len(b.assignment()) == 2:
            break
    assert len(b.assignment()) == 2 and b.generation_id > old_gen
    assert cluster.events("group_member_expired", node=COORD)
    cluster.resume("a")
    with pytest.raises(CommitFailedError):
        a.commit_sync()
    assert a.generation_id == -1
    a.poll(100)  # the next poll reports the partitions lost and rejoins
    assert lst.calls[-1][0] == "lost" and lst.calls[-1][1] == {TopicPartition("t", 0)}
    settle([a, b])
    assert_partitioned([a, b], 2)


def test_max_poll_interval_leaves_group(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    a = group_consumer(cluster, "a", max_poll_interval_ms=8000)
    b = group_consumer(cluster, "b", max_poll_interval_ms=8000)
    a.subscribe(["t"])
    b.subscribe(["t"])
    settle([a, b])
    for _ in range(60):  # only b polls: a still heartbeats, but stops polling
        b.poll(250)
    assert cluster.events("consumer_poll_timeout", node="a")
    assert cluster.events("consumer_left", node="a")
    assert len(b.assignment()) == 2
    assert a.generation_id == -1
    settle([a, b])
    assert_partitioned([a, b], 2)


def test_one_partition_four_consumers_one_takes_over_on_crash(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    produce(cluster, "t", 10, 1)
    consumers = [group_consumer(cluster, f"c{i}", auto_commit_interval_ms=500) for i in range(4)]
    for c in consumers:
        c.subscribe(["t"])
    seen = settle(consumers)
    owners = [c for c in consumers if c.assignment()]
    assert len(owners) == 1
    for _ in range(5):
        for recs in poll_round(consumers).values():
            seen.extend(recs)
    assert len(seen) == 10
    worker = owners[0]
    cluster.net.crash(worker.client_id)
    rest = [c for c in consumers if c is not worker]
    produce(cluster, "t", 5, 1)
    got: list = []
    for _ in range(100):
        for recs in poll_round(rest).values():
            got.extend(recs)
        if len(got) >= 5:
            break
    new_owners = [c for c in rest if c.assignment()]
    assert len(new_owners) == 1
    assert sorted(off for _tp, off in got) == list(range(10, 15))  # resumed at the committed offset


def _static_restart(cluster: Cluster) -> tuple[int, Consumer]:
    cluster.create_topic("t", partitions=4, replication_factor=1)
    a = group_consumer(cluster, "a1", group_instance_id="inst-a")
    b = group_consumer(cluster, "b", group_instance_id="inst-b")
    a.subscribe(["t"])
    b.subscribe(["t"])
    settle([a, b])
    gen = b.generation_id
    mine = a.assignment()
    a.close()  # static: no LeaveGroup
    assert not cluster.events("consumer_left", node="a1")
    a2 = group_consumer(cluster, "a2", group_instance_id="inst-a")
    a2.subscribe(["t"])
    settle([a2, b])
    assert a2.assignment() == mine  # the instance id kept its partitions
    assert not cluster.events("group_member_expired", node=COORD)
    return gen, b


def test_static_member_restart_keeps_its_partitions(cluster: Cluster) -> None:
    _static_restart(cluster)


def test_static_member_restart_causes_no_rebalance(cluster: Cluster) -> None:
    gen, b = _static_restart(cluster)
    assert b.generation_id == gen  # nobody rebalanced
    assert len(cluster.events("consumer_rebalance", node="b")) == 1  # only b's first join


def test_pattern_subscription_picks_up_new_topics(cluster: Cluster) -> None:
    cluster.create_topic("orders-eu", partitions=1, replication_factor=1)
    cluster.create_topic("payments", partitions=1, replication_factor=1)
    c = group_consumer(cluster, "c", metadata_max_age_ms=1000)
    c.subscribe(pattern=r"orders-.*")
    settle([c])
    assert c.subscription() == {"orders-eu"}
    assert c.assignment() == {TopicPartition("orders-eu", 0)}
    cluster.create_topic("orders-us", partitions=1, replication_factor=1)
    for _ in range(20):
        c.poll(300)
        if len(c.assignment()) == 2:
            break
    assert c.assignment() == {TopicPartition("orders-eu", 0), TopicPartition("orders-us", 0)}


def test_unsubscribe_leaves_and_others_take_over(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2, replication_factor=1)
    lst = Recorder()
    a = group_consumer(cluster, "a")
    b = group_consumer(cluster, "b")
    a.subscribe(["t"], listener=lst)
    b.subscribe(["t"])
    settle([a, b])
    a.unsubscribe()
    assert lst.calls[-1][0] == "revoked"
    assert a.assignment() == set() and a.subscription() == set()
    for _ in range(20):
        b.poll(200)
        if len(b.assignment()) == 2:
            break
    assert len(b.assignment()) == 2
    with pytest.raises(IllegalStateError):
        a.poll(0)


def test_commit_async_callback_runs_in_poll(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    c = group_consumer(cluster, "c", enable_auto_commit=False)
    c.subscribe(["t"])
    settle([c])
    done: list = []
    tp = TopicPartition("t", 0)
    c.commit_async({tp: 3}, lambda offsets, err: done.append((offsets, err)))
    assert done == []
    c.poll(200)
    assert done == [({tp: OffsetAndMetadata(3)}, None)]
    assert c.committed([tp])[tp].offset == 3


def test_enforce_rebalance_and_group_metadata(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=1, replication_factor=1)
    c = group_consumer(cluster, "c")
    c.subscribe(["t"])
    settle([c])
    gm = c.group_metadata()
    assert (gm.group_id, gm.generation_id, gm.member_id) == (G, c.generation_id, c.member_id)
    gen = c.generation_id
    c.enforce_rebalance("test")
    settle([c])
    assert c.generation_id == gen + 1
