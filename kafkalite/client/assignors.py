"""Consumer partition assignors (``partition.assignment.strategy``) with the Java client's answers.

``RangeAssignor``, ``RoundRobinAssignor``, ``StickyAssignor`` and ``CooperativeStickyAssignor`` follow
``org.apache.kafka.clients.consumer``'s classes of the same names (and ``AbstractStickyAssignor``). Where the
Java code's result depends on iteration over a ``HashMap``/``HashSet`` (the sticky assignors do), the Java
iteration order is reproduced from ``String.hashCode``/``TopicPartition.hashCode``, taking the order of the
``subscriptions`` mapping as the order members were put into Java's map.

Not modelled: rack-aware assignment (``partitions_per_topic`` carries no replica racks, which is exactly the
Java ``assign(Map<String, Integer>, ...)`` entry point, so ``Subscription.rack`` has no effect), and treeified
``HashMap`` bins (8+ colliding keys), which only reorder pathological inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kafkalite.common.utils import (
    java_hash_map_capacity,
    java_hash_map_order,
    java_hash_spread,
    java_string_hash,
)
from kafkalite.protocol import TopicPartition

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
]

DEFAULT_GENERATION = -1


@dataclass(frozen=True)
class Subscription:
    """One member's JoinGroup metadata: topics, what it owns now, and the generation it owned them in."""

    topics: Sequence[str]
    owned_partitions: Sequence[TopicPartition] = ()
    generation: int = DEFAULT_GENERATION
    group_instance_id: str | None = None
    rack: str | None = None


class Assignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]: ...


def _jkey(s: str) -> bytes:
    # Java's String.compareTo orders by UTF-16 code unit, not by code point as Python does.
    return s.encode("utf-16-be", "surrogatepass")


def _member_key(member_id: str, sub: Subscription) -> tuple[int, bytes]:
    # MemberInfo.compareTo: static members (group.instance.id) first, by instance id; then member id.
    if sub.group_instance_id is not None:
        return (0, _jkey(sub.group_instance_id))
    return (1, _jkey(member_id))


def _tp_key(tp: TopicPartition) -> tuple[bytes, int]:
    return (_jkey(tp.topic), tp.partition)


