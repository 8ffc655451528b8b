"""The consumer: Kafka's KafkaConsumer as one SimNetwork node, with consumer groups.

As in Kafka, it is the public API and the network client over three parts: ``SubscriptionState``
(``subscription_state``: assigned partitions, positions, pause/resume, pending resets), ``Fetcher``
(``fetcher``: fetch requests and their answers, record parsing, read_committed, offset lookups) and,
with a ``group.id``, ``ConsumerCoordinator`` (``consumer_coordinator``, ``group.protocol=classic``, the default)
or ``ConsumerMembershipManager`` (``consumer_membership_manager``, ``group.protocol=consumer``: KIP-848).

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
from typing import Any

from kafkalite.client.consumer_coordinator import (
    CommitFailedError,
    ConsumerCoordinator,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)
from kafkalite.client.consumer_membership_manager import ConsumerMembershipManager
from kafkalite.client.fetcher import Fetcher, NoOffsetForPartitionError, OffsetAndTimestamp
from kafkalite.client.metadata import ClusterMetadata
from kafkalite.client.subscription_state import IllegalStateError, SubscriptionState, TopicPartitionState
from kafkalite.client.wakeup import Wakeup
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.errors import (
    InvalidGroupIdError,
    RequestTimedOutError,
)
from kafkalite.net.sim import BaseNode, NodeId
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_LEADER,
    UNKNOWN_EPOCH,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
)
from kafkalite.records import Record

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
    "SubscriptionPattern",
]

RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms default


class ConsumerClosedError(IllegalStateError):
    """Any call after ``close()``."""


class SubscriptionPattern:
    """A regular expression the group coordinator matches topic names against (Kafka's
    ``SubscriptionPattern``, KIP-848). Kafka's broker uses RE2/J syntax; kafkalite's uses Python's ``re``
    (full match), which agrees with RE2 on the common subset (no backreferences or lookarounds in RE2)."""

    __slots__ = ("pattern",)

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"a SubscriptionPattern needs a non-empty regular expression, got {pattern!r}")
        self.pattern = pattern

    def __repr__(self) -> str:
        return f"SubscriptionPattern({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscriptionPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


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
        self._subscriptions = SubscriptionState()
        self._fetcher = Fetcher(self, self._subscriptions)
        self._corr = 0
        self._inflight: dict[int, _InFlight] = {}
        self._node_backoff: dict[int, int] = {}
        self._meta_inflight: _InFlight | None = None
        self._meta_backoff_until = 0
        self._wakeup = Wakeup(self, self._run)
        self._rng: Any = None
        self._closed = False
        self._polling = False
        self._coord: ConsumerCoordinator | None = None
        if self.config.group_id is not None:
            # group.protocol picks the membership: KIP-848's heartbeat-driven one or the classic join/sync.
            manager = (
                ConsumerMembershipManager if self.config.group_protocol == "consumer" else ConsumerCoordinator
            )
            self._coord = manager(self)
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
            self._fetcher.on_fetch(req, resp, now_ms)
        elif isinstance(resp, ListOffsetsResponse):
            self._fetcher.on_list_offsets(req, resp, now_ms)
        self._run(now_ms)

    def on_crash(self) -> None:
        self._inflight.clear()
        self._fetcher.fetching.clear()
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
        pattern: str | re.Pattern[str] | SubscriptionPattern | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group (``group.id``) and let it assign partitions of these topics, or of every topic
        whose whole name matches ``pattern`` (new matching topics join the subscription when the metadata
        shows them). ``listener`` is told about revoked/assigned/lost partitions, inside ``poll``.

        A ``SubscriptionPattern`` (``group.protocol=consumer`` only) is matched by the broker, not here: the
        heartbeat carries it as ``SubscribedTopicRegex`` and the coordinator resolves it against every topic."""
        self._check_open()
        if self._coord is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you must provide "
                                      "a valid group.id in the consumer configuration.")  # fmt: skip
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe takes either topics or pattern, not both and not neither")
        if self._subscriptions.assigned and not self._coord.subscribed:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if listener is not None and not all(
            callable(getattr(listener, m, None)) for m in ("on_partitions_revoked", "on_partitions_assigned")
        ):
            raise TypeError("listener must have on_partitions_revoked and on_partitions_assigned methods")
        compiled = None
        names: set[str] | None = None
        if isinstance(pattern, SubscriptionPattern):
            if not isinstance(self._coord, ConsumerMembershipManager):
                raise ValueError(
                    "a SubscriptionPattern is resolved by the broker and needs group.protocol=consumer; "
                    "the classic protocol takes a re pattern, matched by the consumer"
                )
            self._coord.subscribe_regex(pattern.pattern, listener)
            self._kick()
            return
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
        return set(self._subscriptions.assigned)

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
        self._state(tp).set_position(offset)
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
        return self._subscriptions.paused()

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        res = self._fetcher.offsets_by_times({tp: EARLIEST_TIMESTAMP for tp in partitions}, timeout_ms)
        return {tp: r.offset for tp, r in res.items()}  # type: ignore[union-attr]

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The offset after the last record this consumer can read in each partition: the high watermark,
        or under ``isolation.level=read_committed`` the last stable offset (an open transaction's first
        offset stops it), as Kafka's ``endOffsets``."""
        res = self._fetcher.offsets_by_times({tp: LATEST_TIMESTAMP for tp in partitions}, timeout_ms)
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
        return self._fetcher.offsets_by_times(timestamps, timeout_ms)

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
        if not self._subscriptions.assigned and not subscribed:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        net = self.net
        deadline = net._now + timeout_ms
        ready = self._subscriptions.has_ready
        if coord is not None:
            ready = lambda: self._subscriptions.has_ready() or coord.needs_app(net._now)  # noqa: E731
        self._polling = True
        try:
            while True:
                if coord is not None and not net._running:
                    coord.poll_app(net._now)  # listeners, rebalances, auto-commit: the application's part
                self._raise_errors()
                out = self._fetcher.collect_fetch()
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
        self._subscriptions.assigned.clear()
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
        return self._subscriptions.all_consumed()

    def _set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions kept; with a group, new partitions
        start from the committed offset."""
        partitions = list(partitions)
        self._subscriptions.assign(partitions, from_group=self._coord is not None)
        for tp in partitions:
            self.metadata.add_topic(tp.topic)
        self._kick()

    def _apply_committed(self, tp: TopicPartition, generation: int, om: OffsetAndMetadata | None) -> None:
        st = self._subscriptions.assigned.get(tp)
        if st is None or st.generation != generation or not st.committed_fetch:
            return  # unassigned or seeked since
        if om is None:
            st.committed_fetch = False  # nothing committed: auto.offset.reset decides
        else:
            st.set_position(om.offset)
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

    def _state(self, tp: TopicPartition) -> TopicPartitionState:
        self._check_open()
        return self._subscriptions.state(tp)

    def _request_reset(self, partitions: Iterable[TopicPartition] | None, ts: int) -> None:
        tps = list(self._subscriptions.assigned) if partitions is None else list(partitions)
        for tp in tps:
            self._state(tp).set_position(None, ts)
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

    def _raise_errors(self) -> None:
        errs = [(tp, st) for tp, st in self._subscriptions.assigned.items() if st.error is not None]
        if not errs:
            return
        no_offset = [tp for tp, st in errs if isinstance(st.error, NoOffsetForPartitionError)]
        if no_offset:
            for tp in no_offset:
                self._subscriptions.assigned[tp].error = None
            raise NoOffsetForPartitionError(no_offset)
        tp, st = errs[0]
        err, st.error = st.error, None
        raise err  # type: ignore[misc]

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
        for req in [r for r in self._inflight.values() if r.deadline <= now]:
            if req.corr in self._inflight:
                self._metrics["request-timeout-total"] += 1
                self.log("request_timeout", broker=req.node, correlation_id=req.corr, kind=req.kind)
                self._disconnect(req.node, now)
        wake: list[int] = [r.deadline for r in self._inflight.values()]
        fetcher = self._fetcher
        fetcher.send_resets(now, wake)
        fetcher.send_lookups(now, wake)
        fetcher.send_fetches(now, wake)
        if self._coord is not None:
            self._coord.run(now, wake)
        # Metadata: unknown leaders, errors that asked for a refresh, max age.
        meta = self.metadata
        active = bool(
            self._subscriptions.assigned
            or fetcher.lookups
            or (self._coord is not None and self._coord.needs_metadata())
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
        return True

    def _maybe_send_metadata(self, now: int) -> None:
        if self._meta_inflight is not None or now < self._meta_backoff_until:
            return
        meta = self.metadata
        nodes = list(meta.nodes())
        start = self._rng.randrange(len(nodes)) if self._rng is not None else 0
        order = nodes[start:] + nodes[:start]
        everything = self._coord is not None and self._coord.wants_all_topics()
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
            else:
                self._fetcher.on_disconnect(req)
