"""Liveness regressions: after faults heal, the cluster converges (leaders, full ISRs, caught-up replicas).

Small deterministic scenarios for the root causes behind the fault seeds that never converged.
"""

from __future__ import annotations

from kafkalite.broker.partition import Partition
from kafkalite.coordination.store import CoordinationStore
from kafkalite.coordination.zk_node import ZK_NODE_ID, ConnectionLossError, ZkNode
from kafkalite.harness.faults import BROKER_CONFIG
from kafkalite.host.cluster import Cluster
from kafkalite.net.sim import SimNetwork
from kafkalite.protocol import AlterPartitionItem, AlterPartitionRequest, TopicPartition


def _cluster() -> Cluster:
    c = Cluster(brokers=3, seed=0, config=BROKER_CONFIG)
    c.create_topic("t", 1, 3)
    return c


def _new_leader(c: Cluster, old: int) -> int:
    assert c.run_until(lambda: c.leader("t", 0) not in (None, old) and c._partition_ready("t", 0), 10_000)
    return c.leader("t", 0)  # type: ignore[return-value]


def test_follower_drops_epoch_it_led_without_appending_and_rejoins_isr() -> None:
    # Bug (seeds 26, 41, 73, 92, 98, 123, 128): a replica elected leader at epoch E appends nothing, yet
    # its epoch cache gets (E, LEO). It loses leadership to one that never had epoch E and, as a
    # follower, sends last_fetched_epoch=E: the leader answers "diverging at (older epoch, LEO)", the
    # follower truncates to its own LEO -- a no-op that kept the (E, LEO) entry -- and fetches again,
    # forever: never back in the ISR, never catching up. Kafka's truncateTo drops entries starting at
    # the LEO even when it truncates nothing.
    c = _cluster()
    try:
        producer = c.producer("p", config={"acks": "all", "linger.ms": 1})
        for i in range(5):
            producer.send("t", f"a{i}".encode(), partition=0)
        producer.flush()
        assert c.run_until(lambda: producer.idle() and set(c.log_end_offsets("t", 0).values()) == {5})
        first = c.leader("t", 0)
        assert first is not None
        c.crash(first)
        second = _new_leader(c, first)  # leads epoch 1 but appends nothing
        part = c.replica(second, "t", 0)
        assert part.log.leader_epoch_cache.latest_epoch == part.leader_epoch
        # Cut from ZooKeeper until its session expires: it loses leadership without restarting (a
        # restart would rebuild the epoch cache from the log's batches and hide the bug).
        c.cut(second, ZK_NODE_ID)
        third = _new_leader(c, second)  # the only one left in the ISR: never had epoch 1
        c.heal(second, ZK_NODE_ID)
        c.restart(first)
        for i in range(5):
            producer.send("t", f"b{i}".encode(), partition=0)
        producer.flush()

        def converged() -> bool:
            leos = c.log_end_offsets("t", 0)
            return (
                producer.idle()
                and len(c.isr("t", 0)) == 3
                and len(leos) == 3
                and set(leos.values()) == {c.high_watermark("t", 0)}
            )

        assert c.run_until(converged, 20_000), (c.isr("t", 0), c.log_end_offsets("t", 0))
        assert c.leader("t", 0) == third
        assert c.high_watermark("t", 0) == 10
    finally:
        c.close()


def test_noop_truncation_drops_epoch_entry_at_log_end() -> None:
    c = _cluster()
    try:
        leader = c.leader("t", 0)
        part: Partition = c.replica(leader, "t", 0)  # type: ignore[arg-type, assignment]
        cache = part.log.leader_epoch_cache
        cache.assign(7, part.log_end_offset)
        assert cache.latest_epoch == 7
        part.truncate_to(part.log_end_offset, "test")  # nothing to cut from the log
        assert cache.latest_epoch != 7
    finally:
        c.close()


def test_controller_retries_broker_change_aborted_by_zk_connection_loss() -> None:
    # Bug (seeds 46, 140): the controller's watch on /brokers/ids fired while its own calls to ZooKeeper
    # failed (its link was cut one way, or it woke from a pause before the link healed). The event was
    # dropped; as watches are one-shot and only the event re-arms it, the controller never heard of any
    # broker failure or return again: partitions kept a dead leader and restarted brokers got no
    # LeaderAndIsr. Kafka's ZooKeeper client holds requests until it reconnects; the event now retries.
    c = _cluster()
    try:
        ctl = c.controller()
        assert ctl is not None
        victim = next(b for b in (1, 2, 3) if b != ctl and c.leader("t", 0) != b)
        c.crash(victim)
        c.run_for(1300)
        c.cut(ctl, ZK_NODE_ID, one_way=True)  # zk -> controller still works: the watch event arrives
        assert c.run_until(lambda: bool(c.events("controller_zk_error", node=ctl)), 2000)
        assert c.events("controller_zk_error", node=ctl)[0].fields["during"] == "broker_change"
        c.heal(ctl, ZK_NODE_ID)  # within the session timeout: the controller keeps its session
        assert c.run_until(lambda: victim not in c.isr("t", 0), 3000)
        assert c.controller() == ctl
        c.restart(victim)
        assert c.run_until(lambda: len(c.isr("t", 0)) == 3 and c.replica(victim, "t", 0) is not None, 10_000)
    finally:
        c.close()


