"""Offsets stored beside the output in one SQLite transaction: exactly once through crashes; the naive
Kafka-commit orders duplicate (commit after the output) or lose (commit before it)."""

from __future__ import annotations

import sqlite3
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.harness.external_offsets import OutputStore, run_external_offsets
from kafkalite.protocol import TopicPartition

SEEDS = range(8)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10**6))
def test_offsets_in_the_same_transaction_give_exactly_once(seed) -> None:
    with tempfile.TemporaryDirectory() as d:
        report = run_external_offsets(seed, "sqlite", d)
    assert report.exactly_once, (report.crashes, report.lost, report.duplicated)
    assert len(report.copies) == report.records == 300


def test_the_seek_to_stored_offsets_is_what_saves_it() -> None:
    """Crashes between the SQLite commit and the (monitoring) Kafka commit leave the group's committed offsets
    behind the output: a restart from them would write those rows twice."""
    stale = 0
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as d:
            report = run_external_offsets(seed, "sqlite", d)
        assert report.exactly_once, (seed, report.crashes)
        stale += sum(c.endswith("before-kafka-commit") for c in report.crashes)
    assert stale > 0, "no run crashed with Kafka's committed offsets stale: the seek was never tested"


def test_commit_to_kafka_after_the_output_duplicates() -> None:
    dup = lost = 0
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as d:
            report = run_external_offsets(seed, "commit-after", d)
        dup, lost = dup + report.duplicated, lost + report.lost
    assert lost == 0 and dup > 0, (dup, lost)


def test_commit_to_kafka_before_the_output_loses() -> None:
    dup = lost = 0
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as d:
            report = run_external_offsets(seed, "commit-before", d)
        dup, lost = dup + report.duplicated, lost + report.lost
    assert dup == 0 and lost > 0, (dup, lost)


def test_without_crashes_every_mode_is_exact(tmp_path) -> None:
    for mode in ("sqlite", "commit-after", "commit-before"):
        report = run_external_offsets(3, mode, tmp_path / mode, crash_probability=0.0)
        assert report.crashes == [] and report.exactly_once, mode


def test_a_transaction_cut_by_a_crash_leaves_nothing(tmp_path) -> None:
    store = OutputStore(tmp_path / "app.db")
    tp = TopicPartition("t", 0)

    def die(here: str) -> None:
        raise RuntimeError(here)

    with pytest.raises(RuntimeError, match="mid-transaction"):
        store.write([(tp, 0, b"a"), (tp, 1, b"b")], {tp: 2}, die)
    store.close()
    db = sqlite3.connect(tmp_path / "app.db")
    assert db.execute("SELECT COUNT(*) FROM output").fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM offsets").fetchone() == (0,)
    db.close()
    store = OutputStore(tmp_path / "app.db")
    store.write([(tp, 0, b"a")], {tp: 1}, lambda here: None)
    assert store.offsets() == {tp: 1} and store.output_offsets() == [("t", 0, 0)]
    store.close()


def test_unknown_mode_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        run_external_offsets(0, "twice", tmp_path)
