"""The ZooKeeper-mode controller: one broker, elected through the ephemeral ``/controller`` znode, that
decides leaders and ISRs for the whole cluster and tells the brokers with LeaderAndIsr / UpdateMetadata /
StopReplica requests.

Kafka's shape, in brief:

* **Election and fencing.** Every broker runs a ``Controller``; each watches ``/controller`` and tries to
  create it when it is missing. The winner bumps ``/controller_epoch`` with a versioned write and stamps that
  epoch on every request. Every later ZooKeeper write is a ``multi`` that first checks the epoch znode's
  version, so a deposed controller cannot write (Kafka 2.2's fix for zombie writes); brokers refuse requests
  with an epoch older than the newest they have seen (STALE_CONTROLLER_EPOCH), so it cannot command either.
* **Context.** On election the controller loads everything from ZooKeeper (live brokers with their broker
  epochs, assignments, partition states) and from then on works from memory, kept in step by watches on
  ``/brokers/ids``, ``/brokers/topics``, ``/admin/reassign_partitions`` and ``/admin/preferred_replica_election``.
* **Leader election** (the partition state machine): the first replica *in assignment order* that is alive
  and in the ISR; if none and ``unclean.leader.election.enable`` (topic override first) then the first live
  replica, with an ISR of itself; otherwise the partition goes offline (leader -1, the last ISR member kept,
  so that it can lead again when it returns). Every leader or controller-made ISR change bumps the leader
  epoch and is a compare-and-set on the state znode's version (the partition epoch).
* **ISR changes from leaders** arrive as AlterPartition (KIP-497): checked against the leader epoch and
  partition epoch the leader quotes, written, answered with the new state, then UpdateMetadata to all.
* **Preferred leaders**: ElectLeaders, ``/admin/preferred_replica_election``, and the periodic auto
  rebalance, which acts for a broker when the share of its preferred partitions led by someone else exceeds
  ``leader.imbalance.per.broker.percentage``.
* **Reassignment** (KIP-455 flow): replicas become original + target, wait until every target replica is in
  the ISR, move the leader if it is not a target, shrink to the target and StopReplica the removed ones.

The context it works from is in ``context.py``; reassignment in ``reassignment.py``; controlled shutdown in
``controlled_shutdown.py``; topic deletion in ``kafkalite.broker.topic_deletion``.

Sans-I/O: ZooKeeper through a ``ZkLink``, the network through the ``send``/``set_timer`` callables, time
from the timers. Every decision is logged with ``log(kind, **fields)``.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from kafkalite.broker.controller.context import ControllerContext, PartitionInfo, RequestBatch
from kafkalite.broker.controller.controlled_shutdown import controlled_shutdown
from kafkalite.broker.controller.reassignment import ReassignmentManager
from kafkalite.broker.placement import assign_new_partitions, assign_replicas
from kafkalite.broker.topic_deletion import TopicDeletionManager
from kafkalite.broker.topic_validator import colliding_topics, validate_topic, validate_topic_configs
from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.coordination.store import (
    BadVersion,
    Check,
    CoordinationError,
    Create,
    Delete,
    NodeExists,
    NoNode,
    SessionExpired,
    SetData,
    WatchedEvent,
)
from kafkalite.coordination.zk_node import ConnectionLossError, ZkLink
from kafkalite.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    KafkaStorageError,
    NotControllerError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    PreferredLeaderNotAvailableError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    NO_ERROR,
    NO_LEADER,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerEndpoint,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

# Kafka error codes kafkalite.errors does not define yet (Kafka's numbers).
INVALID_REPLICA_ASSIGNMENT = InvalidReplicaAssignmentError.code
STALE_BROKER_EPOCH = StaleBrokerEpochError.code
INVALID_UPDATE_VERSION = InvalidUpdateVersionError.code
INELIGIBLE_REPLICA = IneligibleReplicaError.code

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types

#: KRaft's most metadata records one operation may write (QuorumController.MAX_RECORDS_PER_USER_OP).
MAX_RECORDS_PER_USER_OP = 10_000
CONTROLLER_DEFAULTS: dict[str, Any] = {
    "unclean.leader.election.enable": False,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controller.socket.timeout.ms": 30_000,
    "num.partitions": 1,
    "default.replication.factor": 1,
}

# Controller requests use correlation ids from a range of their own, so a broker can route an answer to its
# controller or to its replica manager without a shared counter.
CONTROLLER_CORRELATION_BASE = 1 << 40
# How soon a watch-triggered event aborted by a ZooKeeper connection loss runs again.
ZK_EVENT_RETRY_MS = 100


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class ControllerMovedError(Exception):
    """A conditional write failed on ``/controller_epoch``: another controller has been elected."""


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    """``/config/topics/<t>``: Kafka's entity config JSON."""
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode()


def decode_topic_config(data: bytes) -> dict[str, str]:
    obj = json.loads(data) if data else {}
    return {str(k): str(v) for k, v in (obj.get("config") or {}).items()}


def endpoint_from_registration(reg: paths.BrokerRegistration) -> BrokerEndpoint:
    host, port = "", -1
    if reg.endpoints:
        hostport = reg.endpoints[0].partition("://")[2]
        h, _, p = hostport.rpartition(":")
        host, port = h, int(p) if p.lstrip("-").isdigit() else -1
    return BrokerEndpoint(
        node_id=reg.broker_id, host=host, port=port, rack=reg.rack, listeners=tuple(reg.endpoints)
    )


# Kafka's controller runs its first auto leader rebalance check 5 s after it takes over, then one
# leader.imbalance.check.interval.seconds apart.
FIRST_REBALANCE_CHECK_MS = 5_000


def leader_imbalance_exceeded(not_preferred: int, total: int, percentage: float) -> bool:
    """Kafka's auto-rebalance trigger for one preferred broker: ``not_preferred / total > percentage / 100``.

    Compared as two doubles exactly as Kafka does; ``ratio * 100 > percentage`` differs at the boundary
    (7/50 against 14%: 0.14 * 100 is 14.000000000000002, so it would fire where Kafka does not).
    """
    return total > 0 and not_preferred / total > percentage / 100


