"""Figures and tables for the controller chapter: znode listings, failover timelines, cluster graphs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

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


def plot_timeline(ax: Any, points: Sequence[Mapping[str, Any]], brokers: Sequence[int]) -> None:
    """Draw timeline points: one row per broker plus one for ZooKeeper, time on x. Points of one kind at
    the same time and row become one marker with their count beside it; different kinds at the same time
    and row are spread a little vertically so that each stays visible."""
    rows = ["zk", *brokers]
    y_of = {r: i for i, r in enumerate(rows)}
    groups: Counter = Counter((pt["t"], pt["row"], pt["kind"]) for pt in points)
    slot: Counter = Counter()
    used = set()
    for (t, row, kind), n in groups.items():
        marker, colour, label = TIMELINE_STYLE[kind]
        k = slot[(t, row)]
        slot[(t, row)] += 1
        y = y_of[row] + (0.0, 0.22, -0.22, 0.44)[k % 4]
        ax.scatter(t, y, marker=marker, s=90, color=colour, zorder=3, label=None if kind in used else label)
        if n > 1:
            ax.annotate(f"x{n}", (t, y), xytext=(6, -3), textcoords="offset points", fontsize=7, color=colour)
        used.add(kind)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(["ZooKeeper", *[f"broker {b}" for b in brokers]])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", lw=0.3)


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
    """Brokers in a row at the bottom (controller gold, dead grey), partitions above; red edges lead,
    dashed edges follow, dotted grey edges are replicas out of the ISR."""
    brokers = sorted((n for n, d in g.nodes(data=True) if d["kind"] == "broker"), key=lambda n: int(n[1:]))
    parts = [n for n, d in g.nodes(data=True) if d["kind"] == "partition"]
    spread = max(len(parts) - 1, 1) / max(len(brokers) - 1, 1)
    pos = {n: (i * spread, 0) for i, n in enumerate(brokers)}
    pos.update({n: (i, 1) for i, n in enumerate(parts)})

    def colour(n: str) -> str:
        d = g.nodes[n]
        if d["dead"]:
            return "#bbbbbb"
        return "#f1c40f" if d["controller"] else "#6f9fd8"

    nx.draw_networkx_nodes(
        g,
        pos,
        nodelist=brokers,
        node_shape="s",
        node_size=950,
        node_color=[colour(n) for n in brokers],
        ax=ax,
    )
    nx.draw_networkx_nodes(
        g,
        pos,
        nodelist=parts,
        node_size=650,
        node_color=["#e74c3c" if g.nodes[n]["offline"] else "#f6c85f" for n in parts],
        ax=ax,
    )
    nx.draw_networkx_labels(g, pos, font_size=8, ax=ax)
    styles = {
        "leader": {"width": 2.5, "edge_color": "#c0392b", "style": "solid"},
        "follower": {"width": 1.0, "edge_color": "black", "style": "dashed"},
        "out of ISR": {"width": 1.0, "edge_color": "#aaaaaa", "style": "dotted"},
    }
    for role, style in styles.items():
        edges = [(u, v) for u, v, d in g.edges(data=True) if d["role"] == role]
        nx.draw_networkx_edges(g, pos, edgelist=edges, ax=ax, **style)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()


__all__ = [
    "TIMELINE_STYLE",
    "cluster_graph",
    "draw_cluster",
    "imbalance_ratios",
    "leader_counts",
    "plot_timeline",
    "timeline_points",
    "znode_rows",
]
