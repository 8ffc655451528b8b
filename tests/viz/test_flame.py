"""Flame graphs from collapsed stacks: parsing, the icicle layout, self time, the produce stages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.harness.bench.profile import stage, stage_shares, timed_lines, timed_stacks
from kafkalite.viz.flame import (
    build_tree,
    colour,
    format_collapsed,
    frame_file,
    frame_name,
    layout,
    parse_collapsed,
    plot_flame,
    top_self,
    total_time,
)

SAMPLE = """\
# a comment
main (app.py);send (kafkalite/client/producer.py);append (kafkalite/client/accumulator.py) 4
main (app.py);send (kafkalite/client/producer.py) 3

main (app.py);run (kafkalite/net/sim.py);append (kafkalite/storage/log.py);write (os.py) 7
main (app.py);send (kafkalite/client/producer.py) 2
 4
"""


def test_parse_adds_equal_stacks_and_keeps_frames_in_order() -> None:
    stacks = parse_collapsed(SAMPLE.splitlines())
    send = ("main (app.py)", "send (kafkalite/client/producer.py)")
    assert stacks[send] == 5, "the two lines of the same stack add up"
    assert stacks[()] == 4, "a line with a count and no frame is the empty stack"
    assert sum(stacks.values()) == 20, "every sample is counted once"
    assert len(stacks) == 4, "comments and blank lines are no stacks"


@pytest.mark.parametrize("line", ["main;send", "main;send x", "main;send -3", "main;send 2.5"])
def test_parse_refuses_a_line_without_a_count(line: str) -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse_collapsed([line])


def test_frame_name_and_file_split_py_spy_frames() -> None:
    frame = "Log.append (kafkalite/storage/log.py:120)"
    assert frame_name(frame) == "Log.append", "the function is before the parenthesis"
    assert frame_file(frame) == "kafkalite/storage/log.py", "the line number is dropped"
    assert frame_file("bare") == "", "a frame without a file has none"


frames = st.lists(st.sampled_from(["a", "b", "c", "d (x/y.py)"]), min_size=1, max_size=5)
profiles = st.dictionaries(frames.map(tuple), st.integers(1, 50), min_size=1, max_size=20)


@given(profiles)
def test_layout_children_fit_their_parent(stacks: dict) -> None:
    tree = build_tree(stacks)
    boxes = layout(tree)
    assert boxes[0].width == sum(stacks.values()), "the root holds every sample"
    by_depth: dict[int, list] = {}
    for b in boxes:
        by_depth.setdefault(b.depth, []).append(b)
    for parent in boxes:
        kids = [
            b
            for b in by_depth.get(parent.depth + 1, [])
            if parent.x <= b.x and b.x + b.width <= parent.x + parent.width
        ]
        assert sum(k.width for k in kids) + parent.self_samples == parent.width, (
            f"{parent}: children and own time must sum to its width"
        )
    assert sum(b.self_samples for b in boxes) == sum(stacks.values()), "self time sums to all"


@given(profiles)
def test_format_then_parse_is_the_identity(stacks: dict) -> None:
    assert parse_collapsed(format_collapsed(stacks).splitlines()) == stacks, "round trip"


def test_siblings_are_laid_out_by_name_not_by_input_order() -> None:
    a = layout(build_tree({("r", "b"): 1, ("r", "a"): 2}))
    b = layout(build_tree({("r", "a"): 2, ("r", "b"): 1}))
    assert a == b, "the same profile gives the same picture whatever the line order"
    assert [x.name for x in a if x.depth == 2] == ["a", "b"], "siblings sorted by name"
    assert [x.x for x in a if x.depth == 2] == [0, 2], "side by side from the parent's left edge"


def test_top_self_ranks_innermost_frames() -> None:
    stacks = parse_collapsed(SAMPLE.splitlines())
    rows = top_self(stacks, 2)
    assert [r["function"] for r in rows] == ["write", "send"], "7 in write, 5 in send, 4 in append"
    assert rows[0]["share"] == pytest.approx(7 / 20), "share of all samples"
    assert total_time(stacks, "send") == 9, "send is on 3 lines of the profile, 9 samples"


def test_timed_stacks_keep_the_samples_of_the_timed_block_only() -> None:
    run = "run_case (kafkalite/harness/bench/produce.py:{})"
    stacks = {
        ("<module> (x.py:1)", run.format(397), "send (kafkalite/client/producer.py:351)"): 5,
        ("<module> (x.py:1)", run.format(398), "send (kafkalite/client/producer.py:342)"): 2,
        ("<module> (x.py:1)", run.format(352), "__init__ (kafkalite/host/cluster.py:181)"): 3,
        ("<module> (x.py:1)", run.format(404), "cleanup (tempfile.py:908)"): 4,
        ("<module> (x.py:1)", "main (x.py:9)"): 1,
    }
    kept = timed_stacks(stacks, range(385, 403))
    assert kept == {
        ("run_case (kafkalite/harness/bench/produce.py)", "send (kafkalite/client/producer.py)"): 7
    }, "set-up and teardown samples dropped; lines dropped, so one function is one stack"


def test_timed_lines_bracket_the_send_loop_of_run_case() -> None:
    import inspect

    from kafkalite.harness.bench.produce import run_case

    lines, first = inspect.getsourcelines(run_case)
    send = next(first + i for i, line in enumerate(lines) if line.strip() == "send(TOPIC, value)")
    create = next(first + i for i, line in enumerate(lines) if "create_topic(" in line)
    warm = next(first + i for i, line in enumerate(lines) if "warm = producer.send(" in line)
    timed = timed_lines()
    assert send in timed, "the send loop is timed"
    assert create not in timed and warm not in timed, "topic creation and the warm-up send are not"


def test_stage_is_the_innermost_kafkalite_package() -> None:
    stacks = parse_collapsed(SAMPLE.splitlines())
    shares = stage_shares(stacks)
    assert shares["Log.append: validation, segment, index"] == pytest.approx(7 / 20), (
        "write in os.py counts for storage, which called it"
    )
    assert list(shares)[0] == "producer: send() and the accumulator", "largest first"
    assert stage(("main (app.py)",)) == "outside kafkalite", "no kafkalite frame"
    assert sum(shares.values()) == pytest.approx(1.0), "shares cover every sample"


def test_plot_is_deterministic_and_leaves_out_thin_frames() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stacks = {("main", "big"): 98, ("main", "thin"): 2}
    fig, ax = plt.subplots()
    drawn = plot_flame(stacks, ax, min_share=0.05)
    plt.close(fig)
    assert [b.name for b in drawn] == ["all", "main", "big"], "thin is under 5% and not drawn"
    assert colour("big") == colour("big (x.py)"), "the colour depends on the function only"
