"""Online migration between the classic protocol and KIP-848's consumer protocol
(``group.consumer.migration.policy``): a joining ConsumerGroupHeartbeat upgrades a live classic group, its
classic members go on with JoinGroup/SyncGroup/Heartbeat translated to the consumer group, and the group
turns classic again when its last consumer-protocol member leaves. Sans-I/O, on fake timers."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.broker.group.consumer_group import ConsumerGroupState
from kafkalite.broker.group.member import GroupState
from kafkalite.config.broker import BrokerConfig
from kafkalite.errors import (
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.consumer_protocol import ConsumerAssignment, ConsumerSubscription
from kafkalite.protocol.group import (
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from kafkalite.protocol.offsets_schema import GroupMetadataKey, decode_key
from tests.broker.test_consumer_group_protocol import GROUP, Cluster, Member
from tests.broker.test_consumer_group_records import RecordingStore, replayed, snapshot

ALL = {("orders", p) for p in range(12)} | {("clicks", p) for p in range(6)}
NAMES = {t: t for t in ("orders", "clicks")}


class Classic:
    """A classic consumer of the ``consumer`` protocol type that rejoins as a cooperative one does: it reports
    what it owns in its subscription and gives up what a SyncGroup no longer hands it."""

    def __init__(self, c: Cluster, name: str, protocol_type: str = "consumer") -> None:
        self.c, self.name, self.protocol_type = c, name, protocol_type
        self.member_id, self.generation = "", -1
        self.owned: set[tuple[str, int]] = set()

    def _one(self, call: Any, req: Any) -> Any:
        out: list[Any] = []
        call(req, out.append)
        assert len(out) == 1, out
        return out[0]

    def join_request(self) -> JoinGroupRequest:
        sub = ConsumerSubscription(
            ("orders", "clicks"), owned_partitions=tuple(TopicPartition(t, p) for t, p in sorted(self.owned))
        ).encode()
        return JoinGroupRequest(group_id=GROUP, member_id=self.member_id, session_timeout_ms=10_000,
                                rebalance_timeout_ms=30_000, protocol_type=self.protocol_type,
                                protocols=(JoinGroupProtocol(name="range", metadata=sub),))  # fmt: skip

    def join(self) -> Any:
        """JoinGroup (with the KIP-394 member id round trip), answered at once in a consumer group."""
        out: list[Any] = []
        self.c.gc.handle_join_group(self.join_request(), out.append, client_id=self.name)
        if out and out[-1].error_code == MemberIdRequiredError.code:
            self.member_id = out[-1].member_id
            self.c.gc.handle_join_group(self.join_request(), out.append, client_id=self.name)
        return out[-1] if out else None

    def sync(self, assignments: tuple[SyncGroupAssignment, ...] = ()) -> Any:
        req = SyncGroupRequest(group_id=GROUP, generation_id=self.generation, member_id=self.member_id,
                               protocol_type="consumer", protocol_name="range", assignments=assignments)  # fmt: skip
        out: list[Any] = []
        self.c.gc.handle_sync_group(req, out.append)
        if out and out[-1].error_code == 0:
            got = ConsumerAssignment.decode(out[-1].assignment).partitions
            self.owned = {(tp.topic, tp.partition) for tp in got}
        return out[-1] if out else None

    def heartbeat(self) -> int:
        req = HeartbeatRequest(group_id=GROUP, generation_id=self.generation, member_id=self.member_id)
        return self._one(self.c.gc.handle_heartbeat, req).error_code

    def rejoin(self) -> None:
        """Rejoin and sync until the coordinator is content (a consumer group answers at once)."""
        for _ in range(4):
            r = self.join()
            assert r.error_code == 0, r
            self.generation = r.generation_id
            s = self.sync()
            if s.error_code == 0 and self.heartbeat() == 0:
                return

    def commit(self, generation: int) -> int:
        req = OffsetCommitRequest(group_id=GROUP, generation_id=generation, member_id=self.member_id,
                                  partitions=(OffsetCommitPartition(tp=TopicPartition("orders", 0),
                                                                    committed_offset=1),))  # fmt: skip
        return self._one(self.c.gc.handle_offset_commit, req).partitions[0].error_code


def classic_group(c: Cluster) -> tuple[Classic, Classic]:
    """A Stable classic group of two members: a has orders-0..5 and clicks-0..2, b the rest."""
    a, b = Classic(c, "a"), Classic(c, "b")
    outs: dict[str, list[Any]] = {"a": [], "b": []}
    for m in (a, b):
        c.gc.handle_join_group(m.join_request(), outs[m.name].append, client_id=m.name)
        m.member_id = outs[m.name][-1].member_id
        c.gc.handle_join_group(m.join_request(), outs[m.name].append, client_id=m.name)
    c.timers.advance(1)
    leader = outs["a"][-1]
    a.generation = b.generation = leader.generation_id
    share = {a.member_id: [("orders", p) for p in range(6)] + [("clicks", p) for p in range(3)],
             b.member_id: [("orders", p) for p in range(6, 12)] + [("clicks", p) for p in range(3, 6)]}  # fmt: skip
    assignments = tuple(
        SyncGroupAssignment(member_id=mid, assignment=ConsumerAssignment(tuple(TopicPartition(*tp) for tp in tps)).encode())
        for mid, tps in share.items()
    )  # fmt: skip
    leader_is_a = leader.leader == a.member_id
    (a if leader_is_a else b).sync(assignments)
    (b if leader_is_a else a).sync()
    assert c.gc.groups[GROUP].state is GroupState.STABLE
    return a, b


def make(policy: str | None = None) -> Cluster:
    config = {"group.initial.rebalance.delay.ms": 0}
    if policy is not None:
        config["group.consumer.migration.policy"] = policy
    return Cluster(config)


def settle(c: Cluster, classic: list[Classic], new: list[Member], rounds: int = 10) -> None:
    for _ in range(rounds):
        for m in classic:
            if m.heartbeat() == RebalanceInProgressError.code:
                m.rejoin()
        for n in new:
            n.heartbeat()
        owned = [tp for m in classic for tp in m.owned] + [tp for n in new for tp in n.owned]
        assert len(owned) == len(set(owned)), "a partition with two owners"
    assert c.group.state() is ConsumerGroupState.STABLE


# ------------------------------------------------------------------------------------------ upgrade
def test_a_joining_consumer_member_upgrades_a_live_classic_group() -> None:
    c = make()
    a, b = classic_group(c)
    generation = a.generation
    store = RecordingStore()
    c.gc.store = store  # type: ignore[assignment]
    n = Member(c, "n")
    assert n.heartbeat().error_code == 0
    group = c.group
    # the classic members are members of the consumer group at epoch = their generation, owning what they had
    assert {mid: (m.member_epoch, m.uses_classic_protocol) for mid, m in group.members.items() if mid != n.member_id} == {
        a.member_id: (generation, True), b.member_id: (generation, True)}  # fmt: skip
    assert group.members[a.member_id].assigned == frozenset(a.owned)
    assert group.group_epoch == generation + 1 and not c.gc.groups[GROUP].members
    assert (type(decode_key(store.log[0][0])), store.log[0][1]) == (
        GroupMetadataKey,
        None,
    )  # classic: tombstone
    # the classic members learn of the new epoch from Heartbeat, rejoin, give up the new member's share
    settle(c, [a, b], [n])
    assert a.owned | b.owned | n.owned == ALL and n.owned
    assert a.generation == b.generation == n.epoch == c.group.group_epoch
    # and the log rebuilds the mixed group, classic members included
    assert snapshot(replayed(store.log).groups(NAMES)[GROUP]) == snapshot(c.group)


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_a_policy_without_upgrades_leaves_the_classic_group_alone(policy: str) -> None:
    c = make(policy)
    a, b = classic_group(c)
    assert Member(c, "n").heartbeat().error_code == GroupIdNotFoundError.code
    assert GROUP not in c.gc.consumer.groups and len(c.gc.groups[GROUP].members) == 2
    assert a.heartbeat() == b.heartbeat() == 0


def test_only_a_joining_member_of_the_consumer_protocol_type_upgrades() -> None:
    c = make("UPGRADE")  # the policy's case does not matter
    classic_group(c)
    stranger = Member(c, "s")
    stranger.member_id, stranger.epoch = "s", 3
    assert stranger.heartbeat().error_code == GroupIdNotFoundError.code  # not joining
    other = make()
    classic_group(other)
    other.gc.groups[GROUP].protocol_type = "connect"
    assert Member(other, "n").heartbeat().error_code == GroupIdNotFoundError.code


# ------------------------------------------------------------------------------------------ classic members
def test_classic_members_of_a_consumer_group_get_kafkas_errors() -> None:
    c = make()
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    good = a.generation
    a.generation = good + 5
    assert a.heartbeat() == IllegalGenerationError.code
    a.generation = good
    assert a.heartbeat() == RebalanceInProgressError.code  # the group epoch moved past it
    ghost = Classic(c, "ghost")
    ghost.member_id = "ghost"
    assert ghost.heartbeat() == UnknownMemberIdError.code
    assert Classic(c, "x", protocol_type="connect").join().error_code == InconsistentGroupProtocolError.code
    # OffsetCommit: the generation is the member epoch; a classic member hears ILLEGAL_GENERATION
    assert a.commit(good) == 0
    assert a.commit(good + 1) == IllegalGenerationError.code
    n_commit = OffsetCommitRequest(group_id=GROUP, generation_id=n.epoch + 1, member_id=n.member_id,
                                   partitions=(OffsetCommitPartition(tp=TopicPartition("orders", 0), committed_offset=2),))  # fmt: skip
    out: list[Any] = []
    c.gc.handle_offset_commit(n_commit, out.append)
    assert out[0].partitions[0].error_code == StaleMemberEpochError.code


def test_a_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    c = make()
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    assert a.heartbeat() == RebalanceInProgressError.code  # starts a's join timer (30 s)
    for _ in range(4):  # b takes part, a keeps heartbeating with its old generation but never rejoins
        c.timers.advance(8_000)
        a.heartbeat()
        if b.heartbeat() == RebalanceInProgressError.code:
            b.rejoin()
        n.heartbeat()
    assert a.member_id not in c.group.members and b.member_id in c.group.members


def test_a_silent_classic_member_expires_after_its_own_session_timeout() -> None:
    c = make()
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    for _ in range(3):
        c.timers.advance(4_000)
        n.heartbeat()
        b.heartbeat()
    # a's session.timeout.ms is 10 s, not group.consumer.session.timeout.ms (45 s)
    assert a.member_id not in c.group.members and b.member_id in c.group.members


# ------------------------------------------------------------------------------------------ downgrade
def test_the_last_consumer_member_leaving_turns_the_group_classic_again() -> None:
    c = make()
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    settle(c, [a, b], [n])
    epoch = c.group.group_epoch
    n.leave()
    assert GROUP not in c.gc.consumer.groups
    classic = c.gc.groups[GROUP]
    assert set(classic.members) == {a.member_id, b.member_id}
    assert classic.state is GroupState.PREPARING_REBALANCE and classic.generation_id == epoch
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    # the members rejoin the classic group as for any rebalance
    assert a.heartbeat() == RebalanceInProgressError.code
    outs: list[Any] = []
    for m in (a, b):
        c.gc.handle_join_group(m.join_request(), outs.append, client_id=m.name)
    c.timers.advance(1)
    assert {r.generation_id for r in outs} == {epoch + 1} and classic.state is GroupState.COMPLETING_REBALANCE


def test_with_the_upgrade_policy_the_group_stays_a_consumer_group() -> None:
    c = make("upgrade")
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    settle(c, [a, b], [n])
    n.leave()
    assert set(c.group.members) == {a.member_id, b.member_id}
    settle(c, [a, b], [])
    assert a.owned | b.owned == ALL


def test_a_classic_member_leaving_with_leave_group_is_removed() -> None:
    c = make()
    a, b = classic_group(c)
    n = Member(c, "n")
    n.heartbeat()
    out: list[Any] = []
    c.gc.handle_leave_group(
        LeaveGroupRequest(group_id=GROUP, members=(MemberIdentity(member_id=a.member_id),)), out.append
    )
    assert [m.error_code for m in out[0].members] == [0]
    assert a.member_id not in c.group.members


def test_the_broker_config_key_takes_kafkas_policies() -> None:
    assert BrokerConfig.from_props({}).group_consumer_migration_policy == "bidirectional"
    assert (
        BrokerConfig.from_props(
            {"group.consumer.migration.policy": "Downgrade"}
        ).group_consumer_migration_policy
        == "downgrade"
    )
    with pytest.raises(InvalidConfigError, match="group.consumer.migration.policy"):
        BrokerConfig.from_props({"group.consumer.migration.policy": "sideways"})


def test_a_consumer_member_takes_over_a_classic_static_members_instance_id() -> None:
    c = make()
    a, b = classic_group(c)
    req = Classic(c, "s").join_request()
    n = Member(c, "n")
    n.heartbeat()
    out: list[Any] = []
    c.gc.handle_join_group(
        JoinGroupRequest(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
                         group_instance_id="inst-1", protocol_type="consumer", protocols=req.protocols),
        out.append, client_id="s",
    )  # fmt: skip
    assert out[-1].error_code == 0
    held = c.group.members[out[-1].member_id]
    assert held.uses_classic_protocol and held.instance_id == "inst-1"
    # the instance restarts speaking the consumer protocol: it takes the place over at once
    upgraded = Member(c, "s2", instance_id="inst-1")
    assert upgraded.heartbeat().error_code == 0
    member = c.group.members[upgraded.member_id]
    assert not member.uses_classic_protocol and out[-1].member_id not in c.group.members
