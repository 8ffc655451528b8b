"""Run every chapter under papermill with the parameter sets it declares, two at a time.

Usage: python tools/papermill_matrix.py [--only NAME[,NAME...]] [--jobs N] [--list | --write-sets]

A chapter declares its sets in the front matter of book/X.md, beside ``jupytext:`` and ``kernelspec:``;
jupytext carries the key into notebooks/X.ipynb's metadata (jupytext.toml keeps it), where this reads it::

    kafkalite:
      papermill:
      - SEED: 3
      - NUM_RECORDS: 500
        SEED: 5

jupytext takes a paired notebook's metadata from the .ipynb, so `jupytext --sync` would put the old sets
back into the markdown after an edit there: ``--write-sets`` (run by `make sync` first) copies each
chapter's sets from its markdown into its notebook, and the runs take them from the markdown too.

Each set runs as its own papermill process, in notebooks/ like nbval and the book build, with the cell
timeout of _config.yml, into _build/papermill/X-1.ipynb, X-2.ipynb, ... The defaults are not run here:
nbval already runs every chapter with them. Every failure is reported with the chapter, its parameters
and the failing cell's error; the exit status is 1 if any set fails, if a chapter declares fewer than
``MIN_SETS`` sets, or if a set names a parameter the chapter's parameters cell does not assign.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
MIN_SETS = 2  # besides the defaults: another seed and another size, at least
CELL_TIMEOUT_S = 600  # as execute.timeout in _config.yml
META_KEY = "kafkalite"


@dataclass(frozen=True)
class Run:
    chapter: str
    number: int  # 1, 2, ... in the order the chapter lists its sets
    params: dict[str, Any]
    notebook: Path
    output: Path


@dataclass(frozen=True)
class Result:
    run: Run
    seconds: float
    error: str | None  # None: the run succeeded


def parameter_names(nb: nbformat.NotebookNode) -> set[str]:
    """The names the cell tagged ``parameters`` assigns."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            names: set[str] = set()
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
            return names
    return set()


def parameter_sets(nb: nbformat.NotebookNode) -> tuple[list[dict[str, Any] | None], list[str]]:
    """The sets a notebook declares under ``kafkalite.papermill``, and what is wrong with them.

    A set that names a parameter the notebook does not have is None: it would run with a value ignored.
    """
    declared = nb.metadata.get(META_KEY, {}).get("papermill", [])
    if not isinstance(declared, list) or not all(isinstance(s, dict) and s for s in declared):
        return [], [f"{META_KEY}.papermill must be a list of non-empty mappings, got {declared!r}"]
    problems = []
    if len(declared) < MIN_SETS:
        problems.append(
            f"declares {len(declared)} parameter set(s), at least {MIN_SETS} are needed "
            f"(under {META_KEY}: papermill: in the front matter of its book/*.md)"
        )
    known = parameter_names(nb)
    sets: list[dict[str, Any] | None] = []
    for number, params in enumerate(declared, 1):
        unknown = sorted(set(params) - known)
        if unknown:
            problems.append(
                f"set {number} {params} names {unknown}, which the parameters cell does not assign "
                f"(it assigns {sorted(known)})"
            )
        sets.append(None if unknown else dict(params))
    return sets, problems


def failing_cell(output: Path) -> str | None:
    """'cell N (first line): Error: message' for the cell papermill stopped at, from its output.

    N counts the chapter's own cells: papermill's injected parameters and error banners are left out.
    """
    if not output.is_file():
        return None
    nb = nbformat.read(output, as_version=4)
    added = {"injected-parameters", "papermill-error-cell-tag"}
    cells = [c for c in nb.cells if not added & set(c.metadata.get("tags", []))]
    for index, cell in enumerate(cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = next((line for line in cell.source.splitlines() if line.strip()), "")
                return f"cell {index} ({first.strip()[:60]}): {out.ename}: {out.evalue}"
    return None


def execute(run: Run) -> Result:
    """One papermill process for one set; the error says which cell failed and how."""
    run.output.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, str(ROOT / "tools" / "kernel_wait.py"), "papermill",  # papermill, fixed as the build
        str(run.notebook), str(run.output),
        "--parameters_yaml", yaml.safe_dump(run.params, default_flow_style=True).strip(),
        "--cwd", str(run.notebook.parent),
        "--execution-timeout", str(CELL_TIMEOUT_S),
        "--no-progress-bar", "--log-level", "WARNING",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    seconds = time.perf_counter() - start
    if done.returncode == 0:
        return Result(run, seconds, None)
    cell = failing_cell(run.output)
    if cell is None:  # papermill stopped before any cell ran: its own message says why
        tail = [line for line in done.stderr.strip().splitlines() if line.strip()][-3:]
        cell = " / ".join(tail) or f"papermill exited with status {done.returncode}"
    return Result(run, seconds, cell)


def markdown_sets(notebook: Path) -> list[Any] | None:
    """The sets in the front matter of the notebook's chapter (book/X.md), None if it has none."""
    chapter = notebook.parent.parent / "book" / f"{notebook.stem}.md"
    if not chapter.is_file():
        return None
    text = chapter.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None
    header = yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}
    return header.get(META_KEY, {}).get("papermill")


