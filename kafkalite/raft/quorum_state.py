"""``QuorumState``: the one place a node's epoch state changes, and the rules each change must keep.

Every transition writes the new ``ElectionState`` to ``quorum-state`` (fsync'd) before the state takes
effect, so whatever the node says next (a vote, a BeginQuorumEpoch, a fetch) survives a crash. The rules,
as in Kafka's ``QuorumState``: epochs never go back; a vote is given at most once per epoch; only voters
vote, run or lead; a leader needs a majority of granted votes; one epoch has at most one leader as far as
this node knows (a follower never switches leaders within an epoch).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kafkalite.raft.epoch_state import (
    NEVER,
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kafkalite.raft.quorum_config import QuorumConfig
from kafkalite.raft.quorum_state_store import NO_ID, ElectionState, FileQuorumStateStore


class IllegalStateError(RuntimeError):
    """A transition that would break one of Raft's rules; a bug in the caller, never a network event."""


class QuorumState:
    """The current ``EpochState`` of node ``local_id`` and the transitions between states."""

    def __init__(
        self,
        local_id: int,
        config: QuorumConfig,
        store: FileQuorumStateStore,
        rng: random.Random,
        *,
        on_transition: Callable[[EpochState, EpochState | None], None] | None = None,
    ) -> None:
        self.local_id = local_id
        self.config = config
        self.voters = config.voters
        self.store = store
        self.rng = rng
        self.on_transition = on_transition
        self.state: EpochState = UnattachedState(0)

    # ----------------------------------------------------------------------------------------- views
    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    @property
    def is_observer(self) -> bool:
        return not self.is_voter

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    def random_election_timeout(self, now_ms: int) -> int:
        """A deadline in [T, 2T) from now (Kafka's randomized election timeout), or never for observers."""
        if not self.is_voter:
            return NEVER
        t = self.config.election_timeout_ms
        return now_ms + t + self.rng.randrange(t)

    # -------------------------------------------------------------------------------------- start-up
    def initialize(self, log_end_epoch: int, now_ms: int) -> None:
        """Resume from ``quorum-state`` (or start at epoch 0) and the epoch of the log's last batch."""
        stored = self.store.read_election_state()
        es = stored or ElectionState(0)
        if log_end_epoch > es.epoch:
            # The log holds an epoch the file does not: it was written by a leader of a later epoch,
            # so this node may not act in any earlier one.
            st: EpochState = UnattachedState(log_end_epoch, self.random_election_timeout(now_ms))
        elif es.leader_id == self.local_id and self.is_voter:
            st = ResignedState(es.epoch, self.local_id, self.voters, self.random_election_timeout(now_ms))
        elif es.has_voted and self.is_voter:
            st = VotedState(es.epoch, es.voted_id, self.random_election_timeout(now_ms))
        elif es.has_leader:
            st = FollowerState(es.epoch, es.leader_id, now_ms + self.config.fetch_timeout_ms)
        else:
            st = UnattachedState(es.epoch, self.random_election_timeout(now_ms))
        self._set(st, persist=stored is None or st.election_state() != es)

    # ----------------------------------------------------------------------------------- transitions
    def transition_to_unattached(self, epoch: int, now_ms: int) -> None:
        """A higher epoch is known, with no leader or vote in it yet."""
        same_epoch_observer = epoch == self.epoch and self.is_observer
        if epoch <= self.epoch and not same_epoch_observer:
            raise IllegalStateError(f"cannot go to Unattached in epoch {epoch} from {self.state}")
        st = self.state
        if isinstance(st, UnattachedState | VotedState | CandidateState):
            # As Kafka: a voter still waiting for a leader keeps the time it had left. A candidate of a
            # higher epoch (say one with a stale log, which will be refused) must not keep resetting
            # the clocks of the voters that could win.
            deadline = st.election_deadline_ms
        else:
            deadline = self.random_election_timeout(now_ms)
        self._set(UnattachedState(epoch, deadline))

    def transition_to_voted(self, epoch: int, candidate_id: int, now_ms: int) -> None:
        if not self.is_voter:
            raise IllegalStateError(f"observer {self.local_id} cannot vote")
        if candidate_id not in self.voters:
            raise IllegalStateError(f"{candidate_id} is not a voter")
        if epoch < self.epoch or (epoch == self.epoch and not isinstance(self.state, UnattachedState)):
            raise IllegalStateError(f"cannot vote for {candidate_id} in epoch {epoch} from {self.state}")
        self._set(VotedState(epoch, candidate_id, self.random_election_timeout(now_ms)))

    def transition_to_candidate(self, now_ms: int) -> None:
        if not self.is_voter:
            raise IllegalStateError(f"observer {self.local_id} cannot run for leader")
        if isinstance(self.state, LeaderState):
            raise IllegalStateError(f"a leader cannot become a candidate: {self.state}")
        retries = self.state.retries + 1 if isinstance(self.state, CandidateState) else 1
        st = CandidateState(
            self.epoch + 1, self.local_id, self.voters, self.random_election_timeout(now_ms), retries=retries
        )
        self._set(st)

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        st = self.state
        if not isinstance(st, CandidateState) or not st.is_vote_granted():
            raise IllegalStateError(f"cannot lead without a majority of votes: {st}")
        window = self.config.fetch_timeout_ms * 3 // 2
        leader = LeaderState(st.epoch, self.local_id, self.voters, epoch_start_offset, now_ms + window)
        self._set(leader)
        return leader

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if leader_id == self.local_id:
            raise IllegalStateError(f"{self.local_id} cannot follow itself")
        st = self.state
        if epoch < st.epoch:
            raise IllegalStateError(f"cannot follow {leader_id} in epoch {epoch} from {st}")
        if epoch == st.epoch:
            if isinstance(st, LeaderState | ResignedState):
                raise IllegalStateError(f"two leaders in epoch {epoch}: {leader_id} and {st}")
            if isinstance(st, FollowerState) and st.leader != leader_id:
                raise IllegalStateError(f"two leaders in epoch {epoch}: {leader_id} and {st.leader}")
        self._set(FollowerState(epoch, leader_id, now_ms + self.config.fetch_timeout_ms))

    def transition_to_resigned(self, preferred_successors: tuple[int, ...], now_ms: int) -> None:
        st = self.state
        if not isinstance(st, LeaderState):
            raise IllegalStateError(f"only a leader resigns: {st}")
        self._set(
            ResignedState(
                st.epoch,
                self.local_id,
                self.voters,
                self.random_election_timeout(now_ms),
                preferred_successors,
            )
        )

    def _set(self, st: EpochState, *, persist: bool = True) -> None:
        if persist:
            self.store.write_election_state(st.election_state(), self.voters)
        old, self.state = (None if not hasattr(self, "state") else self.state), st
        if self.on_transition is not None:
            self.on_transition(st, old)


__all__ = ["IllegalStateError", "NO_ID", "QuorumState"]
