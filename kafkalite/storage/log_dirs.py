"""Reading a copy of log directories from outside the broker: where each partition lives, and how far it
may be read. The Spark source and ``kafkalite consumer-groups`` use it.

Option ``path`` names one of three layouts:

- a standalone directory of ``<topic>-<partition>`` logs (written with ``Log`` or by the sink): every
  record up to the log end offset is readable;
- one broker's log directory (it holds ``replication-offset-checkpoint``): only records below the high
  watermark recorded there are committed, so only those are read;
- a ``Cluster.dir`` (``broker-<id>`` directories): each partition is read from the replica whose
  checkpointed high watermark is highest, never beyond that high watermark.

Spark plans a Python data source in a separate Python worker process, so the simulated cluster's memory
is out of reach: the checkpoint file the replica manager writes is the one place the high watermark is
visible from outside (``Cluster.checkpoint_high_watermarks()`` writes it on demand).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kafkalite.errors import InvalidConfigError
from kafkalite.storage.checkpoint import OffsetCheckpoint

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_BROKER_DIR = re.compile(r"^broker-(?P<id>\d+)$")

log = logging.getLogger("kafkalite.spark")  # its warnings are about what a Spark read will see


@dataclass(frozen=True)
class PartitionLocation:
    """One readable replica of a partition: its directory and, in a broker layout, its high watermark."""

    topic: str
    partition: int
    dir: str
    high_watermark: int | None  # None: a standalone log, readable to its end

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def layout_of(path: str | Path) -> str:
    """``"cluster"``, ``"broker"`` or ``"standalone"``; a missing directory is an error naming it."""
    root = Path(path)
    if not root.is_dir():
        raise InvalidConfigError(f"option 'path': log directory {str(root)!r} does not exist")
    if any(_BROKER_DIR.match(e.name) and e.is_dir() for e in os.scandir(root)):
        return "cluster"
    if (root / HIGH_WATERMARK_CHECKPOINT).exists():
        return "broker"
    return "standalone"


def _partition_dirs(root: Path) -> dict[tuple[str, int], str]:
    found = {}
    for entry in os.scandir(root):
        if entry.is_dir():
            m = _PARTITION_DIR.match(entry.name)
            if m:
                found[(m["topic"], int(m["partition"]))] = entry.path
    return found


def locate_partitions(path: str | Path) -> dict[tuple[str, int], PartitionLocation]:
    """Every partition under ``path`` with the replica to read it from (see the module docstring)."""
    root = Path(path)
    kind = layout_of(root)
    if kind == "standalone":
        return {tp: PartitionLocation(*tp, d, None) for tp, d in sorted(_partition_dirs(root).items())}
    brokers = [root] if kind == "broker" else _broker_dirs(root)
    best: dict[tuple[str, int], PartitionLocation] = {}
    unknown: set[tuple[str, int]] = set()
    for broker_dir in brokers:
        hws = OffsetCheckpoint(broker_dir / HIGH_WATERMARK_CHECKPOINT).read()
        for tp, d in _partition_dirs(broker_dir).items():
            hw = hws.get(tp)
            if hw is None:
                unknown.add(tp)  # created after the last checkpoint: nothing known to be committed
                hw = 0
            cur = best.get(tp)
            if cur is None or hw > (cur.high_watermark or 0):
                best[tp] = PartitionLocation(*tp, d, hw)
    missing = sorted(tp for tp in unknown if not best[tp].high_watermark)
    if missing:
        log.warning(
            "kafkalite: no high watermark checkpointed yet for %s under %s; reading nothing from them "
            "(call Cluster.checkpoint_high_watermarks() first)",
            ", ".join(f"{t}-{p}" for t, p in missing),
            root,
        )
    return dict(sorted(best.items()))


def _broker_dirs(root: Path) -> list[Path]:
    dirs = [(int(m["id"]), Path(e.path)) for e in os.scandir(root) if (m := _BROKER_DIR.match(e.name))]
    return [d for _, d in sorted(dirs) if d.is_dir()]


def describe(found: dict[tuple[str, int], PartitionLocation]) -> str:
    """``topic 'a' partitions [0, 1]; ...`` for error messages."""
    topics: dict[str, list[int]] = {}
    for t, p in found:
        topics.setdefault(t, []).append(p)
    if not topics:
        return "no <topic>-<partition> directories"
    return "; ".join(f"topic {t!r} partitions {sorted(ps)}" for t, ps in topics.items())


__all__ = ["PartitionLocation", "describe", "layout_of", "locate_partitions"]
