"""Raft's safety and liveness over thousands of seeded fault schedules (crashes that lose the page cache,
pauses, cuts, lossy and slow links). ``RAFT_SEEDS=20000`` runs more; ``RAFT_SEED=n`` replays one."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.raft.harness import run_schedule

SEEDS = int(os.environ.get("RAFT_SEEDS", "2000"))


def test_raft_safety_over_seeded_fault_schedules() -> None:
    seeds = [int(os.environ["RAFT_SEED"])] if "RAFT_SEED" in os.environ else range(SEEDS)
    failures, epochs, crashes = [], 0, 0
    for seed in seeds:
        q, problems = run_schedule(seed)
        epochs += len(q.checker.leaders)
        crashes += len(q.net.events("crash"))
        q.close()
        if problems:
            failures.append(f"seed {seed}: {problems[:3]}")
    assert not failures, f"{len(failures)} of {len(seeds)} seeds broke Raft (RAFT_SEED=n replays one):\n" + (
        "\n".join(failures[:20])
    )
    # The schedules must actually move leadership and crash nodes, or the run proves nothing.
    assert epochs > len(seeds) and crashes > len(seeds) // 4, (epochs, crashes)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=10**6, max_value=2**40))
def test_raft_safety_on_arbitrary_seeds(seed: int) -> None:
    q, problems = run_schedule(seed)
    q.close()
    assert not problems, f"seed {seed}: {problems}"
