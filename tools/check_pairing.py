"""Check that book/X.md and notebooks/X.ipynb hold the same chapter.

Usage: python tools/check_pairing.py        (from the repository root; exit status 1 on any mismatch)

The markdown is regenerated from the notebook with jupytext's Python API and compared with book/X.md.
Neither `jupytext --diff` (always exits 0) nor `jupytext --sync` (trusts file times, meaningless in a fresh
clone) can tell, and `jupytext --to md:myst --output -` drops the `formats:` line of the header (stdout
is not one of the paired paths), so its output never equals a paired .md file.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import jupytext
from jupytext.config import load_jupytext_config

ROOT = Path(__file__).resolve().parent.parent


def regenerated_markdown(notebook: Path) -> str:
    """The MyST markdown jupytext writes for ``notebook`` (outputs are not part of it).

    With the repository's jupytext.toml, as `jupytext --sync` uses it: its metadata filter keeps the
    chapters' ``kafkalite:`` key in the markdown header.
    """
    config = load_jupytext_config(str(ROOT))
    return jupytext.writes(jupytext.read(notebook), fmt="md:myst", config=config)


def problems(root: Path = ROOT) -> list[str]:
    """One message per unpaired or out-of-sync chapter."""
    found = []
    chapters = {p.stem for p in (root / "book").glob("*.md")}
    notebooks = {p.stem for p in (root / "notebooks").glob("*.ipynb")}
    for name in sorted(notebooks - chapters):
        found.append(f"notebooks/{name}.ipynb has no book/{name}.md")
    for name in sorted(chapters):
        md, nb = root / "book" / f"{name}.md", root / "notebooks" / f"{name}.ipynb"
        if name not in notebooks:
            found.append(f"book/{name}.md has no paired notebooks/{name}.ipynb (run make sync)")
            continue
        expected, actual = regenerated_markdown(nb), md.read_text(encoding="utf-8")
        if expected != actual:
            diff = difflib.unified_diff(
                actual.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile=f"book/{name}.md",
                tofile=f"markdown of notebooks/{name}.ipynb",
            )
            found.append(
                f"book/{name}.md and notebooks/{name}.ipynb differ (run make sync):\n{''.join(diff)}"
            )
    return found


def main() -> int:
    found = problems()
    for message in found:
        print(message, file=sys.stderr)
    if not found:
        print("book/*.md and notebooks/*.ipynb are in sync")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
