"""Flame graphs from collapsed stacks, drawn with matplotlib.

A sampling profiler (py-spy's ``--format raw``, Brendan Gregg's ``stackcollapse`` scripts) writes one
line per distinct stack: the frames from the outermost to the innermost, joined by ``;``, then a space
and how many samples caught that stack. This module reads that format, lays the stacks out as an
icicle (the root at the top, callees below their caller, each frame as wide as the samples under it)
and draws it. Siblings are ordered by name, not by time, as in Gregg's flame graphs: the x axis is
not a timeline, and the same profile always gives the same picture.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Stacks = dict[tuple[str, ...], int]


def parse_collapsed(lines: Iterable[str]) -> Stacks:
    """Collapsed stacks (``a;b;c 12`` per line) as {frames: samples}; equal stacks add up.

    Blank lines and ``#`` comments are skipped; `` 12`` (no frame at all: py-spy's samples of a
    thread outside Python) is the empty stack ``()``. A line without a count, or with a count that is
    not a non-negative integer, is an error: a truncated profile should not pass for a smaller one."""
    stacks: Stacks = {}
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("#"):
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep or not count.isdigit():
            raise ValueError(f"line {number}: expected 'frame;frame;... count', got {line[:80]!r}")
        frames = tuple(stack.split(";")) if stack else ()
        stacks[frames] = stacks.get(frames, 0) + int(count)
    return stacks


def format_collapsed(stacks: Mapping[tuple[str, ...], int]) -> str:
    """The inverse of ``parse_collapsed``: one line per stack, sorted, so a stored file diffs well."""
    return "".join(f"{';'.join(frames)} {n}\n" for frames, n in sorted(stacks.items()) if n > 0)


def frame_name(frame: str) -> str:
    """A frame's function, without py-spy's ``(file:line)`` suffix: ``send (kafkalite/x.py:3)`` ->
    ``send``."""
    return frame.split(" (", 1)[0]


def frame_file(frame: str) -> str:
    """A frame's file as py-spy names it (the package part of the path), or "" if it names none."""
    _, sep, rest = frame.partition(" (")
    return rest.rstrip(")").rsplit(":", 1)[0] if sep else ""


@dataclass
class Node:
    """A frame in the call tree: ``total`` samples at or under it, ``self_samples`` in it alone."""

    name: str
    total: int = 0
    self_samples: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def build_tree(stacks: Mapping[tuple[str, ...], int], root: str = "all") -> Node:
    """The call tree of ``stacks`` under one root that holds every sample."""
    tree = Node(root)
    for frames, n in stacks.items():
        node = tree
        node.total += n
        for frame in frames:
            node = node.children.setdefault(frame, Node(frame))
            node.total += n
        node.self_samples += n
    return tree


@dataclass(frozen=True)
class Box:
    """One rectangle of the icicle: ``depth`` rows below the root, from ``x`` for ``width`` samples."""

    name: str
    depth: int
    x: int
    width: int
    self_samples: int


def layout(tree: Node, max_depth: int | None = None) -> list[Box]:
    """Every frame as a box, parents before children; siblings sit side by side in name order,
    starting at their parent's left edge, so the widths of a box's children sum to at most its width
    (the rest is the parent's own time)."""
    boxes: list[Box] = []

    def place(node: Node, depth: int, x: int) -> None:
        boxes.append(Box(node.name, depth, x, node.total, node.self_samples))
        if max_depth is not None and depth >= max_depth:
            return
        for name in sorted(node.children):
            child = node.children[name]
            place(child, depth + 1, x)
            x += child.total

    place(tree, 0, 0)
    return boxes


def self_time(stacks: Mapping[tuple[str, ...], int]) -> dict[str, int]:
    """Samples whose innermost frame is each frame: where the CPU actually was."""
    out: dict[str, int] = {}
    for frames, n in stacks.items():
        if frames:
            out[frames[-1]] = out.get(frames[-1], 0) + n
    return out


def top_self(stacks: Mapping[tuple[str, ...], int], n: int = 10) -> list[dict[str, Any]]:
    """The ``n`` frames with the most self time, as rows (function, file, samples, share); ties go by
    name so the order is the same on every run."""
    total = sum(stacks.values())
    ranked = sorted(self_time(stacks).items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [
        {
            "function": frame_name(frame),
            "file": frame_file(frame),
            "samples": count,
            "share": count / total if total else 0.0,
        }
        for frame, count in ranked
    ]


def total_time(stacks: Mapping[tuple[str, ...], int], function: str) -> int:
    """Samples with ``function`` anywhere on the stack (counted once per stack, recursion or not)."""
    return sum(n for frames, n in stacks.items() if any(frame_name(f) == function for f in frames))


def colour(name: str) -> tuple[float, float, float]:
    """A warm colour that depends only on the frame's name (crc32, not the salted ``hash``)."""
    h = zlib.crc32(frame_name(name).encode())
    return (
        0.85 + (h & 0xFF) / 255 * 0.15,
        0.35 + ((h >> 8) & 0xFF) / 255 * 0.45,
        0.1 + ((h >> 16) & 0x3F) / 255,
    )


def plot_flame(
    stacks: Mapping[tuple[str, ...], int],
    ax: Any,
    *,
    max_depth: int | None = None,
    min_share: float = 0.01,
    root: str = "all",
    label_chars: float = 0.0075,
) -> list[Box]:
    """Draw ``stacks`` as an icicle on ``ax`` (x: share of samples, y: stack depth, downward) and
    return the boxes drawn. Frames narrower than ``min_share`` of all samples are left out, and a
    label is written only where about ``label_chars`` of the width per character leaves room."""
    tree = build_tree(stacks, root)
    total = tree.total or 1
    drawn = [b for b in layout(tree, max_depth) if b.width / total >= min_share]
    for b in drawn:
        x, w = b.x / total, b.width / total
        ax.add_patch(
            _rectangle((x, b.depth), w, 0.95, facecolor=colour(b.name), edgecolor="white", linewidth=0.5)
        )
        text = frame_name(b.name)
        room = int(w / label_chars)
        if room >= 4:
            shown = text if len(text) <= room else text[: room - 1] + "…"
            ax.text(x + 0.003, b.depth + 0.47, shown, va="center", ha="left", fontsize=7, clip_on=True)
    depth = max((b.depth for b in drawn), default=0) + 1
    ax.set_xlim(0, 1)
    ax.set_ylim(depth, 0)  # the root on top: an icicle
    ax.set_yticks([])
    ax.set_xlabel("share of samples")
    return drawn


def _rectangle(*args: Any, **kwargs: Any) -> Any:
    from matplotlib.patches import Rectangle  # deferred: parsing and layout need no matplotlib

    return Rectangle(*args, **kwargs)


__all__ = [
    "Box",
    "Node",
    "build_tree",
    "colour",
    "format_collapsed",
    "frame_file",
    "frame_name",
    "layout",
    "parse_collapsed",
    "plot_flame",
    "self_time",
    "top_self",
    "total_time",
]
