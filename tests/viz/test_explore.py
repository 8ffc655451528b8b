"""kafkalite.viz.explore: precomputed explorers that work in the static book (no kernel).

The JavaScript that switches views runs in a real browser in tests/browser/test_pages.py; here the
HTML it reads is checked: one view per distinct result, the index in the order the script computes
it, the initial view shown and no other, and the same bytes on every run.
"""

from __future__ import annotations

import html
import itertools
import json
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.viz.explore import MAX_COMBINATIONS, Choice, Slider, Toggle, explore


def spec_of(page: str) -> dict:
    found = re.search(r'<script type="application/json" class="kl-spec">(.*?)</script>', page, re.S)
    assert found, "the explorer's HTML has no spec"
    return json.loads(found.group(1).replace("<\\/", "</"))


def shown_views(page: str) -> dict[int, bool]:
    """view number -> visible (no hidden attribute) in the HTML as emitted."""
    return {int(n): not hidden for n, hidden in re.findall(r'data-kl-view="(\d+)"( hidden)?', page)}


def index_in_script_order(spec: dict, positions: list[int]) -> int:
    """What the inline script computes from the controls' positions (mixed radix, first control first)."""
    index = 0
    for control, i in zip(spec["controls"], positions, strict=True):
        index = index * len(control["labels"]) + i
    return index


def test_every_combination_is_computed_once_and_indexed_as_the_script_reads_it() -> None:
    calls = []

    def f(a: int, b: str, c: bool) -> str:
        calls.append((a, b, c))
        return f"a={a} b={b} c={c}"

    e = explore(f, a=Slider([1, 2, 3]), b=Choice(["x", "y"]), c=Toggle())
    assert sorted(calls, key=repr) == sorted(
        itertools.product([1, 2, 3], ["x", "y"], [False, True]), key=repr
    )
    assert e.combinations == 12 and len(e.views) == 12
    page = e._repr_html_()
    spec = spec_of(page)
    for pa, pb, pc in itertools.product(range(3), range(2), range(2)):
        a, b, c = [1, 2, 3][pa], ["x", "y"][pb], [False, True][pc]
        view = spec["views"][index_in_script_order(spec, [pa, pb, pc])]
        assert f"a={a} b={b} c={c}" in e.views[view], f"index of {(a, b, c)} points at the wrong view"
        assert e.text(a=a, b=b, c=c) == f"a={a} b={b} c={c}"


def test_identical_results_share_one_view() -> None:
    e = explore(lambda n, flag: "even" if n % 2 == 0 else "odd", n=Slider(range(6)), flag=Toggle())
    assert e.combinations == 12
    assert len(e.views) == 2
    assert e.text(n=4, flag=True) == "even" and e.text(n=3, flag=False) == "odd"


def test_only_the_initial_view_is_visible_without_script() -> None:
    e = explore(lambda n: f"n={n}", n=Slider([10, 20, 30], value=20))
    page = e._repr_html_()
    visible = [n for n, shown in shown_views(page).items() if shown]
    assert visible == [e.view_of[(20,)]], f"visible views {visible}"
    assert 'value="1"' in page  # the slider starts at the position of 20
    assert "<output" in page and ">20</output>" in page


def test_figures_become_pngs_and_are_closed() -> None:
    def draw(n: int):
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot(range(n + 2))
        plt.figure()  # opened and not returned: must not leak into the cell's output
        return fig

    before = plt.get_fignums()
    e = explore(draw, n=Slider([1, 2]))
    assert plt.get_fignums() == before, "figures left open"
    page = e._repr_html_()
    assert page.count('<img class="kl-figure"') == 2
    assert re.search(r'width="\d+" height="\d+" alt="n=1"', page)


def test_the_html_is_the_same_on_every_run() -> None:
    def draw(n: int, kind: str):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.bar(range(n), range(n), label=kind)
        ax.legend()
        print(f"{n} bars")
        return fig, pd.DataFrame({"n": [n], "kind": [kind]})

    controls = {"n": Slider([1, 2, 3]), "kind": Choice(["a", "b"])}
    first = explore(draw, **controls)._repr_html_()
    second = explore(draw, **controls)._repr_html_()
    assert first == second
    assert "Software" not in first  # matplotlib's version string is not written into the PNGs


def test_printed_text_comes_before_the_returned_parts() -> None:
    def f(n: int):
        print("printed")
        return "returned", pd.DataFrame({"x": [n]})

    view = explore(f, n=Slider([1]))._repr_html_()
    assert view.index("printed") < view.index("returned") < view.index("<table")


def test_labels_are_whole_and_escaped() -> None:
    e = explore(
        lambda rf: "</script><b>",
        rf=Slider([1, 2], label="replication.factor <per topic>"),
    )
    page = e._repr_html_()
    assert "replication.factor &lt;per topic&gt;" in page
    assert "&lt;/script&gt;&lt;b&gt;" in page and "</script><b>" not in page
    assert html.unescape(e.text(rf=1)) == "</script><b>"


def test_bad_controls_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="initial value 5 is not one of"):
        explore(lambda n: "", n=Slider([1, 2], value=5))
    with pytest.raises(ValueError, match="has no values"):
        explore(lambda n: "", n=Choice([]))
    with pytest.raises(ValueError, match="repeats a value"):
        explore(lambda n: "", n=Choice([1, 1]))
    with pytest.raises(ValueError, match=f"more than {MAX_COMBINATIONS}"):
        explore(lambda a, b: "", a=Slider(range(20)), b=Slider(range(20)))
    with pytest.raises(ValueError, match="at least one control"):
        explore(lambda: "")
    with pytest.raises(TypeError, match="got int"):
        explore(lambda n: n, n=Slider([1]))
    e = explore(lambda n: str(n), n=Slider([1, 2]))
    with pytest.raises(KeyError, match="not one of"):
        e.view(n=3)
    with pytest.raises(KeyError, match="name exactly the controls"):
        e.view(m=1)


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_any_grid_maps_each_combination_to_its_own_result(sizes: list[int], data) -> None:
    controls = {f"c{k}": Slider(list(range(n))) for k, n in enumerate(sizes)}
    starts = {name: data.draw(st.sampled_from(list(c.values))) for name, c in controls.items()}
    controls = {name: Slider(c.values, value=starts[name]) for name, c in controls.items()}
    e = explore(lambda **kw: repr(sorted(kw.items())), **controls)
    page = e._repr_html_()
    spec = spec_of(page)
    assert len(spec["views"]) == e.combinations
    for positions in itertools.product(*(range(n) for n in sizes)):
        kw = {f"c{k}": p for k, p in enumerate(positions)}
        assert e.views[spec["views"][index_in_script_order(spec, list(positions))]] == e.view(**kw)
    visible = [n for n, shown in shown_views(page).items() if shown]
    assert visible == [e.view_of[tuple(starts.values())]]
