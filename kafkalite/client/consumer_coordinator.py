"""The consumer's side of a consumer group: Kafka's ``ConsumerCoordinator`` (and ``AbstractCoordinator``).

It finds the group coordinator (FindCoordinator to any broker), joins the group (JoinGroup, then SyncGroup),
heartbeats, commits and fetches offsets, and leaves (LeaveGroup). One lives inside each ``Consumer`` that
has a ``group.id``; it sends through the consumer's connections.

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

from kafkalite.client.assignors import Subscription
from kafkalite.client.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkalite.protocol import INTERNAL_TOPICS, TopicPartition
from kafkalite.protocol.api import CoordinatorType
from kafkalite.protocol.group import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
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

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000  # Kafka's AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE
CLOSE_TIMEOUT_MS = 30_000  # KafkaConsumer.close()'s default timeout

_NONE = 0
_UNKNOWN_MEMBER = UnknownMemberIdError.code
_ILLEGAL_GENERATION = IllegalGenerationError.code
_REBALANCING = RebalanceInProgressError.code
_FENCED = FencedInstanceIdError.code
_MEMBER_ID_REQUIRED = MemberIdRequiredError.code
_LOADING = CoordinatorLoadInProgressError.code
_COORDINATOR_GONE = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})
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


class MemberState(Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


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


class ConsumerCoordinator:
    """The group membership of one ``Consumer``. See the module docstring."""

    def __init__(self, consumer: Consumer) -> None:
        cfg = consumer.config
        assert cfg.group_id is not None
        self.c = consumer
        self.group_id: str = cfg.group_id
        self.group_instance_id = cfg.group_instance_id
        self.assignors = list(cfg.assignors)
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
        # membership
        self.coordinator: int | None = None
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.member_id = UNKNOWN_MEMBER_ID
        self.protocol_name: str | None = None
        self.leader_id = ""
        # subscription (subscribe() mode)
        self.subscribed = False
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._joined_subscription: frozenset[str] | None = None
        self._group_subscription: set[str] = set()
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self._prepared = False  # on_join_prepare ran: JoinGroup/SyncGroup may go out
        self._join_inflight = False
        self._sync_inflight = False
        self._join_retry_at = 0
        self._pending_assignment: ConsumerAssignment | None = None
        self._leader_wait: tuple[JoinGroupResponse, int] | None = None  # waiting for metadata
        self._assignment_snapshot: dict[str, int] | None = None
        self._sticky_memory: tuple[list[TopicPartition], int] | None = None
        self._coop_generation = NO_GENERATION
        # coordinator discovery
        self._find_inflight = False
        self._find_retry_at = 0
        # heartbeats
        self._hb_inflight = False
        self._next_hb = 0
        self._last_hb_recv = 0
        self._last_poll = 0
        # offsets
        self._commits: list[_Commit] = []
        self._fetches: list[_Fetch] = []
        self._callbacks: list[Callable[[], None]] = []
        self._next_auto_commit: int | None = None
        self.fatal: Exception | None = None
        self._leave_answered = True

    # =============================================================================== small helpers
    @property
    def cfg(self) -> Any:
        return self.c.config

    def _now(self) -> int:
        return self.c.net._now

    def _log(self, event: str, **fields: Any) -> None:
        self.c.log(event, group=self.group_id, **fields)

    def _metric(self, key: str, n: int = 1) -> None:
        m = self.c._metrics
        m[key] = m.get(key, 0) + n

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.group_instance_id)

    def stable_generation(self) -> int | None:
        return self.generation if self.state is MemberState.STABLE else None

    def rebalance_in_progress(self) -> bool:
        return self._prepared or self.state in (
            MemberState.PREPARING_REBALANCE,
            MemberState.COMPLETING_REBALANCE,
        )

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            self.rejoin_needed = True
            self.rejoin_reason = reason
            self._log("consumer_rebalance_requested", member=self.member_id, reason=reason)

    def mark_coordinator_unknown(self, why: str) -> None:
        if self.coordinator is None:
            return
        old, self.coordinator = self.coordinator, None
        self._log("consumer_coordinator_lost", broker=old, reason=why)
        self.c._fail_group_requests(old)

    def _reset_generation(self, why: str, reset_member_id: bool) -> None:
        self._log("consumer_generation_reset", member=self.member_id, generation=self.generation, reason=why)
        self.generation = NO_GENERATION
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        self._prepared = False  # run on_join_prepare again: it reports the partitions as lost
        self._pending_assignment = None
        self._leader_wait = None
        self.rejoin_needed = True
        self.rejoin_reason = why

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
        owned = set(self.c._assigned)
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
                self.c._set_group_assignment([tp for tp in self.c._assigned if tp not in gone])
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
        owned = set(self.c._assigned)
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
            retriable = isinstance(commit.error, KafkaError) and commit.error.code in _RETRIABLE_COMMIT
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
        owned = set(self.c._assigned)
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

    def maybe_leave_group(self, reason: str) -> bool:
        """LeaveGroup for a dynamic member that is in the group; a static member only forgets its
        generation (KIP-345: its instance id keeps its place until the session times out). True if sent."""
        sent = False
        if (
            self.group_instance_id is None
            and self.coordinator is not None
            and self.state is not MemberState.UNJOINED
            and self.member_id != UNKNOWN_MEMBER_ID
        ):
            req = LeaveGroupRequest(
                group_id=self.group_id, members=(MemberIdentity(member_id=self.member_id, reason=reason),)
            )
            sent = self.c._send_group(
                self.coordinator, req, self._now(), self._on_leave, self.cfg.request_timeout_ms
            )
            self._log("consumer_left", member=self.member_id, generation=self.generation, reason=reason)
        self._reset_generation(f"left the group: {reason}", reset_member_id=True)
        self._leave_answered = not sent
        return sent

    def _on_leave(self, resp: Any, now: int) -> None:
        self._leave_answered = True

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
    def run(self, now: int, wake: list[int]) -> None:
        """Everything the heartbeat thread and the network callbacks do; called from the consumer's loop."""
        if self.fatal is not None:
            return
        if self.coordinator is None:
            if self._wants_coordinator():
                self._find_coordinator(now, wake)
            return
        node = self.coordinator
        joining = self._join_inflight or self._sync_inflight or self._leader_wait
        if self._prepared and not joining and self._pending_assignment is None:
            if now >= self._join_retry_at:
                self._send_join(node, now)
            else:
                wake.append(self._join_retry_at)
        if self._leader_wait is not None:
            resp, version = self._leader_wait
            if self.c.metadata.version > version and not self.c.metadata.need_update:
                self._leader_wait = None
                self._perform_assignment(resp, now)
        self._heartbeat(node, now, wake)
        if self.coordinator is None:
            return
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

    def _wants_coordinator(self) -> bool:
        return bool(
            self.subscribed
            or self._commits
            or self._fetches
            or any(st.committed_fetch for st in self.c._assigned.values())
        )

    # ------------------------------------------------------------------------ FindCoordinator
    def _find_target(self, now: int) -> int | None:
        """The broker to ask: Kafka picks the least loaded node; the first one not backing off here."""
        nodes = list(self.c.metadata.nodes())
        rng = self.c._rng
        start = rng.randrange(len(nodes)) if rng is not None else 0
        for node in nodes[start:] + nodes[:start]:
            if self.c._node_backoff.get(node, 0) <= now:
                return node
        return None

    def _find_coordinator(self, now: int, wake: list[int]) -> None:
        if self._find_inflight:
            return
        if now < self._find_retry_at:
            wake.append(self._find_retry_at)
            return
        node = self._find_target(now)
        if node is None:
            self._find_retry_at = now + self.cfg.retry_backoff_ms
            wake.append(self._find_retry_at)
            return
        req = FindCoordinatorRequest(key=self.group_id, key_type=CoordinatorType.GROUP)
        if self.c._send_group(node, req, now, self._on_find, self.cfg.request_timeout_ms):
            self._find_inflight = True
        else:
            self._find_retry_at = now + self.cfg.retry_backoff_ms
            wake.append(self._find_retry_at)

    def _on_find(self, resp: Any, now: int) -> None:
        self._find_inflight = False
        if isinstance(resp, FindCoordinatorResponse) and resp.error_code == _NONE and resp.node_id >= 0:
            self.coordinator = resp.node_id
            self.c._node_backoff.pop(resp.node_id, None)
            self._log("consumer_coordinator", broker=resp.node_id, member=self.member_id)
            # The client-side session clock restarts with a new coordinator (Kafka resets it too).
            self._last_hb_recv = now
            return
        code = getattr(resp, "error_code", None)
        self._find_retry_at = now + self.cfg.retry_backoff_ms
        self._log("consumer_coordinator_not_found", error=code)

    # ------------------------------------------------------------------------ JoinGroup / SyncGroup
    def _metadata(self) -> tuple[JoinGroupProtocol, ...]:
        topics = tuple(sorted(self.topics))
        owned = tuple(self.c._assigned) if self.protocol is RebalanceProtocol.COOPERATIVE else ()
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

    def _send_join(self, node: int, now: int) -> None:
        self._joined_subscription = frozenset(self.topics)
        req = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.cfg.session_timeout_ms,
            rebalance_timeout_ms=self.cfg.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=self._metadata(),
            reason=self.rejoin_reason,
        )
        timeout = max(
            self.cfg.request_timeout_ms, self.cfg.max_poll_interval_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS
        )
        if self.c._send_group(node, req, now, self._on_join, timeout):
            self._join_inflight = True
            self.state = MemberState.PREPARING_REBALANCE
        else:
            self._join_retry_at = now + self.cfg.retry_backoff_ms

    def _on_join(self, resp: Any, now: int) -> None:
        self._join_inflight = False
        if resp is None:
            self.mark_coordinator_unknown("JoinGroup got no answer")
            return
        assert isinstance(resp, JoinGroupResponse)
        code = resp.error_code
        if self.state is not MemberState.PREPARING_REBALANCE:
            return  # left the group (poll timeout, close) while the join waited
        if code == _NONE:
            if resp.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE):
                self._fail(error_for_code(23)(f"protocol type {resp.protocol_type!r} is not 'consumer'"))  # type: ignore[misc]
                return
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol_name = resp.protocol_name
            self.leader_id = resp.leader
            self.state = MemberState.COMPLETING_REBALANCE
            self._metric("join-total")
            self._log("consumer_joined", member=self.member_id, generation=self.generation,
                      leader=resp.leader == self.member_id, assignor=resp.protocol_name,
                      members=len(resp.members))  # fmt: skip
            # Heartbeats may go while the sync is under way; the session clock starts now.
            self._last_hb_recv = now
            self._next_hb = now + self.cfg.heartbeat_interval_ms
            if resp.leader == self.member_id and not resp.skip_assignment:
                self._on_leader_elected(resp, now)
            else:
                if resp.leader == self.member_id:
                    self._note_group_subscription(resp)
                self._send_sync(now, ())
            return
        self.state = MemberState.UNJOINED
        if code == _MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            self._join_retry_at = 0
        elif code == _UNKNOWN_MEMBER:
            self.member_id = UNKNOWN_MEMBER_ID
            self.generation = NO_GENERATION
            self._join_retry_at = 0
        elif code in (_LOADING, _REBALANCING):
            self._join_retry_at = now + self.cfg.retry_backoff_ms
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"JoinGroup: {_err_name(code)}")
        else:
            self._fail(_error(code, f"JoinGroup for group {self.group_id} failed"))
        self.c._kick()

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

    def _send_sync(self, now: int, assignments: tuple[SyncGroupAssignment, ...]) -> None:
        if self.coordinator is None:
            self.state = MemberState.UNJOINED
            return
        req = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        if self.c._send_group(self.coordinator, req, now, self._on_sync, self.cfg.request_timeout_ms):
            self._sync_inflight = True
        else:
            self.state = MemberState.UNJOINED
            self._join_retry_at = now + self.cfg.retry_backoff_ms

    def _on_sync(self, resp: Any, now: int) -> None:
        self._sync_inflight = False
        if self.state is not MemberState.COMPLETING_REBALANCE:
            return
        if resp is None:
            self.state = MemberState.UNJOINED
            self.mark_coordinator_unknown("SyncGroup got no answer")
            return
        assert isinstance(resp, SyncGroupResponse)
        code = resp.error_code
        if code == _NONE:
            try:
                assignment = (
                    ConsumerAssignment.decode(resp.assignment) if resp.assignment else ConsumerAssignment(())
                )
            except ConsumerProtocolError as e:
                self._fail(KafkaError(f"undecodable assignment: {e}"))
                return
            self.state = MemberState.STABLE
            self._pending_assignment = assignment
            self._last_hb_recv = now
            self._next_hb = now + self.cfg.heartbeat_interval_ms
            self._log("consumer_synced", member=self.member_id, generation=self.generation,
                      partitions=_names(assignment.partitions))  # fmt: skip
            return
        self.state = MemberState.UNJOINED
        if code == _REBALANCING:
            self._join_retry_at = 0  # rejoin at once, same generation (still prepared)
        elif code in (_UNKNOWN_MEMBER, _ILLEGAL_GENERATION):
            self._reset_generation(f"SyncGroup: {_err_name(code)}", reset_member_id=code == _UNKNOWN_MEMBER)
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"SyncGroup: {_err_name(code)}")
        else:
            self._fail(_error(code, f"SyncGroup for group {self.group_id} failed"))
        self.c._kick()

    # ------------------------------------------------------------------------ heartbeats
    def _heartbeat(self, node: int, now: int, wake: list[int]) -> None:
        if self.state not in (MemberState.STABLE, MemberState.COMPLETING_REBALANCE):
            return
        cfg = self.cfg
        if self.c._polling:
            self._last_poll = now  # a poll blocked in the network counts as polling (Kafka's poll loop)
        if now - self._last_poll > cfg.max_poll_interval_ms and self.subscribed:
            self._log("consumer_poll_timeout", member=self.member_id, generation=self.generation,
                      last_poll_ms=self._last_poll, max_poll_interval_ms=cfg.max_poll_interval_ms)  # fmt: skip
            self.maybe_leave_group(
                "consumer poll timeout has expired: the time between poll() calls exceeded max.poll.interval.ms"
            )
            return
        if now - self._last_hb_recv > cfg.session_timeout_ms:
            self.mark_coordinator_unknown("no heartbeat answer within session.timeout.ms")
            return
        wake.append(self._last_poll + cfg.max_poll_interval_ms + 1)
        wake.append(self._last_hb_recv + cfg.session_timeout_ms + 1)
        if self._hb_inflight:
            return
        if now >= self._next_hb:
            req = HeartbeatRequest(
                group_id=self.group_id,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.group_instance_id,
            )
            gen, mid = self.generation, self.member_id
            if self.c._send_group(node, req, now, lambda r, t: self._on_heartbeat(r, t, gen, mid),
                                  cfg.request_timeout_ms):  # fmt: skip
                self._hb_inflight = True
                self._metric("heartbeat-total")
            self._next_hb = now + cfg.heartbeat_interval_ms
        wake.append(self._next_hb)

    def _on_heartbeat(self, resp: Any, now: int, gen: int, mid: str) -> None:
        self._hb_inflight = False
        if resp is None:
            self.mark_coordinator_unknown("heartbeat got no answer")
            return
        code = resp.error_code
        unchanged = gen == self.generation and mid == self.member_id
        if code == _NONE:
            self._last_hb_recv = now
        elif code == _REBALANCING:
            self._last_hb_recv = now
            if self.state is MemberState.STABLE and unchanged and not self._prepared:
                self.request_rejoin("group is rebalancing (heartbeat answered REBALANCE_IN_PROGRESS)")
        elif code in (_ILLEGAL_GENERATION, _UNKNOWN_MEMBER):
            if unchanged:
                self._reset_generation(
                    f"heartbeat: {_err_name(code)}", reset_member_id=code == _UNKNOWN_MEMBER
                )
        elif code == _FENCED:
            if unchanged:
                self._fail(FencedInstanceIdError(f"group.instance.id {self.group_instance_id} was fenced by "
                                                 "a newer member with the same instance id"))  # fmt: skip
        elif code in _COORDINATOR_GONE:
            self.mark_coordinator_unknown(f"heartbeat: {_err_name(code)}")
        else:
            self._fail(_error(code, "heartbeat failed"))
        self.c._kick()

    def _fail(self, err: Exception) -> None:
        self._log("consumer_fatal", member=self.member_id, error=repr(err))
        self.fatal = err

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
        want = {tp: st.generation for tp, st in self.c._assigned.items() if st.committed_fetch}
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


def _names(tps: Iterable[TopicPartition]) -> list[str]:
    return sorted(str(tp) for tp in tps)


def _epoch(om: Any) -> int | None:
    e = getattr(om, "leader_epoch", None)
    return None if e is None or e < 0 else e


def _epoch_of(e: int) -> int | None:
    return None if e < 0 else e


def _err_name(code: int) -> str:
    cls = error_for_code(code)
    return cls.name if cls is not None and cls is not KafkaError else str(code)


def _error(code: int, what: str) -> KafkaError:
    cls = error_for_code(code) or KafkaError
    return cls(what)
