"""Time each chapter's execution, cell by cell, as the book build runs it (one kernel per chapter).

Usage: python tools/chapter_times.py [--cells N] [--json FILE] notebooks/X.ipynb ...

Prints, per notebook, wall and CPU seconds: for the kernel's start and for the whole, then its N
slowest cells (default 5, by CPU) with their first line. CPU is that of the kernel and every process
it started (a Spark JVM, its Python workers, brokers), read from /proc twice a second (see TreeCPU),
so it still compares chapters on a machine that other work loads, where wall times stretch.
Notebooks are executed in memory: nothing is written back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import kernel_wait
import nbformat
from nbclient import NotebookClient

TIMEOUT_S = 600  # per cell, as in _config.yml
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
kernel_wait.install()


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process itself), or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # fields[1] is ppid; utime and stime are fields 14 and 15 of stat (11 and 12 here).
    return int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S


class TreeCPU:
    """CPU seconds of a process and every descendant seen so far, sampled every ``SAMPLE_S`` seconds.

    Each process counts its own time as last seen, so one that has exited still counts (a Spark JVM
    stopped mid-chapter). A process living less than a sample interval may be missed; counting the
    children's times that a parent reaps (cutime) instead would count each reaped process twice.
    """

    SAMPLE_S = 0.5

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[tuple[int, int], float] = {}  # (pid, parent) -> CPU seconds
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.SAMPLE_S):
            self.sample()

    def sample(self) -> float:
        """Look at the tree now; return the CPU seconds counted so far."""
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (stat := _stat(int(entry))) is not None:
                stats[int(entry)] = stat
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        todo = [self.root]
        with self.lock:
            while todo:
                pid = todo.pop()
                if pid in stats:
                    self.seen[pid, stats[pid][0]] = stats[pid][1]
                    todo.extend(children.get(pid, []))
            return sum(self.seen.values())

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def time_notebook(path: Path) -> dict[str, object]:
    """Execute ``path`` in its own folder; return wall and CPU seconds, whole and per cell."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    start = time.perf_counter()
    cells = []
    with client.setup_kernel():
        tree = TreeCPU(client.km.provisioner.process.pid)
        started = time.perf_counter()
        start_cpu = cpu = tree.sample()
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            before = time.perf_counter()
            client.execute_cell(cell, index)
            now_cpu = tree.sample()
            first = cell.source.splitlines()[0] if cell.source else ""
            cells.append((index, time.perf_counter() - before, now_cpu - cpu, first))
            cpu = now_cpu
        tree.close()
    return {
        "notebook": str(path),
        "kernel_start_s": started - start,
        "kernel_start_cpu_s": start_cpu,
        "total_s": time.perf_counter() - start,
        "total_cpu_s": cpu,
        "cells": cells,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--cells", type=int, default=5, help="slowest cells to show per notebook")
    parser.add_argument("--json", type=Path, help="also write every cell's times to this file")
    args = parser.parse_args(argv)
    results = []
    for path in args.notebooks:
        result = time_notebook(path)
        results.append(result)
        print(
            f"{path}: {result['total_s']:.1f} s wall, {result['total_cpu_s']:.1f} s CPU"
            f" (kernel start {result['kernel_start_s']:.1f} s wall,"
            f" {result['kernel_start_cpu_s']:.1f} s CPU)",
            flush=True,
        )
        for index, wall, cpu, first in sorted(result["cells"], key=lambda c: -c[2])[: args.cells]:
            print(f"    cell {index:3d} {wall:6.1f} s wall {cpu:6.1f} s CPU  {first[:60]}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
