"""ISR vs majority quorum (kafkalite.harness.quorum_compare): the generator, the counters, and what they show."""

from __future__ import annotations

import json

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.cli import kafkalite
from kafkalite.harness.quorum_compare import (
    SLOW_MS,
    fault_schedule,
    isr,
    percentile,
    quorum,
    run_faults,
    run_slow,
    unavailable_ms,
)

ISR_SEEDS = range(8)  # ~1 s each
QUORUM_SEEDS = range(40)  # ~0.1 s each


def _open_faults(sched) -> int:
    """The most faults open at once in a schedule (ends run before starts at the same instant)."""
    open_, most = 0, 0
    for f in sched:
        open_ += 1 if f.action in ("crash", "pause", "cut") else -1
        most = max(most, open_)
    return most


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), f=st.integers(1, 2), n=st.integers(2, 5))
def test_schedule_never_opens_more_than_f_faults(seed: int, f: int, n: int) -> None:
    sched = fault_schedule(seed, range(1, n + 1), f)
    assert _open_faults(sched) <= f
    assert all(f.time_ms <= 3000 for f in sched)
    assert sched.faults == fault_schedule(seed, range(1, n + 1), f).faults


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_same_timeline_for_every_scheme_size(seed: int) -> None:
    # Only the victims depend on the replica count: when faults start and end, and their kinds, do not.
    def shape(n: int) -> list[tuple[int, str]]:
        return [(f.time_ms, f.action) for f in fault_schedule(seed, range(1, n + 1), 1)]

    assert shape(3) == shape(5)


def test_unavailable_counts_writes_not_acked_within_the_deadline() -> None:
    timeline = [(0, 5), (30, 600), (60, None), (90, 100), (3000, None)]  # the last is after the window
    assert unavailable_ms(timeline, 3000, 30, 500) == 60
    assert percentile([1, 2, 3, 4, 100], 50) == 3 and percentile([1, 2, 3, 4, 100], 99) == 100


def test_same_seed_same_result() -> None:
    for scheme in (isr(3, 2), quorum(3)):
        a, b = run_faults(scheme, 3, 1), run_faults(scheme, 3, 1)
        assert (a.acked, a.lost, a.unavailable_ms, a.latencies) == (
            b.acked,
            b.lost,
            b.unavailable_ms,
            b.latencies,
        )


def test_isr_acks_all_min_insync_2_loses_no_acked_write() -> None:
    for seed in ISR_SEEDS:
        r = run_faults(isr(3, 2), seed, 1)
        assert r.converged and r.acked > 0, seed
        assert r.lost == 0, f"seed {seed}: {r.lost} acked writes lost"


def test_quorum_loses_no_acked_write() -> None:
    for f, n in ((1, 3), (2, 5)):
        for seed in QUORUM_SEEDS:
            r = run_faults(quorum(n), seed, f)
            assert r.converged and r.acked == r.writes, (n, seed)
            assert r.lost == 0, f"quorum of {n}, seed {seed}: {r.lost} acked writes lost"


def test_acks_1_loses_acked_writes_so_the_counter_counts() -> None:
    # Seed 1 under the same schedule: acks=1 lets the leader answer before any follower has the record;
    # the leader is then replaced and the new one never had them. acks=all on the same faults loses none.
    assert run_faults(isr(3, 2, acks=1), 1, 1).lost > 0
    assert run_faults(isr(3, 2), 1, 1).lost == 0


def test_a_slow_follower_slows_isr_commits_but_not_the_quorums() -> None:
    # acks=all waits for every ISR member, and a follower 20 ms slower each way is still in the ISR
    # (replica.lag.time.max.ms is 1 s): each commit waits for its fetch round trip, so ISR's p50 and p99
    # rise by at least 2 x 20 ms. The quorum's leader needs a majority, which the fast replicas make up:
    # its latencies do not move at all.
    for scheme in (isr(2, 1), isr(3, 2)):
        healthy, slow = run_slow(scheme, 0, 0).latencies, run_slow(scheme, 0, SLOW_MS).latencies
        assert percentile(slow, 50) - percentile(healthy, 50) >= 2 * SLOW_MS, scheme.name
        assert percentile(slow, 99) - percentile(healthy, 99) >= 2 * SLOW_MS, scheme.name
    for n in (3, 5):
        healthy, slow = run_slow(quorum(n), 0, 0).latencies, run_slow(quorum(n), 0, SLOW_MS).latencies
        assert percentile(slow, 99) == percentile(healthy, 99), n


def test_tolerated_failures_by_construction() -> None:
    assert (isr(2, 1).tolerates_for_writes, isr(2, 1).tolerates_without_loss) == (1, 1)
    assert (isr(2, 2).tolerates_for_writes, isr(2, 2).tolerates_without_loss) == (0, 1)
    assert (isr(3, 2).tolerates_for_writes, isr(3, 2).tolerates_without_loss) == (1, 2)
    assert (quorum(3).tolerates_for_writes, quorum(5).tolerates_without_loss) == (1, 2)
    assert isr(3, 2, acks=1).tolerates_without_loss == 0


def test_cli_prints_the_table_and_json() -> None:
    args = ["bench", "quorum", "--seeds", "1", "--f", "2", "--latency-seeds", "0"]
    out = CliRunner().invoke(kafkalite, args)
    assert out.exit_code == 0, out.output
    assert "simulated time (deterministic per seed)" in out.output and "quorum n=5" in out.output
    out = CliRunner().invoke(kafkalite, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [r["scheme"] for r in data["rows"]] == ["ISR rf=3 min.insync=1", "quorum n=5"]
    assert data["simulated"] is True and all(r["acked_lost"] == 0 for r in data["rows"])
