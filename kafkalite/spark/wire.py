"""Wire mode of the Spark source: planning and reading through the brokers, never through a file.

The driver learns the partitions from Metadata and fixes each one's range with ListOffsets (earliest for
the log start, latest for the end: the high watermark, or under read_committed the last stable offset, so
a planned range never holds records of a transaction still open). A task then fetches its range
``[start, end)`` from the partition's leader with Fetch requests, as a Kafka consumer with one assigned
partition would: whole raw batches come back, each one's CRC is checked, control batches are skipped, and
under read_committed the batches of the aborted transactions the answer lists are dropped. The raw bytes
go straight to ``arrow_records.batches_to_arrow``.

Leaders move. An answer NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH or
LEADER_NOT_AVAILABLE, or a broker that stopped answering, makes the task refresh its metadata and go on at
the same offset from whichever broker leads now, with a growing pause between tries, for at most
``kafkaConsumer.pollTimeoutMs``; the range was fixed below the high watermark, which every in-sync
replica (so every possible new leader) already holds, so nothing is lost or read twice. The driver's
offset lookups retry the same way, ``fetchOffset.numRetries`` times.

One client (``AdminClient``: our codec, SASL and TLS from the ``kafka.*`` options) serves every call of
one process for one set of settings.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import pyarrow as pa

from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.errors import (
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkalite.host.admin_client import AdminClient
from kafkalite.protocol import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition
from kafkalite.records import iter_batches, validate_batch
from kafkalite.spark.arrow_records import batches_to_arrow, scan_plain, scanned_to_arrow
from kafkalite.spark.options import fetch_settings

log = logging.getLogger("kafkalite.spark")

TP = tuple[str, int]
T = TypeVar("T")
INTERNAL_TOPIC_PREFIX = "__"
# Answers that mean "ask again elsewhere or a little later": the leader moved or is being elected.
LEADER_ERRORS = (
    NotLeaderOrFollowerError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    LeaderNotAvailableError,
    KafkaStorageError,
    RequestTimedOutError,
    OffsetNotAvailableError,  # a new leader whose high watermark has not caught up yet (retriable)
)
_CONTROL, _TRANSACTIONAL = 0x20, 0x10

_clients: dict[tuple, AdminClient] = {}
_clients_lock = threading.Lock()


def _client_key(bootstrap: str, params: Iterable[tuple[str, str]]) -> tuple:
    return (bootstrap, tuple(sorted(params)))


def client(bootstrap: str, params: Iterable[tuple[str, str]], *, fresh: bool = False) -> AdminClient:
    """The process's client for these settings (``fresh``: drop the old one first, after a failure)."""
    key = _client_key(bootstrap, params)
    with _clients_lock:
        old = _clients.get(key)
        if old is not None and not fresh:
            return old
        if old is not None:
            _clients.pop(key)
            old.close()
        timeout = float(dict(key[1]).get("request.timeout.ms", 30000)) / 1000
        made = AdminClient(bootstrap, timeout_s=timeout, client_id="kafkalite-spark", security=dict(key[1]))
        _clients[key] = made
        return made


def retrying(
    bootstrap: str,
    params: Iterable[tuple[str, str]],
    call: Callable[[AdminClient], T],
    *,
    what: str,
    tries: int | None = None,
    deadline_s: float | None = None,
    backoff_ms: int = 100,
) -> T:
    """``call(client)``, again after a leader change or a lost connection (a fresh client each time),
    at most ``tries`` times or until ``deadline_s`` seconds have gone by; then the last error."""
    started = time.monotonic()
    attempt = 0
    pause = backoff_ms / 1000
    while True:
        attempt += 1
        try:
            return call(client(bootstrap, params, fresh=attempt > 1))
        except (OSError, *LEADER_ERRORS) as e:
            over = (tries is not None and attempt >= tries) or (
                deadline_s is not None and time.monotonic() - started + pause > deadline_s
            )
            if over:
                raise KafkaError(f"{what}: gave up after {attempt} tries: {e}") from e
            log.info("kafkalite: %s: %s; retrying in %.2fs", what, e, pause)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


# ------------------------------------------------------------------------------------------ planning


def _topics(opts, admin: AdminClient) -> list[str]:
    if opts.subscription == "subscribe":
        return list(opts.topics)
    if opts.subscription == "assign":
        return sorted({t for t, _ in opts.assign})
    pattern = re.compile(opts.pattern or "")
    # Kafka's pattern subscription matches whole names and leaves internal topics out.
    return [t for t in admin.topics() if pattern.fullmatch(t) and not t.startswith(INTERNAL_TOPIC_PREFIX)]


