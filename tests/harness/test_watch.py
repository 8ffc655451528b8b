"""MetricsTimeline turns per-broker samples into what a dashboard plots."""

from __future__ import annotations

import pandas as pd
import pytest

from kafkalite.harness.watch import MetricsTimeline


def _row(t: float, broker: int, messages: int, urp: int = 0, count: int = 0, total: float = 0.0):
    return {
        "time_s": t, "broker": broker, "up": True, "under_replicated": urp, "under_min_isr": 0,
        "offline": 0, "active_controllers": int(broker == 1), "leaders": 1, "messages_in": messages,
        "isr_shrinks": 0, "isr_expands": 0, "produce_count": count, "produce_total_ms": total,
        "produce_p99_ms": 0.0,
    }  # fmt: skip


def test_counters_become_increases_and_a_restart_is_not_a_negative_rate():
    tl = MetricsTimeline(cluster=None)
    tl.rows = [
        _row(1, 1, 100, count=10, total=40.0), _row(1, 2, 50),
        _row(2, 1, 300, urp=1, count=20, total=1040.0), _row(2, 2, 70),
        # broker 2 restarted: its counter began again at 0 and reached 30
        _row(3, 1, 400, count=30, total=1080.0), _row(3, 2, 30),
    ]  # fmt: skip
    view = tl.cluster_view()
    assert list(view["messages_in_per_s"]) == [150, 220, 130]
    assert list(view["under_replicated"]) == [0, 1, 0]
    assert list(view["active_controllers"]) == [1, 1, 1]
    assert list(view["produce_mean_ms"]) == pytest.approx([4.0, 100.0, 4.0])


def test_an_interval_without_produce_requests_has_no_mean():
    tl = MetricsTimeline(cluster=None)
    tl.rows = [_row(1, 1, 0, count=5, total=5.0), _row(2, 1, 0, count=5, total=5.0)]
    assert pd.isna(tl.cluster_view()["produce_mean_ms"].iloc[1])
