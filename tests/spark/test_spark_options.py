"""The Spark source's pieces that need no SparkSession: options, offsets JSON, admission control,
the Arrow decoder (against the reference record decoder), partition location and planning."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkalite.errors import InvalidConfigError, KafkaError, OffsetOutOfRangeError  # noqa: E402
from kafkalite.records import (  # noqa: E402
    Compression,
    TimestampType,
    build_batch,
    decode_batch_tuples,
    iter_batches,
)
from kafkalite.spark.arrow_records import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, batches_to_arrow  # noqa: E402
from kafkalite.spark.options import (  # noqa: E402
    OffsetSpec,
    parse_read_options,
    parse_write_options,
)
from kafkalite.spark.source import OffsetRange, plan_ranges, read_range, split_ranges  # noqa: E402
from kafkalite.spark.stream import offsets_from_json, offsets_to_json, rate_limit  # noqa: E402
from kafkalite.storage import Log  # noqa: E402
from kafkalite.storage.checkpoint import OffsetCheckpoint  # noqa: E402
from kafkalite.storage.log_dirs import layout_of, locate_partitions  # noqa: E402

T0 = 1_700_000_000_000


def _fill(dir, n, *, per_batch=10, t0=T0, config=None, keys=None):
    log = Log.open(dir, config or {})
    try:
        for i in range(0, n, per_batch):
            ids = range(i, min(n, i + per_batch))
            recs = [((keys(j) if keys else b"k%d" % j), b"v%d" % j) for j in ids]
            log.append(build_batch(recs, timestamp=[t0 + 10 * j for j in ids]))
    finally:
        log.close()


# ------------------------------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        (
            {"path": "/x", "subscribe": "t", "bogus": "1"},
            False,
            r"unknown option\(s\) 'bogus'.*valid options",
        ),
        ({"path": "/x", "subscribe": "t", "endingOffsets": "latest"}, True, "for batch queries only"),
        ({"path": "/x", "subscribe": "t", "maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({"path": "/x", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({"path": "/x", "subscribe": "t", "minPartitions": "x"}, False, "positive integer"),
        ({"path": "/x", "subscribe": "t", "failOnDataLoss": "yes"}, False, "true or false"),
        ({"path": "/x", "subscribe": "t", "includeHeaders": "1"}, False, "true or false"),
        ({"path": "/x", "subscribe": "t", "startingTimestamp": "soon"}, False, "not an integer"),
        ({"path": "/x", "subscribe": "t", "startingTimestamp": "-5"}, False, ">= 0"),
        ({"path": "/x", "subscribe": "t", "startingOffsetsByTimestamp": '{"t": [1]}'}, False, "must map to"),
        (
            {"path": "/x", "subscribe": "t", "startingOffsetsByTimestampStrategy": "skip"},
            False,
            "'error' or 'latest'",
        ),
        ({"path": "/x", "assign": '{"t": ["0"]}'}, False, "list of partition numbers"),
        ({"path": "/x", "assign": "{}"}, False, "names no partition"),
        ({"path": "/x", "subscribe": " , "}, False, "names no topic"),
        ({"path": "", "subscribe": "t"}, False, "option 'path' is required"),
    ],
)
def test_bad_read_options(options, streaming, message):
    with pytest.raises(InvalidConfigError, match=message):
        parse_read_options(options, streaming=streaming)


def test_read_option_defaults_and_precedence():
    batch = parse_read_options({"PATH": "/x", "Subscribe": "a, b"})  # Spark may pass any case
    assert batch.topics == ("a", "b")
    assert (batch.starting, batch.ending) == (OffsetSpec("earliest"), OffsetSpec("latest"))
    stream = parse_read_options({"path": "/x", "subscribe": "a"}, streaming=True)
    assert stream.starting == OffsetSpec("latest")  # Spark's streaming default
    # Spark's precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    both = parse_read_options(
        {
            "path": "/x",
            "subscribe": "a",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"a": {"0": 5}}',
            "startingTimestamp": "7",
        }
    )
    assert both.starting == OffsetSpec("timestamp", 7)
    by_ts = parse_read_options(
        {"path": "/x", "subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": 5}}'}
    )
    assert by_ts.starting == OffsetSpec("timestamps", {("a", 0): 5})
    # -1 / -2 are fine in a streaming query's JSON, not at the wrong end of a batch query
    parse_read_options(
        {"path": "/x", "subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, streaming=True
    )


def test_write_options():
    o = parse_write_options({"path": "/x", "topic": "t", "partitions": "3"})
    assert (o.topic, o.partitions) == ("t", 3)
    with pytest.raises(
        InvalidConfigError, match=r"unknown option.*'subscribe'.*valid options are: path, topic"
    ):
        parse_write_options({"path": "/x", "subscribe": "t"})
    with pytest.raises(InvalidConfigError, match="positive integer"):
        parse_write_options({"path": "/x", "partitions": "0"})


# ---------------------------------------------------------------------------------- streaming pieces


def test_offsets_json_is_canonical():
    doc = offsets_to_json({("b", 10): 1, ("a", 2): 5, ("b", 2): 7})
    assert list(doc) == ["a", "b"] and list(doc["b"]) == ["2", "10"]
    assert offsets_from_json(doc) == {("a", 2): 5, ("b", 2): 7, ("b", 10): 1}
    with pytest.raises(InvalidConfigError):
        offsets_from_json({"a": 3})


def test_rate_limit_shares_by_backlog_and_is_exact():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 50}
    end = rate_limit(start, latest, 100)
    assert sum(end[tp] - start[tp] for tp in start) == 100
    assert end == {("t", 0): 75, ("t", 1): 125, ("t", 2): 50}  # 3:1 backlog -> 75:25
    assert rate_limit(start, latest, None) == latest
    assert rate_limit(start, latest, 10_000) == latest
    one = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1}, 1)
    assert sum(one.values()) == 1  # never stuck: the remainder goes somewhere


@given(
    lags=st.lists(st.integers(0, 1000), min_size=1, max_size=6),
    cap=st.integers(1, 3000),
)
@settings(max_examples=200, deadline=None)
def test_rate_limit_properties(lags, cap):
    start = {("t", i): 7 * i for i in range(len(lags))}
    latest = {tp: s + lag for (tp, s), lag in zip(start.items(), lags, strict=True)}
    end = rate_limit(start, latest, cap)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    assert sum(end[tp] - start[tp] for tp in start) == min(cap, sum(lags))


def test_split_ranges_for_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 5, 5)]
    out = split_ranges(ranges, 10)
    assert [(r.partition, r.start, r.end) for r in out if r.partition == 1] == [(1, 10, 110)]
    zero = [r for r in out if r.partition == 0]
    assert len(zero) == 9 and zero[0].start == 0 and zero[-1].end == 900
    assert all(a.end == b.start for a, b in zip(zero, zero[1:], strict=False))
    assert max(r.size for r in zero) - min(r.size for r in zero) <= 1
    assert split_ranges(ranges, 2) == ranges  # already enough tasks


# --------------------------------------------------------------------------------------- the decoder


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=9000)),  # > 8 KiB: 3-byte length varints
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
        st.integers(-5, 10**6),
    ),
    min_size=1,
    max_size=30,
)


@given(
    batches=st.lists(records_strategy, min_size=1, max_size=30),
    codec=st.sampled_from([Compression.NONE, Compression.GZIP]),
    log_append=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_arrow_decoder_matches_reference_decoder(batches, codec, log_append):
    data = b""
    base = 0
    for recs in batches:
        b = bytearray(
            build_batch(
                [(k, v, tuple(h)) for k, v, h, _ in recs],
                timestamp=[T0 + t for *_, t in recs],
                base_offset=base,
                compression=codec,
                timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
                max_timestamp=T0 + 99 if log_append else None,
            )
        )
        data += bytes(b)
        base += len(recs)
    picked = list(iter_batches(data))
    expected = [row for pos, _ in picked for row in decode_batch_tuples(data, pos)[1]]
    lo, hi = 1, base - 1 if base > 2 else base
    got = batches_to_arrow(data, picked, "t", 3, lo, hi, include_headers=True)
    want = [r for r in expected if lo <= r[0] < hi]
    if not want:
        assert got is None
        return
    assert got.schema.equals(ARROW_SCHEMA_WITH_HEADERS)
    rows = got.to_pylist()
    assert [r["offset"] for r in rows] == [r[0] for r in want]
    assert [r["key"] for r in rows] == [r[2] for r in want]
    assert [r["value"] for r in rows] == [r[3] for r in want]
    assert [int(r["timestamp"].timestamp() * 1000) if r["timestamp"] else None for r in rows] == [
        r[1] for r in want
    ] or all(r[1] < 0 for r in want)
    assert {r["timestampType"] for r in rows} == {1 if log_append else 0}
    assert [None if not r["headers"] else [(h["key"], h["value"]) for h in r["headers"]] for r in rows] == [
        None if not r[4] else [(h.key, h.value) for h in r[4]] for r in want
    ]
    assert {r["partition"] for r in rows} == {3} and {r["topic"] for r in rows} == {"t"}


def test_arrow_decoder_vector_walk_many_small_batches():
    """Enough batches to take the vectorised walk; records of varied sizes and null keys."""
    data = b""
    for b in range(40):
        recs = [
            (None if (b + i) % 5 == 0 else b"k%d" % i, b"x" * ((b * 7 + i * 13) % 150)) for i in range(20)
        ]
        data += build_batch(recs, timestamp=T0 + b, base_offset=b * 20)
    picked = list(iter_batches(data))
    got = batches_to_arrow(data, picked, "t", 0, 0, 800)
    expected = [row for pos, _ in picked for row in decode_batch_tuples(data, pos)[1]]
    assert got.schema.equals(ARROW_SCHEMA)
    assert got.column("key").to_pylist() == [r[2] for r in expected]
    assert got.column("value").to_pylist() == [r[3] for r in expected]
    assert got.column("offset").to_pylist() == list(range(800))


# ------------------------------------------------------------------------ layouts and committed data


def _cluster_layout(root, hws):
    """Two brokers' dirs with replicas of t-0 (broker 1 behind) and an unmentioned new partition."""
    for broker, (hw, n) in hws.items():
        d = root / f"broker-{broker}"
        _fill(d / "t-0", n)
        OffsetCheckpoint(d / "replication-offset-checkpoint").write({("t", 0): hw})
    _fill(root / "broker-2" / "fresh-0", 5)  # no checkpoint entry yet


