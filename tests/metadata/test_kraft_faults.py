"""KRaft metadata safety over seeded fault schedules: at most one leader per epoch, no committed record
lost or changed, every node's replayed image equal at each offset and within Kafka's rules, and, once
healed, every broker unfenced with the controller's image. Every node snapshots (KIP-630) every ~2 KiB
and drops the log below, so snapshot loads and FetchSnapshot downloads happen under the faults too. ``KRAFT_SEEDS=2000`` runs more;
``KRAFT_SEED=n`` replays one."""

from __future__ import annotations

import os

from tests.metadata.kraft_harness import run_schedule

SEEDS = int(os.environ.get("KRAFT_SEEDS", "100"))


def test_kraft_metadata_safety_over_seeded_fault_schedules() -> None:
    seeds = [int(os.environ["KRAFT_SEED"])] if "KRAFT_SEED" in os.environ else range(SEEDS)
    failures, epochs, crashes, topics = [], 0, 0, 0
    loads, truncated, downloads = 0, 0, 0
    for seed in seeds:
        q, problems = run_schedule(seed)
        epochs += len(q.checker.leaders)
        crashes += len(q.net.events("crash"))
        act = q.active()
        topics += len(act.controller.committed.topics) if act else 0
        live = [n.client for n in (*q.controllers.values(), *q.brokers.values()) if n.client is not None]
        loads += q.checker.snapshots_loaded
        truncated += sum(c.log.start_offset > 0 for c in live)
        downloads += sum(c.stats.snapshot_fetches for c in live)
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
    # ... and snapshot, drop the log below the snapshots and send nodes to fetch them.
    if len(seeds) >= 20:
        assert loads > len(seeds) // 2 and truncated > len(seeds) and downloads > len(seeds) // 4, (
            loads,
            truncated,
            downloads,
        )
