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

Split along Kafka's seams, every part sharing the one ``ControllerContext`` (``context.py``):

* ``partition_state_machine.py``: Kafka's ``PartitionStateMachine`` and its four election algorithms
  (offline, reassign, preferred, controlled shutdown); every write of a partition's state znode.
* ``replica_state_machine.py``: Kafka's ``ReplicaStateMachine`` (OnlineReplica, OfflineReplica).
* ``channel_manager.py``: ``ControllerBrokerRequestBatch`` (the requests one event collects) and
  ``ControllerChannelManager`` (sending, retrying and matching answers).
* ``topic_admin.py``: CreateTopics, CreatePartitions, DeleteTopics (the topic half of Kafka's ZkAdminManager).
* ``alter_partition.py``, ``reassignment.py``, ``controlled_shutdown.py``: AlterPartition, the KIP-455
  reassignment and ControlledShutdown; topic deletion is ``kafkalite.broker.topic_deletion``.

Sans-I/O: ZooKeeper through a ``ZkLink``, the network through the ``send``/``set_timer`` callables, time
from the timers. Every decision is logged with ``log(kind, **fields)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from kafkalite.broker.controller.alter_partition import STALE_BROKER_EPOCH, alter_partition
from kafkalite.broker.controller.channel_manager import (
    CONTROLLER_CORRELATION_BASE,
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
)
from kafkalite.broker.controller.context import ControllerContext, PartitionInfo, config_flag
from kafkalite.broker.controller.controlled_shutdown import controlled_shutdown
from kafkalite.broker.controller.partition_state_machine import PartitionStateMachine
from kafkalite.broker.controller.reassignment import ReassignmentManager
from kafkalite.broker.controller.replica_state_machine import ReplicaStateMachine
from kafkalite.broker.controller.topic_admin import TopicAdmin, decode_topic_config
from kafkalite.broker.topic_deletion import TopicDeletionManager
from kafkalite.common.kafka_uuid import uuid_to_str
from kafkalite.coordination import paths
from kafkalite.coordination.store import (
    BadVersion,
    Check,
    CoordinationError,
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
    InvalidRequestError,
    KafkaStorageError,
    NotControllerError,
    StaleControllerEpochError,
)
from kafkalite.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerEndpoint,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaRequest,
    TopicPartition,
)

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types

CONTROLLER_DEFAULTS: dict[str, Any] = {
    "unclean.leader.election.enable": False,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controller.socket.timeout.ms": 30_000,
    "num.partitions": 1,
    "default.replication.factor": 1,
}

# How soon a watch-triggered event aborted by a ZooKeeper connection loss runs again.
ZK_EVENT_RETRY_MS = 100


