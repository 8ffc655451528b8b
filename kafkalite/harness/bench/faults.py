"""``kafkalite bench faults``: many seeded fault schedules, the checker's verdict summed over all of them.

Each seed is one ``kafkalite.harness.faults.run_schedule`` run. The summary counts anomalies per kind over every
seed (``kafkalite.harness.checker.total_counts``), the seeds that failed (replay one with ``run_schedule(seed)``)
and the speed: seeds per second and simulated events per second (wall time via ``time.perf_counter``,
outside the simulation).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafkalite.harness.checker import ANOMALY_KINDS, VIOLATIONS, total_counts
from kafkalite.harness.faults import run_schedule
from kafkalite.harness.faults_txn import run_txn_schedule


def run_faults(seeds: int, start: int = 0, **kw: Any) -> dict[str, Any]:
    """Run seeds ``start .. start+seeds-1``; keyword arguments go to ``run_schedule``."""
    reports = []
    failed: list[int] = []
    not_converged: list[int] = []
    retry_duplicates = events = virtual_ms = sends = acked = lossy = 0
    disk_faults = dirs_offline = corrupt = 0
    idempotent = False
    t0 = time.perf_counter()
    for seed in range(start, start + seeds):
        r = run_schedule(seed, **kw)
        reports.append(r.report)
        if not r.ok:
            failed.append(seed)
        if not r.converged:
            not_converged.append(seed)
        retry_duplicates += r.retry_duplicates
        idempotent = r.idempotent
        events += r.events
        virtual_ms += r.virtual_ms
        sends += r.sends
        acked += r.acked
        lossy += len(r.lossy_crashes)
        disk_faults += r.disk_faults
        dirs_offline += r.dirs_offline
        corrupt += r.corrupt_batches
    wall = time.perf_counter() - t0
    return {
        "seeds": seeds,
        "start": start,
        "counts": total_counts(reports),
        "retry_duplicates": retry_duplicates,
        "failed": failed,
        "not_converged": not_converged,
        "sends": sends,
        "acked": acked,
        "lossy_crashes": lossy,
        "disk_faults": disk_faults,
        "dirs_offline": dirs_offline,
        "corrupt_batches": corrupt,
        "events": events,
        "virtual_ms": virtual_ms,
        "wall_s": wall,
        "seeds_per_s": seeds / wall if wall > 0 else 0.0,
        "events_per_s": events / wall if wall > 0 else 0.0,
        "options": dict(kw),
        "idempotent": idempotent,
    }


def run_txn_faults(seeds: int, start: int = 0, **kw: Any) -> dict[str, Any]:
    """The transactional copy workload (``kafkalite.harness.faults_txn``) over seeds ``start .. start+seeds-1``."""
    failed, lines = [], []
    totals = dict.fromkeys(
        ("inputs", "read", "missing", "duplicated", "unexpected", "transactions", "aborted"), 0
    )
    t0 = time.perf_counter()
    for seed in range(start, start + seeds):
        r = run_txn_schedule(seed, **kw)
        totals["inputs"] += r.inputs
        totals["read"] += sum(r.copied.values())
        totals["missing"] += len(r.missing)
        totals["duplicated"] += len(r.duplicated)
        totals["unexpected"] += len(r.unexpected)
        totals["transactions"] += r.transactions
        totals["aborted"] += r.aborted
        if not r.ok:
            failed.append(seed)
            lines.append(str(r))
    wall = time.perf_counter() - t0
    return {"seeds": seeds, "start": start, **totals, "failed": failed, "failures": lines, "wall_s": wall}


def format_txn_summary(s: dict[str, Any]) -> str:
    end = s["start"] + s["seeds"] - 1
    return "\n".join(
        [
            f"transactional copy under fault schedules: seeds {s['start']}..{end} ({s['seeds']} runs)",
            f"inputs {s['inputs']}, read back (read_committed) {s['read']}",
            f"  missing {s['missing']}, duplicated {s['duplicated']}, from aborted or unknown {s['unexpected']}",
            f"transactions {s['transactions']} ({s['aborted']} aborted by the application)",
            f"speed: {s['seeds'] / s['wall_s']:.2f} seeds/s ({s['wall_s']:.1f} s wall)"
            if s["wall_s"]
            else "",
            f"failed seeds ({len(s['failed'])}): {' '.join(map(str, s['failed'])) or '-'}",
            *s["failures"][:10],
        ]
    )


def format_summary(summary: dict[str, Any]) -> str:
    """A plain-text table of the summary (anomaly counts, speed, failed seeds)."""
    s = summary
    end = s["start"] + s["seeds"] - 1
    lines = [
        f"fault schedules: seeds {s['start']}..{end} ({s['seeds']} runs)"
        + (f" options {s['options']}" if s.get("options") else ""),
        f"sends {s['sends']}, acked {s['acked']}, lossy crashes {s['lossy_crashes']}",
    ]
    if s.get("options", {}).get("disk"):
        lines.append(
            f"disk: {s['disk_faults']} failed file operations, {s['dirs_offline']} log dirs taken offline, "
            f"{s['corrupt_batches']} batches rotted"
        )
    lines += [
        "anomalies (all seeds):",
    ]
    for kind in ANOMALY_KINDS:
        mark = " (violation)" if kind in VIOLATIONS else ""
        lines.append(f"  {kind:<14} {s['counts'].get(kind, 0):>8}{mark}")
    if s.get("idempotent"):
        lines.append("  idempotent producer: every duplicate and every reordered record is a violation")
    else:
        lines.append(f"  of the duplicates, from producer retries (no idempotence): {s['retry_duplicates']}")
    lines += [
        f"speed: {s['seeds_per_s']:.2f} seeds/s, {s['events_per_s']:,.0f} simulated events/s "
        f"({s['events']:,} events, {s['virtual_ms'] / 1000:,.1f} s virtual, {s['wall_s']:.1f} s wall)",
        f"failed seeds ({len(s['failed'])}): {' '.join(map(str, s['failed'])) or '-'}",
        f"not converged ({len(s['not_converged'])}): {' '.join(map(str, s['not_converged'])) or '-'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkalite.harness.bench.faults", description=__doc__)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--unclean", action="store_true")
    ap.add_argument("--idempotence", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--disk", choices=("enospc", "eio", "corrupt"))
    args = ap.parse_args(argv)
    kw: dict[str, Any] = {}
    if args.acks != "all":
        kw["acks"] = int(args.acks)
    if args.unclean:
        kw["unclean"] = True
    if args.idempotence is not None:
        kw["idempotence"] = args.idempotence
    if args.disk:
        kw["disk"] = args.disk
    summary = run_faults(args.seeds, args.start, **kw)
    print(format_summary(summary))
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
