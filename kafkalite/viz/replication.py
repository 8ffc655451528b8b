"""Figures for the acks chapter: LEO and high watermark lines, and ISR membership, from the event log."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _step(points: list[tuple[int, int]], end_ms: int) -> tuple[list[int], list[int]]:
    xs = [t for t, _ in points] + ([end_ms] if points else [])
    ys = [v for _, v in points] + ([points[-1][1]] if points else [])
    return xs, ys


def offset_series(
    events: Iterable[Any], tp: str, replicas: Iterable[int]
) -> dict[str, list[tuple[int, int]]]:
    """``{"LEO 1": [(t, leo)], ..., "HW": [(t, hw)]}``: each replica's own LEO (as it logs it) and the
    leader's high watermark (``hw`` events of the broker that logged ``become_leader`` last before them)."""
    replicas = list(replicas)
    out: dict[str, list[tuple[int, int]]] = {f"LEO {r}": [] for r in replicas}
    out["HW"] = []
    leader = None
    for e in events:
        if e.fields.get("tp") != tp:
            continue
        if e.kind == "become_leader":
            leader = e.node
        elif e.kind == "leo" and e.fields["replica"] == e.node and e.node in replicas:
            out[f"LEO {e.node}"].append((e.time_ms, e.fields["leo"]))
        elif e.kind == "hw" and e.node == leader:
            out["HW"].append((e.time_ms, e.fields["hw"]))
    return out


def plot_offsets(
    ax: Any, series: dict[str, list[tuple[int, int]]], end_ms: int, leader: int | None = None
) -> None:
    """The committed range (below the HW) shaded, and one step line per replica's LEO.

    Replicas that keep up have equal LEOs most of the time, so their lines would lie on top of each
    other. Each is drawn thinner than the one before it, with its own dash pattern: where lines
    coincide they show as nested stripes, and every replica stays visible."""
    xs, ys = _step(series.get("HW", []), end_ms)
    if xs:
        ax.fill_between(xs, ys, step="post", color="#d9d9d9", lw=0, label="committed (below the HW)")
        ax.step(xs, ys, where="post", color="black", lw=1.2, label="high watermark")
    leos = [name for name in series if name != "HW"]
    dashes = ["solid", (0, (6, 2)), (0, (2, 1.5)), (0, (8, 2, 2, 2))]
    for i, name in enumerate(leos):
        xs, ys = _step(series[name], end_ms)
        label = f"{name} (leader)" if leader is not None and name == f"LEO {leader}" else name
        width = 1.2 + 2.4 * (len(leos) - 1 - i)
        style = dashes[i % len(dashes)] if i else "solid"
        ax.step(xs, ys, where="post", lw=width, ls=style, color=f"C{i}", label=label, alpha=0.9)
    if ax.get_subplotspec() is None or ax.get_subplotspec().is_last_row():
        ax.set_xlabel("virtual time (ms)")
    ax.set_ylabel("offset")
    ax.legend(loc="upper left", fontsize=8)


def isr_intervals(
    events: Iterable[Any], tp: str, start_isr: Iterable[int], end_ms: int
) -> dict[int, list[tuple[int, int]]]:
    """For each replica, the ``(start, end)`` intervals it spent in the leader's ISR."""
    isr = set(start_isr)
    since = {r: 0 for r in isr}
    out: dict[int, list[tuple[int, int]]] = {r: [] for r in isr}
    for e in events:
        if e.fields.get("tp") != tp or e.kind not in ("isr_shrink", "isr_expand"):
            continue
        new = set(e.fields["isr"])
        for r in isr - new:
            out.setdefault(r, []).append((since.pop(r), e.time_ms))
        for r in new - isr:
            since[r] = e.time_ms
            out.setdefault(r, [])
        isr = new
    for r, t in since.items():
        out[r].append((t, end_ms))
    return out


def plot_isr(
    ax: Any, intervals: dict[int, list[tuple[int, int]]], paused: dict[int, tuple[int, int]] | None = None
) -> None:
    """A Gantt chart: one row per replica, solid while in the ISR, hatched while paused."""
    for row, r in enumerate(sorted(intervals)):
        spans = [(a, b - a) for a, b in intervals[r]]
        ax.broken_barh(spans, (row - 0.3, 0.6), color="#6f9fd8")
        if paused and r in paused:
            a, b = paused[r]
            ax.broken_barh([(a, b - a)], (row - 0.3, 0.6), facecolor="none", edgecolor="#c0392b", hatch="//")
    ax.set_yticks(range(len(intervals)), [f"broker {r}" for r in sorted(intervals)])
    ax.set_xlabel("virtual time (ms)")
