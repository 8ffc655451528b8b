"""Sphinx extension: keep the built pages free of CDN and Binder references, and quiet in a browser.

Jupyter Book always loads sphinx-thebe, which writes the address of the thebe bundle on a public CDN
into every page, a loader that fetches it from there, and a thebe configuration that starts a kernel
on mybinder.org. This book runs its "Live code" button against a local Jupyter server instead, with
thebe served from the book itself (tools/live_code.py), so this drops all three from each page.
MathJax and thebe are served from _vendor/ instead (see _config.yml and tools/vendor_assets.sh).

It also names the theme's colour mode: pydata-sphinx-theme leaves it empty, and then logs "Got invalid
theme mode" as an error on every page a browser opens for the first time. "auto" is what it falls back to.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes

THEBE_MARKERS = ("THEBE_JS_URL", "sphinx-thebe.js")
# The raw HTML sphinx-thebe appends to every doctree: its thebe configuration and the kernel name.
THEBE_RAW_MARKERS = ("text/x-thebe-config", "kernelName = ")


def _is_thebe(script: Any) -> bool:
    filename = getattr(script, "filename", None) or ""
    body = (getattr(script, "attributes", None) or {}).get("body", "")
    return any(marker in filename or marker in body for marker in THEBE_MARKERS)


def drop_thebe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if "script_files" in context:
        context["script_files"] = [s for s in context["script_files"] if not _is_thebe(s)]


def drop_thebe_config(app: Any, doctree: nodes.document, docname: str) -> None:
    for node in list(doctree.findall(nodes.raw)):
        if node.get("format") == "html" and any(m in node.astext() for m in THEBE_RAW_MARKERS):
            node.parent.remove(node)


def default_colour_mode(app: Any, config: Any) -> None:
    # pydata-sphinx-theme reads it from html_context, not from html_theme_options.
    config.html_context.setdefault("default_mode", "auto")


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", default_colour_mode)
    app.connect("html-page-context", drop_thebe, priority=900)  # after the extensions that add scripts
    app.connect("doctree-resolved", drop_thebe_config, priority=900)  # after sphinx-thebe appends it
    return {"parallel_read_safe": True, "parallel_write_safe": True}
