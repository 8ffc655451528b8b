"""A failed `make test` ends by naming each failed step and its cause: the Makefile's ``logged`` steps
keep their output and note their failure, ``tools/failure_report.py`` picks the lines that say what failed,
and the strict book build says its warnings and the end of each failed chapter's traceback again."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import failure_report  # noqa: E402

PYTEST_LOG = """\
============================= test session starts ==============================
tests/a.py ..F.                                                          [100%]
=================================== FAILURES ===================================
___________________________________ test_x ____________________________________
    assert 1 == 2
E   assert 1 == 2
=========================== short test summary info ============================
FAILED tests/a.py::test_x - assert 1 == 2
ERROR tests/b.py::test_y - OSError: no space left
========================= 1 failed, 3 passed in 0.12s ==========================
"""


def test_causes_picks_pytest_short_summary() -> None:
    assert failure_report.causes(PYTEST_LOG) == [
        "FAILED tests/a.py::test_x - assert 1 == 2",
        "ERROR tests/b.py::test_y - OSError: no space left",
    ]


def test_causes_picks_book_and_papermill_lines() -> None:
    log = "reading sources...\nbook: 1 warning(s) and error(s):\nbook:   x.md: WARNING: bad\nok\n"
    assert failure_report.causes(log) == ["book: 1 warning(s) and error(s):", "book:   x.md: WARNING: bad"]
    log = "ok      a set 1\nFAILED  b set 2 after 3 s: boom\npapermill matrix: 2 run(s), 1 problem(s)\n"
    assert failure_report.causes(log) == [
        "FAILED  b set 2 after 3 s: boom",
        "papermill matrix: 2 run(s), 1 problem(s)",
    ]


def test_causes_falls_back_to_the_last_lines_and_caps_length() -> None:
    log = "\n".join(f"line {i}" for i in range(20)) + "\n\n"
    assert failure_report.causes(log) == [f"line {i}" for i in range(15, 20)]
    many = "\n".join(f"FAILED t{i} - " + "x" * 500 for i in range(40))
    picked = failure_report.causes(many)
    assert len(picked) == failure_report.MAX_LINES
    assert picked[-1] == f"... and {40 - failure_report.MAX_LINES + 1} more line(s) in the step's log"
    assert all(len(line) <= failure_report.MAX_WIDTH for line in picked)


def test_report_names_each_failed_step(tmp_path: Path) -> None:
    (tmp_path / "failed").write_text("test-unit\ncheck-sync\n")
    (tmp_path / "test-unit.log").write_text(PYTEST_LOG)
    (tmp_path / "check-sync.log").write_text("book/x.md differs from notebooks/x.ipynb\n")
    out = failure_report.report(tmp_path).splitlines()
    assert out[0] == "make test: 2 step(s) failed: test-unit, check-sync"
    assert "  FAILED tests/a.py::test_x - assert 1 == 2" in out
    assert out[-1] == "  book/x.md differs from notebooks/x.ipynb"
    assert "before it could note itself" in failure_report.report(tmp_path / "missing")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_makefile_logged_step_keeps_output_and_notes_failure(tmp_path: Path) -> None:
    """The Makefile's own ``logged`` macro, on a step that prints and fails and one that passes."""
    recipe = "$(call logged,{name},python -c \"print('out of {name}'); raise SystemExit({rc})\")"
    steps = {"bad": 3, "good": 0}
    evals = [f"{name}: ; {recipe.format(name=name, rc=rc)}" for name, rc in steps.items()]
    env = {**os.environ, "MAKEFLAGS": ""}
    args = ["make", "-s", "-C", str(ROOT), f"REPORTS={tmp_path}"]
    for text in evals:
        args += ["--eval", text]
    done = subprocess.run([*args, "--keep-going", "bad", "good"], capture_output=True, text=True, env=env)
    assert done.returncode != 0, done
    assert "out of bad" in done.stdout and "out of good" in done.stdout  # still on the terminal
    assert (tmp_path / "bad.log").read_text() == "out of bad\n"
    assert (tmp_path / "good.log").read_text() == "out of good\n"
    assert (tmp_path / "failed").read_text() == "bad\n"


def test_problem_tee_passes_everything_and_keeps_sphinx_problems() -> None:
    import build_book

    sink = io.StringIO()
    tee = build_book.ProblemTee(sink)
    chunks = [
        "\x1b[01mreading sources...\x1b[39;49;00m\n[IPKernelApp] WARNING | Kernel is running over TCP\n",
        "/b/book/acks.md: \x1b[91mWARNING: Executing notebook failed: CellExecutionError",
        " [mystnb.exec]\x1b[39;49;00m\nWARNING: a bare one\nSomething ERROR: not at a start\n",
    ]
    for chunk in chunks:
        tee.write(chunk)
    assert sink.getvalue() == "".join(chunks)
    assert tee.problems == [
        "/b/book/acks.md: WARNING: Executing notebook failed: CellExecutionError [mystnb.exec]",
        "WARNING: a bare one",
    ]


def test_failure_summary_repeats_warnings_and_ends_of_new_tracebacks(tmp_path: Path) -> None:
    import build_book

    reports = tmp_path / "reports"
    (reports / "book").mkdir(parents=True)
    old = reports / "book" / "old.err.log"
    old.write_text("from an earlier build\n")
    os.utime(old, (1, 1))
    trace = [f"frame {i}" for i in range(10)] + ["", "AssertionError: sendfile cost more"]
    (reports / "book" / "perf.err.log").write_text("\n".join(trace) + "\n")
    warnings = [f"x: WARNING: {i}" for i in range(build_book.MAX_WARNINGS + 2)]
    out = build_book.failure_summary(warnings, reports, since=time.time() - 60).splitlines()
    assert all(line.startswith("book: ") for line in out)
    tail = 1 + build_book.REPORT_TAIL_LINES
    assert out[0] == "book: the end of reports/book/perf.err.log:"
    assert out[tail - 1] == "book:   AssertionError: sendfile cost more"
    assert out[tail] == f"book: {len(warnings)} warning(s) and error(s):"
    assert out[tail + 1 :] == [
        *(f"book:   {w}" for w in warnings[: build_book.MAX_WARNINGS]),
        "book:   ... and 2 more above",
    ]
    assert not any("earlier build" in line for line in out)
