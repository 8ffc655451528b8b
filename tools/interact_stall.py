"""Reproduce the stall tools/kernel_wait.py fixes: ipywidgets cells that wait out the cell timeout.

Usage: python tools/interact_stall.py [--cells 100] [--rounds 3] [--timeout 30] [--without-fix]

Runs notebooks of ``--cells`` cells, each an ``ipywidgets.interact`` that draws a small figure (like the
partitioning chapter's last cell), through nbclient as the book build does, and lists every cell that
took longer than a third of ``--timeout``. Without the fix, on a loaded machine, some cells take exactly
the timeout and then succeed: the reply had arrived, but the poll waiting for it was never woken. With
the fix (the default), none does. On an idle machine the stall is rare: load the machine first.
"""

from __future__ import annotations

import argparse
import sys
import time

import kernel_wait
import nbformat
from nbclient import NotebookClient

SETUP = "import ipywidgets as widgets\nimport matplotlib.pyplot as plt"
CELL = """\
def show(x):
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, x])
    plt.show()


widgets.interact(show, x=widgets.IntSlider(value={value}, min=0, max=100));"""


def run(cells: int, timeout: int) -> tuple[float, list[tuple[int, float]]]:
    """One notebook of ``cells`` interact cells; its duration and its slow cells (index, seconds)."""
    source = [SETUP] + [CELL.format(value=i % 100) for i in range(cells)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in source])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    started: dict[int, float] = {}
    slow: list[tuple[int, float]] = []

    def on_start(cell: nbformat.NotebookNode, cell_index: int) -> None:
        started[cell_index] = time.perf_counter()

    def on_done(cell: nbformat.NotebookNode, cell_index: int, execute_reply: dict) -> None:
        took = time.perf_counter() - started.pop(cell_index)
        if took > timeout / 3:
            slow.append((cell_index, round(took, 1)))

    start = time.perf_counter()
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", on_cell_execute=on_start, on_cell_executed=on_done
    )
    client.execute()
    return time.perf_counter() - start, slow


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=30, help="nbclient's cell timeout, seconds")
    parser.add_argument("--without-fix", action="store_true", help="nbclient as it comes")
    args = parser.parse_args(argv)
    if not args.without_fix:
        kernel_wait.install()
    stalls = 0
    for number in range(1, args.rounds + 1):
        took, slow = run(args.cells, args.timeout)
        stalls += len(slow)
        print(
            f"round {number}: {args.cells} cells in {took:.1f} s, slow cells (index, s): {slow}", flush=True
        )
    fix = "without the fix" if args.without_fix else "with tools/kernel_wait.py"
    print(f"{stalls} slow cells in {args.rounds * args.cells} ({fix})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