def test_session_expired_by_a_store_operation_is_logged() -> None:
    # Gap: only ZkNode.on_tick logged zk_session_expired; a session expired by the expiry pass of any store
    # operation (a broker's call, a reader) ended without a trace in the event log.
    net = SimNetwork(0, log_messages="none")
    zk: ZkNode = net.add_node(ZK_NODE_ID, ZkNode(), tick_ms=10_000)  # ticks too rare to notice
    store: CoordinationStore = zk.store
    sid = store.connect(1000)
    net.run_for(1500)
    assert not net.events("zk_session_expired")
    store.exists("/")  # any operation expires due sessions first
    assert not store.session_alive(sid)
    assert [e.fields for e in net.events("zk_session_expired")] == [{"session": sid}]
    net.run_for(20_000)  # the next tick finds nothing more to expire: logged once
    assert len(net.events("zk_session_expired")) == 1


def test_controller_failover_cut_short_by_zk_connection_loss_is_redone() -> None:
    # The retry above must not stop at re-reading /controller: a broker that won the election but whose
    # failover (loading topics, electing leaders for the dead controller's partitions) was aborted by a
    # connection loss found itself in /controller on the retry and returned, leaving partitions offline.
    c = Cluster(brokers=3, seed=0, config=BROKER_CONFIG)
    try:
        c.create_topic("t", 3, 3)
        old = c.controller()
        assert old is not None
        failures = {b: 1 for b in c.brokers if b != old}
        for b in failures:
            ctl = c.brokers[b].controller
            real = ctl._on_failover

            def flaky(b: int = b, real=real) -> None:  # noqa: ANN001
                if failures[b]:
                    failures[b] -= 1
                    raise ConnectionLossError("cut")
                real()

            ctl._on_failover = flaky  # type: ignore[method-assign]
        c.crash(old)

        def healed() -> bool:
            return all(c.leader("t", p) not in (None, old) and c._partition_ready("t", p) for p in range(3))

        assert c.run_until(healed, 10_000), [c.partition_state("t", p) for p in range(3)]
        new = c.controller()
        assert new not in (None, old) and failures[new] == 0  # type: ignore[index]
    finally:
        c.close()


def test_isr_change_committed_with_answer_lost_is_resent_and_adopted() -> None:
    # Bug (seeds 795, 938): a leader's AlterPartition (shrink) was committed by the controller but the
    # answer was lost (controller -> leader link cut one way, or the controller paused holding it). On
    # the request timeout the leader dropped the proposal and kept its old ISR and partition epoch: its
    # ISR looked full, so it proposed nothing more, while ZooKeeper kept the shrunk ISR forever (or each
    # later proposal was refused as INVALID_UPDATE_VERSION). As Kafka's AlterPartitionManager, the leader
    # now sends the unanswered proposal again, and the controller answers a proposal that is already the
    # committed state with that state (equalsAllowStalePartitionEpoch) instead of fencing it.
    c = Cluster(brokers=3, seed=0, config=BROKER_CONFIG)
    try:
        c.create_topic("t", 3, 3)
        ctl = c.controller()
        assert ctl is not None
        p = next(q for q in range(3) if c.leader("t", q) != ctl)
        leader = c.leader("t", p)
        follower = next(b for b in (1, 2, 3) if b not in (ctl, leader))
        c.cut(ctl, leader, one_way=True)  # leader -> controller works; the answers are lost
        c.crash(follower)
        assert c.run_until(lambda: follower not in c.isr("t", p), 5000)
        assert follower in c.replica(leader, "t", p).isr  # the leader never learnt it
        c.run_for(BROKER_CONFIG["controller.socket.timeout.ms"] + 500)  # the proposal times out unanswered
        c.heal(ctl, leader)
        c.restart(follower)

        def in_sync() -> bool:
            part = c.replica(leader, "t", p)
            return (
                c.leader("t", p) == leader
                and len(c.isr("t", p)) == 3
                and part.pending_isr is None
                and tuple(sorted(part.isr)) == tuple(sorted(c.isr("t", p)))
            )

        assert c.run_until(in_sync, 15_000), (c.isr("t", p), c.replica(leader, "t", p).isr)
    finally:
        c.close()


def test_controller_answers_already_committed_isr_proposal_with_committed_state() -> None:
    c = _cluster()
    try:
        ctl = c.controller()
        leader = c.leader("t", 0)
        assert ctl is not None and leader is not None
        st = c.partition_state("t", 0)
        assert st is not None
        dropped = next(r for r in st.isr if r != leader)
        shrunk = tuple(r for r in st.isr if r != dropped)
        item = AlterPartitionItem(
            tp=TopicPartition("t", 0), leader_epoch=st.leader_epoch, new_isr=shrunk, partition_epoch=0
        )
        controller = c.brokers[ctl].controller
        first = controller._alter_partition(AlterPartitionRequest(broker_id=leader, partitions=(item,)))
        again = controller._alter_partition(AlterPartitionRequest(broker_id=leader, partitions=(item,)))
        assert first.partitions[0].error_code == 0 and first.partitions[0].partition_epoch == 1
        assert again.partitions[0].error_code == 0  # not INVALID_UPDATE_VERSION: it is the committed state
        assert again.partitions[0].isr == shrunk and again.partitions[0].partition_epoch == 1
    finally:
        c.close()
