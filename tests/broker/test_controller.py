"""Test helpers: brokers with a recording stand-in for the ReplicaManager, on a SimNetwork with ZooKeeper."""

from __future__ import annotations

from typing import Any

from kafkalite.broker.server import KafkaBroker
from kafkalite.coordination import paths
from kafkalite.coordination.zk_node import ZkNode
from kafkalite.net.sim import BaseNode, SimNetwork
from kafkalite.protocol import (
    AlterPartitionItem,
    AlterPartitionRequest,
    LeaderAndIsrResponse,
    PartitionError,
    RequestEnvelope,
    StopReplicaResponse,
    TopicPartition,
)

FAST = {"zookeeper.session.timeout.ms": 6000, "leader.imbalance.check.interval.seconds": 300}


class StubReplicaManager:
    """Records what the controller tells the broker; answers like a ReplicaManager would."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.leader_and_isr: list = []
        self.update_metadata: list = []
        self.stop_replica: list = []
        self.responses: list = []

    def handle_leader_and_isr(self, req):
        self.leader_and_isr.append(req)
        return LeaderAndIsrResponse(
            partition_errors=tuple(PartitionError(tp=s.tp) for s in req.partition_states)
        )

    def handle_update_metadata(self, req) -> None:
        self.update_metadata.append(req)

    def handle_stop_replica(self, req):
        self.stop_replica.append(req)
        return StopReplicaResponse()

    def on_response(self, src, env) -> bool:
        self.responses.append((src, env))
        return True

    def tick(self, now_ms: int) -> None:
        pass

    def crash(self, lose_unflushed: bool) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def states_for(self, tp: TopicPartition) -> list:
        return [s for r in self.leader_and_isr for s in r.partition_states if s.tp == tp]


class Client(BaseNode):
    """An admin client: sends requests, keeps the answers by correlation id."""

    def __init__(self) -> None:
        self.answers: dict[int, Any] = {}
        self.other: list[Any] = []
        self._cid = 0

    def request(self, dst: Any, req: Any) -> int:
        self._cid += 1
        self.send(dst, RequestEnvelope(self._cid, "admin", req))
        return self._cid

    def on_message(self, src, msg, now_ms) -> None:
        if hasattr(msg, "correlation_id"):
            self.answers[msg.correlation_id] = msg.response
        else:
            self.other.append(msg)


class Harness:
    def __init__(
        self, n: int = 3, seed: int = 0, props: dict | None = None, tmp: str = "/nonexistent"
    ) -> None:
        self.net = SimNetwork(seed, log_messages="none")
        self.zk: ZkNode = self.net.add_node("zk", ZkNode(), tick_ms=100)
        self.brokers: dict[int, KafkaBroker] = {}
        for b in range(1, n + 1):
            node = KafkaBroker(
                b, f"{tmp}/b{b}", {**FAST, **(props or {})}, replica_manager_factory=StubReplicaManager
            )
            self.brokers[b] = self.net.add_node(b, node, tick_ms=100)
        self.client: Client = self.net.add_node("admin", Client())
        self.net.run_for(50)

    @property
    def store(self):
        return self.zk.store

    def controller(self) -> KafkaBroker:
        active = [b for b in self.brokers.values() if b.is_controller and self.net.is_up(b.node_id)]
        assert len(active) >= 1
        return max(active, key=lambda b: b.controller.epoch)

    def ask(self, req: Any, dst: Any = None, ms: int = 50) -> Any:
        dst = self.controller().broker_id if dst is None else dst
        cid = self.client.request(dst, req)
        self.net.run_until(lambda: cid in self.client.answers, ms)
        return self.client.answers[cid]

    def state(self, topic: str, p: int) -> tuple[paths.PartitionState, int]:
        data, st = self.store.get(paths.partition_state_path(topic, p))
        return paths.PartitionState.decode(data), st.version

    def assignment(self, topic: str) -> paths.TopicAssignment:
        return paths.TopicAssignment.decode(self.store.get(paths.topic_path(topic))[0])

    def rm(self, b: int) -> StubReplicaManager:
        return self.brokers[b].rm

    def alter_partition(
        self, leader: int, tp: TopicPartition, new_isr, *, leader_epoch=None, partition_epoch=None
    ):
        """Send AlterPartition as the leader would; returns the response its replica manager got."""
        st, version = self.state(*tp)
        item = AlterPartitionItem(
            tp=tp,
            leader_epoch=st.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr=tuple(new_isr),
            partition_epoch=version if partition_epoch is None else partition_epoch,
        )
        b = self.brokers[leader]
        req = AlterPartitionRequest(broker_id=leader, broker_epoch=b.broker_epoch, partitions=(item,))
        rm = self.rm(leader)
        n = len(rm.responses)
        self.net.send(leader, self.controller().broker_id, RequestEnvelope(7, "alter", req))
        self.net.run_until(lambda: len(rm.responses) > n, 50)
        return rm.responses[-1][1].response


# ------------------------------------------------------------------------------------------------ tests

import pytest  # noqa: E402

from kafkalite.coordination.zk_node import ConnectionLossError, ZkLink  # noqa: E402
from kafkalite.errors import (  # noqa: E402
    ElectionNotNeededError,
    FencedLeaderEpochError,
    InvalidReplicationFactorError,
    NotControllerError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
)
from kafkalite.protocol import (  # noqa: E402
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreateTopicsRequest,
    ElectLeadersRequest,
    MetadataRequest,
    Reassignment,
    UpdateMetadataRequest,
)

TP = TopicPartition


def create(h: Harness, name: str = "t", partitions: int = 1, rf: int = 3, configs=()) -> Any:
    req = CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, configs=configs),)
    )
    resp = h.ask(req)
    h.net.run_for(20)
    return resp.topics[0]


def events(h: Harness, kind: str) -> list:
    return [e.fields for e in h.net.events(kind)]


# --- ZooKeeper node and link


def test_zk_link_session_heartbeats_and_expiry_on_cut() -> None:
    h = Harness(n=1)
    link = h.brokers[1].zk
    assert link.alive
    h.net.run_for(20_000)  # pings keep it alive far past the timeout
    assert link.alive
    h.net.cut(1, "zk")
    with pytest.raises(ConnectionLossError):
        link.get("/brokers/ids")
    h.net.run_for(6_200)
    assert not link.alive and h.store.exists(paths.broker_path(1)) is None
    h.net.heal(1, "zk")
    h.net.run_for(3_000)  # next ping is answered "expired": the broker opens a new session, re-registers
    assert link.alive and h.store.exists(paths.broker_path(1)) is not None
    assert events(h, "broker_session_expired") == [{"broker": 1}]


def test_zk_watch_events_are_messages() -> None:
    h = Harness(n=1)
    net = h.net
    link = ZkLink(net, "admin", session_timeout_ms=6000)
    link.connect()
    seen = []
    link.exists("/x", watch=seen.append)
    h.store.create("/x", b"1")
    assert seen == []  # not in-process: the event travels as a message
    msgs = h.client.other
    net.run_for(5)
    assert len(msgs) == 1 and link.on_message(msgs[0]) and seen[0].path == "/x"


# --- election and epochs


def test_single_controller_with_epoch_one() -> None:
    h = Harness()
    active = [b for b in h.brokers.values() if b.is_controller]
    assert len(active) == 1 and active[0].controller.epoch == 1
    assert paths.decode_controller_epoch(h.store.get(paths.CONTROLLER_EPOCH)[0]) == 1
    assert events(h, "controller_elected") == [{"broker": active[0].broker_id, "epoch": 1}]
    assert sorted(h.store.get_children(paths.BROKER_IDS)) == ["1", "2", "3"]


def test_controller_failover_bumps_epoch_and_reloads_state() -> None:
    h = Harness()
    create(h, "t", 2, 3)
    old = h.controller()
    h.net.crash(old.broker_id)
    h.net.run_for(7_000)
    new = h.controller()
    assert new.broker_id != old.broker_id and new.controller.epoch == 2
    assert set(new.controller.ctx.topics["t"]) == {0, 1}
    for p in (0, 1):
        st, _ = h.state("t", p)
        assert old.broker_id not in st.isr and st.leader != old.broker_id


def test_non_controller_answers_not_controller() -> None:
    h = Harness()
    other = next(b for b in h.brokers if not h.brokers[b].is_controller)
    resp = h.ask(
        CreateTopicsRequest(topics=(CreatableTopic(name="x", num_partitions=1, replication_factor=1),)), other
    )
    assert resp.topics[0].error_code == NotControllerError.code


# --- topic creation


def test_create_topic_places_replicas_and_sends_leader_and_isr() -> None:
    h = Harness()
    res = create(h, "orders", 3, 3)
    assert res.error_code == 0 and res.num_partitions == 3 and res.replication_factor == 3
    ta = h.assignment("orders")
    for p in range(3):
        st, version = h.state("orders", p)
        assert st.leader == ta.partitions[p][0] and st.isr == ta.partitions[p] and st.leader_epoch == 0
        assert version == 0
        for b in (1, 2, 3):
            (s,) = h.rm(b).states_for(TP("orders", p))
            assert s.is_new and s.leader == st.leader and s.replicas == ta.partitions[p]
    # Every broker's metadata cache knows the leaders: Metadata answered by any broker.
    md = h.ask(MetadataRequest(topics=("orders",)), 2)
    assert [pm.leader_id for pm in md.topics[0].partitions] == [ta.partitions[p][0] for p in range(3)]
    assert create(h, "orders", 1, 1).error_code == TopicAlreadyExistsError.code


def test_invalid_replication_factor() -> None:
    h = Harness()
    res = create(h, "big", 1, 4)
    assert res.error_code == InvalidReplicationFactorError.code
    # Kafka's text (AdminUtils), which kafka-topics.sh prints after "Error while executing topic command"
    assert res.error_message == "Replication factor: 4 larger than available brokers: 3."
    assert h.store.exists(paths.topic_path("big")) is None


# --- broker failure and leader election


def test_broker_failure_elects_next_isr_replica_in_assignment_order() -> None:
    h = Harness()
    create(h, "t", 1, 3)
    st0, _ = h.state("t", 0)
    replicas = h.assignment("t").partitions[0]
    leader = st0.leader
    h.net.crash(leader)
    h.net.run_for(7_000)
    st, _ = h.state("t", 0)
    assert st.leader == replicas[1] and st.leader_epoch == 1 and st.isr == replicas[1:]
    (ev,) = [e for e in events(h, "leader_elected") if e["reason"] == "broker_failure"]
    assert ev["tp"] == "t-0" and ev["leader"] == replicas[1] and ev["prev_leader"] == leader
    # The surviving replicas were told (LeaderAndIsr) with the new epoch.
    for b in replicas[1:]:
        assert h.rm(b).states_for(TP("t", 0))[-1].leader_epoch == 1


def test_follower_failure_shrinks_isr_and_bumps_epoch() -> None:
    h = Harness()
    create(h, "t", 1, 3)
    replicas = h.assignment("t").partitions[0]
    h.net.crash(replicas[2])
    h.net.run_for(7_000)
    st, _ = h.state("t", 0)
    assert st.leader == replicas[0] and st.isr == replicas[:2] and st.leader_epoch == 1


def _isr_of_one(h: Harness, configs=()) -> tuple[int, int]:
    """Topic with replicas [a, b], ISR shrunk to [a] by the leader."""
    create(h, "u", 1, 2, configs)
    a, b = h.assignment("u").partitions[0]
    resp = h.alter_partition(a, TP("u", 0), (a,))
    assert resp.partitions[0].error_code == 0
    return a, b


def test_no_eligible_leader_goes_offline_keeping_last_isr_member() -> None:
    h = Harness()
    a, b = _isr_of_one(h)
    h.net.crash(a)
    h.net.run_for(7_000)
    st, _ = h.state("u", 0)
    assert st.leader == -1 and st.isr == (a,)
    assert events(h, "partition_offline")[-1]["tp"] == "u-0"
    md = h.ask(MetadataRequest(topics=("u",)), b)
    assert md.topics[0].partitions[0].error_code == 5  # LEADER_NOT_AVAILABLE
    # When the last ISR member returns it leads again (clean election).
    h.net.restart(a)
    h.net.run_for(1_000)
    st, _ = h.state("u", 0)
    assert st.leader == a


def test_unclean_election_when_topic_enables_it() -> None:
    h = Harness()
    a, b = _isr_of_one(h, configs=(("unclean.leader.election.enable", "true"),))
    h.net.crash(a)
    h.net.run_for(7_000)
    st, _ = h.state("u", 0)
    assert st.leader == b and st.isr == (b,)
    assert events(h, "leader_elected")[-1]["election"] == "unclean"


# --- AlterPartition (KIP-497)


def test_alter_partition_validates_epochs() -> None:
    h = Harness()
    create(h, "t", 1, 3)
    a, b, c = h.assignment("t").partitions[0]
    tp = TP("t", 0)
    ok = h.alter_partition(a, tp, (a, b))
    r = ok.partitions[0]
    assert r.error_code == 0 and r.isr == (a, b) and r.leader_epoch == 0 and r.partition_epoch == 1
    assert h.state("t", 0) == (paths.PartitionState(a, 0, (a, b), 1), 1)
    stale = h.alter_partition(a, tp, (a, b, c), partition_epoch=0).partitions[0]
    assert stale.error_code == 95 and stale.isr == (a, b)  # INVALID_UPDATE_VERSION
    fenced = h.alter_partition(a, tp, (a, b, c), leader_epoch=-1).partitions[0]
    assert fenced.error_code == FencedLeaderEpochError.code
    not_leader = h.alter_partition(b, tp, (a, b, c)).partitions[0]
    assert not_leader.error_code == 6
    assert h.state("t", 0)[0].isr == (a, b)
    rejected = [e["error"] for e in events(h, "alter_partition_rejected")]
    assert rejected == ["INVALID_UPDATE_VERSION", "FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"]
    # Every broker's metadata follows the ISR change.
    assert h.rm(c).update_metadata[-1].partition_states[0].isr == (a, b)


# --- zombie controller


def test_zombie_controller_is_fenced_by_brokers() -> None:
    h = Harness()
    create(h, "t", 1, 3)
    zombie = h.controller()
    z = zombie.broker_id
    h.net.cut(z, "zk")
    h.net.run_for(7_000)
    new = max((b for b in h.brokers.values() if b.is_controller), key=lambda b: b.controller.epoch)
    assert new.broker_id != z and new.controller.epoch == 2
    assert zombie.controller.is_active and zombie.controller.epoch == 1  # it does not know yet
    zombie.controller.send_update_metadata()
    h.net.run_for(20)
    fenced = events(h, "stale_request_fenced")
    assert {e["epoch"] for e in fenced} == {1} and {e["current_epoch"] for e in fenced} == {2}
    # The two brokers the new controller talks to refuse; the zombie's own broker, no longer registered,
    # has not heard from the new controller and still obeys it.
    assert sorted(e.node for e in h.net.events("stale_request_fenced")) == sorted(set(h.brokers) - {z})
    codes = {c for _, _, c in zombie.controller.rejections}
    assert codes == {StaleControllerEpochError.code}
    # Its ZooKeeper writes are fenced too: the multi checks /controller_epoch's version.
    h.net.heal(z, "zk")
    h.net.run_for(3_000)
    assert not zombie.controller.is_active
    assert [e["reason"] for e in events(h, "controller_resigned")] == ["zookeeper session expired"]


# --- preferred leaders


def test_auto_rebalance_moves_leadership_back_to_preferred_replica() -> None:
    h = Harness(props={"leader.imbalance.check.interval.seconds": 10})
    create(h, "t", 1, 3)
    replicas = h.assignment("t").partitions[0]
    pref = replicas[0]
    h.net.crash(pref)
    h.net.run_for(7_000)
    h.net.restart(pref)
    h.net.run_for(500)
    st, _ = h.state("t", 0)
    assert st.leader == replicas[1]
    # The restarted broker got LeaderAndIsr as a follower; the leader adds it back to the ISR.
    assert h.rm(pref).states_for(TP("t", 0))[-1].leader == replicas[1]
    h.alter_partition(replicas[1], TP("t", 0), (*st.isr, pref))
    h.net.run_for(11_000)
    st, _ = h.state("t", 0)
    assert st.leader == pref
    imbalance = events(h, "leader_imbalance")
    assert imbalance and imbalance[0]["broker"] == pref and imbalance[0]["ratio"] == 1.0
    assert events(h, "leader_elected")[-1]["reason"] == "auto_leader_rebalance"


def test_elect_leaders_and_admin_znode() -> None:
    h = Harness()
    create(h, "t", 2, 3)
    resp = h.ask(ElectLeadersRequest(election_type=0, partitions=(TP("t", 0),)))
    assert resp.results[0].error_code == ElectionNotNeededError.code
    for p in (0, 1):  # move leadership away by hand, as a failure would
        replicas = h.assignment("t").partitions[p]
        h.net.crash(replicas[0])
        h.net.run_for(7_000)
        h.net.restart(replicas[0])
        h.net.run_for(2_000)
        st, _ = h.state("t", p)
        h.alter_partition(st.leader, TP("t", p), (*st.isr, replicas[0]))
    assert h.state("t", 0)[0].leader != h.assignment("t").partitions[0][0]
    resp = h.ask(ElectLeadersRequest(election_type=0, partitions=(TP("t", 0),)))
    assert resp.results[0].error_code == 0
    assert h.state("t", 0)[0].leader == h.assignment("t").partitions[0][0]
    # The admin znode path (kafka-preferred-replica-election.sh in ZooKeeper days).
    if h.state("t", 1)[0].leader != h.assignment("t").partitions[1][0]:
        h.store.create(paths.PREFERRED_REPLICA_ELECTION, paths.encode_partition_list([("t", 1)]))
        h.net.run_for(50)
        assert h.state("t", 1)[0].leader == h.assignment("t").partitions[1][0]
        assert h.store.exists(paths.PREFERRED_REPLICA_ELECTION) is None


# --- reassignment


def test_reassignment_adds_waits_for_isr_then_removes() -> None:
    h = Harness(n=4)
    create(h, "t", 1, 2)
    old = h.assignment("t").partitions[0]
    target = tuple(b for b in (1, 2, 3, 4) if b not in old)
    resp = h.ask(
        AlterPartitionReassignmentsRequest(reassignments=(Reassignment(tp=TP("t", 0), replicas=target),))
    )
    assert resp.results[0].error_code == 0
    h.net.run_for(20)
    ta = h.assignment("t")
    assert ta.partitions[0] == target + old and ta.adding_replicas[0] == target
    assert ta.removing_replicas[0] == old
    for b in target:  # new replicas start following
        assert h.rm(b).states_for(TP("t", 0))[-1].replicas == target + old
    st, _ = h.state("t", 0)
    assert st.leader == old[0] and st.leader_epoch == 1
    # The leader adds the new replicas to the ISR as they catch up; then the move completes.
    h.alter_partition(old[0], TP("t", 0), (*st.isr, target[0]))
    assert h.assignment("t").adding_replicas  # still waiting for target[1]
    h.alter_partition(old[0], TP("t", 0), (*st.isr, *target))
    h.net.run_for(20)
    ta = h.assignment("t")
    assert ta.partitions[0] == target and not ta.adding_replicas and not ta.removing_replicas
    st, _ = h.state("t", 0)
    assert st.leader == target[0] and st.isr == target
    for b in old:
        (stop,) = h.rm(b).stop_replica
        assert stop.partition_states[0].delete_partition
    assert events(h, "reassignment_completed")[0]["replicas"] == target


# --- determinism


def test_same_seed_same_event_log() -> None:
    def run() -> str:
        h = Harness(seed=7)
        create(h, "t", 3, 3)
        h.net.crash(1)
        h.net.run_for(7_000)
        h.net.restart(1)
        h.net.run_for(1_000)
        return h.net.format_log()

    assert run() == run()


def test_update_metadata_lists_live_brokers() -> None:
    h = Harness()
    create(h, "t", 1, 3)
    h.net.crash(3 if not h.brokers[3].is_controller else 2)
    h.net.run_for(7_000)
    last: UpdateMetadataRequest = h.rm(1).update_metadata[-1]
    assert len(last.live_brokers) == 2


def test_the_first_auto_rebalance_check_runs_5_s_after_failover_then_every_interval() -> None:
    h = Harness(props={"leader.imbalance.check.interval.seconds": 300})
    checks: list[tuple[int, int]] = []
    for b in h.brokers.values():
        ctl = b.controller
        ctl.check_leader_imbalance = lambda c=ctl, bid=b.broker_id: checks.append((bid, h.net.now_ms()))
    first = events(h, "controller_elected")
    h.net.run_for(6_000)
    elected = h.net.events("controller_elected")[0].time_ms
    assert first and checks == [(h.controller().broker_id, elected + 5_000)]
    h.net.run_for(300_000)
    assert [t for _, t in checks] == [elected + 5_000, elected + 305_000]
    old = h.controller().broker_id
    h.net.crash(old)  # failover: the new controller checks 5 s after its election, not 300 s
    h.net.run_for(30_000)
    new = h.controller().broker_id
    took_over = [e.time_ms for e in h.net.events("controller_elected") if e.fields["broker"] == new][-1]
    assert new != old and checks[-1] == (new, took_over + 5_000)
