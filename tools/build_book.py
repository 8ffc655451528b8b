"""Build the book with its chapters executed in parallel.

Usage: python tools/build_book.py [--strict] [--jobs N]

`jupyter-book build .` reads (and so executes) one chapter at a time. Almost all of a build is chapters
waiting on their kernels, one core each, so on a 2-core machine half the machine sits idle. This runs the
same build, through the same `jupyter_book.sphinx.build_sphinx` with the same `_config.yml` and `_toc.yml`,
but lets Sphinx read in ``--jobs`` processes (Sphinx's ``-j``); myst-nb declares itself safe for that.

Chapters that run Spark share one Spark Connect server, started here for the build
(``kafkalite.spark.connect_server``), instead of starting a driver JVM each: a JVM's start and the
compiling of Spark's hot code are then paid once, not ten times (``--spark local`` builds the old way).

``--strict`` is what `make test` builds with: warnings are errors (``-W``), references are checked
(``-n``), and every warning is reported before the build fails (``--keep-going``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import re
import signal
import sys
import time
from pathlib import Path

from jupyter_book.sphinx import build_sphinx

from kafkalite.spark.connect_server import REMOTE_ENV, ConnectServer

ROOT = Path(__file__).resolve().parent.parent
# One chapter more than there are cores: a chapter often waits (on a client's timeout, a broker process,
# a JVM), and a reader per core then leaves a core idle; with a third reader on two cores the build went
# from 401 s to 373 s, the cores 97-99% busy. Beyond a few chapters at a time, more processes only add
# memory.
MAX_DEFAULT_JOBS = 4


def chapter_runtimes(doctrees: Path) -> dict[str, float]:
    """Seconds each chapter took to execute in the build whose environment is in ``doctrees``, as myst-nb
    recorded them, longest first; empty if there is no such environment."""
    try:
        with (doctrees / "environment.pickle").open("rb") as f:
            env = pickle.load(f)
    except Exception:  # noqa: BLE001 - a report only: it must never fail a build that succeeded
        return {}
    runtimes = {}
    for docname, data in getattr(env, "nb_metadata", {}).items():
        runtime = (data.get("exec_data") or {}).get("runtime")
        if runtime is not None:
            runtimes[docname] = float(runtime)
    return dict(sorted(runtimes.items(), key=lambda item: -item[1]))


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Sphinx's own problems ("path:line: WARNING: ..."), not a kernel's or a JVM's log lines on the same stream
PROBLEM = re.compile(r"(^|: )(WARNING|ERROR|CRITICAL): ")
REPORT_TAIL_LINES = 6  # a traceback ends with the failing line and the exception
MAX_WARNINGS = 5


class ProblemTee:
    """A text stream that passes everything to ``stream`` and keeps the lines that are Sphinx warnings or
    errors, so that a failed build can say again, at its end, what failed: a CI log shows its tail, and a
    chapter's failure is otherwise hundreds of lines above it."""

    def __init__(self, stream: object) -> None:
        self.stream = stream
        self.problems: list[str] = []
        self._partial = ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            plain = ANSI.sub("", line)
            if PROBLEM.search(plain):
                self.problems.append(plain)
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def failure_summary(problems: list[str], reports: Path, since: float) -> str:
    """What a failed build reports last: the end of each traceback myst-nb saved for a chapter whose
    execution failed (``reports/**/*.err.log``, written since ``since``), then the warnings, the first
    ``MAX_WARNINGS`` of them (one failed chapter can leave many, such as every glossary term it defined).
    Every line starts with ``book:``, for ``tools/failure_report.py`` to pick out."""
    out = []
    logs = sorted(reports.rglob("*.err.log")) if reports.is_dir() else []
    for log in (log for log in logs if log.stat().st_mtime >= since):
        lines = [ANSI.sub("", t) for t in log.read_text(errors="replace").splitlines() if t.strip()]
        out.append(f"book: the end of {log.relative_to(reports.parent)}:")
        out += [f"book:   {t}" for t in lines[-REPORT_TAIL_LINES:]]
    out.append(f"book: {len(problems)} warning(s) and error(s):")
    out += [f"book:   {p}" for p in problems[:MAX_WARNINGS]]
    if len(problems) > MAX_WARNINGS:
        out.append(f"book:   ... and {len(problems) - MAX_WARNINGS} more above")
    return "\n".join(out)


def build(args: argparse.Namespace, overrides: dict) -> object:
    """A status code, or the exception that stopped Sphinx (already reported on stderr)."""
    return build_sphinx(
        ROOT,
        ROOT / "_build" / "html",
        use_external_toc=True,
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides=overrides,
        builder="html",
        warningiserror=args.strict,
        keep_going=args.strict,
        jobs=args.jobs,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(MAX_DEFAULT_JOBS, len(os.sched_getaffinity(0)) + 1),
        help=f"processes that read (execute) chapters at once; default: cores + 1, at most {MAX_DEFAULT_JOBS}",
    )
    parser.add_argument(
        "--spark",
        choices=("connect", "local"),
        default="connect",
        help="connect (default): chapters share one Spark Connect server; local: a driver JVM each",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    overrides = {"external_toc_path": (ROOT / "_toc.yml").as_posix(), "latex_individualpages": False}
    if args.strict:
        overrides["nitpicky"] = True
    # A build stopped with SIGTERM unwinds too, so the Spark Connect server it started goes with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    start = time.perf_counter()
    started_at = time.time()
    with contextlib.ExitStack() as stack:
        if args.spark == "connect":
            server = stack.enter_context(ConnectServer(cores=2))
            os.environ[REMOTE_ENV] = server.url  # the chapters' kernels inherit it
        tee = ProblemTee(sys.stderr)
        with contextlib.redirect_stderr(tee):  # build_sphinx gives Sphinx sys.stderr as it is then
            result = build(args, overrides)
    took = time.perf_counter() - start
    failed = isinstance(result, BaseException) or result != 0
    if failed:
        reports = ROOT / "_build" / "html" / "reports"
        print(failure_summary(tee.problems, reports, started_at), flush=True)
    print(f"book: {'FAILED' if failed else 'built'} in {took:.0f} s with {args.jobs} jobs", flush=True)
    if not failed:
        # What parallel_read_first in _config.yml should list, longest first (on this machine, this run).
        runtimes = chapter_runtimes(ROOT / "_build" / ".doctrees")
        print("book: chapters executed in", ", ".join(f"{d} {s:.0f} s" for d, s in runtimes.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