class ControllerMovedError(Exception):
    """A conditional write failed on ``/controller_epoch``: another controller has been elected."""


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
    """One broker's controller component: watches ``/controller``, and when elected runs the cluster.

    What stays here is Kafka's ``KafkaController`` proper: election and epoch fencing, the failover that
    loads the context, the event handlers behind each watch (brokers, topics, log dir events, the
    preferred-election znode, topic deletions), ElectLeaders and the auto leader rebalance, and the routing
    of the requests the controller answers. Each handler decides *which* partitions and replicas change
    and hands the change itself to the state machines, whose requests go out through the channel manager
    at the end of the event.
    """

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
        self._rebalance_timer: int | None = None
        self._failover_done = False  # False while a failover aborted by ZooKeeper trouble must be redone
        self.channel = ControllerChannelManager(
            broker_id,
            self.config,
            context=lambda: self.ctx,
            send=send,
            set_timer=set_timer,
            cancel_timer=cancel_timer,
            log=log,
            on_answer=self._on_answer,
        )
        self.partition_state_machine = PartitionStateMachine(self)
        self.replica_state_machine = ReplicaStateMachine(self)
        self.topic_admin = TopicAdmin(self)
        self.reassignment = ReassignmentManager(self)

    # ------------------------------------------------------------------------------------- status

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    @property
    def epoch(self) -> int:
        return self.ctx.epoch if self.ctx is not None else -1

    @property
    def rejections(self) -> list[tuple[Any, str, int]]:
        """(broker, api, error_code) of the answers that refused this controller's requests."""
        return self.channel.rejections

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
        # A seed of its own (not ``self.rng``, whose draws place replicas): ids differ between
        # controllerships yet repeat in a re-run of the same simulation.
        ids = random.Random(f"kafkalite-topic-ids:{self.broker_id}:{epoch}")
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=version, topic_id_rng=ids)
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
        self.channel.clear()
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
        self.channel.clear(cancel_timers=False)
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

    def _write_assignment(self, topic: str) -> None:
        assert self.ctx is not None
        parts = self.ctx.topics[topic]
        ta = paths.TopicAssignment(
            {p: i.replicas for p, i in parts.items()},
            {p: i.adding for p, i in parts.items() if i.adding},
            {p: i.removing for p, i in parts.items() if i.removing},
            self.ctx.topic_ids.get(topic),
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
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        batch = ControllerBrokerRequestBatch(metadata_all=True)
        # New partitions (no state znode yet), then bounced and dead replicas, then offline partitions.
        for tp, info in ctx.partitions():
            if info.state is None:
                psm.initialize(tp, info, batch)
        rsm.offline_bounced_on_failover(batch)
        dead = {r for _, i in ctx.partitions() for r in i.replicas if r not in ctx.live_brokers}
        rsm.offline(dead, batch, reason="controller_failover")
        psm.elect_offline_partitions(batch, reason="controller_failover")
        rsm.startup(batch)
        self.channel.send_batch(batch)
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
        if config_flag(self.config["auto.leader.rebalance.enable"]):
            self._arm_rebalance(FIRST_REBALANCE_CHECK_MS)

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
        tid = ta.topic_id
        if tid is None:
            # A znode from before Kafka 2.8: the controller gives the topic its id (Kafka's
            # ``setTopicIds`` at failover), written back so every later controller reads the same one.
            tid = ctx.new_topic_id()
            self._write([SetData(paths.topic_path(topic), dataclasses.replace(ta, topic_id=tid).encode())])
            self._log("topic_id_assigned", topic=topic, topic_id=uuid_to_str(tid))
        ctx.topic_ids[topic] = tid
        try:
            cdata, _ = self.zk.get(f"{paths.CONFIG_TOPICS}/{topic}")
            ctx.topic_configs[topic] = decode_topic_config(cdata)
        except NoNode:
            ctx.topic_configs[topic] = {}
        parts: dict[int, PartitionInfo] = {}
        for p, replicas in sorted(ta.partitions.items()):
            info = PartitionInfo(
                tuple(replicas), ta.adding_replicas.get(p, ()), ta.removing_replicas.get(p, ()), topic_id=tid
            )
            self.partition_state_machine.load_state(TopicPartition(topic, p), info)
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
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        batch = ControllerBrokerRequestBatch(metadata_all=True)
        for b in dead | new:
            ctx.offline_replicas.pop(b, None)  # a restarted broker's dirs are tried again (Kafka does too)
        if dead:
            self._log("broker_failure", brokers=tuple(sorted(dead)), live=tuple(ctx.live_brokers))
            ctx.deletion.on_broker_failure(dead)
            ctx.shutting_down -= dead
            rsm.offline(dead - set(ctx.live_brokers), batch, reason="broker_failure")
        if new:
            self._log("broker_startup", brokers=tuple(sorted(new)), live=tuple(ctx.live_brokers))
            # A bounced broker lost its leaderships: handle it as failed first, then as returned.
            bounced = new & dead
            if bounced:
                rsm.offline(bounced, batch, reason="broker_bounce")
            fresh = [(tp, info) for tp, info in ctx.partitions() if info.state is None]
            for tp, info in fresh:
                psm.initialize(tp, info, batch)
            rsm.online(new, batch, skip=[tp for tp, _ in fresh])  # initialize queued theirs
            psm.elect_offline_partitions(batch, reason="broker_startup")
        self.channel.send_batch(batch)
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
        batch = ControllerBrokerRequestBatch()
        self.replica_state_machine.online(live, batch)
        self.channel.send_batch(batch)

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
        batch = ControllerBrokerRequestBatch()
        for tp in new:
            self.replica_state_machine.offline({broker}, batch, reason="log_dir_failure", only=tp)
        self.channel.send_batch(batch)

    def _on_topics_change(self, event: WatchedEvent) -> None:
        if self.ctx is not None:
            self._watch_event("topic_change", self._topics_change)

    def _topics_change(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        topics = self.zk.get_children(paths.BROKER_TOPICS, watch=self._on_topics_change)
        batch = ControllerBrokerRequestBatch()
        for topic in topics:
            if topic in ctx.topics or ctx.deletion.is_deleting(topic):
                continue
            self._load_topic(topic)
            for p, info in sorted(ctx.topics[topic].items()):
                if info.state is None:
                    self.partition_state_machine.initialize(TopicPartition(topic, p), info, batch)
        self.channel.send_batch(batch)

    def on_topic_config_change(self, topic: str, config: dict[str, str]) -> None:
        """New overrides for ``topic``: kept for elections; enabling unclean election elects the topic's
        leaderless partitions at once, as Kafka's controller does."""
        ctx = self.ctx
        if ctx is None or topic not in ctx.topics:
            return
        ctx.topic_configs[topic] = dict(config)
        if self.partition_state_machine.unclean_allowed(topic):

            def elect() -> None:
                batch = ControllerBrokerRequestBatch()
                self.partition_state_machine.elect_offline_partitions(
                    batch, reason="unclean_election_enabled"
                )
                self.channel.send_batch(batch)

            self._guard("topic_config_change", elect)

    # --------------------------------------------------------------------------------- requests

    def send_update_metadata(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """UpdateMetadata with ``tps`` (None: every partition) and the live brokers, to every live broker."""
        self.channel.send_update_metadata(tps)

    def on_response(self, src: Any, env: ResponseEnvelope) -> bool:
        """Answers to our requests; False if the correlation id is not ours."""
        return self.channel.on_response(src, env)

    def _on_answer(self, src: Any, request: Any, response: Any) -> None:
        """A broker answered: StopReplica answers move topic deletions on; replicas a LeaderAndIsr
        answer reports in a failed log dir (KAFKA_STORAGE_ERROR) go offline."""
        if isinstance(request, StopReplicaRequest) and self.ctx is not None and self.ctx.deletion is not None:
            deletion = self.ctx.deletion
            self._guard("topic_deletion", lambda: deletion.on_stop_replica_response(src, request, response))
        if isinstance(request, LeaderAndIsrRequest):
            offline = [
                e.tp
                for e in getattr(response, "partition_errors", ())
                if e.error_code == KafkaStorageError.code
            ]
            if offline:
                self._guard("log_dir_failure", lambda: self._on_replicas_offline(src, offline))

    # --------------------------------------------------------------------------- admin requests

    def handle_request(self, src: Any, env: RequestEnvelope) -> bool:
        """CreateTopics, CreatePartitions, DeleteTopics, AlterPartition, ElectLeaders, Alter- and
        ListPartitionReassignments, ControlledShutdown; False for others."""
        req = env.request
        if isinstance(req, DeleteTopicsRequest):
            self.topic_admin.delete_topics(src, env)
            return True
        handlers = {
            CreateTopicsRequest: self.topic_admin.create_topics,
            CreatePartitionsRequest: self.topic_admin.create_partitions,
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

    def _alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionResponse:
        """AlterPartition (``alter_partition.py``), named here for callers outside the package."""
        return alter_partition(self, req)

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

    # ------------------------------------------------------------------------- preferred leaders

    def _elect_leaders(self, req: ElectLeadersRequest) -> ElectLeadersResponse:
        ctx = self.ctx
        assert ctx is not None
        tps = [tp for tp, _ in ctx.partitions()] if req.partitions is None else list(req.partitions)
        batch = ControllerBrokerRequestBatch()
        if req.election_type == PREFERRED:
            codes = self.partition_state_machine.elect_preferred(tps, batch, reason="elect_leaders")
        elif req.election_type == UNCLEAN:
            codes = self.partition_state_machine.elect_unclean(tps, batch, reason="elect_leaders")
        else:
            return ElectLeadersResponse(error_code=InvalidRequestError.code)
        self.channel.send_batch(batch)
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
        batch = ControllerBrokerRequestBatch()
        self.partition_state_machine.elect_preferred(tps, batch, reason="admin_preferred_replica_election")
        self.channel.send_batch(batch)
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
        batch = ControllerBrokerRequestBatch()
        for broker, tps in sorted(by_preferred.items()):
            not_led = [tp for tp in tps if (st := ctx.info(tp).state) is not None and st.leader != broker]
            ratio = len(not_led) / len(tps)
            if not leader_imbalance_exceeded(len(not_led), len(tps), pct) or broker not in ctx.live_brokers:
                continue
            self._log("leader_imbalance", broker=broker, ratio=round(ratio, 4), partitions=len(tps))
            self.partition_state_machine.elect_preferred(not_led, batch, reason="auto_leader_rebalance")
        self.channel.send_batch(batch)

    # ------------------------------------------------------------------------------ DeleteTopics

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
                if config_flag(self.config["delete.topic.enable"]):
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
