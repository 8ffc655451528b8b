"""KIP-966 on the KRaft simulator, seeded: min.insync.replicas=2, RF=3, the feature on and off.
``ELR_SEEDS=n`` runs more seeds."""

from __future__ import annotations

import os

import pytest

from kafkalite.harness.elr import every_replica_stops, leader_crash_after_isr_shrink

SEEDS = range(int(os.environ.get("ELR_SEEDS", "2")))


@pytest.mark.parametrize("seed", SEEDS)
def test_with_elr_a_lone_leader_losing_its_page_cache_loses_no_acked_record(seed: int) -> None:
    on = leader_crash_after_isr_shrink(True, seed)
    assert len(on.acked) == 20, f"the records before the faults are acknowledged: {on.acked}"
    shrunk, crashed = on.state("isr shrank to the leader"), on.state("leader crashed")
    leader = shrunk.leader
    followers = tuple(sorted(b for b in on.replicas if b != leader))
    assert shrunk.isr == (leader,) and shrunk.elr == followers, shrunk
    assert crashed.leader in followers and crashed.isr == (crashed.leader,), (
        f"an ELR replica leads once the leader is fenced: {crashed}"
    )
    assert on.lost == [] and on.unclean_elections == 0, (on.lost, on.unclean_elections)


@pytest.mark.parametrize("seed", SEEDS)
def test_without_elr_the_same_faults_lose_acked_records(seed: int) -> None:
    off = leader_crash_after_isr_shrink(False, seed)
    crashed = off.state("leader crashed")
    assert crashed.leader == -1 and crashed.elr == (), f"nobody may lead but the lost leader: {crashed}"
    assert off.state("leader back").leader == off.state("isr shrank to the leader").leader
    assert off.lost, "the last ISR member came back without its page cache and led: acked records lost"
    assert off.unclean_elections == 0, "and that took no unclean election: the gap KIP-966 closes"


@pytest.mark.parametrize("seed", SEEDS)
def test_with_elr_a_cleanly_stopped_replica_leads_again_before_the_last_isr_member(seed: int) -> None:
    on, off = every_replica_stops(True, seed), every_replica_stops(False, seed)
    _, second, last = on.order
    gone = on.state(f"{last} stopped")
    assert gone.isr == () and gone.leader == -1 and gone.elr == tuple(sorted(on.order[1:])), gone
    assert gone.last_known_elr == (last,), gone
    back_on, back_off = on.state(f"{second} back"), off.state(f"{second} back")
    assert back_on.leader == second and back_on.isr == (second,), f"the ELR member leads: {back_on}"
    assert back_off.leader == -1, f"without ELR it waits for the last ISR member: {back_off}"
    for r in (on, off):
        assert r.lost == [] and r.unclean_elections == 0 and len(r.acked) == 20, r
