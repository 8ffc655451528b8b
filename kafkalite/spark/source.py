"""A PySpark data source that reads kafkalite partition logs like Spark's Kafka source reads a cluster.

``spark.read.format("kafkalite").option("path", LOGDIR).option("subscribe", "t1,t2").load()`` gives the
same seven columns as ``format("kafka")``. Planning (on the driver side) opens every chosen partition
read-only and fixes an offset range ``[start, end)`` for it; each Spark task then reads exactly that range,
so a writer appending concurrently cannot change the answer of a query already planned.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafkalite.errors import InvalidConfigError, OffsetOutOfRangeError, UnknownTopicOrPartitionError

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)

ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)

# Canonical spelling; Spark hands options over lower-cased.
VALID_OPTIONS = (
    "path",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "failOnDataLoss",
)
SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")

EARLIEST = -2  # Spark's sentinels inside offset JSON
LATEST = -1

FETCH_MAX_BYTES = 1 << 20
ROWS_PER_ARROW_BATCH = 32_768

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(frozen=True)
class OffsetRange:
    """What one Spark task reads: offsets ``[start, end)`` of one kafkalite partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def dirname(self) -> str:
        return f"{self.topic}-{self.partition}"


class KafkaliteInputPartition(InputPartition):
    """A picklable offset range plus the log directory it lives in."""

    def __init__(self, logdir: str, rng: OffsetRange, fail_on_data_loss: bool = True) -> None:
        super().__init__(rng)
        self.logdir = logdir
        self.range = rng
        self.fail_on_data_loss = fail_on_data_loss

    def __repr__(self) -> str:
        r = self.range
        return f"KafkaliteInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


# --------------------------------------------------------------------------------------------------
# discovery and option parsing (plain functions: testable without a SparkSession)


def discover_partitions(logdir: str | Path) -> dict[str, list[int]]:
    """Topic -> sorted partition numbers of the ``<topic>-<partition>`` directories in ``logdir``.

    Topic names may contain '-', so the partition is what follows the last one. Directories that do not
    end in ``-<digits>`` (Kafka's ``.delete``/``-future`` leftovers, checkpoints) are ignored.
    """
    root = Path(logdir)
    if not root.is_dir():
        raise InvalidConfigError(f"option 'path': log directory {str(root)!r} does not exist")
    found: dict[str, list[int]] = {}
    for entry in os.scandir(root):
        if not entry.is_dir():
            continue
        m = _PARTITION_DIR.match(entry.name)
        if m:
            found.setdefault(m["topic"], []).append(int(m["partition"]))
    return {t: sorted(ps) for t, ps in sorted(found.items())}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def check_options(options: Mapping[str, str]) -> dict[str, str]:
    """Reject unknown options and bad subscription combinations; returns the options keyed lower-case."""
    opts = _lower(options)
    valid = {o.lower() for o in VALID_OPTIONS}
    unknown = sorted(k for k in opts if k not in valid)
    if unknown:
        raise InvalidConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for format 'kafkalite'; "
            f"valid options are: {', '.join(VALID_OPTIONS)}"
        )
    if not opts.get("path"):
        raise InvalidConfigError(
            "option 'path' is required: the log directory holding <topic>-<partition> directories"
        )
    given = [o for o in SUBSCRIPTION_OPTIONS if o.lower() in opts]
    if len(given) != 1:
        raise InvalidConfigError(
            f"exactly one of {', '.join(SUBSCRIPTION_OPTIONS)} must be given, got "
            f"{', '.join(given) if given else 'none'}"
        )
    return opts


