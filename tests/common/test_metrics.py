"""The Yammer-style meters and histograms behind the broker's metrics."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.metrics import (
    PERCENTILES,
    RESERVOIR_SIZE,
    TICK_INTERVAL_MS,
    Histogram,
    Meter,
    MetricName,
    MetricsRegistry,
)


def test_a_meter_counts_and_its_rates_follow_the_event_rate():
    m = Meter(now_ms=0)
    for _ in range(120):  # 10 minutes of 12 events per second, ticked every 5 s
        m.mark(60)
        m.tick()
    values = m.values(now_ms=600_000)
    assert values["Count"] == 7200
    assert values["MeanRate"] == pytest.approx(12.0)
    assert values["OneMinuteRate"] == pytest.approx(12.0)
    # then silence: the one-minute rate decays by e^-1 a minute, the fifteen-minute one much slower
    for _ in range(12):
        m.tick()
    after = m.values(now_ms=660_000)
    assert after["OneMinuteRate"] == pytest.approx(12.0 / math.e, rel=1e-6)
    assert after["FifteenMinuteRate"] > 11.0
    assert after["Count"] == 7200


def test_the_first_tick_starts_a_meter_at_the_rate_it_saw():
    m = Meter(now_ms=0)
    m.mark(50)
    m.tick()
    assert m.values(5000)["OneMinuteRate"] == pytest.approx(10.0)
    assert m.values(5000)["FifteenMinuteRate"] == pytest.approx(10.0)


def test_histogram_percentiles_interpolate_as_yammer_does():
    h = Histogram()
    for v in range(1, 101):
        h.update(v)
    values = h.values(0)
    assert values["50thPercentile"] == pytest.approx(50.5)  # position 0.5 * 101 between 50 and 51
    assert values["99thPercentile"] == pytest.approx(99.99)
    assert values["999thPercentile"] == 100
    assert (values["Count"], values["Min"], values["Max"], values["Mean"]) == (100, 1, 100, 50.5)
    assert [k for k in values if k.endswith("Percentile")] == [
        "50thPercentile",
        "75thPercentile",
        "95thPercentile",
        "98thPercentile",
        "99thPercentile",
        "999thPercentile",
    ]


def test_histogram_percentiles_see_only_the_most_recent_values():
    h = Histogram()
    for _ in range(RESERVOIR_SIZE):
        h.update(1000.0)
    for _ in range(RESERVOIR_SIZE):
        h.update(1.0)
    assert h.percentile(0.999) == 1.0  # the old, slow values left the sample
    assert h.values(0)["Max"] == 1000.0  # max and count cover every value
    assert h.count == 2 * RESERVOIR_SIZE


def test_an_empty_histogram_reads_zeros():
    assert set(Histogram().values(0).values()) == {0}


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=300))
def test_percentiles_are_ordered_and_within_the_values(values):
    h = Histogram()
    for v in values:
        h.update(v)
    got = [h.percentile(q) for q in PERCENTILES]
    assert got == sorted(got)
    assert min(values) <= got[0] and got[-1] <= max(values)


def test_registry_names_ticks_and_reads():
    now = [0]
    r = MetricsRegistry(lambda: now[0])
    m = r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", topic="t")
    assert r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", topic="t") is m
    r.gauge("kafka.server", "ReplicaManager", "LeaderCount", lambda: 7)
    m.mark(500)
    r.tick(0)  # the first call only sets the schedule
    now[0] = TICK_INTERVAL_MS  # one interval: 500 events in 5 s
    r.tick(now[0])
    assert m.values(now[0])["OneMinuteRate"] == pytest.approx(100.0)
    assert r.value("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t") == 500
    assert r.value("kafka.server:type=ReplicaManager,name=LeaderCount") == 7
    assert [str(name) for name, _, _ in r.read()] == [
        "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t",
        "kafka.server:type=ReplicaManager,name=LeaderCount",
    ]
    with pytest.raises(KeyError, match="no metric"):
        r.value("kafka.server:type=Nope,name=Nothing")
    assert MetricName("a", "B", "C", (("x", "1"),)).mbean() == "a:type=B,name=C,x=1"
