"""Explorers: a chapter's "try other values" cell that still works once the book is published.

An ipywidgets control needs a running kernel: in the static HTML it does nothing. An explorer calls the
chapter's function once for every combination of its controls' values while the chapter executes,
and emits ONE self-contained HTML output: native controls (range, select, checkbox), every distinct
result (a figure as a PNG, a table, text), and a few lines of inline JavaScript that show the result
matching the controls. It needs no kernel, no widget library and nothing from the network, so it works
the same in the rendered book, in JupyterLab and in a live Thebe cell.

    explore(show, brokers=Slider([1, 2, 3, 4]), acks=Choice(["0", "1", "all"]), idempotence=Toggle())

The output is deterministic: identical inputs give identical HTML (no random ids, no dates), so a
re-executed chapter leaves its notebook unchanged. Grids are kept small on purpose (MAX_COMBINATIONS):
every combination is computed at execution time and stored in the page.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import io
import itertools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A page carries every combination; beyond this the grid is too fine to be worth its weight.
MAX_COMBINATIONS = 200
PNG_DPI = 100  # as the chapters' other figures (matplotlib's default)
# A figure is flat colours plus anti-aliased edges: a 64-colour palette looks the same and is ~4x smaller.
PNG_COLOURS = 64


@dataclass(frozen=True)
class Slider:
    """A range control over a finite, ordered list of values (shown as a slider over their positions)."""

    values: Sequence[Any]
    label: str | None = None
    value: Any = None
    fmt: Callable[[Any], str] = str


@dataclass(frozen=True)
class Choice:
    """A drop-down list of options."""

    values: Sequence[Any]
    label: str | None = None
    value: Any = None
    fmt: Callable[[Any], str] = str


@dataclass(frozen=True)
class Toggle:
    """A checkbox: False or True."""

    label: str | None = None
    value: bool = False
    values: Sequence[bool] = field(default=(False, True), init=False)
    fmt: Callable[[Any], str] = str


Control = Slider | Choice | Toggle


def _initial_index(name: str, control: Control) -> int:
    values = list(control.values)
    if not values:
        raise ValueError(f"control {name!r} has no values")
    if len(set(map(repr, values))) != len(values):
        raise ValueError(f"control {name!r} repeats a value: {values}")
    if control.value is None and not isinstance(control, Toggle):
        return 0
    for i, v in enumerate(values):
        if v == control.value and type(v) is type(control.value):
            return i
    raise ValueError(f"control {name!r}: initial value {control.value!r} is not one of {values}")


def _figure_png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy
    from PIL import Image

    buf = io.BytesIO()
    # No "Software" entry: the bytes then depend on the drawing only, not on the matplotlib version string.
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    palette = image.quantize(colors=PNG_COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, format="png", optimize=True)
    return out.getvalue()


def _png_size(png: bytes) -> tuple[int, int]:
    # IHDR is the first chunk: width and height are the big-endian words at bytes 16..24.
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def render_part(part: Any, alt: str) -> str:
    """HTML for one thing a function returned: a matplotlib figure, a str (as text), or anything with
    ``_repr_html_`` (a pandas DataFrame, another explorer)."""
    if part is None:
        return ""
    if hasattr(part, "savefig"):
        png = _figure_png(part)
        width, height = _png_size(png)
        data = base64.b64encode(png).decode("ascii")
        return (
            f'<img class="kl-figure" width="{width}" height="{height}" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{data}">'
        )
    if isinstance(part, str):
        return f'<pre class="kl-text">{html.escape(part)}</pre>' if part else ""
    if hasattr(part, "_repr_html_"):
        return f'<div class="kl-html">{part._repr_html_()}</div>'
    raise TypeError(
        f"an explorer's function may return a matplotlib figure, a str, an object with _repr_html_ "
        f"or a tuple of those; got {type(part).__name__}"
    )


def _render_call(fn: Callable[..., Any], kwargs: dict[str, Any], alt: str) -> str:
    """Call ``fn(**kwargs)`` and render what it printed, then what it returned, in that order."""
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy

    before = set(plt.get_fignums())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(**kwargs)
    parts = list(result) if isinstance(result, tuple | list) else [result]
    # A figure the function opened but did not return would show up in the cell's output: close it.
    returned = {getattr(p, "number", None) for p in parts}
    for num in set(plt.get_fignums()) - before - returned:
        plt.close(num)
    return "".join([render_part(out.getvalue(), alt)] + [render_part(p, alt) for p in parts])


STYLE = """
.kl-explore{margin:.5em 0 1em}
.kl-explore .kl-controls{display:flex;flex-wrap:wrap;gap:.4em 1.6em;align-items:center;margin:0 0 .6em}
.kl-explore .kl-control{display:inline-flex;align-items:center;gap:.5em;white-space:nowrap}
.kl-explore .kl-name{font-family:var(--pst-font-family-monospace,monospace);font-size:.9em}
.kl-explore output{font-family:var(--pst-font-family-monospace,monospace);min-width:3.5em;font-weight:bold}
.kl-explore input[type=range]{width:11em}
.kl-explore .kl-figure{max-width:100%;height:auto;background:#fff}
.kl-explore .kl-text{margin:0 0 .4em;white-space:pre-wrap}
.kl-explore [hidden]{display:none!important}
""".strip()

# Shows the view that matches the controls. Runs once per explorer output; initialises every explorer
# on the page not yet initialised, so it does not depend on document.currentScript (which JupyterLab
# and Thebe set differently when they insert an output).
SCRIPT = """
(function(){
document.querySelectorAll('div.kl-explore:not([data-kl-ready])').forEach(function(root){
root.setAttribute('data-kl-ready','');
var spec=JSON.parse(root.querySelector('script.kl-spec').textContent);
var inputs=spec.controls.map(function(c){return root.querySelector('[data-kl-control="'+c.name+'"]');});
var views=root.querySelectorAll('[data-kl-view]');
function position(c,el){return el.type==='checkbox'?(el.checked?1:0):Number(el.value);}
function update(){
var index=0;
spec.controls.forEach(function(c,k){
var i=position(c,inputs[k]);
index=index*c.labels.length+i;
var shown=root.querySelector('output[data-kl-for="'+c.name+'"]');
if(shown){shown.textContent=c.labels[i];inputs[k].setAttribute('aria-valuetext',c.labels[i]);}
});
var want=String(spec.views[index]);
views.forEach(function(v){v.hidden=v.getAttribute('data-kl-view')!==want;});
root.setAttribute('data-kl-shown',want);
}
inputs.forEach(function(el){el.addEventListener('input',update);el.addEventListener('change',update);});
update();
});
})();
""".strip()


class Explorer:
    """The precomputed results of ``fn`` over every combination of ``controls``, as one HTML output."""

    def __init__(self, fn: Callable[..., Any], controls: dict[str, Control]) -> None:
        if not controls:
            raise ValueError("an explorer needs at least one control")
        self.controls = dict(controls)
        self.names = list(self.controls)
        self.initial = [_initial_index(name, c) for name, c in self.controls.items()]
        sizes = [len(c.values) for c in self.controls.values()]
        combinations = 1
        for n in sizes:
            combinations *= n
        if combinations > MAX_COMBINATIONS:
            raise ValueError(
                f"{combinations} combinations of {', '.join(f'{n}={s}' for n, s in zip(self.names, sizes, strict=True))}"
                f" is more than {MAX_COMBINATIONS}: use fewer values per control"
            )
        self.views: list[str] = []  # distinct rendered results, in order of first appearance
        self.view_of: dict[tuple[Any, ...], int] = {}  # combination of values -> index into views
        seen: dict[str, int] = {}
        for positions in itertools.product(*(range(n) for n in sizes)):
            values = tuple(list(c.values)[i] for c, i in zip(self.controls.values(), positions, strict=True))
            kwargs = dict(zip(self.names, values, strict=True))
            rendered = _render_call(fn, kwargs, self.describe(values))
            if rendered not in seen:
                seen[rendered] = len(self.views)
                self.views.append(rendered)
            self.view_of[values] = seen[rendered]

    def describe(self, values: Iterable[Any]) -> str:
        """The combination as text, e.g. ``brokers=3, partitions=6``."""
        return ", ".join(
            f"{self._label(name)}={c.fmt(v)}"
            for (name, c), v in zip(self.controls.items(), values, strict=True)
        )

    def _label(self, name: str) -> str:
        return self.controls[name].label or name

    def view(self, **values: Any) -> str:
        """The HTML shown for one combination (every control named)."""
        missing = set(self.names) - set(values)
        if missing or set(values) - set(self.names):
            raise KeyError(f"name exactly the controls {self.names}, got {sorted(values)}")
        key = tuple(values[n] for n in self.names)
        if key not in self.view_of:
            raise KeyError(f"{self.describe(key)} is not one of the explorer's combinations")
        return self.views[self.view_of[key]]

    def text(self, **values: Any) -> str:
        """The text (not the images) shown for one combination, for assertions in a chapter."""
        shown = re.sub(r"<[^>]+>", "", self.view(**values))
        return html.unescape(shown).strip()

    @property
    def combinations(self) -> int:
        return len(self.view_of)

    def _controls_html(self, uid: str) -> str:
        parts = []
        for (name, c), start in zip(self.controls.items(), self.initial, strict=True):
            label = html.escape(self._label(name))
            ident = f"{uid}-{name}"
            labels = [c.fmt(v) for v in c.values]
            if isinstance(c, Slider):
                widget = (
                    f'<input type="range" id="{ident}" data-kl-control="{name}" min="0" '
                    f'max="{len(labels) - 1}" step="1" value="{start}" '
                    f'aria-valuetext="{html.escape(labels[start])}">'
                    f'<output data-kl-for="{name}" for="{ident}">{html.escape(labels[start])}</output>'
                )
            elif isinstance(c, Choice):
                options = "".join(
                    f'<option value="{i}"{" selected" if i == start else ""}>{html.escape(t)}</option>'
                    for i, t in enumerate(labels)
                )
                widget = f'<select id="{ident}" data-kl-control="{name}">{options}</select>'
            else:
                checked = " checked" if start else ""
                widget = f'<input type="checkbox" id="{ident}" data-kl-control="{name}"{checked}>'
            parts.append(
                f'<span class="kl-control"><label class="kl-name" for="{ident}">{label}</label>{widget}</span>'
            )
        return f'<form class="kl-controls" onsubmit="return false">{"".join(parts)}</form>'

    def _repr_html_(self) -> str:
        index = [self.view_of[key] for key in itertools.product(*(c.values for c in self.controls.values()))]
        spec = {
            "controls": [
                {"name": name, "labels": [c.fmt(v) for v in c.values]} for name, c in self.controls.items()
            ],
            "views": index,
        }
        start_key = tuple(
            list(c.values)[i] for c, i in zip(self.controls.values(), self.initial, strict=True)
        )
        start_view = self.view_of[start_key]
        body = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
        # Ids from the content: unique per explorer on a page, identical on every run.
        uid = "kl-" + hashlib.sha256((body + "".join(self.views)).encode()).hexdigest()[:10]
        views = "".join(
            f'<div data-kl-view="{i}"{"" if i == start_view else " hidden"}>{v}</div>'
            for i, v in enumerate(self.views)
        )
        return (
            f'<div class="kl-explore" id="{uid}" data-kl-shown="{start_view}"><style>{STYLE}</style>'
            f'{self._controls_html(uid)}<div class="kl-views">{views}</div>'
            f'<script type="application/json" class="kl-spec">{body}</script>'
            f"<script>{SCRIPT}</script></div>"
        )

    def __repr__(self) -> str:
        controls = ", ".join(f"{self._label(n)}: {len(c.values)} values" for n, c in self.controls.items())
        return (
            f"<explorer: {self.combinations} combinations ({controls}), {len(self.views)} distinct views; "
            f"shown with its controls in HTML>"
        )


def explore(fn: Callable[..., Any], **controls: Control) -> Explorer:
    """Call ``fn`` with every combination of the controls' values and return the explorer over them.

    ``fn`` takes one keyword argument per control and returns a matplotlib figure, a str, an object with
    ``_repr_html_`` (a DataFrame), or a tuple of those; what it prints is shown too, above what it
    returns. Make it the cell's last expression to display it.
    """
    return Explorer(fn, controls)
