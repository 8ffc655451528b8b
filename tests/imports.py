"""What importing some modules drags in, asked of a fresh interpreter (this one has imported everything)."""

from __future__ import annotations

import subprocess
import sys


def modules_loaded(
    statement: str,
    *,
    roots: tuple[str, ...] = (),
    prefixes: tuple[str, ...] = (),
    suffixes: tuple[str, ...] = (),
) -> list[str]:
    """The modules a fresh Python has loaded after running ``statement`` whose top-level package is one of
    ``roots``, or whose name starts with one of ``prefixes`` or ends with one of ``suffixes``; sorted."""
    code = (
        f"import sys\n{statement}\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r}"
        f" or m.startswith({prefixes!r}) or m.endswith({suffixes!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.split()
