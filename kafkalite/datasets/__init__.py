"""Data for the book's experiments: the NYC flights 2013 data set as event streams, and generators for the
seeds' own examples (a website's user-behaviour log, an order table's change records) with Zipf keys.

``flight_events()`` / ``weather_events()`` turn the real data into ``Event(key, value, timestamp_ms)``;
``produce_flights(cluster, ...)`` sends them through a cluster's producer, ``write_flights(dir, ...)``
appends them straight into partition logs. ``user_behaviour(n, seed=...)`` and ``order_changes(n, ...)``
generate synthetic streams of any size. Provenance and licences: ``data/README.md``.
"""

from kafkalite.datasets.flights import (
    FLIGHT_COUNT,
    FLIGHT_SCHEMA_DDL,
    WEATHER_COUNT,
    WEATHER_SCHEMA_DDL,
    flight_events,
    load_flights,
    load_weather,
    produce_flights,
    produce_weather,
    weather_events,
    write_flights,
    write_weather,
)
from kafkalite.datasets.generator import order_changes, user_behaviour, zipf_cum_weights, zipf_shares
from kafkalite.datasets.load import DatasetError, Event, LoadReport, produce_events, write_events

__all__ = [
    "FLIGHT_COUNT",
    "FLIGHT_SCHEMA_DDL",
    "WEATHER_COUNT",
    "WEATHER_SCHEMA_DDL",
    "DatasetError",
    "Event",
    "LoadReport",
    "flight_events",
    "load_flights",
    "load_weather",
    "order_changes",
    "produce_events",
    "produce_flights",
    "produce_weather",
    "user_behaviour",
    "weather_events",
    "write_events",
    "write_flights",
    "write_weather",
    "zipf_cum_weights",
    "zipf_shares",
]
