"""Kafka's ``ReplicaManager``: every partition replica a broker hosts, and the requests that touch them.

Sans-I/O: requests come in through ``handle_*`` / ``on_response`` / ``tick``; answers and the broker's own
requests (follower fetches, OffsetForLeaderEpoch, ListOffsets, AlterPartition) go out through the injected
``send(dst, envelope)``; waiting uses ``set_timer(delay_ms, callback)``; time comes from ``clock``. Nothing
here opens a socket, starts a thread, sleeps or reads the wall clock.

What it does, as Kafka does: leaders append with their leader epoch and answer produce requests after the
append (acks=1), after the ISR has it (acks=-1, via ``DelayedProduce``) or never (acks=0); followers pull
(``ReplicaFetcher``); the leader tracks follower LEOs and ``lastCaughtUpTimeMs``, moves the HW, and asks the
controller to shrink or expand the ISR (AlterPartition, KIP-497); consumers read below the HW, optionally
long-polling (``DelayedFetch``); HWs are checkpointed to ``replication-offset-checkpoint``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafkalite.broker.delayed import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    ProducePartitionStatus,
)
from kafkalite.broker.fetcher import ReplicaFetcher
from kafkalite.broker.log_manager import LogManager
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.partition import Partition
from kafkalite.common.acks import Acks
from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.config.broker import BrokerConfig
from kafkalite.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RequestTimedOutError,
    StaleControllerEpochError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    INTERNAL_TOPICS,
    LATEST_TIMESTAMP,
    NO_ERROR,
    AbortedTransaction,
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    EpochEndOffset,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    PartitionError,
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    RecordError,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    TxnMarkerResult,
    UpdateMetadataRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkalite.records import build_control_batch
from kafkalite.storage.checkpoint import OffsetCheckpoint
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_failure_channel import LogDirFailureChannel

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"

logger = logging.getLogger("kafkalite.broker")

LeadershipListener = Callable[[list[TopicPartition], list[TopicPartition]], None]
AppendCallback = Callable[[ProducePartitionResponse], None]


class _LocalReply:
    """Destination of an internal append (``append_records``): the answer goes to a callback, not the network."""

    __slots__ = ("callback",)

    def __init__(self, callback: AppendCallback) -> None:
        self.callback = callback


# How soon an AlterPartition proposal left unanswered (timeout, top-level error) is sent again (Kafka: 50 ms).
ALTER_PARTITION_RETRY_MS = 50


class ReplicaManager:
    """All replicas on one broker; the module docstring says what it does and how."""

    def __init__(
        self,
        broker_id: int,
        log_dir: Path | Sequence[Path],
        config: BrokerConfig,
        *,
        clock: Any,
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], None]], int],
        cancel_timer: Callable[[int], Any],
        controller_id: Callable[[], int | None],
        log_event: Callable[..., None],
        file_ops: FileOps = OS_FILE_OPS,
        metadata_cache: MetadataCache | None = None,
    ) -> None:
        self.broker_id = broker_id
        # The broker's cache (it applies UpdateMetadata); a fresh one when the replica manager runs alone.
        self.metadata_cache = metadata_cache if metadata_cache is not None else MetadataCache()
        self._client_id = f"broker-{broker_id}"  # on every request this broker sends
        # Kafka's log.dirs: one or more directories (JBOD); a partition lives in one of them.
        dirs = [log_dir] if isinstance(log_dir, str | Path) else list(log_dir)
        self.log_dirs: list[Path] = [Path(d).absolute() for d in dirs]
        self.log_dir = self.log_dirs[0]
        self.file_ops = file_ops
        self.on_log_dir_event: Callable[[], None] | None = None
        """Called after a log dir went offline while others remain: the broker tells the controller."""
        self.on_halt: Callable[[str], None] | None = None
        """Called when the last log dir went offline: the broker must stop (Kafka halts the process)."""
        self.config = BrokerConfig.coerce(config)
        self.clock = clock
        self._send = send
        self._set_timer_fn = set_timer
        self._cancel_timer_fn = cancel_timer
        self._controller_id = controller_id
        self._log_event = log_event
        self._topic_configs: dict[str, dict[str, Any]] = {}
        self._min_isr_cache: dict[str, int] = {}  # follows _topic_configs (set_topic_config clears it)
        self.on_leadership_change: LeadershipListener | None = None
        self.on_txn_marker: Callable[[TopicPartition, int, bool], None] | None = None
        """Called when a transaction marker was written here (the group coordinator completes the
        producer's transactional offsets in ``__consumer_offsets``)."""
        """Called with (partitions this broker now leads, partitions it stopped leading) after a
        LeaderAndIsr or StopReplica changed them: the group coordinator loads or unloads its groups."""
        self._reset_memory()

    def _reset_memory(self) -> None:
        # A restart is a new process: every dir is tried again (the disk may have been freed or replaced).
        self.failure_channel = LogDirFailureChannel(self._on_log_dir_failed)
        self.offline_dirs: dict[Path, str] = {}  # handled failures: dir -> why
        self._offline_partitions: dict[TopicPartition, Path] = {}
        self._reported_corruption: set[tuple[TopicPartition, str, int]] = set()
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(d, f"Error while creating log dir {d}", e)
        self._partitions: dict[TopicPartition, Partition] = {}
        self._last_producer_expiry_ms = 0
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._delayed_produce: dict[TopicPartition, list[DelayedProduce]] = {}
        self._delayed_fetch: dict[TopicPartition, list[DelayedFetch]] = {}
        self._delayed_delete: dict[TopicPartition, list[DelayedDeleteRecords]] = {}
        self._pending: dict[int, tuple[Any, Any, Any, int | None]] = {}  # cid -> (owner, dst, request, timer)
        self._timers: set[int] = set()
        self._next_cid = 0
        self._controller_epoch = -1
        self._last_hw_checkpoint_ms = self.clock.now_ms()
        # Kafka's isr-expiration task: first run at start-up, then every replica.lag.time.max.ms / 2
        self._next_isr_check_ms = self.clock.now_ms()
        self._hw_checkpoint: dict[Path, dict[tuple[str, int], int]] = self._read_hw_checkpoints()
        self.log_manager = LogManager(self.config, self.clock.now_ms(), self._event)
        self._stopped = False

    # ============================================================================= small plumbing
    def _event(self, event: str, **fields: Any) -> None:
        self._log_event(event, **fields)

    def _set_timer(self, delay_ms: int, callback: Callable[[int], None]) -> int:
        holder: list[int] = []

        def fire(now_ms: int) -> None:
            self._timers.discard(holder[0])
            callback(now_ms)

        tid = self._set_timer_fn(max(0, delay_ms), fire)
        holder.append(tid)
        self._timers.add(tid)
        return tid

    def _cancel_timer(self, tid: int | None) -> None:
        if tid is not None and tid in self._timers:
            self._timers.discard(tid)
            self._cancel_timer_fn(tid)

    def _send_request(self, dst: Any, request: Any, owner: Any, timeout_ms: int | None = None) -> int:
        """Send one of our own requests; ``owner.on_response(cid, request, response)`` gets the answer."""
        self._next_cid += 1
        cid = self._next_cid
        timer = None
        if timeout_ms is not None:
            timer = self._set_timer(timeout_ms, lambda _now, c=cid: self._request_timed_out(c))
        self._pending[cid] = (owner, dst, request, timer)
        self._send(dst, RequestEnvelope(cid, self._client_id, request))
        return cid

    def _request_timed_out(self, cid: int) -> None:
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        owner, _dst, request, _t = entry
        owner.on_timeout(cid, request)

    def on_response(self, src: Any, env: ResponseEnvelope) -> bool:
        """An answer to one of this broker's requests; False if it is not ours (or came too late)."""
        entry = self._pending.get(env.correlation_id)
        if entry is None or entry[1] != src:
            return False
        del self._pending[env.correlation_id]
        owner, _dst, request, timer = entry
        self._cancel_timer(timer)
        try:
            owner.on_response(env.correlation_id, request, env.response)
        except KafkaStorageError as e:
            # A follower's write (append, truncation) hit its failed disk: the dir is already reported and
            # goes offline; the answer itself needs nothing more.
            self._event("follower_storage_error", error=str(e))
        return True

    # ============================================================================= partitions
    def partition(self, tp: TopicPartition) -> Partition:
        p = self._partitions.get(tp)
        if p is None:
            raise UnknownTopicOrPartitionError(f"broker {self.broker_id} hosts no replica of {tp}")
        return p

    def partition_or_none(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> list[Partition]:
        return [self._partitions[tp] for tp in sorted(self._partitions)]

    def set_topic_config(self, topic: str, props: dict[str, Any]) -> None:
        """Topic-level overrides (``min.insync.replicas``, LogConfig keys) as the controller stores them."""
        self._topic_configs[topic] = dict(props)
        self._min_isr_cache.pop(topic, None)
        tcfg = self.config.topic_config(props)
        for p in self._partitions.values():
            if p.tp.topic == topic:
                p.log.update_config({k: v for k, v in tcfg.log.to_props().items()})

    def _min_isr(self, topic: str) -> int:
        # Cached: parsing the topic config on every produce request and every acks=all check was a
        # measurable share of the produce path (kafkalite bench produce).
        mir = self._min_isr_cache.get(topic)
        if mir is None:
            mir = self.config.topic_config(self._topic_configs.get(topic)).min_insync_replicas
            self._min_isr_cache[topic] = mir
        return mir

    def _maybe_increment_hw(self, p: Partition) -> None:
        """Advance ``p``'s HW by Kafka's rule (see ``Partition.maybe_increment_hw``), then what waits on it."""
        live = self.metadata_cache.live_brokers
        if p.maybe_increment_hw(
            self.clock.now_ms(),
            self.config.replica_lag_time_max_ms,
            self._min_isr(p.tp.topic),
            (lambda b: b in live) if live else None,
        ):
            self._on_hw_moved(p)

    def _dir_for(self, tp: TopicPartition) -> Path:
        """The log dir holding ``tp``: where its directory already is, else the online dir with the fewest
        partitions (Kafka's placement). ``KafkaStorageError`` when that dir (or every dir) is offline."""
        name = f"{tp.topic}-{tp.partition}"
        offline = self.failure_channel.offline
        for d in self.log_dirs:
            if (d / name).is_dir():
                if d in offline:
                    raise KafkaStorageError(f"the log dir {d} holding {tp} is offline: {offline[d]}")
                return d
        online = [d for d in self.log_dirs if d not in offline]
        if not online:
            raise KafkaStorageError(f"no online log dir on broker {self.broker_id} to create {tp} in")
        counts = {d: 0 for d in online}
        for p in self._partitions.values():
            parent = p.log.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(online, key=lambda d: counts[d])

    def _get_or_create(self, tp: TopicPartition) -> Partition:
        p = self._partitions.get(tp)
        if p is None:
            if tp in self._offline_partitions:
                raise KafkaStorageError(f"{tp} is in the offline log dir {self._offline_partitions[tp]}")
            log_config = self.config.log_config(self._topic_configs.get(tp.topic))
            d = self._dir_for(tp)
            log = Log.open(
                d / f"{tp.topic}-{tp.partition}",
                log_config,
                clock=self.clock,
                file_ops=self.file_ops,
                failure_channel=self.failure_channel,
            )
            hw = self._hw_checkpoint.get(d, {}).get((tp.topic, tp.partition), 0)
            # The injected logger itself, not ``self._event``: one call layer less on a per-batch path.
            p = Partition(tp, log, broker_id=self.broker_id, high_watermark=hw, log_event=self._log_event)
            self._partitions[tp] = p
        return p

    # ============================================================================= controller requests
    def handle_leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Become leader or follower for each partition whose state is newer than ours."""
        if req.controller_epoch < self._controller_epoch:
            self._event("stale_controller", request="LeaderAndIsr", epoch=req.controller_epoch)
            return LeaderAndIsrResponse(error_code=StaleControllerEpochError.code)
        self._controller_epoch = req.controller_epoch
        errors = []
        now = self.clock.now_ms()
        elected: list[TopicPartition] = []
        resigned: list[TopicPartition] = []
        for state in req.partition_states:
            tp = state.tp
            if self.broker_id not in state.replicas:
                errors.append(PartitionError(tp=tp, error_code=UnknownTopicOrPartitionError.code))
                continue
            existing = self._partitions.get(tp)
            if existing is not None and not (
                state.leader_epoch > existing.leader_epoch
                or (
                    state.leader_epoch == existing.leader_epoch
                    and state.partition_epoch > existing.partition_epoch
                )
            ):
                self._event(
                    "stale_leader_epoch", tp=str(tp), epoch=state.leader_epoch, current=existing.leader_epoch
                )
                errors.append(PartitionError(tp=tp, error_code=FencedLeaderEpochError.code))
                continue
            try:
                p = self._get_or_create(tp)
                was_leader, old_epoch = p.is_leader, p.leader_epoch
                if state.leader == self.broker_id:
                    self._make_leader(p, state, now)
                    if not was_leader or old_epoch != p.leader_epoch:
                        elected.append(tp)
                else:
                    self._make_follower(p, state)
                    if was_leader:
                        resigned.append(tp)
                errors.append(PartitionError(tp=tp, error_code=NO_ERROR))
            except KafkaError as e:
                errors.append(PartitionError(tp=tp, error_code=e.code))
            except OSError as e:
                # e.g. out of file descriptors or a name the file system refuses: this replica cannot
                # open its log, the others go on (Kafka answers KAFKA_STORAGE_ERROR for it)
                self._event("replica_storage_error", tp=str(tp), error=f"{type(e).__name__}: {e}")
                errors.append(PartitionError(tp=tp, error_code=KafkaStorageError.code))
        self._notify_leadership(elected, resigned)
        return LeaderAndIsrResponse(partition_errors=tuple(errors))

    def _notify_leadership(self, elected: list[TopicPartition], resigned: list[TopicPartition]) -> None:
        if self.on_leadership_change is not None and (elected or resigned):
            self.on_leadership_change(elected, resigned)

    def _make_leader(self, p: Partition, state: Any, now: int) -> None:
        self._remove_from_fetcher(p.tp)
        same_term = p.is_leader and p.leader_epoch == state.leader_epoch
        if same_term:  # only ISR/replicas changed (partition epoch bump)
            p.apply_state(state)
        else:
            p.make_leader(state, now)
        self._maybe_increment_hw(p)
        self._try_complete_fetches(p.tp)
        self._try_complete_produces(p.tp)

    def _make_follower(self, p: Partition, state: Any) -> None:
        same = not p.is_leader and p.leader_id == state.leader and p.leader_epoch == state.leader_epoch
        if same and self._fetcher_has(p.tp, state.leader):
            p.apply_state(state)
            return
        self._remove_from_fetcher(p.tp)
        p.make_follower(state)
        self._fail_delayed(p.tp)
        if self.config.truncate_by_leader_epoch:
            truncate = True
        else:
            # Pre-KIP-101: cut back to the high watermark (from replication-offset-checkpoint at startup).
            p.truncate_to(p.high_watermark, "high_watermark")
            truncate = False
        if state.leader >= 0:
            f = self._fetchers.get(state.leader)
            if f is None:
                f = self._fetchers[state.leader] = ReplicaFetcher(self, state.leader)
            f.add_partition(p.tp, p.log_end_offset, state.leader_epoch, truncate)

    def _fetcher_has(self, tp: TopicPartition, leader: int) -> bool:
        f = self._fetchers.get(leader)
        return f is not None and tp in f.partitions

    def _remove_from_fetcher(self, tp: TopicPartition) -> None:
        for leader, f in list(self._fetchers.items()):
            f.remove_partition(tp)
            if f.is_empty():
                f.stop()
                del self._fetchers[leader]

    def handle_stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse:
        if req.controller_epoch < self._controller_epoch:
            return StopReplicaResponse(error_code=StaleControllerEpochError.code)
        self._controller_epoch = req.controller_epoch
        errors = []
        resigned: list[TopicPartition] = []
        for st in req.partition_states:
            p = self._partitions.get(st.tp)
            if p is not None and st.leader_epoch >= 0 and st.leader_epoch < p.leader_epoch:
                errors.append(PartitionError(tp=st.tp, error_code=FencedLeaderEpochError.code))
                continue
            self._remove_from_fetcher(st.tp)
            self._fail_delayed(st.tp)
            if p is not None:
                if p.is_leader:
                    resigned.append(st.tp)
                p.leader_id = -1
                self._event("stop_replica", tp=str(st.tp), delete=st.delete_partition)
                if st.delete_partition:
                    del self._partitions[st.tp]
                    p.log.close()
                    shutil.rmtree(p.log.dir, ignore_errors=True)
                    for hws in self._hw_checkpoint.values():
                        hws.pop((st.tp.topic, st.tp.partition), None)
            elif st.delete_partition:
                # Not opened since this broker started (e.g. it was down when its topic was deleted).
                for d in self.log_dirs:
                    shutil.rmtree(d / f"{st.tp.topic}-{st.tp.partition}", ignore_errors=True)
                for hws in self._hw_checkpoint.values():
                    hws.pop((st.tp.topic, st.tp.partition), None)
            errors.append(PartitionError(tp=st.tp, error_code=NO_ERROR))
        self._notify_leadership([], resigned)
        return StopReplicaResponse(partition_errors=tuple(errors))

    def handle_update_metadata(self, req: UpdateMetadataRequest) -> None:
        """Note the controller epoch (it fences older LeaderAndIsr and StopReplica); the broker has
        applied ``req`` to the metadata cache this replica manager shares."""
        if req.controller_epoch >= self._controller_epoch:
            self._controller_epoch = req.controller_epoch

    # ============================================================================= produce
    def append_records(
        self,
        tp: TopicPartition,
        records: bytes,
        callback: AppendCallback,
        *,
        acks: int = -1,
        timeout_ms: int = 5000,
        client_id: str = "coordinator",
    ) -> None:
        """Internal append (Kafka's ``appendRecords`` from a coordinator): the produce path, acks included,
        with the partition's answer handed to ``callback`` instead of being sent over the network.
        With ``acks=-1`` the callback runs once the ISR has the batch (or on error/timeout)."""
        req = ProduceRequest(
            acks=acks, timeout_ms=timeout_ms, partitions=(ProducePartition(tp=tp, records=records),)
        )
        self.handle_produce(RequestEnvelope(0, client_id, req), _LocalReply(callback))

    def handle_write_txn_markers(self, env: RequestEnvelope, src: Any) -> None:
        """A transaction coordinator's COMMIT/ABORT markers: one control batch per partition, appended
        as the leader with acks=all (Kafka waits for the ISR before the coordinator completes the
        transaction); the answer lists each partition's outcome."""
        req: WriteTxnMarkersRequest = env.request  # type: ignore[assignment]
        results: list[dict[TopicPartition, int]] = [{} for _ in req.markers]
        waiting = sum(len(m.partitions) for m in req.markers)

        def reply() -> None:
            markers = tuple(
                TxnMarkerResult(
                    producer_id=m.producer_id,
                    partitions=tuple(PartitionError(tp=tp, error_code=r[tp]) for tp in m.partitions),
                )
                for m, r in zip(req.markers, results, strict=True)
            )
            self._send(src, env.reply(WriteTxnMarkersResponse(markers=markers)))

        if waiting == 0:
            reply()
            return
        left = [waiting]
        now = self.clock.now_ms()
        for i, m in enumerate(req.markers):
            batch = build_control_batch(
                m.committed, m.producer_id, m.producer_epoch, m.coordinator_epoch, now
            )
            for tp in m.partitions:

                def done(part: Any, i: int = i, tp: TopicPartition = tp, m: Any = m) -> None:
                    results[i][tp] = part.error_code
                    if part.error_code == NO_ERROR and self.on_txn_marker is not None:
                        self.on_txn_marker(tp, m.producer_id, m.committed)
                    left[0] -= 1
                    if left[0] == 0:
                        reply()

                self.append_records(tp, batch, done, acks=-1, client_id="txn-markers")

    def _reply(self, src: Any, env: RequestEnvelope, resp: ProduceResponse) -> None:
        if isinstance(src, _LocalReply):
            for part in resp.partitions:
                src.callback(part)
        else:
            self._send(src, env.reply(resp))

    def handle_produce(self, env: RequestEnvelope, src: Any) -> None:
        req: ProduceRequest = env.request  # type: ignore[assignment]
        if req.acks not in Acks.__members__.values():
            resp = ProduceResponse(
                partitions=tuple(
                    ProducePartitionResponse(tp=pp.tp, error_code=InvalidRequiredAcksError.code)
                    for pp in req.partitions
                )
            )
            self._reply(src, env, resp)
            return
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        done: dict[TopicPartition, tuple] = {}
        internal_allowed = isinstance(src, _LocalReply)  # only the broker's own coordinators
        for pp in req.partitions:
            p = self._partitions.get(pp.tp)
            try:
                if pp.tp.topic in INTERNAL_TOPICS and not internal_allowed:
                    raise InvalidTopicError(f"Cannot append to internal topic {pp.tp.topic}")
                if p is None:
                    raise self._missing(pp.tp)
                if not p.is_leader:
                    raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {pp.tp}")
                min_isr = min(self._min_isr(pp.tp.topic), len(p.replicas))  # effective (Kafka 3.7)
                if req.acks == Acks.ALL and len(p.isr) < min_isr:
                    raise NotEnoughReplicasError(
                        f"{pp.tp}: ISR {list(p.isr)} is smaller than min.insync.replicas={min_isr}"
                    )
                info = p.log.append(
                    pp.records,
                    leader_epoch=p.leader_epoch,
                    from_coordinator=internal_allowed,
                    from_client=not internal_allowed,
                )
            except KafkaError as e:
                done[pp.tp] = (e.code, -1, -1, *_refusal_detail(e))
                self._event("produce_error", tp=str(pp.tp), error=e.name, acks=req.acks)
                continue
            except Exception as e:  # noqa: BLE001 - a broker answers every request
                done[pp.tp] = (UnknownServerError.code, -1, -1, None, ())
                self._event("produce_error", tp=str(pp.tp), error=repr(e))
                continue
            p.event("leo", replica=self.broker_id, leo=p.log_end_offset)
            statuses[pp.tp] = ProducePartitionStatus(
                pp.tp, info.last_offset + 1, info.first_offset, p.log.log_start_offset
            )
            self._maybe_increment_hw(p)
            self._try_complete_fetches(pp.tp)
        if req.acks == Acks.NONE:
            if isinstance(src, _LocalReply):  # an internal caller still learns the local outcome
                self._reply(src, env, self._immediate_response(req, statuses, done))
            return
        op = DelayedProduce(env, src, statuses, done)
        if req.acks == Acks.LEADER or not statuses:
            for s in statuses.values():
                s.acks_pending = False
            self._complete_produce(op)
            return
        if self._check_produce(op):
            return
        op.timer_id = self._set_timer(req.timeout_ms, lambda _now: self._expire_produce(op))
        for tp in statuses:
            self._delayed_produce.setdefault(tp, []).append(op)

    def _check_produce(self, op: DelayedProduce) -> bool:
        """Kafka's DelayedProduce.tryComplete: each partition is done once the HW passed its batch (error if
        the ISR is then below min.insync.replicas) or once this broker stopped leading it."""
        for tp, s in op.statuses.items():
            if not s.acks_pending:
                continue
            p = self._partitions.get(tp)
            if p is None and tp in self._offline_partitions:
                s.error_code, s.acks_pending = KafkaStorageError.code, False
            elif p is None or not p.is_leader:
                s.error_code, s.acks_pending = NotLeaderOrFollowerError.code, False
            elif p.high_watermark >= s.required_offset:
                s.acks_pending = False
                if len(p.maximal_isr) < min(self._min_isr(tp.topic), len(p.replicas)):
                    s.error_code = NotEnoughReplicasAfterAppendError.code
        if any(s.acks_pending for s in op.statuses.values()):
            return False
        self._complete_produce(op)
        return True

    def _expire_produce(self, op: DelayedProduce) -> None:
        if op.completed:
            return
        op.timer_id = None
        self._check_produce(op)
        if op.completed:
            return
        for s in op.statuses.values():
            if s.acks_pending:
                s.error_code, s.acks_pending = RequestTimedOutError.code, False
                self._event("produce_timeout", tp=str(s.tp), required_offset=s.required_offset)
        self._complete_produce(op)

    def _complete_produce(self, op: DelayedProduce) -> None:
        if op.completed:
            return
        op.completed = True
        self._cancel_timer(op.timer_id)
        for tp in op.statuses:
            ops = self._delayed_produce.get(tp)
            if ops and op in ops:
                ops.remove(op)
        req: ProduceRequest = op.env.request  # type: ignore[assignment]
        parts = []
        for pp in req.partitions:
            if pp.tp in op.done_codes:
                parts.append(_refused(pp.tp, op.done_codes[pp.tp]))
            elif pp.tp in op.statuses:
                s = op.statuses[pp.tp]
                ok = s.error_code == NO_ERROR
                parts.append(
                    ProducePartitionResponse(
                        tp=pp.tp,
                        error_code=s.error_code,
                        base_offset=s.base_offset if ok else -1,
                        log_start_offset=s.log_start_offset,
                    )
                )
        self._reply(op.src, op.env, ProduceResponse(partitions=tuple(parts)))

    @staticmethod
    def _immediate_response(
        req: ProduceRequest,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        done: dict[TopicPartition, tuple],
    ) -> ProduceResponse:
        parts = []
        for pp in req.partitions:
            if pp.tp in done:
                parts.append(_refused(pp.tp, done[pp.tp]))
            else:
                s = statuses[pp.tp]
                parts.append(
                    ProducePartitionResponse(
                        tp=pp.tp, base_offset=s.base_offset, log_start_offset=s.log_start_offset
                    )
                )
        return ProduceResponse(partitions=tuple(parts))

    def _try_complete_produces(self, tp: TopicPartition) -> None:
        ops = self._delayed_produce.get(tp)
        if not ops:
            return
        partitions = self._partitions
        for op in list(ops):
            # With acks=all every HW move lands here, and most waiting requests are still above the HW: a
            # single-partition request the leader cannot answer yet is skipped without a full check, which
            # would change nothing. The partition is looked up each time, as _check_produce does: an
            # answer's callback (an internal append) may have changed it.
            p = partitions.get(tp)
            if p is not None and len(op.statuses) == 1 and p.is_leader:
                s = op.statuses.get(tp)
                if s is not None and s.acks_pending and p.high_watermark < s.required_offset:
                    continue
            self._check_produce(op)

    def _fail_delayed(self, tp: TopicPartition) -> None:
        """Leadership lost: waiting produces, fetches and record deletions for ``tp`` are answered now."""
        self._try_complete_produces(tp)
        self._try_complete_fetches(tp, force=True)
        self._try_complete_deletes(tp)

    def _on_hw_moved(self, p: Partition) -> None:
        self._try_complete_produces(p.tp)
        self._try_complete_fetches(p.tp)

    # ============================================================================= fetch
    def _check_epoch(self, p: Partition, current_leader_epoch: int) -> int:
        if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == p.leader_epoch:
            return NO_ERROR
        if current_leader_epoch < p.leader_epoch:
            return FencedLeaderEpochError.code
        return UnknownLeaderEpochError.code

    def _read_partition(
        self, req: FetchRequest, fp: Any, *, copy: bool = True, slices: bool = False
    ) -> tuple[FetchPartitionResponse | None, int]:
        """The answer for one partition of a fetch and its size in bytes. ``copy=False`` only sizes the
        data (None instead of a response when there is data), as a waiting fetch checks ``fetch.min.bytes``
        without reading what it will read again on completion. ``slices``: answer with the log's file
        slice itself, for a sender that ``sendfile``s it."""
        p = self._partitions.get(fp.tp)
        if p is None:
            return FetchPartitionResponse(tp=fp.tp, error_code=self._missing(fp.tp).code), 0
        if not p.is_leader:
            return FetchPartitionResponse(tp=fp.tp, error_code=NotLeaderOrFollowerError.code), 0
        code = self._check_epoch(p, fp.current_leader_epoch)
        if code != NO_ERROR:
            return FetchPartitionResponse(tp=fp.tp, error_code=code), 0
        follower = req.replica_id >= 0
        hw = p.high_watermark
        log = p.log
        start = log.log_start_offset
        lso = log.last_stable_offset(hw)
        committed_only = not follower and req.isolation_level == IsolationLevel.READ_COMMITTED
        if follower and fp.last_fetched_epoch >= 0:
            # KIP-320: the follower's last epoch is not ours up to its fetch offset -> it diverged.
            epoch, end = log.leader_epoch_cache.end_offset_for(fp.last_fetched_epoch, log.log_end_offset)
            if epoch != fp.last_fetched_epoch or end < fp.fetch_offset:
                div = EpochEndOffset(epoch=epoch, end_offset=end)
                return FetchPartitionResponse(
                    tp=fp.tp,
                    diverging_epoch=div,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                ), 0
        try:
            info = log.read(
                fp.fetch_offset,
                min(fp.partition_max_bytes, req.max_bytes),
                max_offset=None if follower else (lso if committed_only else hw),
                verify=True,
            )
        except (OffsetOutOfRangeError, CorruptRecordError, KafkaStorageError) as e:
            if isinstance(e, CorruptRecordError):
                self._report_corruption(p, fp.fetch_offset, str(e), req.replica_id)
            return FetchPartitionResponse(
                tp=fp.tp,
                error_code=e.code,
                high_watermark=hw,
                last_stable_offset=lso,
                log_start_offset=start,
            ), 0
        if info.bad_batch is not None and info.records.position == info.bad_batch.position:
            self._report_corruption(p, fp.fetch_offset, info.bad_batch.describe(str(p.tp)), req.replica_id)
        if not copy:
            return None, info.records.size
        # bytes on a simulated link, whose delivery is later: the leader's file may change underneath
        data = info.records if slices else info.records.read()
        aborted = None
        if committed_only:
            # Kafka's read_committed answer: the aborted transactions overlapping what is returned, so
            # the consumer can drop their records (it skips control batches itself).
            aborted = tuple(
                AbortedTransaction(producer_id=e.producer_id, first_offset=e.first_offset)
                for e in log.collect_aborted(fp.fetch_offset, lso)
            )
        return FetchPartitionResponse(
            tp=fp.tp, records=data, high_watermark=hw, last_stable_offset=lso, log_start_offset=start,
            aborted_transactions=aborted,
        ), len(data)  # fmt: skip

    def handle_fetch(self, env: RequestEnvelope, src: Any) -> None:
        req: FetchRequest = env.request  # type: ignore[assignment]
        now = self.clock.now_ms()
        results = []
        total = 0
        errors = False
        for fp in req.partitions:
            r, n = self._read_partition(req, fp, slices=env.zero_copy)
            results.append(r)
            total += n
            errors = errors or r.error_code != NO_ERROR or r.diverging_epoch is not None
            p = self._partitions.get(fp.tp)
            if (
                req.replica_id >= 0
                and r.error_code == NO_ERROR
                and p is not None
                and r.diverging_epoch is None
            ):
                self._update_follower(p, req.replica_id, fp.fetch_offset, fp.log_start_offset, now)
        if req.max_wait_ms <= 0 or total >= req.min_bytes or errors or not req.partitions:
            self._send(src, env.reply(FetchResponse(partitions=tuple(results))))
            return
        op = DelayedFetch(env, src, req)
        op.timer_id = self._set_timer(req.max_wait_ms, lambda _now: self._complete_fetch(op))
        for fp in req.partitions:
            self._delayed_fetch.setdefault(fp.tp, []).append(op)
        self._check_fetch(op)  # what the update above set off (a produce callback may append) may be ready

    def _update_follower(
        self, p: Partition, replica: int, fetch_offset: int, log_start: int, now: int
    ) -> None:
        p.update_follower_fetch_state(replica, fetch_offset, log_start, now)
        if p.tp in self._delayed_delete:
            self._try_complete_deletes(p.tp)
        if p.pending_isr is None and p.can_join_isr(replica):
            self._alter_isr(p, tuple(sorted(set(p.isr) | {replica})), "expand")
        self._maybe_increment_hw(p)

    def _check_fetch(self, op: DelayedFetch, force: bool = False) -> bool:
        if op.completed:
            return True
        req = op.request
        total = 0
        for fp in req.partitions:
            p = self._partitions.get(fp.tp)
            if p is None or not p.is_leader or self._check_epoch(p, fp.current_leader_epoch) != NO_ERROR:
                force = True
                break
            end = p.log_end_offset if op.is_follower else p.high_watermark
            if end > fp.fetch_offset:
                total += 1  # any byte counts toward min_bytes=1; exact sizes are re-read on completion
        if force or (total > 0 and self._bytes_ready(op) >= req.min_bytes):
            self._complete_fetch(op)
            return True
        return False

    def _bytes_ready(self, op: DelayedFetch) -> int:
        return sum(self._read_partition(op.request, fp, copy=False)[1] for fp in op.request.partitions)

    def _complete_fetch(self, op: DelayedFetch) -> None:
        if op.completed:
            return
        op.completed = True
        self._cancel_timer(op.timer_id)
        for fp in op.request.partitions:
            ops = self._delayed_fetch.get(fp.tp)
            if ops and op in ops:
                ops.remove(op)
        slices = op.env.zero_copy
        results = tuple(
            self._read_partition(op.request, fp, slices=slices)[0] for fp in op.request.partitions
        )
        self._send(op.src, op.env.reply(FetchResponse(partitions=results)))

    def _try_complete_fetches(self, tp: TopicPartition, force: bool = False) -> None:
        for op in list(self._delayed_fetch.get(tp, ())):
            self._check_fetch(op, force)

    def _append_as_follower(self, p: Partition, data: bytes) -> None:
        p.append_as_follower(data)
        p.event("leo", replica=self.broker_id, leo=p.log_end_offset)

    # ============================================================================= offsets
    def handle_list_offsets(self, env: RequestEnvelope, src: Any) -> None:
        req: ListOffsetsRequest = env.request  # type: ignore[assignment]
        out = []
        for lp in req.partitions:
            p = self._partitions.get(lp.tp)
            if p is None:
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=self._missing(lp.tp).code))
                continue
            if not p.is_leader:
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=NotLeaderOrFollowerError.code))
                continue
            code = self._check_epoch(p, lp.current_leader_epoch)
            if code != NO_ERROR:
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=code))
                continue
            # Kafka's "last fetchable offset": what a client with this isolation level may read up to (the
            # LSO under read_committed, else the HW); a replica or a debugging tool sees the whole log.
            if req.replica_id != CONSUMER_REPLICA_ID:
                bound = p.log_end_offset
            elif req.isolation_level == IsolationLevel.READ_COMMITTED:
                bound = p.log.last_stable_offset(p.high_watermark)
            else:
                bound = p.high_watermark
            # A new leader whose HW is still below the start of its epoch does not yet know what its
            # predecessor had committed: Kafka answers a client's "latest" (and a lookup it cannot answer
            # below the bound) with the retriable OFFSET_NOT_AVAILABLE until the HW catches up.
            lagging = req.replica_id == CONSUMER_REPLICA_ID and p.leader_epoch_start_offset > p.high_watermark
            if lp.timestamp == LATEST_TIMESTAMP:
                if lagging:
                    out.append(
                        ListOffsetsPartitionResponse(tp=lp.tp, error_code=OffsetNotAvailableError.code)
                    )
                else:
                    out.append(
                        ListOffsetsPartitionResponse(tp=lp.tp, offset=bound, leader_epoch=p.leader_epoch)
                    )
                continue
            if lp.timestamp == EARLIEST_TIMESTAMP:
                off = p.log.log_start_offset
                epoch = p.log.leader_epoch_cache.epoch_for_offset(off)
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, offset=off, leader_epoch=epoch))
                continue
            try:
                found = p.log.offset_for_timestamp(lp.timestamp)
            except KafkaError as e:
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=e.code))
                continue
            if found is None or found[0] >= bound:  # a record not readable yet is not an answer
                code = OffsetNotAvailableError.code if lagging else NO_ERROR
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=code))
            else:
                epoch = p.log.leader_epoch_cache.epoch_for_offset(found[0])
                out.append(
                    ListOffsetsPartitionResponse(
                        tp=lp.tp, offset=found[0], timestamp=found[1], leader_epoch=epoch
                    )
                )
        self._send(src, env.reply(ListOffsetsResponse(partitions=tuple(out))))

    def handle_offset_for_leader_epoch(self, env: RequestEnvelope, src: Any) -> None:
        req: OffsetForLeaderEpochRequest = env.request  # type: ignore[assignment]
        out = []
        for ep in req.partitions:
            p = self._partitions.get(ep.tp)
            if p is None:
                out.append(
                    OffsetForLeaderEpochPartitionResponse(
                        tp=ep.tp, error_code=UnknownTopicOrPartitionError.code
                    )
                )
                continue
            if not p.is_leader:
                out.append(
                    OffsetForLeaderEpochPartitionResponse(tp=ep.tp, error_code=NotLeaderOrFollowerError.code)
                )
                continue
            code = self._check_epoch(p, ep.current_leader_epoch)
            if code != NO_ERROR:
                out.append(OffsetForLeaderEpochPartitionResponse(tp=ep.tp, error_code=code))
                continue
            epoch, end = p.log.leader_epoch_cache.end_offset_for(ep.leader_epoch, p.log_end_offset)
            out.append(OffsetForLeaderEpochPartitionResponse(tp=ep.tp, leader_epoch=epoch, end_offset=end))
        self._send(src, env.reply(OffsetForLeaderEpochResponse(partitions=tuple(out))))

    # ================================================================================== DeleteRecords
    def handle_delete_records(self, env: RequestEnvelope, src: Any) -> None:
        """Kafka's DeleteRecords: the leader moves its log start offset (-1: to the high watermark) and the
        answer waits until every live replica has followed, or ``timeout_ms`` passed."""
        req: DeleteRecordsRequest = env.request  # type: ignore[assignment]
        answers: dict[TopicPartition, tuple[int, int]] = {}
        requested: dict[TopicPartition, int] = {}
        for dp in req.partitions:
            p = self._partitions.get(dp.tp)
            try:
                if p is None:
                    raise UnknownTopicOrPartitionError(f"{dp.tp} is not hosted on broker {self.broker_id}")
                if not p.is_leader:
                    raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {dp.tp}")
                if p.log.config.compact and not p.log.config.delete:
                    raise PolicyViolationError(f"records of compacted topic {dp.tp.topic} cannot be deleted")
                target = p.high_watermark if dp.offset == -1 else dp.offset
                if target < 0 or target > p.high_watermark:
                    raise OffsetOutOfRangeError(
                        f"{dp.tp}: offset {dp.offset} is outside [0, high watermark {p.high_watermark}]"
                    )
                p.log.delete_records(target)
            except KafkaError as e:
                answers[dp.tp] = (-1, e.code)
                continue
            self._event("records_deleted", tp=str(dp.tp), log_start_offset=p.log.log_start_offset)
            requested[dp.tp] = target
            self._try_complete_fetches(dp.tp)
        op = DelayedDeleteRecords(env, src, requested, answers)
        if self._check_delete(op) or req.timeout_ms <= 0:
            self._complete_delete(op, timed_out=False)
            return
        op.timer_id = self._set_timer(req.timeout_ms, lambda _now: self._complete_delete(op, timed_out=True))
        for tp in requested:
            self._delayed_delete.setdefault(tp, []).append(op)

    def _low_watermark(self, p: Partition) -> int:
        """The smallest log start offset of the leader and its followers on live brokers."""
        live = self.metadata_cache.live_brokers
        low = p.log.log_start_offset
        for r, st in p.remotes.items():
            if st.log_start_offset >= 0 and (not live or r in live):
                low = min(low, st.log_start_offset)
        return low

    def _check_delete(self, op: DelayedDeleteRecords) -> bool:
        """Move the partitions whose replicas all followed into the answers; True when none is left."""
        for tp, target in list(op.requested.items()):
            p = self._partitions.get(tp)
            if p is None or not p.is_leader:
                op.answers[tp] = (-1, NotLeaderOrFollowerError.code)
            else:
                low = self._low_watermark(p)
                if low < target:
                    continue
                op.answers[tp] = (low, NO_ERROR)
            del op.requested[tp]
        return not op.requested

    def _try_complete_deletes(self, tp: TopicPartition) -> None:
        for op in list(self._delayed_delete.get(tp, ())):
            if self._check_delete(op):
                self._complete_delete(op, timed_out=False)

    def _complete_delete(self, op: DelayedDeleteRecords, *, timed_out: bool) -> None:
        if op.completed:
            return
        op.completed = True
        self._cancel_timer(op.timer_id)
        if timed_out:
            self._check_delete(op)
        for tp in op.requested:
            p = self._partitions.get(tp)
            low = self._low_watermark(p) if p is not None and p.is_leader else -1
            op.answers[tp] = (low, RequestTimedOutError.code)
        for tp in op.answers:
            ops = self._delayed_delete.get(tp)
            if ops and op in ops:
                ops.remove(op)
                if not ops:
                    del self._delayed_delete[tp]
        req: DeleteRecordsRequest = op.env.request  # type: ignore[assignment]
        parts = tuple(
            DeleteRecordsPartitionResponse(
                tp=dp.tp, low_watermark=op.answers[dp.tp][0], error_code=op.answers[dp.tp][1]
            )
            for dp in req.partitions
        )
        self._reply(op.src, op.env, DeleteRecordsResponse(partitions=parts))

    # ============================================================================= ISR changes (KIP-497)
    def _alter_isr(self, p: Partition, new_isr: tuple[int, ...], why: str) -> None:
        controller = self._controller_id()
        if controller is None or controller < 0:
            return  # retried on a later tick / fetch
        p.pending_isr = new_isr
        p.pending_since_ms = self.clock.now_ms()
        p.event("isr_change_proposed", change=why, isr=list(p.isr), new_isr=list(new_isr))
        self._send_alter_partition(p)

    def _send_alter_partition(self, p: Partition) -> None:
        """Send (or send again) ``p``'s pending ISR proposal, as of its current leader/partition epochs."""
        assert p.pending_isr is not None
        controller = self._controller_id()
        if controller is None or controller < 0:
            self._retry_alter_partition(p, p.pending_isr, p.leader_epoch)
            return
        item = AlterPartitionItem(
            tp=p.tp, leader_epoch=p.leader_epoch, new_isr=p.pending_isr, partition_epoch=p.partition_epoch
        )
        req = AlterPartitionRequest(broker_id=self.broker_id, partitions=(item,))
        self._send_request(
            controller, req, _AlterPartitionOwner(self), self.config.controller_socket_timeout_ms
        )

    def _retry_alter_partition(self, p: Partition, new_isr: tuple[int, ...], leader_epoch: int) -> None:
        """Kafka's AlterPartitionManager keeps an unanswered proposal and sends it again (its controller
        channel retries until an answer comes). Dropping it instead is unsafe for liveness: the controller
        may have committed it with the answer lost, and the leader, still on the old ISR and partition
        epoch, would then never agree with ZooKeeper again (every later proposal is INVALID_UPDATE_VERSION,
        or none is made since its own ISR already looks full). The controller answers a repeated proposal
        that is already committed with the committed state."""

        def again(_now_ms: int) -> None:
            if self._stopped or self._partitions.get(p.tp) is not p:
                return
            if not p.is_leader or p.leader_epoch != leader_epoch or p.pending_isr != new_isr:
                return  # a LeaderAndIsr (or an answer) settled it meanwhile
            p.event("isr_change_retry", new_isr=list(new_isr), partition_epoch=p.partition_epoch)
            self._send_alter_partition(p)

        self._set_timer(ALTER_PARTITION_RETRY_MS, again)

    def _on_alter_partition_response(
        self, request: AlterPartitionRequest, resp: AlterPartitionResponse
    ) -> None:
        asked = {i.tp: i for i in request.partitions}
        results = {r.tp: r for r in resp.partitions}
        for tp, item in asked.items():
            p = self._partitions.get(tp)
            if p is None or not p.is_leader or p.pending_isr != item.new_isr:
                continue
            if item.leader_epoch != p.leader_epoch or item.partition_epoch != p.partition_epoch:
                continue  # answers a proposal a LeaderAndIsr has superseded
            r = results.get(tp)
            if resp.error_code != NO_ERROR or r is None:
                # Top-level error (not the controller, stale broker epoch, ZooKeeper trouble on its side):
                # nothing was decided for this partition; keep the proposal and send it again.
                p.event("isr_change_failed", error_code=resp.error_code, new_isr=list(item.new_isr))
                self._retry_alter_partition(p, item.new_isr, item.leader_epoch)
                continue
            p.pending_isr = None
            if r.error_code != NO_ERROR:
                p.event("isr_change_failed", error_code=r.error_code, new_isr=list(item.new_isr))
                continue
            if r.leader_epoch != p.leader_epoch or r.partition_epoch < p.partition_epoch:
                continue  # a newer LeaderAndIsr already superseded this
            old = p.isr
            p.isr = tuple(r.isr)
            p.partition_epoch = r.partition_epoch
            kind = "isr_shrink" if len(p.isr) < len(old) else "isr_expand"
            p.event(
                kind,
                old_isr=list(old),
                isr=list(p.isr),
                partition_epoch=p.partition_epoch,
                hw=p.high_watermark,
            )
            self._maybe_increment_hw(p)
            self._try_complete_produces(tp)

    def _on_alter_partition_timeout(self, request: AlterPartitionRequest) -> None:
        """No answer in time: the proposal may or may not be committed, so it stays pending and goes out
        again (not dropped: see ``_retry_alter_partition``)."""
        for item in request.partitions:
            p = self._partitions.get(item.tp)
            if (
                p is not None
                and p.is_leader
                and p.pending_isr == item.new_isr
                and p.leader_epoch == item.leader_epoch
                and p.partition_epoch == item.partition_epoch
            ):
                p.event("isr_change_timeout", new_isr=list(item.new_isr))
                self._retry_alter_partition(p, item.new_isr, item.leader_epoch)

    # ============================================================================= time
    def tick(self, now_ms: int) -> None:
        """Periodic work: ISR shrink check (every ``replica.lag.time.max.ms``/2), stuck ISR proposals, HW
        checkpoint, log flush by flush.ms, retention and compaction (``LogManager``)."""
        if self._stopped:
            return
        lag = self.config.replica_lag_time_max_ms
        check_isr = now_ms >= self._next_isr_check_ms
        while self._next_isr_check_ms <= now_ms:  # a fixed rate, as Kafka's scheduler runs it
            self._next_isr_check_ms += max(1, lag // 2)
        for p in list(self._partitions.values()):
            if check_isr and p.is_leader and p.pending_isr is None:
                out = p.out_of_sync_replicas(now_ms, lag)
                if out:
                    for r in out:
                        p.event(
                            "isr_lagging",
                            replica=r,
                            lag_ms=now_ms - p.last_caught_up_ms(r),
                            leo=p.remote_leo(r),
                        )
                    self._alter_isr(p, tuple(r for r in p.isr if r not in out), "shrink")
            try:
                p.log.maybe_flush()
            except KafkaStorageError as e:  # the dir is reported; it goes offline on its own
                p.event("flush_failed", error=str(e))
        if now_ms - self._last_hw_checkpoint_ms >= self.config.replica_high_watermark_checkpoint_interval_ms:
            self.checkpoint_high_watermarks()
        if now_ms - self._last_producer_expiry_ms >= self.config.producer_id_expiration_check_interval_ms:
            self._last_producer_expiry_ms = now_ms
            expiration = self.config.producer_id_expiration_ms
            for p in self._partitions.values():
                gone = p.log.producer_state.remove_expired(now_ms, expiration)
                if gone:
                    p.event("producer_ids_expired", producer_ids=gone)
        self.log_manager.tick(now_ms, self._partitions.values())

    # ============================================================================= HW checkpoint
    @property
    def hw_checkpoint_path(self) -> Path:
        return self.log_dir / HIGH_WATERMARK_CHECKPOINT

    def _read_hw_checkpoints(self) -> dict[Path, dict[tuple[str, int], int]]:
        out: dict[Path, dict[tuple[str, int], int]] = {}
        for d in self.log_dirs:
            if not self.failure_channel.has_offline(d):
                out[d] = OffsetCheckpoint(d / HIGH_WATERMARK_CHECKPOINT).read()
        return out

    def checkpoint_high_watermarks(self) -> None:
        """Write every replica's HW to its log dir's ``replication-offset-checkpoint`` (``topic partition
        offset``). A dir whose disk fails the write goes offline, as in Kafka; the others are written."""
        self._last_hw_checkpoint_ms = self.clock.now_ms()
        by_dir: dict[Path, dict[tuple[str, int], int]] = {}
        for tp, p in self._partitions.items():
            by_dir.setdefault(p.log.dir.parent, {})[(tp.topic, tp.partition)] = p.high_watermark
        for d in self.log_dirs:
            if self.failure_channel.has_offline(d):
                continue
            hws = {**self._hw_checkpoint.get(d, {}), **by_dir.get(d, {})}
            self._hw_checkpoint[d] = hws
            try:
                OffsetCheckpoint(d / HIGH_WATERMARK_CHECKPOINT, self.file_ops).write(hws)
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(
                    d, f"Error while writing high watermark checkpoint in dir {d}", e
                )

    # ============================================================================= log dir failures
    def _missing(self, tp: TopicPartition) -> KafkaError:
        """The error for a partition this broker does not serve: offline (its dir failed) or unknown."""
        d = self._offline_partitions.get(tp)
        if d is not None:
            return KafkaStorageError(f"{tp} is in the offline log dir {d} on broker {self.broker_id}")
        return UnknownTopicOrPartitionError(f"{tp} is not hosted on broker {self.broker_id}")

    def _report_corruption(self, p: Partition, offset: int, what: str, replica_id: int) -> None:
        """Log a corrupt batch a fetch ran into, once per batch (Kafka logs the failed fetch)."""
        key = (p.tp, what, offset)
        if key in self._reported_corruption:
            return
        self._reported_corruption.add(key)
        p.event("corrupt_batch", offset=offset, error=what, fetcher=replica_id)
        logger.error("Broker %d: fetch of %s at offset %d: %s", self.broker_id, p.tp, offset, what)

    def _on_log_dir_failed(self, dir: Path, why: str) -> None:
        """The failure channel's listener: runs inside the failing call, so the handling itself waits for
        the next turn of the event loop (Kafka hands it to its LogDirFailureHandler thread)."""
        self._event("log_dir_failed", dir=str(dir), error=why)
        logger.error("Broker %d: log dir %s failed: %s", self.broker_id, dir, why)
        self._set_timer(0, lambda _now: self.handle_log_dir_failure(dir))

    def handle_log_dir_failure(self, dir: Path) -> None:
        """Kafka's ``handleLogDirFailure``: stop serving every replica in ``dir`` (their requests get
        KAFKA_STORAGE_ERROR), then halt the broker if no dir is left, else tell the controller, which moves
        the leadership of those partitions to other replicas of their ISR."""
        if self._stopped or dir in self.offline_dirs:
            return
        why = self.failure_channel.offline.get(dir, "reported offline")
        self.offline_dirs[dir] = why
        gone = sorted(tp for tp, p in self._partitions.items() if p.log.dir.parent == dir)
        resigned = []
        for tp in gone:
            p = self._partitions.pop(tp)
            self._offline_partitions[tp] = dir
            self._remove_from_fetcher(tp)
            if p.is_leader:
                resigned.append(tp)
            p.leader_id = -1
            p.log.crash()  # close the files, writing nothing more to the failed disk
            self._fail_delayed(tp)
        self._event("log_dir_offline", dir=str(dir), partitions=[str(tp) for tp in gone], error=why)
        logger.warning(
            "Broker %d stopped serving replicas %s because they are in the failed log dir %s",
            self.broker_id,
            ", ".join(map(str, gone)) or "(none)",
            dir,
        )
        self._notify_leadership([], resigned)
        if all(d in self.offline_dirs for d in self.log_dirs):
            reason = (
                f"Shutdown broker {self.broker_id} because all log dirs in "
                f"{', '.join(map(str, self.log_dirs))} have failed"
            )
            self._event("broker_halt", reason=reason)
            logger.critical(reason)
            if self.on_halt is not None:
                self.on_halt(reason)
            return
        if self.on_log_dir_event is not None:
            self.on_log_dir_event()

    # ============================================================================= lifecycle
    def shutdown(self) -> None:
        """Clean stop: checkpoint HWs, flush and close every log."""
        if self._stopped:
            return
        self.checkpoint_high_watermarks()
        self._stop_everything()
        for p in self._partitions.values():
            try:
                p.log.close()
            except KafkaStorageError as e:  # its disk failed on the way out: nothing more to save
                p.event("close_failed", error=str(e))
        self._stopped = True
        self._event("replica_manager_shutdown")

    def crash(self, lose_unflushed: bool = False) -> None:
        """The process died: in-memory state is gone, no checkpoint is written; with ``lose_unflushed`` the
        log bytes never fsynced are lost too. The object can be reused: the next LeaderAndIsr reopens logs."""
        lost = {}
        self._stop_everything()
        for tp, p in self._partitions.items():
            n = p.log.crash(lose_unflushed)
            if n:
                lost[str(tp)] = n
        self._event("replica_manager_crash", lose_unflushed=lose_unflushed, lost_offsets=lost)
        self._reset_memory()

    def _stop_everything(self) -> None:
        for f in self._fetchers.values():
            f.stop()
        for tid in list(self._timers):
            self._cancel_timer(tid)
        self._fetchers.clear()
        self._pending.clear()
        self._delayed_fetch.clear()
        self._delayed_produce.clear()

    def __repr__(self) -> str:
        return f"ReplicaManager(broker={self.broker_id}, partitions={len(self._partitions)})"


def _refusal_detail(e: KafkaError) -> tuple[str | None, tuple[RecordError, ...]]:
    """What a produce answer says besides the code (v8+ error_message and record_errors): for a batch
    the leader's validation refused, why, and which record when one is to blame. Kafka fills these for
    per-record errors; kafkalite says why for every refused batch."""
    if not isinstance(e, CorruptRecordError | InvalidRecordError | InvalidTimestampError):
        return None, ()
    index = getattr(e, "record_index", None)
    return e.message, () if index is None else (RecordError(batch_index=index, message=e.message),)


def _refused(tp: TopicPartition, done: tuple) -> ProducePartitionResponse:
    code, base, start, message, record_errors = done
    return ProducePartitionResponse(
        tp=tp,
        error_code=code,
        base_offset=base,
        log_start_offset=start,
        record_errors=record_errors,
        error_message=message,
    )


class _AlterPartitionOwner:
    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm

    def on_response(self, _cid: int, request: Any, response: Any) -> None:
        self.rm._on_alter_partition_response(request, response)

    def on_timeout(self, _cid: int, request: Any) -> None:
        self.rm._on_alter_partition_timeout(request)


__all__ = ["HIGH_WATERMARK_CHECKPOINT", "ReplicaManager"]
