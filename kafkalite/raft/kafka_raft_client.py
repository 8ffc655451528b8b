"""``KafkaRaftClient``: one quorum member as a sans-I/O state machine (KIP-595).

It never touches a socket or a clock: a driver hands it messages (``handle``) and wake-ups (``poll``) with
the current time, and it acts through a ``NetworkChannel`` (send a message, ask to be polled at a time).
The simulator drives it through ``RaftNode``; a TCP listener could drive the same object.

What it does, as Kafka's client does:

* elections: a voter that hears from no leader for a random election timeout becomes a candidate of the
  next epoch and sends Vote; a voter grants one vote per epoch, to a candidate whose log is at least as
  up to date as its own (last epoch, then end offset); a majority makes a leader;
* the leader writes a LeaderChange control batch to open its epoch, announces itself with
  BeginQuorumEpoch, and serves Fetch; followers and observers pull (long poll of ``fetch_max_wait_ms``);
* a fetch names the fetcher's end offset and last epoch; if the leader's log disagrees it answers with
  the diverging epoch and its end, and the follower truncates there and fetches again;
* the high watermark is the offset a majority of voters has fetched up to, and only once that passes
  the leader's own LeaderChange batch; everyone hands committed batches to the listener in order;
* a follower without a fetch response for ``fetch_timeout_ms`` runs for leader; a leader no majority
  fetched from for 1.5 x ``fetch_timeout_ms`` resigns (check quorum) and sends EndQuorumEpoch, as it does
  on ``resign()``;
* snapshots (KIP-630): the state machine writes one with ``create_snapshot`` at a committed offset, and
  the log may then drop what it covers (``KafkaMetadataLog.maybe_clean``, run after each snapshot and
  every minute); a fetcher whose offset the log no longer holds is answered with the latest snapshot's
  id, downloads it with FetchSnapshot (a chunk of at most ``fetch_snapshot_max_bytes`` per request),
  truncates its whole log to it and goes on fetching after it. A listener that starts, or falls below the
  log start, is handed the latest snapshot (``handle_load_snapshot``) before any batch after it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafkalite.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    PositionOutOfRangeError,
    SnapshotNotFoundError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol.api import NO_ERROR, TopicPartition
from kafkalite.protocol.fetch import (
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    SnapshotId,
)
from kafkalite.protocol.raft import (
    NO_LEADER,
    BeginQuorumEpochPartition,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumPartitionResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochPartition,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotPartition,
    FetchSnapshotPartitionResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumEpochPartitionResponse,
    RaftRequest,
    RaftResponse,
    ReplicaState,
    SnapshotLeader,
    VotePartition,
    VotePartitionResponse,
    VoteRequest,
    VoteResponse,
)
from kafkalite.raft.epoch_state import (
    NEVER,
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ReplicaProgress,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kafkalite.raft.metadata_log import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    Batch,
    KafkaMetadataLog,
    MetadataLogConfig,
)
from kafkalite.raft.quorum_config import QuorumConfig
from kafkalite.raft.quorum_state import QuorumState
from kafkalite.raft.quorum_state_store import QUORUM_STATE_FILE, FileQuorumStateStore
from kafkalite.raft.snapshot import RawSnapshotWriter, SnapshotReader
from kafkalite.raft.snapshot import SnapshotId as OffsetAndEpoch

METADATA_TP = TopicPartition(METADATA_TOPIC, METADATA_PARTITION)
_FENCED = FencedLeaderEpochError.code
_UNKNOWN_EPOCH = UnknownLeaderEpochError.code
_NOT_LEADER = NotLeaderOrFollowerError.code
_SNAPSHOT_NOT_FOUND = SnapshotNotFoundError.code
_POSITION_OUT_OF_RANGE = PositionOutOfRangeError.code
STARTING_NEXT_OFFSET = -1
"""A listener's next offset before it has seen anything: it gets the latest snapshot first, if any."""
SNAPSHOT_CLEAN_INTERVAL_MS = 60_000
"""How often the log's retention of snapshots is checked (Kafka's cleaner manager runs every minute)."""


class NetworkChannel(Protocol):
    """What the client needs from its driver."""

    def send(self, dst: int, msg: Any) -> Any: ...

    def wakeup_at(self, time_ms: int) -> None:
        """Call ``poll`` no later than ``time_ms`` (replacing any earlier request)."""


