"""Streaming reads: ``spark.readStream.format("kafkalite")``, in wire mode or path mode.

Offsets are Spark's Kafka source JSON, ``{"topic": {"0": 42, "1": 17}}``: for each partition the next
offset to read. They live only in Spark's checkpoint: Spark writes the end offsets of every micro-batch
(``offsets/<n>``) before running it, so a restarted query replays an unfinished batch over exactly the same
ranges and then goes on from there: nothing lost, nothing read twice. No consumer group is joined and
nothing is committed to the brokers.

The latest offsets come from the same place as a batch query's bounds: ListOffsets at the partitions'
leaders in wire mode (the last stable offset under read_committed), the log directory in path mode; each
micro-batch's tasks read their ranges as batch tasks do (``source.read_partition``).

- ``maxOffsetsPerTrigger`` caps the offsets of one micro-batch, shared among partitions in proportion
  to how far behind each is (admission control, as Spark's Kafka source does it).
- ``Trigger.AvailableNow``: ``prepareForTriggerAvailableNow`` fixes the committed ends at query start;
  the query processes up to there (in several batches under a cap) and stops.
- Partitions that appear later (new topics matching ``subscribePattern``) start at their earliest
  offset; partitions that vanish or shrink, and offsets retention deleted before the query read them,
  are data loss: ``failOnDataLoss`` true fails the query naming the partition and offsets, false logs a
  warning and goes on with what still exists.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kafkalite.errors import InvalidConfigError, OffsetOutOfRangeError
from kafkalite.spark.options import parse_read_options
from kafkalite.spark.source import (
    KafkaliteInputPartition,
    OffsetRange,
    PartitionBounds,
    current_bounds,
    input_partitions,
    read_partition,
    resolve_offset,
    split_ranges,
)

log = logging.getLogger("kafkalite.spark")

TP = tuple[str, int]


def offsets_to_json(offsets: Mapping[TP, int]) -> dict:
    """``{(t, p): n}`` -> Spark's ``{"t": {"p": n}}``, in one canonical order (Spark compares offsets as
    JSON text, so the same offsets must always serialise the same way)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), n in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(n)
    return out


def offsets_from_json(doc: Mapping) -> dict[TP, int]:
    try:
        return {(t, int(p)): int(n) for t, parts in doc.items() for p, n in parts.items()}
    except (AttributeError, TypeError, ValueError):
        raise InvalidConfigError(f"not a kafkalite streaming offset: {doc!r}") from None


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], max_offsets: int | None) -> dict[TP, int]:
    """End offsets admitting at most ``max_offsets`` offsets in all, shared in proportion to each
    partition's backlog; the rounding remainder goes to the largest backlogs (ties by name), so the
    result is deterministic and uses the whole allowance."""
    lag = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(lag.values())
    if max_offsets is None or total <= max_offsets:
        return dict(latest)
    share = {tp: lag[tp] * max_offsets // total for tp in lag}
    left = max_offsets - sum(share.values())
    for tp in sorted(lag, key=lambda tp: (-(lag[tp] - share[tp]), tp)):
        if left == 0:
            break
        if share[tp] < lag[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start[tp] + share[tp] for tp in latest}


class KafkaliteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark keeps one instance for the life of a query, in one planner process: ``_target`` survives
    between micro-batches."""

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = parse_read_options(options, streaming=True)
        self._target: dict[TP, int] | None = None

    # ---- what is on disk now
    def _bounds(self) -> dict[TP, PartitionBounds]:
        return current_bounds(self.opts)

    def _lost(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"{message}; set failOnDataLoss=false to skip and go on")
        log.warning("kafkalite: %s; skipping (failOnDataLoss=false)", message)

    # ---- Spark's calls
    def initialOffset(self) -> dict:
        bounds = self._bounds()
        spec = self.opts.starting
        if spec.kind in ("offsets", "timestamps"):
            stray = sorted(set(spec.value) - set(bounds))
            if stray:
                raise InvalidConfigError(
                    f"option 'startingOffsets' names partitions not being read: "
                    f"{', '.join(f'{t}-{p}' for t, p in stray)}"
                )
        return offsets_to_json(
            {tp: resolve_offset(spec, "starting", b, self.opts) for tp, b in bounds.items()}
        )

    def _latest(self, start: Mapping[TP, int]) -> tuple[dict[TP, int], dict[TP, PartitionBounds]]:
        """Committed ends now, never behind ``start`` (Spark offsets only move forward)."""
        bounds = self._bounds()
        latest: dict[TP, int] = {}
        for tp, b in bounds.items():
            s = start.get(tp, b.log_start)  # a partition new since the query started: from earliest
            if b.end < s:
                self._lost(
                    f"{tp[0]}-{tp[1]}: committed end moved back from {s} to {b.end} "
                    "(replica truncated or recreated); records may have been missed"
                )
            latest[tp] = max(b.end, s)
        for tp in sorted(set(start) - set(latest)):
            self._lost(f"{tp[0]}-{tp[1]} disappeared (topic deleted?) at offset {start[tp]}")
        return latest, bounds

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest, bounds = self._latest(begin)
        # A partition new since the query started is read from its log start.
        begin = {tp: begin.get(tp, bounds[tp].log_start) for tp in latest}
        if self._target is not None:
            # Trigger.AvailableNow: nothing beyond what was committed when the query started (a
            # partition created since then is left for the next run), so the query always ends.
            latest = {tp: max(begin[tp], min(n, self._target.get(tp, begin[tp]))) for tp, n in latest.items()}
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets_to_json(rate_limit(begin, latest, cap))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: b.end for tp, b in self._bounds().items()}

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json({tp: b.end for tp, b in self._bounds().items()})

    def partitions(self, start: dict, end: dict) -> list[KafkaliteInputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        now = current_bounds(self.opts, stop)
        ranges = []
        for tp, e in sorted(stop.items()):
            b = now.get(tp)
            s = begin.get(tp, b.log_start if b else e)
            if b is not None and s < b.log_start:
                self._lost(
                    f"{tp[0]}-{tp[1]}: offsets [{s}, {min(b.log_start, e)}) were deleted (retention) "
                    "before this query read them"
                )
                s = min(b.log_start, e)
            if e > s:
                ranges.append(OffsetRange(tp[0], tp[1], s, e, (b.dir or None) if b else None))
        return input_partitions(self.opts, split_ranges(ranges, self.opts.min_partitions))

    def read(self, partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the data stays in the log, and progress lives in Spark's checkpoint."""


__all__ = ["KafkaliteStreamReader", "offsets_from_json", "offsets_to_json", "rate_limit"]
