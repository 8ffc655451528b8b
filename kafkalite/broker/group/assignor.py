"""The server-side assignors of the consumer group protocol (KIP-848), by Kafka's names: ``uniform`` and
``range`` (``group.consumer.assignors``, the first being the default).

An assignor sees each member's subscribed topics, the partition count of every subscribed topic and the
group's previous target assignment, and returns the new target: member id -> {topic: partitions}. It never
looks at what members own right now; moving from the current ownership to the target without two owners
for one partition is reconciliation's work (consumer_group.py).

- ``uniform`` spreads the partitions as evenly as the subscriptions allow, and is sticky: a member keeps
  the partitions it had in the previous target up to its fair share, so a scale-out moves only the
  partitions the new members need.
- ``range`` gives each member, topic by topic, a contiguous range of partitions, members ordered by id;
  the first ``partitions % members`` get one partition more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkalite.config.broker import server_assignor_names
from kafkalite.errors import InvalidConfigError

Assignment = dict[str, frozenset[int]]
"""Partitions by topic name."""

Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Assignment]], dict[str, Assignment]
]


def _pack(owned: Mapping[str, list[tuple[str, int]]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for mid, tps in owned.items():
        by_topic: dict[str, set[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, set()).add(p)
        out[mid] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Balanced and sticky; see the module docstring."""
    members = sorted(subscriptions)
    if not members:
        return {}
    everything = [
        (t, p)
        for t in sorted({t for s in subscriptions.values() for t in s})
        if partitions.get(t, 0) > 0
        for p in range(partitions[t])
    ]
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in everything}
    quota, extra = divmod(len(everything), len(members))
    owned: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    taken: set[tuple[str, int]] = set()
    leftovers: list[tuple[str, tuple[str, int]]] = []
    # Keep what each member had, up to the fair share; one more for as many members as the remainder allows.
    for m in members:
        had = sorted(
            (t, p)
            for t, ps in previous.get(m, {}).items()
            if t in subscriptions[m]
            for p in ps
            if p < partitions.get(t, 0)
        )
        owned[m] = had[:quota]
        leftovers += [(m, tp) for tp in had[quota : quota + 1]]
    for m, tp in leftovers:
        if extra > 0:
            owned[m].append(tp)
            extra -= 1
    for m in members:
        taken.update(owned[m])
    # The rest goes, one at a time, to the least loaded member that may take it.
    for tp in everything:
        if tp not in taken:
            m = min(eligible[tp], key=lambda c: (len(owned[c]), c))
            owned[m].append(tp)
    # Heterogeneous subscriptions can leave members uneven: move partitions while that narrows the gap.
    owner = {tp: m for m, tps in owned.items() for tp in tps}
    moved = True
    while moved:
        moved = False
        for tp in everything:
            src = owner[tp]
            dst = min(eligible[tp], key=lambda c: (len(owned[c]), c))
            if len(owned[src]) - len(owned[dst]) > 1:
                owned[src].remove(tp)
                owned[dst].append(tp)
                owner[tp] = dst
                moved = True
    return _pack(owned)


def range_(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Contiguous ranges per topic; see the module docstring."""
    owned: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    for topic in sorted({t for s in subscriptions.values() for t in s}):
        count = partitions.get(topic, 0)
        subs = sorted(m for m, s in subscriptions.items() if topic in s)
        if count <= 0 or not subs:
            continue
        each, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = each + (1 if i < extra else 0)
            owned[m] += [(topic, p) for p in range(start, start + n)]
            start += n
    return _pack(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
"""Kafka's names (``UniformAssignor.name()``, ``RangeAssignor.name()``)."""


def assignor_names(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``group.consumer.assignors`` as assignor names (the config's parser; ValueError when unknown)."""
    try:
        return server_assignor_names(value)
    except InvalidConfigError as e:
        raise ValueError(str(e)) from None


__all__ = ["ASSIGNORS", "Assignment", "Assignor", "assignor_names", "range_", "uniform"]
