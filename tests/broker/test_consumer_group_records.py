"""The ``__consumer_offsets`` records of KIP-848 consumer groups: their encoding (Kafka's key versions 3-8,
value version 0 in the flexible encoding), what each heartbeat writes (only what changed, tombstones for what
went), and the replay that rebuilds a group on the coordinator that loads the partition."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.group.consumer_group import MemberState
from kafkalite.broker.group.consumer_group_records import ConsumerGroupReplay
from kafkalite.broker.group.manager import consumer_group_write_error
from kafkalite.errors import NotCoordinatorError, NotLeaderOrFollowerError
from kafkalite.protocol import consumer_group_records as cgr
from kafkalite.protocol.offsets_schema import decode_key, decode_value, format_record
from tests.broker.test_consumer_group_protocol import NAMES, OPS, Cluster, Member

GID = "g"


class RecordingStore:
    """A ``__consumer_offsets`` partition: appends are kept in order and acknowledged with ``code``."""

    def __init__(self) -> None:
        self.log: list[tuple[bytes, bytes | None]] = []
        self.code = 0

    def store_consumer_group_records(self, group_id: str, records: list, done: Any) -> None:
        if self.code == 0:
            self.log += records
        done(consumer_group_write_error(self.code))  # as the broker's GroupMetadataManager answers

    def kinds(self, start: int = 0) -> list[tuple[str, bool]]:
        """(record type, tombstone?) of each record appended since ``start``."""
        return [(type(decode_key(k)).__name__, v is None) for k, v in self.log[start:]]


def with_store(c: Cluster) -> RecordingStore:
    store = RecordingStore()
    c.gc.store = store  # type: ignore[assignment]
    return store


def replayed(log: list[tuple[bytes, bytes | None]]) -> ConsumerGroupReplay:
    replay = ConsumerGroupReplay()
    for k, v in log:
        key = decode_key(k)
        replay.replay(key, decode_value(key, v))  # type: ignore[arg-type]
    return replay


def snapshot(group: Any) -> tuple:
    return (group.group_epoch, group.assignment_epoch, dict(group.members), dict(group.target),
            dict(group.partition_owners), dict(group.subscribed_partitions), dict(group.static_members))  # fmt: skip


# ------------------------------------------------------------------------------------------ encoding
def test_keys_and_values_are_kafkas_bytes() -> None:
    # key: int16 version, int16-length strings; value: int16 version 0, fields, an empty tagged-field section
    assert cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")) == b"\x00\x03\x00\x01g"
    assert (
        cgr.encode_key(cgr.ConsumerGroupCurrentMemberAssignmentKey("g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    )
    assert cgr.encode_value(cgr.ConsumerGroupMetadataValue(10)) == b"\x00\x00\x00\x00\x00\x0a\x00"
    tid = uuid.UUID(int=1)
    current = cgr.ConsumerGroupCurrentMemberAssignmentValue(5, 4, 1, ((tid, (0, 2)),), ())
    assert cgr.encode_value(current) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x04" + b"\x01"
        + b"\x02" + tid.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x00"  # 1 topic, 2 parts
        + b"\x01"  # no partition pending revocation (compact array of 0)
        + b"\x00"
    )  # fmt: skip
    member = cgr.ConsumerGroupMemberMetadataValue(None, "r1", "c", "/h", ("t",), None, 300, "uniform")
    assert cgr.encode_value(member) == (
        b"\x00\x00" + b"\x00" + b"\x03r1" + b"\x02c" + b"\x03/h" + b"\x02\x02t" + b"\x00"
        + b"\x00\x00\x01\x2c" + b"\x08uniform" + b"\x00"
    )  # fmt: skip


NAMES_ST = st.text(st.characters(codec="utf-8"), max_size=8)
PARTS = st.lists(
    st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)), max_size=3
).map(tuple)


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(
        st.builds(cgr.ConsumerGroupMetadataValue, st.integers(-(2**31), 2**31 - 1)),
        st.builds(cgr.ConsumerGroupTargetAssignmentMetadataValue, st.integers(0, 2**31 - 1)),
        st.builds(cgr.ConsumerGroupTargetAssignmentMemberValue, PARTS),
        st.builds(
            cgr.ConsumerGroupCurrentMemberAssignmentValue,
            st.integers(-2, 99),
            st.integers(-2, 99),
            st.integers(0, 2),
            PARTS,
            PARTS,
        ),  # fmt: skip
        st.builds(
            cgr.ConsumerGroupPartitionMetadataValue,
            st.lists(st.builds(cgr.TopicMetadata, st.uuids(), NAMES_ST, st.integers(0, 99)), max_size=3).map(
                tuple
            ),
        ),
        st.builds(
            cgr.ConsumerGroupMemberMetadataValue,
            st.none() | NAMES_ST,
            st.none() | NAMES_ST,
            NAMES_ST,
            NAMES_ST,
            st.lists(NAMES_ST, max_size=3).map(tuple),
            st.none() | NAMES_ST,
            st.integers(-1, 10**6),
            st.none() | NAMES_ST,
            st.none()
            | st.builds(
                cgr.ClassicMemberMetadata,
                st.integers(0, 10**6),
                st.lists(st.tuples(NAMES_ST, st.binary(max_size=8)), max_size=2).map(tuple),
            ),
        ),  # fmt: skip
    ),
    NAMES_ST,
)
def test_every_value_round_trips(value: Any, member_id: str) -> None:
    key_type = {
        cgr.ConsumerGroupMetadataValue: cgr.ConsumerGroupMetadataKey,
        cgr.ConsumerGroupTargetAssignmentMetadataValue: cgr.ConsumerGroupTargetAssignmentMetadataKey,
        cgr.ConsumerGroupPartitionMetadataValue: cgr.ConsumerGroupPartitionMetadataKey,
        cgr.ConsumerGroupTargetAssignmentMemberValue: cgr.ConsumerGroupTargetAssignmentMemberKey,
        cgr.ConsumerGroupCurrentMemberAssignmentValue: cgr.ConsumerGroupCurrentMemberAssignmentKey,
        cgr.ConsumerGroupMemberMetadataValue: cgr.ConsumerGroupMemberMetadataKey,
    }[type(value)]
    key = key_type(GID, member_id) if key_type in (
        cgr.ConsumerGroupTargetAssignmentMemberKey, cgr.ConsumerGroupCurrentMemberAssignmentKey,
        cgr.ConsumerGroupMemberMetadataKey) else key_type(GID)  # fmt: skip
    k = cgr.encode_key(key)
    assert decode_key(k) == key
    assert decode_value(key, cgr.encode_value(value)) == value
    assert decode_value(key, None) is None


def test_dump_log_prints_the_records_with_kafkas_field_names() -> None:
    c = Cluster()
    store = with_store(c)
    Member(c, "a").heartbeat()
    lines = [format_record(k, v) for k, v in store.log]
    assert lines[0].startswith('key: {"type":"5","data":{"groupId":"g","memberId":')
    assert (
        '"subscribedTopicNames":["clicks","orders"]' in lines[0] and '"rebalanceTimeoutMs":60000' in lines[0]
    )
    assert '"numPartitions":12' in lines[1] and '"topicName":"orders"' in lines[1]
    assert lines[2] == 'key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":1}}'
    assert '"assignmentEpoch":1' in lines[4]
    assert '"memberEpoch":1,"previousMemberEpoch":0,"state":0' in lines[5]
    gone = cgr.encode_key(cgr.ConsumerGroupMetadataKey("g"))
    assert format_record(gone, None) == 'key: {"type":"3","data":{"groupId":"g"}} payload: <DELETE>'


# ------------------------------------------------------------------------------------------ writes
def test_a_join_writes_kafkas_records_in_kafkas_order_and_a_quiet_heartbeat_writes_nothing() -> None:
    c = Cluster()
    store = with_store(c)
    a = Member(c, "a")
    a.heartbeat()
    assert store.kinds() == [
        ("ConsumerGroupMemberMetadataKey", False),
        ("ConsumerGroupPartitionMetadataKey", False),
        ("ConsumerGroupMetadataKey", False),
        ("ConsumerGroupTargetAssignmentMemberKey", False),
        ("ConsumerGroupTargetAssignmentMetadataKey", False),
        ("ConsumerGroupCurrentMemberAssignmentKey", False),
    ]
    n = len(store.log)
    a.heartbeat()
    assert len(store.log) == n  # nothing changed, nothing written


def test_a_leaving_member_writes_its_tombstones_then_the_new_epoch() -> None:
    c = Cluster()
    store = with_store(c)
    a, b = c.member(name="a"), c.member(name="b")
    a.heartbeat()
    b.heartbeat()
    c.settle()
    n = len(store.log)
    b.leave()
    kinds = store.kinds(n)
    assert kinds[:3] == [
        ("ConsumerGroupCurrentMemberAssignmentKey", True),
        ("ConsumerGroupTargetAssignmentMemberKey", True),
        ("ConsumerGroupMemberMetadataKey", True),
    ]
    assert ("ConsumerGroupMetadataKey", False) in kinds[3:]
    assert {decode_key(k).member_id for k, v in store.log[n : n + 3]} == {b.member_id}  # type: ignore[union-attr]


def test_an_expired_member_is_written_away_and_a_deleted_group_leaves_no_record() -> None:
    c = Cluster()
    store = with_store(c)
    a = c.member(name="a")
    a.heartbeat()
    c.timers.advance(46_000)  # group.consumer.session.timeout.ms
    assert not c.group.members
    group = replayed(store.log).groups(NAMES)[GID]
    assert not group.members and group.group_epoch == 2
    c.gc.consumer.delete_empty_group(GID)  # a JoinGroup converts it to a classic group
    assert store.log[-1] == (cgr.encode_key(cgr.ConsumerGroupMetadataKey(GID)), None)
    assert replayed(store.log).groups(NAMES) == {}


def test_a_failed_write_fails_the_heartbeat_and_the_next_write_rewrites_everything() -> None:
    c = Cluster()
    store = with_store(c)
    a = c.member(name="a")
    a.heartbeat()
    b = c.member(name="b")
    store.code = NotLeaderOrFollowerError.code
    assert b.heartbeat().error_code == NotCoordinatorError.code
    store.code = 0
    a.heartbeat()
    c.settle()
    assert snapshot(replayed(store.log).groups(NAMES)[GID]) == snapshot(c.group)


# ------------------------------------------------------------------------------------------ load
def test_a_new_coordinator_rebuilds_the_group_and_its_members_carry_on() -> None:
    c = Cluster()
    store = with_store(c)
    members = [c.member(name=n, instance_id="i3" if n == "m3" else None) for n in ("m1", "m2", "m3")]
    for m in members:
        m.heartbeat()
    c.settle()
    members.append(c.member(name="m4"))
    members[-1].heartbeat()
    members[0].heartbeat()  # m1 now revokes what moves to m4
    assert c.group.members[members[0].member_id].state is MemberState.UNREVOKED_PARTITIONS
    before = snapshot(c.group)

    new = Cluster()
    replay = replayed(store.log)
    new.gc.consumer.load_group(replay.groups(NAMES)[GID], replay.image(GID))
    assert snapshot(new.group) == before
    new_store = with_store(new)
    for m in members:
        m.cluster = new
    new.members = members
    epochs = {m.name: m.epoch for m in members}
    assert [m.heartbeat().error_code for m in members] == [0, 0, 0, 0]  # no FENCED_MEMBER_EPOCH, no UNKNOWN
    assert all(m.epoch >= epochs[m.name] for m in members)
    new.settle()
    assert set().union(*(m.owned for m in members)) == {
        (t, p) for t, n in new.topics.items() for p in range(n)
    }
    assert new.group.group_epoch == before[0]  # the failover itself rebalanced nothing
    assert new_store.log  # and the new coordinator wrote only what changed since (the m1 -> m4 move)
    assert not any(decode_key(k) == cgr.ConsumerGroupMetadataKey(GID) for k, _ in new_store.log)


def test_loaded_members_expire_and_a_revoking_member_is_fenced_as_before() -> None:
    c = Cluster()
    store = with_store(c)
    a = c.member(name="a")
    a.heartbeat()
    c.settle()
    b = c.member(name="b")
    b.heartbeat()
    a.heartbeat()
    assert c.group.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    new = Cluster()
    replay = replayed(store.log)
    new.gc.consumer.load_group(replay.groups(NAMES)[GID], replay.image(GID))
    with_store(new)
    timers = new.gc.consumer._rebalance_timers
    assert set(timers) == {(GID, a.member_id)}  # a still revokes: its rebalance timer runs again
    new.timers.advance(60_001)  # a's rebalance timeout (60 s) and both sessions (45 s) have run out
    assert not new.group.members
    assert any(
        ev == "consumer_group_member_fenced" and f["reason"].startswith("session") for ev, f in new.events
    )


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_the_log_always_rebuilds_the_group_in_memory(ops: list[tuple[str, int]]) -> None:
    c = Cluster()
    store = with_store(c)
    n = 0
    for op, k in ops:
        alive = [m for m in c.members if m.alive]
        if op in ("join", "static") or not alive:
            n += 1
            c.member(name=f"m{n}", instance_id=f"i{n}" if op == "static" else None).heartbeat()
        elif op == "leave":
            alive[k % len(alive)].leave(-2 if alive[k % len(alive)].instance_id else -1)
        elif op == "crash":
            alive[k % len(alive)].alive = False
        elif op == "beat":
            alive[k % len(alive)].heartbeat()
        else:
            c.timers.advance(5_000)
            c.round()
        assert snapshot(replayed(store.log).groups(NAMES)[GID]) == snapshot(c.group)
