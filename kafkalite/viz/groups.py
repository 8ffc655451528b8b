"""Figures and tables for the consumer groups chapter: assignors side by side, ownership timelines,
consumer lag, coordinator placement, and the ZooKeeper-era offsets tree."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafkalite.client.assignors import ASSIGNORS, Subscription
from kafkalite.common.utils import coordinator_partition, java_string_hash, kafka_abs
from kafkalite.coordination import paths
from kafkalite.protocol import TopicPartition

Assignment = Mapping[str, Sequence[TopicPartition]]

# One colour per member, in member order (colour-blind friendly, from the Okabe-Ito palette).
MEMBER_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def member_names(n: int, prefix: str = "C") -> list[str]:
    """``C0 .. C{n-1}``: member ids that sort the way the chapter prints them (n <= 10)."""
    if n < 1:
        raise ValueError(f"a group needs at least one member, got {n}")
    return [f"{prefix}{i}" for i in range(n)]


def assign(
    strategy: str,
    partitions_per_topic: Mapping[str, int],
    members: Sequence[str] | Mapping[str, Sequence[str]],
    owned: Assignment | None = None,
    generation: int = 1,
) -> dict[str, list[TopicPartition]]:
    """Run one of kafkalite's assignors (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``).

    ``members`` is a list (everyone subscribes to every topic) or ``{member: topics}``; ``owned`` gives
    each member's current partitions, as the sticky assignors see them in JoinGroup."""
    if strategy not in ASSIGNORS:
        raise ValueError(f"unknown assignment strategy {strategy!r}; known: {sorted(ASSIGNORS)}")
    topics_of = (
        dict(members) if isinstance(members, Mapping) else {m: list(partitions_per_topic) for m in members}
    )
    subs = {
        m: Subscription(
            topics=list(ts),
            owned_partitions=list((owned or {}).get(m, ())),
            generation=generation if owned else -1,
        )
        for m, ts in topics_of.items()
    }
    assignor = ASSIGNORS[strategy]
    assignor = assignor() if isinstance(assignor, type) else assignor
    return {m: sorted(tps) for m, tps in assignor.assign(dict(partitions_per_topic), subs).items()}


def short(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def assignment_rows(assignments: Mapping[str, Assignment]) -> list[dict[str, Any]]:
    """One row per member, one column per strategy: the partitions it gets, written ``topic-p``."""
    members = sorted({m for a in assignments.values() for m in a})
    return [
        {
            "member": m,
            **{name: " ".join(short(tp) for tp in sorted(a.get(m, ()))) for name, a in assignments.items()},
        }
        for m in members
    ]


def moved(before: Assignment, after: Assignment) -> set[TopicPartition]:
    """Partitions whose owner changed between two assignments (dropped members' partitions included)."""
    owner_before = {tp: m for m, tps in before.items() for tp in tps}
    owner_after = {tp: m for m, tps in after.items() for tp in tps}
    return {tp for tp, m in owner_before.items() if owner_after.get(tp) != m}


def draw_assignment(
    ax: Any, assignment: Assignment, partitions_per_topic: Mapping[str, int], title: str = ""
) -> None:
    """A grid: one column per partition (grouped by topic), one row per member, a filled cell where the
    member owns the partition."""
    members = sorted(assignment)
    cols = [TopicPartition(t, p) for t in partitions_per_topic for p in range(partitions_per_topic[t])]
    index = {tp: i for i, tp in enumerate(cols)}
    for row, m in enumerate(members):
        colour = MEMBER_COLOURS[row % len(MEMBER_COLOURS)]
        for tp in assignment[m]:
            ax.add_patch(_rect(index[tp], row, colour))
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(members) - 0.5, -0.5)
    ax.set_xticks(range(len(cols)), [f"{tp.topic}\n{tp.partition}" if tp.partition == 0 else str(tp.partition)
                                     for tp in cols], fontsize=8)  # fmt: skip
    ax.set_yticks(range(len(members)), [f"{m} ({len(assignment[m])})" for m in members], fontsize=9)
    boundaries = [index[TopicPartition(t, 0)] - 0.5 for t in list(partitions_per_topic)[1:]]
    for x in boundaries:
        ax.axvline(x, color="grey", lw=1)
    # one line collection, not a minor tick per column: an explorer draws this grid dozens of times
    ax.vlines(
        [i + 0.5 for i in range(len(cols))], -0.5, len(members) - 0.5, color="#eeeeee", lw=0.8, zorder=0
    )
    if title:
        ax.set_title(title, fontsize=10)


def _rect(x: int, y: int, colour: str) -> Any:
    from matplotlib.patches import Rectangle  # deferred: matplotlib is heavy

    return Rectangle((x - 0.42, y - 0.35), 0.84, 0.7, color=colour)


