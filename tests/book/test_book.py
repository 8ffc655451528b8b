"""Fast checks of the book's sources: table of contents, book/ <-> notebooks/ pairing, stored outputs.

These read files only (no kernel is started); nbval and the book build do the executing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from jupytext.config import load_jupytext_config

ROOT = Path(__file__).resolve().parents[2]


def toc_files() -> list[str]:
    """Every `file:` of _toc.yml (root first), as paths relative to the repository without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))
            for part in entry.get("parts", []):
                walk(part.get("chapters", []))

    walk(toc.get("chapters", []))
    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    return files


CHAPTERS = [Path(f).name for f in toc_files()]


def notebook_of(chapter: str) -> Path:
    return ROOT / "notebooks" / f"{chapter}.ipynb"


def test_toc_lists_only_book_chapters() -> None:
    files = toc_files()
    assert files[0] == "book/intro"
    assert len(set(files)) == len(files), f"a chapter listed twice in _toc.yml: {files}"
    for f in files:
        assert f.startswith("book/"), f"_toc.yml entry outside book/: {f}"


def test_every_book_chapter_is_in_the_toc() -> None:
    on_disk = {p.stem for p in (ROOT / "book").glob("*.md")}
    assert on_disk <= set(CHAPTERS), f"chapters missing from _toc.yml: {sorted(on_disk - set(CHAPTERS))}"


def test_every_notebook_has_its_chapter() -> None:
    orphans = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb") if p.stem not in CHAPTERS)
    assert not orphans, f"notebooks without a chapter in _toc.yml: {orphans}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_exists_and_is_paired(chapter: str) -> None:
    md = ROOT / "book" / f"{chapter}.md"
    assert md.is_file(), f"_toc.yml lists book/{chapter} but {md.relative_to(ROOT)} does not exist"
    assert notebook_of(chapter).is_file(), (
        f"book/{chapter}.md has no notebooks/{chapter}.ipynb: run make sync"
    )


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_pairing_in_sync(chapter: str) -> None:
    """The markdown jupytext writes for the notebook is exactly book/<chapter>.md."""
    nb_path = notebook_of(chapter)
    if not nb_path.is_file():
        pytest.fail(f"notebooks/{chapter}.ipynb missing: run make sync")
    config = load_jupytext_config(str(ROOT))  # as `jupytext --sync` reads it (the metadata filter)
    regenerated = jupytext.writes(jupytext.read(nb_path), fmt="md:myst", config=config)
    actual = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    assert regenerated == actual, f"book/{chapter}.md and notebooks/{chapter}.ipynb differ: run make sync"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_notebook_has_one_parameters_cell_and_stored_outputs(chapter: str) -> None:
    nb_path = notebook_of(chapter)
    if not nb_path.is_file():
        pytest.fail(f"notebooks/{chapter}.ipynb missing: run make sync")
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{chapter}: {len(tagged)} code cells tagged 'parameters', want exactly one"
    unexecuted = [i for i, c in enumerate(code) if c.execution_count is None]
    assert not unexecuted, f"{chapter}: code cells {unexecuted} never executed: run make execute"
    errors = [i for i, c in enumerate(code) for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{chapter}: code cells {errors} stored an error"


CODE_COLUMNS = 88  # a book page shows this many columns of code without a scroll bar


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_code_fits_the_page(chapter: str) -> None:
    """Every line of every code cell of book/<chapter>.md is at most CODE_COLUMNS characters long."""
    nb = jupytext.read(ROOT / "book" / f"{chapter}.md")
    long = [
        f"cell {index} line {number}: {len(line)} columns: {line.strip()[:60]}"
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for number, line in enumerate(cell.source.splitlines(), 1)
        if len(line) > CODE_COLUMNS
    ]
    assert not long, f"book/{chapter}.md has code wider than {CODE_COLUMNS} columns:\n" + "\n".join(long)


def chapter_code(chapter: str) -> list[str]:
    """The code cells of book/<chapter>.md, with IPython magics and shell lines left out."""
    nb = jupytext.read(ROOT / "book" / f"{chapter}.md")
    return [
        "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for cell in nb.cells
        if cell.cell_type == "code"
    ]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_assert_in_a_chapter_says_what_failed(chapter: str) -> None:
    """A reader whose papermill run trips an assert learns which claim failed, not a bare AssertionError."""
    bare = [
        f"cell {index} line {node.lineno}: {ast.get_source_segment(source, node)[:70]}"
        for index, source in enumerate(chapter_code(chapter))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assert) and node.msg is None
    ]
    assert not bare, f"book/{chapter}.md has asserts without a message:\n" + "\n".join(bare)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_glue_key_is_glued_once_in_a_chapter(chapter: str) -> None:
    """The strict book build refuses a chapter that glues one key twice (myst-nb's duplicate warning),
    and the text would show only one of the two values: found here, before a build of minutes."""
    keys = [
        node.args[0].value
        for source in chapter_code(chapter)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "glue"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not twice, f"book/{chapter}.md glues these keys more than once: {twice}"


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c != "glossary"])
def test_chapter_checks_its_knobs_and_lists_its_sources(chapter: str) -> None:
    """Each chapter range-checks its parameters (check_params names a bad knob and its range) and ends
    with a Sources section. The glossary's only knob is a topic filter it checks itself."""
    code = "\n".join(chapter_code(chapter))
    assert "check_params(" in code, f"book/{chapter}.md never calls check_params on its knobs"
    headings = re.findall(r"^## (.+)$", (ROOT / "book" / f"{chapter}.md").read_text("utf-8"), re.M)
    assert headings and headings[-1].strip() == "Sources", (
        f"book/{chapter}.md should end with a '## Sources' section; its last is {headings[-1:]}"
    )


def test_glossary_chapter_defines_every_term_of_the_csv() -> None:
    """The stored glossary output has one {glossary} entry per row of data/glossary.csv, by English name."""
    import csv

    with (ROOT / "data" / "glossary.csv").open(encoding="utf-8") as f:
        terms = [row["english"] for row in csv.DictReader(f)]
    nb = nbformat.read(notebook_of("glossary"), as_version=4)
    glossaries = [
        output["data"]["text/markdown"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "{glossary}" in output.get("data", {}).get("text/markdown", "")
    ]
    assert len(glossaries) == 1, (
        f"want one glossary output in notebooks/glossary.ipynb, found {len(glossaries)}"
    )
    # Terms are the unindented lines between the directive's options and its closing fence.
    lines = glossaries[0].splitlines()
    defined = [line for line in lines[3:-1] if line and not line.startswith((" ", ":"))]
    missing = [term for term in terms if term not in defined]
    assert not missing, f"glossary entries missing (re-execute the chapter): {missing}"
    for term in terms:
        short = term[term.rfind("(") + 1 : -1] if term.endswith(")") else None
        assert short is None or short in defined, f"{term}: its short form {short!r} is not a term"