def test_cluster_layout_reads_below_the_best_high_watermark(tmp_path, caplog):
    _cluster_layout(tmp_path, {1: (20, 30), 2: (35, 40)})
    assert layout_of(tmp_path) == "cluster"
    found = locate_partitions(tmp_path)
    assert found[("t", 0)].dir.endswith("broker-2/t-0") and found[("t", 0)].high_watermark == 35
    (r,) = plan_ranges({"path": str(tmp_path), "subscribe": "t"})
    assert (r.start, r.end) == (0, 35)  # 40 written, 35 committed
    offsets = [o for b in read_range(tmp_path, r) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(35))
    with caplog.at_level(logging.WARNING, logger="kafkalite.spark"):
        (f,) = plan_ranges({"path": str(tmp_path), "subscribe": "fresh"})
    assert (f.start, f.end) == (0, 0) and "checkpoint_high_watermarks" in caplog.text
    with pytest.raises(OffsetOutOfRangeError, match=r"beyond the committed end 35"):
        plan_ranges({"path": str(tmp_path), "subscribe": "t", "endingOffsets": '{"t": {"0": 38}}'})


def test_broker_layout_and_standalone_layout(tmp_path):
    _fill(tmp_path / "b" / "t-0", 30)
    OffsetCheckpoint(tmp_path / "b" / "replication-offset-checkpoint").write({("t", 0): 12})
    assert layout_of(tmp_path / "b") == "broker"
    (r,) = plan_ranges({"path": str(tmp_path / "b"), "subscribe": "t"})
    assert r.end == 12
    _fill(tmp_path / "s" / "t-0", 30)
    assert layout_of(tmp_path / "s") == "standalone"
    (r,) = plan_ranges({"path": str(tmp_path / "s"), "subscribe": "t"})
    assert r.end == 30


