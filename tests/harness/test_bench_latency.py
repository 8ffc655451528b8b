"""The latency bench's arithmetic (the measurement itself needs real clients and runs in the chapter)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.harness.bench.latency import KAFKA_2014_MS, LatencyResult, LatencyRun, percentile


@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=200), st.floats(0, 100))
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(sorted(values), q) == pytest.approx(np.percentile(values, q), abs=1e-9), (
        "linear interpolation, as numpy's default"
    )


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


def test_result_reports_each_run_and_all_of_them() -> None:
    runs = [LatencyRun([1.0] * 1000), LatencyRun([3.0] * 1000)]
    result = LatencyResult(runs, {"acks": "all"}, {"group.id": "g"})
    d = result.to_dict()
    assert [r["p50_ms"] for r in d["runs"]] == [1.0, 3.0], "each run's median"
    assert d["pooled"]["p50_ms"] == pytest.approx(2.0), "the pooled median sits between the runs"
    assert d["kafka_2014_ms"] == {"p50_ms": 2.0, "p99_ms": 3.0, "p999_ms": 14.0}, "the reference"
    assert KAFKA_2014_MS == (2.0, 3.0, 14.0), "Kreps' 2014 figures"
    assert "all runs:" in result.table(), "the table pools the runs when there are several"