def select(opts, admin: AdminClient) -> list[TP]:
    """The partitions subscribe / subscribePattern / assign name, as the cluster knows them now."""
    known = admin.partition_leaders(_topics(opts, admin))
    found = sorted((tp.topic, tp.partition) for tp in known)
    if opts.subscription == "assign":
        missing = [f"{t}-{p}" for t, p in opts.assign if (t, p) not in set(found)]
        if missing:
            raise UnknownTopicOrPartitionError(
                f"option 'assign' names {', '.join(missing)}, which {opts.where} does not have"
            )
        return list(opts.assign)
    if not found:
        what = (
            f"subscribe={','.join(opts.topics)!r}"
            if opts.subscription == "subscribe"
            else (f"subscribePattern={opts.pattern!r}")
        )
        raise UnknownTopicOrPartitionError(f"no partitions found for {what} in {opts.where}")
    return found


def _isolation(opts) -> IsolationLevel:
    return IsolationLevel.READ_COMMITTED if opts.read_committed else IsolationLevel.READ_UNCOMMITTED


def bounds(opts, tps: Iterable[TP] | None = None) -> dict[TP, tuple[int, int]]:
    """(log start, end) of each partition: the chosen ones, or only those of ``tps`` that still exist.
    The end is the high watermark, or the last stable offset under read_committed."""

    def look(admin: AdminClient) -> dict[TP, tuple[int, int]]:
        if tps is None:
            chosen = select(opts, admin)
        else:
            wanted = set(tps)
            chosen = [
                (tp.topic, tp.partition)
                for tp in admin.partition_leaders({t for t, _ in wanted})
                if (tp.topic, tp.partition) in wanted
            ]
        parts = [TopicPartition(t, p) for t, p in chosen]
        if not parts:
            return {}
        start = admin.list_offsets(parts, EARLIEST_TIMESTAMP)
        end = admin.list_offsets(parts, LATEST_TIMESTAMP, isolation_level=_isolation(opts))
        return {(tp.topic, tp.partition): (start[tp] or 0, max(start[tp] or 0, end[tp] or 0)) for tp in parts}

    return _driver_call(opts, look, "list offsets")


def offset_for_timestamp(opts, tp: TP, ts: int) -> int | None:
    """ListOffsets for a timestamp: the first offset whose record is at least that late, None if none."""

    def look(admin: AdminClient) -> int | None:
        part = TopicPartition(*tp)
        return admin.list_offsets([part], ts, isolation_level=_isolation(opts))[part]

    return _driver_call(opts, look, f"offset for timestamp {ts} in {tp[0]}-{tp[1]}")


def _driver_call(opts, call: Callable[[AdminClient], T], what: str) -> T:
    # Each try waits for a leader as long as a Kafka consumer's offset lookup would
    # (default.api.timeout.ms), then Spark's fetchOffset.numRetries bounds the tries.
    api_timeout_s = float(dict(opts.kafka_params).get("default.api.timeout.ms", 60000)) / 1000
    return retrying(
        opts.bootstrap,
        opts.kafka_params,
        call,
        what=what,
        deadline_s=api_timeout_s * opts.fetch_offset_retries,
        backoff_ms=max(opts.fetch_offset_retry_ms, 50),
    )


# ------------------------------------------------------------------------------------------- reading


class _Leader:
    """Where a task's partition is led, learnt again after every failure."""

    def __init__(self, bootstrap: str, params: tuple, tp: TP) -> None:
        self.bootstrap, self.params, self.tp = bootstrap, params, tp
        self.node: int | None = None
        self.epoch = -1

    def find(self, admin: AdminClient) -> int:
        if self.node is None:
            leader, epoch = admin.partition_leaders([self.tp[0]]).get(TopicPartition(*self.tp), (-1, -1))
            if leader < 0:
                raise LeaderNotAvailableError(f"{self.tp[0]}-{self.tp[1]} has no leader right now")
            self.node, self.epoch = leader, epoch
        return self.node


