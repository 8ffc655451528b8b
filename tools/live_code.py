"""Sphinx extension: the "Live code" button runs a page's cells on a local Jupyter server.

sphinx-book-theme puts a "Live Code" entry in each chapter's launch menu when `launch_buttons.thebe` is
on (_config.yml); it calls ``initThebe()``. tools/static/live-code.js defines that function: it loads
thebe from the book's own _static/thebe/ (vendored by tools/vendor_assets.sh) and connects to the server
`make live` starts on 127.0.0.1 (tools/live.py), whose address and token `make live` hands to the page.
sphinx-thebe's own loader and configuration, which point at a CDN and mybinder.org, are dropped by
tools/offline_html.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"


def add_static(app: Any) -> None:
    if str(STATIC) not in app.config.html_static_path:  # tools/page_style.py adds it too
        app.config.html_static_path.append(str(STATIC))


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", add_static)
    app.add_js_file("live-code.js", defer="defer")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
