"""KRaft metadata safety over seeded fault schedules: at most one leader per epoch, no committed record
lost or changed, every node's replayed image equal at each offset and within Kafka's rules, and, once
healed, every broker unfenced with the controller's image. ``KRAFT_SEEDS=2000`` runs more;
``KRAFT_SEED=n`` replays one."""

from __future__ import annotations

import os

from tests.metadata.kraft_harness import run_schedule

SEEDS = int(os.environ.get("KRAFT_SEEDS", "100"))


def test_kraft_metadata_safety_over_seeded_fault_schedules() -> None:
    seeds = [int(os.environ["KRAFT_SEED"])] if "KRAFT_SEED" in os.environ else range(SEEDS)
    failures, epochs, crashes, topics = [], 0, 0, 0
    for seed in seeds:
        q, problems = run_schedule(seed)
        epochs += len(q.checker.leaders)
        crashes += len(q.net.events("crash"))
        act = q.active()
        topics += len(act.controller.committed.topics) if act else 0
        q.close()
        if problems:
            failures.append(f"seed {seed}: {problems[:3]}")
    assert not failures, (
        f"{len(failures)} of {len(seeds)} seeds broke KRaft (KRAFT_SEED=n replays one):\n"
        + ("\n".join(failures[:10]))
    )
    # The schedules must move leadership, crash nodes and write metadata, or the run proves nothing.
    assert epochs > len(seeds) and crashes > len(seeds) // 4 and topics > len(seeds), (
        epochs,
        crashes,
        topics,
    )
