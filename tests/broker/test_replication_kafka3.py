"""Kafka 3.x rules of the leader's high watermark and ISR expiry, each checked where it differs from the
older rules kafkalite followed before: caught-up replicas outside the ISR hold the HW (Kafka 3.x), the HW
stands still under the effective min ISR (KAFKA-15583, Kafka 3.7), acks=all uses the same effective
min ISR, and the ISR expiry check runs every replica.lag.time.max.ms / 2, not on every tick."""

from __future__ import annotations

from kafkalite.broker.partition import Partition
from kafkalite.protocol import LeaderAndIsrPartitionState, TopicPartition
from kafkalite.records import build_batch
from kafkalite.storage import Log
from tests.broker.test_replication import TP, Cluster

LAG = 10_000


def _leader(tmp_path, isr, replicas=(1, 2, 3), records: int = 10) -> Partition:
    log = Log.open(tmp_path / "t-0")
    p = Partition(TopicPartition("t", 0), log, broker_id=1)
    p.make_leader(LeaderAndIsrPartitionState(tp=p.tp, leader=1, leader_epoch=0, isr=tuple(isr),
                                             partition_epoch=0, replicas=tuple(replicas)), 0)  # fmt: skip
    log.append(build_batch([(None, b"v")] * records, timestamp=0), leader_epoch=0)
    return p


def _fetched(p: Partition, replica: int, offset: int, now: int) -> None:
    p.update_follower_fetch_state(replica, offset, 0, now)


def test_a_caught_up_replica_outside_the_isr_holds_the_hw(tmp_path):
    p = _leader(tmp_path, isr=(1, 2))
    _fetched(p, 3, 6, 1000)  # 3 reached the leader's LEO of its previous fetch: caught up at 1000
    p.remotes[3].last_caught_up_ms = 1000
    _fetched(p, 2, 10, 1000)
    assert p.maybe_increment_hw(2000, LAG) and p.high_watermark == 6  # 3 is about to join: wait for it
    _fetched(p, 3, 10, 2500)
    assert p.maybe_increment_hw(2500, LAG) and p.high_watermark == 10


def test_a_replica_outside_the_isr_stops_counting_once_it_lags_or_its_broker_is_gone(tmp_path):
    p = _leader(tmp_path, isr=(1, 2))
    _fetched(p, 2, 10, 1000)
    p.remotes[3].log_end_offset, p.remotes[3].last_caught_up_ms = 4, 1000
    assert p.maybe_increment_hw(1000 + LAG, LAG, alive=lambda b: b != 3) and p.high_watermark == 10
    q = _leader(tmp_path / "q", isr=(1, 2))
    _fetched(q, 2, 10, 1000)
    q.remotes[3].log_end_offset, q.remotes[3].last_caught_up_ms = 4, 1000
    assert q.maybe_increment_hw(1000 + LAG, LAG) and q.high_watermark == 4  # within the lag: it counts
    r = _leader(tmp_path / "r", isr=(1, 2))
    _fetched(r, 2, 10, 1000)
    r.remotes[3].log_end_offset, r.remotes[3].last_caught_up_ms = 4, 1000
    assert r.maybe_increment_hw(1001 + LAG, LAG) and r.high_watermark == 10  # lagging: it does not


def test_the_hw_stands_still_while_the_isr_is_under_the_effective_min_isr(tmp_path):
    p = _leader(tmp_path, isr=(1,))
    assert not p.maybe_increment_hw(0, LAG, min_isr=2) and p.high_watermark == 0
    assert p.maybe_increment_hw(0, LAG, min_isr=1) and p.high_watermark == 10
    # min.insync.replicas above the replica count is capped at it: a 2-replica partition with both in
    # the ISR advances under min.insync.replicas=3
    q = _leader(tmp_path / "q", isr=(1, 2), replicas=(1, 2))
    _fetched(q, 2, 10, 0)
    assert q.maybe_increment_hw(0, LAG, min_isr=3) and q.high_watermark == 10


def test_acks_all_uses_the_effective_min_isr(tmp_path):
    c = Cluster(tmp_path, 2, min_insync_replicas=3)  # more than the 2 replicas
    c.elect(1, 0, (1, 2))
    cid = c.produce(1, [b"a"], acks=-1)
    assert c.run_until(lambda: c.answer(cid) is not None, 3000)
    assert c.answer(cid).error_code == 0  # Kafka 3.7: min(3, 2 replicas) = 2 are in sync


def test_the_acks1_hw_waits_under_min_isr_and_moves_when_the_isr_grows_back(tmp_path):
    c = Cluster(tmp_path, 3, min_insync_replicas=2)
    c.elect(1, 0, (1,), brokers=(1,))  # followers not told yet: the ISR is the leader alone
    cid = c.produce(1, [b"a", b"b"], acks=1)
    c.net.run_for(500)
    assert c.answer(cid).error_code == 0
    p1 = c.rm(1).partition(TP)
    assert p1.log_end_offset == 2 and p1.high_watermark == 0  # appended, not yet committed
    c.elect(1, 0, (1,))  # now the followers fetch and join
    assert c.run_until(lambda: p1.high_watermark == 2, 5000)
    assert len(p1.isr) >= 2


def test_the_isr_expiry_check_runs_every_half_lag_time(tmp_path):
    c = Cluster(tmp_path, 3, replica_lag_time_max_ms=1000)
    c.elect(1, 0, (1, 2, 3))
    c.net.run_for(150)
    c.net.cut(1, 3)
    c.net.cut(3, 1)
    c.produce(1, [b"a"], acks=1)
    assert c.run_until(lambda: c.net.events("isr_shrink"), 5000)
    checks = c.net.events("isr_lagging")
    # 3 last caught up at about t=100, so it lags from t~1100; the checks run at t = 0, 500, 1000, 1500,
    # ... (the broker's start, then every 500 ms), so the shrink comes at the 1500 check, not the first
    # tick after 1100
    assert [e.time_ms % 500 for e in checks] == [0] * len(checks)
    assert checks[0].time_ms == 1500


def test_leader_and_isr_from_a_stale_controller_epoch_is_refused(tmp_path):
    from kafkalite.errors import StaleControllerEpochError
    from kafkalite.protocol import LeaderAndIsrRequest

    c = Cluster(tmp_path, 2)
    state = LeaderAndIsrPartitionState(tp=TP, controller_epoch=2, leader=1, leader_epoch=0, isr=(1, 2),
                                       partition_epoch=0, replicas=(1, 2))  # fmt: skip
    new = LeaderAndIsrRequest(controller_id=0, controller_epoch=2, partition_states=(state,))
    assert c.rm(1).handle_leader_and_isr(new).error_code == 0
    old_state = LeaderAndIsrPartitionState(tp=TP, controller_epoch=1, leader=2, leader_epoch=1, isr=(2,),
                                           partition_epoch=1, replicas=(1, 2))  # fmt: skip
    old = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, partition_states=(old_state,))
    answer = c.rm(1).handle_leader_and_isr(old)
    assert answer.error_code == StaleControllerEpochError.code
    assert c.rm(1).partition(TP).is_leader and c.rm(1).partition(TP).leader_epoch == 0  # nothing applied
