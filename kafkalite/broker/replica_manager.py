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

Along Kafka's seams, the work is shared out: ``Partition`` (partition.py) holds one replica and the leader's
side of each request (append, read, ListOffsets, OffsetForLeaderEpoch, the HW, which replicas leave or join
the ISR); ``AlterPartitionManager`` (alter_partition.py) takes ISR proposals to the controller;
``delayed.py`` holds the purgatories and the operations waiting in them; ``ReplicaFetcherManager`` and
``ReplicaFetcher`` (fetcher.py) are the follower side; ``become_leader_or_follower`` (state_change.py)
applies LeaderAndIsr and StopReplica; ``LogManager`` places new logs in the log dirs and runs retention and
compaction; WriteTxnMarkers is answered in txn/markers.py. What stays here is what Kafka's ReplicaManager
itself keeps: the partitions hosted, the request entry points that find them and answer, the purgatories'
wake-ups, the HW checkpoints, the log-dir failure handling and the broker's own requests and timers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.broker.alter_partition import AlterPartitionManager
from kafkalite.broker.broker_metrics import BrokerMetrics
from kafkalite.broker.delayed import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
    ProducePartitionStatus,
    refusal_detail,
)
from kafkalite.broker.fetch_session import EVICTION_MS, FetchContext, FetchSessionCache
from kafkalite.broker.fetcher import ReplicaFetcherManager
from kafkalite.broker.log_manager import LogManager
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_alter_log_dirs import ReplicaAlterLogDirsManager, describe_log_dirs
from kafkalite.broker.state_change import become_leader_or_follower, stop_replicas
from kafkalite.broker.timing_wheel import SystemTimer, TimerTask
from kafkalite.broker.txn.markers import write_txn_markers
from kafkalite.common.acks import Acks
from kafkalite.config.broker import BrokerConfig
from kafkalite.config.topic import LogConfig
from kafkalite.errors import (
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import (
    INTERNAL_TOPICS,
    NO_ERROR,
    AlterReplicaLogDirResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DeleteRecordsRequest,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
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
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
)
from kafkalite.storage.checkpoint import OffsetCheckpoint
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_failure_channel import LogDirFailureChannel
from kafkalite.storage.metadata_only_log import MetadataOnlyLog

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"

logger = logging.getLogger("kafkalite.broker")

LeadershipListener = Callable[[list[TopicPartition], list[TopicPartition]], None]
AppendCallback = Callable[[ProducePartitionResponse], None]


class _LocalReply:
    """Destination of an internal append (``append_records``): the answer goes to a callback, not the network."""

    __slots__ = ("callback",)

    def __init__(self, callback: AppendCallback) -> None:
        self.callback = callback


class ReplicaManager:
    """All replicas on one broker; the module docstring says what it does and how. It stays near 600 lines
    because what is left is what Kafka's ReplicaManager keeps itself: the partitions hosted, the request
    entry points that find them and answer, the purgatories' wake-ups, HW checkpoints and log-dir failures."""

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
        log_event: Callable[..., None] | None = None,
        record_event: Callable[[str, dict[str, Any]], None] | None = None,
        file_ops: FileOps = OS_FILE_OPS,
        metadata_cache: MetadataCache | None = None,
        metrics: BrokerMetrics | None = None,
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
        # Events go out as (kind, fields dict): ``record_event`` when the host has it (the simulated
        # network's ``record``), else through ``log_event(kind, **fields)``. Replication logs several
        # per batch.
        if record_event is None:
            if log_event is None:
                raise TypeError("ReplicaManager needs record_event or log_event")
            record_event = lambda event, fields: log_event(event, **fields)  # noqa: E731
        self._record_event = record_event
        self._topic_configs: dict[str, dict[str, Any]] = {}
        self._min_isr_cache: dict[str, int] = {}  # follows _topic_configs (set_topic_config clears it)
        # A topic's LogConfig (frozen), parsed once for all its replicas: parsing it for each was most of
        # the time a LeaderAndIsr for thousands of new partitions took. Follows _topic_configs too.
        self._log_config_cache: dict[str, LogConfig] = {}
        self.on_leadership_change: LeadershipListener | None = None
        """Called with (partitions this broker now leads, partitions it stopped leading) after a
        LeaderAndIsr or StopReplica changed them: the group coordinator loads or unloads its groups."""
        self.metrics = metrics if metrics is not None else BrokerMetrics(clock.now_ms)
        """The broker's metrics; a private set when the replica manager runs alone."""
        self.on_txn_marker: Callable[[TopicPartition, int, bool], None] | None = None
        """Called when a transaction marker was written here (the group coordinator completes the
        producer's transactional offsets in ``__consumer_offsets``)."""
        self._reset_memory()

    def _reset_memory(self) -> None:
        # A restart is a new process: every dir is tried again (the disk may have been freed or replaced).
        self.failure_channel = LogDirFailureChannel(self._on_log_dir_failed)
        self.offline_dirs: dict[Path, str] = {}  # handled failures: dir -> why
        self._offline_partitions: dict[TopicPartition, Path] = {}
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(d, f"Error while creating log dir {d}", e)
        self._partitions: dict[TopicPartition, Partition] = {}
        self.alter_log_dirs = ReplicaAlterLogDirsManager(self)
        """Future logs of replicas moving to another log dir (AlterReplicaLogDirs) and their mover."""
        self._last_producer_expiry_ms = 0
        self.fetcher_manager = ReplicaFetcherManager(self)
        self.alter_partition_manager = AlterPartitionManager(self)
        # Every timeout of a request that waits (the purgatories', our own requests'): one per batch or
        # two under acks=all, nearly all cancelled, so they share a timing wheel and one node timer.
        self.timer = SystemTimer(self.clock.now_ms, self._set_timer, self._cancel_timer, self._timer_failed)
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            self.timer
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(self.timer)
        # Seeded by broker and start time: another id sequence after a restart, the same in every replay.
        self.fetch_sessions = FetchSessionCache(
            self.config.max_incremental_fetch_session_cache_slots,
            EVICTION_MS,
            seed=f"fetch-sessions/{self.broker_id}/{self.clock.now_ms()}",
        )
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory(self.timer)
        )
        # cid -> (owner, dst, request, its timeout)
        self._pending: dict[int, tuple[Any, Any, Any, TimerTask | None]] = {}
        self._timers: set[int] = set()
        self._next_cid = 0
        self._controller_epoch = -1
        self._last_hw_checkpoint_ms = self.clock.now_ms()
        # Kafka's isr-expiration task: first run at start-up, then every replica.lag.time.max.ms / 2
        self._next_isr_check_ms = self.clock.now_ms()
        self._hw_checkpoint: dict[Path, dict[tuple[str, int], int]] = self._read_hw_checkpoints()
        self.log_manager = LogManager(self.config, self.clock.now_ms(), self._event)
        self._stopped = False

    @property
    def _fetchers(self) -> dict[int, Any]:
        """The follower fetchers by leader (``fetcher_manager.fetchers``; tests look at them)."""
        return self.fetcher_manager.fetchers

    @property
    def _delayed_produce(self) -> dict[TopicPartition, list[DelayedProduce]]:
        """Waiting produces by partition (``produce_purgatory.watchers``; tests look at them)."""
        return self.produce_purgatory.watchers

    # ============================================================================= small plumbing
    def _event(self, event: str, **fields: Any) -> None:
        self._record_event(event, fields)

    def _set_timer(self, delay_ms: int, callback: Callable[[int], None]) -> int:
        def fire(now_ms: int) -> None:
            self._timers.discard(tid)  # bound below, before the timer can fire
            callback(now_ms)

        tid = self._set_timer_fn(delay_ms if delay_ms > 0 else 0, fire)
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
            timer = self.timer.add(timeout_ms, partial(self._request_timed_out, cid))
        self._pending[cid] = (owner, dst, request, timer)
        self._send(dst, RequestEnvelope(cid, self._client_id, request))
        return cid

    def _timer_failed(self, exc: BaseException) -> None:
        # As the broker does for its own timers: logged, and the broker goes on.
        logger.error("broker %s: unexpected error in a timer", self.broker_id, exc_info=exc)
        self._event("timer_failed", broker=self.broker_id, error=f"{type(exc).__name__}: {exc}")

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
        if timer is not None:
            timer.cancel()
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
        if self._topic_configs.get(topic) == props:
            # Already applied to every replica of the topic (and new ones are opened with it): a KRaft
            # broker hands over every changed topic's configs with each metadata image.
            return
        self._topic_configs[topic] = dict(props)
        self._min_isr_cache.pop(topic, None)
        self._log_config_cache.pop(topic, None)
        tcfg = self.config.topic_config(props)
        props_now = tcfg.log.to_props()
        for p in self._partitions.values():
            if p.tp.topic == topic:
                p.log.update_config(dict(props_now))
        for tp, fut in self.alter_log_dirs.futures.items():
            if tp.topic == topic:
                fut.update_config(dict(props_now))

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
            live.__contains__ if live else None,
        ):
            self._on_hw_moved(p)

    def is_offline(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s replica here is in a failed log dir."""
        return tp in self._offline_partitions

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
        preferred = self.alter_log_dirs.preferred_dirs.pop(tp, None)
        if preferred in online:  # AlterReplicaLogDirs named its dir before the replica existed
            return preferred
        if not online:
            raise KafkaStorageError(f"no online log dir on broker {self.broker_id} to create {tp} in")
        if len(online) == 1:  # nothing to balance; counting every partition made creating N of them O(N^2)
            return online[0]
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
            log_config = self._log_config_cache.get(tp.topic)
            if log_config is None:
                log_config = self.config.log_config(self._topic_configs.get(tp.topic))
                self._log_config_cache[tp.topic] = log_config
            if self.config.replica_metadata_only:
                # no directory, so no interrupted log-dir move to finish or resume either
                d = self.log_dirs[0]
                log: Any = MetadataOnlyLog(d / f"{tp.topic}-{tp.partition}", log_config)
            else:
                self.alter_log_dirs.prepare_open(tp)
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
            p = Partition(
                tp, log, broker_id=self.broker_id, high_watermark=hw, record_event=self._record_event
            )
            self._partitions[tp] = p
            if not self.config.replica_metadata_only:
                self.alter_log_dirs.resume(p)
        return p

    # ============================================================================= controller requests
    def handle_leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Become leader or follower for each partition whose state is newer than ours (state_change.py)."""
        return become_leader_or_follower(self, req)

    def handle_stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse:
        return stop_replicas(self, req)

    def handle_update_metadata(self, req: UpdateMetadataRequest) -> None:
        """Note the controller epoch (it fences older LeaderAndIsr and StopReplica); the broker has
        applied ``req`` to the metadata cache this replica manager shares."""
        if req.controller_epoch >= self._controller_epoch:
            self._controller_epoch = req.controller_epoch

    def _notify_leadership(self, elected: list[TopicPartition], resigned: list[TopicPartition]) -> None:
        if self.on_leadership_change is not None and (elected or resigned):
            self.on_leadership_change(elected, resigned)

    def _fail_delayed(self, tp: TopicPartition) -> None:
        """Leadership lost: waiting produces, fetches and record deletions for ``tp`` are answered now."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.complete_all(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def _on_hw_moved(self, p: Partition) -> None:
        self.produce_purgatory.check_and_complete(p.tp)
        self.fetch_purgatory.check_and_complete(p.tp)

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
        """A transaction coordinator's COMMIT/ABORT markers, appended here as the leader (txn/markers.py)."""
        write_txn_markers(self, env, src)

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
                info = p.append_records_to_leader(
                    pp.records, req.acks, self._min_isr(pp.tp.topic), internal=internal_allowed
                )
            except KafkaError as e:
                done[pp.tp] = (e.code, -1, -1, *refusal_detail(e))
                self.metrics.failed_produce.mark()
                self._event("produce_error", tp=str(pp.tp), error=e.name, acks=req.acks)
                continue
            except Exception as e:  # noqa: BLE001 - a broker answers every request
                done[pp.tp] = (UnknownServerError.code, -1, -1, None, ())
                self.metrics.failed_produce.mark()
                self._event("produce_error", tp=str(pp.tp), error=repr(e))
                continue
            if not info.duplicate:
                self.metrics.appended(pp.tp.topic, info.num_records, info.size)
            statuses[pp.tp] = ProducePartitionStatus(
                pp.tp, info.last_offset + 1, info.first_offset, p.log.log_start_offset
            )
            self._maybe_increment_hw(p)
            self.fetch_purgatory.check_and_complete(pp.tp)
        op = DelayedProduce(self, env, src, statuses, done)
        if req.acks == Acks.NONE:
            if isinstance(src, _LocalReply):  # an internal caller still learns the local outcome
                self._reply(src, env, op.response())
            return
        if req.acks == Acks.LEADER or not statuses:
            for s in statuses.values():
                s.acks_pending = False
            op.force_complete()
            return
        if not op.try_complete():
            self.produce_purgatory.watch(op, statuses, req.timeout_ms)

    # ============================================================================= fetch
    def _read_partition(
        self, req: FetchRequest, fp: Any, *, copy: bool = True, slices: bool = False
    ) -> tuple[FetchPartitionResponse | None, int]:
        """The answer for one partition of a fetch and its size (``Partition.read_records``)."""
        p = self._partitions.get(fp.tp)
        if p is None:
            return self._not_here(fp.tp), 0
        return p.read_records(req, fp, copy=copy, slices=slices)

    def _not_here(self, tp: TopicPartition) -> FetchPartitionResponse:
        """A fetch's answer for a partition this broker does not host."""
        return FetchPartitionResponse(tp=tp, error_code=self._missing(tp).code)

    def handle_fetch(self, env: RequestEnvelope, src: Any) -> None:
        req: FetchRequest = env.request  # type: ignore[assignment]
        now = self.clock.now_ms()
        replica = req.replica_id
        ctx = self.fetch_sessions.context(
            session_id=req.session_id,
            session_epoch=req.session_epoch,
            partitions=req.partitions,
            forgotten=req.forgotten,
            follower=replica >= 0,
            now_ms=now,
        )
        if ctx.error_code != NO_ERROR:
            self._send(src, env.reply(FetchResponse(error_code=ctx.error_code)))
            return
        results = []
        marks = []  # each partition's fetch_marks as it was read, before the follower's update below
        followed = []  # (partition, fetch) whose follower state this fetch updates
        total = 0
        errors = False
        slices = env.zero_copy
        partitions = self._partitions
        follower = replica >= 0
        # A follower's incremental fetch: each partition's session entry, which keeps the memo of its
        # last answer (fetch_session); None for any other fetch, which reads every partition.
        entries = ctx.entries if follower and ctx.entries else (None,) * len(ctx.partitions)
        for fp, c in zip(ctx.partitions, entries, strict=True):
            # One lookup serves the read, the marks and the follower's state (_read_partition's work,
            # inline: a follower fetch comes for every batch or two).
            p = partitions.get(fp.tp)
            if p is None:
                r, n, m = self._not_here(fp.tp), 0, None
                if c is not None:
                    c.memo = None
            else:
                m = _marks(p)
                memo = None if c is None else c.memo
                if memo is not None and memo[0] == m and (memo[1] is fp or memo[1] == fp):
                    # An idle partition the follower is caught up on, most of a session (the 50 of
                    # __consumer_offsets among them): the same fetch of a partition with the same
                    # marks gets the same empty answer (tuple ==: the replica and its log compare
                    # by identity). The marks cover all that read_records looks at for it: the LSO
                    # moves only with an append, a truncation or a log start move (producer-id
                    # expiry skips open transactions), and a leader's epoch cache only with an
                    # append, a new epoch or a log start move (only a follower truncates).
                    # The follower is where its previous fetch left it, so only its fetch times
                    # move; the full update is left for a replica outside the ISR (it may rejoin)
                    # or one whose state is not where that fetch left it.
                    results.append(memo[2])
                    marks.append(m)
                    if (
                        not p.refresh_follower_fetch_state(replica, fp.fetch_offset, fp.log_start_offset, now)
                        or replica not in p.isr
                    ):
                        followed.append((p, fp))
                    continue
                r, n = p.read_records(req, fp, slices=slices)
                if c is not None:
                    # Kept only for the empty answer at the log end: below it, the log's bytes (which
                    # compaction rewrites in place) would matter too.
                    caught_up = (
                        n == 0
                        and fp.fetch_offset == m[6]
                        and r.error_code == NO_ERROR
                        and r.diverging_epoch is None
                        and not r.records
                    )
                    c.memo = (m, fp, r) if caught_up else None
            marks.append(m)
            results.append(r)
            total += n
            if r.error_code != NO_ERROR or r.diverging_epoch is not None:
                errors = True
            elif follower and p is not None:
                followed.append((p, fp))
        if req.max_wait_ms <= 0 or total >= req.min_bytes or errors or not ctx.partitions:
            self._update_followers(followed, replica, now)
            self.answer_fetch(src, env, results, ctx)
            return
        # Watched before the follower's updates: an update that moves a HW completes waiting produces,
        # whose callbacks may append, and an append tries the fetches watching its partition. Nothing
        # changed since the reads found every partition short of data (DelayedFetch.try_complete_at).
        op = DelayedFetch(self, env, src, req, ctx, results, marks)
        self.fetch_purgatory.watch(op, (fp.tp for fp in ctx.partitions), req.max_wait_ms)
        self._update_followers(followed, replica, now)

    def _update_followers(self, followed: list[tuple[Partition, Any]], replica: int, now: int) -> None:
        update = self._update_follower
        for p, fp in followed:
            update(p, replica, fp.fetch_offset, fp.log_start_offset, now)

    def fetch_marks(self, tp: TopicPartition) -> tuple | None:
        """What a fetch's answer for ``tp`` depends on: the replica and its log (by identity), its
        leadership and epoch, high watermark, log start and log end offsets. While these stay the same,
        reading the partition again gives the same answer (None: not hosted here)."""
        p = self._partitions.get(tp)
        return None if p is None else _marks(p)

    def answer_fetch(
        self, src: Any, env: RequestEnvelope, results: Sequence[FetchPartitionResponse], ctx: FetchContext
    ) -> None:
        """Send a fetch's answer (what its session says is new), counting its bytes out (to a consumer, or
        to a follower)."""
        follower = env.request.replica_id >= 0  # type: ignore[attr-defined]
        fetched = self.metrics.fetched
        selected = ctx.select(results)
        for r in selected:
            if r.records:
                fetched(r.tp.topic, len(r.records), follower=follower)
        self._send(src, env.reply(FetchResponse(session_id=ctx.session_id, partitions=selected)))

    def _update_follower(
        self, p: Partition, replica: int, fetch_offset: int, log_start: int, now: int
    ) -> None:
        # As Kafka's Partition.updateFollowerFetchState: the HW and the low watermark can only move when the
        # follower's log end or log start did; a fetch at the same place only refreshes its caught-up time
        # and may expand the ISR (handle_fetch does that refresh alone for an answer it kept).
        moved = p.update_follower_fetch_state(replica, fetch_offset, log_start, now)
        if moved:
            self.delete_records_purgatory.check_and_complete(p.tp)
        new_isr = p.maybe_expand_isr(replica)
        if new_isr is not None:
            self.alter_partition_manager.submit(p, new_isr, "expand")
        if moved:
            self._maybe_increment_hw(p)

    def _append_as_follower(self, p: Partition, data: bytes) -> None:
        p.append_as_follower(data)
        self.metrics.replicated_in(p.tp.topic, len(data))
        p.leo_event(self.broker_id, p.log_end_offset)

    # ============================================================================= offsets
    def handle_list_offsets(self, env: RequestEnvelope, src: Any) -> None:
        req: ListOffsetsRequest = env.request  # type: ignore[assignment]
        out = []
        for lp in req.partitions:
            p = self._partitions.get(lp.tp)
            if p is None:
                out.append(ListOffsetsPartitionResponse(tp=lp.tp, error_code=self._missing(lp.tp).code))
            else:
                out.append(p.fetch_offset_for_timestamp(lp, req.replica_id, req.isolation_level))
        self._send(src, env.reply(ListOffsetsResponse(partitions=tuple(out))))

    def handle_offset_for_leader_epoch(self, env: RequestEnvelope, src: Any) -> None:
        req: OffsetForLeaderEpochRequest = env.request  # type: ignore[assignment]
        out = []
        for ep in req.partitions:
            p = self._partitions.get(ep.tp)
            if p is None:
                code = UnknownTopicOrPartitionError.code
                out.append(OffsetForLeaderEpochPartitionResponse(tp=ep.tp, error_code=code))
            else:
                out.append(p.last_offset_for_leader_epoch(ep))
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
            self.fetch_purgatory.check_and_complete(dp.tp)
        op = DelayedDeleteRecords(self, env, src, requested, answers)
        if op.check() or req.timeout_ms <= 0:
            op.force_complete()
            return
        self.delete_records_purgatory.watch(op, requested, req.timeout_ms)

    # ================================================================================== log dirs
    def handle_describe_log_dirs(self, env: RequestEnvelope, src: Any) -> None:
        """Kafka's DescribeLogDirs (the listener checked DESCRIBE on the cluster): see ``describe_log_dirs``."""
        req: DescribeLogDirsRequest = env.request  # type: ignore[assignment]
        results = describe_log_dirs(self, req.partitions)
        self._send(src, env.reply(DescribeLogDirsResponse(results=tuple(results))))

    def handle_alter_replica_log_dirs(self, env: RequestEnvelope, src: Any) -> None:
        """Kafka's AlterReplicaLogDirs (ALTER on the cluster): start moving each replica named to its dir."""
        req: AlterReplicaLogDirsRequest = env.request  # type: ignore[assignment]
        codes = self.alter_log_dirs.alter(req.targets())
        results = tuple(AlterReplicaLogDirResult(tp=tp, error_code=c) for tp, c in sorted(codes.items()))
        self._send(src, env.reply(AlterReplicaLogDirsResponse(results=results)))

    # ============================================================================= time
    def tick(self, now_ms: int) -> None:
        """Periodic work: ISR shrink check (every ``replica.lag.time.max.ms``/2), stuck ISR proposals, HW
        checkpoint, log flush by flush.ms, retention and compaction (``LogManager``)."""
        if self._stopped:
            return
        if self.config.replica_metadata_only:
            # Replicas without data: nothing to flush, expire, retain or clean, no high watermark but 0
            # to checkpoint, and no follower can fall behind a leader whose log end is 0 (a follower at
            # the leader's LEO stays in sync however long ago it fetched, Kafka's isCaughtUp). Visiting
            # every replica every tick was most of a 100,000-partition simulation's wall time.
            return
        lag = self.config.replica_lag_time_max_ms
        check_isr = now_ms >= self._next_isr_check_ms
        while self._next_isr_check_ms <= now_ms:  # a fixed rate, as Kafka's scheduler runs it
            self._next_isr_check_ms += max(1, lag // 2)
        for p in list(self._partitions.values()):
            new_isr = p.maybe_shrink_isr(now_ms, lag) if check_isr else None
            if new_isr is not None:
                self.alter_partition_manager.submit(p, new_isr, "shrink")
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
        self.alter_log_dirs.tick()
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

    def _forget_hw_checkpoint(self, tp: TopicPartition) -> None:
        """``tp``'s replica was deleted: its HW leaves the checkpoints."""
        for hws in self._hw_checkpoint.values():
            hws.pop((tp.topic, tp.partition), None)

    # ============================================================================= log dir failures
    def _missing(self, tp: TopicPartition) -> KafkaError:
        """The error for a partition this broker does not serve: offline (its dir failed) or unknown."""
        d = self._offline_partitions.get(tp)
        if d is not None:
            return KafkaStorageError(f"{tp} is in the offline log dir {d} on broker {self.broker_id}")
        return UnknownTopicOrPartitionError(f"{tp} is not hosted on broker {self.broker_id}")

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
            self.fetcher_manager.remove(tp)
            if p.is_leader:
                resigned.append(tp)
            p.leader_id = -1
            p.log.crash()  # close the files, writing nothing more to the failed disk
            self._fail_delayed(tp)
        self.alter_log_dirs.on_dir_offline(dir, gone)
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
        self.alter_log_dirs.close(crash=False)
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
        self.alter_log_dirs.close(crash=True)
        for tp, p in self._partitions.items():
            n = p.log.crash(lose_unflushed)
            if n:
                lost[str(tp)] = n
        self._event("replica_manager_crash", lose_unflushed=lose_unflushed, lost_offsets=lost)
        self._reset_memory()

    def _stop_everything(self) -> None:
        self.fetcher_manager.shutdown()
        self.timer.shutdown()
        for tid in list(self._timers):
            self._cancel_timer(tid)
        self._pending.clear()
        self.fetch_purgatory.clear()
        self.produce_purgatory.clear()
        self.delete_records_purgatory.clear()

    def __repr__(self) -> str:
        return f"ReplicaManager(broker={self.broker_id}, partitions={len(self._partitions)})"


def _marks(p: Partition) -> tuple:
    """``ReplicaManager.fetch_marks`` of a hosted partition."""
    log = p.log
    return (p, log, p.leader_id, p.leader_epoch, p.high_watermark, log.log_start_offset, log.log_end_offset)


__all__ = ["HIGH_WATERMARK_CHECKPOINT", "ReplicaManager"]
