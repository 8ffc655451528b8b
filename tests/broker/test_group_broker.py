"""The group coordinator on the brokers: FindCoordinator and ``__consumer_offsets`` auto-creation, routing
(NOT_COORDINATOR), offsets and group metadata as records (acks=all), failover, retention, compaction."""

from __future__ import annotations

import pytest

from kafkalite.broker.group.manager import OFFSETS_TOPIC, GroupMetadataManager, read_offsets_log
from kafkalite.common.utils import coordinator_partition
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidTopicError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RequestTimedOutError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    MetadataRequest,
    ProducePartition,
    ProduceRequest,
    Reassignment,
    TopicPartition,
)
from kafkalite.protocol.group import (
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from kafkalite.protocol.offsets_schema import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_key,
    decode_value,
)
from kafkalite.records import build_batch

FAST = {"offsets.topic.num.partitions": 5, "group.initial.rebalance.delay.ms": 0}
TP = TopicPartition("orders", 0)


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(3, config=FAST)


def commit(c: Cluster, broker: int, group: str, offsets: dict[TopicPartition, int], **kw):
    parts = tuple(OffsetCommitPartition(tp=tp, committed_offset=o) for tp, o in offsets.items())
    return c.request(broker, OffsetCommitRequest(group_id=group, partitions=parts, **kw))


def join_and_sync(c: Cluster, broker: int, group: str, assignment: bytes = b"asg") -> tuple[str, int]:
    protocols = (JoinGroupProtocol(name="range", metadata=b"sub"),)
    r = c.request(broker, JoinGroupRequest(group_id=group, protocols=protocols))
    assert r.error_code == MemberIdRequiredError.code
    r = c.request(broker, JoinGroupRequest(group_id=group, member_id=r.member_id, protocols=protocols))
    assert r.error_code == 0 and r.leader == r.member_id
    s = c.request(
        broker,
        SyncGroupRequest(
            group_id=group,
            generation_id=r.generation_id,
            member_id=r.member_id,
            assignments=(SyncGroupAssignment(member_id=r.member_id, assignment=assignment),),
        ),
    )
    assert s.error_code == 0 and s.assignment == assignment
    return r.member_id, r.generation_id


def offsets_records(c: Cluster, broker: int, partition: int) -> list[tuple[object, object]]:
    part = c.replica(broker, OFFSETS_TOPIC, partition)
    out = []
    for rec in part.log.iter_records():
        key = decode_key(rec.key)
        out.append((key, decode_value(key, rec.value)))
    return out


# ------------------------------------------------------------------------------------------ creation
def test_offsets_topic_is_created_on_first_find_coordinator(cluster: Cluster) -> None:
    assert cluster.partition_state(OFFSETS_TOPIC, 0) is None  # nothing before a group is looked up
    coord = cluster.coordinator("g1")
    assert coord is not None
    p = coordinator_partition("g1", 5)
    assert coord == cluster.leader(OFFSETS_TOPIC, p)
    assert sorted(cluster.replicas(OFFSETS_TOPIC, q) != () for q in range(5)) == [True] * 5
    assert all(len(cluster.replicas(OFFSETS_TOPIC, q)) == 3 for q in range(5))
    log = cluster.replica(coord, OFFSETS_TOPIC, p).log
    assert log.config.compact and log.config.segment_bytes == 104857600
    resp = cluster.request(coord, FindCoordinatorRequest(key="g1"))
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, coord, f"broker{coord}", 9092)
    assert len(cluster.events("offsets_topic_create")) == 1


def test_find_coordinator_answers_not_available_until_the_topic_has_leaders(cluster: Cluster) -> None:
    cluster.run_for(1_000)  # every broker's metadata cache lists the 3 live brokers
    resp = cluster.request(1, FindCoordinatorRequest(key="g"))
    assert resp.error_code == CoordinatorNotAvailableError.code
    assert "being created" in (resp.error_message or "")


