"""The consumer's side of KIP-848's consumer group protocol (``group.protocol=consumer``): Kafka's
``ConsumerMembershipManager`` with its ``ConsumerHeartbeatRequestManager``.

There is no JoinGroup, SyncGroup or leader: one ConsumerGroupHeartbeat, sent every
``heartbeat_interval_ms`` the broker gives, carries the member's subscription and the partitions it owns;
the answer carries its member epoch and, when it changed, its *target* assignment, computed on the broker
(``group.remote.assignor``, or the broker's first ``group.consumer.assignors``).

**Reconciliation** runs on the application's side (inside ``poll``), as the callbacks must: the member
compares the target with what it owns and

1. for the partitions the target no longer has: auto-commits (``enable.auto.commit``), calls the listener's
   ``on_partitions_revoked`` and stops consuming them;
2. takes the partitions that are new in the target (positions from the committed offsets) and calls
   ``on_partitions_assigned`` with them;
3. acknowledges: the next heartbeat goes at once and reports the new owned set, which is what lets the
   coordinator hand the revoked partitions to their next owner.

Only the partitions that move stop; every other partition keeps being consumed, and the broker never gives a
partition to a member while another one still reports owning it.

**Errors**, as Kafka's client handles them: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID -> the member's
partitions are lost (``on_partitions_lost``) and it rejoins with epoch 0, keeping its member id;
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / no answer -> find the coordinator again, then send every field;
COORDINATOR_LOAD_IN_PROGRESS -> retry after ``retry.backoff.ms``; anything else (GROUP_ID_NOT_FOUND even to a
member with an epoch, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED,
INVALID_REQUEST, ...) is fatal: the member goes FATAL for good (no heartbeat, no rejoin, no leave), its
partitions are lost, and the next ``poll`` raises the error. Leaving sends epoch -1; a static member (``group.instance.id``) sends -2 so the broker
keeps its partitions until its session expires. A member whose application stops polling for
``max.poll.interval.ms`` leaves (epoch -1) and rejoins at its next ``poll``, its partitions lost.

Commits and committed-offset lookups are the classic consumer's (``ConsumerCoordinator``, which this
subclasses; Kafka's new consumer has them in ``CommitRequestManager``), with the member epoch as the
OffsetCommit generation: STALE_MEMBER_EPOCH is retried with the current epoch.

Events in the network log: ``consumer_heartbeat`` (epoch changes), ``consumer_target`` (a new target),
``consumer_revoked``, ``consumer_assigned``, ``consumer_lost``, ``consumer_fenced``, ``consumer_left``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from kafkalite.client.abstract_coordinator import _COORDINATOR_GONE, _LOADING, _err_name, _error, _names
from kafkalite.client.consumer_coordinator import (
    _RETRIABLE_COMMIT,
    ConsumerCoordinator,
    ConsumerGroupMetadata,
)
from kafkalite.errors import (
    FencedMemberEpochError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)

if TYPE_CHECKING:
    import uuid

    from kafkalite.client.consumer import Consumer

__all__ = ["ConsumerMembershipManager", "MemberState"]

_FENCED_EPOCH = FencedMemberEpochError.code
_UNKNOWN_MEMBER = UnknownMemberIdError.code
_STALE_EPOCH = StaleMemberEpochError.code
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000  # until the broker's first answer says otherwise


class MemberState(Enum):
    """Kafka's ``MemberState`` of the new consumer."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"
    """A heartbeat got an error the member cannot recover from: it sends nothing more to the group."""