def read_range(
    rng,
    bootstrap: str,
    params: tuple[tuple[str, str], ...],
    *,
    fail_on_data_loss: bool = True,
    include_headers: bool = False,
    read_committed: bool = False,
    fetch_max_bytes: int | None = None,
    poll_timeout_ms: int = 120_000,
    on_fetch: Callable[[int], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding the records of ``rng`` (an ``OffsetRange``) in offset order, one per Fetch.

    Fetches are sized by the consumer settings in ``params`` (``max.partition.fetch.bytes``,
    ``fetch.max.bytes``, ``fetch.min.bytes``, ``fetch.max.wait.ms``); ``fetch_max_bytes`` overrides the
    partition limit. ``on_fetch(offset)``, when given, is called before each Fetch (a test's hook to
    kill a leader between two fetches)."""
    if rng.end <= rng.start:
        return
    sizes = fetch_settings(params)
    partition_max = sizes.partition_max_bytes if fetch_max_bytes is None else fetch_max_bytes
    tp = (rng.topic, rng.partition)
    name = f"{rng.topic}-{rng.partition}"
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    leader = _Leader(bootstrap, params, tp)
    offset = rng.start

    def fetch(admin: AdminClient) -> dict:
        try:
            node = leader.find(admin)
            resp = admin.fetch_raw(
                node, rng.topic, rng.partition, offset, max_bytes=sizes.max_bytes,
                partition_max_bytes=partition_max, min_bytes=sizes.min_bytes,
                isolation_level=isolation, leader_epoch=leader.epoch, max_wait_ms=sizes.max_wait_ms,
            )  # fmt: skip
            code = resp["error_code"]
            if code and code != OffsetOutOfRangeError.code:
                cls = error_for_code(code) or KafkaError
                raise cls(f"Fetch {name} at offset {offset} from broker {node}")
            if code == 0 and not resp["records"] and offset < rng.end:
                # Below the planned end, yet nothing: a new leader whose high watermark has not caught
                # up with the old one's yet. Ask again shortly (bounded like a leader change).
                hw = resp["last_stable_offset"] if read_committed else resp["high_watermark"]
                if hw <= offset:
                    raise RequestTimedOutError(f"{name}: broker {node} serves up to {hw}, not yet {offset}")
            return resp
        except BaseException:
            leader.node = None
            raise

    while offset < rng.end:
        if on_fetch is not None:
            on_fetch(offset)
        resp = retrying(bootstrap, params, fetch, what=f"fetch {name} at offset {offset}",
                        deadline_s=poll_timeout_ms / 1000)  # fmt: skip
        if resp["error_code"] == OffsetOutOfRangeError.code:
            log_start = resp["log_start_offset"]
            if log_start < 0 or offset >= log_start:
                log_start = retrying(bootstrap, params, lambda a: a.list_offsets(
                    [TopicPartition(*tp)], EARLIEST_TIMESTAMP)[TopicPartition(*tp)] or 0,
                    what=f"log start of {name}", deadline_s=poll_timeout_ms / 1000)  # fmt: skip
            if offset >= log_start:
                # Out of range above: the partition ends before the planned end (truncated, recreated).
                upto = rng.end
                message = f"{name}: offsets [{offset}, {upto}) are no longer in the log (truncated?)"
            else:
                upto = min(log_start, rng.end)
                message = (
                    f"{name}: offsets [{offset}, {upto}) were deleted (retention or DeleteRecords; log "
                    f"start is now {log_start}) before this query read them"
                )
            if fail_on_data_loss:
                raise OffsetOutOfRangeError(f"{message}; set failOnDataLoss=false to skip them")
            log.warning("kafkalite: %s; skipping them (failOnDataLoss=false)", message)
            offset = upto
            continue
        fetched_from = offset  # records below it (in its first batch, or skipped as lost) are not rows
        data = resp["records"]
        aborted = sorted(resp.get("aborted_transactions") or (), key=lambda a: a["first_offset"])
        scan = None if aborted else scan_plain(data, offset, rng.end)
        if scan is not None:  # the common case, all batches at once; else the loop below
            offset = scan.offset
            batch = scanned_to_arrow(
                data, scan, rng.topic, rng.partition, fetched_from, rng.end, include_headers=include_headers
            )
            if batch is not None:
                yield batch
            continue
        aborting: set[int] = set()
        picked = []
        advanced = False
        for pos, h in iter_batches(data):
            last = h.base_offset + h.last_offset_delta
            # read_committed: a producer's transactional batches are dropped from the first offset of
            # an aborted transaction the answer lists up to that producer's next control batch.
            while aborted and aborted[0]["first_offset"] <= last:
                aborting.add(aborted.pop(0)["producer_id"])
            if h.base_offset >= rng.end:  # the range ended in a gap (compaction, a marker)
                offset, advanced = rng.end, True
                break
            if last + 1 <= offset:
                if h.attributes & _CONTROL:
                    aborting.discard(h.producer_id)
                continue
            validate_batch(data, pos)  # the CRC, as a Kafka consumer checks by default
            if h.attributes & _CONTROL:
                aborting.discard(h.producer_id)
            elif not (h.attributes & _TRANSACTIONAL and h.producer_id in aborting):
                picked.append((pos, h))
            offset, advanced = last + 1, True
        if not advanced:
            if len(data) >= min(partition_max, sizes.max_bytes):
                raise KafkaError(f"{name}: a batch at offset {offset} is larger than the fetch size")
            raise OffsetOutOfRangeError(f"{name}: no progress fetching at offset {offset}")
        batch = batches_to_arrow(
            data, picked, rng.topic, rng.partition, fetched_from, rng.end, include_headers=include_headers
        )
        if batch is not None:
            yield batch


__all__ = ["bounds", "client", "offset_for_timestamp", "read_range", "retrying", "select"]
