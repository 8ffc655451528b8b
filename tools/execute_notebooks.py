"""Execute notebooks in place so that their stored outputs are what nbval compares against.

Usage: python tools/execute_notebooks.py notebooks/*.ipynb

Like `jupyter execute --inplace`, but without per-cell timestamps in the cell metadata (nbclient's
record_timing), so re-executing an unchanged chapter leaves its notebook unchanged in git.
Each notebook runs in its own folder, as it does under nbval, papermill and the book build.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import kernel_wait
import nbformat
from nbclient import NotebookClient

TIMEOUT_S = 600  # per cell, as in _config.yml
kernel_wait.install()  # as the book build does: a lost wake-up never makes a cell wait out its timeout


def execute(path: Path) -> float:
    """Run every cell of the notebook at ``path`` and write it back with its outputs; return seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
        record_timing=False,
        store_widget_state=True,
        coalesce_streams=True,  # one stdout output per cell, however the kernel flushed it
    )
    client.execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    for name in argv:
        path = Path(name)
        if path.suffix != ".ipynb" or not path.is_file():
            print(f"not a notebook file: {name}", file=sys.stderr)
            return 2
        print(f"{path}: executed in {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
