"""GroupCoordinator with a store (the broker's GroupMetadataManager seen from the coordinator): answers wait
for the append, failures are reported and not applied. Unit level: a fake store whose appends complete when
the test says so."""

from __future__ import annotations

from typing import Any

from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.broker.group.manager import (
    group_from_value,
    group_metadata_value,
    offset_commit_error,
    store_group_error,
)
from kafkalite.broker.group.member import GroupState
from kafkalite.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    InvalidCommitOffsetSizeError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownServerError,
)
from kafkalite.protocol.api import TopicPartition
from kafkalite.protocol.group import (
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from tests.broker.test_group_coordinator import Box, Timers

TP = TopicPartition("t", 0)


class FakeStore:
    def __init__(self) -> None:
        self.pending: list[tuple[str, Any, Any]] = []

    def store_offsets(self, group, offsets, done) -> None:
        self.pending.append(("offsets", dict(offsets), done))

    def store_group(self, group, assignment, done) -> None:
        self.pending.append(("group", dict(assignment), done))

    def finish(self, code: int = 0) -> None:
        kind, data, done = self.pending.pop(0)
        done(code)


def make() -> tuple[GroupCoordinator, FakeStore, Timers]:
    t = Timers()
    store = FakeStore()
    coord = GroupCoordinator(
        t.clock,
        t.set_timer,
        t.cancel_timer,
        lambda *a, **k: None,
        {"group.initial.rebalance.delay.ms": 0},
        store=store,
    )
    return coord, store, t


def join(coord: GroupCoordinator, t: Timers, instance: str | None = None) -> tuple[str, int]:
    protos = (JoinGroupProtocol(name="range", metadata=b"s"),)
    box = Box()
    coord.handle_join_group(JoinGroupRequest(group_id="g", protocols=protos, group_instance_id=instance), box)
    t.advance(1)
    r = box.got[-1]
    if r.error_code:  # MEMBER_ID_REQUIRED for dynamic members
        coord.handle_join_group(
            JoinGroupRequest(
                group_id="g", member_id=r.member_id, protocols=protos, group_instance_id=instance
            ),
            box,
        )
    t.advance(1)
    r = box.got[-1]
    assert r.error_code == 0
    return r.member_id, r.generation_id


def test_sync_answers_only_after_the_group_record_is_stored() -> None:
    coord, store, t = make()
    member, gen = join(coord, t)
    box = Box()
    coord.handle_sync_group(
        SyncGroupRequest(
            group_id="g",
            generation_id=gen,
            member_id=member,
            assignments=(SyncGroupAssignment(member_id=member, assignment=b"a"),),
        ),
        box,
    )
    assert box.got == [] and coord.group_state("g") == "CompletingRebalance"
    assert store.pending[0][:2] == ("group", {member: b"a"})
    store.finish(0)
    assert box.got[0].error_code == 0 and box.got[0].assignment == b"a"
    assert coord.group_state("g") == "Stable"


def test_failed_group_store_fails_the_sync_and_rebalances() -> None:
    coord, store, t = make()
    member, gen = join(coord, t)
    box = Box()
    assignments = (SyncGroupAssignment(member_id=member, assignment=b"a"),)
    coord.handle_sync_group(
        SyncGroupRequest(group_id="g", generation_id=gen, member_id=member, assignments=assignments), box
    )
    store.finish(store_group_error(RequestTimedOutError.code))
    assert box.got[0].error_code == RebalanceInProgressError.code
    assert coord.group_state("g") == "PreparingRebalance"
    assert coord.groups["g"].members[member].assignment == b""


def test_commit_waits_for_the_store_and_failure_is_not_applied() -> None:
    coord, store, t = make()
    box = Box()
    req = OffsetCommitRequest(group_id="g", partitions=(OffsetCommitPartition(tp=TP, committed_offset=5),))
    coord.handle_offset_commit(req, box)
    assert box.got == [] and coord.offsets == {}
    store.finish(offset_commit_error(NotEnoughReplicasError.code))
    assert box.got[0].partitions[0].error_code == CoordinatorNotAvailableError.code
    fetched = Box()
    coord.handle_offset_fetch(OffsetFetchRequest(group_id="g", partitions=(TP,)), fetched)
    assert fetched.got[0].partitions[0].committed_offset == -1
    coord.handle_offset_commit(req, box)
    store.finish(0)
    assert box.got[1].partitions[0].error_code == 0
    assert coord.offsets["g"][TP].offset == 5


def test_commit_with_too_long_metadata_is_refused_per_partition() -> None:
    coord, store, t = make()
    box = Box()
    parts = (
        OffsetCommitPartition(tp=TP, committed_offset=1, committed_metadata="x" * 4097),
        OffsetCommitPartition(tp=TopicPartition("t", 1), committed_offset=2),
    )
    coord.handle_offset_commit(OffsetCommitRequest(group_id="g", partitions=parts), box)
    assert [k for k, d, _ in store.pending] == ["offsets"] and TP not in store.pending[0][1]
    store.finish(0)
    assert [p.error_code for p in box.got[0].partitions] == [12, 0]  # OFFSET_METADATA_TOO_LARGE


def test_kafka_error_translations() -> None:
    assert offset_commit_error(NotLeaderOrFollowerError.code) == NotCoordinatorError.code
    assert offset_commit_error(MessageTooLargeError.code) == InvalidCommitOffsetSizeError.code
    assert offset_commit_error(RequestTimedOutError.code) == RequestTimedOutError.code
    assert store_group_error(RequestTimedOutError.code) == RebalanceInProgressError.code
    assert store_group_error(MessageTooLargeError.code) == UnknownServerError.code
    assert store_group_error(NotEnoughReplicasError.code) == CoordinatorNotAvailableError.code


def test_static_member_rejoin_is_stored_before_its_new_id_is_used() -> None:
    coord, store, t = make()
    old, gen = join(coord, t, instance="i-1")
    coord.handle_sync_group(
        SyncGroupRequest(
            group_id="g",
            generation_id=gen,
            member_id=old,
            group_instance_id="i-1",
            assignments=(SyncGroupAssignment(member_id=old, assignment=b"a"),),
        ),
        Box(),
    )
    store.finish(0)
    assert coord.group_state("g") == "Stable"
    # The restarted static member joins with no member id: it gets a new one, stored first.
    box = Box()
    protos = (JoinGroupProtocol(name="range", metadata=b"s"),)
    coord.handle_join_group(JoinGroupRequest(group_id="g", protocols=protos, group_instance_id="i-1"), box)
    assert box.got == []
    kind, assignment, _ = store.pending[0]
    new = next(iter(assignment))
    assert kind == "group" and new != old and assignment == {new: b"a"}
    store.finish(0)
    assert box.got[0].error_code == 0 and box.got[0].member_id == new
    hb = Box()
    coord.handle_heartbeat(
        HeartbeatRequest(group_id="g", generation_id=gen, member_id=old, group_instance_id="i-1"), hb
    )
    assert hb.got[0].error_code == FencedInstanceIdError.code
    # A failed store puts the old id back.
    coord.handle_join_group(JoinGroupRequest(group_id="g", protocols=protos, group_instance_id="i-1"), box)
    store.finish(NotCoordinatorError.code)
    assert box.got[-1].error_code == NotCoordinatorError.code
    assert coord.groups["g"].static_members["i-1"] == new


def test_group_record_round_trips_into_a_loaded_group() -> None:
    coord, store, t = make()
    member, gen = join(coord, t)
    group = coord.groups["g"]
    value = group_metadata_value(group, {member: b"share"})
    loaded = group_from_value("g", value)
    assert loaded.state is GroupState.STABLE
    assert (loaded.generation_id, loaded.protocol_name, loaded.leader_id) == (gen, "range", member)
    assert loaded.members[member].assignment == b"share"
    assert loaded.members[member].metadata("range") == b"s"
