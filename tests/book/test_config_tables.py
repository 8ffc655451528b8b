"""Each chapter's settings agree with kafkalite's config declarations.

A chapter's Sources section links Kafka's documentation of every setting the chapter uses
(``[`acks`](https://kafka.apache.org/41/configuration/producer-configs/#producerconfigs_acks)``), and a
code cell shows the same settings as a table read from the declarations
(``show_settings("producer:acks", ...)``). These checks fail when a linked key is not declared by the
component its link names, or when the links and the table list different keys.
"""

from __future__ import annotations

import ast
import re

import jupytext
import nbformat
import pytest

from kafkalite.errors import InvalidConfigError
from kafkalite.tools.configs import declared_setting
from tests.book.test_book import CHAPTERS, ROOT, notebook_of

# Kafka's configuration pages: /<version>/configuration/<component>-configs/ (topic-level-configs up to
# 3.9, topic-configs from 4.0), the key as the anchor <component>configs_<key>.
LINK = re.compile(
    r"\[`(?P<text>[^`]+)`\]\(https://kafka\.apache\.org/(?P<version>\d+)/configuration/"
    r"(?P<component>[a-z]+)(?:-level)?-configs/?(?:#(?P<anchor_component>[a-z]+)configs_(?P<anchor>[^)]+))?\)"
)
ANY_LINK = re.compile(r"\]\(https://kafka\.apache\.org/\d+/configuration/")

#: Linked keys kafkalite does not declare, on purpose: (component, key) -> why.
NOT_DECLARED = {
    # The 0.8.2 consumer kept its offsets in ZooKeeper or Kafka by this switch; the groups chapter cites it
    # for history. Kafka's consumers have had no such key since 0.9, nor has kafkalite's.
    ("consumer", "offsets.storage"): "Kafka 0.8.2's old consumer",
    # kafkalite's own producer speaks PLAINTEXT only; the security chapter sets these two on
    # confluent-kafka's producer (and kafka-python's consumer), which do the TLS and SASL.
    ("producer", "security.protocol"): "set on confluent-kafka, not kafkalite's producer",
    ("producer", "sasl.mechanism"): "set on confluent-kafka, not kafkalite's producer",
}


def sources(chapter: str) -> str:
    text = (ROOT / "book" / f"{chapter}.md").read_text("utf-8")
    start = text.rfind("\n## Sources")
    return text[start:] if start >= 0 else ""


def linked_settings(chapter: str) -> list[tuple[str, str]]:
    """``(component, key)`` of every Kafka configuration link in the chapter's Sources, in order."""
    text = sources(chapter)
    links = list(LINK.finditer(text))
    assert len(links) == len(ANY_LINK.findall(text)), (
        f"book/{chapter}.md: a kafka.apache.org configuration link that is not "
        "[`key`](.../configuration/<component>-configs/#<component>configs_<key>)"
    )
    for m in links:
        assert m["anchor"] is None or (m["anchor"], m["anchor_component"]) == (m["text"], m["component"]), (
            f"book/{chapter}.md: the link named {m['text']!r} goes to {m.group(0)}"
        )
    return [(m["component"], m["text"]) for m in links]


def table_cells(chapter: str) -> list[tuple[int, list[str]]]:
    """``(code cell index, names)`` of every ``show_settings(...)`` call in the chapter."""
    nb = jupytext.read(ROOT / "book" / f"{chapter}.md")
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    out = []
    for index, source in enumerate(code):
        if "show_settings(" not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "show_settings":
                assert all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args), (
                    f"book/{chapter}.md: show_settings takes the keys as string literals, to be checked here"
                )
                out.append((index, [a.value for a in node.args]))
    return out


WITH_LINKS = [c for c in CHAPTERS if linked_settings(c)]


def test_some_chapters_link_settings() -> None:
    assert len(WITH_LINKS) >= 10, f"the link pattern found settings in {WITH_LINKS} only"


@pytest.mark.parametrize("chapter", WITH_LINKS)
def test_every_linked_setting_is_declared(chapter: str) -> None:
    missing = []
    for component, name in linked_settings(chapter):
        if (component, name) in NOT_DECLARED:
            continue
        try:
            declared_setting(f"{component}:{name}")
        except InvalidConfigError as e:
            missing.append(str(e))
    assert not missing, f"book/{chapter}.md links settings kafkalite does not declare:\n" + "\n".join(missing)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_settings_table_lists_the_linked_settings(chapter: str) -> None:
    """Same keys, same components, same order as the links, less the keys that are not declared."""
    linked = [f"{c}:{n}" for c, n in linked_settings(chapter) if (c, n) not in NOT_DECLARED]
    cells = table_cells(chapter)
    if not linked:
        assert not cells, f"book/{chapter}.md shows settings but its Sources link none"
        return
    assert len(cells) == 1, f"book/{chapter}.md: want one show_settings(...) cell, found {len(cells)}"
    shown = [f"{c}:{spec.name}" for c, spec in map(declared_setting, cells[0][1])]
    assert shown == linked, (
        f"book/{chapter}.md: the settings table shows {shown}\nbut the Sources link {linked}"
    )


@pytest.mark.parametrize("chapter", WITH_LINKS)
def test_the_stored_table_is_markdown_with_a_row_per_setting(chapter: str) -> None:
    """The executed notebook keeps the table as text/markdown, which the book renders as a table."""
    (index, names), *_ = table_cells(chapter) or [(None, [])]
    assert index is not None, f"book/{chapter}.md has no show_settings(...) cell"
    code = [c for c in nbformat.read(notebook_of(chapter), as_version=4).cells if c.cell_type == "code"]
    assert index < len(code), f"notebooks/{chapter}.ipynb has fewer code cells than its chapter: sync it"
    shown = [o["data"]["text/markdown"] for o in code[index].outputs if "text/markdown" in o.get("data", {})]
    assert len(shown) == 1, f"notebooks/{chapter}.ipynb: the settings cell stored no Markdown table"
    rows = [line for line in shown[0].splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[1] for r in rows] == [f"`{declared_setting(n)[1].name}`" for n in names], (
        f"notebooks/{chapter}.ipynb: the stored table is stale; re-execute the chapter"
    )


def test_every_exception_is_still_linked_and_still_undeclared() -> None:
    linked = {pair for chapter in CHAPTERS for pair in linked_settings(chapter)}
    for component, name in NOT_DECLARED:
        assert (component, name) in linked, f"{component}:{name} is no longer linked: drop its exception"
        with pytest.raises(InvalidConfigError):
            declared_setting(f"{component}:{name}")
