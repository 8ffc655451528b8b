"""Options of ``format("kafkalite")``: Spark's Kafka source names and rules, checked before anything runs.

Two modes, chosen by which of two options is given (exactly one must be):

- wire mode, ``kafka.bootstrap.servers``: the source is a Kafka client. Every other ``kafka.*`` option
  goes to that client with the prefix removed (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
  ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``, ...), except the few Spark's own Kafka
  source refuses because the source, not the client, owns what they control (where to start, what the
  bytes are, commits); those are refused here too, by name.
- path mode, ``path``: the source reads a directory of ``<topic>-<partition>`` logs directly (a copy of
  a broker's disks, or a ``Cluster.dir``).

All the other read options (subscribe, startingOffsets, failOnDataLoss, minPartitions, ...) mean the same
in both modes. Spark hands Python data sources their options with lower-case keys; error messages use the
canonical spelling. Plain functions, so that every rule is testable without a SparkSession.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.common.bootstrap import parse_bootstrap
from kafkalite.errors import InvalidConfigError

# The columns of Spark's Kafka source, which this source gives too (headers only with includeHeaders).
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

READ_OPTIONS = (
    "path",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "failOnDataLoss",
    "includeHeaders",
    "kafka.isolation.level",
    "kafka.bootstrap.servers",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
)
# Spark's Kafka source refuses these consumer settings: the source decides them itself.
REFUSED_KAFKA_PARAMS = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast or decode them in the query",
    "value.deserializer": "values are always read as bytes; cast or decode them in the query",
    "enable.auto.commit": "the source commits no offsets: its progress lives in Spark's checkpoint",
    "interceptor.classes": "the source reads raw bytes and runs no consumer interceptors",
}
WIRE_ONLY_OPTIONS = ("kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs")
BATCH_ONLY_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
WRITE_OPTIONS = ("path", "topic", "partitions", "checkpointLocation", "kafka.bootstrap.servers", "kafka.*")
# Spark's Kafka sink refuses these: keys and values are written as the bytes of their columns
WRITE_REFUSED_KAFKA = ("key.serializer", "value.serializer")
SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")

EARLIEST = -2  # Spark's sentinels inside offset JSON
LATEST = -1


@dataclass(frozen=True)
class OffsetSpec:
    """Where a query starts or ends, before it is resolved against a log.

    ``kind`` is ``earliest`` / ``latest`` (``value`` None), ``offsets`` (``{(topic, partition): offset}``
    with -2/-1 allowed per partition), ``timestamp`` (one ms value for every partition) or ``timestamps``
    (``{(topic, partition): ms}``).
    """

    kind: str
    value: Any = None


@dataclass(frozen=True)
class ReadOptions:
    path: str | None  # path mode; None in wire mode
    subscription: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    read_committed: bool = False
    bootstrap: str | None = None  # wire mode: kafka.bootstrap.servers
    kafka_params: tuple[tuple[str, str], ...] = ()  # the other kafka.* options, prefix removed
    poll_timeout_ms: int = 120_000  # kafkaConsumer.pollTimeoutMs: how long a task waits for its data
    fetch_offset_retries: int = 3  # fetchOffset.numRetries (the driver's offset lookups)
    fetch_offset_retry_ms: int = 10  # fetchOffset.retryIntervalMs

    @property
    def wire(self) -> bool:
        return self.bootstrap is not None

    @property
    def where(self) -> str:
        """Where the data is read from, for messages."""
        return f"cluster {self.bootstrap!r}" if self.bootstrap else f"log directory {self.path!r}"


@dataclass(frozen=True)
class WriteOptions:
    """``path`` (path mode: standalone log directories) or ``bootstrap_servers`` (wire mode: produce
    through the brokers), exactly one; ``kafka`` holds the other ``kafka.*`` options, prefix stripped."""

    path: str | None
    topic: str | None
    partitions: int
    checkpoint_location: str | None
    bootstrap_servers: str | None = None
    kafka: tuple[tuple[str, str], ...] = ()

    @property
    def wire(self) -> bool:
        return self.bootstrap_servers is not None


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _check_known(opts: Mapping[str, str], valid: tuple[str, ...], what: str) -> None:
    known = {o.lower() for o in valid}
    unknown = sorted(k for k in opts if k not in known)
    if unknown:
        raise InvalidConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for {what} format 'kafkalite'; "
            f"valid options are: {', '.join(valid)}"
        )


def _require_path(opts: Mapping[str, str], what: str) -> str:
    path = opts.get("path", "").strip()
    if not path:
        raise InvalidConfigError(f"option 'path' is required: {what}")
    return path


def parse_bool(name: str, text: str) -> bool:
    low = str(text).strip().lower()
    if low not in ("true", "false"):
        raise InvalidConfigError(f"option {name!r} must be true or false, got {text!r}")
    return low == "true"


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise InvalidConfigError(f"option {name!r} must be a positive integer, got {text!r}") from None
    if value < 1:
        raise InvalidConfigError(f"option {name!r} must be a positive integer, got {text!r}")
    return value


@dataclass(frozen=True)
class FetchSettings:
    """How a task's Fetch requests are sized, from the consumer settings of the same names (Kafka's
    defaults): ``max.partition.fetch.bytes``, ``fetch.max.bytes``, ``fetch.min.bytes`` and
    ``fetch.max.wait.ms``. As in Kafka, a first batch larger than the limits still comes back whole, and a
    broker holds a fetch up to ``max_wait_ms`` while fewer than ``min_bytes`` (counted within the
    partition limit) are there to return."""

    partition_max_bytes: int = 1 << 20
    max_bytes: int = 50 << 20
    min_bytes: int = 1
    max_wait_ms: int = 500


FETCH_PARAMS = {
    "max.partition.fetch.bytes": "partition_max_bytes",
    "fetch.max.bytes": "max_bytes",
    "fetch.min.bytes": "min_bytes",
    "fetch.max.wait.ms": "max_wait_ms",
}


def fetch_settings(kafka_params: Iterable[tuple[str, str]]) -> FetchSettings:
    """The ``FetchSettings`` among the client options (``kafka.*``, prefix removed); a value that is not a
    non-negative integer is refused naming its option."""
    kw = {}
    for name, value in kafka_params:
        if name in FETCH_PARAMS:
            try:
                n = int(str(value).strip())
            except ValueError:
                n = -1
            if n < 0:
                raise InvalidConfigError(f"option 'kafka.{name}' must be an integer >= 0, got {value!r}")
            kw[FETCH_PARAMS[name]] = n
    return FetchSettings(**kw)


def _timestamp(name: str, value: Any) -> int:
    try:
        ts = int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"option {name!r}: timestamp {value!r} is not an integer (ms)") from None
    if ts < 0:
        raise InvalidConfigError(f"option {name!r}: timestamp {ts} must be >= 0 (ms since the epoch)")
    return ts


def parse_json_object(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(f"option {name!r} is not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise InvalidConfigError(f"option {name!r} must be a JSON object, got {text!r}")
    return value


def _per_partition(name: str, text: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": n}}`` -> ``{(topic, 0): n}`` with integer checks."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in parse_json_object(name, text).items():
        if not isinstance(parts, dict):
            raise InvalidConfigError(
                f'option {name!r}: topic {topic!r} must map to {{"partition": number}}, got {parts!r}'
            )
        for p, value in parts.items():
            try:
                pnum = int(p)
            except ValueError:
                raise InvalidConfigError(f"option {name!r}: partition {p!r} is not a number") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfigError(
                    f"option {name!r}: value for {topic}-{p} must be an integer, got {value!r}"
                )
            out[(topic, pnum)] = value
    return out


def parse_offsets(name: str, text: str, *, streaming: bool) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON offsets, with Spark's rule that a batch query cannot start at
    latest nor end at earliest (an always-empty range is almost certainly a mistake)."""
    starting = name == "startingOffsets"
    forbidden_word, forbidden_num = ("latest", LATEST) if starting else ("earliest", EARLIEST)
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if word == forbidden_word and not streaming:
            raise InvalidConfigError(f"option {name!r} = {forbidden_word!r} is not allowed in a batch query")
        return OffsetSpec(word)
    offsets = _per_partition(name, text)
    for (topic, p), off in offsets.items():
        if off < EARLIEST:
            raise InvalidConfigError(f"option {name!r}: offset for {topic}-{p} must be >= -2, got {off}")
        if off == forbidden_num and not streaming:
            raise InvalidConfigError(
                f"option {name!r}: offset {off} ({forbidden_word}) for {topic}-{p} is not allowed "
                "in a batch query"
            )
    return OffsetSpec("offsets", offsets)


