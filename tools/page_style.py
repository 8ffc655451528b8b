"""Sphinx extension: the book's own page style, tools/static/page.css (code cells sized so 88 columns
fit the text column)."""

from __future__ import annotations

from typing import Any

from live_code import add_static


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", add_static)
    app.add_css_file("page.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