def select_partitions(opts: Mapping[str, str], found: Mapping[str, list[int]]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs named by subscribe / subscribePattern / assign."""
    logdir = opts["path"]
    if "subscribe" in opts:
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise InvalidConfigError("option 'subscribe' names no topic (expected 't1,t2,...')")
        chosen = [(t, p) for t in topics for p in found.get(t, [])]
        what = f"subscribe={opts['subscribe']!r}"
    elif "subscribepattern" in opts:
        try:
            pattern = re.compile(opts["subscribepattern"])
        except re.error as e:
            raise InvalidConfigError(f"option 'subscribePattern' is not a valid regex: {e}") from None
        # Kafka's pattern subscription matches whole topic names.
        chosen = [(t, p) for t, ps in found.items() if pattern.fullmatch(t) for p in ps]
        what = f"subscribePattern={opts['subscribepattern']!r}"
    else:
        assigned = _parse_json_option("assign", opts["assign"])
        chosen = []
        for t, ps in assigned.items():
            if not isinstance(ps, list) or not all(isinstance(p, int) for p in ps):
                raise InvalidConfigError(
                    f"option 'assign': topic {t!r} must map to a list of partition numbers, got {ps!r}"
                )
            for p in ps:
                if p not in found.get(t, []):
                    raise UnknownTopicOrPartitionError(
                        f"option 'assign' names {t}-{p} but {logdir!r} has no directory {t}-{p} "
                        f"(found: {_describe(found)})"
                    )
                chosen.append((t, p))
        what = f"assign={opts['assign']!r}"
    if not chosen:
        raise UnknownTopicOrPartitionError(
            f"no partitions found for {what} in log directory {logdir!r} (found: {_describe(found)})"
        )
    return sorted(set(chosen))


def _describe(found: Mapping[str, list[int]]) -> str:
    if not found:
        return "no <topic>-<partition> directories"
    return "; ".join(f"topic {t!r} partitions {ps}" for t, ps in found.items())


def _parse_json_option(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(f"option {name!r} is not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise InvalidConfigError(f"option {name!r} must be a JSON object, got {text!r}")
    return value


def parse_offsets_option(name: str, text: str | None, *, default: str) -> str | dict[tuple[str, int], int]:
    """``"earliest"``, ``"latest"`` or ``{(topic, partition): offset}`` from Spark's JSON form.

    Batch rules, as in Spark: a query cannot start at ``latest`` nor end at ``earliest`` (that range is
    always empty, which is almost certainly a mistake), in words or as -1 / -2 in JSON.
    """
    text = (text or default).strip()
    starting = name == "startingOffsets"
    forbidden_word, forbidden_num = ("latest", LATEST) if starting else ("earliest", EARLIEST)
    if text.lower() in ("earliest", "latest"):
        if text.lower() == forbidden_word:
            raise InvalidConfigError(f"option {name!r} = {forbidden_word!r} is not allowed in a batch query")
        return text.lower()
    spec = _parse_json_option(name, text)
    out: dict[tuple[str, int], int] = {}
    for topic, parts in spec.items():
        if not isinstance(parts, dict):
            raise InvalidConfigError(
                f'option {name!r}: topic {topic!r} must map to {{"partition": offset}}, got {parts!r}'
            )
        for p, off in parts.items():
            try:
                pnum = int(p)
            except ValueError:
                raise InvalidConfigError(f"option {name!r}: partition {p!r} is not a number") from None
            if not isinstance(off, int) or off < EARLIEST:
                raise InvalidConfigError(
                    f"option {name!r}: offset for {topic}-{p} must be an integer >= -2, got {off!r}"
                )
            if off == forbidden_num:
                raise InvalidConfigError(
                    f"option {name!r}: offset {off} ({forbidden_word}) for {topic}-{p} is not allowed "
                    "in a batch query"
                )
            out[(topic, pnum)] = off
    return out


def _resolve(
    spec: str | dict[tuple[str, int], int],
    name: str,
    tp: tuple[str, int],
    log_start: int,
    log_end: int,
    fail_on_data_loss: bool,
) -> int:
    if isinstance(spec, str):
        return log_start if spec == "earliest" else log_end
    # Partitions left out of the JSON start at earliest / end at latest, as in Spark.
    off = spec.get(tp, EARLIEST if name == "startingOffsets" else LATEST)
    if off == EARLIEST:
        return log_start
    if off == LATEST:
        return log_end
    if off < log_start:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"option {name!r}: offset {off} for {tp[0]}-{tp[1]} is below the log start offset "
                f"{log_start} (the data was deleted); valid range is [{log_start}, {log_end}]. "
                "Set failOnDataLoss=false to read from the log start instead"
            )
        return log_start
    if off > log_end:
        raise OffsetOutOfRangeError(
            f"option {name!r}: offset {off} for {tp[0]}-{tp[1]} is beyond the log end offset {log_end}; "
            f"valid range is [{log_start}, {log_end}]"
        )
    return off


def plan_ranges(options: Mapping[str, str]) -> list[OffsetRange]:
    """Check the options, open each chosen partition read-only and fix its offset range now."""
    from kafkalite.storage import Log  # late: planning-only dependency, keeps import of this module light

    opts = check_options(options)
    found = discover_partitions(opts["path"])
    chosen = select_partitions(opts, found)
    fail_on_data_loss = _parse_bool("failOnDataLoss", opts.get("failondataloss", "true"))
    starting = parse_offsets_option("startingOffsets", opts.get("startingoffsets"), default="earliest")
    ending = parse_offsets_option("endingOffsets", opts.get("endingoffsets"), default="latest")
    for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
        if isinstance(spec, dict):
            stray = sorted(set(spec) - set(chosen))
            if stray:
                names = ", ".join(f"{t}-{p}" for t, p in stray)
                raise InvalidConfigError(f"option {name!r} names partitions not being read: {names}")

    ranges = []
    for tp in chosen:
        log = Log.open(Path(opts["path"]) / f"{tp[0]}-{tp[1]}", read_only=True)
        try:
            log_start, log_end = log.log_start_offset, log.log_end_offset
        finally:
            log.close()
        start = _resolve(starting, "startingOffsets", tp, log_start, log_end, fail_on_data_loss)
        end = _resolve(ending, "endingOffsets", tp, log_start, log_end, fail_on_data_loss)
        if end < start:
            raise InvalidConfigError(
                f"{tp[0]}-{tp[1]}: ending offset {end} is before starting offset {start}"
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return ranges


def _parse_bool(name: str, text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise InvalidConfigError(f"option {name!r} must be true or false, got {text!r}")
    return low == "true"


# --------------------------------------------------------------------------------------------------
# reading


def _arrow_batch(
    topic: str,
    partition: int,
    keys: list,
    values: list,
    offsets: list[int],
    timestamps_ms: list[int],
    ts_types: list[int],
) -> pa.RecordBatch:
    n = len(offsets)
    ts = pc.multiply(pa.array(timestamps_ms, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            ts,
            pa.array(ts_types, pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


def read_range(
    logdir: str | Path,
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    rows_per_batch: int = ROWS_PER_ARROW_BATCH,
    fetch_max_bytes: int = FETCH_MAX_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding the records of ``rng``, in offset order, fetched 1 MiB at a time.

    Control batches (transaction markers) are skipped, as a Kafka consumer skips them: their offsets are
    gaps in the output.
    """
    from kafkalite.records import decode_batch_tuples, iter_batches
    from kafkalite.storage import Log

    if rng.end <= rng.start:
        return
    log = Log.open(Path(logdir) / rng.dirname, read_only=True)
    try:
        keys: list = []
        values: list = []
        offsets: list = []
        timestamps: list = []
        ts_types: list = []
        offset = rng.start
        while offset < rng.end:
            try:
                fetched = log.read(offset, fetch_max_bytes)
            except OffsetOutOfRangeError:
                # Retention moved the log start past us between planning and reading.
                if fail_on_data_loss or log.log_start_offset <= offset:
                    raise
                offset = log.log_start_offset
                continue
            data = fetched.records.read()
            if not data:
                if fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{rng.dirname}: log ends at offset {offset} but the query planned to read up to "
                        f"{rng.end} (was the log truncated?)"
                    )
                break
            for pos, header in iter_batches(data):
                offset = header.next_offset
                if header.is_control:
                    continue
                _, rows = decode_batch_tuples(data, pos)
                if not rows:
                    continue
                if rows[0][0] < rng.start or rows[-1][0] >= rng.end:
                    rows = [r for r in rows if rng.start <= r[0] < rng.end]
                    if not rows:
                        continue
                o, t, k, v, _h = zip(*rows, strict=True)
                offsets.extend(o)
                timestamps.extend(t)
                keys.extend(k)
                values.extend(v)
                ts_types.extend([int(header.timestamp_type)] * len(o))
                if len(offsets) >= rows_per_batch:
                    yield _arrow_batch(rng.topic, rng.partition, keys, values, offsets, timestamps, ts_types)
                    keys, values, offsets, timestamps, ts_types = [], [], [], [], []
                if offset >= rng.end:
                    break
        if offsets:
            yield _arrow_batch(rng.topic, rng.partition, keys, values, offsets, timestamps, ts_types)
    finally:
        log.close()


# --------------------------------------------------------------------------------------------------
# the Spark classes


class KafkaliteDataSource(DataSource):
    """``format("kafkalite")``: options path, subscribe | subscribePattern | assign, startingOffsets,
    endingOffsets, failOnDataLoss."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> str:
        # Fail at load() rather than at the first action when the options are wrong.
        opts = check_options(self.options)
        select_partitions(opts, discover_partitions(opts["path"]))
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaliteReader(dict(self.options))


class KafkaliteReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.fail_on_data_loss = _parse_bool("failOnDataLoss", _lower(options).get("failondataloss", "true"))

    def partitions(self) -> list[KafkaliteInputPartition]:
        logdir = _lower(self.options)["path"]
        return [
            KafkaliteInputPartition(logdir, rng, self.fail_on_data_loss) for rng in plan_ranges(self.options)
        ]

    def read(self, partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_range(
            partition.logdir, partition.range, fail_on_data_loss=partition.fail_on_data_loss
        )
