"""The consumer's side of a consumer group: Kafka's ``ConsumerCoordinator``.

It finds the group coordinator (FindCoordinator to any broker), joins the group (JoinGroup, then SyncGroup),
heartbeats, commits and fetches offsets, and leaves (LeaveGroup). One lives inside each ``Consumer`` that
has a ``group.id``; it sends through the consumer's connections. As in Kafka, the membership itself
(discovery, the join/sync state machine, heartbeats, leaving) is its base class, ``AbstractCoordinator``
in ``abstract_coordinator``; this module adds the subscription, the assignment, the rebalance listener
and the offset commits and fetches.

**Two threads, as in Kafka.** Kafka's consumer does group work on two threads, and so does this one, in
virtual time:

* *the background* (Kafka's heartbeat thread and network callbacks) runs whenever the simulation runs, even
  while the application is not polling: coordinator discovery, heartbeats every ``heartbeat.interval.ms``,
  the client's session check (no heartbeat answer for ``session.timeout.ms``: the coordinator is presumed
  gone), the ``max.poll.interval.ms`` check (the application stopped polling: leave the group), sending the
  JoinGroup/SyncGroup of a rebalance the application started, the leader's assignment, commits and the
  committed-offset lookups for new partitions;
* *the application* (``poll``, ``commit_sync``, ``close``) runs the listener callbacks and starts rebalances:
  ``on_join_prepare`` (auto-commit, then revoke everything under the eager protocol, or nothing but
  unsubscribed topics under the cooperative one), and ``on_join_complete`` (take the new assignment; under the
  cooperative protocol revoke only partitions that moved, then rejoin at once so they can be given out).

So a consumer that does not call ``poll`` keeps heartbeating but never rejoins, and after
``max.poll.interval.ms`` it leaves the group, exactly the failure mode that setting exists for.

**Rebalance protocol.** ``COOPERATIVE`` (KIP-429) when every configured assignor supports it (only
``cooperative-sticky`` does), else ``EAGER``: the default ``["range", "cooperative-sticky"]`` is eager.

**Errors**, handled as Kafka's client does: REBALANCE_IN_PROGRESS from a heartbeat -> rejoin;
ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID -> the member lost its partitions (``on_partitions_lost``) and rejoins;
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / no answer -> find the coordinator again; FENCED_INSTANCE_ID
and configuration errors (INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED...)
are fatal and raised by the next ``poll``. A commit from a stale generation raises ``CommitFailedError``.

Events in the network log: ``consumer_coordinator`` (found), ``consumer_rebalance`` (a rejoin starts, with
the reason), ``consumer_joined`` (a generation), ``consumer_assigned``, ``consumer_revoked``,
``consumer_lost``, ``consumer_commit``, ``consumer_commit_failed``, ``consumer_poll_timeout``,
``consumer_left``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkalite.client.abstract_coordinator import (
    _COORDINATOR_GONE,
    _FENCED,
    _ILLEGAL_GENERATION,
    _LOADING,
    _NONE,
    _REBALANCING,
    _UNKNOWN_MEMBER,
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    AbstractCoordinator,
    MemberState,
    _err_name,
    _error,
    _names,
)
from kafkalite.client.assignors import Subscription
from kafkalite.errors import (
    FencedInstanceIdError,
    KafkaError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import INTERNAL_TOPICS, TopicPartition
from kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from kafkalite.protocol.group import (
    JoinGroupProtocol,
    JoinGroupResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupAssignment,
)

if TYPE_CHECKING:
    from kafkalite.client.consumer import Consumer

__all__ = [
    "CommitFailedError",
    "ConsumerCoordinator",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "MemberState",
    "OffsetAndMetadata",
    "RebalanceProtocol",
]

CLOSE_TIMEOUT_MS = 30_000  # KafkaConsumer.close()'s default timeout

_REQUEST_TIMED_OUT = RequestTimedOutError.code
_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.code
_RETRIABLE_COMMIT = frozenset({_LOADING, _UNKNOWN_TOPIC, _REQUEST_TIMED_OUT, *_COORDINATOR_GONE})


class CommitFailedError(Exception):
    """The commit cannot succeed: this member's generation is over (it was removed from the group, e.g.
    after ``max.poll.interval.ms`` or a session timeout, and its partitions may now belong to another
    member). Kafka's CommitFailedException: client-side, no wire code, so not a ``KafkaError``."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "Commit cannot be completed since the group has already rebalanced and assigned the "
            "partitions to another member. The time between poll() calls was longer than "
            "max.poll.interval.ms, or the member was removed (session timeout), so its generation ended."
        )


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to read), its leader epoch and the caller's metadata string."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class ConsumerGroupMetadata(NamedTuple):
    """``Consumer.group_metadata()``: what a transactional producer needs to commit offsets for a group."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class ConsumerRebalanceListener:
    """Callbacks around a rebalance, run inside ``poll`` (subclass and override what you need).

    ``on_partitions_revoked``: before partitions are taken away (eager: all of them at the start of every
    rebalance; cooperative: only those moving to another member, at its end, and only if there are any).
    Commit here to hand over exactly. ``on_partitions_assigned``: after the new share arrives (cooperative:
    only the added partitions, called even when empty). ``on_partitions_lost``: the member was already
    out of the group (session timeout, poll timeout, fenced), so another member may own them already;
    do not commit. By default it calls ``on_partitions_revoked``, as Kafka's does.
    """

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


class RebalanceProtocol(Enum):
    EAGER = "EAGER"
    COOPERATIVE = "COOPERATIVE"


def supported_protocols(assignor: Any) -> tuple[RebalanceProtocol, ...]:
    """An assignor's ``supported_protocols`` (names or enums); Kafka's built-ins: only cooperative-sticky
    supports COOPERATIVE."""
    given = getattr(assignor, "supported_protocols", None)
    if callable(given):
        given = given()
    if given:
        return tuple(
            p if isinstance(p, RebalanceProtocol) else RebalanceProtocol(str(p).upper()) for p in given
        )
    if assignor.name == "cooperative-sticky":
        return (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    return (RebalanceProtocol.EAGER,)


class _Commit:
    """One OffsetCommit the application asked for (sync or async), until it is answered."""

    __slots__ = ("offsets", "callback", "done", "error", "inflight", "retry_at", "generation", "member_id")

    def __init__(self, offsets: dict[TopicPartition, OffsetAndMetadata], callback: Any, gen: int, mid: str):
        self.offsets = offsets
        self.callback = callback
        self.done = False
        self.error: Exception | None = None
        self.inflight = False
        self.retry_at = 0
        self.generation = gen
        self.member_id = mid


class _Fetch:
    """One OffsetFetch: for new partitions' positions (``user=False``) or ``Consumer.committed``."""

    __slots__ = ("partitions", "user", "result", "error", "done", "inflight", "retry_at", "generations")

    def __init__(self, partitions: list[TopicPartition], user: bool, generations: dict | None = None) -> None:
        self.partitions = partitions
        self.user = user
        self.result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        self.error: Exception | None = None
        self.done = False
        self.inflight = False
        self.retry_at = 0
        self.generations = generations or {}


