"""``read_ahead``: the same items in the same order, errors where they happened, and no thread left behind
when Spark stops taking batches early (a LIMIT, a failed task)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.spark.options import parse_read_options
from kafkalite.spark.read_ahead import read_ahead


def _threads() -> int:
    return sum(t.name == "kafkalite-read-ahead" for t in threading.enumerate())


@given(st.lists(st.integers(), max_size=50), st.integers(min_value=1, max_value=4))
def test_yields_everything_in_order(items, depth):
    assert list(read_ahead(iter(items), depth)) == items


def test_an_error_is_raised_after_the_items_before_it():
    def gen():
        yield 1
        yield 2
        raise ValueError("corrupt batch at offset 7")

    got = []
    with pytest.raises(ValueError, match="offset 7"):
        for x in read_ahead(gen()):
            got.append(x)
    assert got == [1, 2]


def test_it_reads_ahead_while_the_consumer_is_busy():
    made: list[int] = []

    def gen():
        for i in range(5):
            made.append(i)
            yield i

    it = read_ahead(gen(), depth=2)
    assert next(it) == 0
    deadline = time.monotonic() + 5
    while len(made) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made[:3] == [0, 1, 2], "nothing was made ahead of the consumer"
    assert len(made) <= 4, "more than depth items were made ahead"
    assert list(it) == [1, 2, 3, 4]


def test_closing_early_stops_the_thread_and_closes_the_source():
    closed = threading.Event()

    def gen():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    before = _threads()
    it = read_ahead(gen(), depth=2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert closed.wait(5), "the source generator was not closed"
    deadline = time.monotonic() + 5
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == before, "the read-ahead thread outlived its consumer"


def test_path_mode_reads_ahead_only_with_a_core_to_spare(monkeypatch):
    from kafkalite.spark import read_ahead as module
    from kafkalite.spark import source
    from kafkalite.spark.source import KafkaliteInputPartition, OffsetRange, input_partitions, read_partition

    monkeypatch.setattr(module, "usable_cores", lambda: 2)
    monkeypatch.setattr(source, "_read_partition", lambda p: iter([1, 2, 3]))
    rng = OffsetRange("t", 0, 0, 3)
    for tasks, wire, threads in ((1, False, 1), (2, False, 0), (4, False, 0), (2, True, 1)):
        p = KafkaliteInputPartition("/logs", rng, tasks=tasks, bootstrap="b:9092" if wire else None)
        it = read_partition(p)
        assert next(it) == 1
        assert _threads() == threads, f"{tasks} task(s) on 2 cores, wire={wire}: {_threads()} thread(s)"
        assert list(it) == [2, 3]
    opts = parse_read_options({"path": "/logs", "subscribe": "t"})
    made = input_partitions(opts, iter([rng, OffsetRange("t", 1, 0, 3)]))
    assert [p.tasks for p in made] == [2, 2], "every task knows how many tasks its scan has"
