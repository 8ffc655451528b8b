"""The consumer: Kafka's KafkaConsumer + Fetcher as one SimNetwork node, with consumer groups.

Partitions are given with ``assign``, or by the group with ``subscribe`` (a topic list or a regex
pattern; see ``consumer_coordinator`` for joining, heartbeats, rebalances and commits); each has a
*position*, the offset of the next record ``poll`` returns. With a ``group.id``, a newly assigned partition
starts at the group's committed offset (an OffsetFetch to the group coordinator); without one, or when
nothing is committed,  a partition gets its position from ``auto.offset.reset`` (earliest: the log start
offset; latest: the high watermark; none: ``poll``/``position`` raise ``NoOffsetForPartitionError``
naming it), looked up with a ``ListOffsetsRequest`` to its leader; ``seek``, ``seek_to_beginning`` and
``seek_to_end`` set or reset it.

Fetching: the consumer sends each broker that leads fetchable partitions (assigned, not paused, with a
position and no records buffered) one ``FetchRequest`` covering them, at most one in flight per broker.
The broker holds it up to ``fetch.max.wait.ms`` until ``fetch.min.bytes`` are there (long polling), and
returns only records below the high watermark. Records before the position (the front of a batch) and
control batches are skipped; the position moves past what ``poll`` returns, at most ``max.poll.records``
per call, the rest stays buffered. ``NOT_LEADER_OR_FOLLOWER``, ``UNKNOWN_TOPIC_OR_PARTITION`` and epoch
errors refresh the metadata and fetch again after ``retry.backoff.ms`` (so a leader failover is survived);
``OFFSET_OUT_OF_RANGE`` (e.g. retention deleted the data) resets the position per ``auto.offset.reset``,
or, with ``none``, makes ``poll`` raise ``OffsetOutOfRangeError``. A request with no answer after
``request.timeout.ms`` drops the connection to that broker and asks for new metadata.

**Driving the simulation.** Nodes are sans-I/O: a ``Producer`` only queues work and the caller runs the
network. A consumer's blocking calls run it themselves, like Kafka's blocking ``poll``: ``poll(timeout_ms)``
runs the ``SimNetwork`` (every node, in virtual time) until records are ready or ``timeout_ms`` of virtual
time has passed; ``position`` (when a reset is needed), ``beginning_offsets``, ``end_offsets`` and
``offsets_for_times`` run it until their answer arrives (``default.api.timeout.ms`` unless given). Call
them from test or notebook code, not from inside another node's callback: there the network is already
running, so ``poll`` returns only what is buffered and the offset lookups raise ``RuntimeError``.
``commit_sync``, ``committed`` and ``close`` block the same way. Rebalance listener callbacks run inside
``poll`` (never from the network), so they may call ``commit_sync``.

Commits: ``enable.auto.commit`` (default true with a group) commits the positions every
``auto.commit.interval.ms`` from inside ``poll``, before a rebalance and at ``close``, so what is
committed is what earlier ``poll`` calls returned (at least once, if records are processed before the
next ``poll``). ``commit_sync``/``commit_async`` commit the positions or given offsets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from kafkalite.client.consumer_coordinator import (
    CommitFailedError,
    ConsumerCoordinator,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)
from kafkalite.client.metadata import ClusterMetadata
from kafkalite.client.wakeup import Wakeup
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.errors import (
    CorruptRecordError,
    InvalidGroupIdError,
    KafkaError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    error_for_code,
)
from kafkalite.net.sim import BaseNode, NodeId
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_LEADER,
    UNKNOWN_EPOCH,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
)
from kafkalite.records import BatchHeader, Record, decode_batches, iter_batches

__all__ = [
    "CommitFailedError",
    "Consumer",
    "ConsumerClosedError",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "IllegalStateError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
]

OFFSET_OUT_OF_RANGE = 1
# Errors meaning "your metadata is stale" (Kafka's InvalidMetadataException family, plus the epoch
# errors): refresh, then try again after retry.backoff.ms.
INVALID_METADATA_CODES = frozenset({3, 5, 6, 13, 56, 74, 75, 76})
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms default


class NoOffsetForPartitionError(Exception):
    """A partition has no position and ``auto.offset.reset`` is ``none`` (Kafka's NoOffsetForPartition).

    Client-side, like Kafka's: it has no wire error code, so it is not a ``KafkaError``."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(f"Undefined offset with no reset policy for partitions: {names}")


class IllegalStateError(RuntimeError):
    """A call that the consumer's state does not allow (Kafka's IllegalStateException)."""


class ConsumerClosedError(IllegalStateError):
    """Any call after ``close()``."""


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times``'s answer for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class _TPState:
    """One assigned partition: its position, pending reset, buffered records and fetch state."""

    __slots__ = ("position", "reset_ts", "paused", "buffer", "buffer_end", "hw", "log_start",
                 "generation", "backoff_until", "reset_inflight", "error", "committed_fetch")  # fmt: skip

    def __init__(self) -> None:
        self.position: int | None = None
        self.reset_ts: int | None = None  # EARLIEST/LATEST_TIMESTAMP when a reset was asked for
        self.paused = False
        self.buffer: list[Record] = []  # fetched records at or after the position, in offset order
        self.buffer_end = 0  # the position once the buffer is drained (past trailing control batches)
        self.hw: int | None = None
        self.log_start: int | None = None
        self.generation = 0  # bumped by every seek/reset: answers to older fetches are dropped
        self.backoff_until = 0
        self.reset_inflight = False
        self.error: Exception | None = None  # raised by the next poll
        self.committed_fetch = False  # the group's committed offset is wanted before any reset


class _Lookup:
    """A ListOffsets question about several partitions (a user call or the consumer's own resets)."""

    __slots__ = ("timestamps", "results", "errors", "inflight", "backoff")

    def __init__(self, timestamps: Mapping[TopicPartition, int]) -> None:
        self.timestamps = dict(timestamps)
        self.results: dict[TopicPartition, Any] = {}
        self.errors: dict[TopicPartition, KafkaError] = {}
        self.inflight: set[TopicPartition] = set()
        self.backoff: dict[TopicPartition, int] = {}

    @property
    def done(self) -> bool:
        return len(self.results) + len(self.errors) >= len(self.timestamps)


class _InFlight:
    __slots__ = ("corr", "node", "kind", "deadline", "tps", "lookup")

    def __init__(self, corr: int, node: int, kind: str, deadline: int, tps: Any = None, lookup: Any = None):
        self.corr = corr
        self.node = node
        self.kind = kind  # "metadata", "fetch", "reset", "lookup" or "group" (lookup = its handler)
        self.deadline = deadline
        self.tps = tps  # fetch: {tp: (fetch offset, generation)}; reset: {tp: generation}
        self.lookup = lookup


class Consumer(BaseNode):
    """A Kafka consumer on the simulated network (``Cluster.consumer()``, or ``net.add_node(id, consumer)``).

    ``poll`` and the offset lookups run the network themselves (see the module docstring).
    """

    def __init__(
        self, client_id: str, bootstrap: Iterable[int], config: Mapping[str, Any] | None = None
    ) -> None:
        self.config = ConsumerConfig.from_props(config)
        self.client_id = client_id or self.config["client.id"]
        self.metadata = ClusterMetadata(list(bootstrap), self.config.metadata_max_age_ms)
        if not self.metadata.bootstrap:
            raise ValueError("bootstrap must name at least one broker")
        self._assigned: dict[TopicPartition, _TPState] = {}
        self._lookups: list[_Lookup] = []
        self._corr = 0
        self._inflight: dict[int, _InFlight] = {}
        self._fetching: dict[int, int] = {}  # broker -> correlation id of its fetch in flight
        self._node_backoff: dict[int, int] = {}
        self._meta_inflight: _InFlight | None = None
        self._meta_backoff_until = 0
        self._wakeup = Wakeup(self, self._run)
        self._rng: Any = None
        self._closed = False
        self._polling = False
        self._coord: ConsumerCoordinator | None = (
            ConsumerCoordinator(self) if self.config.group_id is not None else None
        )
        self._metrics: dict[str, int] = dict.fromkeys(
            (
                "fetch-total",
                "fetch-error-total",
                "records-consumed-total",
                "bytes-consumed-total",
                "list-offsets-total",
                "metadata-request-total",
                "request-timeout-total",
                "offset-reset-total",
            ),
            0,
        )

    @property
    def metrics(self) -> dict[str, int]:
        return self._metrics

    # ---------------------------------------------------------------------------------- node hooks

    def bind(self, net: Any, node_id: NodeId) -> None:
        super().bind(net, node_id)
        if not self.client_id:
            self.client_id = str(node_id)
        self._rng = net.node_rng(node_id)

    def on_message(self, src: NodeId, msg: Any, now_ms: int) -> None:
        if not isinstance(msg, ResponseEnvelope):
            return
        req = self._inflight.pop(msg.correlation_id, None)
        if req is None:
            return  # timed out and dropped: the connection is gone
        resp = msg.response
        if req.kind == "metadata":
            self._meta_inflight = None
            if isinstance(resp, MetadataResponse):
                self.metadata.update(resp, now_ms)
                self._meta_backoff_until = now_ms + self.config.retry_backoff_ms
                self._node_backoff.clear()
                if self._coord is not None:
                    self._coord.on_metadata_update()
        elif req.kind == "group":
            req.lookup(resp, now_ms)
        elif req.kind == "fetch":
            if self._fetching.get(req.node) == req.corr:
                del self._fetching[req.node]
            if isinstance(resp, FetchResponse):
                self._on_fetch(req, resp, now_ms)
        elif isinstance(resp, ListOffsetsResponse):
            self._on_list_offsets(req, resp, now_ms)
        self._run(now_ms)

    def on_crash(self) -> None:
        self._inflight.clear()
        self._fetching.clear()
        self._meta_inflight = None
        self._wakeup.cancel()
        self._closed = True

    # ----------------------------------------------------------------------------------------- API

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (replacing the previous assignment; positions of partitions
        kept are kept, as in Kafka)."""
        self._check_open()
        if self._coord is not None and self._coord.subscribed:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        wanted = [TopicPartition(*tp) for tp in partitions]
        for tp in wanted:
            if not isinstance(tp.topic, str) or not tp.topic or tp.partition < 0:
                raise ValueError(f"invalid topic partition {tp!r}")
        self._set_group_assignment(wanted)

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group (``group.id``) and let it assign partitions of these topics, or of every topic
        whose whole name matches ``pattern`` (new matching topics join the subscription when the metadata
        shows them). ``listener`` is told about revoked/assigned/lost partitions, inside ``poll``."""
        self._check_open()
        if self._coord is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you must provide "
                                      "a valid group.id in the consumer configuration.")  # fmt: skip
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe takes either topics or pattern, not both and not neither")
        if self._assigned and not self._coord.subscribed:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if listener is not None and not all(
            callable(getattr(listener, m, None)) for m in ("on_partitions_revoked", "on_partitions_assigned")
        ):
            raise TypeError("listener must have on_partitions_revoked and on_partitions_assigned methods")
        compiled = None
        names: set[str] | None = None
        if pattern is not None:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            if not isinstance(compiled, re.Pattern):
                raise TypeError(f"pattern must be a str or re.Pattern, got {type(pattern).__name__}")
        else:
            if isinstance(topics, str):
                raise TypeError("topics must be a collection of topic names, not one string")
            names = set()
            for t in topics or ():
                if not isinstance(t, str) or not t.strip():
                    raise ValueError(
                        f"Topic collection to subscribe to cannot contain null or empty topic: {t!r}"
                    )
                names.add(t)
            if not names:
                self.unsubscribe()
                return
        self._coord.subscribe(names, compiled, listener)
        self._kick()

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those matching it in the latest metadata)."""
        return set(self._coord.topics) if self._coord is not None and self._coord.subscribed else set()

    def unsubscribe(self) -> None:
        """Leave the group (revoking the partitions) or drop a manual assignment."""
        self._check_open()
        if self._coord is not None and self._coord.subscribed:
            err = self._coord.unsubscribe()
            self._set_group_assignment([])
            if err is not None:
                raise err
            return
        self.assign([])

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    # ----------------------------------------------------------------------------------- groups

    @property
    def member_id(self) -> str:
        """The id the group coordinator gave this member ("" before joining)."""
        return self._coord.member_id if self._coord is not None else ""

    @property
    def generation_id(self) -> int:
        """The group generation this member belongs to (-1 when not in one)."""
        return self._coord.generation if self._coord is not None else -1

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._group().group_metadata()

    def enforce_rebalance(self, reason: str | None = None) -> None:
        """Ask for a rebalance; the next ``poll`` rejoins the group."""
        coord = self._group()
        if not coord.subscribed:
            raise IllegalStateError("Tried to force a rebalance but consumer does not have a group.")
        coord.request_rejoin(reason or "the application called enforce_rebalance()")

    def commit_sync(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition, i.e. everything ``poll``
        returned) and wait for the answer, retrying retriable errors until ``default.api.timeout.ms``.
        Raises ``CommitFailedError`` when this member's generation is over (it was removed from the group)."""
        coord = self._group()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        coord.commit_sync(self.all_consumed() if offsets is None else offsets, timeout)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any] | None = None,
    ) -> None:
        """Send a commit and return at once; ``callback(offsets, error_or_None)`` runs in a later ``poll``
        (or ``commit_sync``/``close``). Retriable errors are not retried (a later commit supersedes it)."""
        coord = self._group()
        coord.commit_async(self.all_consumed() if offsets is None else offsets, callback)

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset for each partition (None where nothing is committed)."""
        coord = self._group()
        tps = [TopicPartition(*tp) for tp in partitions]
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return coord.committed(tps, timeout) if tps else {}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll`` returns for ``tp``."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be an integer >= 0, got {offset!r}")
        st = self._state(tp)
        self._set_position(st, offset)
        self._kick()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Reset to the log start offset, looked up at the next ``poll``/``position`` (lazy, as Kafka)."""
        self._request_reset(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Reset to the high watermark, looked up at the next ``poll``/``position`` (lazy, as Kafka)."""
        self._request_reset(partitions, LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record ``poll`` returns; runs the network while it must be looked up."""
        st = self._state(tp)
        if st.position is None:
            timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
            self._kick()
            self._block(lambda: st.position is not None or st.error is not None, timeout)
            if st.error is not None:
                err, st.error = st.error, None
                raise err
            if st.position is None:
                raise RequestTimedOutError(f"Timeout of {timeout}ms expired before the position for "
                                           f"partition {tp} could be determined")  # fmt: skip
        return st.position

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions and returning their records (buffered ones are kept)."""
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._state(tp).paused = False
        self._kick()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._assigned.items() if st.paused}

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        res = self._lookup({tp: EARLIEST_TIMESTAMP for tp in partitions}, timeout_ms)
        return {tp: r.offset for tp, r in res.items()}  # type: ignore[union-attr]

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The offset after the last record this consumer can read in each partition: the high watermark,
        or under ``isolation.level=read_committed`` the last stable offset (an open transaction's first
        offset stops it), as Kafka's ``endOffsets``."""
        res = self._lookup({tp: LATEST_TIMESTAMP for tp in partitions}, timeout_ms)
        return {tp: r.offset for tp, r in res.items()}  # type: ignore[union-attr]

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is >= the one given (the broker's time
        index), or None when there is no such record below the end ``end_offsets`` gives."""
        for tp, ts in timestamps.items():
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target time cannot be "
                                 "negative.")  # fmt: skip
        return self._lookup(timestamps, timeout_ms)

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[Record]]:
        """Up to ``max.poll.records`` records, per partition in offset order, starting at each position.

        Runs the simulated network until some records are ready or ``timeout_ms`` of virtual time has
        passed (then ``{}``). Raises ``NoOffsetForPartitionError`` / ``OffsetOutOfRangeError`` when a
        partition has no valid position and ``auto.offset.reset`` is ``none``.
        """
        self._check_open()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an integer >= 0, got {timeout_ms!r}")
        coord = self._coord
        subscribed = coord is not None and coord.subscribed
        if not self._assigned and not subscribed:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        net = self.net
        deadline = net._now + timeout_ms
        ready = self._poll_ready
        if coord is not None:
            ready = lambda: self._poll_ready() or coord.needs_app(net._now)  # noqa: E731
        self._polling = True
        try:
            while True:
                if coord is not None and not net._running:
                    coord.poll_app(net._now)  # listeners, rebalances, auto-commit: the application's part
                self._raise_errors()
                out = self._drain()
                if out:
                    self._kick()  # pipeline: the next fetches go out while the caller works
                    return out
                if net._running or net._now >= deadline:
                    self._kick()
                    return {}
                self._kick()
                net.run_until(ready, deadline - net._now)
        finally:
            self._polling = False

    def close(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit), revoke the partitions, leave the group (not a static member), stop."""
        if self._closed:
            return
        err = None
        if self._coord is not None and not self.net._running:
            err = self._coord.close(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms)
        self._closed = True
        self._wakeup.cancel()
        self._assigned.clear()
        if err is not None:
            raise err

    # ------------------------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("This consumer has already been closed.")

    def _group(self) -> ConsumerCoordinator:
        self._check_open()
        if self._coord is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you must provide "
                                      "a valid group.id in the consumer configuration.")  # fmt: skip
        return self._coord

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The position of every assigned partition that has one: what auto-commit commits."""
        return {
            tp: OffsetAndMetadata(st.position) for tp, st in self._assigned.items() if st.position is not None
        }

    def _set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions kept; with a group, new partitions
        start from the committed offset."""
        old = self._assigned
        self._assigned = {}
        for tp in partitions:
            st = old.get(tp)
            if st is None:
                st = _TPState()
                st.committed_fetch = self._coord is not None
            self._assigned[tp] = st
            self.metadata.add_topic(tp.topic)
        self._kick()

    def _apply_committed(self, tp: TopicPartition, generation: int, om: OffsetAndMetadata | None) -> None:
        st = self._assigned.get(tp)
        if st is None or st.generation != generation or not st.committed_fetch:
            return  # unassigned or seeked since
        if om is None:
            st.committed_fetch = False  # nothing committed: auto.offset.reset decides
        else:
            self._set_position(st, om.offset)
            self.log("offset_committed_position", tp=str(tp), offset=om.offset)

    def _send_group(self, node: int, request: Any, now: int, handler: Any, timeout_ms: int) -> bool:
        """Send a group request; ``handler(response_or_None, now)`` gets the answer (None: no answer)."""
        corr = self._next_corr()
        if not self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, request)):
            self._node_backoff[node] = now + RECONNECT_BACKOFF_MS
            return False
        self._inflight[corr] = _InFlight(corr, node, "group", now + timeout_ms, lookup=handler)
        self._wakeup.schedule(now + timeout_ms)
        return True

    def _fail_group_requests(self, node: int) -> None:
        """The coordinator connection is gone: every group request on it fails (handlers see None)."""
        now = self.net._now
        for corr in [c for c, r in self._inflight.items() if r.node == node and r.kind == "group"]:
            req = self._inflight.pop(corr, None)
            if req is not None:
                req.lookup(None, now)

    def _state(self, tp: TopicPartition) -> _TPState:
        self._check_open()
        st = self._assigned.get(TopicPartition(*tp))
        if st is None:
            raise IllegalStateError(f"No current assignment for partition {TopicPartition(*tp)}")
        return st

    def _set_position(self, st: _TPState, offset: int | None, reset_ts: int | None = None) -> None:
        st.position = offset
        st.reset_ts = reset_ts
        st.reset_inflight = False
        st.buffer = []
        st.generation += 1
        st.error = None
        st.committed_fetch = False

    def _request_reset(self, partitions: Iterable[TopicPartition] | None, ts: int) -> None:
        tps = list(self._assigned) if partitions is None else list(partitions)
        for tp in tps:
            self._set_position(self._state(tp), None, ts)
        self._kick()

    def _kick(self) -> None:
        if not self._closed:
            self._run(self.net._now)

    def _block(self, done: Any, timeout_ms: int) -> None:
        if self.net._running:
            raise RuntimeError(
                "a consumer's blocking call runs the SimNetwork, which is already running: call it from "
                "outside the simulation, not from a node callback or timer"
            )
        self.net.run_until(done, timeout_ms)

    def _poll_ready(self) -> bool:
        return any(st.error is not None or (st.buffer and not st.paused) for st in self._assigned.values())

    def _raise_errors(self) -> None:
        errs = [(tp, st) for tp, st in self._assigned.items() if st.error is not None]
        if not errs:
            return
        no_offset = [tp for tp, st in errs if isinstance(st.error, NoOffsetForPartitionError)]
        if no_offset:
            for tp in no_offset:
                self._assigned[tp].error = None
            raise NoOffsetForPartitionError(no_offset)
        tp, st = errs[0]
        err, st.error = st.error, None
        raise err  # type: ignore[misc]

    def _drain(self) -> dict[TopicPartition, list[Record]]:
        """Take up to max.poll.records buffered records, rotating partitions so none starves."""
        room = self.config.max_poll_records
        out: dict[TopicPartition, list[Record]] = {}
        for tp in list(self._assigned):
            if room <= 0:
                break
            st = self._assigned[tp]
            if st.paused or not st.buffer:
                continue
            take, st.buffer = st.buffer[:room], st.buffer[room:]
            room -= len(take)
            out[tp] = take
            st.position = st.buffer[0].offset if st.buffer else st.buffer_end
            # Move the partition to the back: the next poll starts with the others.
            del self._assigned[tp]
            self._assigned[tp] = st
        n = sum(len(v) for v in out.values())
        self._metrics["records-consumed-total"] += n
        return out

    def _lookup(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self._check_open()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        lookup = _Lookup({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        if not lookup.timestamps:
            return {}
        for tp in lookup.timestamps:
            self.metadata.add_topic(tp.topic)
        self._lookups.append(lookup)
        try:
            self._kick()
            self._block(lambda: lookup.done, timeout)
        finally:
            self._lookups.remove(lookup)
        if lookup.errors:
            raise next(iter(lookup.errors.values()))
        if not lookup.done:
            raise RequestTimedOutError(f"Failed to get offsets by times in {timeout}ms")
        return {tp: lookup.results[tp] for tp in lookup.timestamps}

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _leader(self, tp: TopicPartition) -> tuple[int, int]:
        """(leader, leader epoch) from the metadata; NO_LEADER while unknown."""
        info = self.metadata.topic(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return NO_LEADER, UNKNOWN_EPOCH
        p = info.partitions[tp.partition]
        return p.leader, p.leader_epoch

    # --------------------------------------------------------------------------------- the loop

    def _run(self, now: int) -> None:
        """Send whatever can go now (metadata, offset lookups, fetches) and set the next wake-up."""
        if self._closed:
            return
        cfg = self.config
        for req in [r for r in self._inflight.values() if r.deadline <= now]:
            if req.corr in self._inflight:
                self._metrics["request-timeout-total"] += 1
                self.log("request_timeout", broker=req.node, correlation_id=req.corr, kind=req.kind)
                self._disconnect(req.node, now)
        wake: list[int] = [r.deadline for r in self._inflight.values()]
        # Offset resets: auto.offset.reset for partitions with no position, or a seek_to_*.
        resets: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, st in self._assigned.items():
            if st.position is not None or st.reset_inflight or st.error is not None or st.committed_fetch:
                continue
            ts = st.reset_ts
            if ts is None:
                policy = cfg.auto_offset_reset
                if policy == "none":
                    st.error = NoOffsetForPartitionError([tp])
                    continue
                ts = EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
                st.reset_ts = ts
            if st.backoff_until > now:
                wake.append(st.backoff_until)
                continue
            leader, _epoch = self._leader(tp)
            if leader < 0:
                self.metadata.request_update()
                continue
            if self._node_backoff.get(leader, 0) > now:
                wake.append(self._node_backoff[leader])
                continue
            resets.setdefault(leader, []).append((tp, ts))
        for node, items in sorted(resets.items()):
            self._send_list_offsets(node, items, now, None)
        # User lookups (beginning/end offsets, offsets_for_times).
        for lookup in self._lookups:
            by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
            for tp, ts in lookup.timestamps.items():
                if tp in lookup.results or tp in lookup.errors or tp in lookup.inflight:
                    continue
                until = max(lookup.backoff.get(tp, 0), self._node_backoff.get(self._leader(tp)[0], 0))
                if until > now:
                    wake.append(until)
                    continue
                leader, _epoch = self._leader(tp)
                if leader < 0:
                    self.metadata.request_update()
                    continue
                by_node.setdefault(leader, []).append((tp, ts))
            for node, items in sorted(by_node.items()):
                self._send_list_offsets(node, items, now, lookup)
        # Fetches: one request per leader for its fetchable partitions, one in flight per leader.
        fetches: dict[int, list[TopicPartition]] = {}
        for tp, st in self._assigned.items():
            if st.paused or st.position is None or st.buffer or st.error is not None:
                continue
            if st.backoff_until > now:
                wake.append(st.backoff_until)
                continue
            leader, _epoch = self._leader(tp)
            if leader < 0:
                self.metadata.request_update()
                continue
            if leader in self._fetching:
                continue
            if self._node_backoff.get(leader, 0) > now:
                wake.append(self._node_backoff[leader])
                continue
            fetches.setdefault(leader, []).append(tp)
        for node, tps in sorted(fetches.items()):
            self._send_fetch(node, tps, now)
        if self._coord is not None:
            self._coord.run(now, wake)
        # Metadata: unknown leaders, errors that asked for a refresh, max age.
        meta = self.metadata
        active = bool(
            self._assigned or self._lookups or (self._coord is not None and self._coord.needs_metadata())
        )
        if active and meta.update_due(now):
            if self._meta_inflight is None and now < self._meta_backoff_until:
                wake.append(self._meta_backoff_until)
            else:
                self._maybe_send_metadata(now)
                if self._meta_inflight is None:
                    wake.append(self._meta_backoff_until)
        elif active:
            age = meta.next_age_refresh_ms()
            if age is not None:
                wake.append(age)
        if self._meta_inflight is not None:
            wake.append(self._meta_inflight.deadline)
        if wake:
            self._wakeup.schedule(max(min(wake), now + 1) if min(wake) <= now else min(wake))

    def _send(
        self, node: int, request: Any, kind: str, now: int, tps: Any = None, lookup: Any = None
    ) -> bool:
        corr = self._next_corr()
        if not self.net.send(self.node_id, node, RequestEnvelope(corr, self.client_id, request)):
            self._node_backoff[node] = now + RECONNECT_BACKOFF_MS
            self.metadata.request_update()
            return False
        timeout = self.config.request_timeout_ms
        if kind == "fetch":
            timeout += self.config.fetch_max_wait_ms  # the broker may hold a fetch that long on purpose
        self._inflight[corr] = _InFlight(corr, node, kind, now + timeout, tps, lookup)
        if kind == "fetch":
            self._fetching[node] = corr
        return True

    def _send_fetch(self, node: int, tps: list[TopicPartition], now: int) -> None:
        cfg = self.config
        parts = []
        sent = {}
        for tp in tps:
            st = self._assigned[tp]
            _leader, epoch = self._leader(tp)
            parts.append(FetchPartition(tp=tp, fetch_offset=st.position, current_leader_epoch=epoch,
                                        partition_max_bytes=cfg.max_partition_fetch_bytes))  # fmt: skip
            sent[tp] = (st.position, st.generation)
        req = FetchRequest(
            max_wait_ms=cfg.fetch_max_wait_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.fetch_max_bytes,
            isolation_level=self.config.isolation_level,
            partitions=tuple(parts),
        )
        if self._send(node, req, "fetch", now, tps=sent):
            self._metrics["fetch-total"] += 1

    def _send_list_offsets(
        self, node: int, items: list[tuple[TopicPartition, int]], now: int, lookup: _Lookup | None
    ) -> None:
        parts = tuple(
            ListOffsetsPartition(tp=tp, timestamp=ts, current_leader_epoch=self._leader(tp)[1])
            for tp, ts in items
        )
        if lookup is None:
            tps = {tp: self._assigned[tp].generation for tp, _ts in items}
            kind = "reset"
        else:
            tps = {tp: None for tp, _ts in items}
            kind = "lookup"
        # the consumer's isolation level bounds the answers too: under read_committed "latest" is the LSO
        req = ListOffsetsRequest(isolation_level=self.config.isolation_level, partitions=parts)
        if not self._send(node, req, kind, now, tps=tps, lookup=lookup):
            return
        self._metrics["list-offsets-total"] += 1
        for tp, _ts in items:
            if lookup is None:
                self._assigned[tp].reset_inflight = True
            else:
                lookup.inflight.add(tp)

    def _maybe_send_metadata(self, now: int) -> None:
        if self._meta_inflight is not None or now < self._meta_backoff_until:
            return
        meta = self.metadata
        nodes = list(meta.nodes())
        start = self._rng.randrange(len(nodes)) if self._rng is not None else 0
        order = nodes[start:] + nodes[:start]
        everything = self._coord is not None and self._coord.subscribed and self._coord.pattern is not None
        req = MetadataRequest(
            topics=None if everything else tuple(meta.wanted),
            allow_auto_topic_creation=self.config.allow_auto_create_topics,
        )
        for node in order:
            if self._node_backoff.get(node, 0) > now:
                continue
            if self._send(node, req, "metadata", now):
                self._metrics["metadata-request-total"] += 1
                self._meta_inflight = self._inflight[self._corr]
                return
        self._meta_backoff_until = now + self.config.retry_backoff_ms

    def _disconnect(self, node: int, now: int) -> None:
        """Drop the connection to ``node``: everything in flight on it is forgotten and tried again."""
        self.metadata.request_update()
        self._node_backoff[node] = now + RECONNECT_BACKOFF_MS
        for corr in [c for c, r in self._inflight.items() if r.node == node]:
            req = self._inflight.pop(corr, None)
            if req is None:
                continue  # a group handler below already failed it
            if req.kind == "group":
                req.lookup(None, now)
            elif req.kind == "metadata":
                self._meta_inflight = None
            elif req.kind == "fetch":
                self._fetching.pop(node, None)
            elif req.kind == "reset":
                for tp, gen in req.tps.items():
                    st = self._assigned.get(tp)
                    if st is not None and st.generation == gen:
                        st.reset_inflight = False
            elif req.kind == "lookup":
                req.lookup.inflight.difference_update(req.tps)

    # --------------------------------------------------------------------------------- responses

    def _retry_later(self, tp: TopicPartition, code: int, now: int) -> None:
        if code in INVALID_METADATA_CODES:
            self.metadata.request_update()
        st = self._assigned.get(tp)
        if st is not None:
            st.backoff_until = now + self.config.retry_backoff_ms

    def _on_fetch(self, req: _InFlight, resp: FetchResponse, now: int) -> None:
        for pr in resp.partitions:
            tp = pr.tp
            st = self._assigned.get(tp)
            sent = req.tps.get(tp)
            if st is None or sent is None or sent != (st.position, st.generation):
                continue  # unassigned, seeked or reset since: this answer is stale
            if pr.error_code:
                self._metrics["fetch-error-total"] += 1
                if pr.error_code == OFFSET_OUT_OF_RANGE:
                    self._offset_out_of_range(tp, st, sent[0], pr)
                elif pr.error_code == CorruptRecordError.code:
                    # The broker cannot even read the batch there: the application hears of it, as from
                    # a CRC check, and the position stays (seek past it to go on, as in Kafka).
                    st.error = CorruptRecordError(
                        f"Record batch for partition {tp} at offset {sent[0]} is invalid, cause: "
                        f"the broker answered CORRUPT_MESSAGE"
                    )
                    self.log("fetch_corrupt", tp=str(tp), offset=sent[0], broker=req.node)
                else:
                    self.log("fetch_error", tp=str(tp), error=pr.error_code, broker=req.node)
                    self._retry_later(tp, pr.error_code, now)
                continue
            st.hw = pr.high_watermark
            st.log_start = pr.log_start_offset
            data = pr.records
            if not isinstance(data, bytes | bytearray | memoryview):
                data = data.read()  # type: ignore[attr-defined]
            if not data:
                continue
            self._metrics["bytes-consumed-total"] += len(data)
            position = sent[0]
            end = position
            wanted = []
            # read_committed: the fetch lists the aborted transactions overlapping it; a producer's
            # transactional batches are dropped from its aborted transaction's first offset to its ABORT
            # marker (Kafka's Fetcher does the same walk).
            aborted = sorted(pr.aborted_transactions or (), key=lambda a: a.first_offset)
            aborting: set[int] = set()
            for pos, header in iter_batches(data):
                while aborted and aborted[0].first_offset <= header.base_offset + header.last_offset_delta:
                    aborting.add(aborted.pop(0).producer_id)
                if header.next_offset <= position:
                    if header.is_control:
                        aborting.discard(header.producer_id)
                    continue
                end = max(end, header.next_offset)
                if header.is_control:
                    aborting.discard(header.producer_id)
                    continue  # commit/abort markers: never returned, but the position moves past them
                if header.is_transactional and header.producer_id in aborting:
                    continue  # part of an aborted transaction
                wanted.append(pos)
            # All batches of the fetch in one vectorised pass; records before the position (the start of
            # the first batch) are checked but never built.
            try:
                records = decode_batches(data, wanted, verify_crc=self.config.check_crcs, min_offset=position)
            except CorruptRecordError as exc:
                records, end = self._records_before_corrupt(tp, st, data, wanted, position, exc)
            if records:
                st.buffer = records
                st.buffer_end = end
            elif end > position:
                st.position = end  # only control batches (or nothing at or after the position)

    def _records_before_corrupt(
        self, tp: TopicPartition, st: _TPState, data: Any, wanted: list[int], position: int, exc: Exception
    ) -> tuple[list[Record], int]:
        """A batch failed its CRC check: the records of the batches before it, and where they end. With
        none before it, the next poll raises Kafka's error naming the partition and the batch's offset."""
        records: list[Record] = []
        for pos in wanted:
            try:
                records += decode_batches(data, [pos], verify_crc=True, min_offset=position)
            except CorruptRecordError as e:
                offset = max(position, BatchHeader.parse(data, pos).base_offset)
                if not records:
                    cause = re.sub(r" (in batch )?at position \d+", "", e.message)  # of the fetched bytes
                    st.error = CorruptRecordError(
                        f"Record batch for partition {tp} at offset {offset} is invalid, cause: {cause}"
                    )
                    self.log("fetch_corrupt", tp=str(tp), offset=offset, error=e.message)
                return records, offset
        return records, position  # not reached: exc came from one of the batches

    def _offset_out_of_range(self, tp: TopicPartition, st: _TPState, offset: int, pr: Any) -> None:
        policy = self.config.auto_offset_reset
        self.log("offset_out_of_range", tp=str(tp), offset=offset, policy=policy)
        if policy == "none":
            self._set_position(st, offset)
            st.error = OffsetOutOfRangeError(
                f"Fetch position {offset} is out of range for partition {tp} "
                f"(log start {pr.log_start_offset}, high watermark {pr.high_watermark})"
            )
            return
        self._metrics["offset-reset-total"] += 1
        self._set_position(st, None, EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP)

    def _on_list_offsets(self, req: _InFlight, resp: ListOffsetsResponse, now: int) -> None:
        answered = {pr.tp: pr for pr in resp.partitions}
        for tp, gen in req.tps.items():
            pr = answered.get(tp)
            if req.kind == "reset":
                st = self._assigned.get(tp)
                if st is None or st.generation != gen:
                    continue
                st.reset_inflight = False
                if pr is None or pr.error_code:
                    code = -1 if pr is None else pr.error_code
                    self._retry_later(tp, code, now)
                    continue
                self._set_position(st, pr.offset)
                self.log("offset_reset", tp=str(tp), offset=pr.offset)
                continue
            lookup: _Lookup = req.lookup
            lookup.inflight.discard(tp)
            if pr is None or pr.error_code:
                code = -1 if pr is None else pr.error_code
                exc = error_for_code(code) or KafkaError
                if code in INVALID_METADATA_CODES or (pr is None) or exc.retriable:
                    self.metadata.request_update()
                    lookup.backoff[tp] = now + self.config.retry_backoff_ms
                else:
                    lookup.errors[tp] = exc(f"ListOffsets for {tp}")
                continue
            ts = lookup.timestamps[tp]
            if ts in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
                lookup.results[tp] = OffsetAndTimestamp(pr.offset, pr.timestamp, _epoch(pr.leader_epoch))
            elif pr.offset < 0:
                lookup.results[tp] = None
            else:
                lookup.results[tp] = OffsetAndTimestamp(pr.offset, pr.timestamp, _epoch(pr.leader_epoch))


def _epoch(e: int) -> int | None:
    return None if e < 0 else e
