"""Each ``QuorumState`` transition, its rule, and what ``quorum-state`` keeps across a restart."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.errors import KafkaStorageError
from kafkalite.raft import (
    CandidateState,
    ElectionState,
    FileQuorumStateStore,
    FollowerState,
    IllegalStateError,
    LeaderState,
    QuorumConfig,
    QuorumState,
    ResignedState,
    UnattachedState,
    VotedState,
)

CFG = QuorumConfig(voters="1@localhost:9093,2@localhost:9094,3@localhost:9095")


def quorum(tmp_path, node=1, log_end_epoch=0) -> QuorumState:
    q = QuorumState(node, CFG, FileQuorumStateStore(tmp_path / "quorum-state"), random.Random(0))
    q.initialize(log_end_epoch, 0)
    return q


def test_a_new_node_is_unattached_in_epoch_0_and_writes_kafkas_json(tmp_path) -> None:
    q = quorum(tmp_path)
    assert isinstance(q.state, UnattachedState) and q.epoch == 0
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data == {
        "clusterId": "",
        "leaderId": -1,
        "leaderEpoch": 0,
        "votedId": -1,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert CFG.election_timeout_ms <= q.state.election_deadline_ms < 2 * CFG.election_timeout_ms


def test_a_vote_is_given_once_per_epoch_and_survives_a_restart(tmp_path) -> None:
    q = quorum(tmp_path)
    q.transition_to_unattached(3, 0)
    q.transition_to_voted(3, 2, 0)
    assert isinstance(q.state, VotedState) and q.state.can_grant_vote(2) and not q.state.can_grant_vote(3)
    with pytest.raises(IllegalStateError):
        q.transition_to_voted(3, 3, 0)
    again = quorum(tmp_path)  # the process restarts
    assert isinstance(again.state, VotedState) and (again.epoch, again.state.voted_id) == (3, 2)
    assert not again.state.can_grant_vote(3)


def test_a_candidate_bumps_the_epoch_votes_for_itself_and_leads_only_with_a_majority(tmp_path) -> None:
    q = quorum(tmp_path)
    q.transition_to_candidate(0)
    st_ = q.state
    assert isinstance(st_, CandidateState) and st_.epoch == 1 and st_.granting == {1}
    assert FileQuorumStateStore(tmp_path / "quorum-state").read_election_state() == ElectionState(1, -1, 1)
    with pytest.raises(IllegalStateError):
        q.transition_to_leader(0, 0)
    st_.granting.add(3)
    leader = q.transition_to_leader(5, 0)
    assert isinstance(leader, LeaderState) and leader.epoch_start_offset == 5
    with pytest.raises(IllegalStateError):
        q.transition_to_candidate(0)


def test_a_restarted_leader_comes_back_resigned(tmp_path) -> None:
    q = quorum(tmp_path)
    q.transition_to_candidate(0)
    q.state.granting.add(2)
    q.transition_to_leader(0, 0)
    again = quorum(tmp_path)
    assert isinstance(again.state, ResignedState) and again.epoch == 1 and not again.state.can_grant_vote(2)


def test_one_leader_per_epoch_as_a_follower_sees_it(tmp_path) -> None:
    q = quorum(tmp_path)
    q.transition_to_follower(4, 2, 0)
    assert isinstance(q.state, FollowerState) and q.leader_id == 2
    with pytest.raises(IllegalStateError):
        q.transition_to_follower(4, 3, 0)
    with pytest.raises(IllegalStateError):
        q.transition_to_follower(3, 3, 0)
    with pytest.raises(IllegalStateError):
        q.transition_to_unattached(4, 0)
    assert isinstance(quorum(tmp_path).state, FollowerState)


def test_observers_never_vote_or_run(tmp_path) -> None:
    q = quorum(tmp_path, node=9)
    assert q.is_observer and q.state.election_deadline_ms > 10**15
    with pytest.raises(IllegalStateError):
        q.transition_to_voted(1, 2, 0)
    with pytest.raises(IllegalStateError):
        q.transition_to_candidate(0)


def test_a_log_with_a_later_epoch_than_the_file_moves_the_node_up(tmp_path) -> None:
    q = quorum(tmp_path, log_end_epoch=7)
    assert isinstance(q.state, UnattachedState) and q.epoch == 7


def test_a_higher_epoch_keeps_a_waiting_voters_election_clock(tmp_path) -> None:
    q = quorum(tmp_path)
    deadline = q.state.election_deadline_ms
    q.transition_to_unattached(5, 100)  # a (possibly stale) candidate of epoch 5 asked for a vote
    assert q.state.election_deadline_ms == deadline


def test_a_damaged_quorum_state_file_is_refused_by_name(tmp_path) -> None:
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(KafkaStorageError, match="quorum-state"):
        FileQuorumStateStore(tmp_path / "quorum-state").read_election_state()


def test_quorum_config_reads_kafkas_keys() -> None:
    c = QuorumConfig.from_props(
        {"controller.quorum.voters": "3@h:1,1@h:2", "controller.quorum.election.timeout.ms": "500"}
    )
    assert c.voters == (1, 3) and c.election_timeout_ms == 500 and c.fetch_timeout_ms == 2000
    with pytest.raises(ValueError, match="controller.quorum.bogus"):
        QuorumConfig.from_props({"controller.quorum.voters": "1@h:1", "controller.quorum.bogus": 1})


@given(
    st.lists(st.integers(min_value=-1, max_value=50), min_size=4, max_size=4),
    st.integers(min_value=0, max_value=50),
)
def test_the_high_watermark_is_what_a_majority_holds_past_the_epoch_start(offsets, start) -> None:
    leader = LeaderState(2, 1, (1, 2, 3, 4, 5), epoch_start_offset=start)
    leader.update_local_end_offset(max(offsets + [start + 1]), 0)
    for voter, off in zip((2, 3, 4, 5), offsets, strict=True):
        leader.update_replica(voter, off, 100, 0)
    held = sorted((s.end_offset for s in leader.voter_states.values()), reverse=True)[2]
    # Three of five voters hold everything below ``held``; nothing commits before the epoch's own entry.
    assert leader.high_watermark == (held if held > start else -1)
