"""The batch reader of ``format("kafkalite")``: planning (both modes) and path-mode reading.

``spark.read.format("kafkalite").option(...).option("subscribe", "t1,t2").load()`` gives the columns of
Spark's ``format("kafka")`` (key, value, topic, partition, offset, timestamp, timestampType; ``headers``
with ``includeHeaders``). Planning, on the driver, fixes one offset range ``[start, end)`` per partition
(cut into several with ``minPartitions``), ``end`` never beyond what is committed; each Spark task then
reads exactly its range, so records appended meanwhile cannot change the answer of a planned query.

Where the data comes from depends on the mode (see ``options.py``):

- wire mode (``kafka.bootstrap.servers``): the partitions come from Metadata and the bounds from
  ListOffsets (the last stable offset under read_committed), and a task fetches its range from the
  partition's leader over the Kafka protocol (``wire.py``). No file is opened, so the executors can sit
  on other machines than the brokers, and any Kafka-compatible cluster will do.
- path mode (``path``): planning opens each chosen partition directory read-only and a task reads the
  segment files (``fetch.py``): for a copy of a cluster's log directories.

``datasource.py`` hands Spark this batch reader, the streaming reader (``stream.py``) and the batch and
streaming writers (``sink.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from kafkalite.errors import InvalidConfigError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkalite.records import iter_batches, validate_batch
from kafkalite.spark import wire
from kafkalite.spark.arrow_records import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    batches_to_arrow,
    scan_plain,
    scanned_to_arrow,
)
from kafkalite.spark.fetch import SegmentFetcher
from kafkalite.spark.options import (  # noqa: F401 - SCHEMA_DDL and HEADERS_DDL: re-exported
    EARLIEST,
    HEADERS_DDL,
    LATEST,
    SCHEMA_DDL,
    OffsetSpec,
    ReadOptions,
    parse_read_options,
)
from kafkalite.spark.read_ahead import read_ahead, worth_reading_ahead
from kafkalite.storage import Log
from kafkalite.storage.log_dirs import PartitionLocation, describe, locate_partitions
from kafkalite.storage.transaction_index import TXN_INDEX_SUFFIX, read_txn_index

FETCH_MAX_BYTES = 4 << 20  # bigger fetches, fewer numpy passes: ~40k records of 100 bytes each
INTERNAL_TOPIC_PREFIX = "__"  # __consumer_offsets, __transaction_state

log = logging.getLogger("kafkalite.spark")

__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "KafkaliteInputPartition",
    "OffsetRange",
    "PartitionBounds",
    "current_bounds",
    "input_partitions",
    "partition_bounds",
    "plan_ranges",
    "read_range",
    "select_partitions",
    "split_ranges",
]


@dataclass(frozen=True)
class OffsetRange:
    """What one Spark task reads: offsets ``[start, end)`` of one partition, from replica ``dir``."""

    topic: str
    partition: int
    start: int
    end: int
    dir: str | None = None  # None: ``<logdir>/<topic>-<partition>``

    @property
    def dirname(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class KafkaliteInputPartition(InputPartition):
    """A picklable offset range plus how to read it: from ``logdir`` (path mode) or, with ``bootstrap``
    set, from the brokers with the client settings ``kafka_params`` (wire mode)."""

    def __init__(
        self,
        logdir: str | None,
        rng: OffsetRange,
        fail_on_data_loss: bool = True,
        include_headers: bool = False,
        read_committed: bool = False,
        bootstrap: str | None = None,
        kafka_params: tuple[tuple[str, str], ...] = (),
        poll_timeout_ms: int = 120_000,
        tasks: int = 1,
    ) -> None:
        super().__init__(rng)
        self.logdir = logdir
        self.range = rng
        self.fail_on_data_loss = fail_on_data_loss
        self.include_headers = include_headers
        self.read_committed = read_committed
        self.bootstrap = bootstrap
        self.kafka_params = kafka_params
        self.poll_timeout_ms = poll_timeout_ms
        self.tasks = tasks  # of the whole scan: whether reading ahead has a core to run on

    def __repr__(self) -> str:
        r = self.range
        return f"KafkaliteInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


# --------------------------------------------------------------------------------------------------
# planning (plain functions: testable without a SparkSession)


def select_partitions(
    opts: ReadOptions, found: Mapping[tuple[str, int], PartitionLocation]
) -> list[tuple[str, int]]:
    """The (topic, partition) pairs named by subscribe / subscribePattern / assign."""
    if opts.subscription == "subscribe":
        chosen = [tp for tp in found if tp[0] in opts.topics]
        what = f"subscribe={','.join(opts.topics)!r}"
    elif opts.subscription == "subscribePattern":
        pattern = re.compile(opts.pattern or "")
        # Kafka's pattern subscription matches whole names and leaves internal topics out.
        chosen = [
            tp for tp in found if pattern.fullmatch(tp[0]) and not tp[0].startswith(INTERNAL_TOPIC_PREFIX)
        ]
        what = f"subscribePattern={opts.pattern!r}"
    else:
        for t, p in opts.assign:
            if (t, p) not in found:
                raise UnknownTopicOrPartitionError(
                    f"option 'assign' names {t}-{p} but {opts.path!r} has no directory {t}-{p} "
                    f"(found: {describe(dict(found))})"
                )
        chosen = list(opts.assign)
        what = "assign"
    if not chosen:
        raise UnknownTopicOrPartitionError(
            f"no partitions found for {what} in log directory {opts.path!r} (found: {describe(dict(found))})"
        )
    return sorted(set(chosen))


@dataclass(frozen=True)
class PartitionBounds:
    """What planning learns from a replica: its dir, log start and the end of committed data."""

    topic: str
    partition: int
    dir: str
    log_start: int
    end: int  # min(log end offset, checkpointed high watermark)


def _open(dir: str):
    return Log.open(dir, read_only=True)


def partition_bounds(loc: PartitionLocation) -> PartitionBounds:
    log_ = _open(loc.dir)
    try:
        start, leo = log_.log_start_offset, log_.log_end_offset
    finally:
        log_.close()
    end = leo if loc.high_watermark is None else max(start, min(leo, loc.high_watermark))
    return PartitionBounds(loc.topic, loc.partition, loc.dir, start, end)


def offset_for_timestamp(b: PartitionBounds, ts: int, opts: ReadOptions | None = None) -> int | None:
    """First committed offset whose timestamp is >= ``ts``, None if there is none: the time index, or
    in wire mode ListOffsets for that timestamp."""
    if opts is not None and opts.wire:
        off = wire.offset_for_timestamp(opts, (b.topic, b.partition), ts)
    else:
        log_ = _open(b.dir)
        try:
            found = log_.offset_for_timestamp(ts)
        finally:
            log_.close()
        off = None if found is None else found[0]
    if off is None or off >= b.end:
        return None
    return max(off, b.log_start)


def current_bounds(
    opts: ReadOptions, tps: Iterable[tuple[str, int]] | None = None
) -> dict[tuple[str, int], PartitionBounds]:
    """Log start and committed end now of the partitions the options choose, or (``tps``) of those of
    ``tps`` that still exist; from the brokers in wire mode, from the log directory in path mode."""
    if opts.wire:
        return {
            tp: PartitionBounds(tp[0], tp[1], "", start, end)
            for tp, (start, end) in wire.bounds(opts, None if tps is None else list(tps)).items()
        }
    found = locate_partitions(opts.path)
    chosen = select_partitions(opts, found) if tps is None else [tp for tp in tps if tp in found]
    return {tp: partition_bounds(found[tp]) for tp in chosen}


def input_partitions(opts: ReadOptions, ranges: Iterable[OffsetRange]) -> list[KafkaliteInputPartition]:
    """The Spark partitions (tasks) reading ``ranges`` with the query's options."""
    ranges = list(ranges)
    return [
        KafkaliteInputPartition(
            opts.path,
            r,
            opts.fail_on_data_loss,
            opts.include_headers,
            opts.read_committed,
            opts.bootstrap,
            opts.kafka_params,
            opts.poll_timeout_ms,
            len(ranges),
        )  # fmt: skip
        for r in ranges
    ]


