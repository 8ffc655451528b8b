"""The chapters' figure helpers draw what a reader needs to tell apart, whatever the parameters."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection

from kafkalite.coordination.paths import PartitionState
from kafkalite.viz.controller import cluster_graph, cluster_legend, draw_cluster, plot_timeline
from kafkalite.viz.replication import plot_offsets
from kafkalite.viz.storage import plot_segments, segment_colours


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


class _Segment:
    def __init__(self, base: int, end: int) -> None:
        self.base_offset, self.next_offset = base, end


class _Log:
    def __init__(self, bounds: list[tuple[int, int]]) -> None:
        self.segments = [_Segment(a, b) for a, b in bounds]
        self.log_end_offset = bounds[-1][1]


def test_a_segment_keeps_its_colour_when_older_ones_go():
    before = segment_colours([0, 960, 1920, 2880])
    after = segment_colours(before)  # plain base offsets work too
    assert after == before
    survivors = {base: before[base] for base in (1920, 2880)}
    assert len(set(before.values())) == 4
    # Drawn with the map of the whole log, the survivors keep their colours.
    _, ax = plt.subplots()
    plot_segments(_Log([(1920, 2880), (2880, 3000)]), ax, colours=before)
    first_bar = ax.patches[0]
    assert matplotlib.colors.to_hex(first_bar.get_facecolor()) == matplotlib.colors.to_hex(survivors[1920])
    assert ax.patches[-1].get_hatch() == "//"  # the active segment


def test_segment_labels_only_where_they_fit():
    _, ax = plt.subplots()
    plot_segments(_Log([(0, 1000), (1000, 1010), (1010, 2000)]), ax)
    assert [t.get_text() for t in ax.texts] == ["0", "1010"]


def _graph(dead=()):
    replicas = {"P0": (1, 2), "P1": (2, 3), "P2": (3, 1)}
    states = {
        "P0": PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1),
        "P1": PartitionState(leader=3, leader_epoch=1, isr=(3,), controller_epoch=1),
        "P2": PartitionState(leader=-1, leader_epoch=2, isr=(3,), controller_epoch=1),
    }
    return cluster_graph([1, 2, 3], 1, replicas, states, dead=dead)


def test_replica_map_is_a_grid_of_roles():
    _, ax = plt.subplots()
    draw_cluster(ax, _graph(dead=[2]), "after")
    cells = sorted((round(t.get_position()[0]), round(t.get_position()[1]), t.get_text()) for t in ax.texts)
    # (column = partition, row = broker, role): an offline partition's last ISR member stays F.
    assert cells == [(0, 0, "L"), (0, 1, "x"), (1, 1, "x"), (1, 2, "L"), (2, 0, "x"), (2, 2, "F")]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["broker 1 (controller)", "broker 2 (dead)", "broker 3"]
    assert "offline" in ax.get_xticklabels()[2].get_text()


def test_timeline_spreads_kinds_at_one_moment_along_time_when_asked():
    points = [
        {"t": 100, "row": 1, "kind": "become_leader", "what": "t-0"},
        {"t": 100, "row": 1, "kind": "become_follower", "what": "t-1"},
        {"t": 100, "row": 1, "kind": "become_follower", "what": "t-2"},
    ]
    _, ax = plt.subplots()
    plot_timeline(ax, points, [1, 2], dx=0.3)
    xs = sorted(c.get_offsets()[0][0] for c in ax.collections if isinstance(c, PathCollection))
    assert xs == pytest.approx([99.85, 100.15])  # centred on the true time
    assert [t.get_text() for t in ax.texts] == ["x2"]


def test_leo_lines_stay_visible_when_equal():
    series = {"LEO 1": [(0, 0), (10, 5)], "LEO 2": [(0, 0), (12, 5)], "HW": [(0, 0), (15, 5)]}
    _, ax = plt.subplots()
    plot_offsets(ax, series, end_ms=20, leader=1)
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"high watermark", "LEO 1 (leader)", "LEO 2"}
    assert lines["LEO 1 (leader)"].get_linewidth() > lines["LEO 2"].get_linewidth()
    assert lines["LEO 1 (leader)"].get_linestyle() != lines["LEO 2"].get_linestyle()


def test_legend_names_only_the_roles_shown():
    fig, _ = plt.subplots()
    cluster_legend(fig, roles=("leader", "follower"))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["L: leader", "F: follower in the ISR"]
