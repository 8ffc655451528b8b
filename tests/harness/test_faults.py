"""Fault-schedule safety: seeded random schedules through the checker, targeted scenarios, regressions."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.coordination.zk_node import ConnectionLossError, ZkLink, ZkNode
from kafkalite.harness.bench.faults import format_summary, run_faults
from kafkalite.harness.faults import run_schedule
from kafkalite.host.cluster import Cluster
from kafkalite.net.sim import BaseNode, Fault, FaultSchedule, SimNetwork
from kafkalite.protocol import LeaderAndIsrRequest

# Seeds 0..CI_SEEDS-1 of the default short schedule (3 s of faults, 80 records): ~0.3-0.8 s each.
CI_SEEDS = 300
# Seeds that still fail (liveness: the cluster does not converge, or a loss not yet understood); see
# the report of the fault-test work. Not strict: a fix elsewhere may shift a timeline and pass them.
# Empty since the liveness fixes (stale epoch entry at the LEO, controller watch events retried after a
# ZooKeeper connection loss): tests/broker/test_liveness.py holds their regressions.
KNOWN_FAILING: set[int] = set()


def _params() -> list[Any]:
    return [
        pytest.param(s, marks=pytest.mark.xfail(reason="known open bug", strict=False))
        if s in KNOWN_FAILING
        else s
        for s in range(CI_SEEDS)
    ]


@pytest.mark.parametrize("seed", _params())
def test_random_schedule_keeps_acked_records(seed: int) -> None:
    r = run_schedule(seed)
    assert r.ok, str(r)


def test_same_seed_same_result() -> None:
    a, b = run_schedule(7), run_schedule(7)
    assert (a.schedule, a.counts, a.virtual_ms, a.events) == (b.schedule, b.counts, b.virtual_ms, b.events)


def _sched(*faults: tuple[int, str, tuple]) -> FaultSchedule:
    return FaultSchedule(tuple(Fault(t, a, args) for t, a, args in faults), None)


def _leader0(seed: int = 0) -> int:
    # Partition leaders are fixed by placement; read the first leader off a fresh cluster.
    c = Cluster(brokers=3, seed=seed)
    try:
        c.create_topic("faults", 3, 3)
        return c.leader("faults", 0)  # type: ignore[return-value]
    finally:
        c.close()


def test_leader_crash_mid_stream() -> None:
    leader = _leader0()
    r = run_schedule(0, schedule=_sched((800, "crash", (leader,)), (2200, "restart", (leader,))))
    assert r.ok, str(r)
    assert r.acked == r.sends


def test_follower_paused_past_lag_time_then_resumed() -> None:
    leader = _leader0()
    follower = 1 + leader % 3
    # 1400 ms > replica.lag.time.max.ms (1000) but < the session timeout (1500): ISR shrink then expand.
    r = run_schedule(0, schedule=_sched((500, "pause", (follower,)), (1900, "resume", (follower,))))
    assert r.ok, str(r)
    assert r.acked == r.sends


def test_leader_isolated_from_zk_and_brokers_takes_no_acks_all_writes() -> None:
    leader = _leader0()
    others = [b for b in (1, 2, 3) if b != leader]
    faults = [(600, "cut", (leader, x, False)) for x in (*others, "zk")]
    faults += [(2600, "heal", (leader, x)) for x in (*others, "zk")]
    r = run_schedule(0, schedule=_sched(*faults))
    assert r.ok, str(r)


def test_controller_crash_during_broker_failure() -> None:
    c = Cluster(brokers=3, seed=0)
    controller = c.controller()
    c.close()
    other = 1 + controller % 3  # type: ignore[operator]
    r = run_schedule(
        0,
        schedule=_sched(
            (500, "crash", (other,)),
            (900, "crash", (controller,)),
            (1800, "restart", (controller,)),
            (2400, "restart", (other,)),
        ),
    )
    assert r.ok, str(r)


def test_crash_losing_unflushed_bytes_keeps_acked_records() -> None:
    leader = _leader0()
    r = run_schedule(
        0, lose_unflushed=True, schedule=_sched((1500, "crash", (leader,)), (2500, "restart", (leader,)))
    )
    assert r.lossy_crashes == [leader]
    assert r.ok, str(r)


# Negative control: acks=1 acknowledges before replication, so a leader crash loses acked records.
ACKS1_LOSING = [0, 1, 4, 5, 11]


@pytest.mark.parametrize("seed", ACKS1_LOSING)
def test_acks1_loses_acknowledged_records_and_checker_sees_it(seed: int) -> None:
    r = run_schedule(seed, acks=1)
    assert not r.ok and r.report.lost, str(r)
    assert all(a.acks == 1 for a in r.report.lost)


def test_bench_summary() -> None:
    s = run_faults(2, start=0)
    text = format_summary(s)
    assert s["seeds"] == 2 and "lost" in text and "seeds/s" in text


# --- regressions for bugs the schedules found


class _Owner(BaseNode):
    def __init__(self) -> None:
        self.link: ZkLink | None = None

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        assert self.link is not None
        self.link.on_message(msg)


def test_zk_watch_event_survives_a_cut_link() -> None:
    # Bug: watch events were plain messages, lost for good on a cut link while the session lived, so a
    # controller never heard of a broker failure and the cluster stayed without a leader.
    net = SimNetwork(0, log_messages="none")
    zk = net.add_node("zk", ZkNode(), tick_ms=100)
    owner = net.add_node("b", _Owner())
    owner.link = link = ZkLink(net, "b", session_timeout_ms=3000)
    link.connect()
    seen: list[Any] = []
    link.exists("/x", watch=seen.append)
    net.cut("b", "zk")
    zk.store.create("/x", b"1")
    net.run_for(500)
    assert seen == []
    net.heal("b", "zk")
    net.run_for(1500)  # the next ping shows the link works again: the event is re-sent
    assert len(seen) == 1 and seen[0].path == "/x"
    net.run_for(2000)
    assert len(seen) == 1 and link.alive


def test_controller_zk_error_is_logged_not_raised() -> None:
    # Bug: logging a ZooKeeper error passed ``event=`` twice and crashed the broker's message loop.
    c = Cluster(brokers=3, seed=0)
    try:
        ctl = c.brokers[c.controller()].controller  # type: ignore[index]

        def boom() -> None:
            raise ConnectionLossError("cut")

        assert ctl._guard("AlterPartitionRequest", boom) is None
        ev = c.events("controller_zk_error")[-1]
        assert ev.fields == {"during": "AlterPartitionRequest", "error": "ConnectionLossError"}
    finally:
        c.close()


def test_restarted_broker_ignores_controller_until_registered() -> None:
    # Bug: a broker restarted before its old session expired acted on LeaderAndIsr meant for its previous
    # incarnation (it kept the old broker epoch), so it could lead from a stale ISR without its lost tail.
    c = Cluster(brokers=3, seed=0, config={"zookeeper.session.timeout.ms": 3000})
    try:
        c.create_topic("t", 1, 3)
        b = next(x for x in (1, 2, 3) if x != c.controller())
        old_epoch = c.brokers[b].broker_epoch
        c.crash(b, lose_unflushed=True)
        c.restart(b)
        c.run_for(50)
        assert not c.brokers[b].registered and c.brokers[b].broker_epoch == -1
        resp = c.request(b, LeaderAndIsrRequest(controller_id=c.controller(), controller_epoch=99,
                                                broker_epoch=old_epoch))  # fmt: skip
        assert resp.error_code != 0
        assert c.run_until(lambda: c.brokers[b].registered, 10_000)
        assert c.brokers[b].broker_epoch > old_epoch
    finally:
        c.close()


def _bounce_leading_controller(delay_ms: int) -> bool:
    """Crash the controller (leading a partition of 10 acked records) losing its unflushed log, restart it
    ``delay_ms`` later, check no acked record is lost; True when it won the controller election again."""
    from kafkalite.harness.faults import BROKER_CONFIG

    c = Cluster(brokers=3, seed=0, config=BROKER_CONFIG)
    try:
        c.create_topic("t", 3, 3, config={"min.insync.replicas": 2})
        ctl = c.controller()
        assert ctl is not None
        p = next(p for p in range(3) if c.leader("t", p) == ctl)
        epoch = c.partition_state("t", p).leader_epoch  # type: ignore[union-attr]
        producer = c.producer("p", config={"acks": "all", "linger.ms": 1})
        futures = [producer.send("t", f"r{i}".encode(), partition=p) for i in range(10)]
        producer.flush()
        assert c.run_until(lambda: producer.idle() and set(c.log_end_offsets("t", p).values()) == {10})
        assert all(f.done() and f.exception() is None for f in futures)
        c.crash(ctl, lose_unflushed=True)
        c.run_for(delay_ms)
        c.restart(ctl)  # its old session (so its registration and /controller) still lives
        assert c.run_until(lambda: c.brokers[ctl].registered and c.controller() is not None, 10_000)
        reelected = c.controller() == ctl

        def ready() -> bool:
            return c._partition_ready("t", p) and len(c.isr("t", p)) == 3 and c.high_watermark("t", p) == 10

        assert c.run_until(ready, 20_000), c.format_log(("leader_elected", "become_leader", "truncate"))
        assert c.partition_state("t", p).leader_epoch > epoch  # type: ignore[union-attr]
        assert [r.value for r in c.read_all("t")[p]] == [f"r{i}".encode() for i in range(10)]
        return reelected
    finally:
        c.close()


def test_leader_restarted_empty_does_not_keep_leading_after_controller_failover() -> None:
    # Bug (seed 62): the controller, leading a partition, crashed losing its unflushed log and restarted
    # before its ZooKeeper session expired. When the session expired it re-registered and won the
    # controller election again; the fresh controller saw the partition's leader (itself) live and kept
    # it leading at the same leader epoch with an empty log, so the followers truncated every acked
    # record to match it. A running controller treats such a bounce as a failure (broker epoch change);
    # a new controller must spot it too: the leader registered after the state znode was last written.
    # The delays move the registration retry (every 1 s) across the session expiry so that in some run
    # the restarted broker wins the election (494 ms does with seed 0).
    reelected = [d for d in range(490, 500, 2) if _bounce_leading_controller(d)]
    assert reelected, "no run exercised the restarted broker winning the controller election"
