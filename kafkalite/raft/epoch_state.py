"""The states a quorum member is in during one epoch (Kafka's ``EpochState`` classes, KIP-595).

Each state knows its epoch, the ``ElectionState`` to persist for it, whether it may grant a vote in its
epoch, and the deadline of its timer (election or fetch timeout), which ``KafkaRaftClient.poll`` acts on.
The moves between them are ``QuorumState``'s; these classes only hold what one state needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.raft.quorum_state_store import NO_ID, ElectionState

NEVER = 1 << 62  # a deadline that does not come


class EpochState:
    """Base: one epoch, as this node lives it."""

    name = "EpochState"
    epoch: int

    def election_state(self) -> ElectionState:
        raise NotImplementedError

    def can_grant_vote(self, candidate_id: int) -> bool:
        """May this state vote for ``candidate_id`` in its own epoch (the log check comes on top)?"""
        return False

    @property
    def leader_id(self) -> int:
        return NO_ID

    def __repr__(self) -> str:
        return f"{self.name}(epoch={self.epoch}, leader={self.leader_id})"


@dataclass(repr=False)
class UnattachedState(EpochState):
    """The epoch is known but neither its leader nor a vote in it: free to vote for an up-to-date
    candidate. A voter starts an election when ``election_deadline_ms`` passes; an observer never does
    and instead asks voters who leads."""

    epoch: int
    election_deadline_ms: int = NEVER
    name = "Unattached"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return True


@dataclass(repr=False)
class VotedState(EpochState):
    """This node voted for ``voted_id`` in the epoch (persisted first); it may repeat that vote, no other."""

    epoch: int
    voted_id: int
    election_deadline_ms: int = NEVER
    name = "Voted"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, voted_id=self.voted_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return candidate_id == self.voted_id


@dataclass(repr=False)
class CandidateState(EpochState):
    """Running for leader of ``epoch``: voted for itself, counting votes until a majority or the timeout,
    then backing off (``backoff_deadline_ms``) before the next epoch's election."""

    epoch: int
    local_id: int
    voters: tuple[int, ...]
    election_deadline_ms: int = NEVER
    granting: set[int] = field(default_factory=set)
    rejecting: set[int] = field(default_factory=set)
    backoff_deadline_ms: int | None = None
    retries: int = 1
    """Elections this node has run in a row, this one included: the backoff after a loss grows with it."""
    name = "Candidate"

    def __post_init__(self) -> None:
        self.granting.add(self.local_id)

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, voted_id=self.local_id)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_vote_granted(self) -> bool:
        return len(self.granting) >= self.majority

    def is_vote_rejected(self) -> bool:
        return len(self.rejecting) > len(self.voters) - self.majority


@dataclass
class ReplicaProgress:
    """What the leader knows of one replica in its epoch (DescribeQuorum's ReplicaState)."""

    end_offset: int = -1
    """The replica's last validated fetch offset: it holds the leader's log below it."""
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(repr=False)
class LeaderState(EpochState):
    """Leading ``epoch``. The high watermark is the largest offset a majority of voters holds (the leader
    counts with its own log end), and it only moves once it passes ``epoch_start_offset``: a leader
    commits nothing before an entry of its own epoch is on a majority (Raft's rule, KIP-595's too)."""

    epoch: int
    local_id: int
    voters: tuple[int, ...]
    epoch_start_offset: int
    check_quorum_deadline_ms: int = NEVER
    high_watermark: int = -1
    """-1 until the first commit of this epoch."""
    voter_states: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_states: dict[int, ReplicaProgress] = field(default_factory=dict)
    unacked_begin_epoch: set[int] = field(default_factory=set)
    """Voters that have not acknowledged BeginQuorumEpoch (nor fetched) yet."""
    name = "Leader"

    def __post_init__(self) -> None:
        for v in self.voters:
            self.voter_states.setdefault(v, ReplicaProgress())
        self.unacked_begin_epoch = {v for v in self.voters if v != self.local_id}

    @property
    def leader_id(self) -> int:
        return self.local_id

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id, voted_id=self.local_id)

    def update_local_end_offset(self, end_offset: int, now_ms: int) -> bool:
        s = self.voter_states[self.local_id]
        s.end_offset, s.last_fetch_ms, s.last_caught_up_ms = end_offset, now_ms, now_ms
        return self.maybe_update_high_watermark()

    def update_replica(self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: int) -> bool:
        """A validated fetch from ``replica_id``: it holds our log below ``fetch_offset``."""
        states = self.voter_states if replica_id in self.voter_states else self.observer_states
        s = states.setdefault(replica_id, ReplicaProgress())
        s.end_offset = fetch_offset
        s.last_fetch_ms = now_ms
        if fetch_offset >= leader_end:
            s.last_caught_up_ms = now_ms
        self.unacked_begin_epoch.discard(replica_id)
        return replica_id in self.voter_states and self.maybe_update_high_watermark()

    def touch_replica(self, replica_id: int, now_ms: int) -> None:
        """A FetchSnapshot from ``replica_id``: it is alive (check quorum), though its offset stands."""
        states = self.voter_states if replica_id in self.voter_states else self.observer_states
        states.setdefault(replica_id, ReplicaProgress()).last_fetch_ms = now_ms
        self.unacked_begin_epoch.discard(replica_id)

    def maybe_update_high_watermark(self) -> bool:
        offsets = sorted((s.end_offset for s in self.voter_states.values()), reverse=True)
        candidate = offsets[len(self.voters) // 2]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def fetched_by_majority_since(self, since_ms: int) -> bool:
        n = sum(1 for v, s in self.voter_states.items() if v == self.local_id or s.last_fetch_ms >= since_ms)
        return n >= len(self.voters) // 2 + 1


@dataclass(repr=False)
class FollowerState(EpochState):
    """Following ``leader`` in ``epoch``: fetching from it, which resets ``fetch_deadline_ms``."""

    epoch: int
    leader: int
    fetch_deadline_ms: int = NEVER
    high_watermark: int = -1
    name = "Follower"

    @property
    def leader_id(self) -> int:
        return self.leader

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.leader)


@dataclass(repr=False)
class ResignedState(EpochState):
    """A leader that gave up ``epoch`` (shutdown, or no majority fetched from it): it tells the voters
    with EndQuorumEpoch, serves nothing, votes for no one in this epoch, and after the election timeout
    runs for the next epoch itself unless someone else wins first."""

    epoch: int
    local_id: int
    voters: tuple[int, ...]
    election_deadline_ms: int = NEVER
    preferred_successors: tuple[int, ...] = ()
    unacked: set[int] = field(default_factory=set)
    name = "Resigned"

    def __post_init__(self) -> None:
        self.unacked = {v for v in self.voters if v != self.local_id}

    @property
    def leader_id(self) -> int:
        return self.local_id

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id, voted_id=self.local_id)