def test_internal_topics_are_left_out_of_patterns(tmp_path):
    _fill(tmp_path / "__consumer_offsets-0", 3)
    _fill(tmp_path / "orders-0", 3)
    assert {r.topic for r in plan_ranges({"path": str(tmp_path), "subscribePattern": ".*"})} == {"orders"}
    (r,) = plan_ranges({"path": str(tmp_path), "subscribe": "__consumer_offsets"})  # by name: allowed
    assert r.end == 3


# ------------------------------------------------------------------------------------ time index


def test_starting_and_ending_by_timestamp(tmp_path):
    _fill(tmp_path / "t-0", 200, config={"segment.bytes": 1024, "index.interval.bytes": 64})
    _fill(tmp_path / "t-1", 50, t0=T0 + 1000)  # timestamps T0+1000 .. T0+1490
    opts = {"path": str(tmp_path), "subscribe": "t"}
    r0, r1 = plan_ranges({**opts, "startingTimestamp": str(T0 + 1005)})
    assert (r0.start, r0.end) == (101, 200)  # first timestamp >= T0+1005 is T0+1010 at offset 101
    assert (r1.start, r1.end) == (1, 50)
    r0, r1 = plan_ranges(
        {
            **opts,
            "startingOffsetsByTimestamp": f'{{"t": {{"0": {T0 + 500}}}}}',
            "endingOffsetsByTimestamp": f'{{"t": {{"0": {T0 + 600}, "1": {T0 + 1100}}}}}',
        }
    )
    assert (r0.start, r0.end, r1.start, r1.end) == (50, 60, 0, 10)
    with pytest.raises(OffsetOutOfRangeError, match="no committed record has a timestamp"):
        plan_ranges({**opts, "startingTimestamp": str(T0 + 10**6)})
    late = plan_ranges(
        {**opts, "startingTimestamp": str(T0 + 10**6), "startingOffsetsByTimestampStrategy": "latest"}
    )
    assert [(r.start, r.end) for r in late] == [(200, 200), (50, 50)]
    # ending by timestamp with no match: the end stays at latest
    r0, _ = plan_ranges({**opts, "endingTimestamp": str(T0 + 10**6)})
    assert r0.end == 200


