"""Figures and tables for the storage chapter: labelled batch headers and segment maps."""

from __future__ import annotations

import struct
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


def plot_segments(log: Any, ax: Any) -> None:
    """Draw each segment of a log as a bar over the offsets it holds, labelled with its base offset."""
    segments = log.segments
    for i, segment in enumerate(segments):
        width = max(segment.next_offset - segment.base_offset, 0)
        active = i == len(segments) - 1
        ax.barh(
            0,
            width,
            left=segment.base_offset,
            color="white" if active else f"C{i % 10}",
            edgecolor="black",
            hatch="//" if active else None,
        )
        ax.text(
            segment.base_offset + width / 2,
            0,
            f"{segment.base_offset}",
            ha="center",
            va="center",
            fontsize=7,
            rotation=90,
        )
    ax.set_yticks([])
    ax.set_xlabel("offset")
    ax.set_xlim(segments[0].base_offset if segments else 0, max(log.log_end_offset, 1))
