"""tools/papermill_matrix.py: every chapter runs with the parameter sets its front matter declares."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import papermill_matrix  # noqa: E402


def notebook(folder: Path, name: str, sets: object) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if sets is not None:
        nb.metadata["kafkalite"] = {"papermill": sets}
    params = nbformat.v4.new_code_cell("SEED = 1\nSIZE: int = 10  # records")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell('assert SIZE < 100, f"SIZE {SIZE} is too large"')]
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def test_parameter_sets_are_checked_before_anything_runs(tmp_path: Path) -> None:
    notebook(tmp_path, "none", None)
    notebook(tmp_path, "one", [{"SEED": 2}])
    notebook(tmp_path, "typo", [{"SEED": 2}, {"SIZ": 5}])
    notebook(tmp_path, "scalar", {"SEED": 2})
    notebook(tmp_path, "fine", [{"SEED": 2}, {"SEED": 3, "SIZE": 20}])
    runs, problems = papermill_matrix.plan(sorted(tmp_path.glob("*.ipynb")), tmp_path / "out")
    assert [(r.chapter, r.number, r.params) for r in runs if r.chapter == "fine"] == [
        ("fine", 1, {"SEED": 2}),
        ("fine", 2, {"SEED": 3, "SIZE": 20}),
    ]
    assert [r.output.name for r in runs if r.chapter == "fine"] == ["fine-1.ipynb", "fine-2.ipynb"]
    assert [r.number for r in runs if r.chapter == "typo"] == [1], "a set with a typo does not run"
    text = "\n".join(problems)
    assert "none: declares 0 parameter set(s), at least 2" in text
    assert "one: declares 1 parameter set(s)" in text
    assert "typo: set 2 {'SIZ': 5} names ['SIZ']" in text and "assigns ['SEED', 'SIZE']" in text
    assert "scalar: kafkalite.papermill must be a list" in text
    assert not [p for p in problems if p.startswith("fine")]


def test_a_failing_set_is_reported_with_chapter_parameters_and_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook(tmp_path, "good", [{"SEED": 2}, {"SIZE": 20}])
    notebook(tmp_path, "bad", [{"SEED": 2}, {"SIZE": 500}])
    notebook(tmp_path, "skipped", [{"SEED": 2}])
    argv = ["--notebooks", str(tmp_path), "--out", str(tmp_path / "out"), "--only", "good,bad"]
    assert papermill_matrix.main(argv) == 1
    out, err = capsys.readouterr()
    assert "ok      good set 1 {'SEED': 2}" in out and "ok      good set 2 {'SIZE': 20}" in out
    assert "ok      bad set 1 {'SEED': 2}" in out
    assert "bad set 2 {'SIZE': 500}: cell 1 (assert SIZE < 100" in err, "cells of the chapter count"
    assert "AssertionError: SIZE 500 is too large" in err
    assert "skipped" not in out + err
    assert (tmp_path / "out" / "good-2.ipynb").is_file()


def test_only_must_name_notebooks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notebook(tmp_path, "good", [{"SEED": 2}, {"SEED": 3}])
    with pytest.raises(SystemExit):
        papermill_matrix.main(["--notebooks", str(tmp_path), "--only", "good,nope", "--list"])
    assert (
        "--only names no notebook" in capsys.readouterr().err and "nope" in capsys.readouterr().err + "nope"
    )


def test_the_markdown_sets_win_and_write_sets_copies_them(tmp_path: Path) -> None:
    """jupytext keeps a paired notebook's own metadata: the sets edited in book/X.md must be copied."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book").mkdir()
    path = notebook(tmp_path / "notebooks", "chapter", [{"SEED": 2}, {"SEED": 3}])
    (tmp_path / "book" / "chapter.md").write_text(
        "---\nkafkalite:\n  papermill:\n  - SEED: 5\n  - SIZE: 20\n    SEED: 6\n---\n\n# Chapter\n",
        encoding="utf-8",
    )
    runs, problems = papermill_matrix.plan([path], tmp_path / "out")
    assert [r.params for r in runs] == [{"SEED": 5}, {"SIZE": 20, "SEED": 6}] and not problems
    assert papermill_matrix.write_sets([path]) == ["chapter"]
    stored = nbformat.read(path, as_version=4).metadata["kafkalite"]["papermill"]
    assert stored == [{"SEED": 5}, {"SEED": 6, "SIZE": 20}]
    assert papermill_matrix.write_sets([path]) == [], "nothing to copy the second time"