def coordinator_rows(group_ids: Iterable[str], partitions: int = 50) -> list[dict[str, Any]]:
    """How each group id finds its coordinator's ``__consumer_offsets`` partition."""
    rows = []
    for g in group_ids:
        h = java_string_hash(g)
        rows.append(
            {
                "group.id": g,
                "hashCode": h,
                "abs": kafka_abs(h),
                "partition": coordinator_partition(g, partitions),
            }
        )
    return rows


def zk_offset_rows(store: Any, group: str | None = None) -> list[dict[str, Any]]:
    """The ZooKeeper offsets tree (Kafka up to 0.8.1): one row per
    ``/consumers/<group>/offsets/<topic>/<partition>`` znode."""
    rows = []
    for path, (data, stat) in sorted(store.dump().items()):
        parts = path.split("/")
        if len(parts) != 6 or parts[1] != paths.CONSUMERS.strip("/") or parts[3] != "offsets":
            continue
        if group is not None and parts[2] != group:
            continue
        rows.append({"znode": path, "offset": int(data.decode()), "version": stat.version})
    return rows


# ------------------------------------------------------------------------------------ timelines


def ownership_intervals(
    samples: Sequence[tuple[int, Mapping[str, Iterable[TopicPartition]]]], end_ms: int | None = None
) -> list[dict[str, Any]]:
    """Turn ``[(t, {member: partitions})]`` samples into ``{member, tp, start, end}`` intervals."""
    out: list[dict[str, Any]] = []
    open_: dict[tuple[str, TopicPartition], int] = {}
    last_t = samples[-1][0] if samples else 0
    for t, owned in samples:
        now = {(m, tp) for m, tps in owned.items() for tp in tps}
        for key in [k for k in open_ if k not in now]:
            out.append({"member": key[0], "tp": key[1], "start": open_.pop(key), "end": t})
        for key in sorted(now - open_.keys()):
            open_[key] = t
    final = last_t if end_ms is None else end_ms
    for (m, tp), start in sorted(open_.items()):
        out.append({"member": m, "tp": tp, "start": start, "end": final})
    return sorted(out, key=lambda r: (r["member"], r["tp"], r["start"]))


def plot_ownership(
    ax: Any,
    intervals: Sequence[Mapping[str, Any]],
    members: Sequence[str],
    marks: Sequence[tuple[int, str]] = (),
    t0: int = 0,
) -> None:
    """One row per member; a bar per owned partition over time (stacked thin lanes per partition),
    labelled with the partition number; ``marks`` are vertical lines ``(t, label)``."""
    tps = sorted({r["tp"] for r in intervals})
    lane = {tp: i for i, tp in enumerate(tps)}
    height = 0.8 / max(1, len(tps))
    colours = {tp: MEMBER_COLOURS[i % len(MEMBER_COLOURS)] for i, tp in enumerate(tps)}
    rows = {m: i for i, m in enumerate(members)}
    for r in intervals:
        if r["member"] not in rows:
            continue
        y = rows[r["member"]] - 0.4 + lane[r["tp"]] * height
        ax.broken_barh([((r["start"] - t0) / 1000, (r["end"] - r["start"]) / 1000)], (y, height * 0.9),
                       color=colours[r["tp"]])  # fmt: skip
    for t, label in marks:
        x = (t - t0) / 1000
        ax.axvline(x, color="black", lw=0.8, ls="--")
        ax.text(x, -0.7, f" {label}", fontsize=9, ha="left", va="center")
    ax.set_yticks(range(len(members)), list(members))
    ax.set_ylim(len(members) - 0.5, -1.0)
    ax.set_xlabel("virtual time (s)")
    handles = [_patch(colours[tp], short(tp)) for tp in tps]
    if handles:
        ax.legend(handles=handles, fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _patch(colour: str, label: str) -> Any:
    from matplotlib.patches import Patch  # deferred: matplotlib is heavy

    return Patch(color=colour, label=label)


def plot_lag(
    ax: Any, samples: Sequence[Mapping[str, Any]], keys: Sequence[str] = ("log_end", "committed")
) -> None:
    """``samples`` rows with ``t`` (ms) and offsets: the offsets as lines, lag (first minus second) shaded."""
    ts = [s["t"] / 1000 for s in samples]
    hi = [s[keys[0]] for s in samples]
    lo = [s[keys[1]] for s in samples]
    ax.plot(ts, hi, label="log end offset", color="#0072B2")
    ax.plot(ts, lo, label="committed offset", color="#E69F00")
    ax.fill_between(ts, lo, hi, color="#D55E00", alpha=0.25, label="lag")
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("offset")
    ax.legend(fontsize=9, loc="upper left")
