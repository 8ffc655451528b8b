"""Figures and tables for the storage chapter: labelled batch headers and segment maps."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

# (name, format) of the record batch v2 header, in file order. The sizes follow from the formats.
HEADER_LAYOUT: tuple[tuple[str, str], ...] = (
    ("baseOffset", ">q"),
    ("batchLength", ">i"),
    ("partitionLeaderEpoch", ">i"),
    ("magic", ">b"),
    ("crc", ">I"),
    ("attributes", ">h"),
    ("lastOffsetDelta", ">i"),
    ("baseTimestamp", ">q"),
    ("maxTimestamp", ">q"),
    ("producerId", ">q"),
    ("producerEpoch", ">h"),
    ("baseSequence", ">i"),
    ("recordsCount", ">i"),
)


def header_fields(batch: bytes, pos: int = 0) -> list[dict[str, Any]]:
    """One row per header field: byte range, raw bytes in hex, decoded value."""
    rows = []
    offset = pos
    for name, fmt in HEADER_LAYOUT:
        size = struct.calcsize(fmt)
        raw = bytes(batch[offset : offset + size])
        value = struct.unpack(fmt, raw)[0]
        shown = f"0x{value:08x}" if name == "crc" else value
        rows.append(
            {
                "field": name,
                "bytes": f"{offset - pos}..{offset - pos + size - 1}",
                "hex": raw.hex(" "),
                "value": shown,
            }
        )
        offset += size
    return rows


def segment_colours(segments: Iterable[Any]) -> dict[int, str]:
    """A colour per segment, keyed by base offset (segments or plain base offsets).

    A segment keeps its base offset for life, so two figures of one log (before and after
    retention, say) that colour by this map show the same segment in the same colour."""
    bases = sorted(getattr(s, "base_offset", s) for s in segments)
    return {base: f"C{i % 10}" for i, base in enumerate(bases)}


def plot_segments(log: Any, ax: Any, colours: Mapping[int, str] | None = None) -> None:
    """Draw each segment of a log as a bar over the offsets it holds, labelled with its base offset.

    The active (last) segment is hatched; the others are coloured by ``colours`` (base offset to
    colour, ``segment_colours`` of the log by default)."""
    segments = log.segments
    colours = segment_colours(segments) if colours is None else colours
    span = max(log.log_end_offset - (segments[0].base_offset if segments else 0), 1)
    for i, segment in enumerate(segments):
        width = max(segment.next_offset - segment.base_offset, 0)
        active = i == len(segments) - 1
        ax.barh(
            0,
            width,
            left=segment.base_offset,
            color="white" if active else colours[segment.base_offset],
            edgecolor="black",
            hatch="//" if active else None,
        )
        if width / span > 0.04:  # a label only where it fits
            ax.text(
                segment.base_offset + width / 2,
                0,
                f"{segment.base_offset}",
                ha="center",
                va="center",
                fontsize=8,
                rotation=90,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.8},
            )
    ax.set_yticks([])
    ax.set_xlabel("offset")
    ax.set_xlim(segments[0].base_offset if segments else 0, max(log.log_end_offset, 1))
