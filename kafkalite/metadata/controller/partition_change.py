"""``partition_change``: the PartitionChangeRecord that takes a partition to a target ISR and a leader
elected from it (Kafka's ``PartitionChangeBuilder``, without reassignments or ELR).

The leader stays if it is still in the ISR and usable; otherwise the first usable replica, in replica
order, that is in the ISR leads. With none, the partition goes leaderless (-1) rather than electing a
replica outside the ISR, unless the topic allows unclean election. The ISR never empties: if the target
would drop its last member, that member stays, so the partition can be led again by it once it comes
back, with nothing acknowledged lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from kafkalite.metadata.image import PartitionRegistration
from kafkalite.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord


def elect_leader(part: PartitionRegistration, isr: Sequence[int], usable: Callable[[int], bool]) -> int:
    if part.leader in isr and usable(part.leader):
        return part.leader
    for r in part.replicas:
        if r in isr and usable(r):
            return r
    return NO_LEADER


def partition_change(
    topic_id: uuid.UUID,
    partition_id: int,
    part: PartitionRegistration,
    usable: Callable[[int], bool],
    target_isr: Sequence[int] | None = None,
    *,
    unclean: bool = False,
) -> PartitionChangeRecord | None:
    """The record, or None if nothing would change. With ``unclean`` (the topic's
    ``unclean.leader.election.enable``) a partition no ISR member can lead is given to the first usable
    replica outside it, which becomes the whole ISR: available again, at the price of what only the ISR
    had (Kafka's unclean election)."""
    isr = tuple(part.isr if target_isr is None else target_isr)
    if not isr:
        isr = part.isr
    leader = elect_leader(part, isr, usable)
    if leader == NO_LEADER and unclean:
        leader = next((r for r in part.replicas if usable(r)), NO_LEADER)
        if leader != NO_LEADER:
            isr = (leader,)
    new_isr = None if isr == part.isr else isr
    new_leader = NO_LEADER_CHANGE if leader == part.leader else leader
    if new_isr is None and new_leader == NO_LEADER_CHANGE:
        return None
    return PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id, isr=new_isr, leader=new_leader)
