"""Sphinx extension: keep the built pages free of CDN references the book does not use.

Jupyter Book always loads sphinx-thebe, which writes the address of the thebe bundle on a public CDN
into every page, to be fetched when a reader presses a "launch thebe" button. This book turns those
buttons off (launch_buttons.thebe: false in _config.yml), so the address and the thebe loader script
are dead weight that an offline check would rightly flag; this drops both from each page.
MathJax and the widget embedder are served from _vendor/ instead (see _config.yml).
"""

from __future__ import annotations

from typing import Any

THEBE_MARKERS = ("THEBE_JS_URL", "sphinx-thebe.js")


def _is_thebe(script: Any) -> bool:
    filename = getattr(script, "filename", None) or ""
    body = (getattr(script, "attributes", None) or {}).get("body", "")
    return any(marker in filename or marker in body for marker in THEBE_MARKERS)


def drop_thebe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if "script_files" in context:
        context["script_files"] = [s for s in context["script_files"] if not _is_thebe(s)]


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", drop_thebe, priority=900)  # after the extensions that add scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}
