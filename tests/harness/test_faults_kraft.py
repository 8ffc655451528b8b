"""acks=all on a KRaft cluster under seeded faults over brokers and controllers: no acknowledged record
lost or changed; one Raft leader per epoch, every node's image equal at each offset, and every broker
on the controller's image once healed, with and without metadata snapshots (KIP-630) every ~2 KiB.
``KRAFT_FAULT_SEEDS=500`` runs more; ``KRAFT_FAULT_SEED=n`` replays one."""

from __future__ import annotations

import os

from kafkalite.harness.faults_kraft import run_kraft_schedule
from tests.metadata.kraft_harness import SMALL_SNAPSHOTS

SEEDS = int(os.environ.get("KRAFT_FAULT_SEEDS", "16"))


def test_no_acked_record_lost_when_brokers_and_controllers_crash() -> None:
    seeds = [int(os.environ["KRAFT_FAULT_SEED"])] if "KRAFT_FAULT_SEED" in os.environ else range(SEEDS)
    failures, lossy, controller_crashes, acked, epochs = [], 0, 0, 0, 0
    for seed in seeds:
        r = run_kraft_schedule(seed)
        lossy += len(r.lossy_crashes)
        controller_crashes += r.schedule.count("crash controller")
        acked += r.acked
        epochs += r.epochs
        if not r.ok:
            failures.append(f"{r}\n  metadata: {r.metadata_violations[:3]}")
    assert not failures, f"{len(failures)} of {len(seeds)} seeds failed:\n" + "\n".join(failures[:3])
    # The runs must crash controllers and lose brokers' page caches, or they prove nothing.
    assert controller_crashes >= len(seeds) and lossy >= len(seeds) // 4 and acked > 0, (
        controller_crashes,
        lossy,
    )


def test_the_same_seed_gives_the_same_run() -> None:
    a, b = run_kraft_schedule(3), run_kraft_schedule(3)
    assert (a.virtual_ms, a.events, a.schedule) == (b.virtual_ms, b.events, b.schedule)


def test_no_acked_record_lost_while_every_node_snapshots_its_metadata() -> None:
    # Brokers that crash come back below the controllers' log start: they load a snapshot (their own
    # or the leader's, through FetchSnapshot) and must still serve every acknowledged record.
    seeds = range(SEEDS)
    failures, loads = [], 0
    for seed in seeds:
        r = run_kraft_schedule(seed, log_config=SMALL_SNAPSHOTS)
        loads += r.snapshot_loads
        if not r.ok:
            failures.append(f"{r}\n  metadata: {r.metadata_violations[:3]}")
    assert not failures, f"{len(failures)} of {len(seeds)} seeds failed:\n" + "\n".join(failures[:3])
    assert loads >= len(seeds) // 4, f"only {loads} snapshot loads in {len(seeds)} runs"


def test_no_acked_record_lost_in_combined_mode() -> None:
    # Kafka's combined mode: the three nodes are each a voter and a broker, so every crash takes down a
    # controller and a broker at once, the active one included; half the seeds snapshot every ~2 KiB.
    seeds = range(SEEDS)
    failures, crashes, epochs, loads = [], 0, 0, 0
    for seed in seeds:
        r = run_kraft_schedule(seed, combined=True, log_config=SMALL_SNAPSHOTS if seed % 2 else None)
        crashes += r.schedule.count("crash broker")
        epochs += r.epochs
        loads += r.snapshot_loads
        if not r.ok:
            failures.append(f"{r}\n  metadata: {r.metadata_violations[:3]}")
    assert not failures, f"{len(failures)} of {len(seeds)} seeds failed:\n" + "\n".join(failures[:3])
    # crashes of nodes that are voters, elections after them, and snapshots loaded, or the runs prove little
    assert crashes >= len(seeds) and epochs > len(seeds) and loads > 0, (crashes, epochs, loads)
