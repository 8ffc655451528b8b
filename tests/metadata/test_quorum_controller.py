"""The quorum controller on the simulator: brokers register, heartbeat and are fenced and unfenced;
topics are placed; leadership leaves a fenced broker; a new active controller carries on."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.protocol import TopicPartition
from kafkalite.protocol.broker_lifecycle import (
    AllocateProducerIdsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
)
from kafkalite.protocol.controller import AlterPartitionItem, AlterPartitionRequest
from kafkalite.protocol.metadata import CreatableTopic, CreateTopicsRequest
from tests.metadata.kraft_harness import CLUSTER_ID, SESSION_MS, KRaftQuorum


@pytest.fixture
def quorum():
    q = KRaftQuorum(seed=7)
    yield q
    q.close()


def _all_unfenced(q: KRaftQuorum) -> bool:
    act = q.active()
    if act is None or act.controller.committed.unfenced_brokers() != sorted(q.brokers):
        return False
    return all(b.lifecycle is not None and not b.lifecycle.fenced for b in q.brokers.values())


def test_brokers_register_and_are_unfenced_once_caught_up(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000), "every broker registers and is unfenced"
    img = q.image()
    assert img.features["metadata.version"] == 20
    for b in q.brokers.values():
        reg = img.brokers[b.node_id]
        assert b.lifecycle.broker_epoch == reg.epoch and not b.lifecycle.fenced
        assert reg.listeners[0].host == f"b{b.node_id}"
    assert not q.checker.violations, q.checker.violations


def test_create_topic_places_replicas_and_refuses_a_duplicate(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    resp = q.request(
        CreateTopicsRequest(topics=(CreatableTopic(name="orders", num_partitions=6, replication_factor=3),))
    )
    assert resp.topics[0].error_code == 0 and resp.topics[0].num_partitions == 6
    t = q.image().topic("orders")
    assert t is not None and len(t.partitions) == 6
    leaders = sorted(p.leader for p in t.partitions.values())
    assert leaders == [101, 101, 102, 102, 103, 103], "leaders spread over the brokers"
    assert all(p.isr == p.replicas and len(p.replicas) == 3 for p in t.partitions.values())
    again = q.request(CreateTopicsRequest(topics=(CreatableTopic(name="orders", num_partitions=1),)))
    assert again.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS
    big = q.request(
        CreateTopicsRequest(topics=(CreatableTopic(name="x", num_partitions=1, replication_factor=4),))
    )
    assert big.topics[0].error_code == 38 and "only 3 broker(s)" in big.topics[0].error_message
    # the answer came only once committed: every broker replays the topic soon after
    assert q.net.run_until(lambda: all(b.loader.image.topic("orders") for b in q.brokers.values()), 2000)


def test_a_silent_broker_is_fenced_and_loses_leadership_then_comes_back(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    q.request(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=3, replication_factor=3),)))
    q.net.crash(102)
    assert q.net.run_until(lambda: q.image().brokers[102].fenced, SESSION_MS * 3), "fenced after the session"
    for p in q.image().topic("t").partitions.values():
        assert p.leader != 102 and 102 not in p.isr, p
    q.net.restart(102)
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000), "re-registered and unfenced"
    assert q.image().brokers[102].epoch > 0
    assert not q.checker.violations, q.checker.violations


def test_last_isr_member_stays_and_leads_again_when_back(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    q.request(
        CreateTopicsRequest(topics=(CreatableTopic(name="solo", num_partitions=1, replication_factor=1),))
    )
    only = q.image().partition("solo", 0).leader
    q.net.crash(only)
    assert q.net.run_until(lambda: q.image().partition("solo", 0).leader == -1, SESSION_MS * 3)
    assert q.image().partition("solo", 0).isr == (only,), "the ISR never empties: no unclean election"
    q.net.restart(only)
    assert q.net.run_until(lambda: q.image().partition("solo", 0).leader == only, 10_000)


def test_a_new_active_controller_continues_from_the_log(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    q.request(CreateTopicsRequest(topics=(CreatableTopic(name="a", num_partitions=2, replication_factor=2),)))
    old = q.active()
    q.net.crash(old.node_id)
    assert q.net.run_until(lambda: q.active() is not None and q.active() is not old, 10_000)
    assert q.image().topic("a") is not None, "the committed topic survives the failover"
    resp = q.request(
        CreateTopicsRequest(topics=(CreatableTopic(name="b", num_partitions=1, replication_factor=3),))
    )
    assert resp.topics[0].error_code == 0
    q.net.run_for(3 * SESSION_MS)
    assert q.image().unfenced_brokers() == [101, 102, 103], "heartbeats moved to the new controller"
    q.net.restart(old.node_id)
    assert q.net.run_until(lambda: old.controller is not None and old.controller.committed.topic("b"), 10_000)
    assert not q.checker.violations, q.checker.violations


def _ready(q: KRaftQuorum) -> None:
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    q.request(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=1, replication_factor=3),)))


def _alter(q, broker: int, isr, *, leader_epoch=None, partition_epoch=None, broker_epoch=-1):
    p = q.image().partition("t", 0)
    item = AlterPartitionItem(
        tp=TopicPartition("t", 0),
        leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
        new_isr=tuple(isr),
        partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
    )
    resp = q.request(AlterPartitionRequest(broker_id=broker, broker_epoch=broker_epoch, partitions=(item,)))
    return resp.error_code or resp.partitions[0].error_code, resp


def test_alter_partition_applies_a_leaders_change_and_answers_with_the_new_state(quorum) -> None:
    q = quorum
    _ready(q)
    p = q.image().partition("t", 0)
    follower = next(r for r in p.replicas if r != p.leader)
    code, resp = _alter(q, p.leader, [r for r in p.isr if r != follower])
    after = q.image().partition("t", 0)
    assert code == 0 and follower not in after.isr
    assert (after.partition_epoch, after.leader_epoch) == (p.partition_epoch + 1, p.leader_epoch), (
        "an ISR change bumps the partition epoch only"
    )
    r = resp.partitions[0]
    assert (r.leader, r.leader_epoch, r.isr, r.partition_epoch) == (
        after.leader,
        after.leader_epoch,
        after.isr,
        after.partition_epoch,
    )


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("stale partition epoch", 95),  # INVALID_UPDATE_VERSION
        ("old leader epoch", 74),  # FENCED_LEADER_EPOCH
        ("not the leader", 42),  # INVALID_REQUEST
        ("isr without the leader", 42),
        ("isr outside the replicas", 42),
        ("fenced replica in the isr", 107),  # INELIGIBLE_REPLICA
        ("stale broker epoch", 77),  # STALE_BROKER_EPOCH
        ("ahead of the controller", 41),  # NOT_CONTROLLER: this controller is behind
    ],
)
def test_alter_partition_refusals_are_kafkas(quorum, case: str, code: int) -> None:
    q = quorum
    _ready(q)
    p = q.image().partition("t", 0)
    leader, others = p.leader, [r for r in p.replicas if r != p.leader]
    if case == "stale partition epoch":
        assert _alter(q, leader, [leader, others[0]])[0] == 0
        got = _alter(q, leader, [leader], partition_epoch=p.partition_epoch)[0]
    elif case == "old leader epoch":
        q.net.crash(leader)
        assert q.net.run_until(lambda: q.image().partition("t", 0).leader != leader, SESSION_MS * 3)
        new = q.image().partition("t", 0)
        got = _alter(q, new.leader, [new.leader], leader_epoch=new.leader_epoch - 1)[0]
    elif case == "not the leader":
        got = _alter(q, others[0], p.isr)[0]
    elif case == "isr without the leader":
        got = _alter(q, leader, others)[0]
    elif case == "isr outside the replicas":
        got = _alter(q, leader, [*p.isr, 999])[0]
    elif case == "fenced replica in the isr":
        assert _alter(q, leader, [leader])[0] == 0
        q.net.crash(others[0])
        assert q.net.run_until(lambda: q.image().brokers[others[0]].fenced, SESSION_MS * 3)
        got = _alter(q, leader, [leader, others[0]])[0]
    elif case == "stale broker epoch":
        got = _alter(q, leader, p.isr, broker_epoch=q.image().brokers[leader].epoch + 1000)[0]
    else:
        got = _alter(q, leader, p.isr, leader_epoch=p.leader_epoch + 1)[0]
    assert got == code, f"{case}: {got}"


def test_producer_id_blocks_follow_each_other_across_a_failover(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    epoch = q.image().brokers[101].epoch
    first = q.request(AllocateProducerIdsRequest(broker_id=101, broker_epoch=epoch))
    second = q.request(AllocateProducerIdsRequest(broker_id=101, broker_epoch=epoch))
    assert (first.producer_id_start, first.producer_id_len, second.producer_id_start) == (0, 1000, 1000)
    q.net.crash(q.active().node_id)
    third = q.request(AllocateProducerIdsRequest(broker_id=101, broker_epoch=epoch), timeout_ms=10_000)
    assert third.producer_id_start == 2000, "a new controller never hands out a block twice"
    stale = q.request(AllocateProducerIdsRequest(broker_id=101, broker_epoch=epoch - 1))
    assert stale.error_code == 77


def test_registration_and_heartbeat_refusals(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    wrong = q.request(
        BrokerRegistrationRequest(broker_id=104, cluster_id="another", incarnation_id=uuid.uuid4())
    )
    assert wrong.error_code == 104  # INCONSISTENT_CLUSTER_ID
    dup = q.request(
        BrokerRegistrationRequest(broker_id=101, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=1))
    )
    assert dup.error_code == 101, "a live broker's id, from another incarnation"
    hb = q.request(BrokerHeartbeatRequest(broker_id=555, broker_epoch=3, current_metadata_offset=0))
    assert hb.error_code == 77  # STALE_BROKER_EPOCH: no registration


def test_a_broker_that_asks_to_be_fenced_is(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    reg = q.image().brokers[103]
    resp = q.request(BrokerHeartbeatRequest(broker_id=103, broker_epoch=reg.epoch, want_fence=True))
    assert resp.is_fenced and q.image().brokers[103].fenced


def test_every_kraft_message_crosses_the_process_bridge() -> None:
    # Process mode carries the simulator's messages over TCP (net/bridge.py), unpickling only allowed
    # types: the Raft envelopes and the ids in KRaft's messages must be among them.
    from kafkalite.net.bridge import dumps, loads
    from kafkalite.protocol.broker_lifecycle import BrokerHeartbeatResponse, BrokerRegistrationResponse
    from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope
    from kafkalite.protocol.raft import RaftRequest, RaftResponse, VotePartition, VoteRequest

    msgs = [
        RaftRequest(
            1,
            VoteRequest(voter_id=2, partitions=(VotePartition(tp=TopicPartition("__cluster_metadata", 0)),)),
        ),
        RaftResponse(1, None),
        RequestEnvelope(
            3, "b", BrokerRegistrationRequest(broker_id=1, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4())
        ),
        RequestEnvelope(4, "b", BrokerHeartbeatRequest(broker_id=1, broker_epoch=3)),
        RequestEnvelope(5, "b", AllocateProducerIdsRequest(broker_id=1, broker_epoch=3)),
        ResponseEnvelope(3, BrokerRegistrationResponse(broker_epoch=9)),
        ResponseEnvelope(4, BrokerHeartbeatResponse(is_fenced=False)),
    ]
    for m in msgs:
        assert loads(dumps(m)) == m, m


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_only_where_the_topic_allows_it(quorum, unclean: bool) -> None:
    from kafkalite.protocol.configs import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    q = quorum
    _ready(q)
    if unclean:
        res = AlterConfigsResource(
            resource_type=2,
            resource_name="t",
            configs=(AlterableConfig(name="unclean.leader.election.enable", value="true"),),
        )
        assert q.request(IncrementalAlterConfigsRequest(resources=(res,))).results[0].error_code == 0
    p = q.image().partition("t", 0)
    assert _alter(q, p.leader, [p.leader])[0] == 0  # the followers fell out of the ISR
    q.net.crash(p.leader)
    assert q.net.run_until(lambda: q.image().partition("t", 0).leader != p.leader, SESSION_MS * 3)
    after = q.image().partition("t", 0)
    if unclean:
        assert after.leader in p.replicas and after.leader != p.leader and after.isr == (after.leader,)
    else:
        assert (after.leader, after.isr) == (-1, (p.leader,)), "clean: wait for the last ISR member"


def test_an_idle_active_controller_writes_noop_records(quorum) -> None:
    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    before = q.image().offset
    q.net.run_for(2_000)  # heartbeats write nothing; metadata.max.idle.interval.ms is 500
    assert q.image().offset - before >= 3, "NoOpRecords keep the log (and the observers' view) moving"
    assert q.net.run_until(
        lambda: all(b.loader.image.offset == q.image().offset for b in q.brokers.values()), 1_000
    )


def test_fencing_a_broker_of_many_partitions_goes_out_in_batches_of_the_record_bound(
    quorum, monkeypatch
) -> None:
    """Fencing writes one change per partition the broker was in: at 100,000 partitions that is ~4.6 MB,
    more than one batch of the metadata log takes. As Kafka's controller, it is appended in batches of at
    most MAX_RECORDS_PER_BATCH records (set to 2 here, so a few partitions show it)."""
    from kafkalite.metadata.controller import quorum_controller
    from kafkalite.raft import KafkaRaftClient

    q = quorum
    assert q.net.run_until(lambda: _all_unfenced(q), 10_000)
    q.request(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=9, replication_factor=3),)))
    sizes: list[int] = []
    append = KafkaRaftClient.append

    def counting(self, records, now_ms):
        sizes.append(len(records))
        return append(self, records, now_ms)

    monkeypatch.setattr(KafkaRaftClient, "append", counting)
    monkeypatch.setattr(quorum_controller, "MAX_RECORDS_PER_BATCH", 2)
    q.net.crash(102)
    assert q.net.run_until(lambda: q.image().brokers[102].fenced, SESSION_MS * 3), "fenced after the session"
    assert max(sizes) <= 2, f"a batch of {max(sizes)} records"
    assert sum(sizes) >= 10, f"9 partition changes and the fence record went out as {sizes}"
    for b in q.brokers.values():
        if b.node_id != 102:
            assert q.net.run_until(lambda b=b: b.loader.image.brokers[102].fenced, 2000)
    for p in q.image().topic("t").partitions.values():
        assert p.leader != 102 and 102 not in p.isr, p
    assert not q.checker.violations, q.checker.violations
