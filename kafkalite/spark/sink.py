"""Writing: ``df.write.format("kafkalite")`` and ``df.writeStream.format("kafkalite")``.

Two modes, exactly one option selecting each: ``kafka.bootstrap.servers`` (wire mode) produces through
running brokers, as Spark's Kafka sink does (``wire_sink.py``); ``path`` (path mode, the rest of this
docstring) writes standalone log directories directly, and refuses a directory a running broker holds
(a broker keeps ``<dir>/.lock`` locked, see ``storage/log_dir_lock.py``; the sink takes that same lock
while it appends).

Spark 4 runs Python data source writes in append mode only: ``df.write.format("kafkalite")...
.mode("append").save()`` (the default mode, ErrorIfExists, is refused by Spark itself; "overwrite" is
refused here, since a log is append-only).

Spark's Kafka sink conventions: a ``value`` column (binary or string) is required; ``key`` (binary or
string), ``headers`` (array of struct<key: string, value: binary>) and ``partition`` (int) are optional;
the topic comes from the ``topic`` option, which overrides a ``topic`` column. Without a partition
(column absent or null) the partition is Kafka's default for a key, ``toPositive(murmur2(key)) % n``,
and round-robin for null keys. A ``timestamp`` column, if present, sets the record timestamps (ms);
otherwise records carry no timestamp (-1), since kafkalite never reads the wall clock. A topic that does
not exist yet gets option ``partitions`` partitions (default 1).

How several Spark tasks write one partition safely: a ``Log`` is single-writer, and tasks run in
different processes. So tasks only *encode*: each writes its record batches to its own staging file
under ``<path>/.kafkalite-staging/<job>/`` and returns their positions in its commit message. The
driver-side ``commit`` then appends every staged batch, task by task, under an exclusive file lock on
``<path>/.kafkalite-sink.lock`` (the log assigns the offsets, as a leader does); ``abort`` deletes the
staging files, so a failed job leaves the logs untouched. Appending happens once, in one process, in a
deterministic order (task id, then the task's own order).

The streaming sink adds exactly-once per micro-batch when the query has a ``checkpointLocation``: before
appending batch ``n`` it records ``n`` and every partition's log end offset in
``<path>/.kafkalite-sink/<query>.json``, and marks it done afterwards. A replay of a done batch is
skipped; a replay of a batch interrupted half-way first truncates the logs back to the recorded ends.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType, TimestampType

from kafkalite.client.partitioner import murmur2, to_positive
from kafkalite.errors import InvalidConfigError, InvalidRecordError
from kafkalite.records import build_batch
from kafkalite.spark.options import WriteOptions, parse_write_options
from kafkalite.spark.wire_sink import ProducedRecords, make_producer, produce_task
from kafkalite.storage import Log
from kafkalite.storage.log_dir_lock import LOCK_FILE as LOG_DIR_LOCK
from kafkalite.storage.log_dir_lock import LogDirInUseError, LogDirLock, is_locked
from kafkalite.storage.log_dirs import layout_of

STAGING_DIR = ".kafkalite-staging"
LOCK_FILE = ".kafkalite-sink.lock"
STREAM_STATE_DIR = ".kafkalite-sink"
BATCH_BYTES = 256 * 1024  # target encoded batch size: well under max.message.bytes (1 MiB)
BATCH_RECORDS = 4096


@dataclass
class StagedBatches(WriterCommitMessage):
    """What one task staged: ``(topic, partition, position, size, records)`` per batch in ``file``."""

    task: int
    file: str
    batches: list[tuple[str, int, int, int, int]] = field(default_factory=list)


def _check_schema(schema: StructType, opts: WriteOptions) -> None:
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise InvalidConfigError(
            f"the kafkalite sink needs a 'value' column (binary or string); columns are {list(types)}"
        )
    allowed = {
        "key": (BinaryType, StringType),
        "value": (BinaryType, StringType),
        "topic": (StringType,),
        "partition": (IntegerType,),
        "timestamp": (TimestampType,),
    }
    for name, kinds in allowed.items():
        if name in types and not isinstance(types[name], kinds):
            want = " or ".join(k.typeName() for k in kinds)
            raise InvalidConfigError(f"sink column {name!r} must be {want}, got {types[name].simpleString()}")
    if "headers" in types:
        t = types["headers"]
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
            and isinstance(t.elementType.fields[0].dataType, StringType)
            and isinstance(t.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise InvalidConfigError(
                f"sink column 'headers' must be array<struct<key: string, value: binary>>, got {t.simpleString()}"
            )
    if opts.topic is None and "topic" not in types:
        raise InvalidConfigError("the kafkalite sink needs option 'topic' or a 'topic' column")


def _held_by_broker(root: Path) -> InvalidConfigError:
    return InvalidConfigError(
        f"option 'path': {str(root)!r} is held by a running broker (its {LOG_DIR_LOCK} is locked); writing "
        "into a live broker's log directory would corrupt it: produce through the brokers with option "
        "'kafka.bootstrap.servers' instead"
    )


class _BrokerExclusion:
    """Holds ``<path>/.lock`` (the lock a broker takes on its log dirs) while the sink appends: refused if
    a broker runs on ``path``, and no broker can start on it half-way through an append."""

    def __init__(self, root: Path) -> None:
        self._lock = LogDirLock(root)

    def __enter__(self) -> _BrokerExclusion:
        try:
            self._lock.acquire()
        except LogDirInUseError:
            raise _held_by_broker(self._lock.dir) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _check_target(opts: WriteOptions) -> None:
    root = Path(opts.path)  # type: ignore[arg-type]
    if root.is_dir() and is_locked(root):
        raise _held_by_broker(root)
    if root.is_dir() and layout_of(root) != "standalone":
        raise InvalidConfigError(
            f"option 'path': {opts.path!r} is a broker's or a cluster's log directory; the sink writes "
            "standalone log directories only (produce into a running cluster with cluster.producer())"
        )


def partition_count(root: Path, topic: str, default: int) -> int:
    """Partitions of ``topic`` under ``root`` (highest partition directory + 1), ``default`` if none."""
    prefix = f"{topic}-"
    nums = (
        [
            int(e.name[len(prefix) :])
            for e in os.scandir(root)
            if e.is_dir() and e.name.startswith(prefix) and e.name[len(prefix) :].isdigit()
        ]
        if root.is_dir()
        else []
    )
    return max(nums) + 1 if nums else default


def _as_bytes(col: pa.Array | None, n: int) -> list:
    if col is None:
        return [None] * n
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


class _Stager:
    """Groups a task's rows per target partition and writes encoded batches to one staging file."""

    def __init__(self, opts: WriteOptions, job: str, task: int, attempt: int) -> None:
        self._build = build_batch
        self.opts = opts
        self.root = Path(opts.path)
        stage = self.root / STAGING_DIR / job
        stage.mkdir(parents=True, exist_ok=True)
        self.message = StagedBatches(task, str(stage / f"task-{task:05d}-{attempt}.batches"))
        self._file = open(self.message.file, "wb")  # noqa: SIM115 - closed in finish()
        self._pos = 0
        self._pending: dict[tuple[str, int], tuple[list, list, list]] = {}
        self._bytes: dict[tuple[str, int], int] = {}
        self._counts: dict[str, int] = {}
        self._round_robin = task  # where this task's null keys start, so tasks spread them differently

    def _partitions(self, topic: str) -> int:
        n = self._counts.get(topic)
        if n is None:
            n = self._counts[topic] = partition_count(self.root, topic, self.opts.partitions)
        return n

    def _choose(self, topic: str, key: bytes | None, partition: int | None) -> int:
        n = self._partitions(topic)
        if partition is not None:
            if not 0 <= partition < n:
                raise InvalidRecordError(
                    f"partition {partition} of topic {topic!r} does not exist (it has {n} partitions)"
                )
            return partition
        if key is not None:
            return to_positive(murmur2(key)) % n
        self._round_robin += 1
        return (self._round_robin - 1) % n

    def add_arrow(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        names = batch.schema.names
        col = {name: batch.column(i) for i, name in enumerate(names)}
        values = _as_bytes(col["value"], n)
        keys = _as_bytes(col.get("key"), n)
        topics = [self.opts.topic] * n if self.opts.topic else col["topic"].to_pylist()
        parts = col["partition"].to_pylist() if "partition" in col else [None] * n
        if "timestamp" in col:
            ts_col = col["timestamp"].cast(pa.timestamp("us")).cast(pa.int64())
            stamps = [-1 if t is None else t // 1000 for t in ts_col.to_pylist()]
        else:
            stamps = [-1] * n
        headers = col["headers"].to_pylist() if "headers" in col else None
        for i in range(n):
            topic = topics[i]
            if not topic:
                raise InvalidRecordError(f"row {i} of a sink task has a null or empty topic")
            tp = (topic, self._choose(topic, keys[i], parts[i]))
            hs = (
                () if headers is None or not headers[i] else tuple((h["key"], h["value"]) for h in headers[i])
            )
            recs, tss, _ = self._pending.setdefault(tp, ([], [], []))
            recs.append((keys[i], values[i], hs) if hs else (keys[i], values[i]))
            tss.append(stamps[i])
            size = self._bytes.get(tp, 0) + len(values[i] or b"") + len(keys[i] or b"") + 16
            self._bytes[tp] = size
            if size >= BATCH_BYTES or len(recs) >= BATCH_RECORDS:
                self._flush(tp)

    def _flush(self, tp: tuple[str, int]) -> None:
        recs, tss, _ = self._pending.pop(tp)
        self._bytes.pop(tp, None)
        data = self._build(recs, timestamp=tss)
        self._file.write(data)
        self.message.batches.append((tp[0], tp[1], self._pos, len(data), len(recs)))
        self._pos += len(data)

    def finish(self) -> StagedBatches:
        for tp in sorted(self._pending):
            self._flush(tp)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return self.message


def _task_identity() -> tuple[int, int]:
    from pyspark import TaskContext  # deferred: pyspark is heavy

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)


class _SinkLock:
    """An exclusive ``flock`` on ``<path>/.kafkalite-sink.lock``: one committing writer at a time."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> _SinkLock:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _staged_by_partition(messages: list) -> dict[tuple[str, int], list[bytes]]:
    """Every staged batch, grouped per partition, in task order then each task's own order."""
    out: dict[tuple[str, int], list[bytes]] = {}
    for m in sorted((m for m in messages if m is not None), key=lambda m: m.task):
        with open(m.file, "rb") as f:
            data = f.read()
        for topic, p, pos, size, _count in m.batches:
            out.setdefault((topic, p), []).append(data[pos : pos + size])
    return out


def _append(root: Path, staged: dict[tuple[str, int], list[bytes]]) -> dict[tuple[str, int], int]:
    """Append staged batches to their logs (caller holds the lock); returns records appended per partition."""
    done = {}
    for (topic, p), batches in sorted(staged.items()):
        log = Log.open(root / f"{topic}-{p}")
        try:
            infos = log.append_many(batches)
        finally:
            log.close()
        done[(topic, p)] = sum(i.num_records for i in infos)
    return done


def _log_end(root: Path, topic: str, p: int) -> int:
    d = root / f"{topic}-{p}"
    if not d.is_dir():
        return 0
    log = Log.open(d, read_only=True)
    try:
        return log.log_end_offset
    finally:
        log.close()


def _discard(messages: list) -> None:
    dirs = set()
    for m in messages:
        if m is not None:
            Path(m.file).unlink(missing_ok=True)
            dirs.add(Path(m.file).parent)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def _stage(opts: WriteOptions, job: str, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
    """One Spark task's share of a write: its rows encoded into its own staging files (the commit appends them)."""
    task, attempt = _task_identity()
    stager = _Stager(opts, job, task, attempt)
    for batch in iterator:
        stager.add_arrow(batch)
    return stager.finish()


class KafkaliteWriter(DataSourceArrowWriter):
    """Batch writes (``df.write``). Path mode: stage in tasks, append in ``commit``. Wire mode
    (``kafka.bootstrap.servers``): each task produces its rows through the brokers (``wire_sink``)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise InvalidConfigError(
                "save mode 'overwrite' is not supported by the kafkalite sink (a log is append-only); "
                "use mode 'append'"
            )
        self.opts = parse_write_options(options)
        _check_schema(schema, self.opts)
        _check_mode(self.opts)
        self.job = uuid.uuid4().hex  # only names the staging directory

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches | ProducedRecords:
        if self.opts.wire:
            return produce_task(self.opts, _task_identity()[0], iterator)
        return _stage(self.opts, self.job, iterator)

    def commit(self, messages: list) -> None:
        if self.opts.wire:
            return  # every task's records were acknowledged before the task ended
        root = Path(self.opts.path)  # type: ignore[arg-type]
        try:
            staged = _staged_by_partition(messages)
            with _SinkLock(root), _BrokerExclusion(root):
                _append(root, staged)
        finally:
            _discard(messages)

    def abort(self, messages: list) -> None:
        if not self.opts.wire:
            _discard(messages)


def _check_mode(opts: WriteOptions) -> None:
    """Path mode: the target must be a standalone dir no broker holds. Wire mode: the producer settings
    must be ones librdkafka takes (checked here, on the driver, rather than in every task)."""
    if opts.wire:
        make_producer(opts)
    else:
        _check_target(opts)


class KafkaliteStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``df.writeStream``): the batch writer's staging plus per-micro-batch idempotence."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts = parse_write_options(options)
        _check_schema(schema, self.opts)
        _check_mode(self.opts)
        self.job = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches | ProducedRecords:
        if self.opts.wire:
            return produce_task(self.opts, _task_identity()[0], iterator)
        return _stage(self.opts, self.job, iterator)

    def _state_file(self) -> Path | None:
        if not self.opts.checkpoint_location:
            return None
        name = hashlib.sha256(self.opts.checkpoint_location.encode()).hexdigest()[:16]
        return Path(self.opts.path) / STREAM_STATE_DIR / f"{name}.json"

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        if self.opts.wire:
            return  # at-least-once, as Spark's Kafka sink: the tasks' records are acknowledged already
        root = Path(self.opts.path)  # type: ignore[arg-type]
        state_path = self._state_file()
        try:
            staged = _staged_by_partition(messages)
            with _SinkLock(root), _BrokerExclusion(root):
                if state_path is None:
                    _append(root, staged)
                    return
                state = json.loads(state_path.read_text()) if state_path.exists() else None
                if state is not None and (
                    batchId < state["batch"] or (batchId == state["batch"] and state["done"])
                ):
                    return  # this micro-batch is already in the logs
                if state is not None and batchId == state["batch"]:
                    for name, end in state["ends"].items():  # half-appended before a crash: undo it
                        log = Log.open(root / name)
                        try:
                            log.truncate_to(end)
                        finally:
                            log.close()
                ends = {f"{t}-{p}": _log_end(root, t, p) for t, p in sorted(staged)}
                state_path.parent.mkdir(parents=True, exist_ok=True)
                _write_state(state_path, {"batch": batchId, "done": False, "ends": ends})
                _append(root, staged)
                _write_state(state_path, {"batch": batchId, "done": True, "ends": ends})
        finally:
            _discard(messages)

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        if not self.opts.wire:
            _discard(messages)


def _write_state(path: Path, state: dict) -> None:
    """Atomic replace (write, fsync, rename), so a crash leaves the old or the new state."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


__all__ = ["KafkaliteStreamWriter", "KafkaliteWriter", "StagedBatches", "partition_count"]