def read_notebook(notebook: Path) -> nbformat.NotebookNode:
    """The notebook, with the parameter sets of its chapter's markdown where that has them."""
    nb = nbformat.read(notebook, as_version=4)
    sets = markdown_sets(notebook)
    if sets is not None:
        nb.metadata.setdefault(META_KEY, {})["papermill"] = sets
    return nb


def write_sets(notebooks: list[Path]) -> list[str]:
    """Copy each chapter's sets from its markdown into its notebook's metadata; the notebooks changed."""
    changed = []
    for notebook in notebooks:
        sets = markdown_sets(notebook)
        nb = nbformat.read(notebook, as_version=4)
        if sets is not None and nb.metadata.get(META_KEY, {}).get("papermill") != sets:
            nb.metadata.setdefault(META_KEY, {})["papermill"] = sets
            nbformat.write(nb, notebook)
            changed.append(notebook.stem)
    return changed


def plan(notebooks: list[Path], out: Path) -> tuple[list[Run], list[str]]:
    """Every run of every notebook, and the problems that fail the matrix before anything runs."""
    runs, problems = [], []
    for notebook in notebooks:
        sets, wrong = parameter_sets(read_notebook(notebook))
        problems += [f"{notebook.stem}: {message}" for message in wrong]
        for number, params in enumerate(sets, 1):
            if params is None:
                continue
            runs.append(Run(notebook.stem, number, params, notebook, out / f"{notebook.stem}-{number}.ipynb"))
    return runs, problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", default=[], help="chapters to run (names, comma-separated)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="papermill processes at once (default 2)")
    parser.add_argument("--list", action="store_true", help="print the runs and the problems, run nothing")
    parser.add_argument(
        "--write-sets",
        action="store_true",
        help="copy the sets from book/X.md into notebooks/X.ipynb, run nothing",
    )
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "papermill", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    notebooks = sorted(args.notebooks.glob("*.ipynb"))
    only = {name.strip() for names in args.only for name in names.split(",") if name.strip()}
    missing = sorted(only - {nb.stem for nb in notebooks})
    if missing:
        parser.error(f"--only names no notebook in {args.notebooks}: {', '.join(missing)}")
    if only:
        notebooks = [nb for nb in notebooks if nb.stem in only]

    if args.write_sets:
        changed = write_sets(notebooks)
        print(f"papermill sets copied into: {', '.join(changed) or 'no notebook (all up to date)'}")
        return 0
    runs, problems = plan(notebooks, args.out)
    if args.list:
        for run in runs:
            print(f"{run.chapter} set {run.number}: {run.params}")
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in as_completed([pool.submit(execute, run) for run in runs]):
                result = future.result()
                where = f"{result.run.chapter} set {result.run.number} {result.run.params}"
                if result.error is None:
                    print(f"ok      {where} in {result.seconds:.0f} s", flush=True)
                    continue
                print(f"FAILED  {where} after {result.seconds:.0f} s: {result.error}", flush=True)
                problems.append(f"{where}: {result.error} (output: {os.path.relpath(result.run.output)})")
    for message in problems:
        print(f"papermill matrix: {message}", file=sys.stderr)
    print(f"papermill matrix: {len(runs)} run(s) in {len(notebooks)} notebook(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
