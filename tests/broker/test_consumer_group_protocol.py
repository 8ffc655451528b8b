"""KIP-848's consumer group protocol on the group coordinator (ConsumerGroupHeartbeat), in the simulator's
sans-I/O style: members are scripted clients that heartbeat, own what they were given and report it back."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.group.consumer_group import ConsumerGroupState, MemberState
from kafkalite.broker.group.consumer_protocol import topic_id
from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.broker.group.member import GroupMetadata
from kafkalite.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    InvalidRequestError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from kafkalite.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)
from tests.broker.test_group_coordinator import Timers

TOPICS = {"orders": 12, "clicks": 6}
NAMES = {topic_id(t): t for t in TOPICS}
GROUP = "g"


class Cluster:
    def __init__(self, config: dict | None = None, topics: dict[str, int] | None = None) -> None:
        self.timers = Timers()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.topics = dict(TOPICS if topics is None else topics)
        self.gc = GroupCoordinator(
            self.timers.clock,
            self.timers.set_timer,
            self.timers.cancel_timer,
            lambda ev, **f: self.events.append((ev, f)),
            config or {},
            topics=lambda: self.topics,
        )
        self.members: list[Member] = []

    def send(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        out: list[ConsumerGroupHeartbeatResponse] = []
        self.gc.handle_consumer_group_heartbeat(req, out.append)
        assert len(out) == 1
        return out[0]

    def member(self, **kw: Any) -> Member:
        m = Member(self, **kw)
        self.members.append(m)
        return m

    def check_no_double_owner(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for m in self.members:
            for tp in m.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.name} at once"
                seen[tp] = m.name

    def round(self) -> None:
        for m in self.members:
            if m.alive:
                m.heartbeat()
                self.check_no_double_owner()

    def settle(self, rounds: int = 20) -> int:
        for i in range(rounds):
            if (
                GROUP in self.gc.consumer.groups
                and self.group.state() is ConsumerGroupState.STABLE
                and all(
                    m.member_id in self.group.members and m.owned == m.target()
                    for m in self.members
                    if m.alive
                )
            ):
                return i
            self.round()
        raise AssertionError(f"no convergence in {rounds} rounds: {self.group}")

    @property
    def group(self) -> Any:
        return self.gc.consumer.groups[GROUP]


class Member:
    """A consumer speaking the protocol: joins with epoch 0, then reports what it owns each heartbeat."""

    def __init__(
        self,
        cluster: Cluster,
        name: str = "",
        topics: tuple[str, ...] = ("orders", "clicks"),
        instance_id: str | None = None,
        assignor: str | None = None,
        regex: str | None = None,
    ) -> None:
        self.cluster, self.name, self.topics = cluster, name, topics
        self.instance_id, self.assignor, self.regex = instance_id, assignor, regex
        self.member_id, self.epoch, self.alive = "", 0, True
        self.owned: set[tuple[str, int]] = set()
        self.errors: list[int] = []

    def request(self, **kw: Any) -> ConsumerGroupHeartbeatRequest:
        joining = self.epoch == 0
        base: dict[str, Any] = dict(
            group_id=GROUP,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            topic_partitions=tuple(
                ConsumerGroupTopicPartitions(topic_id=topic_id(t), partitions=tuple(sorted(p for tt, p in self.owned if tt == t)))
                for t in sorted({t for t, _ in self.owned})
            ),
        )  # fmt: skip
        if joining:
            base.update(
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=None if self.regex else self.topics,
                subscribed_topic_regex=self.regex,
                server_assignor=self.assignor,
            )
        base.update(kw)
        return ConsumerGroupHeartbeatRequest(**base)

    def heartbeat(self, **kw: Any) -> ConsumerGroupHeartbeatResponse:
        resp = self.cluster.send(self.request(**kw))
        if resp.error_code:
            self.errors.append(resp.error_code)
            if resp.error_code == FencedMemberEpochError.code:  # drop everything and rejoin, as a client does
                self.owned, self.epoch = set(), 0
            return resp
        self.member_id, self.epoch = resp.member_id or self.member_id, resp.member_epoch
        if resp.assignment is not None:
            self.owned = {
                (NAMES[tp.topic_id], p) for tp in resp.assignment.topic_partitions for p in tp.partitions
            }
        return resp

    def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResponse:
        resp = self.cluster.send(self.request(member_epoch=epoch))
        self.owned, self.alive = set(), False
        return resp

    def target(self) -> set[tuple[str, int]]:
        return set(self.cluster.group.target.get(self.member_id, set()))


ALL = {(t, p) for t, n in TOPICS.items() for p in range(n)}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_members_converge_to_the_uniform_target(n: int) -> None:
    c = Cluster()
    for i in range(n):
        c.member(name=f"m{i}")
    c.settle()
    owned = [m.owned for m in c.members]
    assert set().union(*owned) == ALL, "every partition is owned once the group is stable"
    assert max(map(len, owned)) - min(map(len, owned)) <= 1, "uniform balances the partition counts"
    assert all(m.epoch == c.group.group_epoch == c.group.assignment_epoch for m in c.members)
    assert all(m.state is MemberState.STABLE for m in c.group.members.values())


def test_range_assignor_gives_contiguous_ranges() -> None:
    c = Cluster()
    for i in range(3):
        c.member(name=f"m{i}", topics=("orders",), assignor="range")
    c.settle()
    by_id = sorted(c.members, key=lambda m: m.member_id)
    assert [sorted(p for _, p in m.owned) for m in by_id] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_scale_out_3_to_6_never_gives_a_partition_two_owners() -> None:
    c = Cluster()
    for i in range(3):
        c.member(name=f"m{i}")
    c.settle()
    before = {m.name: set(m.owned) for m in c.members}
    for i in range(3, 6):
        c.member(name=f"m{i}")
    rounds = c.settle()  # checks the invariant after every single heartbeat
    assert rounds <= 4, f"scale-out took {rounds} rounds"
    assert set().union(*(m.owned for m in c.members)) == ALL
    assert all(len(m.owned) == 3 for m in c.members)
    kept = sum(len(before[m.name] & m.owned) for m in c.members[:3])
    assert kept == 9, "the old members keep what they can (uniform is sticky)"
    revoking = [e for e, f in c.events if e == "consumer_group_member" and f["revoking"]]
    assert revoking, "the old members were asked to revoke before the new ones got partitions"


def test_a_member_that_stops_heartbeating_is_fenced_and_its_partitions_move() -> None:
    c = Cluster()
    for i in range(3):
        c.member(name=f"m{i}")
    c.settle()
    crashed = c.members[2]
    crashed.alive = False
    orphan = set(crashed.owned)
    crashed.owned = set()  # it crashed: the process owns nothing any more
    for _ in range(10):  # 50 s of the survivors' heartbeats every 5 s; the session is 45 s
        c.timers.advance(5_000)
        c.round()
    assert crashed.member_id not in c.group.members
    assert ("consumer_group_member_fenced", "session timeout") in [(e, f.get("reason")) for e, f in c.events]
    c.settle()
    assert orphan <= c.members[0].owned | c.members[1].owned


def test_static_member_rejoins_with_its_assignment_after_a_temporary_leave() -> None:
    c = Cluster()
    for i in range(3):
        c.member(name=f"s{i}", instance_id=f"host-{i}")
    c.settle()
    leaving = c.members[1]
    kept, epoch = set(leaving.owned), c.group.group_epoch
    assert leaving.leave(-2).member_epoch == -2
    c.round()
    assert all(leaving.member_id not in {c.group.owner_of(tp)} or tp in kept for tp in kept)
    back = Member(c, name="s1-again", instance_id="host-1")
    c.members[1] = back
    back.heartbeat()
    c.settle()
    assert back.owned == kept, "the instance id takes back its partitions"
    assert c.group.group_epoch == epoch, "a static rejoin with the same subscription is no rebalance"


def test_a_second_member_with_a_held_instance_id_is_refused() -> None:
    c = Cluster()
    c.member(name="a", instance_id="host")
    c.settle()
    other = Member(c, name="b", instance_id="host")
    assert other.heartbeat().error_code == UnreleasedInstanceIdError.code == 111


def test_the_static_member_is_removed_when_its_session_expires_after_leaving() -> None:
    c = Cluster()
    a, b = c.member(name="a", instance_id="ha"), c.member(name="b")
    c.settle()
    a.leave(-2)
    for _ in range(10):
        c.timers.advance(5_000)
        c.round()
    assert a.member_id not in c.group.members and "ha" not in c.group.static_members
    c.settle()
    assert b.owned == ALL


def test_epochs_fence_a_stale_member() -> None:
    c = Cluster()
    a = c.member(name="a")
    c.settle()
    assert a.heartbeat(member_epoch=a.epoch + 1).error_code == FencedMemberEpochError.code == 110
    assert a.epoch == 0 and not a.owned
    b = c.member(name="b")
    c.settle()
    c.member(name="c")
    c.settle()
    known = c.group.members[b.member_id]
    assert known.previous_member_epoch < known.member_epoch
    lost = b.request(member_epoch=known.previous_member_epoch, topic_partitions=())
    assert c.send(lost).error_code == 0, "the previous epoch owning nothing new: its last response was lost"
    older = b.request(member_epoch=known.previous_member_epoch - 1)
    assert c.send(older).error_code == 110, "an epoch older than the previous one is fenced"


def test_leaving_frees_the_partitions_at_once() -> None:
    c = Cluster()
    a, b = c.member(name="a"), c.member(name="b")
    c.settle()
    epoch = c.group.group_epoch
    freed = set(a.owned)
    resp = a.leave()
    assert resp.error_code == 0 and resp.member_epoch == -1
    assert c.group.group_epoch == epoch + 1
    assert all(c.group.owner_of(tp) is None for tp in freed)
    c.members.remove(a)
    c.settle()
    assert b.owned == ALL


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    c = Cluster()
    a = c.member(name="a")
    c.settle()
    b = c.member(name="b")
    b.heartbeat()
    resp = c.send(a.request(topic_partitions=None))  # a keeps everything: never reports a revocation
    assert c.group.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS, resp
    for _ in range(12):  # b keeps heartbeating; a says nothing more for 60 s (its rebalance timeout)
        c.timers.advance(5_000)
        b.heartbeat()
    assert a.member_id not in c.group.members
    c.members.remove(a)
    c.settle()
    assert b.owned == ALL


def test_regex_subscription_follows_new_topics() -> None:
    c = Cluster(topics={"logs-a": 2})
    NAMES.update({topic_id("logs-a"): "logs-a", topic_id("logs-b"): "logs-b"})
    m = c.member(name="r", regex="logs-.*")
    c.settle()
    assert m.owned == {("logs-a", 0), ("logs-a", 1)}
    c.topics["logs-b"] = 1
    epoch = c.group.group_epoch
    c.round()  # the next heartbeat sees the new topic: a new group epoch
    assert c.group.group_epoch == epoch + 1
    c.settle()
    assert ("logs-b", 0) in m.owned


def test_bad_requests_get_kafkas_errors() -> None:
    c = Cluster()
    assert c.send(ConsumerGroupHeartbeatRequest(group_id=GROUP, rebalance_timeout_ms=1, topic_partitions=())).error_code == InvalidRequestError.code  # fmt: skip
    m = Member(c, assignor="sticky")
    assert m.heartbeat().error_code == UnsupportedAssignorError.code == 112
    assert Member(c, regex="(").heartbeat().error_code == 128
    assert c.send(ConsumerGroupHeartbeatRequest(group_id="nope", member_id="x", member_epoch=3)).error_code == GroupIdNotFoundError.code  # fmt: skip


def test_a_classic_group_in_use_is_not_a_consumer_group() -> None:
    c = Cluster()
    classic = c.gc.groups["g"] = GroupMetadata("g")
    classic.members["x"] = object()  # type: ignore[assignment]
    assert Member(c).heartbeat().error_code == GroupIdNotFoundError.code


OPS = st.lists(
    st.tuples(st.sampled_from(["join", "static", "leave", "crash", "beat", "tick"]), st.integers(0, 7)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_random_joins_and_leaves_never_give_a_partition_two_owners(ops: list[tuple[str, int]]) -> None:
    c = Cluster()
    n = 0
    for op, k in ops:
        alive = [m for m in c.members if m.alive]
        if op in ("join", "static") or not alive:
            n += 1
            c.member(name=f"m{n}", instance_id=f"i{n}" if op == "static" else None).heartbeat()
        elif op == "leave":
            alive[k % len(alive)].leave(-2 if alive[k % len(alive)].instance_id else -1)
        elif op == "crash":
            victim = alive[k % len(alive)]
            victim.alive, victim.owned = False, set()
        elif op == "beat":
            alive[k % len(alive)].heartbeat()
        else:
            c.timers.advance(5_000)
            c.round()
        c.check_no_double_owner()
        owners = c.group.partition_owners
        assert all(tp in c.group.members[mid].owned() for tp, (mid, _e) in owners.items())
    c.timers.advance(50_000)  # the crashed and the temporarily gone expire
    c.members = [m for m in c.members if m.alive]
    for m in c.members:
        if m.member_id and m.member_id not in c.group.members:
            m.owned, m.epoch = set(), 0
    if c.members:
        c.settle(30)
        assert set().union(*(m.owned for m in c.members)) == ALL
