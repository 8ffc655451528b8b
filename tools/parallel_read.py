"""Sphinx extension: let Sphinx read (and so execute) the book's chapters side by side.

Reading a chapter means executing it, so nearly all of a build is chapters waiting on their kernels.
`tools/build_book.py` asks Sphinx for one reading process per core; three things stood in the way:

- sphinx-external-toc always loads sphinx-multitoc-numbering, which does not say whether it is safe for
  parallel reading, so Sphinx assumed not and read one chapter at a time. It is safe: it only replaces the
  toctree collector's section numbering, which runs once in the main process after every chapter has been
  read and merged. This extension says so on its behalf.
- Sphinx hands each process a fixed slice of the chapters in name order. One slice can then hold the
  longest chapters while the other process sits idle. Here each chapter is its own task, so a process
  that finishes takes the next chapter.
- Chapters should start longest first, so that the short ones fill the gaps at the end instead of a long
  one running alone. ``parallel_read_first`` (``_config.yml``) lists chapters from the longest to the
  shortest execution (``tools/chapter_times.py`` measures them); chapters it does not list start after
  them, in name order. Sphinx starts its first ``nproc`` tasks in the order given but then takes the
  next task from the *back* of its queue (``ParallelTasks`` pops its waiting tasks last-in first-out), so
  the queue handed to Sphinx is the first ``nproc`` chapters followed by the others reversed. (Before,
  every chapter after the first two started in reverse name order: the acks and controller chapters,
  with a Spark JVM each, last.)
"""

from __future__ import annotations

from typing import Any

import sphinx.builders

VOUCHED_FOR = ("sphinx_multitoc_numbering",)


def one_per_task(docnames: list[str], nproc: int, maxbatch: int = 10) -> list[list[str]]:
    """Sphinx's ``make_chunks`` with one document per chunk, queued so that Sphinx starts them in order."""
    head, rest = docnames[:nproc], docnames[nproc:]
    return [[name] for name in head + rest[::-1]]


def longest_first(app: Any, env: Any, docnames: list[str]) -> None:
    """Order ``docnames`` as the chapters should start: ``parallel_read_first``'s, then the others."""
    listed = [name for name in app.config.parallel_read_first if name in docnames]
    docnames[:] = listed + [name for name in docnames if name not in listed]


def setup(app: Any) -> dict[str, Any]:
    for name in VOUCHED_FOR:
        extension = app.extensions.get(name)
        if extension is not None:
            extension.parallel_read_safe = True
            extension.parallel_write_safe = True
    app.add_config_value("parallel_read_first", [], "env", types=[list])
    app.connect("env-before-read-docs", longest_first)
    if app.parallel > 1:
        # Sphinx 7.4 looks the function up in its builders module when it reads in parallel.
        sphinx.builders.make_chunks = one_per_task
    return {"parallel_read_safe": True, "parallel_write_safe": True}
