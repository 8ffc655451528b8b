"""The classic group protocol state machine, driven with a manual clock and fake timers."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.broker.group.coordinator import GroupCoordinator
from kafkalite.clock import ManualClock
from kafkalite.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkalite.protocol.api import NO_ERROR, TopicPartition
from kafkalite.protocol.group import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
)

G = "g1"
SESSION = 10_000
REBALANCE = 30_000


class Timers:
    """Fake timers on a ManualClock: ``advance`` fires what falls due, in (due time, creation) order."""

    def __init__(self) -> None:
        self.clock = ManualClock(0)
        self._timers: dict[int, tuple[int, Any]] = {}
        self._next = 0

    def set_timer(self, delay_ms: int, cb: Any) -> int:
        self._next += 1
        self._timers[self._next] = (self.clock.now_ms() + delay_ms, cb)
        return self._next

    def cancel_timer(self, tid: int) -> None:
        self._timers.pop(tid, None)

    def advance(self, ms: int) -> None:
        end = self.clock.now_ms() + ms
        while True:
            due = [(t, tid) for tid, (t, _cb) in self._timers.items() if t <= end]
            if not due:
                break
            t, tid = min(due)
            _t, cb = self._timers.pop(tid)
            self.clock.set(max(t, self.clock.now_ms()))
            cb(self.clock.now_ms())
        self.clock.set(end)


class Box:
    """Collects responses to one request."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def __call__(self, response: Any) -> None:
        self.got.append(response)

    @property
    def done(self) -> bool:
        return bool(self.got)

    @property
    def r(self) -> Any:
        assert len(self.got) == 1, self.got
        return self.got[0]


@pytest.fixture
def env() -> Any:
    timers = Timers()
    events: list[tuple[str, dict[str, Any]]] = []
    commits: list[tuple[str, dict]] = []
    gc = GroupCoordinator(
        timers.clock,
        timers.set_timer,
        timers.cancel_timer,
        lambda ev, **f: events.append((ev, f)),
        {"group.max.size": 3},
        on_commit=lambda g, o: commits.append((g, o)),
    )
    return gc, timers, events, commits


def protos(meta: bytes = b"sub", names: tuple[str, ...] = ("range",)) -> tuple[JoinGroupProtocol, ...]:
    return tuple(JoinGroupProtocol(name=n, metadata=meta) for n in names)


def join(gc: GroupCoordinator, member_id: str = "", instance: str | None = None, **kw: Any) -> Box:
    box = Box()
    kw.setdefault("protocols", protos())
    req = JoinGroupRequest(
        group_id=G,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=kw.pop("session_timeout_ms", SESSION),
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", REBALANCE),
        **kw,
    )
    gc.handle_join_group(req, box, client_id="c")
    return box


def new_member_id(gc: GroupCoordinator, **kw: Any) -> str:
    """The KIP-394 handshake: the first join gets MEMBER_ID_REQUIRED and the id to use."""
    box = join(gc, **kw)
    assert box.r.error_code == MemberIdRequiredError.code
    assert box.r.member_id
    return box.r.member_id


def sync(
    gc: GroupCoordinator, member_id: str, gen: int, assignments: dict[str, bytes] | None = None, **kw: Any
) -> Box:
    box = Box()
    asg = tuple(SyncGroupAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items())
    gc.handle_sync_group(
        SyncGroupRequest(group_id=G, generation_id=gen, member_id=member_id, assignments=asg, **kw), box
    )
    return box


def heartbeat(gc: GroupCoordinator, member_id: str, gen: int, instance: str | None = None) -> int:
    box = Box()
    gc.handle_heartbeat(
        HeartbeatRequest(group_id=G, generation_id=gen, member_id=member_id, group_instance_id=instance), box
    )
    return box.r.error_code


def commit(
    gc: GroupCoordinator, member_id: str, gen: int, offset: int = 5, instance: str | None = None
) -> int:
    box = Box()
    tp = TopicPartition("t", 0)
    gc.handle_offset_commit(
        OffsetCommitRequest(
            group_id=G,
            generation_id=gen,
            member_id=member_id,
            group_instance_id=instance,
            partitions=(OffsetCommitPartition(tp=tp, committed_offset=offset),),
        ),
        box,
    )
    (p,) = box.r.partitions
    return p.error_code


def states(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, int]]:
    return [(f["state"], f["generation"]) for ev, f in events if ev == "group_state"]