def _subscribed_partitions(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    # AbstractPartitionAssignor.assign(Cluster, ...) only hands the assignor subscribed topics with partitions.
    wanted = {t for s in subscriptions.values() for t in s.topics}
    return {t: n for t, n in partitions_per_topic.items() if t in wanted and n > 0}


# --- Java HashMap iteration order: common/utils.py (the consumer protocol's encoding needs it too) -------


def _tp_hash(tp: TopicPartition) -> int:
    return 31 * (31 + tp.partition) + java_string_hash(tp.topic)


class _JavaHashSet:
    """Just enough of ``HashSet<TopicPartition>`` to know which element ``iterator().next()`` returns."""

    def __init__(self) -> None:
        self._seq: dict[TopicPartition, int] = {}
        self._counter = 0
        self._max = 0

    def add(self, tp: TopicPartition) -> None:
        if tp not in self._seq:
            self._seq[tp] = self._counter
            self._counter += 1
            self._max = max(self._max, len(self._seq))

    def discard(self, tp: TopicPartition) -> None:
        self._seq.pop(tp, None)

    def __len__(self) -> int:
        return len(self._seq)

    def first(self) -> TopicPartition:
        mask = java_hash_map_capacity(self._max) - 1  # tables never shrink
        return min(self._seq, key=lambda tp: (java_hash_spread(_tp_hash(tp)) & mask, self._seq[tp]))


# --- Range and round robin ------------------------------------------------------------------------------


class RangeAssignor:
    """Per topic, contiguous ranges over the sorted subscribers; the first ``P % C`` get one extra."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic, n in _subscribed_partitions(partitions_per_topic, subscriptions).items():
            members = sorted(
                (m for m, s in subscriptions.items() if topic in s.topics),
                key=lambda m: _member_key(m, subscriptions[m]),
            )
            per, extra = divmod(n, len(members))
            start = 0
            for i, m in enumerate(members):
                length = per + (1 if i < extra else 0)
                assignment[m].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        # Java's per-member order follows HashMap order of topics; the assignment itself is the same set.
        return {m: sorted(tps, key=_tp_key) for m, tps in assignment.items()}


class RoundRobinAssignor:
    """Partitions sorted by topic then number, dealt in turn over sorted members, skipping non-subscribers."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=lambda m: _member_key(m, subscriptions[m]))
        topics = sorted({t for s in subscriptions.values() for t in s.topics}, key=_jkey)
        i = 0
        for topic in topics:
            if topic not in partitions_per_topic:
                continue
            for p in range(partitions_per_topic[topic]):
                # Some member is subscribed to this topic, so the search terminates.
                while topic not in subscriptions[members[i % len(members)]].topics:
                    i += 1
                assignment[members[i % len(members)]].append(TopicPartition(topic, p))
                i += 1
        return assignment


# --- Sticky ---------------------------------------------------------------------------------------------


class _PartitionMovements:
    """Tracks moves so a partition bounced A->B->A is not counted twice (``PartitionMovements`` in Java)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], _JavaHashSet]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        per_topic = self.by_topic[tp.topic]
        per_topic[pair].discard(tp)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[tp.topic]
        return pair

    def _add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, _JavaHashSet()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _ = self._remove(tp)
            if src != new:
                self._add(tp, (src, new))
        else:
            self._add(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        # Prefer undoing an earlier opposite move of the same topic over creating a new one.
        if tp.topic not in self.by_topic:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = self.by_topic[tp.topic].get((new, old))
        return tp if reverse is None else reverse.first()


class _StickyBase:
    name = ""

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        ppt = _subscribed_partitions(partitions_per_topic, subscriptions)
        assignment, transferring = _sticky_assign(ppt, subscriptions)
        return self._finish(assignment, transferring, subscriptions)

    def _finish(
        self,
        assignment: dict[str, list[TopicPartition]],
        transferring: dict[TopicPartition, str] | None,
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, list[TopicPartition]]:
        return assignment


class StickyAssignor(_StickyBase):
    """Balanced assignment that keeps as many partitions with their previous owner as possible (eager)."""

    name = "sticky"


class CooperativeStickyAssignor(_StickyBase):
    """The sticky target minus partitions changing owner: those are only revoked this round (KIP-429)."""

    name = "cooperative-sticky"

    def _finish(
        self,
        assignment: dict[str, list[TopicPartition]],
        transferring: dict[TopicPartition, str] | None,
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, list[TopicPartition]]:
        if transferring is None:
            # General path: a partition is transferring if someone gained it and someone else gave it up.
            added: dict[TopicPartition, str] = {}
            revoked: set[TopicPartition] = set()
            for member, tps in assignment.items():
                owned = set(subscriptions[member].owned_partitions)
                added.update((tp, member) for tp in tps if tp not in owned)
                revoked.update(tp for tp in subscriptions[member].owned_partitions if tp not in set(tps))
            transferring = {tp: m for tp, m in added.items() if tp in revoked}
        for tp, member in transferring.items():
            assignment[member].remove(tp)
        return assignment


def _sticky_assign(
    ppt: dict[str, int], subscriptions: Mapping[str, Subscription]
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str] | None]:
    """``AbstractStickyAssignor.assignPartitions``: returns the assignment and, on the constrained path,
    the partitions handed to a new owner while another member may still hold them."""
    members = java_hash_map_order(subscriptions)  # Java iterates its HashMap of subscriptions
    all_equal = True
    first_topics: set[str] | None = None
    max_generation = DEFAULT_GENERATION
    owned: dict[str, list[TopicPartition]] = {}
    previous_owner: dict[TopicPartition, str] = {}
    multiple_owners: set[TopicPartition] = set()
    for member in members:
        sub = subscriptions[member]
        topics = set(sub.topics)
        if not first_topics:
            # Java seeds the reference set from the first non-empty subscription it meets.
            first_topics = topics
        elif all_equal and topics != first_topics:
            all_equal = False
        max_generation = max(max_generation, sub.generation)
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in sub.owned_partitions:
            if tp.topic not in ppt:
                continue
            other = previous_owner.get(tp)
            if other is None:
                mine.append(tp)
                previous_owner[tp] = member
                continue
            other_gen = subscriptions[other].generation
            if sub.generation == other_gen:
                # Two claims in one generation: trust neither.
                multiple_owners.add(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                previous_owner[tp] = member
            elif sub.generation > other_gen:
                mine.append(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                previous_owner[tp] = member
    if all_equal:
        return _Constrained(ppt, owned, multiple_owners, members).build()
    builder = _General(ppt, owned, subscriptions, members, max_generation)
    return builder.build(), None


class _Constrained:
    """All members subscribe to the same topics: keep owned partitions up to quota, deal out the rest."""

    def __init__(
        self,
        ppt: dict[str, int],
        owned: dict[str, list[TopicPartition]],
        multiple_owners: set[TopicPartition],
        members: list[str],
    ) -> None:
        self.ppt = ppt
        self.owned = owned
        self.multiple_owners = multiple_owners
        self.members = members
        total = sum(ppt.values())
        n = len(owned)
        self.min_quota, self.max_quota = total // n, -(-total // n)
        self.expected_over = total % n
        self.current_over = 0
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.transferring: dict[TopicPartition, str] = {}
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []

    def build(self) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
        assigned = self._assign_owned()
        unassigned = [
            TopicPartition(t, p)
            for t in sorted(self.ppt, key=_jkey)
            for p in range(self.ppt[t])
            if (t, p) not in assigned
        ]
        self.under_min.sort(key=_jkey)
        self.exactly_min.sort(key=_jkey)
        self._round_robin(unassigned)
        return self.assignment, self.transferring

    def _assign_owned(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        for member in self.members:  # HashMap order decides who may keep maxQuota partitions
            mine = sorted(self.owned[member], key=lambda tp: (tp.partition, _jkey(tp.topic)))
            mine = [tp for tp in mine if tp not in self.multiple_owners]
            target = self.assignment[member]
            if len(mine) < self.min_quota:
                keep = mine
                self.under_min.append(member)
            elif len(mine) >= self.max_quota and self.current_over < self.expected_over:
                self.current_over += 1
                if self.current_over == self.expected_over:
                    self.exactly_min.clear()
                keep = mine[: self.max_quota]
            else:
                keep = mine[: self.min_quota]
                if self.current_over < self.expected_over:
                    self.exactly_min.append(member)
            target.extend(keep)
            assigned.update(keep)
            for tp in mine[len(keep) :]:
                self.maybe_revoked[tp] = member
        return assigned

    def _give(self, tp: TopicPartition, member: str) -> int:
        self.assignment[member].append(tp)
        prev = self.maybe_revoked.get(tp)
        if (prev is not None and prev != member) or tp in self.multiple_owners:
            self.transferring[tp] = member
        return len(self.assignment[member])

    def _round_robin(self, unassigned: list[TopicPartition]) -> None:
        # Mirrors Java's iterator over the under-minQuota list, restarting when exhausted.
        idx = 0
        for tp in unassigned:
            if idx < len(self.under_min):
                member = self.under_min[idx]
                from_under = True
            elif not self.under_min and not self.exactly_min:
                raise RuntimeError("no more unfilled consumers to be assigned")
            elif not self.under_min:
                member = self.exactly_min.pop(0)
                from_under = False
            else:
                idx = 0
                member = self.under_min[0]
                from_under = True
            count = self._give(tp, member)
            if count == self.min_quota and from_under:
                self.under_min.pop(idx)
                self.exactly_min.append(member)
            else:
                if from_under:
                    idx += 1
                if count == self.max_quota:
                    self.current_over += 1


class _General:
    """Members with different subscriptions: greedy fill, then move partitions until balanced."""

    def __init__(
        self,
        ppt: dict[str, int],
        owned: dict[str, list[TopicPartition]],
        subscriptions: Mapping[str, Subscription],
        members: list[str],
        max_generation: int,
    ) -> None:
        self.ppt = ppt
        self.subs = subscriptions
        self.members = members
        self.max_generation = max_generation
        self.total = sum(ppt.values())
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in ppt}
        self.consumer_topics: dict[str, list[str]] = {}
        for m in members:
            mine = [t for t in subscriptions[m].topics if t in ppt]
            self.consumer_topics[m] = mine
            for t in mine:
                self.topic_consumers[t].append(m)
        self.current: dict[str, list[TopicPartition]] = {m: list(owned.get(m, [])) for m in members}
        self.owner: dict[TopicPartition, str] = {tp: m for m, tps in self.current.items() for tp in tps}
        topics = sorted(ppt, key=lambda t: (len(self.topic_consumers[t]), _jkey(t)))
        self.sorted_all = [TopicPartition(t, p) for t in topics for p in range(ppt[t])]
        self.active: set[str] = set()  # Java's sortedCurrentSubscriptions, sorted on demand
        self.revocation_required = False
        self.movements = _PartitionMovements()

    def _sorted(self) -> list[str]:
        return sorted(self.active, key=lambda m: (len(self.current[m]), _jkey(m)))

    def build(self) -> dict[str, list[TopicPartition]]:
        prev = self._previous_assignment()
        assigned: set[TopicPartition] = set()
        for m in self.members:
            topics = set(self.subs[m].topics)
            kept = []
            for tp in self.current[m]:
                if tp.topic not in self.topic_consumers:
                    self.owner.pop(tp, None)
                elif tp.topic not in topics:
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.add(tp)
            self.current[m] = kept
        unassigned = [tp for tp in self.sorted_all if tp not in assigned]
        self.active.update(self.current)
        self._balance(prev, unassigned)
        return self.current

    def _previous_assignment(self) -> dict[TopicPartition, tuple[str, int]]:
        # Partitions some member owned in an older generation: where to send them back if that is cheaper.
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for m in self.members:
            sub = self.subs[m]
            if sub.generation < self.max_generation:
                for tp in sub.owned_partitions:
                    if tp not in prev or sub.generation > prev[tp][1]:
                        prev[tp] = (m, sub.generation)
        return prev

    def _max_size(self, member: str) -> int:
        return sum(self.ppt[t] for t in self.consumer_topics[member])

    def _is_balanced(self) -> bool:
        order = self._sorted()
        if len(self.current[order[0]]) >= len(self.current[order[-1]]) - 1:
            return True
        for m in order:
            size = len(self.current[m])
            if size == self._max_size(m):
                continue
            mine = set(self.current[m])
            for t in self.consumer_topics[m]:
                for p in range(self.ppt[t]):
                    tp = TopicPartition(t, p)
                    other = self.owner.get(tp)
                    if tp not in mine and other in self.current and size + 1 < len(self.current[other]):
                        return False
        return True

    def _can_consumer_participate(self, m: str) -> bool:
        if len(self.current[m]) < self._max_size(m):
            return True
        return any(len(self.topic_consumers[tp.topic]) >= 2 for tp in self.current[m])

    def _balance(self, prev: dict[TopicPartition, tuple[str, int]], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self._sorted()[-1]]
        for tp in unassigned:
            if not self.topic_consumers[tp.topic]:
                continue
            for m in self._sorted():
                if tp.topic in self.consumer_topics[m]:
                    self.current[m].append(tp)
                    self.owner[tp] = m
                    break
        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        self.sorted_all = [tp for tp in self.sorted_all if tp.topic not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for m in self.members:
            if not self._can_consumer_participate(m):
                self.active.discard(m)
                fixed[m] = self.current.pop(m)
        before = {m: list(tps) for m, tps in self.current.items()}
        before_owner = dict(self.owner)
        if not self.revocation_required:
            self._reassign(unassigned, prev)
        moved = self._reassign(self.sorted_all, prev)
        # Keep the moves only if they actually improved balance.
        if not initializing and moved and _balance_score(self.current) >= _balance_score(before):
            self.current = before
            self.owner = before_owner
        self.current.update(fixed)
        self.active.update(fixed)

    def _reassign(
        self, partitions: list[TopicPartition], prev: dict[TopicPartition, tuple[str, int]]
    ) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.owner.get(tp)
                if consumer is None or consumer not in self.current:
                    continue
                size = len(self.current[consumer])
                if tp in prev and prev[tp][0] in self.current and size > len(self.current[prev[tp][0]]) + 1:
                    self._move(tp, prev[tp][0])
                    performed = modified = True
                    continue
                if any(
                    size > len(self.current[o]) + 1
                    for o in self.topic_consumers[tp.topic]
                    if o in self.current
                ):
                    target = next(m for m in self._sorted() if tp.topic in self.consumer_topics[m])
                    self._move(tp, target)
                    performed = modified = True
        return performed

    def _move(self, tp: TopicPartition, new: str) -> None:
        actual = self.movements.actual_partition_to_move(tp, self.owner[tp], new)
        old = self.owner[actual]
        self.movements.move(actual, old, new)
        self.current[old].remove(actual)
        self.current[new].append(actual)
        self.owner[actual] = new


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    sizes = [len(tps) for tps in assignment.values()]
    return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}
