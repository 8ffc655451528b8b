"""``KafkaRaftClient`` on the simulator: election, replication, truncation, check quorum, observers."""

from __future__ import annotations

import pytest

from kafkalite.errors import NotLeaderOrFollowerError
from kafkalite.protocol.codec.binding import from_wire, schema_of, to_wire
from kafkalite.protocol.codec.schema import decode, encode
from kafkalite.protocol.raft import RAFT_REQUESTS, VotePartition, VoteRequest
from kafkalite.raft import FollowerState, LeaderState, ResignedState
from kafkalite.raft.kafka_raft_client import METADATA_TP
from tests.raft.harness import OBSERVER, VOTERS, Quorum, scratch_dir


@pytest.fixture
def q():
    quorum = Quorum(7, scratch_dir(), jitter_ms=0)
    yield quorum
    quorum.close()


def elect(q: Quorum):
    assert q.net.run_until(lambda: q.leader() is not None, 5000), "no leader elected"
    q.net.run_for(200)
    return q.leader()


def test_a_leader_is_elected_and_every_node_commits_its_records(q) -> None:
    leader = elect(q)
    offset = [q.try_append(b"r%d" % i) for i in range(5)][-1]
    assert q.net.run_until(lambda: q.committed_everywhere(offset), 2000), "not committed everywhere"
    for n, node in q.nodes.items():
        assert [v for _, v in node.listener.items] == [b"r%d" % i for i in range(5)], n
        want = LeaderState if n == leader.node_id else FollowerState
        assert isinstance(node.client.state, want), (n, node.client.state)
    with pytest.raises(NotLeaderOrFollowerError):
        q.nodes[OBSERVER].client.append([b"x"], q.net.now_ms())


def test_a_deposed_leaders_uncommitted_tail_is_truncated_on_the_diverging_epoch(q) -> None:
    old = elect(q)
    others = [v for v in VOTERS if v != old.node_id]
    q.net.partition([[old.node_id], [*others, OBSERVER]])
    old.client.append([b"lost-1"], q.net.now_ms())
    old.client.append([b"lost-2"], q.net.now_ms())
    assert q.net.run_until(lambda: (ld := q.leader()) is not None and ld is not old, 5000)
    new = q.leader()
    offset = q.try_append(b"kept")
    q.net.heal_all()
    assert q.net.run_until(lambda: q.committed_everywhere(offset), 5000)
    assert old.client.stats.truncations >= 1
    values = [v for _, v in old.listener.items]
    assert b"kept" in values and b"lost-1" not in values and b"lost-2" not in values
    assert old.client.log.log.leader_epoch_cache.entries == new.client.log.log.leader_epoch_cache.entries


def test_a_leader_cut_off_from_the_majority_resigns_check_quorum(q) -> None:
    leader = elect(q)
    q.net.partition([[leader.node_id], [v for v in (*VOTERS, OBSERVER) if v != leader.node_id]])
    window = q.nodes[1].config.fetch_timeout_ms * 3 // 2
    assert q.net.run_until(lambda: not isinstance(leader.client.state, LeaderState), 2 * window + 100)
    assert any(name == "Resigned" for _, name, _, _ in leader.client.stats.transitions)


def test_resign_hands_over_to_the_most_caught_up_voter(q) -> None:
    leader = elect(q)
    epoch = leader.client.epoch
    leader.client.resign(q.net.now_ms())
    assert isinstance(leader.client.state, ResignedState)
    assert q.net.run_until(lambda: (ld := q.leader()) is not None and ld.client.epoch > epoch, 2000)


def test_the_observer_follows_and_never_votes(q) -> None:
    leader = elect(q)
    obs = q.nodes[OBSERVER].client
    assert isinstance(obs.state, FollowerState) and obs.state.leader == leader.node_id
    for _ in range(3):  # leaders come and go; the observer never becomes a candidate
        q.net.crash(q.leader().node_id)
        assert q.net.run_until(lambda: q.leader() is not None, 5000)
        for n in VOTERS:
            q.net.restart(n)
    assert not any(name in ("Candidate", "Voted", "Leader") for _, name, _, _ in obs.stats.transitions)


def test_describe_quorum_shows_voters_and_observers(q) -> None:
    leader = elect(q)
    offset = q.try_append(b"x")
    assert q.net.run_until(lambda: q.committed_everywhere(offset), 2000)
    q.net.run_for(100)
    part = leader.client.describe_quorum().partitions[0]
    assert (part.leader_id, part.leader_epoch) == (leader.node_id, leader.client.epoch)
    assert part.high_watermark == offset + 1
    assert [r.replica_id for r in part.current_voters] == list(VOTERS)
    assert [r.replica_id for r in part.observers] == [OBSERVER]
    assert all(r.log_end_offset == offset + 1 for r in (*part.current_voters, *part.observers))


@pytest.mark.parametrize("cls", RAFT_REQUESTS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("version", [0, 1])
def test_the_raft_messages_round_trip_through_the_codec(cls, version) -> None:
    for c in (cls, cls.response_type):
        flexible = version >= c.flexible_from if hasattr(c, "flexible_from") else version >= cls.flexible_from
        schema = schema_of(c)
        msg = c()
        assert (
            from_wire(
                c,
                decode(schema, encode(schema, to_wire(msg, version), version, flexible), version, flexible),
                version,
            )
            == msg
        )
    vote = VoteRequest(
        cluster_id="c",
        voter_id=2,
        partitions=(
            VotePartition(
                tp=METADATA_TP, candidate_epoch=3, candidate_id=1, last_offset_epoch=2, last_offset=9
            ),
        ),
    )
    schema = schema_of(VoteRequest)
    back = from_wire(VoteRequest, decode(schema, encode(schema, to_wire(vote, 1), 1, True), 1, True), 1)
    assert back == vote


def test_a_quorum_of_one_commits_its_leader_change_and_its_records() -> None:
    # The high watermark of a single voter moves in the same step that makes it leader; the client used
    # to miss that move, so the listener never saw a commit until a later append.
    from kafkalite.net.sim import SimNetwork
    from kafkalite.raft import QuorumConfig, RaftNode

    net = SimNetwork(seed=1, latency_ms=1, log_messages="none")
    root = scratch_dir()
    node = net.add_node(1, RaftNode(QuorumConfig(voters=(1,)), root))
    assert net.run_until(lambda: node.client.quorum.is_leader(), 5000)
    assert node.client.high_watermark == node.client.log.end_offset == 1, (
        "the LeaderChange batch is committed"
    )
    node.client.append([b"x"], net.now_ms())
    assert node.client.high_watermark == 2
    node.client.close()