def form_group(gc: GroupCoordinator, timers: Timers, n: int = 2) -> tuple[list[str], int]:
    """n members join (after the initial delay) and sync: a Stable group. Returns (member ids, generation)."""
    ids = [new_member_id(gc) for _ in range(n)]
    boxes = [join(gc, m, protocols=protos(f"meta-{i}".encode())) for i, m in enumerate(ids)]
    assert not any(b.done for b in boxes)
    timers.advance(3000 * n)  # group.initial.rebalance.delay.ms, extended by each later arrival
    resps = [b.r for b in boxes]
    assert all(r.error_code == NO_ERROR for r in resps)
    gen = resps[0].generation_id
    leader = resps[0].leader
    syncs = [sync(gc, m, gen) for m in ids if m != leader]
    ldr = sync(gc, leader, gen, {m: f"asg-{m}".encode() for m in ids})
    for m, b in zip([m for m in ids if m != leader], syncs, strict=True):
        assert b.r.assignment == f"asg-{m}".encode()
    assert ldr.r.assignment == f"asg-{leader}".encode()
    assert gc.group_state(G) == "Stable"
    return ids, gen


# ----------------------------------------------------------------------------------------- tests


def test_two_members_form_a_generation(env: Any) -> None:
    gc, timers, events, _ = env
    a, b = new_member_id(gc), new_member_id(gc)
    assert a != b
    ja = join(gc, a, protocols=protos(b"A"))
    assert gc.group_state(G) == "PreparingRebalance"
    jb = join(gc, b, protocols=protos(b"B"))
    timers.advance(3000)
    # The initial rebalance delay holds the first generation back, and b's arrival during it extended it.
    assert not ja.done and not jb.done
    timers.advance(3000)
    ra, rb = ja.r, jb.r
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == a  # the first member is the leader
    assert ra.protocol_name == "range"
    assert {(m.member_id, m.metadata) for m in ra.members} == {(a, b"A"), (b, b"B")}
    assert rb.members == ()  # only the leader sees the subscriptions
    assert gc.group_state(G) == "CompletingRebalance"

    sb = sync(gc, b, 1)
    assert not sb.done  # the follower waits for the leader's assignment
    assert heartbeat(gc, b, 1) == NO_ERROR
    sa = sync(gc, a, 1, {a: b"pa", b: b"pb"})
    assert sa.r.assignment == b"pa" and sb.r.assignment == b"pb"
    assert gc.group_state(G) == "Stable"
    assert states(events) == [("PreparingRebalance", 0), ("CompletingRebalance", 1), ("Stable", 1)]

    desc = _describe(gc).groups[0]
    assert desc.group_state == "Stable" and desc.protocol_data == "range"
    assert {m.member_id: m.member_assignment for m in desc.members} == {a: b"pa", b: b"pb"}


def _describe(gc: GroupCoordinator) -> Any:
    box = Box()
    gc.handle_describe_groups(DescribeGroupsRequest(groups=(G, "nope")), box)
    return box.r