def resolve_offset(
    spec: OffsetSpec, side: str, b: PartitionBounds, opts: ReadOptions, *, check_range: bool = True
) -> int:
    """One partition's start (``side`` = "starting") or end offset. Partitions a JSON spec leaves out
    start at earliest and end at latest, as in Spark."""
    tp = (b.topic, b.partition)
    starting = side == "starting"
    if spec.kind in ("timestamp", "timestamps"):
        ts = spec.value if spec.kind == "timestamp" else spec.value.get(tp)
        if ts is None:
            return b.log_start if starting else b.end
        off = offset_for_timestamp(b, ts, opts)
        if off is not None:
            return off
        if starting and opts.by_timestamp_strategy == "error":
            raise OffsetOutOfRangeError(
                f"{b.topic}-{b.partition}: no committed record has a timestamp >= {ts} (offsets "
                f"[{b.log_start}, {b.end})); set startingOffsetsByTimestampStrategy=latest to start at the end"
            )
        return b.end
    if spec.kind in ("earliest", "latest"):
        return b.log_start if spec.kind == "earliest" else b.end
    off = spec.value.get(tp, EARLIEST if starting else LATEST)
    if off == EARLIEST:
        return b.log_start
    if off == LATEST:
        return b.end
    name = f"{side}Offsets"
    if off < b.log_start:
        if opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"option {name!r}: offset {off} for {b.topic}-{b.partition} is below the log start offset "
                f"{b.log_start} (the data was deleted); valid range is [{b.log_start}, {b.end}]. "
                "Set failOnDataLoss=false to read from the log start instead"
            )
        log.warning(
            "kafkalite: %s-%s offsets [%s, %s) were deleted before they were read; skipping them "
            "(failOnDataLoss=false)",
            b.topic,
            b.partition,
            off,
            b.log_start,
        )
        return b.log_start
    if off > b.end and check_range:
        raise OffsetOutOfRangeError(
            f"option {name!r}: offset {off} for {b.topic}-{b.partition} is beyond the committed end "
            f"{b.end}; valid range is [{b.log_start}, {b.end}]"
        )
    return off


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's ``minPartitions``: with fewer ranges than asked, cut the big ones into near-equal pieces,
    each range getting a share of the tasks proportional to its size (at least one)."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size * min_partitions / total))) if r.size else 1
        cuts = [r.start + (r.size * i) // parts for i in range(parts + 1)]
        out += [replace(r, start=a, end=z) for a, z in zip(cuts, cuts[1:], strict=False)]
    return out


def plan_ranges(options: Mapping[str, str] | ReadOptions) -> list[OffsetRange]:
    """Check the options, learn each chosen partition's bounds (brokers or log directory) and fix its
    offset range now."""
    opts = options if isinstance(options, ReadOptions) else parse_read_options(options)
    found = current_bounds(opts)
    chosen = sorted(found)
    for spec, name in ((opts.starting, "startingOffsets"), (opts.ending, "endingOffsets")):
        if spec.kind in ("offsets", "timestamps"):
            stray = sorted(set(spec.value) - set(chosen))
            if stray:
                names = ", ".join(f"{t}-{p}" for t, p in stray)
                if spec.kind == "timestamps":
                    name = name.replace("Offsets", "OffsetsByTimestamp")
                raise InvalidConfigError(f"option {name!r} names partitions not being read: {names}")
    ranges = []
    for tp in chosen:
        b = found[tp]
        start = resolve_offset(opts.starting, "starting", b, opts)
        end = resolve_offset(opts.ending, "ending", b, opts)
        if end < start:
            raise InvalidConfigError(
                f"{tp[0]}-{tp[1]}: ending offset {end} is before starting offset {start}"
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end, b.dir or None))
    return split_ranges(ranges, opts.min_partitions)


