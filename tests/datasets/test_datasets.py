"""kafkalite.datasets: the NYC flights events, the loaders (producer and log paths), the generators."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from kafkalite.client.partitioner import partition_for_key
from kafkalite.datasets import (
    FLIGHT_COUNT,
    FLIGHT_SCHEMA_DDL,
    WEATHER_COUNT,
    WEATHER_SCHEMA_DDL,
    DatasetError,
    Event,
    flight_events,
    load_flights,
    order_changes,
    produce_events,
    produce_flights,
    user_behaviour,
    weather_events,
    write_events,
    write_flights,
    zipf_shares,
)
from kafkalite.datasets.flights import FLIGHT_COLUMNS, WEATHER_COLUMNS
from kafkalite.datasets.generator import ORDER_STATUSES
from kafkalite.errors import InvalidConfigError
from kafkalite.host.cluster import Cluster
from kafkalite.records.batch import iter_batches
from kafkalite.records.compression import Compression
from kafkalite.storage import Log

# --------------------------------------------------------------------------------------- flights


@pytest.fixture(scope="module")
def flights() -> list[Event]:
    return flight_events("carrier")


def test_all_flights_and_weather_rows_become_events(flights: list[Event]) -> None:
    assert len(flights) == FLIGHT_COUNT == 336_776
    assert len(weather_events()) == WEATHER_COUNT == 26_115


def test_flight_events_are_in_time_order_with_utc_departure_times(flights: list[Event]) -> None:
    stamps = [e.timestamp_ms for e in flights]
    assert stamps == sorted(stamps)
    first = json.loads(flights[0].value)
    # UA 1545 EWR->IAH, scheduled 05:15 local (EST, UTC-5) on 2013-01-01: 10:15 UTC.
    assert (first["carrier"], first["flight"], first["origin"], first["dest"]) == ("UA", 1545, "EWR", "IAH")
    assert flights[0].timestamp_ms == 1_357_035_300_000
    assert flights[0].key == b"UA"
    assert list(first) == list(FLIGHT_COLUMNS) and len(FLIGHT_COLUMNS) == 19
    assert stamps[-1] < 1_388_620_800_000  # before 2014-01-02 UTC


def test_flight_keys_and_skew(flights: list[Event]) -> None:
    by_carrier = Counter(e.key for e in flights)
    assert len(by_carrier) == 16 and by_carrier[b"UA"] == 58_665 and by_carrier[b"OO"] == 32
    assert all(json.loads(e.value)["carrier"] == e.key.decode() for e in flights[:2000])
    by_origin = Counter(e.key for e in flight_events("origin"))
    assert by_origin == {b"EWR": 120_835, b"JFK": 111_279, b"LGA": 104_662}
    assert all(e.key is None for e in flight_events(None, limit=10))
    # tailnum is missing for 2,512 flights: those get a null key rather than a made-up one.
    assert sum(e.key is None for e in flight_events("tailnum")) == 2_512


def test_missing_values_are_json_null(flights: list[Event]) -> None:
    cancelled = [json.loads(e.value) for e in flights if b'"dep_time":null' in e.value]
    assert len(cancelled) == 8_255
    assert all(c["dep_delay"] is None for c in cancelled)


def test_weather_events_are_keyed_by_airport_at_the_hour() -> None:
    weather = weather_events()
    assert {e.key for e in weather} == {b"EWR", b"JFK", b"LGA"}
    row = json.loads(weather[0].value)
    assert list(row) == list(WEATHER_COLUMNS)
    assert all(e.timestamp_ms % 3_600_000 == 0 for e in weather)
    assert [e.timestamp_ms for e in weather] == sorted(e.timestamp_ms for e in weather)


def test_schema_ddl_names_the_json_fields() -> None:
    assert FLIGHT_SCHEMA_DDL.startswith("year int") and "time_hour timestamp" in FLIGHT_SCHEMA_DDL
    assert WEATHER_SCHEMA_DDL.startswith("origin string") and len(WEATHER_COLUMNS) == 15


def test_limit_and_bad_arguments_raise_clear_errors() -> None:
    assert len(load_flights(limit=100)) == 100 and len(flight_events(limit=0)) == 0
    with pytest.raises(DatasetError, match="key 'airline' is not one of carrier, origin"):
        flight_events("airline")
    with pytest.raises(DatasetError, match="limit must be None or an integer >= 0"):
        flight_events(limit=-1)
    with pytest.raises(DatasetError, match="partitions must be an integer >= 1"):
        write_events("/nonexistent", "t", 0, [])


# --------------------------------------------------------------------------------------- loaders


def test_write_events_partitions_like_the_producer_and_keeps_timestamps(tmp_path, flights) -> None:
    sample = flights[:20_000]
    report = write_events(tmp_path, "flights", 6, sample, records_per_batch=500)
    expected = Counter(partition_for_key(e.key, 6) for e in sample)
    assert report.records == 20_000 and report.per_partition == {p: expected[p] for p in range(6)}
    assert report.path == "logs" and report.bytes == sum(len(e.key) + len(e.value) for e in sample)
    for p in range(6):
        log = Log.open(tmp_path / f"flights-{p}", read_only=True)
        got = [(r.key, r.value, r.timestamp) for r in log.iter_records()]
        log.close()
        want = [(e.key, e.value, e.timestamp_ms) for e in sample if partition_for_key(e.key, 6) == p]
        assert got == want  # per key order (and each partition's order) is the event order


def test_write_events_spreads_null_keys_and_appends(tmp_path) -> None:
    events = [Event(None, b"v%d" % i, 1000 + i) for i in range(1000)]
    first = write_events(tmp_path, "t", 4, events, records_per_batch=100)
    assert sum(first.per_partition.values()) == 1000 and min(first.per_partition.values()) > 0
    again = write_events(tmp_path, "t", 4, events[:10], records_per_batch=100)
    assert again.records == 10 and sum(again.per_partition.values()) == 10


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_write_events_compresses_every_batch_and_reads_back_the_same(tmp_path, flights, codec) -> None:
    sample = flights[:3_000]
    plain = write_events(tmp_path / "plain", "f", 2, sample, records_per_batch=500)
    packed = write_events(tmp_path / codec, "f", 2, sample, records_per_batch=500, compression=codec.upper())
    assert packed.per_partition == plain.per_partition
    for p in range(2):
        logs = [Log.open(tmp_path / d / f"f-{p}", read_only=True) for d in ("plain", codec)]
        try:
            data = b"".join(seg.log_path.read_bytes() for seg in logs[1].segments)
            assert {h.attributes & 0x07 for _, h in iter_batches(data)} == {Compression[codec.upper()]}
            assert [(r.key, r.value) for r in logs[1].iter_records()] == [
                (r.key, r.value) for r in logs[0].iter_records()
            ]
            assert logs[1].size_bytes < 0.5 * logs[0].size_bytes  # JSON flights compress well
        finally:
            for log in logs:
                log.close()


def test_write_events_names_an_unknown_codec(tmp_path) -> None:
    with pytest.raises(InvalidConfigError, match="brotli.*compression"):
        write_events(tmp_path, "t", 1, [Event(None, b"v", 0)], compression="brotli")
    assert not (tmp_path / "t-0").exists()  # refused before any log is opened


def test_write_flights_fast_path_counts_per_partition(tmp_path) -> None:
    report = write_flights(tmp_path, partitions=4, key="origin", limit=3000)
    assert report.records == 3000 and sum(report.per_partition.values()) == 3000
    keys = [e.key for e in flight_events("origin", limit=3000)]
    assert report.per_partition == {p: sum(partition_for_key(k, 4) == p for k in keys) for p in range(4)}


def test_produce_flights_through_a_replicated_cluster() -> None:
    with Cluster(brokers=3, seed=5) as cluster:
        report = produce_flights(cluster, "flights", 4, limit=5000, replication_factor=3, key="carrier")
        assert report.records == 5000 and report.path == "producer"
        events = flight_events("carrier", limit=5000)
        want = Counter(partition_for_key(e.key, 4) for e in events)
        assert report.per_partition == {p: want[p] for p in range(4)}
        committed = cluster.read_all("flights")
        for p, records in committed.items():
            mine = [e for e in events if partition_for_key(e.key, 4) == p]
            assert [(r.key, r.value, r.timestamp) for r in records] == [
                (e.key, e.value, e.timestamp_ms) for e in mine
            ]
            assert cluster.high_watermark("flights", p) == len(mine)
            assert set(cluster.log_end_offsets("flights", p).values()) == {len(mine)}  # every replica has it


def test_produce_events_into_an_existing_topic_and_unknown_topic() -> None:
    with Cluster(brokers=1, seed=2) as cluster:
        cluster.create_topic("clicks", 2)
        report = produce_events(cluster, "clicks", list(user_behaviour(3000, seed=4)), acks=1)
        assert report.records == 3000 and sum(report.per_partition.values()) == 3000
        again = produce_events(cluster, "clicks", list(user_behaviour(100, seed=5)))
        assert sum(again.per_partition.values()) == 100
        assert sum(cluster.high_watermark("clicks", p) for p in range(2)) == 3100
        with pytest.raises(DatasetError, match="topic 'nope' does not exist"):
            produce_events(cluster, "nope", [])


# ------------------------------------------------------------------------------------ generators


def test_generators_are_deterministic_by_seed() -> None:
    assert list(user_behaviour(2000, seed=1)) == list(user_behaviour(2000, seed=1))
    assert list(user_behaviour(2000, seed=1)) != list(user_behaviour(2000, seed=2))
    assert list(order_changes(2000, seed=1)) == list(order_changes(2000, seed=1))
    assert list(order_changes(2000, seed=1)) != list(order_changes(2000, seed=2))
    # A longer run starts with the shorter run's events (chunked drawing does not change the stream).
    assert list(user_behaviour(25_000, seed=3))[:12_345] == list(user_behaviour(12_345, seed=3))


def test_user_behaviour_values_and_zipf_skew() -> None:
    events = list(user_behaviour(50_000, seed=7, users=1000, zipf_s=1.1))
    rows = [json.loads(e.value) for e in events]
    assert all(
        r["user"].encode() == e.key and r["ts"] == e.timestamp_ms for r, e in zip(rows, events, strict=True)
    )
    assert [e.timestamp_ms for e in events] == sorted(e.timestamp_ms for e in events)
    counts = Counter(e.key for e in events)
    top_share = counts[b"user-000"] / len(events)
    assert abs(top_share - zipf_shares(1000, 1.1)[0]) < 0.01
    assert counts.most_common(1)[0][0] == b"user-000"
    uniform = Counter(e.key for e in user_behaviour(50_000, seed=7, users=1000, zipf_s=0))
    assert max(uniform.values()) < 3 * 50  # about 50 each
    assert {r["action"] for r in rows} == {"view", "click", "add_to_cart", "purchase"}


def test_order_changes_follow_the_order_lifecycle() -> None:
    events = list(order_changes(30_000, seed=3, customers=500))
    allowed = {
        None: {"created"},
        "created": {"paid", "cancelled"},
        "paid": {"shipped", "cancelled"},
        "shipped": {"delivered"},
    }
    state: dict[str, tuple[str, int, str]] = {}
    for e in events:
        r = json.loads(e.value)
        prev = state.get(r["order"])
        assert r["status"] in allowed[prev[0] if prev else None], (prev, r)
        assert r["version"] == (prev[1] + 1 if prev else 1)
        assert prev is None or prev[2] == r["customer"]
        assert e.key == r["customer"].encode()
        state[r["order"]] = (r["status"], r["version"], r["customer"])
    statuses = Counter(s for s, _, _ in state.values())
    assert set(statuses) <= set(ORDER_STATUSES) and statuses["delivered"] > statuses["cancelled"] > 0
    by_order = list(order_changes(100, seed=3, key_by="order"))
    assert all(e.key == json.loads(e.value)["order"].encode() for e in by_order)


def test_generator_arguments_are_checked() -> None:
    with pytest.raises(DatasetError, match="zipf_s must be a finite number >= 0"):
        list(user_behaviour(10, zipf_s=-1))
    with pytest.raises(DatasetError, match="n must be an integer >= 0"):
        list(order_changes(-5))
    with pytest.raises(DatasetError, match="key_by must be 'customer' or 'order'"):
        list(order_changes(5, key_by="shop"))
    with pytest.raises(DatasetError, match="number of keys must be an integer >= 1"):
        list(user_behaviour(5, users=0))


def test_progress_bar_only_when_asked_or_long(capsys) -> None:
    list(user_behaviour(1000, seed=1))
    assert capsys.readouterr().err == ""
    list(user_behaviour(1000, seed=1, progress=True))
    assert "user_behaviour" in capsys.readouterr().err


def test_events_are_kept_and_sliced_not_shared() -> None:
    """A second call reuses the encoded events; a limit is a prefix; a caller's list is its own."""
    first = flight_events(limit=50)
    first.clear()
    again = flight_events(limit=50)
    assert len(again) == 50 and again == flight_events()[:50]
    assert again[0].value is flight_events(key=None, limit=1)[0].value  # one encoding per row
    assert [e.key for e in flight_events("origin", 3)] == [e.key for e in flight_events("origin")[:3]]
    assert weather_events(limit=2) == weather_events()[:2]


def test_a_larger_limit_extends_the_kept_events_exactly() -> None:
    from kafkalite.datasets import flights

    flights._VALUES.clear()
    flights._EVENTS.clear()
    grown = [flight_events("tailnum", 7), flight_events("tailnum", 40), flight_events(None, 25)]
    flights._VALUES.clear()
    flights._EVENTS.clear()
    whole_tail, whole_none = flight_events("tailnum", 40), flight_events(None, 25)
    assert grown == [whole_tail[:7], whole_tail, whole_none]
    assert any(e.key is None for e in flight_events("tailnum", 5_000)), "a missing tail number: null key"
    assert json.loads(whole_none[3].value)["time_hour"] is not None
