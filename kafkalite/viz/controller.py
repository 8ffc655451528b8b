"""Figures and tables for the controller chapter: znode listings, failover timelines, cluster graphs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import networkx as nx
from matplotlib.patches import Patch, Rectangle

from kafkalite.coordination import paths

# Marker style per timeline kind: (marker, colour, label).
TIMELINE_STYLE: dict[str, tuple[str, str, str]] = {
    "heartbeat": ("|", "#8e44ad", "last heartbeat to ZooKeeper"),
    "crash": ("X", "black", "broker crashes"),
    "restart": ("P", "black", "broker restarts"),
    "expire_session": ("D", "#8e44ad", "ZooKeeper expires its session"),
    "decision": ("*", "#c0392b", "controller decides (ZooKeeper write)"),
    "become_leader": ("^", "#27ae60", "LeaderAndIsr: become leader"),
    "become_follower": ("v", "#2980b9", "LeaderAndIsr: become follower"),
}

DECISIONS = ("broker_failure", "leader_elected", "isr_changed", "partition_offline", "controller_elected")


def znode_rows(store: Any, prefix: str = "/", width: int = 70) -> list[dict[str, Any]]:
    """One row per znode under ``prefix``: path, version, ephemeral owner (session) and data, cut to
    ``width`` characters."""
    rows = []
    for path, (data, stat) in store.dump().items():
        if not path.startswith(prefix) or path == "/":
            continue
        text = data.decode("utf-8", "replace")
        rows.append(
            {
                "znode": path,
                "version": stat.version,
                "ephemeral": f"0x{stat.ephemeral_owner:x}" if stat.ephemeral_owner else "",
                "data": text if len(text) <= width else text[: width - 3] + "...",
            }
        )
    return rows


def leader_counts(cluster: Any, topic: str, partitions: int) -> Counter:
    """Partitions led per broker (brokers leading nothing are counted as 0)."""
    counts: Counter = Counter({b: 0 for b in cluster.brokers})
    for p in range(partitions):
        leader = cluster.leader(topic, p)
        if leader is not None:
            counts[leader] += 1
    return counts


def imbalance_ratios(cluster: Any, topic: str, partitions: int) -> dict[int, float]:
    """Kafka's per-broker imbalance: of the partitions whose preferred replica is the broker, the share
    led by someone else."""
    preferred: dict[int, list[int]] = {}
    for p in range(partitions):
        preferred.setdefault(cluster.replicas(topic, p)[0], []).append(p)
    return {
        b: sum(cluster.leader(topic, p) != b for p in ps) / len(ps) for b, ps in sorted(preferred.items())
    }


def timeline_points(
    events: Iterable[Any], changes: Iterable[Any], sessions: Mapping[int, int], t0: int, t1: int
) -> list[dict[str, Any]]:
    """Points for a failover timeline between ``t0`` and ``t1``: crashes and restarts from the network,
    session expiries from ZooKeeper's change log (``sessions`` maps session id to broker), controller
    decisions and LeaderAndIsr outcomes from the brokers' event log."""
    points = []
    for c in changes:
        if c.op == "expire_session" and t0 <= c.time_ms <= t1 and c.session in sessions:
            points.append(
                {
                    "t": c.time_ms,
                    "row": "zk",
                    "kind": "expire_session",
                    "what": f"broker {sessions[c.session]}",
                }
            )
    for e in events:
        if not t0 <= e.time_ms <= t1:
            continue
        if e.kind in ("crash", "restart") and isinstance(e.node, int):
            points.append({"t": e.time_ms, "row": e.node, "kind": e.kind, "what": ""})
        elif e.kind in DECISIONS:
            points.append(
                {"t": e.time_ms, "row": e.node, "kind": "decision", "what": e.fields.get("tp", e.kind)}
            )
        elif e.kind in ("become_leader", "become_follower"):
            points.append({"t": e.time_ms, "row": e.node, "kind": e.kind, "what": e.fields["tp"]})
    return points


