"""``partition_change``: the PartitionChangeRecord that takes a partition to a target ISR, replica set and
leader (Kafka's ``PartitionChangeBuilder``, with KIP-966's eligible leader replicas when enabled).

The steps run in Kafka's order. First a reassignment in progress completes if the target ISR allows it
(``complete_reassignment``). Then a leader is elected from the target ISR among usable brokers: the
current one if it may stay, else the first in replica order; a *preferred* election tries the first
replica before the current leader. With none, the partition goes leaderless (-1) rather than electing a
replica outside the ISR, unless the election is unclean. A replica set that drops a broker bumps the leader
epoch even when the leader stays, so the removed replica's fetches are fenced. Without ELR the ISR never
empties: if the target would drop its last member, that member stays, so the partition can be led again
by it once it comes back, with nothing acknowledged lost. With ELR the ISR may empty and the replicas that
left it while it was below ``min.insync.replicas`` are kept as eligible leaders instead (``target_elr``).

With KIP-858 each replica also has a log dir: a replica whose dir its broker reported offline cannot lead
(Kafka's ``LeaderAcceptor``), and the record names the replicas' dirs again whenever they change (a
replica that joins gets its broker's default dir, a replica that stays keeps its own).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from kafkalite.metadata.image import PartitionRegistration
from kafkalite.metadata.records import DIR_MIGRATING, NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord


def reassignment_replicas(
    current: Sequence[int], target: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(replicas, adding, removing)`` while ``current`` moves to ``target`` (Kafka's
    ``PartitionReassignmentReplicas``): the target first, then the replicas leaving, each list sorted."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return tuple(target) + removing, adding, removing


def complete_reassignment(
    replicas: Sequence[int], adding: Sequence[int], removing: Sequence[int], isr: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(replicas, isr)`` once the move is done, or None: every replica that stays must be in the ISR,
    and at least one ISR member must stay."""
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def revert_reassignment(part: PartitionRegistration) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """``(replicas, isr, unclean)`` after cancelling ``part``'s move (Kafka's ``PartitionReassignmentRevert``):
    the replicas being added leave the replica set and the ISR; if nobody of the ISR would remain, the first
    original replica becomes the ISR, which is an unclean election."""
    replicas = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r not in part.adding_replicas)
    if isr:
        return replicas, isr, False
    return replicas, replicas[:1], True


def elect_leader(
    part: PartitionRegistration,
    replicas: Sequence[int],
    isr: Sequence[int],
    usable: Callable[[int], bool],
    *,
    preferred: bool = False,
    elr: Sequence[int] = (),
) -> int:
    """The clean choice: an ISR member, or, while the ISR is empty, an ELR member (KIP-966); -1 if none."""

    def valid(r: int) -> bool:
        return (r in isr or (not isr and r in elr)) and usable(r)

    if preferred and replicas and valid(replicas[0]):
        return replicas[0]
    if valid(part.leader):
        return part.leader
    return next((r for r in replicas if valid(r)), NO_LEADER)


def target_elr(
    part: PartitionRegistration, isr: Sequence[int], min_isr: int, unclean_shutdown: Sequence[int]
) -> tuple[int, ...]:
    """KIP-966's ELR once the ISR becomes ``isr``: empty while the ISR holds ``min_isr`` replicas; below
    that, every replica that was in the ISR or the ELR and is not in the new ISR, unless its broker shut
    down uncleanly (it may have lost what it had). Why they may lead: while the ISR is below min ISR the
    high watermark stands still, so a replica that left the ISR then holds every committed record."""
    if len(isr) >= min_isr:
        return ()
    drop = set(isr) | set(unclean_shutdown)
    return tuple(sorted((set(part.elr) | set(part.isr)) - drop))


