"""``partition_change`` with reassignments and elections (Kafka's PartitionChangeBuilder): the replica
lists of a move, its completion once the ISR allows, its revert, preferred election, and the rules every
resulting partition keeps whatever the move and the fenced brokers."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.metadata.controller.partition_change import (
    complete_reassignment,
    partition_change,
    reassignment_replicas,
    revert_reassignment,
)
from kafkalite.metadata.image import PartitionRegistration
from kafkalite.metadata.records import NO_LEADER, NO_LEADER_CHANGE

TID = uuid.UUID(int=7)


def _all(_b: int) -> bool:
    return True


def test_reassignment_lists_put_the_target_first_and_the_leaving_replicas_after() -> None:
    assert reassignment_replicas((1, 2, 3), (4, 3, 5)) == ((4, 3, 5, 1, 2), (4, 5), (1, 2))
    assert reassignment_replicas((1, 2), (2, 1)) == ((2, 1), (), ())


def test_completion_needs_every_staying_replica_in_the_isr() -> None:
    assert complete_reassignment((3, 4, 1), (3,), (1,), (4, 1)) is None
    assert complete_reassignment((3, 4, 1), (3,), (1,), (4, 1, 3)) == ((3, 4), (4, 3))
    assert complete_reassignment((3, 4, 1, 2), (3, 4), (1, 2), (1, 2)) is None, "nobody of the ISR stays"
    assert complete_reassignment((1, 2), (), (), (1, 2)) is None, "no move in progress"


def test_revert_drops_the_added_replicas_and_is_unclean_when_no_isr_member_remains() -> None:
    moving = PartitionRegistration(replicas=(3, 1, 2), isr=(1, 3), leader=1, adding_replicas=(3,))
    assert revert_reassignment(moving) == ((1, 2), (1,), False)
    only_new = PartitionRegistration(replicas=(3, 1), isr=(3,), leader=3, adding_replicas=(3,))
    assert revert_reassignment(only_new) == ((1,), (1,), True)


def test_a_move_that_removes_the_leader_elects_a_target_replica_and_bumps_the_epoch() -> None:
    part = PartitionRegistration(
        replicas=(3, 4, 1), isr=(1, 3, 4), leader=1, adding_replicas=(3, 4), removing_replicas=(1,)
    )
    rec = partition_change(TID, 0, part, _all)
    assert rec is not None and (rec.replicas, rec.isr, rec.leader) == ((3, 4), (3, 4), 3)
    assert rec.adding_replicas == () and rec.removing_replicas == ()
    stays = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1)
    rec = partition_change(TID, 0, stays, _all, target_replicas=(1,), target_removing=())
    assert rec is not None and rec.leader == 1, (
        "the leader stays, but a new epoch fences the replica that left"
    )


def test_preferred_election_tries_the_first_replica_before_the_current_leader() -> None:
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=2)
    assert partition_change(TID, 0, part, _all) is None
    rec = partition_change(TID, 0, part, _all, preferred=True)
    assert rec is not None and rec.leader == 1 and rec.isr is None
    assert partition_change(TID, 0, part, lambda b: b != 1, preferred=True) is None


brokers = st.integers(min_value=1, max_value=6)
replica_lists = st.lists(brokers, min_size=1, max_size=4, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    replicas=replica_lists,
    target=replica_lists,
    data=st.data(),
    fenced=st.sets(brokers, max_size=3),
)
def test_a_reassignment_keeps_the_partition_rules_and_ends_on_the_target(
    replicas: list[int], target: list[int], data: st.DataObject, fenced: set[int]
) -> None:
    """Start a move, then let every usable replica join the ISR: at every step the ISR is within the
    replicas and not empty, the leader is a usable ISR member or none; if every target replica is usable
    the move ends with exactly the target replicas and no adding or removing left."""
    isr = data.draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))

    def usable(b: int) -> bool:
        return b not in fenced

    leader = next((r for r in isr if usable(r)), NO_LEADER)
    part = PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr), leader=leader)

    def check(p: PartitionRegistration) -> None:
        assert p.isr and set(p.isr) <= set(p.replicas), p
        assert p.leader == NO_LEADER or (p.leader in p.isr and usable(p.leader)), p
        assert set(p.adding_replicas) | set(p.removing_replicas) <= set(p.replicas), p

    full, adding, removing = reassignment_replicas(part.replicas, target)
    steps = [dict(target_replicas=full, target_adding=adding, target_removing=removing)]
    for _ in range(2):
        steps.append({})  # the leader's AlterPartition: every usable replica caught up
    for i, kw in enumerate(steps):
        if i and part.leader != NO_LEADER:
            kw = {"target_isr": tuple(dict.fromkeys(part.isr + tuple(r for r in part.replicas if usable(r))))}
        rec = partition_change(TID, 0, part, usable, **kw)
        if rec is not None:
            if rec.leader != NO_LEADER_CHANGE:
                assert rec.leader == NO_LEADER or usable(rec.leader)
            part = part.merge(rec)
        check(part)
    if all(usable(r) for r in target) and leader != NO_LEADER:
        assert (part.replicas, part.adding_replicas, part.removing_replicas) == (tuple(target), (), ()), part