def plot_timeline(
    ax: Any,
    points: Sequence[Mapping[str, Any]],
    brokers: Sequence[int],
    *,
    counts: bool = True,
    dx: float = 0.0,
) -> None:
    """Draw timeline points: one row per broker plus one for ZooKeeper, time on x.

    Points of one kind at the same time and row become one marker; with ``counts`` a number beside
    it says how many (``x7``). Different kinds at the same time and row are moved apart so that each
    stays visible: vertically by default, or by ``dx`` along the time axis (for a zoom on a few
    milliseconds, where the rows are too close for that)."""
    rows = ["zk", *brokers]
    y_of = {r: i for i, r in enumerate(rows)}
    groups: Counter = Counter((pt["t"], pt["row"], pt["kind"]) for pt in points)
    order = list(TIMELINE_STYLE)
    kinds_at: dict[tuple, list[str]] = {}
    for t, row, kind in groups:
        kinds_at.setdefault((t, row), []).append(kind)
    used = set()
    for (t, row), kinds in sorted(kinds_at.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        kinds.sort(key=order.index)
        for k, kind in enumerate(kinds):
            marker, colour, label = TIMELINE_STYLE[kind]
            x, y = t, y_of[row]
            if dx:  # side by side, centred on the true time
                x += (k - (len(kinds) - 1) / 2) * dx
            else:
                y += (0.0, -0.3, 0.3, -0.45)[k % 4]
            ax.scatter(
                x,
                y,
                marker=marker,
                s=90,
                color=colour,
                zorder=3,
                label=None if kind in used else label,
            )
            n = groups[t, row, kind]
            if counts and n > 1:
                ax.annotate(
                    f"x{n}",
                    (x, y),
                    xytext=(7, 5),
                    textcoords="offset points",
                    fontsize=9,
                    color=colour,
                )
            used.add(kind)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(["ZooKeeper", *[f"broker {b}" for b in brokers]])
    ax.set_ylim(len(rows) - 0.4, -0.7)  # ZooKeeper on top
    ax.grid(axis="y", lw=0.4, color="#dddddd")


def cluster_graph(
    brokers: Iterable[int],
    controller: int | None,
    replicas: Mapping[str, Sequence[int]],
    states: Mapping[str, paths.PartitionState | None],
    dead: Iterable[int] = (),
) -> nx.Graph:
    """Brokers and partitions as a graph: an edge per replica, marked leader, follower (in the ISR) or
    out of the ISR; node attributes say which broker is controller and which are dead."""
    g = nx.Graph()
    dead = set(dead)
    for b in brokers:
        g.add_node(f"B{b}", kind="broker", controller=(b == controller), dead=(b in dead))
    for name, reps in replicas.items():
        st = states.get(name)
        g.add_node(name, kind="partition", offline=(st is None or st.leader < 0))
        for b in reps:
            if st is not None and b == st.leader:
                role = "leader"
            elif st is not None and b in st.isr:
                role = "follower"
            else:
                role = "out of ISR"
            g.add_edge(name, f"B{b}", role=role)
    return g


def draw_cluster(ax: Any, g: nx.Graph, title: str) -> None:
    """The replica map as a grid: one row per broker, one column per partition.

    A cell holds ``L`` for the partition's leader (red), ``F`` for a follower in the ISR (blue),
    ``x`` for a replica out of the ISR (grey), and nothing where the broker has no replica. The
    controller's row label is gold and says so; a dead broker's row is shaded grey. A grid keeps
    every replica visible however many partitions there are, where a node-and-edge drawing
    turns into a tangle."""
    brokers = sorted((n for n, d in g.nodes(data=True) if d["kind"] == "broker"), key=lambda n: int(n[1:]))
    parts = [n for n, d in g.nodes(data=True) if d["kind"] == "partition"]
    cell = {
        "leader": ("L", "#c0392b", "white"),
        "follower": ("F", "#6f9fd8", "white"),
        "out of ISR": ("x", "#d5d5d5", "#555555"),
    }
    for row, b in enumerate(brokers):
        if g.nodes[b]["dead"]:
            ax.add_patch(Rectangle((-0.5, row - 0.5), len(parts), 1, color="#eeeeee", zorder=0))
        for col, p in enumerate(parts):
            if not g.has_edge(p, b):
                continue
            text, face, ink = cell[g.edges[p, b]["role"]]
            ax.add_patch(Rectangle((col - 0.4, row - 0.4), 0.8, 0.8, color=face, zorder=1))
            ax.text(col, row, text, ha="center", va="center", color=ink, fontsize=10, zorder=2)
    labels = []
    for b in brokers:
        d = g.nodes[b]
        labels.append(
            f"broker {b[1:]}"
            + (" (controller)" if d["controller"] else "")
            + (" (dead)" if d["dead"] else "")
        )
    ax.set_yticks(range(len(brokers)), labels)
    for tick, b in zip(ax.get_yticklabels(), brokers, strict=True):
        if g.nodes[b]["controller"]:
            tick.set_color("#b7950b")
            tick.set_fontweight("bold")
        elif g.nodes[b]["dead"]:
            tick.set_color("#888888")
    offline = {p for p in parts if g.nodes[p]["offline"]}
    ax.set_xticks(range(len(parts)), [p + ("\noffline" if p in offline else "") for p in parts])
    for tick, p in zip(ax.get_xticklabels(), parts, strict=True):
        if p in offline:
            tick.set_color("#c0392b")
    ax.set_xlim(-0.5, len(parts) - 0.5)
    ax.set_ylim(len(brokers) - 0.5, -0.5)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10, pad=24)


def cluster_legend(
    fig: Any, roles: Sequence[str] = ("leader", "follower", "out of ISR"), **kwargs: Any
) -> None:
    """The key to ``draw_cluster``'s cells, once per figure, for the ``roles`` it shows."""
    keys = {
        "leader": Patch(color="#c0392b", label="L: leader"),
        "follower": Patch(color="#6f9fd8", label="F: follower in the ISR"),
        "out of ISR": Patch(color="#d5d5d5", label="x: replica out of the ISR"),
    }
    handles = [keys[r] for r in roles]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=9, **kwargs)


__all__ = [
    "TIMELINE_STYLE",
    "cluster_graph",
    "cluster_legend",
    "draw_cluster",
    "imbalance_ratios",
    "leader_counts",
    "plot_timeline",
    "timeline_points",
    "znode_rows",
]
