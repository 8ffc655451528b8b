"""``kafkalite bench faults --disk enospc|eio|corrupt``: one seeded disk fault per run on top of the seeded
schedule, judged by the same checker (lost / duplicate / divergent); nothing acknowledged may be lost."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.harness.bench.faults import format_summary, run_faults
from kafkalite.harness.faults import run_schedule


@pytest.mark.parametrize("disk", ["enospc", "eio", "corrupt"])
def test_disk_modes_lose_no_acknowledged_record(disk: str) -> None:
    s = run_faults(3, 0, disk=disk)
    assert s["counts"].get("lost", 0) == 0, format_summary(s)
    assert s["counts"].get("duplicate", 0) == 0 and s["counts"].get("divergent", 0) == 0, format_summary(s)
    assert s["failed"] == [] and s["not_converged"] == [], format_summary(s)
    assert s["acked"] == s["sends"], "every record was acknowledged in the end"
    if disk == "corrupt":
        assert s["corrupt_batches"] > 0, "a batch really rotted"
    else:
        assert s["disk_faults"] > 0 and s["dirs_offline"] > 0, (
            "the disk really failed and its dir went offline"
        )
    assert "disk:" in format_summary(s)


def test_a_disk_run_replays_exactly_from_its_seed() -> None:
    a, b = run_schedule(2, disk="enospc"), run_schedule(2, disk="enospc")
    assert (a.schedule, a.counts, a.disk_faults, a.virtual_ms) == (
        b.schedule,
        b.counts,
        b.disk_faults,
        b.virtual_ms,
    )
    assert "full after" in a.schedule


def test_the_command_line_takes_a_disk_mode() -> None:
    out = CliRunner().invoke(kafkalite, ["bench", "faults", "--seeds", "1", "--disk", "eio"])
    assert out.exit_code == 0, out.output
    assert "log dirs taken offline" in out.output and "lost                  0" in out.output
    bad = CliRunner().invoke(kafkalite, ["bench", "faults", "--disk", "floppy"])
    assert bad.exit_code != 0 and "floppy" in bad.output
