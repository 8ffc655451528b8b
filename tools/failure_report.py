"""Say again, at the end of a failed `make test`, which steps failed and why.

Usage: python tools/failure_report.py REPORTS_DIR

`make test` runs its steps with --keep-going; each step's output is also written to REPORTS_DIR/STEP.log,
and a failed step's name to REPORTS_DIR/failed (see `logged` in the Makefile). A CI log often shows only
its tail, where the browser test's output sits above the cause. This prints, for each failed step, the
lines of its log that name what failed: pytest's short summary (``FAILED ...``, ``ERROR ...``), the
papermill matrix's problems, the strict book build's warnings and tracebacks (``book: ...``), or else the
step's last lines.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# a pytest short-summary line, a papermill matrix line, a line of the book build's failure summary
CAUSE = re.compile(r"^(FAILED|ERROR)\b|^papermill matrix: |^book: ")
MAX_LINES = 14  # per step: a CI log's tail must still hold every failed step's cause
MAX_WIDTH = 300
FALLBACK_LINES = 5


def causes(log: str) -> list[str]:
    """The lines of a step's ``log`` that say what failed, at most ``MAX_LINES``, each cut to ``MAX_WIDTH``."""
    lines = log.splitlines()
    picked = [line for line in lines if CAUSE.search(line)]
    if not picked:
        picked = [line for line in lines if line.strip()][-FALLBACK_LINES:]
    if len(picked) > MAX_LINES:
        more = len(picked) - MAX_LINES + 1
        picked = [*picked[: MAX_LINES - 1], f"... and {more} more line(s) in the step's log"]
    return [line if len(line) <= MAX_WIDTH else line[: MAX_WIDTH - 3] + "..." for line in picked]


def report(reports: Path) -> str:
    """The summary of the failed steps noted in ``reports``."""
    failed_file = reports / "failed"
    failed = failed_file.read_text().split() if failed_file.is_file() else []
    if not failed:
        return "make test: a step failed before it could note itself (see above)"
    out = [f"make test: {len(failed)} step(s) failed: {', '.join(failed)}"]
    for step in failed:
        log = reports / f"{step}.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        out.append(f"--- {step} ({log}):")
        out += [f"  {line}" for line in causes(text)] or ["  (no output)"]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    print(report(Path(argv[0])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