def test_third_member_triggers_rebalance_and_generation_bump(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    c = new_member_id(gc)
    jc = join(gc, c)
    assert gc.group_state(G) == "PreparingRebalance"
    assert heartbeat(gc, a, gen) == RebalanceInProgressError.code
    assert heartbeat(gc, b, gen) == RebalanceInProgressError.code
    assert sync(gc, a, gen).r.error_code == RebalanceInProgressError.code
    ja = join(gc, a)
    assert not jc.done
    jb = join(gc, b)  # every known member rejoined: the join completes at once
    for box in (ja, jb, jc):
        assert box.r.generation_id == gen + 1
    assert ja.r.leader == a  # the leader keeps its role when it rejoins
    assert {m.member_id for m in ja.r.members} == {a, b, c}
    assert gc.group_state(G) == "CompletingRebalance"
    assert heartbeat(gc, a, gen) == IllegalGenerationError.code
    assert ("PreparingRebalance", gen) in states(events)


def test_session_expiry_removes_member_and_rebalances(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    timers.advance(SESSION // 2)
    assert heartbeat(gc, a, gen) == NO_ERROR  # only a keeps heartbeating
    assert gc.group_state(G) == "Stable"
    timers.advance(SESSION // 2)
    assert gc.group_state(G) == "PreparingRebalance"
    assert heartbeat(gc, a, gen) == RebalanceInProgressError.code
    assert any(ev == "group_member_expired" and f["member"] == b for ev, f in events)
    assert heartbeat(gc, b, gen) == UnknownMemberIdError.code
    ja = join(gc, a)
    assert ja.r.generation_id == gen + 1 and [m.member_id for m in ja.r.members] == [a]


def test_leave_triggers_rebalance_and_new_leader(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    box = Box()
    gc.handle_leave_group(LeaveGroupRequest(group_id=G, members=(MemberIdentity(member_id=a),)), box)
    assert box.r.members[0].error_code == NO_ERROR
    assert gc.group_state(G) == "PreparingRebalance"
    jb = join(gc, b)
    assert jb.r.generation_id == gen + 1 and jb.r.leader == b
    assert any(ev == "group_leave" and f["member"] == a for ev, f in events)
    # The last member leaving empties the group.
    box2 = Box()
    gc.handle_leave_group(LeaveGroupRequest(group_id=G, members=(MemberIdentity(member_id=b),)), box2)
    assert box2.r.members[0].error_code == NO_ERROR
    assert gc.group_state(G) == "Empty"
    assert states(events)[-2:] == [("PreparingRebalance", gen + 1), ("Empty", gen + 2)]
    assert commit(gc, "", -1) == NO_ERROR  # an Empty group takes commits from outside the protocol


def test_silent_member_expires_during_rebalance(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    ja = join(gc, a, protocols=protos(b"changed"))  # a's subscription changed: rebalance
    assert gc.group_state(G) == "PreparingRebalance"
    timers.advance(SESSION - 1)
    assert not ja.done  # b is awaited
    timers.advance(1)  # b neither heartbeats nor rejoins: its session ends and the join completes
    assert ja.r.generation_id == gen + 1 and [m.member_id for m in ja.r.members] == [a]
    assert heartbeat(gc, b, gen) == UnknownMemberIdError.code


def test_member_not_rejoining_with_heartbeats_is_removed_at_rebalance_timeout(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    ja = join(gc, a, protocols=protos(b"changed"))
    for _ in range(REBALANCE // 5000):
        timers.advance(5000)
        if ja.done:
            break
        assert heartbeat(gc, b, gen) == RebalanceInProgressError.code  # b is told but never rejoins
    assert ja.r.generation_id == gen + 1 and [m.member_id for m in ja.r.members] == [a]
    removed = [f for ev, f in events if ev == "group_member_removed"]
    assert [f["member"] for f in removed] == [b]


def test_stale_generation_and_unknown_member_commits_are_fenced(env: Any) -> None:
    gc, timers, _events, commits = env
    (a, b), gen = form_group(gc, timers)
    assert commit(gc, a, gen, 7) == NO_ERROR
    assert commits[-1][0] == G and commits[-1][1][TopicPartition("t", 0)].offset == 7
    assert commit(gc, a, gen - 1) == IllegalGenerationError.code
    assert commit(gc, "zombie", gen) == UnknownMemberIdError.code
    # During CompletingRebalance a commit is refused until the new assignment is known.
    c = new_member_id(gc)
    join(gc, c), join(gc, a), join(gc, b)
    assert gc.group_state(G) == "CompletingRebalance"
    assert commit(gc, a, gen + 1) == RebalanceInProgressError.code
    assert commit(gc, a, gen) == IllegalGenerationError.code
    box = Box()
    gc.handle_offset_fetch(OffsetFetchRequest(group_id=G), box)
    assert [(p.tp, p.committed_offset) for p in box.r.partitions] == [(TopicPartition("t", 0), 7)]
    assert gc.offsets[G][TopicPartition("t", 0)].offset == 7


def test_simple_consumer_commit_to_empty_group(env: Any) -> None:
    gc, _timers, _events, commits = env
    assert commit(gc, "", -1, 42) == NO_ERROR
    assert gc.group_state(G) == "Empty"
    assert commit(gc, "", -1, 43) == NO_ERROR
    box = Box()
    tp = TopicPartition("t", 0)
    gc.handle_offset_fetch(OffsetFetchRequest(group_id=G, partitions=(tp, TopicPartition("t", 1))), box)
    assert [p.committed_offset for p in box.r.partitions] == [43, -1]
    assert len(commits) == 2
    box2 = Box()
    gc.handle_offset_commit(OffsetCommitRequest(group_id="other", generation_id=3, member_id="m"), box2)
    assert box2.r.partitions == ()


def test_static_member_restart_without_rebalance(env: Any) -> None:
    gc, timers, events, _ = env
    both = ("roundrobin", "range")
    sa = join(gc, instance="inst-a", protocols=protos(b"A", both))  # static: no MEMBER_ID_REQUIRED
    sb = join(gc, instance="inst-b", protocols=protos(b"B"))
    timers.advance(6000)
    a, b = sa.r.member_id, sb.r.member_id
    gen = sa.r.generation_id
    assert sa.r.leader == a
    sync(gc, b, gen)
    sync(gc, a, gen, {a: b"pa", b: b"pb"})
    assert gc.group_state(G) == "Stable"
    n_states = len(states(events))

    # b restarts: joins with no member id, same instance id and same subscription.
    jb = join(gc, instance="inst-b", protocols=protos(b"B"))
    b2 = jb.r.member_id
    assert jb.r.error_code == NO_ERROR and b2 != b
    assert jb.r.generation_id == gen and jb.r.leader == a and jb.r.members == ()
    assert gc.group_state(G) == "Stable" and len(states(events)) == n_states  # no rebalance
    assert sync(gc, b2, gen).r.assignment == b"pb"  # it gets its old share back
    # The old incarnation is fenced.
    assert heartbeat(gc, b, gen, instance="inst-b") == FencedInstanceIdError.code
    assert commit(gc, b, gen, instance="inst-b") == FencedInstanceIdError.code
    assert sync(gc, b, gen, group_instance_id="inst-b").r.error_code == FencedInstanceIdError.code
    assert heartbeat(gc, b2, gen, instance="inst-b") == NO_ERROR

    # New subscription bytes under the same selected protocol: still no rebalance (Kafka only checks that
    # the group's protocol would not change).
    jb3 = join(gc, instance="inst-b", protocols=protos(b"B2"))
    b3 = jb3.r.member_id
    assert jb3.r.error_code == NO_ERROR and jb3.r.generation_id == gen
    assert gc.group_state(G) == "Stable" and len(states(events)) == n_states
    assert sync(gc, b3, gen).r.assignment == b"pb"

    # A restart that changes the protocol the group would select does rebalance.
    jb4 = join(gc, instance="inst-b", protocols=protos(b"B", both))
    assert gc.group_state(G) == "PreparingRebalance"
    ja = join(gc, a, instance="inst-a", protocols=protos(b"A", both))
    assert jb4.r.generation_id == ja.r.generation_id == gen + 1
    assert ja.r.protocol_name == "roundrobin"


def test_static_leader_restart_skips_assignment(env: Any) -> None:
    gc, timers, _events, _ = env
    sa = join(gc, instance="inst-a")
    timers.advance(3000)
    a = sa.r.member_id
    sync(gc, a, 1, {a: b"pa"})
    ja = join(gc, instance="inst-a")
    assert ja.r.leader == ja.r.member_id != a
    assert ja.r.skip_assignment and [m.member_id for m in ja.r.members] == [ja.r.member_id]
    assert gc.group_state(G) == "Stable"


def test_member_id_required_flow(env: Any) -> None:
    gc, timers, _events, _ = env
    first = join(gc)
    assert first.r.error_code == MemberIdRequiredError.code
    mid = first.r.member_id
    assert mid.startswith("c-")
    assert gc.group_state(G) == "Empty"  # a pending member does not start a rebalance
    # An unknown (never handed out) member id is refused.
    assert join(gc, "made-up").r.error_code == UnknownMemberIdError.code
    box = join(gc, mid)
    timers.advance(3000)
    assert box.r.error_code == NO_ERROR and box.r.member_id == mid and box.r.generation_id == 1


def test_pending_member_expires_without_blocking_rebalance(env: Any) -> None:
    gc, timers, _events, _ = env
    (a, b), gen = form_group(gc, timers)
    new_member_id(gc)  # asks for an id but never comes back
    ja, jb = join(gc, a, protocols=protos(b"x")), join(gc, b)
    assert not ja.done  # the pending member is expected
    timers.advance(SESSION)
    assert ja.r.generation_id == jb.r.generation_id == gen + 1


def test_inconsistent_protocols(env: Any) -> None:
    gc, timers, _events, _ = env
    a = new_member_id(gc)
    ja = join(gc, a, protocols=protos(names=("range", "roundrobin")))
    bad = join(gc, protocols=protos(names=("sticky",)))
    assert bad.r.error_code == InconsistentGroupProtocolError.code
    wrong_type = join(gc, protocol_type="connect")
    assert wrong_type.r.error_code == InconsistentGroupProtocolError.code
    assert join(gc, protocols=()).r.error_code == InconsistentGroupProtocolError.code
    # A member supporting roundrobin first: the vote picks a protocol both support.
    b = new_member_id(gc, protocols=protos(names=("roundrobin", "range")))
    jb = join(gc, b, protocols=protos(names=("roundrobin", "range")))
    c = new_member_id(gc, protocols=protos(names=("roundrobin",)))
    jc = join(gc, c, protocols=protos(names=("roundrobin",)))
    timers.advance(9000)
    assert ja.r.protocol_name == jb.r.protocol_name == jc.r.protocol_name == "roundrobin"


def test_invalid_session_timeout(env: Any) -> None:
    gc, _timers, _events, _ = env
    assert join(gc, session_timeout_ms=1000).r.error_code == InvalidSessionTimeoutError.code


def test_group_max_size(env: Any) -> None:
    gc, timers, _events, _ = env
    ids, gen = form_group(gc, timers, n=3)
    assert join(gc).r.error_code == GroupMaxSizeReachedError.code  # Stable and full
    # During a rebalance the limit counts members that rejoined; a fourth one is refused too.
    join(gc, ids[0], protocols=protos(b"changed"))
    assert gc.group_state(G) == "PreparingRebalance"
    assert join(gc).r.error_code == MemberIdRequiredError.code  # room while only one has rejoined
    join(gc, ids[1]), join(gc, ids[2])
    assert join(gc).r.error_code == GroupMaxSizeReachedError.code
    timers.advance(SESSION)  # the pending member never came back; the generation forms with three
    gen += 1
    sync(gc, ids[0], gen, {m: b"" for m in ids})
    assert gc.group_state(G) == "Stable"
    assert heartbeat(gc, ids[0], gen) == NO_ERROR


def test_join_response_is_delayed_and_rejoin_in_stable_needs_no_rebalance(env: Any) -> None:
    gc, timers, events, _ = env
    (a, b), gen = form_group(gc, timers)
    n = len(states(events))
    jb = join(gc, b, protocols=protos(b"meta-1"))  # a follower rejoining unchanged: answered at once
    assert isinstance(jb.r, JoinGroupResponse) and jb.r.generation_id == gen and jb.r.members == ()
    assert len(states(events)) == n


def test_pending_sync_expiry_removes_silent_member(env: Any) -> None:
    gc, timers, events, _ = env
    ids = [new_member_id(gc) for _ in range(2)]
    boxes = [join(gc, m) for m in ids]
    timers.advance(6000)
    a, b = ids
    gen = boxes[0].r.generation_id
    sync(gc, a, gen, {a: b"pa", b: b"pb"})
    assert gc.group_state(G) == "Stable"
    for _ in range(REBALANCE // 5000):  # b heartbeats but never sends SyncGroup
        timers.advance(5000)
        heartbeat(gc, a, gen)
        heartbeat(gc, b, gen)
    assert gc.group_state(G) == "PreparingRebalance"
    assert heartbeat(gc, b, gen) == UnknownMemberIdError.code


def test_list_groups_and_describe_unknown(env: Any) -> None:
    gc, timers, _events, _ = env
    form_group(gc, timers)
    box = Box()
    gc.handle_list_groups(ListGroupsRequest(), box)
    assert [(g.group_id, g.group_state, g.protocol_type) for g in box.r.groups] == [(G, "Stable", "consumer")]
    box2 = Box()
    gc.handle_list_groups(ListGroupsRequest(states_filter=("Empty",)), box2)
    assert box2.r.groups == ()
    desc = _describe(gc)
    assert desc.groups[1].group_state == "Dead" and desc.groups[1].members == ()


def test_unload_group_answers_waiters(env: Any) -> None:
    gc, timers, events, _ = env
    a = new_member_id(gc)
    ja = join(gc, a)
    gc.unload_group(G)
    assert ja.r.error_code == 16  # NOT_COORDINATOR
    assert states(events)[-1] == ("Dead", 0)
    timers.advance(60_000)  # no timer of the unloaded group fires
    assert gc.group_state(G) == "Dead"


def test_a_join_after_the_last_member_left_a_preparing_rebalance_is_accepted(env: Any) -> None:
    """The only member leaves during group.initial.rebalance.delay.ms: the group is memberless but still
    PreparingRebalance. Kafka counts every protocol as shared by all (zero) members then, so the next
    consumer's join is accepted, not refused with INCONSISTENT_GROUP_PROTOCOL."""
    gc, timers, _, _ = env
    a = new_member_id(gc)
    first = join(gc, a)
    box = Box()
    gc.handle_leave_group(LeaveGroupRequest(group_id=G, members=(MemberIdentity(member_id=a),)), box)
    assert first.done and gc.group_state(G) == "PreparingRebalance"
    b = new_member_id(gc, protocols=protos(names=("cooperative-sticky", "range")))
    second = join(gc, b, protocols=protos(names=("cooperative-sticky", "range")))
    assert not second.done  # waits for the rebalance like any join
    timers.advance(10_000)
    assert second.r.error_code == NO_ERROR and second.r.leader == b
    assert gc.group_state(G) == "CompletingRebalance"