class ConsumerCoordinator(AbstractCoordinator):
    """The group membership of one ``Consumer``, on ``AbstractCoordinator``. See the module docstring."""

    PROTOCOL_TYPE = CONSUMER_PROTOCOL_TYPE
    RETRIABLE_COMMIT_CODES = _RETRIABLE_COMMIT
    """Commit errors ``commit_sync`` retries until its timeout."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(consumer)
        self.assignors = list(consumer.config.assignors)
        common = set(RebalanceProtocol)
        for a in self.assignors:
            common &= set(supported_protocols(a))
        if not common:
            raise KafkaError("the configured assignors support no common rebalance protocol")
        self.protocol = (
            RebalanceProtocol.COOPERATIVE
            if RebalanceProtocol.COOPERATIVE in common
            else RebalanceProtocol.EAGER
        )
        # subscription (subscribe() mode)
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._joined_subscription: frozenset[str] | None = None
        self._group_subscription: set[str] = set()
        self._assignment_snapshot: dict[str, int] | None = None
        self._sticky_memory: tuple[list[TopicPartition], int] | None = None
        self._coop_generation = NO_GENERATION
        # offsets
        self._commits: list[_Commit] = []
        self._fetches: list[_Fetch] = []
        self._callbacks: list[Callable[[], None]] = []
        self._next_auto_commit: int | None = None

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.group_instance_id)

    # =============================================================================== subscription
    def subscribe(self, topics: set[str] | None, pattern: re.Pattern[str] | None, listener: Any) -> None:
        self.subscribed = True
        self.pattern = pattern
        if listener is not None:
            self.listener = listener
        if pattern is not None:
            self.topics = self._pattern_topics()
        else:
            self.topics = set(topics or ())
        for t in self.topics:
            self.c.metadata.add_topic(t)
        self.c.metadata.request_update()

    def _pattern_topics(self) -> set[str]:
        assert self.pattern is not None
        return {
            t
            for t in self.c.metadata.topics
            if self.pattern.fullmatch(t) and not (self.cfg.exclude_internal_topics and t in INTERNAL_TOPICS)
        }

    def wants_all_topics(self) -> bool:
        """A pattern subscription needs every topic's metadata to match against."""
        return self.subscribed and self.pattern is not None

    def needs_metadata(self) -> bool:
        return self.subscribed or bool(self._leader_wait)

    def on_metadata_update(self) -> None:
        """After every metadata response: pattern subscriptions and the leader's partition counts."""
        if self.subscribed and self.pattern is not None:
            topics = self._pattern_topics()
            if topics != self.topics:
                self._log("consumer_subscription_changed", topics=sorted(topics))
                self.topics = topics
        joined = self._joined_subscription
        if self.subscribed and joined is not None and frozenset(self.topics) != joined:
            self.request_rejoin("subscription changed")
        snap = self._assignment_snapshot
        if snap is not None and self.state is MemberState.STABLE:
            now = self._partition_counts(snap)
            if now != snap:
                self._assignment_snapshot = None
                self.request_rejoin(f"metadata changed: partitions {snap} -> {now}")

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            info = self.c.metadata.topic(t)
            out[t] = 0 if info is None else info.num_partitions
        return out

    # =============================================================================== application side
    def needs_app(self, now: int) -> bool:
        """True when ``poll``'s loop must run ``poll_app`` (the network stops to let it)."""
        if self.fatal is not None or self._callbacks or self._pending_assignment is not None:
            return True
        if self.subscribed and self.rejoin_needed and not self._prepared:
            return True
        return self._next_auto_commit is not None and now >= self._next_auto_commit

    def poll_app(self, now: int) -> None:
        """Kafka's ``ConsumerCoordinator.poll``, the part that runs on the application's thread."""
        self._last_poll = now
        self._run_callbacks()
        if self.fatal is not None:
            err, self.fatal = self.fatal, None
            raise err
        err = None
        if self._pending_assignment is not None:
            err = self._on_join_complete()
        if self.subscribed and self.rejoin_needed and not self._prepared:
            err = self._on_join_prepare() or err
        self.maybe_auto_commit_async(self._now())
        self.c._kick()
        if err is not None:
            raise err

    def _run_callbacks(self) -> None:
        while self._callbacks:
            self._callbacks.pop(0)()

    def _invoke(self, what: str, partitions: set[TopicPartition]) -> Exception | None:
        try:
            getattr(self.listener, what)(set(partitions))
        except Exception as e:  # noqa: BLE001 - raised to the caller of poll, as Kafka does
            self._log("consumer_listener_error", callback=what, error=repr(e))
            return e
        return None

    def _on_join_prepare(self) -> Exception | None:
        reason = self.rejoin_reason
        self._metric("rebalance-total")
        self._log("consumer_rebalance", member=self.member_id, generation=self.generation, reason=reason,
                  protocol=self.protocol.value)  # fmt: skip
        if self.cfg.enable_auto_commit and self.generation != NO_GENERATION:
            self._commit_sync_quietly(self.c.all_consumed(), min(self.cfg.max_poll_interval_ms,
                                                                  self.cfg.default_api_timeout_ms))  # fmt: skip
        owned = set(self.c._subscriptions.assigned)
        err = None
        if self.generation == NO_GENERATION or self.member_id == UNKNOWN_MEMBER_ID:
            if owned:
                err = self._lose(owned, "generation reset")
        elif self.protocol is RebalanceProtocol.EAGER:
            self._log("consumer_revoked", member=self.member_id, generation=self.generation,
                      partitions=_names(owned), protocol="EAGER")  # fmt: skip
            self._metric("partitions-revoked-total", len(owned))
            err = self._invoke("on_partitions_revoked", owned)
            self.c._set_group_assignment([])
        else:
            gone = {tp for tp in owned if tp.topic not in self.topics}
            if gone:
                self._log("consumer_revoked", member=self.member_id, generation=self.generation,
                          partitions=_names(gone), protocol="COOPERATIVE")  # fmt: skip
                self._metric("partitions-revoked-total", len(gone))
                err = self._invoke("on_partitions_revoked", gone)
                self.c._set_group_assignment([tp for tp in self.c._subscriptions.assigned if tp not in gone])
        self._prepared = True
        self.rejoin_needed = False
        self._join_retry_at = 0
        return err

    def _lose(self, owned: set[TopicPartition], why: str) -> Exception | None:
        self._log("consumer_lost", member=self.member_id, partitions=_names(owned), reason=why)
        self._metric("partitions-lost-total", len(owned))
        err = self._invoke("on_partitions_lost", owned)
        self.c._set_group_assignment([])
        return err

    def _on_join_complete(self) -> Exception | None:
        assignment, self._pending_assignment = self._pending_assignment, None
        assert assignment is not None
        self._prepared = False
        assigned = list(dict.fromkeys(assignment.partitions))
        unsubscribed = sorted({tp.topic for tp in assigned} - self.topics)
        if unsubscribed:
            self.request_rejoin(f"assigned topics {unsubscribed} this member is not subscribed to")
        for a in self.assignors:
            if a.name == self.protocol_name:
                if a.name == "sticky":
                    self._sticky_memory = (assigned, self.generation)
                elif a.name == "cooperative-sticky":
                    self._coop_generation = self.generation
        owned = set(self.c._subscriptions.assigned)
        new = set(assigned)
        err = None
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = owned - new
            added = new - owned
            if revoked:
                self._log("consumer_revoked", member=self.member_id, generation=self.generation,
                          partitions=_names(revoked), protocol="COOPERATIVE")  # fmt: skip
                self._metric("partitions-revoked-total", len(revoked))
                err = self._invoke("on_partitions_revoked", revoked)
                self.request_rejoin("partitions were revoked: rejoin so they can be assigned (KIP-429)")
        else:
            added = new
        self.c._set_group_assignment(assigned)
        self._metric("partitions-assigned-total", len(added))
        self._log("consumer_assigned", member=self.member_id, generation=self.generation,
                  partitions=_names(new), added=_names(added), protocol=self.protocol.value)  # fmt: skip
        err = self._invoke("on_partitions_assigned", added) or err
        if self.cfg.enable_auto_commit:
            self._next_auto_commit = self._now() + self.cfg.auto_commit_interval_ms
        return err

    # ------------------------------------------------------------------------ commits (application)
    def maybe_auto_commit_async(self, now: int) -> None:
        if not self.cfg.enable_auto_commit:
            return
        if self._next_auto_commit is None:
            self._next_auto_commit = now + self.cfg.auto_commit_interval_ms
            return
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.cfg.auto_commit_interval_ms
        offsets = self.c.all_consumed()
        if not offsets or (self.subscribed and self.stable_generation() is None):
            return
        self.commit_async(
            offsets, lambda _o, e: e and self._log("consumer_auto_commit_failed", error=repr(e))
        )

    def _new_commit(self, offsets: Mapping[TopicPartition, Any], callback: Any) -> _Commit:
        clean: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if isinstance(om, OffsetAndMetadata):
                pass
            elif hasattr(om, "offset"):
                om = OffsetAndMetadata(om.offset, getattr(om, "metadata", "") or "", _epoch(om))
            else:
                om = OffsetAndMetadata(om)
            if isinstance(om.offset, bool) or not isinstance(om.offset, int) or om.offset < 0:
                raise ValueError(f"invalid offset {om.offset!r} for {tp}: must be an integer >= 0")
            clean[tp] = om
        if self.subscribed and clean:  # nothing to commit needs no generation (Java returns at once)
            gen = self.stable_generation()
            if gen is None:
                if self.rebalance_in_progress() or self.rejoin_needed:
                    raise RebalanceInProgressError(
                        "Offset commit cannot be completed since the consumer is undergoing a rebalance; "
                        "call poll() to complete it, then commit again"
                    )
                raise CommitFailedError()
            return _Commit(clean, callback, gen, self.member_id)
        return _Commit(clean, callback, NO_GENERATION, UNKNOWN_MEMBER_ID)

    def commit_async(self, offsets: Mapping[TopicPartition, Any], callback: Any = None) -> None:
        try:
            commit = self._new_commit(offsets, callback)
        except (RebalanceInProgressError, CommitFailedError) as e:
            if callback is not None:
                failed = e
                self._callbacks.append(lambda: callback(dict(offsets), failed))
            return
        if not commit.offsets:
            if callback is not None:
                self._callbacks.append(lambda: callback({}, None))
            return
        self._commits.append(commit)
        self.c._kick()

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_ms: int) -> None:
        deadline = self._now() + timeout_ms
        while True:
            commit = self._new_commit(offsets, None)
            if not commit.offsets:
                return
            self._commits.append(commit)
            self.c._kick()
            self.c._block(lambda c=commit: c.done, max(0, deadline - self._now()))
            self._run_callbacks()
            if not commit.done:
                self._forget(commit)
                raise RequestTimedOutError(
                    f"Timeout of {timeout_ms}ms expired before the offsets were committed"
                )
            if commit.error is None:
                return
            retriable = (
                isinstance(commit.error, KafkaError) and commit.error.code in self.RETRIABLE_COMMIT_CODES
            )
            if not retriable or self._now() >= deadline:
                raise commit.error
            self.c._block(lambda: False, min(self.cfg.retry_backoff_ms, max(0, deadline - self._now())))

    def _commit_sync_quietly(self, offsets: Mapping[TopicPartition, Any], timeout_ms: int) -> None:
        try:
            self.commit_sync(offsets, timeout_ms)
        except (KafkaError, CommitFailedError, RequestTimedOutError) as e:
            self._log("consumer_auto_commit_failed", member=self.member_id, error=repr(e))

    def _forget(self, commit: _Commit) -> None:
        if commit in self._commits:
            self._commits.remove(commit)

    def committed(self, partitions: list[TopicPartition], timeout_ms: int) -> dict:
        fetch = _Fetch(partitions, user=True)
        self._fetches.append(fetch)
        try:
            self.c._kick()
            self.c._block(lambda: fetch.done, timeout_ms)
        finally:
            if fetch in self._fetches:
                self._fetches.remove(fetch)
        if fetch.error is not None:
            raise fetch.error
        if not fetch.done:
            raise RequestTimedOutError(
                f"Timeout of {timeout_ms}ms expired before the committed offsets came back"
            )
        return {tp: fetch.result.get(tp) for tp in partitions}

    # ------------------------------------------------------------------------ leaving (application)
    def on_leave_prepare(self) -> Exception | None:
        owned = set(self.c._subscriptions.assigned)
        if not self.subscribed or not owned:
            return None
        if self.generation == NO_GENERATION or self.rebalance_in_progress():
            return self._lose(owned, "leaving during a rebalance")
        self._log("consumer_revoked", member=self.member_id, generation=self.generation,
                  partitions=_names(owned), protocol=self.protocol.value, reason="leaving")  # fmt: skip
        self._metric("partitions-revoked-total", len(owned))
        err = self._invoke("on_partitions_revoked", owned)
        self.c._set_group_assignment([])
        return err

    def close(self, timeout_ms: int = CLOSE_TIMEOUT_MS) -> Exception | None:
        """Commit (auto-commit), revoke, leave. Runs the network (the application's close)."""
        if self.cfg.enable_auto_commit and (not self.subscribed or self.stable_generation() is not None):
            self._commit_sync_quietly(self.c.all_consumed(), timeout_ms)
        err = self.on_leave_prepare()
        if self.subscribed and self.maybe_leave_group("the consumer is being closed"):
            self.c._block(lambda: self._leave_answered, self.cfg.request_timeout_ms)
        self.subscribed = False
        return err

    def unsubscribe(self) -> Exception | None:
        err = self.on_leave_prepare()
        self.maybe_leave_group("the consumer unsubscribed from all topics")
        self.subscribed = False
        self.topics = set()
        self.pattern = None
        self._joined_subscription = None
        self._assignment_snapshot = None
        return err

    # =============================================================================== background
    def _wants_coordinator(self) -> bool:
        return bool(
            self.subscribed
            or self._commits
            or self._fetches
            or any(st.committed_fetch for st in self.c._subscriptions.assigned.values())
        )

    def _background_work(self, node: int, now: int, wake: list[int]) -> None:
        """Commits, the committed-offset lookups, and the auto-commit wake-up while ``poll`` blocks."""
        for commit in self._commits:
            if not commit.inflight and not commit.done:
                if commit.retry_at > now:
                    wake.append(commit.retry_at)
                else:
                    self._send_commit(node, commit, now)
        self._maybe_fetch_positions()
        for fetch in self._fetches:
            if not fetch.inflight and not fetch.done:
                if fetch.retry_at > now:
                    wake.append(fetch.retry_at)
                else:
                    self._send_fetch(node, fetch, now)
        if self._next_auto_commit is not None and self.c._polling:
            wake.append(self._next_auto_commit)

    # ------------------------------------------------------------------------ JoinGroup / SyncGroup
    def _metadata(self) -> tuple[JoinGroupProtocol, ...]:
        self._joined_subscription = frozenset(self.topics)  # what a later subscription change compares to
        topics = tuple(sorted(self.topics))
        owned = (
            tuple(self.c._subscriptions.assigned) if self.protocol is RebalanceProtocol.COOPERATIVE else ()
        )
        out = []
        for a in self.assignors:
            user_data: bytes | None = None
            if a.name == "sticky" and self._sticky_memory is not None:
                user_data = encode_sticky_user_data(*self._sticky_memory)
            elif a.name == "cooperative-sticky":
                user_data = encode_cooperative_user_data(self._coop_generation)
            sub = ConsumerSubscription(topics, user_data, owned, self.generation, None)
            out.append(JoinGroupProtocol(name=a.name, metadata=sub.encode()))
        return tuple(out)

    def _note_group_subscription(self, resp: JoinGroupResponse) -> dict[str, ConsumerSubscription]:
        subs: dict[str, ConsumerSubscription] = {}
        for m in resp.members:
            try:
                subs[m.member_id] = ConsumerSubscription.decode(m.metadata)
            except ConsumerProtocolError as e:
                self._log("consumer_bad_subscription", member=m.member_id, error=str(e))
                subs[m.member_id] = ConsumerSubscription(())
        topics = {t for s in subs.values() for t in s.topics} | self.topics
        self._group_subscription = topics
        for t in topics:
            self.c.metadata.add_topic(t)
        return subs

    def _on_leader_elected(self, resp: JoinGroupResponse, now: int) -> None:
        self._note_group_subscription(resp)
        if resp.skip_assignment:  # a static leader rejoining: the coordinator keeps the assignment (KIP-814)
            self._send_sync(now, ())
            return
        missing = [t for t in self._group_subscription if self.c.metadata.topic(t) is None]
        if missing:
            # Kafka's leader waits for fresh metadata when the group subscribes to topics it does not know.
            self.c.metadata.request_update()
            self._leader_wait = (resp, self.c.metadata.version)
            self.c._kick()
            return
        self._perform_assignment(resp, now)

    def _perform_assignment(self, resp: JoinGroupResponse, now: int) -> None:
        if self.state is not MemberState.COMPLETING_REBALANCE or self.generation != resp.generation_id:
            return
        subs_raw = self._note_group_subscription(resp)
        assignor = next((a for a in self.assignors if a.name == resp.protocol_name), None)
        if assignor is None:
            self._fail(
                _error(23, f"the coordinator chose assignor {resp.protocol_name!r}, not configured here")
            )
            return
        subs: dict[str, Subscription] = {}
        instances = {m.member_id: m.group_instance_id for m in resp.members}
        for mid, s in subs_raw.items():
            owned, gen = list(s.owned_partitions), s.generation_id
            if assignor.name == "sticky":
                owned, g = decode_sticky_user_data(s.user_data)
                gen = NO_GENERATION if g is None else g
            elif assignor.name == "cooperative-sticky" and s.version < 2:
                g = decode_cooperative_user_data(s.user_data)
                gen = NO_GENERATION if g is None else g
            subs[mid] = Subscription(s.topics, tuple(owned), gen, instances.get(mid), s.rack_id)
        counts = self._partition_counts(self._group_subscription)
        ppt = {t: n for t, n in counts.items() if n > 0}
        try:
            result = assignor.assign(ppt, subs)
        except Exception as e:  # noqa: BLE001 - a user assignor's bug must not wedge the network loop
            self._fail(KafkaError(f"assignor {assignor.name} failed: {e!r}"))
            return
        self._assignment_snapshot = counts
        assignments = tuple(
            SyncGroupAssignment(
                member_id=mid, assignment=ConsumerAssignment(tuple(result.get(mid, ()))).encode()
            )
            for mid in subs
        )
        self._log("consumer_assignment_computed", member=self.member_id, generation=self.generation,
                  assignor=assignor.name, assignment={m: _names(result.get(m, ())) for m in subs})  # fmt: skip
        self._send_sync(now, assignments)

    def _decode_assignment(self, data: bytes | None) -> ConsumerAssignment:
        return ConsumerAssignment.decode(data) if data else ConsumerAssignment(())

    # ------------------------------------------------------------------------ OffsetCommit
    def _send_commit(self, node: int, commit: _Commit, now: int) -> None:
        req = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id=commit.generation,
            member_id=commit.member_id,
            group_instance_id=self.group_instance_id if commit.generation != NO_GENERATION else None,
            partitions=tuple(
                OffsetCommitPartition(
                    tp=tp,
                    committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    committed_metadata=om.metadata,
                )
                for tp, om in commit.offsets.items()
            ),
        )
        if self.c._send_group(
            node, req, now, lambda r, t: self._on_commit(commit, r, t), self.cfg.request_timeout_ms
        ):
            commit.inflight = True
            self._metric("commit-total")
        else:
            commit.retry_at = now + self.cfg.retry_backoff_ms

    def _on_commit(self, commit: _Commit, resp: Any, now: int) -> None:
        commit.inflight = False
        if resp is None:
            self.mark_coordinator_unknown("OffsetCommit got no answer")
            self._finish_commit(commit, RequestTimedOutError("OffsetCommit got no answer"))
            return
        assert isinstance(resp, OffsetCommitResponse)
        codes = {p.error_code for p in resp.partitions if p.error_code}
        if not codes:
            self._log("consumer_commit", member=commit.member_id, generation=commit.generation,
                      offsets={str(tp): om.offset for tp, om in commit.offsets.items()})  # fmt: skip
            self._finish_commit(commit, None)
            return
        code = min(codes)
        unchanged = commit.generation == self.generation and commit.member_id == self.member_id
        err: Exception
        if code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"OffsetCommit: {_err_name(code)}")
            err = _error(code, "OffsetCommit")
        elif code == _REBALANCING:
            self.request_rejoin("offset commit failed since group is already rebalancing")
            err = RebalanceInProgressError(
                "Offset commit cannot be completed since the consumer group is executing a rebalance; "
                "call poll() to complete it, then commit again"
            )
        elif code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            if not unchanged and self.rebalance_in_progress():
                err = RebalanceInProgressError("Offset commit cannot be completed: this member's generation is "
                                               "stale and it is rejoining; call poll() then commit again")  # fmt: skip
            else:
                if unchanged:
                    self._reset_generation(f"OffsetCommit: {_err_name(code)}",
                                           reset_member_id=code == _UNKNOWN_MEMBER)  # fmt: skip
                err = CommitFailedError()
        elif code == _FENCED:
            err = FencedInstanceIdError("OffsetCommit") if unchanged else CommitFailedError()
        else:
            err = _error(code, "OffsetCommit")
        self._log("consumer_commit_failed", member=commit.member_id, generation=commit.generation,
                  error=_err_name(code))  # fmt: skip
        self._finish_commit(commit, err)

    def _finish_commit(self, commit: _Commit, err: Exception | None) -> None:
        commit.done = True
        commit.error = err
        self._forget(commit)
        if commit.callback is not None:
            cb = commit.callback
            offsets = dict(commit.offsets)
            self._callbacks.append(lambda: cb(offsets, err))

    # ------------------------------------------------------------------------ OffsetFetch
    def _maybe_fetch_positions(self) -> None:
        if any(not f.user for f in self._fetches):
            return
        want = {tp: st.generation for tp, st in self.c._subscriptions.assigned.items() if st.committed_fetch}
        if want:
            self._fetches.append(_Fetch(list(want), user=False, generations=want))

    def _send_fetch(self, node: int, fetch: _Fetch, now: int) -> None:
        req = OffsetFetchRequest(
            group_id=self.group_id, partitions=tuple(fetch.partitions), require_stable=True
        )
        if self.c._send_group(
            node, req, now, lambda r, t: self._on_fetch(fetch, r, t), self.cfg.request_timeout_ms
        ):
            fetch.inflight = True
        else:
            fetch.retry_at = now + self.cfg.retry_backoff_ms

    def _on_fetch(self, fetch: _Fetch, resp: Any, now: int) -> None:
        fetch.inflight = False
        if resp is None:
            self.mark_coordinator_unknown("OffsetFetch got no answer")
            fetch.retry_at = now + self.cfg.retry_backoff_ms
            return
        assert isinstance(resp, OffsetFetchResponse)
        codes = {resp.error_code} | {p.error_code for p in resp.partitions}
        codes.discard(_NONE)
        if codes:
            code = min(codes)
            if code in _COORDINATOR_GONE:
                self.mark_coordinator_unknown(f"OffsetFetch: {_err_name(code)}")
            retriable = code in _COORDINATOR_GONE or code in (_LOADING, 88)  # 88: UNSTABLE_OFFSET_COMMIT
            if retriable:
                fetch.retry_at = now + self.cfg.retry_backoff_ms
                return
            fetch.error = _error(code, "OffsetFetch")
            fetch.done = True
            if not fetch.user:
                self._fetches.remove(fetch)
                self._fail(fetch.error)
            return
        for p in resp.partitions:
            fetch.result[p.tp] = (
                None
                if p.committed_offset < 0
                else OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", _epoch_of(p.committed_leader_epoch)
                )
            )
        fetch.done = True
        if not fetch.user:
            self._fetches.remove(fetch)
            for tp, gen in fetch.generations.items():
                self.c._apply_committed(tp, gen, fetch.result.get(tp))


def _epoch(om: Any) -> int | None:
    e = getattr(om, "leader_epoch", None)
    return None if e is None or e < 0 else e


def _epoch_of(e: int) -> int | None:
    return None if e < 0 else e
