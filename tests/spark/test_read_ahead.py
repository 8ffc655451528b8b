"""``read_ahead``: the same items in the same order, errors where they happened, and no thread left behind
when Spark stops taking batches early (a LIMIT, a failed task)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
