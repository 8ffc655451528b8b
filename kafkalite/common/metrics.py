"""The meters, histograms and gauges a broker keeps, named as Kafka's JMX beans are.

Kafka's broker reports through Yammer metrics: a *meter* counts events and keeps exponentially weighted
rates over one, five and fifteen minutes, updated every five seconds; a *histogram* keeps a sample of
recent values for percentiles; a *gauge* is read when asked. Each has an MBean name such as
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions``, which is what operators alert on.

Time comes from the caller (``tick(now_ms)``), so in the simulator the rates are as deterministic as the
rest of the run. Marking a meter is one integer addition: the rates are worked out on the tick, never on
the hot path.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PERCENTILES",
    "percentile_key",
    "TICK_INTERVAL_MS",
    "Gauge",
    "Histogram",
    "Meter",
    "MetricName",
    "MetricsRegistry",
]

TICK_INTERVAL_MS = 5_000
"""Yammer's meters fold the last interval's count into their moving averages every five seconds."""

RESERVOIR_SIZE = 1028
"""Yammer's default sample size; kafkalite keeps the most recent values (a sliding window)."""

PERCENTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
"""The percentiles a Yammer histogram reports (50thPercentile ... 999thPercentile)."""


@dataclass(frozen=True, slots=True)
class MetricName:
    """A JMX-style name: ``domain:type=T,name=N[,tag=value...]``."""

    domain: str
    type: str
    name: str
    tags: tuple[tuple[str, str], ...] = ()

    def mbean(self) -> str:
        extra = "".join(f",{k}={v}" for k, v in self.tags)
        return f"{self.domain}:type={self.type},name={self.name}{extra}"

    def __str__(self) -> str:
        return self.mbean()


class Meter:
    """A count with one-, five- and fifteen-minute moving average rates (events per second)."""

    __slots__ = ("count", "_last_count", "_started_ms", "_rates", "_primed")

    WINDOWS_MIN = (1, 5, 15)

    def __init__(self, now_ms: int) -> None:
        self.count = 0
        self._last_count = 0
        self._started_ms = now_ms
        self._rates = [0.0, 0.0, 0.0]
        self._primed = False

    def mark(self, n: int = 1) -> None:
        self.count += n

    def tick(self) -> None:
        """Fold one interval's events into the averages (called every ``TICK_INTERVAL_MS``)."""
        instant = (self.count - self._last_count) * 1000.0 / TICK_INTERVAL_MS
        self._last_count = self.count
        for i, minutes in enumerate(self.WINDOWS_MIN):
            if not self._primed:
                self._rates[i] = instant
            else:
                alpha = 1.0 - math.exp(-TICK_INTERVAL_MS / 60_000.0 / minutes)
                self._rates[i] += alpha * (instant - self._rates[i])
        self._primed = True

    def values(self, now_ms: int) -> dict[str, float]:
        elapsed_s = (now_ms - self._started_ms) / 1000.0
        return {
            "Count": self.count,
            "MeanRate": self.count / elapsed_s if elapsed_s > 0 else 0.0,
            "OneMinuteRate": self._rates[0],
            "FiveMinuteRate": self._rates[1],
            "FifteenMinuteRate": self._rates[2],
        }


class Histogram:
    """Count, min, max, mean over every value; percentiles over the most recent ``RESERVOIR_SIZE``."""

    __slots__ = ("count", "total", "min", "max", "_sample")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self._sample: deque[float] = deque(maxlen=RESERVOIR_SIZE)

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        self._sample.append(value)

    def percentile(self, q: float) -> float:
        """The value at quantile ``q`` of the sample, interpolated between neighbours as Yammer does."""
        values = sorted(self._sample)
        if not values:
            return 0.0
        pos = q * (len(values) + 1)
        if pos < 1:
            return values[0]
        if pos >= len(values):
            return values[-1]
        low = values[int(pos) - 1]
        return low + (pos - int(pos)) * (values[int(pos)] - low)

    def values(self, now_ms: int) -> dict[str, float]:
        out: dict[str, float] = {
            "Count": self.count,
            "Min": self.min if self.count else 0.0,
            "Max": self.max if self.count else 0.0,
            "Mean": self.total / self.count if self.count else 0.0,
        }
        for q in PERCENTILES:
            out[percentile_key(q)] = self.percentile(q)
        return out


def percentile_key(q: float) -> str:
    """0.5 -> ``50thPercentile``, 0.999 -> ``999thPercentile`` (Yammer's attribute names)."""
    digits = f"{q * 100:g}".replace(".", "")
    return f"{digits}thPercentile"


class Gauge:
    """A value read when the metrics are: ``read()`` is called then, never in between."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], float]) -> None:
        self.read = read

    def values(self, now_ms: int) -> dict[str, float]:
        return {"Value": self.read()}


Metric = Meter | Histogram | Gauge


def _name(domain: str, type: str, name: str, tags: dict[str, Any]) -> MetricName:
    return MetricName(domain, type, name, tuple((k, str(v)) for k, v in tags.items()))


@dataclass
class MetricsRegistry:
    """One process's (one broker incarnation's) metrics, by name; ``tick`` keeps the meters' rates."""

    now_ms: Callable[[], int]
    metrics: dict[MetricName, Metric] = field(default_factory=dict)
    _next_tick_ms: int | None = None

    def meter(self, domain: str, type: str, name: str, **tags: Any) -> Meter:
        key = _name(domain, type, name, tags)
        m = self.metrics.get(key)
        if m is None:
            m = self.metrics[key] = Meter(self.now_ms())
        assert isinstance(m, Meter), f"{key} is already a {type(m).__name__}"
        return m

    def histogram(self, domain: str, type: str, name: str, **tags: Any) -> Histogram:
        key = _name(domain, type, name, tags)
        m = self.metrics.get(key)
        if m is None:
            m = self.metrics[key] = Histogram()
        assert isinstance(m, Histogram), f"{key} is already a {type(m).__name__}"
        return m

    def gauge(self, domain: str, type: str, name: str, read: Callable[[], float], **tags: Any) -> Gauge:
        """Register (or replace: a new incarnation of the component reads its own state) a gauge."""
        g = self.metrics[_name(domain, type, name, tags)] = Gauge(read)
        return g

    def tick(self, now_ms: int) -> None:
        """Advance the meters' averages by every whole interval that has passed."""
        if self._next_tick_ms is None:
            self._next_tick_ms = now_ms + TICK_INTERVAL_MS
            return
        while now_ms >= self._next_tick_ms:
            self._next_tick_ms += TICK_INTERVAL_MS
            for m in self.metrics.values():
                if isinstance(m, Meter):
                    m.tick()

    def read(self) -> Iterator[tuple[MetricName, str, dict[str, float]]]:
        """Every metric as (name, kind, attribute values), sorted by name, gauges read now."""
        now = self.now_ms()
        for key in sorted(self.metrics, key=MetricName.mbean):
            m = self.metrics[key]
            yield key, type(m).__name__.lower(), m.values(now)

    def value(self, mbean: str, attribute: str | None = None) -> float:
        """One attribute of one metric by its MBean name (``Value`` for a gauge, ``Count`` otherwise)."""
        for key, m in self.metrics.items():
            if key.mbean() == mbean:
                vals = m.values(self.now_ms())
                return vals[attribute or ("Value" if isinstance(m, Gauge) else "Count")]
        raise KeyError(f"no metric {mbean!r}")