def partition_change(
    topic_id: uuid.UUID,
    partition_id: int,
    part: PartitionRegistration,
    usable: Callable[[int], bool],
    target_isr: Sequence[int] | None = None,
    *,
    unclean: bool = False,
    preferred: bool = False,
    target_replicas: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    dir_online: Callable[[int, uuid.UUID], bool] | None = None,
    default_dir: Callable[[int], uuid.UUID] | None = None,
    target_dirs: dict[int, uuid.UUID] | None = None,
    elr_enabled: bool = False,
    min_isr: int = 1,
    unclean_shutdown: Sequence[int] = (),
) -> PartitionChangeRecord | None:
    """The record, or None if nothing would change. With ``unclean`` (the topic's
    ``unclean.leader.election.enable``, or ElectLeaders' unclean type) a partition no ISR member can lead
    is given to the first usable replica outside it, which becomes the whole ISR: available again, at the
    price of what only the ISR had (Kafka's unclean election). ``preferred`` is ElectLeaders' preferred
    election. The ``target_*`` replica lists default to the partition's own. ``dir_online(broker, dir)``
    says whether a replica's dir is online (a replica in an offline dir may not lead); ``default_dir``
    gives a new replica's dir; ``target_dirs`` sets some replicas' dirs (AssignReplicasToDirs).

    ``elr_enabled`` (the ``eligible.leader.replicas.version`` feature) turns on KIP-966 with the topic's
    effective ``min_isr``: the ISR may then empty, the ELR is kept (``target_elr``; the brokers in
    ``unclean_shutdown`` leave it), a leaderless partition with an empty ISR elects from the ELR (the
    elected replica becomes the ISR), and once the ISR has emptied, the last leader is remembered in the
    last known ELR, the one replica that may still lead when the ISR and the ELR are both empty, as the
    last ISR member could before KIP-966. Without it the ELR fields are cleared."""
    if dir_online is not None:
        acceptable, online = usable, dir_online

        def usable(r: int) -> bool:
            return acceptable(r) and online(r, part.directory(r))

    isr = tuple(part.isr if target_isr is None else target_isr)
    if not isr and not elr_enabled:
        isr = part.isr
    replicas = tuple(part.replicas if target_replicas is None else target_replicas)
    adding = tuple(part.adding_replicas if target_adding is None else target_adding)
    removing = tuple(part.removing_replicas if target_removing is None else target_removing)
    done = complete_reassignment(replicas, adding, removing, isr)
    if done is not None:
        (replicas, isr), adding, removing = done, (), ()
    elr = target_elr(part, isr, min_isr, unclean_shutdown) if elr_enabled else part.elr
    leader = elect_leader(part, replicas, isr, usable, preferred=preferred, elr=elr)
    was_unclean = False
    if leader == NO_LEADER and elr_enabled and not isr and not elr:
        # Kafka's "balanced recovery": the last known leader is the replica that was last in the ISR.
        last = part.last_known_elr
        if len(last) == 1 and usable(last[0]):
            leader, was_unclean = last[0], True
    if leader == NO_LEADER and unclean:
        leader = next((r for r in replicas if usable(r)), NO_LEADER)
        was_unclean = leader != NO_LEADER
    if leader != part.leader and leader != NO_LEADER:
        if was_unclean:
            isr = (leader,)
        elif leader in elr:
            isr, elr = (leader,), tuple(r for r in elr if r != leader)
    new_leader = NO_LEADER_CHANGE if leader == part.leader else leader
    if new_leader == NO_LEADER_CHANGE and not set(part.replicas) <= set(replicas):
        new_leader = part.leader  # a replica leaves: a new leader epoch fences it
    dirs = _directories(part, replicas, default_dir, target_dirs or {})
    if was_unclean or not elr_enabled:
        elr = ()
    last_known = None
    if elr_enabled:
        if not isr and part.isr and part.leader != NO_LEADER and part.last_known_elr != (part.leader,):
            last_known = (part.leader,)  # the partition just lost its last ISR member
        elif part.last_known_elr and (
            new_leader >= 0 or (part.leader != NO_LEADER and new_leader != NO_LEADER)
        ):
            last_known = ()  # led again: nothing to remember
    rec = PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=None if isr == part.isr else isr,
        leader=new_leader,
        replicas=None if replicas == part.replicas else replicas,
        adding_replicas=None if adding == part.adding_replicas else adding,
        removing_replicas=None if removing == part.removing_replicas else removing,
        directories=dirs,
        eligible_leader_replicas=None if elr == part.elr else elr,
        last_known_elr=last_known,
    )
    unchanged = (rec.isr, rec.replicas, rec.adding_replicas, rec.removing_replicas, rec.directories)
    if (
        unchanged == (None,) * 5
        and rec.leader == NO_LEADER_CHANGE
        and (rec.eligible_leader_replicas is None and rec.last_known_elr is None)
    ):
        return None
    return rec


def _directories(
    part: PartitionRegistration,
    replicas: tuple[int, ...],
    default_dir: Callable[[int], uuid.UUID] | None,
    target: dict[int, uuid.UUID],
) -> tuple[uuid.UUID, ...] | None:
    """The replicas' dirs for the record, or None when they do not change (Kafka's
    ``setAssignmentChanges``): a replica keeps its dir, a new one gets its broker's default."""
    known = dict(zip(part.replicas, part.dirs(), strict=True))
    known.update(target)
    dirs = tuple(
        known[r] if r in known else (default_dir(r) if default_dir is not None else DIR_MIGRATING)
        for r in replicas
    )
    if dirs == part.dirs() or (not part.directories and all(d == DIR_MIGRATING for d in dirs)):
        return None  # no change (all migrating is what no dirs at all already means)
    return dirs
