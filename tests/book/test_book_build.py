"""The book build reads (executes) chapters in parallel: every Sphinx extension it loads must allow it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import parallel_read  # noqa: E402


def test_one_chapter_per_task() -> None:
    assert parallel_read.one_per_task(["a", "b", "c"], 2) == [["a"], ["b"], ["c"]]


def test_named_chapters_move_to_the_front_in_their_order() -> None:
    class App:
        class config:
            parallel_read_first = ["book/spark", "book/missing", "book/transactions"]

    docnames = ["book/acks", "book/spark", "book/transactions", "book/wire"]
    parallel_read.longest_first(App, None, docnames)
    assert docnames == ["book/spark", "book/transactions", "book/acks", "book/wire"]


def test_every_extension_allows_parallel_reading(tmp_path: Path) -> None:
    """With _config.yml as it is, Sphinx would read in parallel rather than fall back to one chapter at a time."""
    from jupyter_book.config import get_final_config
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    config, _ = get_final_config(
        user_yaml=ROOT / "_config.yml",
        cli_config={"latex_individualpages": False, "external_toc_path": str(ROOT / "_toc.yml")},
        sourcedir=ROOT,
        use_external_toc=True,
    )
    for name in config["parallel_read_first"]:
        assert (ROOT / f"{name}.md").is_file(), f"parallel_read_first names {name}, which is not a chapter"
    with patch_docutils(None), docutils_namespace():
        app = Sphinx(ROOT, None, tmp_path / "html", tmp_path / "doctrees", "html", confoverrides=config,
                     status=None, parallel=2)  # fmt: skip
        unsafe = [
            n for n, e in app.extensions.items() if not (e.parallel_read_safe and e.parallel_write_safe)
        ]
        assert unsafe == []
        assert app.is_parallel_allowed("read") and app.is_parallel_allowed("write")


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_build_book_refuses_no_jobs(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    import build_book

    with pytest.raises(SystemExit):
        build_book.main(["--jobs", jobs])
    assert "--jobs must be at least 1" in capsys.readouterr().err