def test_offsets_topic_refused_with_fewer_brokers_than_its_replication_factor() -> None:
    with Cluster(2, config=FAST) as c:  # offsets.topic.replication.factor defaults to 3
        resp = c.request(1, FindCoordinatorRequest(key="g"))
        assert resp.error_code == CoordinatorNotAvailableError.code
        assert "offsets.topic.replication.factor=3" in resp.error_message
        assert c.coordinator("g", timeout_ms=2_000) is None
        assert c.partition_state(OFFSETS_TOPIC, 0) is None
    with Cluster(2, config={**FAST, "offsets.topic.replication.factor": 2}) as c:
        assert c.coordinator("g") in (1, 2)
        assert len(c.replicas(OFFSETS_TOPIC, 0)) == 2


def test_default_offsets_topic_has_50_partitions_of_3_replicas() -> None:
    with Cluster(3) as c:
        coord = c.coordinator("console-consumer-1")
        assert coord == c.leader(OFFSETS_TOPIC, coordinator_partition("console-consumer-1"))
        assert all(len(c.replicas(OFFSETS_TOPIC, p)) == 3 for p in range(50))
        c.run_until(lambda: sum(len(b.group_manager.owned) for b in c.brokers.values()) == 50, 10_000)
        assert sorted(p for b in c.brokers.values() for p in b.group_manager.owned) == list(range(50))
        assert commit(c, coord, "console-consumer-1", {TP: 7}).partitions[0].error_code == 0
        assert c.group_offsets("console-consumer-1") == {TP: 7}


