"""``Cluster``: N kafkalite brokers and a ZooKeeper node on one ``SimNetwork``, for notebooks and tests.

Everything runs in virtual time: ``create_topic`` sends CreateTopics to the controller and runs the simulation
until every partition has a leader that knows it; faults (crash, pause, cut) are the network's; readers
(``leader``, ``isr``, ``partition_state``) look at ZooKeeper, the source of truth for the controller's
decisions, while ``high_watermark``, ``log_end_offsets`` and ``read_all`` look at the brokers' replicas.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkalite.broker.server import KafkaBroker
from kafkalite.client.consumer import Consumer
from kafkalite.client.producer import Producer
from kafkalite.coordination import paths
from kafkalite.coordination.snapshot import keep_snapshot
from kafkalite.coordination.store import CoordinationStore, NoNode
from kafkalite.coordination.zk_node import ZK_NODE_ID, ZkNode
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptRecordError,
    KafkaError,
    NotCoordinatorError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkalite.net.sim import BaseNode, Event, SimNetwork
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    ConfigResourceType,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    IncrementalAlterConfigsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ReplicaAssignment,
    RequestEnvelope,
    TopicPartition,
)
from kafkalite.protocol.group import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

BROKER_TICK_MS = 100
ZK_TICK_MS = 100


class _Admin(BaseNode):
    """The facade's own client on the network (Kafka's AdminClient, reduced to request/answer)."""

    def __init__(self) -> None:
        self.answers: dict[int, Any] = {}
        self._cid = 0

    def request(self, dst: Any, req: Any) -> int:
        self._cid += 1
        self.send(dst, RequestEnvelope(self._cid, "admin", req))
        return self._cid

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        cid = getattr(msg, "correlation_id", None)
        if cid is not None:
            self.answers[cid] = msg.response


class Cluster:
    """A simulated Kafka cluster (ZooKeeper mode): brokers 1..N, the node ``"zk"``, clients you add.

    ``config`` holds broker keys shared by every broker. ``racks`` gives broker ``i`` (1-based) the
    ``broker.rack`` ``racks[i - 1]`` (None for no rack), e.g. ``Cluster(6, racks=["a", "a", "b", "b",
    "c", "c"])``; new topics and partitions are then placed rack-aware. It overrides a ``broker.rack`` in
    ``config``.

    ``file_ops`` is the door every broker's storage writes through: a ``DiskFaults`` gives a broker's log
    dir a full or failing disk (``under=cluster.dir / "broker-2"``). ``log_dirs_per_broker`` > 1 gives each
    broker that many log dirs (``broker-N/dir-I``, Kafka's ``log.dirs``).

    ``start_ms`` starts the virtual clock there (the wire server starts it at the wall clock's epoch
    milliseconds, so record timestamps and retention see real times); ``listeners`` gives brokers the
    ``(host, port)`` they register and that Metadata and FindCoordinator answers carry; ``endpoints``
    every listener a broker registers (``NAME://HOST:PORT``, the first matching ``listeners``).

    ``store_dir``: where the ZooKeeper node keeps its znodes (``store.snapshot``, as ZooKeeper's
    ``dataDir``), so a cluster built again on the same ``dir`` and ``store_dir`` finds its topics,
    configs, ACLs, SCRAM users and producer-id block; None keeps them in memory only. A snapshot that
    cannot be read raises ``StoreSnapshotError``.

    ``lock_log_dirs``: each broker holds ``<dir>/.lock`` in its log dirs while it runs, as Kafka's brokers
    do (the TCP server sets it); a dir another broker holds raises ``LogDirInUseError``.
    """

    def __init__(
        self,
        brokers: int = 3,
        seed: int = 0,
        dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        topic_defaults: Mapping[str, Any] | None = None,
        latency_ms: int = 1,
        *,
        log_messages: str = "none",
        racks: Sequence[str | None] | None = None,
        start_ms: int = 0,
        listeners: Mapping[int, tuple[str, int]] | None = None,
        endpoints: Mapping[int, tuple[str, ...]] | None = None,
        store_dir: str | Path | None = None,
        file_ops: FileOps = OS_FILE_OPS,
        log_dirs_per_broker: int = 1,
        lock_log_dirs: bool = False,
    ) -> None:
        if racks is not None and (isinstance(racks, str) or len(racks) != brokers):
            raise ValueError(f"racks needs one entry per broker ({brokers}), got {racks!r}")
        self.net = SimNetwork(
            seed,
            latency_ms=latency_ms,
            log_messages=log_messages,
            start_ms=start_ms,  # type: ignore[arg-type]
        )
        self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-") if dir is None else None
        self.dir = Path(self._tmp.name if self._tmp is not None else dir)  # type: ignore[arg-type]
        self.topic_defaults = dict(topic_defaults or {})
        store = None
        if store_dir is not None:
            store = CoordinationStore(self.net.clock)
            keep_snapshot(store, Path(store_dir))
        self.zk: ZkNode = self.net.add_node(ZK_NODE_ID, ZkNode(store), tick_ms=ZK_TICK_MS)
        self.brokers: dict[int, KafkaBroker] = {}
        for b in range(1, brokers + 1):
            props = dict(config or {})
            if racks is not None:
                props["broker.rack"] = racks[b - 1]
            host, port = (listeners or {}).get(b, (None, 9092))
            home = self.dir / f"broker-{b}"
            dirs = (
                [home]
                if log_dirs_per_broker <= 1
                else [home / f"dir-{i}" for i in range(log_dirs_per_broker)]
            )
            node = KafkaBroker(
                b,
                dirs,
                props,
                host=host,
                port=port,
                endpoints=(endpoints or {}).get(b),
                file_ops=file_ops,
                lock_log_dirs=lock_log_dirs,
            )
            self.brokers[b] = self.net.add_node(b, node, tick_ms=BROKER_TICK_MS)
        self._admin: _Admin = self.net.add_node("admin", _Admin())
        self._clients = 0
        ok = self.run_until(
            lambda: self.controller() is not None and all(x.registered for x in self.brokers.values()), 10_000
        )
        if not ok:
            raise RuntimeError("the cluster did not elect a controller")

    # ----------------------------------------------------------------------------------- admin

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        replica_assignment: Mapping[int, Iterable[int]] | None = None,
        timeout_ms: int = 30_000,
    ) -> dict[int, tuple[int, ...]]:
        """Create a topic through the controller and wait until every partition has a working leader.

        ``replica_assignment`` (partition -> broker ids, the first one preferred) places the replicas by
        hand, as ``kafka-topics.sh --replica-assignment`` does; ``partitions`` and
        ``replication_factor`` must then agree with it. Returns the assignment; raises the Kafka error
        (e.g. INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT) on failure."""
        merged = {**self.topic_defaults, **(config or {})}
        configs = tuple((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in merged.items())
        if replica_assignment is None:
            topic = CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor, configs=configs
            )
        else:
            plan = {p: tuple(ids) for p, ids in replica_assignment.items()}
            if len(plan) != partitions or any(len(ids) != replication_factor for ids in plan.values()):
                raise ValueError(
                    f"replica_assignment {plan} does not give {partitions} partitions "
                    f"{replication_factor} replicas each"
                )
            topic = CreatableTopic(
                name=name,
                assignments=tuple(ReplicaAssignment(partition=p, broker_ids=ids) for p, ids in plan.items()),
                configs=configs,
            )
        resp = self.request(self.controller(), CreateTopicsRequest(topics=(topic,)), timeout_ms)
        result = resp.topics[0]
        if result.error_code:
            cls = error_for_code(result.error_code) or KafkaError
            raise cls(result.error_message or "")
        ok = self.run_until(
            lambda: all(self._partition_ready(name, p) for p in range(partitions)), timeout_ms
        )
        if not ok:
            raise RequestTimedOutError(
                f"topic {name} has no leader for every partition after {timeout_ms} ms"
            )
        return self._assignment(name, partitions)

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Iterable[Iterable[int]] | None = None,
        *,
        timeout_ms: int = 30_000,
    ) -> dict[int, tuple[int, ...]]:
        """Grow ``name`` to ``count`` partitions (Kafka's CreatePartitions) and wait until every new one has
        a working leader. Returns the whole assignment; raises the Kafka error (e.g. INVALID_PARTITIONS)."""
        plan = None if assignments is None else tuple(tuple(r) for r in assignments)
        req = CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name=name, count=count, assignments=plan),)
        )
        result = self.request(self.controller(), req, timeout_ms).results[0]
        if result.error_code:
            cls = error_for_code(result.error_code) or KafkaError
            raise cls(result.error_message or "")
        if not self.run_until(lambda: all(self._partition_ready(name, p) for p in range(count)), timeout_ms):
            raise RequestTimedOutError(
                f"topic {name} has no leader for every partition after {timeout_ms} ms"
            )
        return self._assignment(name, count)

    def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> None:
        """Kafka's DeleteTopics through the controller; waits until every replica has removed its log and
        the topic's znodes are gone (a topic of that name can then be created again)."""
        resp = self.request(
            self.controller(), DeleteTopicsRequest(topic_names=(name,), timeout_ms=timeout_ms)
        )
        code = resp.topics[0].error_code
        if code:
            raise (error_for_code(code) or KafkaError)(
                resp.topics[0].error_message or f"DeleteTopics {name!r}"
            )
        if not self.run_until(lambda: self.store.exists(paths.topic_path(name)) is None, timeout_ms):
            raise RequestTimedOutError(f"topic {name} is still being deleted after {timeout_ms} ms")

    def delete_records(
        self, topic: str, offsets: Mapping[int, int], *, timeout_ms: int = 30_000
    ) -> dict[int, Any]:
        """Kafka's DeleteRecords: move each partition's log start offset to ``offsets[p]`` (-1: its high
        watermark), sent to each partition's leader. Returns the per-partition answers (low watermark and
        error code)."""
        out: dict[int, Any] = {}
        for p, off in offsets.items():
            tp = TopicPartition(topic, p)
            req = DeleteRecordsRequest(
                partitions=(DeleteRecordsPartition(tp=tp, offset=off),), timeout_ms=timeout_ms
            )
            out[p] = self.request(self.leader(topic, p), req, timeout_ms + 1000).partitions[0]
        return out

    def describe_configs(self, topic: str, *, synonyms: bool = False) -> dict[str, Any]:
        """Kafka's DescribeConfigs for one topic: key -> ``DescribedConfig`` (value, source, synonyms)."""
        res = DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name=topic)
        req = DescribeConfigsRequest(resources=(res,), include_synonyms=synonyms)
        result = self.request(self._any_live_broker(), req).results[0]
        if result.error_code:
            raise (error_for_code(result.error_code) or KafkaError)(result.error_message or "")
        return {c.name: c for c in result.configs}

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, Any] | None = None,  # noqa: A002 - Kafka's operation name
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Kafka's IncrementalAlterConfigs on one topic (SET and DELETE), then run until every broker has
        handled the change notification. Raises the Kafka error (e.g. INVALID_CONFIG)."""
        ops = [
            AlterableConfig(name=k, value=str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (set or {}).items()
        ]
        ops += [AlterableConfig(name=k, value=None, op=AlterConfigOp.DELETE) for k in delete]
        res = AlterConfigsResource(
            resource_type=ConfigResourceType.TOPIC, resource_name=topic, configs=tuple(ops)
        )
        req = IncrementalAlterConfigsRequest(resources=(res,), validate_only=validate_only)
        result = self.request(self._any_live_broker(), req).results[0]
        if result.error_code:
            raise (error_for_code(result.error_code) or KafkaError)(result.error_message or "")
        self.run_for(10)  # the /config/changes watches fire on every broker

    def request(self, broker: int | None, req: Any, timeout_ms: int = 30_000) -> Any:
        """Send ``req`` to ``broker`` from the admin client and run until the answer arrives."""
        if broker is None:
            raise RequestTimedOutError("no controller")
        cid = self._admin.request(broker, req)
        if not self.run_until(lambda: cid in self._admin.answers, timeout_ms):
            raise RequestTimedOutError(f"no answer from broker {broker} to {type(req).__name__}")
        return self._admin.answers.pop(cid)

    def describe_log_dirs(
        self, broker: int, partitions: Iterable[TopicPartition] | None = None
    ) -> DescribeLogDirsResponse:
        """DescribeLogDirs at ``broker`` (None: every partition it hosts)."""
        req = DescribeLogDirsRequest(partitions=None if partitions is None else tuple(partitions))
        return self.request(broker, req)

    def alter_replica_log_dirs(
        self, broker: int, targets: Mapping[TopicPartition, str | Path]
    ) -> dict[TopicPartition, int]:
        """AlterReplicaLogDirs at ``broker``: move each replica to its dir; each partition's error code."""
        by_dir: dict[str, list[TopicPartition]] = {}
        for tp, d in targets.items():
            by_dir.setdefault(str(d), []).append(tp)
        req = AlterReplicaLogDirsRequest(
            dirs=tuple(AlterReplicaLogDir(path=d, partitions=tuple(tps)) for d, tps in by_dir.items())
        )
        resp = self.request(broker, req)
        return {r.tp: r.error_code for r in resp.results}

    def _partition_ready(self, topic: str, p: int) -> bool:
        st = self.partition_state(topic, p)
        if st is None or st.leader < 0:
            return False
        tp = TopicPartition(topic, p)
        leader = self.brokers[st.leader]
        if leader.rm is None or not self.net.is_up(st.leader):
            return False
        part = leader.rm.partition_or_none(tp)
        if part is None or not part.is_leader or part.leader_epoch != st.leader_epoch:
            return False
        return all(
            b.cache.partitions.get(tp) is not None
            for bid, b in self.brokers.items()
            if self.net.is_up(bid) and b.registered
        )

    def producer(
        self, client_id: str | None = None, config: Mapping[str, Any] | None = None, **kafka_config: Any
    ):
        """A ``Producer`` on the network; config by Kafka names (``config={"acks": "all"}``) or keywords with
        underscores for dots (``linger_ms=0``)."""
        self._clients += 1
        cid = client_id or f"producer-{self._clients}"
        props = {**{k.replace("_", "."): v for k, v in kafka_config.items()}, **(config or {})}
        return self.net.add_node(cid, Producer(cid, sorted(self.brokers), props))

    def consumer(
        self, client_id: str | None = None, config: Mapping[str, Any] | None = None, **kafka_config: Any
    ):
        """A ``Consumer`` on the network, configured like ``producer()``. Unlike a producer, its ``poll``
        (and offset lookups) run the simulation themselves, like a blocking KafkaConsumer.poll."""
        self._clients += 1
        cid = client_id or f"consumer-{self._clients}"
        props = {**{k.replace("_", "."): v for k, v in kafka_config.items()}, **(config or {})}
        return self.net.add_node(cid, Consumer(cid, sorted(self.brokers), props))

    # ----------------------------------------------------------------------------------- faults

    def crash(self, broker: int, lose_unflushed: bool = False) -> None:
        self.brokers[broker].lose_unflushed_on_crash = lose_unflushed
        self.net.crash(broker)

    def shutdown(self, broker: int, *, controlled: bool = True, timeout_ms: int = 60_000) -> None:
        """Stop ``broker`` cleanly (logs closed, session closed). ``controlled``: Kafka's controlled
        shutdown first moves its leaderships to other ISR members. ``restart`` brings it back."""
        node = self.brokers[broker]
        done: list[bool] = []
        if controlled:
            node.controlled_shutdown(lambda: done.append(True))
            if not self.run_until(lambda: bool(done), timeout_ms):
                raise RequestTimedOutError(f"broker {broker} did not finish its controlled shutdown")
        else:
            node.shutdown()
        self.net.crash(broker)  # down for the network; nothing left in memory to lose

    def restart(self, broker: int) -> None:
        self.net.restart(broker)

    def pause(self, node: Any, ms: int | None = None) -> None:
        self.net.pause(node, ms)

    def resume(self, node: Any) -> None:
        self.net.resume(node)

    def cut(self, a: Any, b: Any, one_way: bool = False) -> None:
        self.net.cut(a, b, one_way)

    def heal(self, a: Any, b: Any) -> None:
        self.net.heal(a, b)

    def partition(self, groups: Iterable[Iterable[Any]]) -> None:
        self.net.partition(groups)

    def heal_all(self) -> None:
        self.net.heal_all()

    def run_for(self, ms: int) -> None:
        self.net.run_for(ms)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int = 30_000) -> bool:
        return self.net.run_until(predicate, timeout_ms)

    # ---------------------------------------------------------------------------------- readers

    @property
    def store(self):  # noqa: ANN201 - CoordinationStore
        return self.zk.store

    def controller(self) -> int | None:
        """The broker id in ``/controller`` (None while there is none)."""
        try:
            data, _ = self.store.get(paths.CONTROLLER)
        except NoNode:
            return None
        return paths.ControllerRegistration.decode(data).broker_id

    def controller_epoch(self) -> int:
        try:
            return paths.decode_controller_epoch(self.store.get(paths.CONTROLLER_EPOCH)[0])
        except NoNode:
            return 0

    def partition_state(self, topic: str, partition: int) -> paths.PartitionState | None:
        """The state znode (leader, leader epoch, ISR, controller epoch), None before it exists."""
        try:
            data, _ = self.store.get(paths.partition_state_path(topic, partition))
        except NoNode:
            return None
        return paths.PartitionState.decode(data)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        data, _ = self.store.get(paths.topic_path(topic))
        return tuple(paths.TopicAssignment.decode(data).partitions[partition])

    def _assignment(self, topic: str, count: int) -> dict[int, tuple[int, ...]]:
        """Replicas of partitions ``0..count-1``, the assignment znode decoded once (not once each)."""
        data, _ = self.store.get(paths.topic_path(topic))
        parts = paths.TopicAssignment.decode(data).partitions
        return {p: tuple(parts[p]) for p in range(count)}

    def leader(self, topic: str, partition: int) -> int | None:
        st = self.partition_state(topic, partition)
        return None if st is None or st.leader < 0 else st.leader

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        st = self.partition_state(topic, partition)
        return () if st is None else st.isr

    def replica(self, broker: int, topic: str, partition: int) -> Any:
        """``broker``'s ``Partition`` object for the partition (its log, HW, ISR view), or None while the
        broker is down or holds no replica of it."""
        b = self.brokers[broker]
        if b.rm is None or not self.net.is_up(broker):
            return None
        return b.rm.partition_or_none(TopicPartition(topic, partition))

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """The leader's high watermark (None without a live leader)."""
        leader = self.leader(topic, partition)
        part = None if leader is None else self.replica(leader, topic, partition)
        return None if part is None else part.high_watermark

    def log_end_offsets(self, topic: str, partition: int) -> dict[int, int]:
        """LEO of each live replica."""
        out = {}
        for b in self.replicas(topic, partition):
            part = self.replica(b, topic, partition)
            if part is not None:
                out[b] = part.log_end_offset
        return out

    def read_all(self, topic: str) -> dict[int, list[Any]]:
        """Committed records (below the HW) of every partition, read from the leader's log."""
        data, _ = self.store.get(paths.topic_path(topic))
        out: dict[int, list[Any]] = {}
        for p in sorted(paths.TopicAssignment.decode(data).partitions):
            leader = self.leader(topic, p)
            part = None if leader is None else self.replica(leader, topic, p)
            out[p] = [] if part is None else list(part.log.iter_records(None, part.high_watermark))
        return out

    def checkpoint_high_watermarks(self) -> dict[int, Path]:
        """Write every live broker's ``replication-offset-checkpoint`` now (brokers do it every
        ``replica.high.watermark.checkpoint.interval.ms``), so that readers outside this process, such
        as the Spark source, see the current high watermarks. Returns broker id -> checkpoint path."""
        out = {}
        for bid, b in self.brokers.items():
            if self.net.is_up(bid) and b.rm is not None:
                b.rm.checkpoint_high_watermarks()
                out[bid] = b.rm.hw_checkpoint_path
        return out

    def replica_logs(self, topic: str, partition: int) -> dict[int, list[Any]]:
        """Every live replica's whole log (records), for the checker's divergence test."""
        out = {}
        for b in self.replicas(topic, partition):
            part = self.replica(b, topic, partition)
            if part is not None:
                records: list[Any] = []
                # A damaged batch (bit rot): what the replica can still serve is what precedes it.
                with contextlib.suppress(CorruptRecordError):
                    records.extend(part.log.iter_records())
                out[b] = records
        return out

    # ----------------------------------------------------------------------------------- groups

    def _any_live_broker(self) -> int | None:
        live = [
            b
            for b, node in self.brokers.items()
            if self.net.is_up(b) and not self.net.is_paused(b) and node.registered
        ]
        return live[0] if live else None

    def coordinator(self, group_id: str, timeout_ms: int = 30_000) -> int | None:
        """The broker coordinating ``group_id``, by FindCoordinator (which creates ``__consumer_offsets`` the
        first time); retried every 100 ms while the answer is COORDINATOR_NOT_AVAILABLE or names a broker that
        is down (metadata not updated yet). None on timeout."""
        deadline = self.net.now_ms() + timeout_ms
        while True:
            broker = self._any_live_broker()
            if broker is not None:
                try:
                    resp = self.request(broker, FindCoordinatorRequest(key=group_id), 5_000)
                except RequestTimedOutError:
                    resp = None
                if resp is not None and resp.error_code == 0 and self.net.is_up(resp.node_id):
                    return resp.node_id
            if self.net.now_ms() >= deadline:
                return None
            self.run_for(100)

    def _group_request(self, group_id: str, req: Any, timeout_ms: int = 30_000) -> Any:
        """Send a group request to the group's coordinator, retrying while it moves or loads."""
        retriable = {
            NotCoordinatorError.code,
            CoordinatorLoadInProgressError.code,
            CoordinatorNotAvailableError.code,
        }
        deadline = self.net.now_ms() + timeout_ms
        while True:
            broker = self.coordinator(group_id, max(deadline - self.net.now_ms(), 0))
            if broker is None:
                raise RequestTimedOutError(f"no coordinator for group {group_id!r}")
            try:
                resp = self.request(broker, req, max(deadline - self.net.now_ms(), 1))
            except RequestTimedOutError:
                if self.net.now_ms() >= deadline:
                    raise
                continue
            code = getattr(resp, "error_code", 0)
            for many in ("groups", "results"):  # DescribeGroups, DeleteGroups: one entry per group
                entries = getattr(resp, many, None)
                if entries and hasattr(entries[0], "error_code"):
                    code = entries[0].error_code
            if code not in retriable or self.net.now_ms() >= deadline:
                return resp
            self.run_for(100)

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets, as its coordinator answers OffsetFetch (all partitions)."""
        resp = self._group_request(group_id, OffsetFetchRequest(group_id=group_id))
        if resp.error_code:
            cls = error_for_code(resp.error_code) or KafkaError
            raise cls(f"OffsetFetch for group {group_id!r}")
        return {p.tp: p.committed_offset for p in resp.partitions if p.committed_offset >= 0}

    def describe_group(self, group_id: str) -> Any:
        """DescribeGroups from the coordinator: a ``DescribedGroup`` (state, protocol, members)."""
        resp = self._group_request(group_id, DescribeGroupsRequest(groups=(group_id,)))
        return resp.groups[0]

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups at the coordinator: the Empty group and its offsets go; raises Kafka's error
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND for an unknown group)."""
        code = self._group_request(group_id, DeleteGroupsRequest(groups=(group_id,))).results[0].error_code
        if code:
            raise (error_for_code(code) or KafkaError)(f"DeleteGroups for group {group_id!r}")

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, as the controller's assignment says."""
        parts = sorted(p for t, p in (self._topic_partitions_of(topic)))
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return parts

    def _topic_partitions_of(self, topic: str) -> list[tuple[str, int]]:
        try:
            data, _ = self.store.get(paths.topic_path(topic))
        except NoNode:
            return []
        return [(topic, p) for p in paths.TopicAssignment.decode(data).partitions]

    def list_offsets(
        self, tps: Iterable[TopicPartition], timestamp: int, *, isolation_level: int = 0
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets at each partition's leader, as a consumer asks it: the offset for ``timestamp``
        (-2 earliest, -1 the high watermark, else the first record at or after it); None where no record
        below the high watermark is that late. ``isolation_level=1`` (read_committed): the last stable
        offset takes the high watermark's place."""
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            leader = self.leader(tp.topic, tp.partition)
            if leader is None:
                raise RuntimeError(f"partition {tp} has no live leader")
            req = ListOffsetsRequest(
                isolation_level=isolation_level,
                partitions=(ListOffsetsPartition(tp=tp, timestamp=timestamp),),
            )
            answer = self.request(leader, req).partitions[0]
            if answer.error_code:
                raise (error_for_code(answer.error_code) or KafkaError)(f"ListOffsets {tp}")
            out[tp] = None if answer.offset < 0 else answer.offset
        return out

    def offset_bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, high watermark) of each partition, from its leader."""
        tps = list(tps)
        start, end = self.list_offsets(tps, EARLIEST_TIMESTAMP), self.list_offsets(tps, LATEST_TIMESTAMP)
        return {tp: (start[tp] or 0, end[tp] or 0) for tp in tps}

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit as an admin tool sends it (no member): only an Empty group accepts it."""
        req = OffsetCommitRequest(
            group_id=group_id,
            partitions=tuple(
                OffsetCommitPartition(tp=tp, committed_offset=off) for tp, off in sorted(offsets.items())
            ),
        )
        for p in self._group_request(group_id, req).partitions:
            if p.error_code:
                raise (error_for_code(p.error_code) or KafkaError)(
                    f"OffsetCommit of {p.tp} for group {group_id!r}"
                )

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[Any]:
        """ListGroups from every live broker (each lists the groups it coordinates), sorted by group id;
        ``types``: ``classic`` and/or ``consumer`` (KIP-848's groups)."""
        out: dict[str, Any] = {}
        for b, node in sorted(self.brokers.items()):
            if not self.net.is_up(b) or not node.registered:
                continue
            resp = self.request(b, ListGroupsRequest(states_filter=tuple(states), types_filter=tuple(types)))
            for g in resp.groups:
                out[g.group_id] = g
        return [out[g] for g in sorted(out)]

    def events(self, kind: str | Collection[str] | None = None, node: Any = None) -> list[Event]:
        return self.net.events(kind, node)

    def format_log(self, kind: str | Collection[str] | None = None, node: Any = None) -> str:
        return self.net.format_log(kind, node)

    def close(self) -> None:
        """Shut every live broker down cleanly and remove the temporary directory."""
        for bid, b in self.brokers.items():
            if self.net.is_up(bid) and b.rm is not None:
                b.shutdown()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
