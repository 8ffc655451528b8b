"""Sphinx extension: keep the built pages free of CDN references the book does not use, and quiet.

Jupyter Book always loads sphinx-thebe, which writes the address of the thebe bundle on a public CDN
into every page, to be fetched when a reader presses a "launch thebe" button. This book turns those
buttons off (launch_buttons.thebe: false in _config.yml), so the address and the thebe loader script
are dead weight that an offline check would rightly flag; this drops both from each page.
MathJax is served from _vendor/ instead (see _config.yml).

It also names the theme's colour mode: pydata-sphinx-theme leaves it empty, and then logs "Got invalid
theme mode" as an error on every page a browser opens for the first time. "auto" is what it falls back to.
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


def default_colour_mode(app: Any, config: Any) -> None:
    # pydata-sphinx-theme reads it from html_context, not from html_theme_options.
    config.html_context.setdefault("default_mode", "auto")


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", default_colour_mode)
    app.connect("html-page-context", drop_thebe, priority=900)  # after the extensions that add scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}