# --------------------------------------------------------------------------------------------------
# reading


def read_partition(partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
    """What one Spark task reads, batch or streaming: its planned offset range, with the query's options,
    made a batch ahead of Spark taking it (``read_ahead``). In path mode only when the scan's tasks leave
    a core for that thread (it decodes, holding the GIL half the time); in wire mode always, since that
    thread mostly waits for the broker's answer."""
    batches = _read_partition(partition)
    if getattr(partition, "bootstrap", None) or worth_reading_ahead(getattr(partition, "tasks", 1)):
        return read_ahead(batches)
    return batches


def _read_partition(partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
    if getattr(partition, "bootstrap", None):
        return wire.read_range(
            partition.range,
            partition.bootstrap,
            partition.kafka_params,
            fail_on_data_loss=partition.fail_on_data_loss,
            include_headers=partition.include_headers,
            read_committed=partition.read_committed,
            poll_timeout_ms=partition.poll_timeout_ms,
        )
    return read_range(
        partition.logdir,
        partition.range,
        fail_on_data_loss=partition.fail_on_data_loss,
        include_headers=partition.include_headers,
        read_committed=getattr(partition, "read_committed", False),
    )


def _aborted_transactions(part_dir: Path) -> list:
    return [e for p in sorted(part_dir.glob(f"*{TXN_INDEX_SUFFIX}")) for e in read_txn_index(p)]


def _in_aborted(aborted: list, h) -> bool:
    return any(
        e.producer_id == h.producer_id and e.first_offset <= h.base_offset <= e.last_offset for e in aborted
    )


def read_range(
    logdir: str | Path,
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    include_headers: bool = False,
    read_committed: bool = False,
    fetch_max_bytes: int = FETCH_MAX_BYTES,
    rows_per_batch: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding the records of ``rng`` in offset order, one per fetch of ``fetch_max_bytes``.

    Every batch's CRC is checked, as a Kafka consumer does by default. Control batches (transaction
    markers) are skipped, and offsets removed by compaction are simply absent: the loop follows the
    batches' own offsets and never assumes they are consecutive (SPARK-23685). ``rows_per_batch``, when
    given, caps the rows of each Arrow batch. ``read_committed`` (Spark's ``kafka.isolation.level``) drops
    the batches of aborted transactions, found in the partition's ``.txnindex`` files; the range still
    ends at the high watermark, so read after the transactions of interest have completed.
    """
    if rng.end <= rng.start:
        return
    part_dir = Path(rng.dir or str(Path(logdir) / rng.dirname))
    aborted = _aborted_transactions(part_dir) if read_committed else []
    with SegmentFetcher(part_dir) as fetcher:
        offset = rng.start
        while offset < rng.end:
            start = fetcher.log_start
            if start is None or offset < start:  # retention moved the log start past us after planning
                upto = rng.end if start is None else min(start, rng.end)
                if fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{rng.dirname}: offsets [{offset}, {upto}) were deleted (retention) before this "
                        "query read them; set failOnDataLoss=false to skip them"
                    )
                log.warning(
                    "kafkalite: %s offsets [%s, %s) were deleted before they were read; skipping them",
                    rng.dirname,
                    offset,
                    upto,
                )
                offset = upto
                continue
            data = fetcher.fetch(offset, fetch_max_bytes)
            if not data:
                # The replica ends before the planned end: it was truncated since planning.
                if fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{rng.dirname}: log ends at offset {offset} but the query planned to read up to "
                        f"{rng.end} (was the log truncated?); set failOnDataLoss=false to skip"
                    )
                log.warning("kafkalite: %s ends at %s before the planned %s", rng.dirname, offset, rng.end)
                break
            fetched_from = offset  # records below it (in its first batch, or skipped as lost) are not rows
            scan = None if aborted else scan_plain(data, offset, rng.end)
            if scan is not None:  # the common case, all batches at once; else the loop below
                offset = scan.offset
                batch = scanned_to_arrow(
                    data,
                    scan,
                    rng.topic,
                    rng.partition,
                    fetched_from,
                    rng.end,
                    include_headers=include_headers,
                )
                yield from _capped(batch, rows_per_batch)
                continue
            picked = []
            advanced = False
            for pos, h in iter_batches(data):
                if h.base_offset >= rng.end:
                    offset = rng.end
                    break
                nxt = h.base_offset + h.last_offset_delta + 1
                if nxt <= offset:
                    continue
                validate_batch(data, pos)
                # Control batches (transaction markers) are not rows; nor, read_committed, aborted ones.
                in_aborted = aborted and h.attributes & 0x10 and _in_aborted(aborted, h)
                if not h.attributes & 0x20 and not in_aborted:
                    picked.append((pos, h))
                offset, advanced = nxt, True
            if not advanced and offset < rng.end:
                raise OffsetOutOfRangeError(f"{rng.dirname}: no progress reading at offset {offset}")
            batch = batches_to_arrow(
                data, picked, rng.topic, rng.partition, fetched_from, rng.end, include_headers=include_headers
            )
            yield from _capped(batch, rows_per_batch)


def _capped(batch: pa.RecordBatch | None, rows_per_batch: int | None) -> Iterator[pa.RecordBatch]:
    if batch is None:
        return
    if rows_per_batch:
        for i in range(0, batch.num_rows, rows_per_batch):
            yield batch.slice(i, rows_per_batch)
    else:
        yield batch
