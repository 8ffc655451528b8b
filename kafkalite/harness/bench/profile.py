"""Where the produce path spends its CPU: ``kafkalite bench produce`` under a sampling profiler.

py-spy (benchmark-only, pinned in ``requirements-bench.txt``) samples the Python stacks of a child
process running ``python -m kafkalite bench produce --repeats 1``, so the benchmark runs unchanged:
nothing is instrumented, and the profiler's own cost stays in its process. Of the collapsed stacks
(``py-spy record --format raw``) only the samples taken while ``run_case`` was on a line of its timed
block are kept (``timed_lines``: imports, cluster start, topic creation, the collection before the
clock starts and teardown left out), cut to start at ``run_case``, with line numbers dropped so that
a function is one box. They are written with a ``#`` header that says how they were made.
``kafkalite.viz.flame`` draws them.
"""

from __future__ import annotations

import inspect
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kafkalite.viz.flame import Stacks, format_collapsed, frame_file, frame_name, parse_collapsed

PY_SPY_ENV = "KAFKALITE_PY_SPY"  # where py-spy is, when it is not on PATH nor beside the interpreter
ENTRY = "run_case"  # the produce bench's timed loop, one call per case
DEFAULT_OUT = Path("data/flame_produce.txt")
INSTALL_HINT = "py-spy is not installed: pip install --no-deps -r requirements-bench.txt"

# The produce path's stages by the kafkalite package a sample's innermost kafkalite frame is in.
STAGES: dict[str, str] = {
    "client": "producer: send() and the accumulator",
    "records": "record batch encoding and decoding",
    "storage": "Log.append: validation, segment, index",
    "broker": "broker: produce and fetch handling",
    "net": "simulated network: the event queue",
    "host": "cluster facade",
    "harness": "the benchmark's own loop",
}


def timed_lines() -> range:
    """The lines of ``run_case`` from the one that starts its clock to the one that reads it: where a
    sample counts toward the case's time."""
    from kafkalite.harness.bench.produce import run_case  # deferred: the CLI imports this module

    lines, first = inspect.getsourcelines(run_case)
    starts = [i for i, line in enumerate(lines) if "t0 = time.perf_counter()" in line]
    stops = [i for i, line in enumerate(lines) if "time.perf_counter() - t0" in line]
    if len(starts) != 1 or len(stops) != 1 or stops[0] <= starts[0]:
        raise RuntimeError("run_case no longer has one `t0 = time.perf_counter()` ... `- t0` block")
    return range(first + starts[0], first + stops[0] + 1)


_LINE = re.compile(r":\d+\)$")


def timed_stacks(stacks: Stacks, lines: range) -> Stacks:
    """The samples in which the outermost ``run_case`` frame was on one of ``lines``, cut to start
    there, every frame without its line number (``f (file.py:12)`` -> ``f (file.py)``)."""
    out: Stacks = {}
    for frames, n in stacks.items():
        for i, frame in enumerate(frames):
            if frame_name(frame) == ENTRY:
                line = frame.rpartition(":")[2].rstrip(")")
                if line.isdigit() and int(line) in lines:
                    key = tuple(_LINE.sub(")", f) for f in frames[i:])
                    out[key] = out.get(key, 0) + n
                break
    return out


def find_py_spy() -> str | None:
    """The py-spy binary: ``$KAFKALITE_PY_SPY``, else on PATH, else beside this interpreter (a venv
    whose bin/ is not on PATH)."""
    env = os.environ.get(PY_SPY_ENV)
    if env:
        return env if Path(env).is_file() else None
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else None


def stage(frames: tuple[str, ...]) -> str:
    """The produce-path stage a sample belongs to: the package of its innermost kafkalite frame
    (time in the standard library or a C extension counts for the kafkalite code that called it)."""
    for frame in reversed(frames):
        parts = frame_file(frame).split("/")
        if len(parts) > 1 and parts[0] == "kafkalite":
            return STAGES.get(parts[1], f"kafkalite.{parts[1]}")
    return "outside kafkalite"


def stage_shares(stacks: Stacks) -> dict[str, float]:
    """Share of all samples per stage (``stage``), largest first, ties by name."""
    total = sum(stacks.values()) or 1
    counts: dict[str, int] = {}
    for frames, n in stacks.items():
        key = stage(frames)
        counts[key] = counts.get(key, 0) + n
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


@dataclass
class ProfileResult:
    path: Path
    samples: int
    stacks: int
    seconds: float
    command: list[str]

    def summary(self) -> str:
        return (
            f"wrote {self.path}: {self.samples:,} samples under {ENTRY} in {self.stacks:,} distinct "
            f"stacks ({self.seconds:.1f} s to record)"
        )


def record_produce_profile(
    out: str | Path = DEFAULT_OUT,
    records: int = 1_000_000,
    *,
    rate: int = 250,
    seed: int = 0,
    py_spy: str | None = None,
) -> ProfileResult:
    """Run ``kafkalite bench produce`` (one run of each case) under py-spy at ``rate`` samples per
    second and store the collapsed stacks under ``run_case`` in ``out``."""
    out = Path(out)
    binary = py_spy or find_py_spy()
    if binary is None:
        raise RuntimeError(INSTALL_HINT)
    load = os.getloadavg()[0]  # the profile's shape depends on what else ran: the header says
    bench = [sys.executable, "-m", "kafkalite", "bench", "produce"]
    bench += ["--records", str(records), "--repeats", "1", "--seed", str(seed)]
    with tempfile.TemporaryDirectory(prefix="kafkalite-profile-") as tmp:
        raw = Path(tmp) / "stacks.txt"
        command = [binary, "record", "--format", "raw", "--rate", str(rate)]
        command += ["--output", str(raw), "--", *bench]
        t0 = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t0
        if done.returncode != 0 or not raw.is_file():
            raise RuntimeError(f"py-spy failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        stacks = timed_stacks(parse_collapsed(raw.read_text().splitlines()), timed_lines())
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    shown = ["py-spy", *command[1 : command.index("--") + 1], "python", *bench[1:]]
    shown[shown.index("--output") + 1] = "<raw>"
    header = [
        f"# collapsed stacks of `kafkalite bench produce`: the samples in {ENTRY}'s timed block, "
        f"cut to the frames under {ENTRY}, line numbers dropped",
        "# re-record: python -m kafkalite bench profile",
        f"# recorded {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC with "
        f"{version.stdout.strip() or 'py-spy'} on Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average {load:.2f} at the start",
        f"# command: {' '.join(shown)}",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(header) + "\n" + format_collapsed(stacks))
    return ProfileResult(out, sum(stacks.values()), len(stacks), seconds, command)