# ------------------------------------------------------------------------------------------- routing
def test_group_requests_to_other_brokers_get_not_coordinator(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    for b in cluster.brokers:
        if b == coord:
            continue
        nc = NotCoordinatorError.code
        join = JoinGroupRequest(group_id="g", protocols=(JoinGroupProtocol(name="range"),))
        assert cluster.request(b, join).error_code == nc
        assert cluster.request(b, SyncGroupRequest(group_id="g")).error_code == nc
        assert cluster.request(b, HeartbeatRequest(group_id="g")).error_code == nc
        assert (
            cluster.request(
                b, LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m"),))
            ).error_code
            == nc
        )
        assert commit(cluster, b, "g", {TP: 1}).partitions[0].error_code == nc
        assert cluster.request(b, OffsetFetchRequest(group_id="g")).error_code == nc
        described = cluster.request(b, DescribeGroupsRequest(groups=("g",))).groups[0]
        assert described.error_code == nc


def test_groups_spread_over_brokers_by_placement(cluster: Cluster) -> None:
    groups = [f"group-{i}" for i in range(12)]
    for g in groups:
        coord = cluster.coordinator(g)
        assert coord == cluster.leader(OFFSETS_TOPIC, coordinator_partition(g, 5))
        assert commit(cluster, coord, g, {TP: len(g)}).partitions[0].error_code == 0
    listed = cluster.list_groups()
    assert [x.group_id for x in listed] == sorted(groups)
    assert {x.group_state for x in listed} == {"Empty"}


def test_load_in_progress_until_the_partition_is_read() -> None:
    """Unit level: between the election and the (timer-driven) load, requests are told to retry."""

    class FakeLog:
        def iter_records(self, start=None, end=None):
            return iter(())

    class FakePartition:
        is_leader = True
        log = FakeLog()
        log_end_offset = 0

    class FakeRM:
        def partition_or_none(self, tp):
            return FakePartition()

    from kafkalite.broker.group.coordinator import GroupCoordinator
    from kafkalite.config.broker import BrokerConfig

    timers: list = []

    class Clock:
        def now_ms(self) -> int:
            return 0

    def set_timer(delay, cb):
        timers.append((delay, cb))
        return len(timers)

    coord = GroupCoordinator(Clock(), set_timer, lambda t: None, lambda *a, **k: None)
    cfg = BrokerConfig.from_props({"offsets.topic.num.partitions": 5})
    mgr = GroupMetadataManager(
        1, cfg, coord, FakeRM(), clock=Clock(), set_timer=set_timer, log_event=lambda *a, **k: None
    )
    p = mgr.partition_for("g")
    assert mgr.ownership_error("g") == NotCoordinatorError.code
    mgr.on_leadership_change([TopicPartition(OFFSETS_TOPIC, p)], [])
    assert mgr.ownership_error("g") == CoordinatorLoadInProgressError.code
    delay, load = timers[-1]
    assert delay == 0
    load(0)
    assert mgr.ownership_error("g") == 0
    mgr.on_leadership_change([], [TopicPartition(OFFSETS_TOPIC, p)])
    assert mgr.ownership_error("g") == NotCoordinatorError.code


# --------------------------------------------------------------------------------------- persistence
def test_commit_is_written_as_offset_records_before_the_answer(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    p = coordinator_partition("g", 5)
    t_sent = cluster.net.now_ms()
    resp = commit(cluster, coord, "g", {TP: 42, TopicPartition("orders", 1): 7})
    assert [x.error_code for x in resp.partitions] == [0, 0]
    commit_event = cluster.events("group_commit")[-1]
    assert (
        commit_event.time_ms > t_sent + 1
    )  # waited for the followers (acks=all), not only the leader's append
    for b in cluster.replicas(OFFSETS_TOPIC, p):  # every replica has the records
        recs = offsets_records(cluster, b, p)
        assert [(k, v.offset) for k, v in recs] == [
            (OffsetCommitKey("g", "orders", 0), 42),
            (OffsetCommitKey("g", "orders", 1), 7),
        ]
    assert cluster.high_watermark(OFFSETS_TOPIC, p) == 2
    assert cluster.group_offsets("g") == {TP: 42, TopicPartition("orders", 1): 7}


def test_commit_fails_and_is_not_applied_when_the_isr_cannot_acknowledge(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    p = coordinator_partition("g", 5)
    assert commit(cluster, coord, "g", {TP: 1}).partitions[0].error_code == 0
    followers = [b for b in cluster.replicas(OFFSETS_TOPIC, p) if b != coord]
    for f in followers:
        cluster.pause(f)
    resp = commit(cluster, coord, "g", {TP: 2})
    assert resp.partitions[0].error_code == RequestTimedOutError.code  # offsets.commit.timeout.ms = 5000
    assert cluster.group_offsets("g") == {TP: 1}
    for f in followers:
        cluster.resume(f)
    cluster.run_for(1000)
    assert commit(cluster, coord, "g", {TP: 3}).partitions[0].error_code == 0
    assert cluster.group_offsets("g") == {TP: 3}


def test_sync_writes_group_metadata_with_the_assignment(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    member, gen = join_and_sync(cluster, coord, "g", b"partitions-0-1")
    recs = offsets_records(cluster, coord, coordinator_partition("g", 5))
    metas = [v for k, v in recs if isinstance(k, GroupMetadataKey)]
    assert metas, recs
    last = metas[-1]
    assert (last.protocol_type, last.generation, last.protocol, last.leader) == (
        "consumer",
        gen,
        "range",
        member,
    )
    assert [(m.member_id, m.subscription, m.assignment) for m in last.members] == [
        (member, b"sub", b"partitions-0-1")
    ]
    assert last.members[0].session_timeout == 45_000


def test_stale_generation_commit_is_fenced_and_not_written(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    member, gen = join_and_sync(cluster, coord, "g")
    resp = commit(cluster, coord, "g", {TP: 5}, generation_id=gen - 1, member_id=member)
    assert resp.partitions[0].error_code == IllegalGenerationError.code
    recs = offsets_records(cluster, coord, coordinator_partition("g", 5))
    assert not [k for k, _ in recs if isinstance(k, OffsetCommitKey)]


# -------------------------------------------------------------------------------------------- failover
def test_coordinator_failover_loads_offsets_and_members() -> None:
    with Cluster(3, config=FAST, seed=3) as c:
        coord = c.coordinator("g")
        p = coordinator_partition("g", 5)
        member, gen = join_and_sync(c, coord, "g")
        resp = commit(
            c, coord, "g", {TP: 10, TopicPartition("orders", 1): 20}, generation_id=gen, member_id=member
        )
        assert [x.error_code for x in resp.partitions] == [0, 0]
        c.crash(coord)
        assert c.run_until(lambda: c.leader(OFFSETS_TOPIC, p) not in (None, coord), 60_000)
        new = c.coordinator("g")
        assert new is not None and new != coord
        assert c.group_offsets("g") == {TP: 10, TopicPartition("orders", 1): 20}
        described = c.describe_group("g")
        assert described.group_state == "Stable"
        assert [m.member_id for m in described.members] == [member]
        assert described.members[0].member_assignment == b"asg"
        # The member goes on in the same generation with the new coordinator, no rebalance.
        hb = c.request(new, HeartbeatRequest(group_id="g", generation_id=gen, member_id=member))
        assert hb.error_code == 0
        loaded = [e for e in c.events("group_loaded") if e.node == new and e.fields["group"] == "g"]
        assert loaded and loaded[-1].fields["generation"] == gen
        # The old coordinator comes back as a follower of the partition: it serves nothing for "g".
        c.restart(coord)
        c.run_until(lambda: c.brokers[coord].registered, 30_000)
        c.run_for(2_000)
        assert c.request(coord, OffsetFetchRequest(group_id="g")).error_code == NotCoordinatorError.code


def test_leadership_moving_away_unloads_the_groups(cluster: Cluster) -> None:
    coord = cluster.coordinator("g")
    p = coordinator_partition("g", 5)
    assert commit(cluster, coord, "g", {TP: 4}).partitions[0].error_code == 0
    other = next(b for b in cluster.replicas(OFFSETS_TOPIC, p) if b != coord)
    # Move leadership: make ``other`` the preferred (first) replica, then run a preferred election.
    tp = TopicPartition(OFFSETS_TOPIC, p)
    replicas = (other, *[b for b in cluster.replicas(OFFSETS_TOPIC, p) if b != other])
    cluster.request(
        cluster.controller(),
        AlterPartitionReassignmentsRequest(reassignments=(Reassignment(tp=tp, replicas=replicas),)),
    )
    cluster.run_for(2_000)
    cluster.request(cluster.controller(), ElectLeadersRequest(partitions=(tp,)))
    assert cluster.run_until(lambda: cluster.leader(OFFSETS_TOPIC, p) == other, 10_000)
    cluster.run_for(500)
    assert "g" not in cluster.brokers[coord].group_coordinator.groups
    assert any(e.fields["partition"] == p for e in cluster.events("offsets_partition_unloaded", node=coord))
    assert cluster.coordinator("g") == other
    assert cluster.group_offsets("g") == {TP: 4}


# ------------------------------------------------------------------------------------------- retention
def test_retention_expires_offsets_of_a_group_without_members() -> None:
    cfg = {**FAST, "offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000}
    with Cluster(3, config=cfg) as c:
        coord = c.coordinator("simple")
        p = coordinator_partition("simple", 5)
        assert commit(c, coord, "simple", {TP: 3}).partitions[0].error_code == 0
        c.run_for(30_000)
        assert c.group_offsets("simple") == {TP: 3}
        c.run_for(32_000)
        assert c.group_offsets("simple") == {}
        assert [g.group_id for g in c.list_groups()] == []
        c.run_for(1_000)
        recs = offsets_records(c, coord, p)
        assert recs[-2:] == [
            (OffsetCommitKey("simple", "orders", 0), None),
            (GroupMetadataKey("simple"), None),
        ]
        expired = c.events("offsets_expired")
        assert expired and expired[0].fields["group_removed"] is True


def test_retention_of_an_empty_consumer_group_counts_from_when_it_became_empty() -> None:
    cfg = {**FAST, "offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000}
    with Cluster(3, config=cfg) as c:
        coord = c.coordinator("g")
        member, gen = join_and_sync(c, coord, "g")
        assert (
            commit(c, coord, "g", {TP: 8}, generation_id=gen, member_id=member).partitions[0].error_code == 0
        )
        for _ in range(30):  # two minutes of heartbeats: a live member keeps the offsets
            c.run_for(4_000)
            assert (
                c.request(
                    coord, HeartbeatRequest(group_id="g", generation_id=gen, member_id=member)
                ).error_code
                == 0
            )
        assert c.group_offsets("g") == {TP: 8}
        c.request(coord, LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id=member),)))
        c.run_for(50_000)
        assert c.describe_group("g").group_state == "Empty"
        assert c.group_offsets("g") == {TP: 8}  # 2.8 minutes after the commit, 50 s after emptying
        c.run_for(12_000)
        assert c.group_offsets("g") == {}


# ------------------------------------------------------------------------------------------ compaction
def test_compaction_keeps_the_last_offset_per_key_and_loads_the_same() -> None:
    from kafkalite.storage.cleaner import LogCleaner

    with Cluster(3, config={**FAST, "offsets.topic.segment.bytes": 1024}) as c:
        coord = c.coordinator("g")
        p = coordinator_partition("g", 5)
        for i in range(60):
            assert (
                commit(c, coord, "g", {TP: i, TopicPartition("orders", 1): 1000 + i}).partitions[0].error_code
                == 0
            )
        log = c.replica(coord, OFFSETS_TOPIC, p).log
        assert len(log.segments) > 3
        before = sum(1 for _ in log.iter_records())
        stats = LogCleaner().clean(log)
        after = list(log.iter_records())
        assert before == 120 and stats.records_removed == before - len(after) > 100
        # Below the active segment (never cleaned) each key is left once: its last record.
        cleaned = [r.key for r in after if r.offset < log.active_segment.base_offset]
        assert len(cleaned) == len(set(cleaned))
        _meta, offsets = read_offsets_log(log)
        assert {tp: om.offset for tp, om in offsets["g"].items()} == {
            TP: 59,
            TopicPartition("orders", 1): 1059,
        }
        # The compacted log still loads into the same offsets on a new coordinator.
        c.crash(coord)
        assert c.run_until(lambda: c.leader(OFFSETS_TOPIC, p) not in (None, coord), 60_000)
        assert c.group_offsets("g") == {TP: 59, TopicPartition("orders", 1): 1059}


# -------------------------------------------------------------------------------------------- dump-log
def test_dump_log_offsets_decoder(cluster: Cluster) -> None:
    from kafkalite.tools.dump_log import dump

    coord = cluster.coordinator("g")
    p = coordinator_partition("g", 5)
    member, gen = join_and_sync(cluster, coord, "g")
    assert (
        commit(cluster, coord, "g", {TP: 42}, generation_id=gen, member_id=member).partitions[0].error_code
        == 0
    )
    log = cluster.replica(coord, OFFSETS_TOPIC, p).log
    log.flush()
    lines: list[str] = []
    assert dump(log.segments[0].log_path, offsets_decoder=True, write=lines.append) == 0
    text = "\n".join(lines)
    assert (
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer"'
        in text
    )
    assert 'key: {"type":"1","data":{"group":"g","topic":"orders","partition":0}}' in text
    assert '"offset":42' in text


def test_cli_dump_log_offsets_decoder_flag(cluster: Cluster) -> None:
    from click.testing import CliRunner

    from kafkalite.cli import kafkalite

    coord = cluster.coordinator("g")
    assert commit(cluster, coord, "g", {TP: 5}).partitions[0].error_code == 0
    log = cluster.replica(coord, OFFSETS_TOPIC, coordinator_partition("g", 5)).log
    log.flush()
    result = CliRunner().invoke(kafkalite, ["dump-log", "--offsets-decoder", str(log.segments[0].log_path)])
    assert result.exit_code == 0, result.output
    assert "| offset: 0 CreateTime: " in result.output
    assert (
        'key: {"type":"1","data":{"group":"g","topic":"orders","partition":0}} payload: {"version":"3"'
        in result.output
    )


# ------------------------------------------------------------------------------------ internal topic
def test_clients_cannot_produce_to_the_offsets_topic(cluster: Cluster) -> None:
    coord = cluster.coordinator("g1")
    p = coordinator_partition("g1", 5)
    tp = TopicPartition(OFFSETS_TOPIC, p)
    end = cluster.replica(coord, OFFSETS_TOPIC, p).log_end_offset
    forged = build_batch([(b"key", b"not an offset record")], timestamp=0)
    resp = cluster.request(
        coord, ProduceRequest(acks=-1, partitions=(ProducePartition(tp=tp, records=forged),))
    )
    (part,) = resp.partitions
    assert part.error_code == InvalidTopicError.code
    producer = cluster.producer("p")
    fut = producer.send(OFFSETS_TOPIC, b"v", partition=p)
    assert cluster.run_until(fut.done, 30_000)
    assert isinstance(fut.exception(), InvalidTopicError)
    assert cluster.replica(coord, OFFSETS_TOPIC, p).log_end_offset == end  # nothing was written
    meta = cluster.request(coord, MetadataRequest(topics=(OFFSETS_TOPIC, "orders")))
    assert {t.name: t.is_internal for t in meta.topics}[OFFSETS_TOPIC] is True
    # The coordinator's own writes still go through.
    join_and_sync(cluster, coord, "g1")
    assert cluster.replica(coord, OFFSETS_TOPIC, p).log_end_offset > end


def test_txn_offset_commit_to_a_classic_group_checks_the_member_as_kafka_does(cluster) -> None:
    """ClassicGroup's transactional check: the member and generation when the request names them (v3), its
    group metadata not required (before v3), and the group's state not enforced."""
    from kafkalite.errors import IllegalGenerationError, UnknownMemberIdError
    from kafkalite.protocol.txn import TxnOffsetCommitRequest

    coord = cluster.coordinator("g")
    member, gen = join_and_sync(cluster, coord, "g")

    def txn(group: str, member_id: str, generation: int, instance: str | None = None) -> int:
        coord = cluster.coordinator(group)
        req = TxnOffsetCommitRequest(
            transactional_id="t", group_id=group, producer_id=4000, producer_epoch=0,
            generation_id=generation, member_id=member_id, group_instance_id=instance,
            partitions=(OffsetCommitPartition(tp=TP, committed_offset=1),),
        )  # fmt: skip
        return cluster.request(coord, req).partitions[0].error_code

    assert txn("g", member, gen) == 0
    assert txn("g", "", -1) == 0  # no group metadata: an old client
    assert txn("g", "stranger", gen) == UnknownMemberIdError.code
    assert txn("g", member, gen + 1) == IllegalGenerationError.code
    assert txn("g", member, -1) == IllegalGenerationError.code
    assert txn("g", member, gen, instance="i-1") == UnknownMemberIdError.code  # no such static member
    assert txn("nope", "m", 3) == IllegalGenerationError.code  # a group this coordinator does not have
    assert "nope" not in cluster.brokers[cluster.coordinator("nope")].group_coordinator.groups
    assert txn("simple", "", -1) == 0  # a new group used for commits only


def test_txn_offset_commit_from_a_fenced_static_member_is_refused(cluster) -> None:
    from kafkalite.errors import FencedInstanceIdError
    from kafkalite.protocol.txn import TxnOffsetCommitRequest

    coord = cluster.coordinator("s")
    protocols = (JoinGroupProtocol(name="range", metadata=b"sub"),)
    r = cluster.request(coord, JoinGroupRequest(group_id="s", group_instance_id="i-1", protocols=protocols))
    assert r.error_code == 0, r
    req = TxnOffsetCommitRequest(
        transactional_id="t", group_id="s", producer_id=4000, producer_epoch=0, generation_id=r.generation_id,
        member_id="someone-else", group_instance_id="i-1",
        partitions=(OffsetCommitPartition(tp=TP, committed_offset=1),),
    )  # fmt: skip
    assert cluster.request(coord, req).partitions[0].error_code == FencedInstanceIdError.code