class ConsumerMembershipManager(ConsumerCoordinator):
    """The group membership of one ``Consumer`` under ``group.protocol=consumer``. See the module
    docstring; the consumer talks to it through the same methods as to a ``ConsumerCoordinator``."""

    RETRIABLE_COMMIT_CODES = _RETRIABLE_COMMIT | {_STALE_EPOCH}

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(consumer)
        self.state = MemberState.UNSUBSCRIBED  # type: ignore[assignment]
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.server_assignor: str | None = consumer.config.group_remote_assignor
        self.heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        self.rejoin_needed = False
        self._target: frozenset[TopicPartition] | None = None
        """The latest assignment the broker sent (names resolved), until reconciled."""
        self._unresolved: tuple[ConsumerGroupTopicPartitions, ...] = ()
        self._sent: dict[str, Any] = {}
        """Fields the broker already has, so a heartbeat carries only what changed (Kafka's sentFields)."""
        self._lost_pending = False
        self.regex: str | None = None
        """A ``SubscriptionPattern`` the broker resolves (None: ``topics`` are the subscription)."""

    # =============================================================================== what the consumer asks
    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.group_instance_id)

    def stable_generation(self) -> int | None:
        # The new consumer commits with its current epoch in any state the broker knows it by.
        if self.member_epoch > 0 and self.state in (
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
        ):
            return self.member_epoch
        return None

    def rebalance_in_progress(self) -> bool:
        return self.state in (MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING)

    def request_rejoin(self, reason: str) -> None:
        # Kafka's new consumer has no client-triggered rebalance: the broker decides (enforceRebalance is a
        # no-op under group.protocol=consumer).
        self._log("consumer_rebalance_ignored", member=self.member_id, reason=reason)

    def subscribe(self, topics: set[str] | None, pattern: re.Pattern[str] | None, listener: Any) -> None:
        self.regex = None
        super().subscribe(topics, pattern, listener)
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE) and self.fatal is None:
            self._transition_to_joining("subscribe")

    def subscribe_regex(self, regex: str, listener: Any) -> None:
        """Subscribe with a broker-side regex (``SubscribedTopicRegex``, ConsumerGroupHeartbeat v1)."""
        self.subscribed = True
        self.regex = regex
        self.pattern = None
        self.topics = set()
        if listener is not None:
            self.listener = listener
        self.c.metadata.request_update()
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE) and self.fatal is None:
            self._transition_to_joining("subscribe")

    def wants_all_topics(self) -> bool:
        # The broker may assign any topic the regex matches: the member must be able to name them all.
        return self.subscribed and (self.pattern is not None or self.regex is not None)

    def on_metadata_update(self) -> None:
        if self.subscribed and self.pattern is not None:
            topics = self._pattern_topics()
            if topics != self.topics:
                self._log("consumer_subscription_changed", topics=sorted(topics))
                self.topics = topics  # the next heartbeat carries the new names
        if self._unresolved:
            self._take_target(self._unresolved)

    def needs_app(self, now: int) -> bool:
        if self.fatal is not None or self._callbacks or self._lost_pending:
            return True
        if self.state is MemberState.STALE and self.subscribed:
            return True
        if self.state is MemberState.RECONCILING and self._target is not None:
            return True
        return self._next_auto_commit is not None and now >= self._next_auto_commit

    def poll_app(self, now: int) -> None:
        """The application's part of ``poll``: lost partitions, reconciliation, auto-commit."""
        self._last_poll = now
        self._run_callbacks()
        if self.fatal is not None:
            err, self.fatal = self.fatal, None
            if self._lost_pending:
                self._release_lost()  # a fatal member's partitions are lost before its error is raised
            raise err
        err = None
        if self._lost_pending:
            err = self._release_lost()
        if self.state is MemberState.STALE and self.subscribed:
            self._transition_to_joining("the application polled again after max.poll.interval.ms")
        if self.state is MemberState.RECONCILING and self._target is not None:
            err = self._reconcile() or err
        self.maybe_auto_commit_async(self._now())
        self.c._kick()
        if err is not None:
            raise err

    # =============================================================================== reconciliation
    def _reconcile(self) -> Exception | None:
        """Kafka's ``maybeReconcile``: revoke what the target dropped, then take what it added, then ack."""
        target, self._target = self._target, None
        assert target is not None
        owned = set(self.c._subscriptions.assigned)
        revoked = owned - target
        added = set(target) - owned
        err = None
        self._metric("rebalance-total")
        if revoked:
            if self.cfg.enable_auto_commit:
                # What was consumed from a partition must be committed before another member starts it.
                self._commit_sync_quietly(self.c.all_consumed(), min(self.cfg.max_poll_interval_ms,
                                                                      self.cfg.default_api_timeout_ms))  # fmt: skip
            self._log("consumer_revoked", member=self.member_id, generation=self.member_epoch,
                      partitions=_names(revoked), protocol="CONSUMER")  # fmt: skip
            self._metric("partitions-revoked-total", len(revoked))
            err = self._invoke("on_partitions_revoked", revoked)
            self.c._set_group_assignment([tp for tp in self.c._subscriptions.assigned if tp not in revoked])
        if self.state is not MemberState.RECONCILING:
            return err  # fenced or left while the callback ran: the acknowledgement is moot
        kept = [tp for tp in self.c._subscriptions.assigned if tp in target]
        self.c._set_group_assignment(kept + sorted(added))
        self._metric("partitions-assigned-total", len(added))
        self._log("consumer_assigned", member=self.member_id, generation=self.member_epoch,
                  partitions=_names(target), added=_names(added), protocol="CONSUMER")  # fmt: skip
        err = self._invoke("on_partitions_assigned", added) or err
        if self.cfg.enable_auto_commit:
            self._next_auto_commit = self._now() + self.cfg.auto_commit_interval_ms
        if self.state is MemberState.RECONCILING:
            self.state = MemberState.ACKNOWLEDGING  # type: ignore[assignment]
        return err

    def _take_target(self, assignment: tuple[ConsumerGroupTopicPartitions, ...]) -> None:
        meta = self.c.metadata
        names = {meta.topic_id(t): t for t in (*meta.topics, *self.topics)}
        missing = [tp.topic_id for tp in assignment if tp.topic_id not in names]
        if missing:
            # Kafka's member waits until the metadata names every assigned topic id.
            self._unresolved = assignment
            self.c.metadata.request_update()
            return
        self._unresolved = ()
        target = frozenset(TopicPartition(names[tp.topic_id], p) for tp in assignment for p in tp.partitions)
        self._log(
            "consumer_target", member=self.member_id, epoch=self.member_epoch, partitions=_names(target)
        )
        if target == set(self.c._subscriptions.assigned) and self._target is None:
            if self.state in (MemberState.JOINING, MemberState.RECONCILING):
                self.state = MemberState.STABLE  # type: ignore[assignment]
            return
        self._target = target
        self.state = MemberState.RECONCILING  # type: ignore[assignment]

    # =============================================================================== state changes
    def _transition_to_joining(self, why: str) -> None:
        self.state = MemberState.JOINING  # type: ignore[assignment]
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.generation = -1
        self._sent = {}
        self._target = None
        self._unresolved = ()
        self._next_hb = 0
        self._log("consumer_joining", member=self.member_id, reason=why)

    def _fence(self, why: str) -> None:
        """Kafka's ``transitionToFenced``: the partitions are lost, then the member rejoins with epoch 0."""
        if self.state in (MemberState.LEAVING, MemberState.UNSUBSCRIBED):
            self.state = MemberState.UNSUBSCRIBED  # type: ignore[assignment]
            return
        self._log("consumer_fenced", member=self.member_id, epoch=self.member_epoch, reason=why)
        self.state = MemberState.FENCED  # type: ignore[assignment]
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.generation = -1
        self._target = None
        self._lost_pending = True

    def _release_lost(self) -> Exception | None:
        self._lost_pending = False
        owned = set(self.c._subscriptions.assigned)
        err = self._lose(owned, "fenced") if owned else None
        if self.state is MemberState.FENCED:
            self._transition_to_joining("fenced: rejoin with epoch 0")
        return err

    def _reset_generation(self, why: str, reset_member_id: bool) -> None:
        # A commit answered UNKNOWN_MEMBER_ID: the broker no longer has this member.
        self._fence(why)

    def on_leave_prepare(self) -> Exception | None:
        owned = set(self.c._subscriptions.assigned)
        if not self.subscribed or not owned:
            return None
        if self.state in (MemberState.FENCED, MemberState.STALE) or self._lost_pending:
            self._lost_pending = False
            return self._lose(owned, "leaving after being fenced")
        # Still a member (even mid-reconciliation): what it owns is its own to revoke, as Kafka's does.
        self._log("consumer_revoked", member=self.member_id, generation=self.member_epoch,
                  partitions=_names(owned), protocol="CONSUMER", reason="leaving")  # fmt: skip
        self._metric("partitions-revoked-total", len(owned))
        err = self._invoke("on_partitions_revoked", owned)
        self.c._set_group_assignment([])
        return err

    def maybe_leave_group(self, reason: str) -> bool:
        """Heartbeat with epoch -1 (a static member: -2, keeping its place until its session expires)."""
        if self.state is MemberState.FATAL:
            return False  # a fatal member sends nothing, not even its leave (as Kafka's)
        in_group = self.member_epoch > 0 and self.state not in (MemberState.UNSUBSCRIBED, MemberState.FENCED)
        epoch = (
            LEAVE_GROUP_STATIC_MEMBER_EPOCH
            if self.group_instance_id is not None
            else LEAVE_GROUP_MEMBER_EPOCH
        )
        sent = False
        if in_group and self.coordinator is not None:
            req = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=epoch,
                instance_id=self.group_instance_id,
            )
            sent = self.c._send_group(
                self.coordinator, req, self._now(), self._on_leave, self.cfg.request_timeout_ms
            )
            self._log("consumer_left", member=self.member_id, generation=self.member_epoch, epoch=epoch,
                      reason=reason)  # fmt: skip
        self.state = MemberState.UNSUBSCRIBED  # type: ignore[assignment]
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.generation = -1
        self._target = None
        self._unresolved = ()
        self._sent = {}
        self._leave_answered = not sent
        return sent

    def unsubscribe(self) -> Exception | None:
        err = super().unsubscribe()
        self.regex = None
        if self.state is not MemberState.FATAL:  # FATAL is for good
            self.state = MemberState.UNSUBSCRIBED  # type: ignore[assignment]
        return err

    # =============================================================================== background
    def run(self, now: int, wake: list[int]) -> None:
        if self.fatal is not None:
            return
        if self.coordinator is None:
            if self._wants_coordinator():
                self._find_coordinator(now, wake)
            return
        node = self.coordinator
        self._heartbeat_cg(node, now, wake)
        if self.coordinator is None:
            return
        self._background_work(node, now, wake)

    def _heartbeat_cg(self, node: int, now: int, wake: list[int]) -> None:
        if self.state not in (
            MemberState.JOINING,
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
        ):
            return
        if self.c._polling:
            self._last_poll = now
        if now - self._last_poll > self.cfg.max_poll_interval_ms and self.member_epoch > 0:
            self._log("consumer_poll_timeout", member=self.member_id, epoch=self.member_epoch,
                      last_poll_ms=self._last_poll, max_poll_interval_ms=self.cfg.max_poll_interval_ms)  # fmt: skip
            # Kafka's member leaves with epoch -1 (even a static one) and goes STALE until the next poll.
            req = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                instance_id=self.group_instance_id,
            )  # fmt: skip
            self.c._send_group(node, req, now, self._on_leave, self.cfg.request_timeout_ms)
            self.state = MemberState.STALE  # type: ignore[assignment]
            self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
            self.generation = -1
            self._lost_pending = True
            return
        if self.member_epoch > 0:
            wake.append(self._last_poll + self.cfg.max_poll_interval_ms + 1)
        if self._hb_inflight:
            return
        urgent = self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING)
        if urgent or now >= self._next_hb:
            self._send_heartbeat(node, now)
        wake.append(self._next_hb)

    def _request(self) -> tuple[ConsumerGroupHeartbeatRequest, dict[str, Any]]:
        """Only what changed since the broker last heard it (everything when joining)."""
        joining = self.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if joining:
            self._sent = {}
        sent = self._sent
        fields: dict[str, Any] = {}
        names = () if self.regex is not None else tuple(sorted(self.topics))
        if sent.get("names") != names:
            fields["subscribed_topic_names"] = names
        regex = self.regex if self.regex is not None else ("" if sent.get("regex") else None)
        if regex is not None and sent.get("regex", None) != self.regex:
            fields["subscribed_topic_regex"] = regex  # "" drops a regex the broker still has
        if joining or sent.get("rebalance_timeout_ms") != self.cfg.max_poll_interval_ms:
            fields["rebalance_timeout_ms"] = self.cfg.max_poll_interval_ms
        if self.server_assignor is not None and sent.get("server_assignor") != self.server_assignor:
            fields["server_assignor"] = self.server_assignor
        owned = () if joining else tuple(sorted(self.c._subscriptions.assigned))
        if joining or sent.get("owned") != owned:
            fields["topic_partitions"] = _by_topic_id(owned, self.c.metadata.topic_id)
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.group_instance_id,
            **fields,
        )
        now_sent = {"names": names, "regex": self.regex, "rebalance_timeout_ms": self.cfg.max_poll_interval_ms,
                    "server_assignor": self.server_assignor, "owned": owned}  # fmt: skip
        return req, now_sent

    def _send_heartbeat(self, node: int, now: int) -> None:
        req, fields = self._request()
        epoch, mid = self.member_epoch, self.member_id
        if self.c._send_group(
            node, req, now, lambda r, t: self._on_heartbeat_cg(r, t, epoch, mid, fields),
            self.cfg.request_timeout_ms,
        ):  # fmt: skip
            self._hb_inflight = True
            self._metric("heartbeat-total")
            if self.state is MemberState.ACKNOWLEDGING:
                self.state = MemberState.STABLE  # type: ignore[assignment]  # unless the answer says otherwise
        else:
            # No connection to the coordinator (it is down): find it again, as Kafka's client does when the
            # request fails; the next heartbeat then sends every field.
            self._sent = {}
            self.mark_coordinator_unknown("heartbeat could not be sent")
        self._next_hb = now + self.heartbeat_interval_ms

    def _on_heartbeat_cg(self, resp: Any, now: int, epoch: int, mid: str, fields: dict[str, Any]) -> None:
        self._hb_inflight = False
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEAVING, MemberState.STALE):
            return  # left while it was in flight
        if resp is None:
            self._sent = {}
            self.mark_coordinator_unknown("heartbeat got no answer")
            return
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        code = resp.error_code
        if code == 0:
            self._sent = fields
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            # As Kafka's heartbeat timer: the interval the broker gives counts from this answer (the
            # first request went out before the member knew it).
            self._next_hb = now + self.heartbeat_interval_ms
            if resp.member_id:
                self.member_id = resp.member_id
            if resp.member_epoch != self.member_epoch:
                self._log("consumer_heartbeat", member=self.member_id, epoch=resp.member_epoch,
                          previous=self.member_epoch)  # fmt: skip
            self.member_epoch = resp.member_epoch
            self.generation = resp.member_epoch
            if self.state is MemberState.FENCED:
                return
            if resp.assignment is not None:
                self._take_target(resp.assignment.topic_partitions)
            elif self.state is MemberState.JOINING:
                self.state = MemberState.STABLE  # type: ignore[assignment]
        elif code in (_FENCED_EPOCH, _UNKNOWN_MEMBER):
            if epoch == self.member_epoch and mid == self.member_id:
                self._sent = {}
                self._fence(f"heartbeat: {_err_name(code)}")
        elif code in _COORDINATOR_GONE:
            self._sent = {}
            self.mark_coordinator_unknown(f"heartbeat: {_err_name(code)}")
        elif code == _LOADING:
            self._sent = {}
            self._next_hb = now + self.cfg.retry_backoff_ms
        else:
            self._transition_to_fatal(_error(code, f"ConsumerGroupHeartbeat for group {self.group_id} "
                                             f"failed: {resp.error_message or _err_name(code)}"))  # fmt: skip
        self.c._kick()

    def _transition_to_fatal(self, err: Exception) -> None:
        """Kafka's ``transitionToFatal``: no more heartbeats, joins or leaves; what the member owned is lost
        (``on_partitions_lost`` at the next ``poll``, which then raises ``err``)."""
        previous = self.state
        self._fail(err)
        self.state = MemberState.FATAL  # type: ignore[assignment]
        self._target = None
        self._unresolved = ()
        if previous not in (MemberState.UNSUBSCRIBED, MemberState.LEAVING):
            self._lost_pending = True


def _by_topic_id(
    partitions: tuple[TopicPartition, ...], topic_id: Callable[[str], uuid.UUID]
) -> tuple[ConsumerGroupTopicPartitions, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(topic_id(tp.topic), []).append(tp.partition)
    return tuple(
        ConsumerGroupTopicPartitions(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in by_topic.items()
    )