class Controller:
    """One broker's controller component: watches ``/controller``, and when elected runs the cluster."""

    def __init__(
        self,
        broker_id: int,
        zk: ZkLink,
        config: Mapping[str, Any] | None = None,
        *,
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], None]], int],
        cancel_timer: Callable[[int], Any],
        log: Callable[..., None],
        now_ms: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.config = {**CONTROLLER_DEFAULTS, **(config or {})}
        self._send = send
        self._set_timer = set_timer
        self._cancel_timer = cancel_timer
        self._log = log
        self._now_ms = now_ms
        self.rng = rng if rng is not None else random.Random(broker_id)
        self.ctx: ControllerContext | None = None
        self.active_controller_id: int = -1  # as last read from /controller
        self._next_cid = CONTROLLER_CORRELATION_BASE
        self._pending: dict[tuple[Any, int], tuple[Any, int]] = {}  # (dst, cid) -> (request, timer)
        self._rebalance_timer: int | None = None
        self._failover_done = False  # False while a failover aborted by ZooKeeper trouble must be redone
        self.rejections: list[tuple[Any, str, int]] = []  # (broker, api, error_code) answers refusing us
        self._broker_conf: BrokerConfig | None = None  # parsed once, to validate topic configs
        self.reassignment = ReassignmentManager(self)

    # ------------------------------------------------------------------------------------- status

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    @property
    def epoch(self) -> int:
        return self.ctx.epoch if self.ctx is not None else -1

    def _guard(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run one controller event; ZooKeeper trouble aborts it (logged), a lost epoch resigns."""
        try:
            return fn()
        except ControllerMovedError:
            self.resign("controller moved")
        except (ConnectionLossError, SessionExpired) as exc:
            self._log("controller_zk_error", during=what, error=type(exc).__name__)
        return None

    def _watch_event(self, what: str, fn: Callable[[], Any], *, active_only: bool = True) -> None:
        """Run a watch-triggered event; retried while ZooKeeper is unreachable.

        Watches are one-shot and each event re-arms its own by reading, so an event dropped on a
        connection loss would leave the controller deaf to that znode for good (e.g. a broker's failure
        and return never handled). Kafka's ZooKeeper client holds requests until it reconnects; here the
        event runs again after a short delay, as long as this controller (or, for ``/controller``, this
        broker's session) is still the one that saw it. A session expiry needs no retry: the broker
        registers again and re-runs for controller, which reloads everything.
        """
        ctx = self.ctx
        try:
            fn()
        except ControllerMovedError:
            self.resign("controller moved")
        except SessionExpired as exc:
            self._log("controller_zk_error", during=what, error=type(exc).__name__)
        except ConnectionLossError as exc:
            self._log(
                "controller_zk_error", during=what, error=type(exc).__name__, retry_ms=ZK_EVENT_RETRY_MS
            )
            session = self.zk.session_id

            def again(_now_ms: int) -> None:
                if active_only and (self.ctx is None or self.ctx is not ctx):
                    return  # resigned or re-elected since: a failover reloads everything
                if self.zk.session_id is None or self.zk.session_id != session:
                    return  # new session: registration re-ran the election
                self._watch_event(what, fn, active_only=active_only)

            self._set_timer(ZK_EVENT_RETRY_MS, again)

    # ----------------------------------------------------------------------------------- election

    def startup(self) -> None:
        """Watch ``/controller`` and run for controller (Kafka's ``elect`` on startup)."""
        self._watch_event("startup", self._elect, active_only=False)

    def _on_controller_change(self, event: WatchedEvent) -> None:
        self._watch_event("controller_change", self._elect, active_only=False)

    def _elect(self) -> None:
        zk = self.zk
        stat = zk.exists(paths.CONTROLLER, watch=self._on_controller_change)
        if stat is not None:
            try:
                data, _ = zk.get(paths.CONTROLLER)
                self.active_controller_id = paths.ControllerRegistration.decode(data).broker_id
            except NoNode:
                self.active_controller_id = -1
            if self.active_controller_id != self.broker_id and self.ctx is not None:
                self.resign("another broker is controller")
            elif self.ctx is not None and not self._failover_done:
                self._on_failover()  # our failover was cut short by ZooKeeper trouble: redo it
                self._failover_done = True
            return
        reg = paths.ControllerRegistration(self.broker_id, self._now_ms())
        try:
            zk.create(paths.CONTROLLER, reg.encode(), ephemeral=True)
        except NodeExists:
            self._elect()  # lost the race: read the winner and re-arm the watch
            return
        # Bump the epoch with a versioned write: two brokers can never both get the same epoch.
        try:
            data, st = zk.get(paths.CONTROLLER_EPOCH)
            epoch = paths.decode_controller_epoch(data) + 1
            st = zk.set(paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(epoch), version=st.version)
            version = st.version
        except NoNode:
            epoch = paths.INITIAL_CONTROLLER_EPOCH + 1
            zk.create(paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(epoch))
            version = 0
        except BadVersion:
            with contextlib.suppress(CoordinationError):
                zk.delete(paths.CONTROLLER)
            return
        self.active_controller_id = self.broker_id
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=version)
        self._log("controller_elected", broker=self.broker_id, epoch=epoch)
        self._failover_done = False
        self._on_failover()
        self._failover_done = True

    def resign(self, reason: str) -> None:
        """Stop acting as controller (Kafka's ``onControllerResignation``)."""
        if self.ctx is None:
            return
        self._log("controller_resigned", broker=self.broker_id, epoch=self.ctx.epoch, reason=reason)
        self.ctx = None
        for _, timer in self._pending.values():
            self._cancel_timer(timer)
        self._pending.clear()
        if self._rebalance_timer is not None:
            self._cancel_timer(self._rebalance_timer)
            self._rebalance_timer = None

    def on_session_lost(self) -> None:
        """The broker's ZooKeeper session expired: whatever we were, we are not controller any more."""
        self.resign("zookeeper session expired")
        self.active_controller_id = -1

    def crash(self) -> None:
        """Drop everything in memory (timers are gone with the node)."""
        self.ctx = None
        self._pending.clear()
        self._rebalance_timer = None
        self.active_controller_id = -1

    # ------------------------------------------------------------------------------- zk helpers

    def _write(self, ops: list[Any]) -> list[Any]:
        """A ZooKeeper transaction guarded by the controller epoch's version (fences zombie writes)."""
        assert self.ctx is not None
        try:
            return self.zk.multi([Check(paths.CONTROLLER_EPOCH, self.ctx.epoch_zk_version), *ops])
        except BadVersion as exc:
            if exc.op_index == 0:
                raise ControllerMovedError() from exc
            raise

    def _write_state(self, tp: TopicPartition, new: paths.PartitionState) -> bool:
        """CAS the state znode; on a version conflict reload it and return False."""
        ctx = self.ctx
        assert ctx is not None
        info = ctx.topics[tp.topic][tp.partition]
        path = paths.partition_state_path(*tp)
        try:
            if info.state is None:
                res = self._write([Create(path, new.encode(), make_parents=True)])
                version = 0
                del res
            else:
                res = self._write([SetData(path, new.encode(), info.zk_version)])
                version = res[1].version
                info.mzxid = res[1].mzxid
        except (BadVersion, NodeExists):
            self._load_state(tp, info)
            self._log("partition_state_conflict", tp=str(tp), zk_version=info.zk_version)
            return False
        info.state, info.zk_version = new, version
        return True

    def _load_state(self, tp: TopicPartition, info: PartitionInfo) -> None:
        try:
            data, st = self.zk.get(paths.partition_state_path(*tp))
            info.state, info.zk_version = paths.PartitionState.decode(data), st.version
            info.mzxid = st.mzxid
        except NoNode:
            info.state, info.zk_version, info.mzxid = None, -1, -1

    def _write_assignment(self, topic: str) -> None:
        assert self.ctx is not None
        parts = self.ctx.topics[topic]
        ta = paths.TopicAssignment(
            {p: i.replicas for p, i in parts.items()},
            {p: i.adding for p, i in parts.items() if i.adding},
            {p: i.removing for p, i in parts.items() if i.removing},
        )
        self._write([SetData(paths.topic_path(topic), ta.encode())])

    # -------------------------------------------------------------------------------- failover

    def _on_failover(self) -> None:
        """Load the cluster from ZooKeeper, register watches, bring every partition online."""
        ctx = self.ctx
        assert ctx is not None
        zk = self.zk
        paths.ensure_persistent_paths(zk)
        self._read_brokers()
        ctx.deletion = TopicDeletionManager(self)
        for topic in zk.get_children(paths.BROKER_TOPICS, watch=self._on_topics_change):
            self._load_topic(topic)
        self._delete_topics_change()  # deletions in progress leave the state machines before they start
        batch = RequestBatch()
        batch.metadata_all = True
        # New partitions (no state znode yet), then offline ones, then dead replicas out of the ISR.
        for tp, info in ctx.partitions():
            if info.state is None:
                self._init_partition(tp, info, batch)
        self._handle_bounced_on_failover(batch)
        dead = {r for _, i in ctx.partitions() for r in i.replicas if r not in ctx.live_brokers}
        self._handle_dead_replicas(dead, batch, reason="controller_failover")
        self._elect_offline(batch, reason="controller_failover")
        # Every live replica learns the state from this controller (replica state machine startup).
        for tp, info in ctx.partitions():
            for r in info.replicas:
                if r in ctx.live_brokers and info.state is not None:
                    self._add_leader_and_isr(batch, r, tp, info)
        self._send_batch(batch)
        # Reassignments in flight: from the assignment znode and the admin znode.
        pending: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, info in ctx.partitions():
            if info.adding or info.removing:
                pending[tp] = tuple(r for r in info.replicas if r not in info.removing)
        self.reassignment.watch_admin_znode(pending)
        for tp, target in sorted(pending.items()):
            self.reassignment.start(tp, target)
        self._watch_preferred_election()
        self._log_dir_events()
        if _bool(self.config["auto.leader.rebalance.enable"]):
            self._arm_rebalance(FIRST_REBALANCE_CHECK_MS)

    def _handle_bounced_on_failover(self, batch: RequestBatch) -> None:
        """Leaders and ISR members whose broker registered after the state znode was last written.

        Such a replica got its leadership or ISR seat in an earlier incarnation: it may have restarted
        without the records it acknowledged (a crash loses the unflushed page cache). A running
        controller sees the bounce as a broker epoch change and handles the broker as failed first
        (``_broker_change``); a new controller has no earlier epochs to compare, but the state znode
        only changes through a controller or the leader, so a registration (czxid) newer than the
        state's last write (mzxid) means the replica bounced since. Without this, a leader that
        restarted empty just as the controller moved (often: it was the controller) keeps leading at
        the same leader epoch and its followers truncate the acked records away to match it.
        """
        ctx = self.ctx
        assert ctx is not None
        for tp, info in ctx.partitions():
            st = info.state
            if st is None:
                continue
            members = {st.leader, *st.isr}
            bounced = {r for r in members if ctx.live_brokers.get(r, -1) > info.mzxid >= 0}
            if bounced:
                self._handle_dead_replicas(bounced, batch, reason="controller_failover_bounce", only=tp)

    def _read_brokers(self) -> tuple[set[int], set[int]]:
        """Refresh live brokers (with a child watch); returns (dead, new), a bounce counting as both."""
        ctx = self.ctx
        assert ctx is not None
        live: dict[int, int] = {}
        endpoints: dict[int, BrokerEndpoint] = {}
        for child in self.zk.get_children(paths.BROKER_IDS, watch=self._on_brokers_change):
            bid = int(child)
            try:
                data, st = self.zk.get(paths.broker_path(bid))
            except NoNode:
                continue
            live[bid] = st.czxid  # Kafka's broker epoch (KIP-380)
            endpoints[bid] = endpoint_from_registration(paths.BrokerRegistration.decode(bid, data))
        old = ctx.live_brokers
        dead = {b for b in old if b not in live or live[b] != old[b]}
        new = {b for b in live if b not in old or live[b] != old[b]}
        ctx.live_brokers, ctx.endpoints = dict(sorted(live.items())), endpoints
        return dead, new

    def _load_topic(self, topic: str) -> bool:
        ctx = self.ctx
        assert ctx is not None
        try:
            data, _ = self.zk.get(paths.topic_path(topic))
        except NoNode:
            return False
        ta = paths.TopicAssignment.decode(data)
        try:
            cdata, _ = self.zk.get(f"{paths.CONFIG_TOPICS}/{topic}")
            ctx.topic_configs[topic] = decode_topic_config(cdata)
        except NoNode:
            ctx.topic_configs[topic] = {}
        parts: dict[int, PartitionInfo] = {}
        for p, replicas in sorted(ta.partitions.items()):
            info = PartitionInfo(
                tuple(replicas), ta.adding_replicas.get(p, ()), ta.removing_replicas.get(p, ())
            )
            self._load_state(TopicPartition(topic, p), info)
            parts[p] = info
        ctx.topics[topic] = parts
        return True

    # ----------------------------------------------------------------------------- watch events

    def _on_brokers_change(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("broker_change", self._broker_change)

    def _broker_change(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        dead, new = self._read_brokers()
        if not dead and not new:
            return
        batch = RequestBatch()
        batch.metadata_all = True
        for b in dead | new:
            ctx.offline_replicas.pop(b, None)  # a restarted broker's dirs are tried again (Kafka does too)
        if dead:
            self._log("broker_failure", brokers=tuple(sorted(dead)), live=tuple(ctx.live_brokers))
            ctx.deletion.on_broker_failure(dead)
            ctx.shutting_down -= dead
            self._handle_dead_replicas(dead - set(ctx.live_brokers), batch, reason="broker_failure")
        if new:
            self._log("broker_startup", brokers=tuple(sorted(new)), live=tuple(ctx.live_brokers))
            # A bounced broker lost its leaderships: handle it as failed first, then as returned.
            bounced = new & dead
            if bounced:
                self._handle_dead_replicas(bounced, batch, reason="broker_bounce")
            for tp, info in ctx.partitions():
                if info.state is None:
                    self._init_partition(tp, info, batch)
                    continue
                for r in info.replicas:
                    if r in new:
                        self._add_leader_and_isr(batch, r, tp, info)
            self._elect_offline(batch, reason="broker_startup")
        self._send_batch(batch)
        if new:
            for tp in sorted(ctx.reassigning):
                self.reassignment.check(tp)
        ctx.deletion.resume()

    def _on_log_dir_event(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("log_dir_event", self._log_dir_events)

    def _log_dir_events(self) -> None:
        """Kafka's LogDirEventNotification: brokers that had a log dir fail left sequential znodes under
        ``/log_dir_event_notification``; read and delete them, then ask each such broker about all its
        replicas with a LeaderAndIsr. Its answer marks the ones in failed dirs (KAFKA_STORAGE_ERROR)."""
        ctx = self.ctx
        assert ctx is not None
        zk = self.zk
        if zk.exists(paths.LOG_DIR_EVENT_NOTIFICATION, watch=self._on_log_dir_event) is None:
            return
        brokers: set[int] = set()
        for child in sorted(zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION, watch=self._on_log_dir_event)):
            path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            try:
                data, _ = zk.get(path)
                zk.delete(path)
            except NoNode:
                continue
            b = paths.decode_log_dir_event(data)
            if b is not None:
                brokers.add(b)
        live = sorted(b for b in brokers if b in ctx.live_brokers)
        if not live:
            return
        self._log("log_dir_failure", brokers=tuple(live))
        batch = RequestBatch()
        for tp, info in ctx.partitions():
            if info.state is None:
                continue
            for b in live:
                if b in info.replicas:
                    self._add_leader_and_isr(batch, b, tp, info)
        self._send_batch(batch)

    def _on_replicas_offline(self, broker: int, tps: Iterable[TopicPartition]) -> None:
        """A broker answered KAFKA_STORAGE_ERROR for these replicas: they are offline (OfflineReplica).
        Leaders among them are replaced from the ISR; the others leave the ISR."""
        ctx = self.ctx
        if ctx is None or broker not in ctx.live_brokers:
            return
        known = ctx.offline_replicas.setdefault(broker, set())
        new = sorted(set(tps) - known)
        if not new:
            return
        known.update(new)
        self._log("replicas_offline", broker=broker, partitions=[str(tp) for tp in new])
        batch = RequestBatch()
        for tp in new:
            self._handle_dead_replicas({broker}, batch, reason="log_dir_failure", only=tp)
        self._send_batch(batch)

    def _on_topics_change(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("topic_change", self._topics_change)

    def _topics_change(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        topics = self.zk.get_children(paths.BROKER_TOPICS, watch=self._on_topics_change)
        batch = RequestBatch()
        for topic in topics:
            if topic in ctx.topics or ctx.deletion.is_deleting(topic):
                continue
            self._load_topic(topic)
            for p, info in sorted(ctx.topics[topic].items()):
                if info.state is None:
                    self._init_partition(TopicPartition(topic, p), info, batch)
        self._send_batch(batch)

    # ---------------------------------------------------------------------- partition state machine

    def on_topic_config_change(self, topic: str, config: dict[str, str]) -> None:
        """New overrides for ``topic``: kept for elections; enabling unclean election elects the topic's
        leaderless partitions at once, as Kafka's controller does."""
        ctx = self.ctx
        if ctx is None or topic not in ctx.topics:
            return
        ctx.topic_configs[topic] = dict(config)
        if self._unclean_allowed(topic):

            def elect() -> None:
                batch = RequestBatch()
                self._elect_offline(batch, reason="unclean_election_enabled")
                self._send_batch(batch)

            self._guard("topic_config_change", elect)

    def _unclean_allowed(self, topic: str) -> bool:
        assert self.ctx is not None
        override = self.ctx.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return _bool(self.config["unclean.leader.election.enable"] if override is None else override)

    def _init_partition(self, tp: TopicPartition, info: PartitionInfo, batch: RequestBatch) -> None:
        """NewPartition -> OnlinePartition: first live replica leads, ISR = live replicas, epoch 0."""
        ctx = self.ctx
        assert ctx is not None
        live = [r for r in info.replicas if r in ctx.live_brokers]
        if not live:
            self._log("partition_offline", tp=str(tp), reason="no live replica at creation")
            return
        new = paths.PartitionState(
            leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=ctx.epoch
        )
        if not self._write_state(tp, new):
            return
        self._log(
            "leader_elected",
            tp=str(tp),
            leader=new.leader,
            leader_epoch=0,
            isr=new.isr,
            partition_epoch=info.zk_version,
            reason="new_partition",
        )
        for r in live:
            self._add_leader_and_isr(batch, r, tp, info, is_new=True)
        batch.metadata.add(tp)

    def elect_leader(
        self, info: PartitionInfo, live: Iterable[int], *, unclean: bool
    ) -> tuple[int, tuple[int, ...], str] | None:
        """Kafka's offline-partition election: (leader, new ISR, how) or None when nobody is eligible."""
        live = set(live)
        state = info.state
        isr = state.isr if state is not None else ()
        for r in info.replicas:
            if r in live and r in isr:
                return r, tuple(b for b in isr if b in live), "clean"
        if unclean:
            for r in info.replicas:
                if r in live:
                    return r, (r,), "unclean"
        return None

    def _change_state(
        self,
        tp: TopicPartition,
        info: PartitionInfo,
        leader: int,
        isr: tuple[int, ...],
        batch: RequestBatch,
        *,
        reason: str,
        event: str,
        extra: Mapping[str, Any] | None = None,
        notify: Iterable[int] | None = None,
    ) -> bool:
        """Write leader/ISR with leader_epoch + 1, log it, queue LeaderAndIsr and UpdateMetadata."""
        ctx = self.ctx
        assert ctx is not None and info.state is not None
        old = info.state
        new = paths.PartitionState(
            leader=leader, leader_epoch=old.leader_epoch + 1, isr=isr, controller_epoch=ctx.epoch
        )
        if not self._write_state(tp, new):
            return False
        self._log(
            event,
            tp=str(tp),
            leader=leader,
            leader_epoch=new.leader_epoch,
            isr=isr,
            partition_epoch=info.zk_version,
            prev_leader=old.leader,
            reason=reason,
            **(extra or {}),
        )
        targets = info.replicas if notify is None else notify
        for r in targets:
            if r in ctx.live_brokers:
                self._add_leader_and_isr(batch, r, tp, info)
        batch.metadata.add(tp)
        return True

    def _handle_dead_replicas(
        self, dead: set[int], batch: RequestBatch, *, reason: str, only: TopicPartition | None = None
    ) -> None:
        """Leaders on dead brokers are replaced; dead followers leave the ISR (OfflineReplica)."""
        ctx = self.ctx
        assert ctx is not None
        if not dead:
            return
        for tp, info in ctx.partitions():
            if only is not None and tp != only:
                continue
            st = info.state
            if st is None or not (st.leader in dead or any(r in dead for r in st.isr)):
                continue
            remaining = tuple(r for r in st.isr if r not in dead)
            if st.leader in dead:
                choice = self.elect_leader(
                    replace(info, state=replace(st, isr=remaining)),
                    ctx.eligible_leaders(tp),
                    unclean=self._unclean_allowed(tp.topic),
                )
                if choice is not None:
                    leader, isr, how = choice
                    self._change_state(
                        tp, info, leader, isr, batch, reason=reason, event="leader_elected",
                        extra={"election": how},
                    )  # fmt: skip
                    continue
                # Nobody eligible: offline, but keep the last ISR member so it can lead when it returns.
                isr = remaining or st.isr[-1:]
                if self._change_state(
                    tp, info, NO_LEADER, isr, batch, reason=reason, event="partition_offline"
                ):
                    pass
                continue
            if st.leader == NO_LEADER and not remaining:
                continue  # already offline: keep the last ISR member
            self._change_state(
                tp, info, st.leader, remaining or st.isr[-1:], batch, reason=reason, event="isr_changed"
            )

    def _elect_offline(self, batch: RequestBatch, *, reason: str) -> None:
        """Try to bring every leaderless partition online (OfflinePartition -> OnlinePartition)."""
        ctx = self.ctx
        assert ctx is not None
        for tp, info in ctx.partitions():
            st = info.state
            if st is None or (st.leader != NO_LEADER and st.leader in ctx.live_brokers):
                continue
            choice = self.elect_leader(
                info, ctx.eligible_leaders(tp), unclean=self._unclean_allowed(tp.topic)
            )
            if choice is None:
                continue
            leader, isr, how = choice
            self._change_state(
                tp, info, leader, isr, batch, reason=reason, event="leader_elected", extra={"election": how}
            )

    # --------------------------------------------------------------------------------- requests

    def _add_leader_and_isr(
        self,
        batch: RequestBatch,
        broker: int,
        tp: TopicPartition,
        info: PartitionInfo,
        *,
        is_new: bool = False,
    ) -> None:
        st = info.state
        assert st is not None
        batch.leader_and_isr.setdefault(broker, {})[tp] = LeaderAndIsrPartitionState(
            tp=tp,
            controller_epoch=st.controller_epoch,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=st.isr,
            partition_epoch=info.zk_version,
            replicas=info.replicas,
            adding_replicas=info.adding,
            removing_replicas=info.removing,
            is_new=is_new,
        )

    def _metadata_state(self, tp: TopicPartition, info: PartitionInfo) -> UpdateMetadataPartitionState:
        assert self.ctx is not None
        st = info.state
        live = self.ctx.live_brokers
        return UpdateMetadataPartitionState(
            tp=tp,
            controller_epoch=st.controller_epoch if st else self.ctx.epoch,
            leader=st.leader if st else NO_LEADER,
            leader_epoch=st.leader_epoch if st else -1,
            isr=st.isr if st else (),
            partition_epoch=info.zk_version,
            replicas=info.replicas,
            offline_replicas=tuple(
                r for r in info.replicas if r not in live or tp in self.ctx.offline_replicas.get(r, ())
            ),
        )

    def _send_batch(self, batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        for broker, states in sorted(batch.leader_and_isr.items()):
            leaders = sorted({s.leader for s in states.values() if s.leader in ctx.endpoints})
            self.send_request(
                broker,
                LeaderAndIsrRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers.get(broker, -1),
                    partition_states=tuple(states[tp] for tp in sorted(states)),
                    live_leaders=tuple(ctx.endpoints[b] for b in leaders),
                ),
            )
        for broker, stops in sorted(batch.stop_replica.items()):
            self.send_request(
                broker,
                StopReplicaRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers.get(broker, -1),
                    partition_states=tuple(stops[tp] for tp in sorted(stops)),
                ),
            )
        if batch.metadata_all or batch.metadata:
            self.send_update_metadata(None if batch.metadata_all else batch.metadata)

    def send_update_metadata(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """UpdateMetadata with ``tps`` (None: every partition) and the live brokers, to every live broker."""
        ctx = self.ctx
        assert ctx is not None, "not the active controller"
        wanted = None if tps is None else set(tps)
        states = tuple(
            self._metadata_state(tp, info) for tp, info in ctx.partitions() if wanted is None or tp in wanted
        )
        brokers = tuple(ctx.endpoints[b] for b in ctx.live_brokers if b in ctx.endpoints)
        for b in ctx.live_brokers:
            self.send_request(
                b,
                UpdateMetadataRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers[b],
                    partition_states=states,
                    live_brokers=brokers,
                ),
            )

    def send_request(self, dst: int, request: Any, *, epoch: int | None = None) -> None:
        """Send a controller request; retried every ``controller.socket.timeout.ms`` until answered while
        ``dst`` is live and we are still the same controller (Kafka's per-broker request queue)."""
        self._next_cid += 1
        cid = self._next_cid
        epoch = self.epoch if epoch is None else epoch
        timeout = int(self.config["controller.socket.timeout.ms"])
        timer = self._set_timer(timeout, lambda now, d=dst, c=cid, e=epoch: self._request_timeout(d, c, e))
        self._pending[(dst, cid)] = (request, timer)
        self._send(dst, RequestEnvelope(cid, f"controller-{self.broker_id}", request))

    def _request_timeout(self, dst: int, cid: int, epoch: int) -> None:
        entry = self._pending.pop((dst, cid), None)
        if entry is None or self.ctx is None or self.ctx.epoch != epoch or dst not in self.ctx.live_brokers:
            return
        self._log("controller_request_retry", dst=dst, api=type(entry[0]).__name__)
        self.send_request(dst, entry[0], epoch=epoch)

    def on_response(self, src: Any, env: ResponseEnvelope) -> bool:
        """Answers to our requests; False if the correlation id is not ours."""
        entry = self._pending.pop((src, env.correlation_id), None)
        if entry is None:
            return env.correlation_id > CONTROLLER_CORRELATION_BASE
        request, timer = entry
        self._cancel_timer(timer)
        if isinstance(request, StopReplicaRequest) and self.ctx is not None and self.ctx.deletion is not None:
            deletion = self.ctx.deletion
            self._guard(
                "topic_deletion", lambda: deletion.on_stop_replica_response(src, request, env.response)
            )
        if isinstance(request, LeaderAndIsrRequest):
            offline = [
                e.tp
                for e in getattr(env.response, "partition_errors", ())
                if e.error_code == KafkaStorageError.code
            ]
            if offline:
                self._guard("log_dir_failure", lambda: self._on_replicas_offline(src, offline))
        code = getattr(env.response, "error_code", NO_ERROR)
        if code != NO_ERROR:
            self.rejections.append((src, type(request).__name__, code))
            self._log(
                "controller_request_rejected",
                dst=src,
                api=type(request).__name__,
                error_code=code,
                epoch=getattr(request, "controller_epoch", -1),
            )
        return True

    # --------------------------------------------------------------------------- admin requests

    def handle_request(self, src: Any, env: RequestEnvelope) -> bool:
        """CreateTopics, CreatePartitions, AlterPartition, ElectLeaders, Alter- and
        ListPartitionReassignments; False for others."""
        req = env.request
        if isinstance(req, DeleteTopicsRequest):
            self._delete_topics(src, env)
            return True
        handlers = {
            CreateTopicsRequest: self._create_topics,
            CreatePartitionsRequest: self._create_partitions,
            AlterPartitionRequest: self._alter_partition,
            ElectLeadersRequest: self._elect_leaders,
            AlterPartitionReassignmentsRequest: self.reassignment.alter,
            ListPartitionReassignmentsRequest: self.reassignment.ongoing,
            ControlledShutdownRequest: partial(controlled_shutdown, self),
        }
        handler = handlers.get(type(req))
        if handler is None:
            return False
        if self.ctx is None:
            self._send(src, env.reply(self._not_controller(req)))
            return True
        response = self._guard(type(req).__name__, lambda: handler(req))
        if response is None:
            response = self._not_controller(req)  # lost ZooKeeper midway: let the client retry elsewhere
        self._send(src, env.reply(response))
        return True

    @staticmethod
    def _not_controller(req: Any) -> Any:
        code = NotControllerError.code
        if isinstance(req, CreateTopicsRequest):
            return CreateTopicsResponse(
                topics=tuple(CreatableTopicResult(name=t.name, error_code=code) for t in req.topics)
            )
        if isinstance(req, CreatePartitionsRequest):
            return CreatePartitionsResponse(
                results=tuple(CreatePartitionsTopicResult(name=t.name, error_code=code) for t in req.topics)
            )
        if isinstance(req, AlterPartitionRequest):
            return AlterPartitionResponse(error_code=code)
        if isinstance(req, ElectLeadersRequest):
            return ElectLeadersResponse(error_code=code)
        if isinstance(req, ListPartitionReassignmentsRequest):
            return ListPartitionReassignmentsResponse(error_code=code)
        if isinstance(req, ControlledShutdownRequest):
            return ControlledShutdownResponse(error_code=code)
        return AlterPartitionReassignmentsResponse(error_code=code)

    def _validate_each(
        self,
        topics: Iterable[Any],
        validate: Callable[[Any], dict[int, list[int]]],
        results: list[Any],
        result_type: type,
        failed_event: str,
    ) -> Iterator[tuple[Any, dict[int, list[int]]]]:
        """``(topic, plan)`` for each topic ``validate`` accepts; a refused one gets its error result
        appended to ``results`` in request order (the caller appends the accepted ones' results)."""
        for t in topics:
            try:
                plan = validate(t)
            except KafkaError as exc:
                results.append(result_type(name=t.name, error_code=exc.code, error_message=str(exc)))
                self._log(failed_event, topic=t.name, error=exc.name)
                continue
            yield t, plan

    def _create_topics(self, req: CreateTopicsRequest) -> CreateTopicsResponse:
        ctx = self.ctx
        assert ctx is not None
        too_many = self._excessive_batch(
            "create_topics",
            sum(1 + max(0, self._partition_count(t)) + len(t.configs) for t in req.topics),
        )
        if too_many is not None:
            return CreateTopicsResponse(
                topics=tuple(
                    CreatableTopicResult(
                        name=t.name, error_code=too_many.code, error_message=too_many.message
                    )
                    for t in req.topics
                )
            )
        results: list[Any] = []
        batch = RequestBatch()
        names = [t.name for t in req.topics]
        dupes = {n for n in names if names.count(n) > 1}
        checked = self._validate_each(
            (t for t in req.topics if t.name not in dupes),
            self._validate_new_topic,
            results,
            CreatableTopicResult,
            "create_topic_failed",
        )
        for t, assignment in checked:
            rf = len(assignment[0])
            results.append(
                CreatableTopicResult(name=t.name, num_partitions=len(assignment), replication_factor=rf)
            )
            if req.validate_only:
                continue
            ta = paths.TopicAssignment({p: tuple(r) for p, r in assignment.items()})
            self._write(
                [
                    Create(f"{paths.CONFIG_TOPICS}/{t.name}", encode_topic_config(dict(t.configs)), make_parents=True),
                    Create(paths.topic_path(t.name), ta.encode(), make_parents=True),
                ]
            )  # fmt: skip
            self._log("topic_created", topic=t.name, assignment={p: tuple(r) for p, r in assignment.items()})
            ctx.topic_configs[t.name] = dict(t.configs)
            ctx.topics[t.name] = {p: PartitionInfo(tuple(r)) for p, r in assignment.items()}
            for p, info in sorted(ctx.topics[t.name].items()):
                self._init_partition(TopicPartition(t.name, p), info, batch)
        self._send_batch(batch)
        # Kafka refuses every entry of a topic named twice, in the request's order
        refused = {
            n: CreatableTopicResult(
                name=n,
                error_code=InvalidRequestError.code,
                error_message="Found multiple entries for this topic.",
            )
            for n in dupes
        }
        ordered = iter(results)
        return CreateTopicsResponse(topics=tuple(refused.get(n) or next(ordered) for n in names))

    def _partition_count(self, t: Any) -> int:
        """How many partitions a CreatableTopic asks for (its assignments, or num.partitions for -1)."""
        if t.assignments:
            return len(t.assignments)
        return t.num_partitions if t.num_partitions != -1 else int(self.config["num.partitions"])

    def _excessive_batch(self, what: str, records: int) -> PolicyViolationError | None:
        """KRaft's bound on one operation (QuorumController's 10,000 metadata records: a topic, each of its
        partitions and each config override is one). ZooKeeper-mode Kafka has none and would try, until
        the broker runs out of file descriptors and takes its log directory offline; refusing up front
        (POLICY_VIOLATION, as KRaft answers) keeps the broker serving."""
        if records <= MAX_RECORDS_PER_USER_OP:
            return None
        self._log(f"{what}_refused", records=records, limit=MAX_RECORDS_PER_USER_OP)
        return PolicyViolationError(
            f"Unable to perform excessively large batch operation: {records} metadata records "
            f"exceed {MAX_RECORDS_PER_USER_OP}."
        )

    def _validate_new_topic(self, t: Any) -> dict[int, list[int]]:
        """Kafka's checks, in ZkAdminManager's order: the name (INVALID_TOPIC_EXCEPTION), that it is
        free (TOPIC_ALREADY_EXISTS) and collides with no topic ('.' against '_'), the partition count and
        replication factor (or the explicit assignment), then the configs (INVALID_CONFIG). Nothing is
        written before every check has passed."""
        ctx = self.ctx
        assert ctx is not None
        if t.name in ctx.topics:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        configs = dict(t.configs)
        if any(v is None for v in configs.values()):
            validate_topic_configs(self._broker_config(), configs)  # names the null keys
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            raise InvalidRequestError(
                "give either explicit replica assignments or num_partitions/replication_factor, not both"
            )
        validate_topic(t.name)  # before the name reaches a znode path or a directory
        if ctx.deletion is not None and ctx.deletion.is_deleting(t.name):
            raise TopicAlreadyExistsError(f"Topic '{t.name}' is marked for deletion.")
        if self.zk.exists(paths.topic_path(t.name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        colliding = colliding_topics(t.name, ctx.topics)
        if colliding:
            raise InvalidTopicError(f"Topic '{t.name}' collides with existing topics: {', '.join(colliding)}")
        assignment = self._new_topic_assignment(t)
        validate_topic_configs(self._broker_config(), configs)
        return assignment

    def _broker_config(self) -> BrokerConfig:
        if self._broker_conf is None:
            self._broker_conf = BrokerConfig.coerce(self.config)
        return self._broker_conf

    def _new_topic_assignment(self, t: Any) -> dict[int, list[int]]:
        ctx = self.ctx
        assert ctx is not None
        live = sorted(ctx.live_brokers)
        if t.assignments:
            assignment = {a.partition: list(a.broker_ids) for a in t.assignments}
            # Kafka's order of checks (AdminZkClient.validateTopicCreate), all INVALID_REPLICA_ASSIGNMENT.
            if len({len(r) for r in assignment.values()}) != 1:
                raise InvalidReplicaAssignmentError("every partition needs the same number of replicas")
            for p, r in sorted(assignment.items()):
                if len(set(r)) != len(r):
                    raise InvalidReplicaAssignmentError(f"partition {p} lists a replica twice: {r}")
            if len(assignment) != len(t.assignments) or sorted(assignment) != list(range(len(assignment))):
                raise InvalidReplicaAssignmentError("partition ids must run 0, 1, ... without gaps")
            return assignment
        n = t.num_partitions if t.num_partitions != -1 else int(self.config["num.partitions"])
        rf = (
            t.replication_factor
            if t.replication_factor != -1
            else int(self.config["default.replication.factor"])
        )
        if n < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {n}")
        if rf < 1 or rf > len(live):
            raise InvalidReplicationFactorError(
                f"replication factor: {rf} larger than available brokers: {len(live)}"
                if rf > len(live)
                else f"replication factor must be at least 1, got {rf}"
            )
        racks = self._live_racks()
        return assign_replicas(live, n, rf, rng=self.rng, broker_racks=racks)

    def _live_racks(self) -> dict[int, str | None] | None:
        """``broker.rack`` of each live broker from its registration; None when no broker has one.

        Some brokers with a rack and some without is refused as Kafka's ZooKeeper mode does, before any
        random draw, so the request fails cleanly instead of placement raising in the event loop.
        """
        ctx = self.ctx
        assert ctx is not None
        racks = {b: ep.rack if (ep := ctx.endpoints.get(b)) is not None else None for b in ctx.live_brokers}
        missing = sorted(b for b, r in racks.items() if r is None)
        if len(missing) == len(racks):
            return None
        if missing:
            raise InvalidReplicaAssignmentError(
                f"brokers {missing} have no broker.rack while others have one: rack-aware placement "
                "needs a rack on every live broker"
            )
        return racks

    # -------------------------------------------------------------------------- CreatePartitions
    def _create_partitions(self, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """Grow topics: new partitions are placed (or taken from the request), written to the topic's
        assignment znode and brought online like a new topic's; every broker learns them by UpdateMetadata."""
        ctx = self.ctx
        assert ctx is not None
        new = sum(
            max(0, t.count - len(ctx.topics.get(t.name, {}))) for t in req.topics if t.name in ctx.topics
        )
        too_many = self._excessive_batch("create_partitions", new)
        if too_many is not None:
            return CreatePartitionsResponse(
                results=tuple(
                    CreatePartitionsTopicResult(
                        name=t.name, error_code=too_many.code, error_message=too_many.message
                    )
                    for t in req.topics
                )
            )
        results: list[Any] = []
        batch = RequestBatch()
        checked = self._validate_each(
            req.topics,
            self._validate_new_partitions,
            results,
            CreatePartitionsTopicResult,
            "create_partitions_failed",
        )
        for t, added in checked:
            results.append(CreatePartitionsTopicResult(name=t.name))
            if req.validate_only:
                continue
            parts = ctx.topics[t.name]
            for p, replicas in added.items():
                parts[p] = PartitionInfo(tuple(replicas))
            self._write_assignment(t.name)
            self._log("partitions_created", topic=t.name, assignment={p: tuple(r) for p, r in added.items()})
            for p in sorted(added):
                self._init_partition(TopicPartition(t.name, p), parts[p], batch)
        self._send_batch(batch)
        return CreatePartitionsResponse(results=tuple(results))

    def _validate_new_partitions(self, t: Any) -> dict[int, list[int]]:
        ctx = self.ctx
        assert ctx is not None
        parts = ctx.topics.get(t.name)
        if parts is None:
            raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
        if any(tp.topic == t.name for tp in ctx.reassigning):
            raise ReassignmentInProgressError(
                f"A partition reassignment is in progress for the topic '{t.name}'."
            )
        current = len(parts)
        if t.count < current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the requested {t.count}."
            )
        if t.count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partitions.")
        to_add = t.count - current
        live = sorted(ctx.live_brokers)
        if t.assignments is not None:
            if len(t.assignments) != to_add:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {to_add} but {len(t.assignments)} assignments "
                    "provided."
                )
            rf = len(parts[0].replicas)
            for i, replicas in enumerate(t.assignments):
                unknown = sorted(set(replicas) - set(live))
                if unknown:
                    raise InvalidReplicaAssignmentError(
                        f"Unknown broker(s) in replica assignment: {unknown}."
                    )
                if len(replicas) != rf or len(set(replicas)) != rf:
                    raise InvalidReplicaAssignmentError(
                        f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                        f"partition {current + i} has replicas {list(replicas)}."
                    )
            return {current + i: list(r) for i, r in enumerate(t.assignments)}
        rf = len(parts[0].replicas)
        if rf > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {len(live)}."
            )
        existing = {p: list(info.replicas) for p, info in parts.items()}
        return assign_new_partitions(live, existing, to_add, broker_racks=self._live_racks())

    # ---------------------------------------------------------------------------- AlterPartition

    def _alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionResponse:
        ctx = self.ctx
        assert ctx is not None
        epoch = ctx.live_brokers.get(req.broker_id)
        if epoch is None or (req.broker_epoch != -1 and req.broker_epoch != epoch):
            self._log("alter_partition_rejected", broker=req.broker_id, error="STALE_BROKER_EPOCH")
            return AlterPartitionResponse(error_code=STALE_BROKER_EPOCH)
        results = []
        batch = RequestBatch()
        for item in req.partitions:
            results.append(self._alter_one(req.broker_id, item, batch))
        self._send_batch(batch)
        for item in req.partitions:
            if item.tp in ctx.reassigning:
                self.reassignment.check(item.tp)
        return AlterPartitionResponse(partitions=tuple(results))

    def _alter_one(self, broker: int, item: Any, batch: RequestBatch) -> AlterPartitionResult:
        ctx = self.ctx
        assert ctx is not None
        tp = item.tp
        info = ctx.info(tp)

        def reject(code: int, name: str) -> AlterPartitionResult:
            self._log(
                "alter_partition_rejected",
                tp=str(tp),
                broker=broker,
                error=name,
                leader_epoch=item.leader_epoch,
                partition_epoch=item.partition_epoch,
            )
            st = info.state if info is not None else None
            if st is None:
                return AlterPartitionResult(tp=tp, error_code=code)
            return AlterPartitionResult(
                tp=tp,
                error_code=code,
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                isr=st.isr,
                partition_epoch=info.zk_version,
            )

        if info is None or info.state is None:
            return reject(UnknownTopicOrPartitionError.code, UnknownTopicOrPartitionError.name)
        st = info.state
        if st.leader != broker:
            return reject(NotLeaderOrFollowerError.code, NotLeaderOrFollowerError.name)
        if item.leader_epoch < st.leader_epoch:
            return reject(FencedLeaderEpochError.code, FencedLeaderEpochError.name)
        if item.leader_epoch > st.leader_epoch:
            return reject(UnknownLeaderEpochError.code, UnknownLeaderEpochError.name)
        new_isr = tuple(item.new_isr)
        if new_isr == st.isr and item.partition_epoch <= info.zk_version:
            # Already the committed state (Kafka's equalsAllowStalePartitionEpoch, checked before the
            # partition-epoch fence to keep AlterPartition idempotent): a leader sending again a proposal
            # whose answer it never got learns the committed state and partition epoch.
            return AlterPartitionResult(
                tp=tp,
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                isr=st.isr,
                partition_epoch=info.zk_version,
            )
        if item.partition_epoch != info.zk_version:
            return reject(INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION")
        if broker not in new_isr or any(r not in info.replicas for r in new_isr):
            return reject(InvalidRequestError.code, InvalidRequestError.name)
        added = [r for r in new_isr if r not in st.isr]
        if any(r not in ctx.live_brokers for r in added):
            return reject(INELIGIBLE_REPLICA, "INELIGIBLE_REPLICA")  # KIP-841: no dead broker joins
        if new_isr != st.isr:
            # KIP-497: an ISR change from the leader keeps the leader epoch; the zkVersion moves.
            new = paths.PartitionState(st.leader, st.leader_epoch, new_isr, ctx.epoch)
            if not self._write_state(tp, new):
                return reject(INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION")
            self._log(
                "isr_changed",
                tp=str(tp),
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                isr=new_isr,
                partition_epoch=info.zk_version,
                prev_isr=st.isr,
                reason="alter_partition",
            )
            batch.metadata.add(tp)
        st = info.state
        return AlterPartitionResult(
            tp=tp, leader=st.leader, leader_epoch=st.leader_epoch, isr=st.isr, partition_epoch=info.zk_version
        )

    # ------------------------------------------------------------------------- preferred leaders

    def elect_preferred(
        self, tps: Iterable[TopicPartition], batch: RequestBatch, *, reason: str
    ) -> dict[TopicPartition, int]:
        """Move leadership to each partition's first replica where it is alive and in the ISR."""
        ctx = self.ctx
        assert ctx is not None
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            info = ctx.info(tp)
            if info is None or info.state is None:
                out[tp] = UnknownTopicOrPartitionError.code
                continue
            preferred = info.replicas[0]
            st = info.state
            if st.leader == preferred:
                out[tp] = ElectionNotNeededError.code
            elif (
                preferred not in ctx.eligible_leaders(tp) or preferred not in st.isr or tp in ctx.reassigning
            ):
                out[tp] = PreferredLeaderNotAvailableError.code
            elif self._change_state(
                tp, info, preferred, st.isr, batch, reason=reason, event="leader_elected",
                extra={"election": "preferred"},
            ):  # fmt: skip
                out[tp] = NO_ERROR
            else:
                out[tp] = PreferredLeaderNotAvailableError.code
        return out

    def _elect_leaders(self, req: ElectLeadersRequest) -> ElectLeadersResponse:
        ctx = self.ctx
        assert ctx is not None
        tps = [tp for tp, _ in ctx.partitions()] if req.partitions is None else list(req.partitions)
        batch = RequestBatch()
        if req.election_type == PREFERRED:
            codes = self.elect_preferred(tps, batch, reason="elect_leaders")
        elif req.election_type == UNCLEAN:
            codes = {}
            for tp in tps:
                info = ctx.info(tp)
                if info is None or info.state is None:
                    codes[tp] = UnknownTopicOrPartitionError.code
                    continue
                if info.state.leader in ctx.live_brokers:
                    codes[tp] = ElectionNotNeededError.code
                    continue
                choice = self.elect_leader(info, ctx.live_brokers, unclean=True)
                if choice is None:
                    codes[tp] = EligibleLeadersNotAvailableError.code
                    continue
                leader, isr, how = choice
                self._change_state(
                    tp, info, leader, isr, batch, reason="elect_leaders", event="leader_elected",
                    extra={"election": how},
                )  # fmt: skip
                codes[tp] = NO_ERROR
        else:
            return ElectLeadersResponse(error_code=InvalidRequestError.code)
        self._send_batch(batch)
        if req.partitions is None:
            # Asked for every partition: Kafka answers only for those that had an election or an error.
            tps = [tp for tp in tps if codes[tp] != ElectionNotNeededError.code]
        return ElectLeadersResponse(results=tuple(ElectionResult(tp=tp, error_code=codes[tp]) for tp in tps))

    def _watch_preferred_election(self) -> None:
        if self.zk.exists(paths.PREFERRED_REPLICA_ELECTION, watch=self._on_preferred_znode) is not None:
            self._preferred_znode()

    def _on_preferred_znode(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("preferred_replica_election", self._watch_preferred_election)

    def _preferred_znode(self) -> None:
        try:
            data, _ = self.zk.get(paths.PREFERRED_REPLICA_ELECTION)
        except NoNode:
            return
        tps = [TopicPartition(t, p) for t, p in paths.decode_partition_list(data)]
        batch = RequestBatch()
        self.elect_preferred(tps, batch, reason="admin_preferred_replica_election")
        self._send_batch(batch)
        with contextlib.suppress(NoNode):
            self._write([Delete(paths.PREFERRED_REPLICA_ELECTION)])

    def _arm_rebalance(self, delay_ms: int | None = None) -> None:
        """The next auto leader rebalance check: ``delay_ms`` from now (the first, after a failover), else
        one ``leader.imbalance.check.interval.seconds`` on."""
        if delay_ms is None:
            delay_ms = int(self.config["leader.imbalance.check.interval.seconds"]) * 1000
        self._rebalance_timer = self._set_timer(delay_ms, self._on_rebalance_timer)

    def _on_rebalance_timer(self, now_ms: int) -> None:
        self._rebalance_timer = None
        if self.ctx is None:
            return
        self._guard("auto_leader_rebalance", self.check_leader_imbalance)
        if self.ctx is not None:
            self._arm_rebalance()

    def check_leader_imbalance(self) -> None:
        """Kafka's auto leader rebalance: per preferred broker, act when the share of its partitions led
        by another broker exceeds ``leader.imbalance.per.broker.percentage``."""
        ctx = self.ctx
        assert ctx is not None
        pct = float(self.config["leader.imbalance.per.broker.percentage"])
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, info in ctx.partitions():
            # A partition without leader state still counts in Kafka's denominator, never as not led.
            if tp not in ctx.reassigning:
                by_preferred.setdefault(info.replicas[0], []).append(tp)
        batch = RequestBatch()
        for broker, tps in sorted(by_preferred.items()):
            not_led = [tp for tp in tps if (st := ctx.info(tp).state) is not None and st.leader != broker]
            ratio = len(not_led) / len(tps)
            if not leader_imbalance_exceeded(len(not_led), len(tps), pct) or broker not in ctx.live_brokers:
                continue
            self._log("leader_imbalance", broker=broker, ratio=round(ratio, 4), partitions=len(tps))
            self.elect_preferred(not_led, batch, reason="auto_leader_rebalance")
        self._send_batch(batch)

    # ------------------------------------------------------------------------------ DeleteTopics
    def _delete_topics(self, src: Any, env: RequestEnvelope) -> None:
        """Mark topics for deletion (``/admin/delete_topics/<t>``) and answer once they have left the
        metadata, as Kafka's DelayedDeleteTopics does; REQUEST_TIMED_OUT after ``timeout_ms``."""
        req: DeleteTopicsRequest = env.request  # type: ignore[assignment]
        ctx = self.ctx
        codes: dict[str, int] = {}
        if ctx is None:
            codes = {t: NotControllerError.code for t in req.topic_names}
        elif not _bool(self.config["delete.topic.enable"]):
            codes = {t: TopicDeletionDisabledError.code for t in req.topic_names}
        else:
            for t in req.topic_names:
                if t not in ctx.topics and not ctx.deletion.is_deleting(t):
                    codes[t] = UnknownTopicOrPartitionError.code
                    continue
                try:
                    self.zk.create(paths.delete_topic_path(t), b"", make_parents=True)
                except NodeExists:
                    pass  # already marked: wait for it like the first caller
                except CoordinationError:
                    codes[t] = RequestTimedOutError.code
        waiting = {t for t in req.topic_names if t not in codes}

        def answer(timed_out: bool = False) -> None:
            if answered:
                return
            answered.append(True)
            self._cancel_timer(timer[0] if timer else None)
            results = tuple(
                DeletableTopicResult(
                    name=t, error_code=codes.get(t, RequestTimedOutError.code if timed_out else NO_ERROR)
                )
                for t in req.topic_names
            )
            self._send(src, env.reply(DeleteTopicsResponse(topics=results)))

        answered: list[bool] = []
        timer: list[int] = []
        if not waiting or req.timeout_ms <= 0:
            answer()
            return
        timer.append(self._set_timer(req.timeout_ms, lambda _now: answer(timed_out=True)))
        self._guard("delete_topics", self._delete_topics_change)
        if self.ctx is not None:
            self.ctx.deletion.when_started(waiting, answer)

    def _on_delete_topics_change(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("delete_topics", self._delete_topics_change)

    def _delete_topics_change(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        for topic in sorted(
            self.zk.get_children(paths.ADMIN_DELETE_TOPICS, watch=self._on_delete_topics_change)
        ):
            if topic in ctx.topics:
                if _bool(self.config["delete.topic.enable"]):
                    ctx.deletion.enqueue(topic)
                else:
                    self._log("topic_deletion_disabled", topic=topic)
                    self._write([Delete(paths.delete_topic_path(topic))])
            elif not ctx.deletion.is_deleting(topic):
                self._write([Delete(paths.delete_topic_path(topic))])  # no such topic: nothing to do
        ctx.deletion.resume()


__all__ = [
    "CONTROLLER_CORRELATION_BASE",
    "Controller",
    "ControllerContext",
    "ControllerMovedError",
    "PartitionInfo",
    "STALE_BROKER_EPOCH",
    "StaleControllerEpochError",
    "leader_imbalance_exceeded",
]