class RaftListener(Protocol):
    def handle_commit(self, batch: Batch) -> None: ...

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the whole state with the snapshot's (its records are the state at
        ``reader.snapshot_id.end_offset - 1``); batches after it follow with ``handle_commit``."""


@dataclass
class _Inflight:
    correlation_id: int
    dst: int
    deadline_ms: int
    epoch: int
    fetch_offset: int = -1


@dataclass
class _Parked:
    """A fetch the leader holds until new data, a high watermark move, or ``fetch_max_wait_ms``."""

    src: int
    correlation_id: int
    partition: FetchPartition
    replica_id: int
    deadline_ms: int


@dataclass
class RaftStats:
    elections: int = 0
    truncations: int = 0
    fetches: int = 0
    snapshot_fetches: int = 0
    """FetchSnapshot requests sent (one per chunk)."""
    snapshots_loaded: int = 0
    """Snapshots handed to the listener (at start, or after a download)."""
    committed_batches: int = 0
    transitions: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(time, state name, epoch, leader) per transition."""


class KafkaRaftClient:
    """One member (voter or observer) of the quorum, over its own log directory."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        log_dir: str | Path,
        channel: NetworkChannel,
        rng: random.Random,
        clock,
        *,
        listener: RaftListener | None = None,
        on_transition: Callable[[int, EpochState], None] | None = None,
        log_config: MetadataLogConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.channel = channel
        self.rng = rng
        self.listener = listener
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log = KafkaMetadataLog(self.log_dir, clock, log_config)
        self.stats = RaftStats()
        self._on_transition = on_transition
        self._now = 0
        self.quorum = QuorumState(
            node_id,
            config,
            FileQuorumStateStore(self.log_dir / QUORUM_STATE_FILE),
            rng,
            on_transition=self._transitioned,
        )
        self.high_watermark = 0
        """The highest committed offset (exclusive) this node knows; not persisted, as in Kafka."""
        self._next_commit = STARTING_NEXT_OFFSET
        self._fetching_snapshot: RawSnapshotWriter | None = None
        self._next_clean_ms = 0
        self._correlation = 0
        self._fetch: _Inflight | None = None
        self._next_fetch_ms = 0
        self._votes_out: dict[int, int] = {}  # candidate: voter -> correlation id of the Vote sent
        self._quorum_out: dict[int, _Inflight] = {}  # leader/resigned: voter -> Begin/EndQuorumEpoch
        self._parked: dict[int, _Parked] = {}
        self._wake = NEVER

    # ================================================================================== life cycle
    def start(self, now_ms: int) -> None:
        self._now = now_ms
        self.quorum.initialize(self.log.last_fetched_epoch, now_ms)
        self.poll(now_ms)

    def crash(self) -> None:
        """The process dies: the log loses what was never fsynced (nothing, if the client kept its rules).
        A snapshot being downloaded stays a ``.part`` file, which the next start deletes."""
        if self._fetching_snapshot is not None:
            self._fetching_snapshot.close()
        self.log.crash(lose_unflushed=True)

    def close(self) -> None:
        self._drop_fetching_snapshot()
        self.log.close()

    # ==================================================================================== the API
    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def state(self) -> EpochState:
        return self.quorum.state

    def leader_and_epoch(self) -> tuple[int, int]:
        return self.quorum.leader_id, self.quorum.epoch

    def append(self, records: Sequence[bytes], now_ms: int) -> int:
        """Append ``records`` as one batch on the leader; returns the offset of the last one. It is
        committed once the high watermark passes it (``handle_commit`` then sees it on every node)."""
        st = self.quorum.state
        if not isinstance(st, LeaderState):
            raise NotLeaderOrFollowerError(
                f"node {self.node_id} is not the leader of epoch {st.epoch} (leader: {st.leader_id})"
            )
        if not records:
            raise ValueError("append needs at least one record")
        self._now = now_ms
        _, last = self.log.append_as_leader(records, st.epoch, now_ms)
        if st.update_local_end_offset(self.log.end_offset, now_ms):
            self._on_high_watermark(st.high_watermark)
        self._complete_parked(now_ms)
        self._arm()
        return last

    def create_snapshot(
        self,
        snapshot_id: OffsetAndEpoch,
        records: Sequence[bytes],
        last_contained_timestamp: int,
        now_ms: int,
    ) -> bool:
        """Write the state machine's ``records``, its whole state below ``snapshot_id.end_offset``, as a
        snapshot (which must be committed: at most the high watermark); then let the log drop what the
        snapshots cover, within its retention. False if the log already has it or starts past it."""
        path = self.log.create_snapshot(
            snapshot_id, records, last_contained_timestamp, self.high_watermark, now_ms
        )
        if path is None:
            return False
        self.log.maybe_clean(now_ms)
        self._next_clean_ms = now_ms + SNAPSHOT_CLEAN_INTERVAL_MS
        return True

    def resign(self, now_ms: int) -> None:
        """Step down gracefully (shutdown): hand the quorum to the most caught-up voters."""
        st = self.quorum.state
        if isinstance(st, LeaderState):
            self._resign(st, now_ms)
            self._arm()

    def describe_quorum(self, request: DescribeQuorumRequest | None = None) -> DescribeQuorumResponse:
        """DescribeQuorum as the leader answers it: epoch, high watermark, each voter's and observer's
        fetch offset and times. A ``request`` that names anything but the metadata partition alone gets
        UNKNOWN_TOPIC_OR_PARTITION for each partition it named, as Kafka's."""
        if request is not None and tuple(p.tp for p in request.partitions) != (METADATA_TP,):
            return DescribeQuorumResponse(
                partitions=tuple(
                    DescribeQuorumPartitionResponse(tp=p.tp, error_code=UnknownTopicOrPartitionError.code)
                    for p in request.partitions
                )
            )
        st = self.quorum.state
        if not isinstance(st, LeaderState):
            part = DescribeQuorumPartitionResponse(tp=METADATA_TP, error_code=_NOT_LEADER)
            return DescribeQuorumResponse(partitions=(part,))

        def rows(states: dict[int, ReplicaProgress]) -> tuple[ReplicaState, ...]:
            return tuple(
                ReplicaState(
                    replica_id=r,
                    log_end_offset=s.end_offset,
                    last_fetch_timestamp=s.last_fetch_ms,
                    last_caught_up_timestamp=s.last_caught_up_ms,
                )
                for r, s in sorted(states.items())
            )

        part = DescribeQuorumPartitionResponse(
            tp=METADATA_TP,
            leader_id=self.node_id,
            leader_epoch=st.epoch,
            high_watermark=st.high_watermark,
            current_voters=rows(st.voter_states),
            observers=rows(st.observer_states),
        )
        return DescribeQuorumResponse(partitions=(part,))

    # ============================================================================ driver entry points
    def handle(self, src: int, msg: Any, now_ms: int) -> None:
        """A message from ``src`` (a ``RaftRequest`` or ``RaftResponse``)."""
        self._now = now_ms
        if isinstance(msg, RaftRequest):
            data = msg.data
            if isinstance(data, FetchRequest):
                self._handle_fetch_request(src, msg.correlation_id, data, now_ms)
            elif isinstance(data, VoteRequest):
                self._reply(src, msg.correlation_id, self._handle_vote_request(data, now_ms))
            elif isinstance(data, BeginQuorumEpochRequest):
                self._reply(src, msg.correlation_id, self._handle_begin_quorum_epoch(data, now_ms))
            elif isinstance(data, EndQuorumEpochRequest):
                self._reply(src, msg.correlation_id, self._handle_end_quorum_epoch(data, now_ms))
            elif isinstance(data, FetchSnapshotRequest):
                self._reply(src, msg.correlation_id, self._handle_fetch_snapshot_request(data, now_ms))
        elif isinstance(msg, RaftResponse):
            data = msg.data
            if isinstance(data, FetchResponse):
                self._handle_fetch_response(src, msg.correlation_id, data, now_ms)
            elif isinstance(data, VoteResponse):
                self._handle_vote_response(src, msg.correlation_id, data, now_ms)
            elif isinstance(data, BeginQuorumEpochResponse | EndQuorumEpochResponse):
                self._handle_quorum_epoch_response(src, msg.correlation_id, data, now_ms)
            elif isinstance(data, FetchSnapshotResponse):
                self._handle_fetch_snapshot_response(src, msg.correlation_id, data, now_ms)
        self.poll(now_ms)

    def poll(self, now_ms: int) -> None:
        """Act on every deadline that has passed, then ask to be woken at the next one."""
        self._now = now_ms
        if now_ms >= self._next_clean_ms:
            self._next_clean_ms = now_ms + SNAPSHOT_CLEAN_INTERVAL_MS
            self.log.maybe_clean(now_ms)
        st = self.quorum.state
        if isinstance(st, LeaderState):
            self._poll_leader(st, now_ms)
        elif isinstance(st, CandidateState):
            self._poll_candidate(st, now_ms)
        elif isinstance(st, FollowerState):
            self._poll_follower(st, now_ms)
        elif isinstance(st, ResignedState):
            self._poll_resigned(st, now_ms)
        else:
            self._poll_unattached(st, now_ms)
        self._arm()

    # ======================================================================================= polls
    def _poll_leader(self, st: LeaderState, now: int) -> None:
        for p in [p for p in self._parked.values() if p.deadline_ms <= now]:
            self._answer_parked(p, now)
        if now >= st.check_quorum_deadline_ms:
            window = self.config.fetch_timeout_ms * 3 // 2
            if not st.fetched_by_majority_since(now - window):
                self._resign(st, now)
                return
            st.check_quorum_deadline_ms = now + window
        for voter in sorted(st.unacked_begin_epoch):
            out = self._quorum_out.get(voter)
            if out is None or out.deadline_ms <= now:
                req = BeginQuorumEpochRequest(
                    voter_id=voter,
                    partitions=(
                        BeginQuorumEpochPartition(
                            tp=METADATA_TP, leader_id=self.node_id, leader_epoch=st.epoch
                        ),
                    ),
                )
                self._quorum_out[voter] = self._request(voter, req, now, st.epoch)

    def _poll_resigned(self, st: ResignedState, now: int) -> None:
        if now >= st.election_deadline_ms:
            self._become_candidate(now)
            return
        for voter in sorted(st.unacked):
            out = self._quorum_out.get(voter)
            if out is None or out.deadline_ms <= now:
                part = EndQuorumEpochPartition(
                    tp=METADATA_TP,
                    leader_id=self.node_id,
                    leader_epoch=st.epoch,
                    preferred_successors=st.preferred_successors,
                )
                self._quorum_out[voter] = self._request(
                    voter, EndQuorumEpochRequest(partitions=(part,)), now, st.epoch
                )

    def _poll_candidate(self, st: CandidateState, now: int) -> None:
        if st.backoff_deadline_ms is not None:
            if now >= st.backoff_deadline_ms:
                self._become_candidate(now)
        elif now >= st.election_deadline_ms or st.is_vote_rejected():
            st.backoff_deadline_ms = now + self._election_backoff(st.retries)

    def _election_backoff(self, retries: int) -> int:
        """Binary exponential backoff after a lost election, capped at election.backoff.max.ms. Kafka's
        base is a fixed 100 ms (a tenth of the default cap); here a tenth of the configured cap."""
        base = max(1, self.config.election_backoff_max_ms // 10)
        return min(base * self.rng.randrange(2 << (retries - 1)), self.config.election_backoff_max_ms)

    def _poll_follower(self, st: FollowerState, now: int) -> None:
        if now >= st.fetch_deadline_ms:
            if self.quorum.is_voter:
                self._become_candidate(now)
            else:
                self.quorum.transition_to_unattached(st.epoch, now)
                self._poll_unattached(self.quorum.state, now)
            return
        self._maybe_fetch(st.leader, st.epoch, now)

    def _poll_unattached(self, st: EpochState, now: int) -> None:
        if self.quorum.is_voter:
            if now >= st.election_deadline_ms:  # type: ignore[attr-defined]
                self._become_candidate(now)
            return
        # An observer finds the leader by fetching from any voter: a voter that is not the leader
        # answers with the leader it knows.
        if self._fetch is None and now >= self._next_fetch_ms:
            self._maybe_fetch(self.rng.choice(self.config.voters), st.epoch, now)
        else:
            self._maybe_fetch(None, st.epoch, now)

    def _maybe_fetch(self, dst: int | None, epoch: int, now: int) -> None:
        f = self._fetch
        if f is not None:
            if f.deadline_ms > now:
                return
            self._fetch = None  # timed out: try again after the backoff
            self._next_fetch_ms = now + self.config.retry_backoff_ms
        if dst is None or now < self._next_fetch_ms:
            return
        w = self._fetching_snapshot
        if w is not None:
            sid = w.snapshot_id
            part = FetchSnapshotPartition(
                tp=METADATA_TP,
                current_leader_epoch=epoch,
                snapshot_id=SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),
                position=w.size,
            )
            snap_req = FetchSnapshotRequest(
                replica_id=self.node_id, max_bytes=self.config.fetch_snapshot_max_bytes, partitions=(part,)
            )
            self._fetch = self._request(dst, snap_req, now, epoch, w.size)
            self.stats.snapshot_fetches += 1
            return
        req = FetchRequest(
            replica_id=self.node_id,
            max_wait_ms=self.config.fetch_max_wait_ms,
            partitions=(
                FetchPartition(
                    tp=METADATA_TP,
                    current_leader_epoch=epoch,
                    fetch_offset=self.log.end_offset,
                    last_fetched_epoch=self.log.last_fetched_epoch,
                ),
            ),
        )
        self._fetch = self._request(dst, req, now, epoch, self.log.end_offset)
        self._fetch.deadline_ms = now + self.config.fetch_max_wait_ms + self.config.request_timeout_ms
        self.stats.fetches += 1

    # ============================================================================= state changes
    def _transitioned(self, new: EpochState, old: EpochState | None) -> None:
        self.stats.transitions.append((self._now, new.name, new.epoch, new.leader_id))
        # Whatever was in flight belonged to the old state, a snapshot download too (as Kafka's, whose
        # follower state holds it).
        self._fetch = None
        self._drop_fetching_snapshot()
        self._next_fetch_ms = self._now
        self._votes_out.clear()
        self._quorum_out.clear()
        for p in list(self._parked.values()):
            self._answer_parked(p, self._now, error=_NOT_LEADER)
        if self._on_transition is not None:
            self._on_transition(self.node_id, new)

    def _become_candidate(self, now: int) -> None:
        self.quorum.transition_to_candidate(now)
        self.stats.elections += 1
        st = self.quorum.state
        assert isinstance(st, CandidateState)
        if st.is_vote_granted():  # a quorum of one
            self._become_leader(now)
            return
        for voter in self.config.voters:
            if voter == self.node_id:
                continue
            req = VoteRequest(
                voter_id=voter,
                partitions=(
                    VotePartition(
                        tp=METADATA_TP,
                        candidate_epoch=st.epoch,
                        candidate_id=self.node_id,
                        last_offset_epoch=self.log.last_fetched_epoch,
                        last_offset=self.log.end_offset,
                    ),
                ),
            )
            self._votes_out[voter] = self._request(voter, req, now, st.epoch).correlation_id

    def _become_leader(self, now: int) -> None:
        st = self.quorum.transition_to_leader(self.log.end_offset, now)
        self.log.append_leader_change(st.epoch, self.node_id, self.config.voters, now)
        # update_local_end_offset moves the high watermark itself (a quorum of one commits the LeaderChange
        # batch at once): its answer is the one to act on, a second check would find nothing new.
        if st.update_local_end_offset(self.log.end_offset, now):
            self._on_high_watermark(st.high_watermark)
        self._poll_leader(st, now)

    def _resign(self, st: LeaderState, now: int) -> None:
        others = [(s.end_offset, v) for v, s in st.voter_states.items() if v != self.node_id]
        successors = tuple(v for _, v in sorted(others, key=lambda x: (-x[0], x[1])))
        self.quorum.transition_to_resigned(successors, now)
        self._poll_resigned(self.quorum.state, now)  # type: ignore[arg-type]

    def _observe_epoch(self, epoch: int, leader_id: int, now: int) -> bool:
        """A peer spoke of ``epoch`` (and its leader, if known): move up to it if it is newer, or learn
        the leader of our own epoch. True if the state changed."""
        st = self.quorum.state
        if epoch > st.epoch:
            if leader_id not in (NO_LEADER, self.node_id):
                self.quorum.transition_to_follower(epoch, leader_id, now)
            else:
                self.quorum.transition_to_unattached(epoch, now)
            return True
        if (
            epoch == st.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and isinstance(st, UnattachedState | VotedState | CandidateState)
        ):
            self.quorum.transition_to_follower(epoch, leader_id, now)
            return True
        return False

    def _on_high_watermark(self, hw: int) -> None:
        if hw <= self.high_watermark:
            return
        self.high_watermark = hw
        self._update_listener_progress()

    def _update_listener_progress(self) -> None:
        """Hand the listener what is committed and new to it: the latest snapshot first when it is
        starting or the log no longer holds its next offset, then the batches up to the high watermark."""
        hw = self.high_watermark
        if self.listener is None:
            self._next_commit = max(self._next_commit, hw)
            return
        nxt = self._next_commit
        latest = self.log.latest_snapshot_id()
        if nxt < hw and (nxt == STARTING_NEXT_OFFSET or nxt < self.log.start_offset) and latest is not None:
            self.listener.handle_load_snapshot(self.log.read_snapshot(latest))
            self.stats.snapshots_loaded += 1
            nxt = latest.end_offset
        elif nxt == STARTING_NEXT_OFFSET:
            nxt = 0
        elif nxt < self.log.start_offset:
            raise RuntimeError(
                f"node {self.node_id}: a snapshot is needed at {nxt}: the log starts at "
                f"{self.log.start_offset}, the high watermark is {hw}"
            )
        self._next_commit = nxt
        if nxt < hw:
            for batch in self.log.committed_batches(nxt, hw):
                self.listener.handle_commit(batch)
                self.stats.committed_batches += 1
            self._next_commit = hw

    # ============================================================================ Vote
    def _handle_vote_request(self, req: VoteRequest, now: int) -> VoteResponse:
        p = req.partitions[0]
        granted = False
        if self.quorum.is_voter and p.candidate_id in self.config.voters:
            if p.candidate_epoch > self.quorum.epoch:
                self.quorum.transition_to_unattached(p.candidate_epoch, now)
            st = self.quorum.state
            if p.candidate_epoch == st.epoch and st.can_grant_vote(p.candidate_id):
                ours = (self.log.last_fetched_epoch, self.log.end_offset)
                granted = (p.last_offset_epoch, p.last_offset) >= ours
                if granted and isinstance(st, UnattachedState):
                    self.quorum.transition_to_voted(p.candidate_epoch, p.candidate_id, now)
        st = self.quorum.state
        part = VotePartitionResponse(
            tp=METADATA_TP, leader_id=st.leader_id, leader_epoch=st.epoch, vote_granted=granted
        )
        return VoteResponse(partitions=(part,))

    def _handle_vote_response(self, src: int, cid: int, resp: VoteResponse, now: int) -> None:
        p = resp.partitions[0]
        if self._observe_epoch(p.leader_epoch, p.leader_id, now):
            return
        st = self.quorum.state
        if not isinstance(st, CandidateState) or self._votes_out.get(src) != cid:
            return
        if p.leader_epoch != st.epoch:
            return
        (st.granting if p.vote_granted else st.rejecting).add(src)
        if st.is_vote_granted():
            self._become_leader(now)

    # =================================================================== Begin/EndQuorumEpoch
    def _handle_begin_quorum_epoch(self, req: BeginQuorumEpochRequest, now: int) -> BeginQuorumEpochResponse:
        p = req.partitions[0]
        error = NO_ERROR
        if p.leader_epoch < self.quorum.epoch:
            error = _FENCED
        elif p.leader_id == self.node_id:
            error = _NOT_LEADER
        else:
            st = self.quorum.state
            if not (isinstance(st, FollowerState) and st.epoch == p.leader_epoch):
                self.quorum.transition_to_follower(p.leader_epoch, p.leader_id, now)
        st = self.quorum.state
        part = QuorumEpochPartitionResponse(
            tp=METADATA_TP, error_code=error, leader_id=st.leader_id, leader_epoch=st.epoch
        )
        return BeginQuorumEpochResponse(partitions=(part,))

    def _handle_end_quorum_epoch(self, req: EndQuorumEpochRequest, now: int) -> EndQuorumEpochResponse:
        p = req.partitions[0]
        error = NO_ERROR
        if p.leader_epoch < self.quorum.epoch:
            error = _FENCED
        elif p.leader_epoch > self.quorum.epoch:
            # A leader of an epoch we never saw is already leaving: no one to follow in it.
            self.quorum.transition_to_unattached(p.leader_epoch, now)
        else:
            st = self.quorum.state
            if isinstance(st, FollowerState) and st.leader == p.leader_id and self.quorum.is_voter:
                # Keep following (a vote in this epoch is gone for good) but start the next election
                # early: at once for the most caught-up successor, later for the others.
                succ = p.preferred_successors
                if self.node_id in succ:
                    pos = succ.index(self.node_id)
                    delay = (
                        0
                        if pos == 0
                        else min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << pos)
                    )
                else:
                    delay = self.rng.randrange(self.config.election_backoff_max_ms)
                st.fetch_deadline_ms = min(st.fetch_deadline_ms, now + delay)
        st = self.quorum.state
        part = QuorumEpochPartitionResponse(
            tp=METADATA_TP, error_code=error, leader_id=st.leader_id, leader_epoch=st.epoch
        )
        return EndQuorumEpochResponse(partitions=(part,))

    def _handle_quorum_epoch_response(self, src: int, cid: int, resp: Any, now: int) -> None:
        p = resp.partitions[0]
        if self._observe_epoch(p.leader_epoch, p.leader_id, now):
            return
        out = self._quorum_out.get(src)
        if out is None or out.correlation_id != cid:
            return
        st = self.quorum.state
        if p.error_code == NO_ERROR and p.leader_epoch == st.epoch:
            if isinstance(st, LeaderState):
                st.unacked_begin_epoch.discard(src)
            elif isinstance(st, ResignedState):
                st.unacked.discard(src)
        else:
            out.deadline_ms = now + self.config.retry_backoff_ms

    # ======================================================================== Fetch: the leader side
    def _leader_request_error(self, leader_epoch: int) -> int:
        """The error for a follower's Fetch or FetchSnapshot that names ``leader_epoch``: an older epoch is
        fenced, a newer one unknown here, and only the leader serves either."""
        st = self.quorum.state
        if leader_epoch < st.epoch:
            return _FENCED
        if leader_epoch > st.epoch:
            return _UNKNOWN_EPOCH
        return NO_ERROR if isinstance(st, LeaderState) else _NOT_LEADER

    def _handle_fetch_request(self, src: int, cid: int, req: FetchRequest, now: int) -> None:
        p = req.partitions[0]
        st = self.quorum.state
        error = self._leader_request_error(p.current_leader_epoch)
        if error != NO_ERROR or not isinstance(st, LeaderState):
            self._reply(src, cid, self._fetch_response(error=error))
            return
        latest = self.log.latest_snapshot_id()
        if p.fetch_offset == 0 and latest is not None:
            # An empty fetcher is better served by the latest snapshot than by the whole log (as Kafka).
            valid = ("snapshot", latest.end_offset, latest.epoch)
        else:
            valid = self.log.validate_offset_and_epoch(p.fetch_offset, p.last_fetched_epoch)
        if valid[0] == "diverging":
            resp = self._fetch_response(diverging=EpochEndOffset(epoch=valid[2], end_offset=valid[1]))
            self._reply(src, cid, resp)
            return
        if valid[0] == "snapshot":
            resp = self._fetch_response(snapshot=SnapshotId(end_offset=valid[1], epoch=valid[2]))
            self._reply(src, cid, resp)
            return
        if st.update_replica(req.replica_id, p.fetch_offset, self.log.end_offset, now):
            self._on_high_watermark(st.high_watermark)
            self._complete_parked(now)
        if p.fetch_offset >= self.log.end_offset and req.max_wait_ms > 0:
            old = self._parked.pop(src, None)
            if old is not None:  # a newer fetch replaces it: its fetcher gave up on it
                self._answer_parked(old, now)
            self._parked[src] = _Parked(src, cid, p, req.replica_id, now + req.max_wait_ms)
            return
        self._reply(src, cid, self._fetch_response(fetch_offset=p.fetch_offset))

    def _fetch_response(
        self,
        *,
        error: int = NO_ERROR,
        diverging: EpochEndOffset | None = None,
        snapshot: SnapshotId | None = None,
        fetch_offset: int = -1,
    ) -> FetchResponse:
        st = self.quorum.state
        hw = st.high_watermark if isinstance(st, LeaderState) else -1
        records = b""
        if self.log.start_offset <= fetch_offset < self.log.end_offset:
            records = self.log.read(fetch_offset)
        part = FetchPartitionResponse(
            tp=METADATA_TP,
            error_code=error,
            high_watermark=hw,
            log_start_offset=self.log.start_offset,
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            current_leader=LeaderIdAndEpoch(leader_id=st.leader_id, leader_epoch=st.epoch),
            records=records,
        )
        return FetchResponse(partitions=(part,))

    def _complete_parked(self, now: int) -> None:
        for p in list(self._parked.values()):
            self._answer_parked(p, now)

    def _answer_parked(self, p: _Parked, now: int, error: int = NO_ERROR) -> None:
        self._parked.pop(p.src, None)
        if error != NO_ERROR:
            self._reply(p.src, p.correlation_id, self._fetch_response(error=error))
        else:
            self._reply(p.src, p.correlation_id, self._fetch_response(fetch_offset=p.partition.fetch_offset))

    # ===================================================================== Fetch: the follower side
    def _handle_fetch_response(self, src: int, cid: int, resp: FetchResponse, now: int) -> None:
        f = self._fetch
        if f is None or f.correlation_id != cid or f.dst != src:
            return  # an answer to a fetch we gave up on
        self._fetch = None
        p = resp.partitions[0]
        leader = p.current_leader
        if leader is not None and self._observe_epoch(leader.leader_epoch, leader.leader_id, now):
            return
        st = self.quorum.state
        if p.error_code != NO_ERROR or not isinstance(st, FollowerState) or st.leader != src:
            self._next_fetch_ms = now + self.config.retry_backoff_ms
            return
        if f.epoch != st.epoch or f.fetch_offset != self.log.end_offset:
            return  # the log moved under it (it cannot, with one fetch at a time, but do not trust it)
        st.fetch_deadline_ms = now + self.config.fetch_timeout_ms
        if p.diverging_epoch is not None:
            self.log.truncate_to_end_offset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
            self.stats.truncations += 1
            return
        if p.snapshot_id is not None and (p.snapshot_id.end_offset >= 0 or p.snapshot_id.epoch >= 0):
            sid = p.snapshot_id
            if sid.end_offset < 0 or sid.epoch < 0:
                self._next_fetch_ms = now + self.config.retry_backoff_ms  # a malformed id: ask again
                return
            snapshot_id = OffsetAndEpoch(sid.end_offset, sid.epoch)
            self._fetching_snapshot = self.log.create_new_snapshot_unchecked(snapshot_id)
            if self._fetching_snapshot is None:
                # We have it already (a download finished but the log was not cut): cut it now.
                self._after_snapshot_download(snapshot_id, downloaded=False)
            return
        if p.records:
            self.log.append_as_follower(p.records)
        if p.high_watermark >= 0:
            self._on_high_watermark(min(p.high_watermark, self.log.end_offset))

    # ============================================================================ FetchSnapshot
    def _handle_fetch_snapshot_request(self, req: FetchSnapshotRequest, now: int) -> FetchSnapshotResponse:
        p = req.partitions[0] if req.partitions else None
        st = self.quorum.state
        if p is None or p.tp != METADATA_TP:
            return FetchSnapshotResponse(error_code=_NOT_LEADER)
        error = self._leader_request_error(p.current_leader_epoch)
        sid = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        size = None if error != NO_ERROR else self.log.snapshot_size(sid)
        if error == NO_ERROR and size is None:
            error = _SNAPSHOT_NOT_FOUND
        elif error == NO_ERROR and not 0 <= p.position < size:  # type: ignore[operator]
            error = _POSITION_OUT_OF_RANGE
        leader = SnapshotLeader(leader_id=st.leader_id, leader_epoch=st.epoch)
        if error != NO_ERROR:
            part = FetchSnapshotPartitionResponse(tp=METADATA_TP, error_code=error, current_leader=leader)
            return FetchSnapshotResponse(partitions=(part,))
        assert isinstance(st, LeaderState) and size is not None
        # Downloading a snapshot counts as fetching for check quorum, though the offset does not move.
        st.touch_replica(req.replica_id, now)
        chunk = self.log.read_snapshot_bytes(sid, p.position, max(1, req.max_bytes))
        part = FetchSnapshotPartitionResponse(
            tp=METADATA_TP,
            snapshot_id=p.snapshot_id,
            current_leader=leader,
            size=size,
            position=p.position,
            unaligned_records=chunk,
        )
        return FetchSnapshotResponse(partitions=(part,))

    def _handle_fetch_snapshot_response(
        self, src: int, cid: int, resp: FetchSnapshotResponse, now: int
    ) -> None:
        f = self._fetch
        if f is None or f.correlation_id != cid or f.dst != src:
            return
        self._fetch = None
        if not resp.partitions:
            self._next_fetch_ms = now + self.config.retry_backoff_ms
            return
        p = resp.partitions[0]
        if self._observe_epoch(p.current_leader.leader_epoch, p.current_leader.leader_id, now):
            return
        st = self.quorum.state
        w = self._fetching_snapshot
        if p.error_code == _SNAPSHOT_NOT_FOUND or p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0:
            # The leader no longer has it (a newer one replaced it): start over from a Fetch.
            self._drop_fetching_snapshot()
            if isinstance(st, FollowerState):
                st.fetch_deadline_ms = now + self.config.fetch_timeout_ms
            return
        if p.error_code != NO_ERROR or not isinstance(st, FollowerState) or st.leader != src or w is None:
            self._next_fetch_ms = now + self.config.retry_backoff_ms
            return
        sid = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        if sid != w.snapshot_id or p.position != w.size:
            raise RuntimeError(
                f"node {self.node_id}: FetchSnapshot answered {sid} at {p.position}, "
                f"expected {w.snapshot_id} at {w.size}"
            )
        w.append(bytes(p.unaligned_records))
        st.fetch_deadline_ms = now + self.config.fetch_timeout_ms
        if w.size >= p.size:
            w.freeze()
            self._fetching_snapshot = None
            self.log.on_snapshot_frozen(sid)
            self._after_snapshot_download(sid)

    def _after_snapshot_download(self, sid: OffsetAndEpoch, downloaded: bool = True) -> None:
        """Drop the whole log for the snapshot; it is committed (the leader only names committed
        snapshots), so the high watermark is at least its end, and the listener loads it."""
        self.log.truncate_to_latest_snapshot()
        if downloaded and self.log.end_offset < sid.end_offset:
            raise RuntimeError(
                f"node {self.node_id}: snapshot {sid} downloaded but the log (end {self.log.end_offset}, "
                f"epoch {self.log.last_fetched_epoch}) was not truncated to it"
            )
        if sid.end_offset > self.high_watermark:
            self.high_watermark = sid.end_offset
        self._update_listener_progress()

    def _drop_fetching_snapshot(self) -> None:
        if self._fetching_snapshot is not None:
            self._fetching_snapshot.abandon()
            self._fetching_snapshot = None

    # ======================================================================================= plumbing
    def _request(self, dst: int, data: Any, now: int, epoch: int, fetch_offset: int = -1) -> _Inflight:
        self._correlation += 1
        self.channel.send(dst, RaftRequest(self._correlation, data))
        return _Inflight(self._correlation, dst, now + self.config.request_timeout_ms, epoch, fetch_offset)

    def _reply(self, dst: int, cid: int, data: Any) -> None:
        self.channel.send(dst, RaftResponse(cid, data))

    def _next_deadline(self) -> int:
        st = self.quorum.state
        if isinstance(st, LeaderState):
            times = [st.check_quorum_deadline_ms, *(p.deadline_ms for p in self._parked.values())]
            times += [
                self._quorum_out[v].deadline_ms if v in self._quorum_out else self._now
                for v in st.unacked_begin_epoch
            ]
        elif isinstance(st, ResignedState):
            times = [st.election_deadline_ms]
            times += [
                self._quorum_out[v].deadline_ms if v in self._quorum_out else self._now for v in st.unacked
            ]
        elif isinstance(st, CandidateState):
            times = [st.election_deadline_ms if st.backoff_deadline_ms is None else st.backoff_deadline_ms]
        elif isinstance(st, FollowerState):
            times = [st.fetch_deadline_ms, self._fetch.deadline_ms if self._fetch else self._next_fetch_ms]
        elif self.quorum.is_voter:
            times = [st.election_deadline_ms]  # type: ignore[attr-defined]
        else:
            times = [self._fetch.deadline_ms if self._fetch else self._next_fetch_ms]
        return max(min(times), self._now)

    def _arm(self) -> None:
        self.channel.wakeup_at(self._next_deadline())


__all__ = ["KafkaRaftClient", "NetworkChannel", "RaftListener", "RaftRequest", "RaftResponse", "RaftStats"]