# ------------------------------------------------------------------ compaction, gaps, data loss


def test_compacted_topic_with_offset_gaps_reads_every_surviving_record(tmp_path):
    """SPARK-23685: after compaction offsets are not consecutive; the reader must follow the batches."""
    from kafkalite.storage.cleaner import LogCleaner

    cfg = {"cleanup.policy": "compact", "segment.bytes": 600, "min.cleanable.dirty.ratio": 0.01}
    _fill(tmp_path / "c-0", 300, per_batch=3, config=cfg, keys=lambda j: b"key%d" % (j % 7))
    planned_before = plan_ranges({"path": str(tmp_path), "subscribe": "c", "minPartitions": "2"})
    log = Log.open(tmp_path / "c-0", cfg)
    try:
        log.roll()
        LogCleaner().clean(log)
        survivors = [r.offset for r in log.iter_records()]
    finally:
        log.close()
    assert len(survivors) < 300, "the cleaner should have removed superseded records"
    ranges = plan_ranges({"path": str(tmp_path), "subscribe": "c", "minPartitions": "3"})
    assert len(ranges) == 3
    got = sorted(o for r in ranges for b in read_range(tmp_path, r) for o in b.column("offset").to_pylist())
    assert got == survivors
    # Planned before the cleaner ran, read after: the removed offsets are simply absent.
    got = sorted(
        o for r in planned_before for b in read_range(tmp_path, r) for o in b.column("offset").to_pylist()
    )
    assert got == survivors


def test_fail_on_data_loss_when_retention_deletes_during_the_query(tmp_path, caplog):
    _fill(tmp_path / "r-0", 100, config={"segment.bytes": 400})
    (r,) = plan_ranges({"path": str(tmp_path), "subscribe": "r"})
    log = Log.open(tmp_path / "r-0", {"segment.bytes": 400})
    try:
        log.delete_records(60)
        log.delete_old_segments()
        start = log.log_start_offset
    finally:
        log.close()
    with pytest.raises(KafkaError, match=r"were deleted \(retention\).*failOnDataLoss=false"):
        list(read_range(tmp_path, r))
    with caplog.at_level(logging.WARNING, logger="kafkalite.spark"):
        got = [
            o
            for b in read_range(tmp_path, r, fail_on_data_loss=False)
            for o in b.column("offset").to_pylist()
        ]
    assert got == list(range(start, 100)) and start >= 50
    assert "deleted before they were read" in caplog.text


def test_wire_fetch_sizes_come_from_the_consumer_settings() -> None:
    from kafkalite.spark.options import FetchSettings, fetch_settings

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = parse_read_options({**base, "kafka.max.partition.fetch.bytes": "1", "kafka.fetch.min.bytes": "9",
                               "kafka.fetch.max.wait.ms": "0", "kafka.fetch.max.bytes": "4096"})  # fmt: skip
    assert fetch_settings(opts.kafka_params) == FetchSettings(1, 4096, 9, 0)
    assert fetch_settings(()) == FetchSettings(1 << 20, 50 << 20, 1, 500)  # Kafka's consumer defaults
    with pytest.raises(
        InvalidConfigError, match=r"'kafka.fetch.max.wait.ms' must be an integer >= 0, got 'x'"
    ):
        parse_read_options({**base, "kafka.fetch.max.wait.ms": "x"})


def test_a_new_leaders_offset_not_available_is_retried_not_fatal(monkeypatch) -> None:
    """Right after a failover the new leader answers ListOffsets with OFFSET_NOT_AVAILABLE until its
    high watermark catches up; Kafka's consumer retries it, and so must the driver's planning."""
    from kafkalite.errors import OffsetNotAvailableError
    from kafkalite.spark import wire

    monkeypatch.setattr(wire, "client", lambda bootstrap, params, fresh=False: object())
    calls = []

    def look(admin: object) -> str:
        calls.append(admin)
        if len(calls) < 3:
            raise OffsetNotAvailableError("ListOffsets t-0")
        return "planned"

    assert wire.retrying("b:9092", (), look, what="list offsets", tries=5, backoff_ms=1) == "planned"
    assert len(calls) == 3