def _parse_position(opts: Mapping[str, str], side: str, *, streaming: bool) -> OffsetSpec:
    """Spark's precedence: ``<side>Timestamp`` over ``<side>OffsetsByTimestamp`` over ``<side>Offsets``."""
    if f"{side}timestamp" in opts:
        return OffsetSpec("timestamp", _timestamp(f"{side}Timestamp", opts[f"{side}timestamp"]))
    if f"{side}offsetsbytimestamp" in opts:
        name = f"{side}OffsetsByTimestamp"
        stamps = _per_partition(name, opts[f"{side}offsetsbytimestamp"])
        return OffsetSpec("timestamps", {tp: _timestamp(name, ts) for tp, ts in stamps.items()})
    name = f"{side}Offsets"
    default = "latest" if streaming or side == "ending" else "earliest"
    return parse_offsets(name, opts.get(f"{side}offsets", default), streaming=streaming)


def _kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options handed to the client (prefix removed), after Spark's refusals. The two the
    source itself interprets (``bootstrap.servers``, ``isolation.level``) stay out."""
    out = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key in ("kafka.bootstrap.servers", "kafka.isolation.level"):
            continue
        name = key[len("kafka.") :]
        if name in REFUSED_KAFKA_PARAMS:
            raise InvalidConfigError(
                f"Kafka option 'kafka.{name}' is not supported: {REFUSED_KAFKA_PARAMS[name]}"
            )
        out[name] = value
    return out


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None = False) -> ReadOptions:
    """Check every read option; errors name the option and what was wrong. ``streaming=None``: not
    known yet (``DataSource.schema`` serves both), so the batch-only and streaming-only rules wait."""
    opts = lower_keys(options)
    what = "the streaming source" if streaming else "the source"
    kafka_params = _kafka_params(opts)
    _check_known({k: v for k, v in opts.items() if not k.startswith("kafka.")}, READ_OPTIONS, what)
    bootstrap = opts.get("kafka.bootstrap.servers")
    has_path = "path" in opts
    if (bootstrap is None) == (not has_path):
        raise InvalidConfigError(
            "give exactly one of option 'kafka.bootstrap.servers' (read from running brokers) and option "
            "'path' (read a directory of <topic>-<partition> logs), got "
            + ("both" if has_path else "neither")
        )
    path: str | None = None
    if bootstrap is not None:
        if not bootstrap.strip():
            raise InvalidConfigError("option 'kafka.bootstrap.servers' is empty (expected HOST:PORT,...)")
        try:
            parse_bootstrap(bootstrap)
        except ValueError as e:
            raise InvalidConfigError(f"option 'kafka.bootstrap.servers': {e}") from None
    else:
        path = _require_path(opts, "a log directory of <topic>-<partition> logs, a broker's or a Cluster.dir")
        wire_only = [o for o in WIRE_ONLY_OPTIONS if o.lower() in opts]
        if kafka_params or wire_only:
            names = [f"kafka.{k}" for k in kafka_params] + wire_only
            raise InvalidConfigError(
                f"option(s) {', '.join(names)} are client settings for reading through brokers "
                "('kafka.bootstrap.servers'); a 'path' read opens no connection"
            )
    given = [o for o in SUBSCRIPTION_OPTIONS if o.lower() in opts]
    if len(given) != 1:
        raise InvalidConfigError(
            f"exactly one of {', '.join(SUBSCRIPTION_OPTIONS)} must be given, got "
            f"{', '.join(given) if given else 'none'}"
        )
    if streaming:
        batch_only = [o for o in BATCH_ONLY_OPTIONS if o.lower() in opts]
        if batch_only:
            raise InvalidConfigError(
                f"option(s) {', '.join(batch_only)} are for batch queries only: a streaming query has no end"
            )
    elif streaming is False and "maxoffsetspertrigger" in opts:
        raise InvalidConfigError("option 'maxOffsetsPerTrigger' is for streaming queries only")
    kw: dict[str, Any] = {"path": path, "subscription": given[0]}
    if bootstrap is not None:
        kw["bootstrap"] = bootstrap.strip()
        kw["kafka_params"] = tuple(sorted(kafka_params.items()))
        fetch_settings(kw["kafka_params"])  # refused at load(), not in a task
        if "kafkaconsumer.polltimeoutms" in opts:
            kw["poll_timeout_ms"] = _positive_int(
                "kafkaConsumer.pollTimeoutMs", opts["kafkaconsumer.polltimeoutms"]
            )
        if "fetchoffset.numretries" in opts:
            kw["fetch_offset_retries"] = _positive_int(
                "fetchOffset.numRetries", opts["fetchoffset.numretries"]
            )
        if "fetchoffset.retryintervalms" in opts:
            kw["fetch_offset_retry_ms"] = _positive_int(
                "fetchOffset.retryIntervalMs", opts["fetchoffset.retryintervalms"]
            )
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise InvalidConfigError("option 'subscribe' names no topic (expected 't1,t2,...')")
        kw["topics"] = topics
    elif given[0] == "subscribePattern":
        try:
            re.compile(opts["subscribepattern"])
        except re.error as e:
            raise InvalidConfigError(f"option 'subscribePattern' is not a valid regex: {e}") from None
        kw["pattern"] = opts["subscribepattern"]
    else:
        assigned = []
        for topic, ps in parse_json_object("assign", opts["assign"]).items():
            if not isinstance(ps, list) or not all(isinstance(p, int) and p >= 0 for p in ps):
                raise InvalidConfigError(
                    f"option 'assign': topic {topic!r} must map to a list of partition numbers, got {ps!r}"
                )
            assigned += [(topic, p) for p in ps]
        if not assigned:
            raise InvalidConfigError("option 'assign' names no partition")
        kw["assign"] = tuple(sorted(set(assigned)))
    kw["starting"] = _parse_position(opts, "starting", streaming=streaming is not False)
    if streaming is False:
        kw["ending"] = _parse_position(opts, "ending", streaming=False)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidConfigError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )
    kw["by_timestamp_strategy"] = strategy
    if "maxoffsetspertrigger" in opts:
        kw["max_offsets_per_trigger"] = _positive_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"])
    if "minpartitions" in opts:
        kw["min_partitions"] = _positive_int("minPartitions", opts["minpartitions"])
    kw["fail_on_data_loss"] = parse_bool("failOnDataLoss", opts.get("failondataloss", "true"))
    kw["include_headers"] = parse_bool("includeHeaders", opts.get("includeheaders", "false"))
    isolation = opts.get("kafka.isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise InvalidConfigError(
            f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, got {isolation!r}"
        )
    kw["read_committed"] = isolation == "read_committed"
    return ReadOptions(**kw)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Path mode (``path``) or wire mode (``kafka.bootstrap.servers``), exactly one, as Spark's Kafka
    sink: ``topic`` (else a ``topic`` column), ``kafka.*`` handed to the producer without the prefix."""
    opts = lower_keys(options)
    kafka = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
    _check_known({k: v for k, v in opts.items() if not k.startswith("kafka.")}, WRITE_OPTIONS, "the sink")
    servers = kafka.pop("bootstrap.servers", None)
    path = opts.get("path", "").strip() or None
    if (path is None) == (servers is None or not servers.strip()):
        given = [n for n, v in (("path", path), ("kafka.bootstrap.servers", servers)) if v]
        raise InvalidConfigError(
            "exactly one of 'path' (path mode: write standalone log directories) and "
            "'kafka.bootstrap.servers' (wire mode: produce through the brokers) must be given, got "
            f"{' and '.join(map(repr, given)) if given else 'neither'}"
        )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise InvalidConfigError("option 'topic' is empty")
    topic = topic.strip() if topic else None
    if path is not None:
        if kafka:
            raise InvalidConfigError(
                f"option(s) {', '.join(repr('kafka.' + k) for k in sorted(kafka))} are for the wire mode "
                "(kafka.bootstrap.servers); path mode writes log directories directly"
            )
        partitions = _positive_int("partitions", opts.get("partitions", "1"))
        return WriteOptions(path, topic, partitions, opts.get("checkpointlocation"))
    if "partitions" in opts:
        raise InvalidConfigError(
            "option 'partitions' is for path mode only: in wire mode the brokers own the topic "
            "(create it first, or let the broker auto-create it with its num.partitions)"
        )
    refused = [k for k in WRITE_REFUSED_KAFKA if k in kafka]
    if refused:
        raise InvalidConfigError(
            f"option 'kafka.{refused[0]}' is not supported: the sink writes the key and value columns' "
            "bytes as they are (serialize them in the DataFrame)"
        )
    return WriteOptions(
        None,
        topic,
        1,
        opts.get("checkpointlocation"),
        bootstrap_servers=servers.strip(),  # type: ignore[union-attr]
        kafka=tuple(sorted(kafka.items())),
    )


__all__ = [
    "EARLIEST",
    "LATEST",
    "FETCH_PARAMS",
    "READ_OPTIONS",
    "REFUSED_KAFKA_PARAMS",
    "WRITE_OPTIONS",
    "FetchSettings",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "lower_keys",
    "fetch_settings",
    "parse_bool",
    "parse_offsets",
    "parse_read_options",
    "parse_write_options",
]
