"""The "kafkalite" PySpark data source against logs written with the storage API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
storage = pytest.importorskip("kafkalite.storage")
if not hasattr(storage, "Log"):
    pytest.skip("kafkalite.storage.Log is not available yet", allow_module_level=True)

from kafkalite.errors import OffsetOutOfRangeError  # noqa: E402
from kafkalite.records import Compression, build_batch, build_control_batch  # noqa: E402
from kafkalite.spark.source import (  # noqa: E402
    ARROW_SCHEMA,
    OffsetRange,
    plan_ranges,
    read_range,
)
from kafkalite.storage import Log  # noqa: E402

T0 = 1_700_000_000_000

# topic -> record count per partition; "my-topic" checks the split on the last '-'.
LAYOUT = {"orders": [60, 85, 110], "my-topic": [7, 0], "other": [12]}


def _records(topic: str, partition: int, n: int) -> list[tuple]:
    """(offset, key, value, timestamp) expected for a partition; every 7th key is null."""
    return [
        (
            i,
            None if i % 7 == 3 else f"{topic}/{partition}/k{i}".encode(),
            f"v{i}".encode() * (1 + i % 4),
            T0 + i,
        )
        for i in range(n)
    ]


def _write_partition(logdir: Path, topic: str, partition: int, n: int) -> None:
    log = Log.open(logdir / f"{topic}-{partition}", {"segment.bytes": 2048})
    try:
        recs = _records(topic, partition, n)
        i, batch_no = 0, 0
        while i < n:
            chunk = recs[i : i + 1 + batch_no % 9]
            codec = Compression.GZIP if batch_no % 3 == 1 else Compression.NONE
            log.append(
                build_batch(
                    [(k, v) for _, k, v, _ in chunk],
                    timestamp=[ts for *_, ts in chunk],
                    compression=codec,
                )
            )
            i += len(chunk)
            batch_no += 1
    finally:
        log.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kafkalite-logs")
    for topic, counts in LAYOUT.items():
        for p, n in enumerate(counts):
            _write_partition(root, topic, p, n)
    # A committed transaction in "other-0": the marker takes an offset but is not a row.
    log = Log.open(root / "other-0")
    try:
        log.append(
            build_batch(
                [(b"tx", b"in-tx")],
                timestamp=T0 + 500,
                producer_id=9,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )
        )
        log.append(build_control_batch(True, 9, 0, 0, T0 + 501))
        log.append(build_batch([(b"after", b"tx")], timestamp=T0 + 502))
    finally:
        log.close()
    (root / "not-a-partition").mkdir()  # ignored: no trailing -<digits>
    (root / "cleaner-offset-checkpoint").write_text("0\n0\n")
    return root


def _read(spark, logdir, **options):
    reader = spark.read.format("kafkalite").option("path", str(logdir))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _counts(df) -> dict[tuple[str, int], int]:
    return {
        (r["topic"], r["partition"]): r["count"] for r in df.groupBy("topic", "partition").count().collect()
    }


# ---------------------------------------------------------------------------------------------- Spark


def test_the_driver_jvm_compiles_with_c1_only(spark):
    from kafkalite.spark import SHORT_LIVED_JVM

    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert SHORT_LIVED_JVM in options.split() and "-Duser.timezone=UTC" in options.split()


def test_a_new_driver_jvm_maps_the_class_sharing_archive():
    """make's set-up writes the archive; a session's new JVM then maps it instead of parsing Spark's jars
    (in a child interpreter: this one's JVM may have been started with other options)."""
    import subprocess
    import sys

    from kafkalite.spark.class_sharing import archive_path

    archive = archive_path()
    assert archive.is_file(), f"no {archive}: run python -m kafkalite.spark.class_sharing (make does)"
    probe = "\n".join([
        "from pathlib import Path",
        "from pyspark import SparkContext",
        "from kafkalite.spark import session",
        "s = session(app='kafkalite-tests-cds')",
        "maps = Path(f'/proc/{SparkContext._gateway.proc.pid}/maps').read_text()",
        f"print({str(archive)!r} in maps)",
        "print(s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))",
    ])  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    mapped, options = out.stdout.strip().splitlines()[-2:]
    assert f"-XX:SharedArchiveFile={archive}" in options.split()
    assert mapped == "True", "the driver JVM runs without the archive (made by another JVM or other jars?)"


def test_class_sharing_options_only_name_an_archive_that_exists(tmp_path, monkeypatch):
    from kafkalite.spark import class_sharing, short_lived_jvm_options

    monkeypatch.setattr(class_sharing, "archive_path", lambda: tmp_path / "spark.jsa")
    # a missing archive named on the command line would switch off the JDK's default archive too
    assert class_sharing.jvm_options() == "" and short_lived_jvm_options() == "-XX:TieredStopAtLevel=1"
    (tmp_path / "spark.jsa").write_bytes(b"")
    assert class_sharing.jvm_options().split() == [
        f"-XX:SharedArchiveFile={tmp_path / 'spark.jsa'}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"
    ]  # fmt: skip


def test_schema_matches_spark_kafka_source(spark, logdir):
    df = _read(spark, logdir, subscribe="orders")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]


def test_one_spark_partition_per_log_partition_and_counts(spark, logdir):
    df = _read(spark, logdir, subscribe="orders")
    assert df.rdd.getNumPartitions() == 3
    assert _counts(df) == {("orders", p): n for p, n in enumerate(LAYOUT["orders"])}


def test_rows_equal_the_log(spark, logdir):
    rows = (
        _read(spark, logdir, subscribe="orders")
        .where("partition = 1")
        .selectExpr("offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType")
        .orderBy("offset")
        .collect()
    )
    expected = _records("orders", 1, LAYOUT["orders"][1])
    assert [(r.offset, r.key, r.value, r.ts, r.timestampType) for r in rows] == [
        (o, k, v, ts, 0) for o, k, v, ts in expected
    ]


def test_control_records_are_skipped(spark, logdir):
    rows = _read(spark, logdir, subscribe="other").orderBy("offset").collect()
    n = LAYOUT["other"][0]
    assert [r.offset for r in rows] == [*range(n), n, n + 2]  # n + 1 is the commit marker
    assert rows[-1].value == b"tx"


def test_starting_and_ending_offsets_json(spark, logdir):
    df = _read(
        spark,
        logdir,
        subscribe="orders",
        startingOffsets=json.dumps({"orders": {"0": 10, "1": -2}}),
        endingOffsets=json.dumps({"orders": {"0": 20, "2": 30}}),
    )
    offsets = {}
    for r in df.select("partition", "offset").collect():
        offsets.setdefault(r.partition, []).append(r.offset)
    assert sorted(offsets[0]) == list(range(10, 20))
    assert sorted(offsets[1]) == list(range(LAYOUT["orders"][1]))  # -2: earliest, end defaults to latest
    assert sorted(offsets[2]) == list(range(30))  # start not named: earliest


def test_subscribe_several_topics(spark, logdir):
    counts = _counts(_read(spark, logdir, subscribe="orders, my-topic"))
    assert counts == {
        **{("orders", p): n for p, n in enumerate(LAYOUT["orders"])},
        ("my-topic", 0): LAYOUT["my-topic"][0],
    }  # my-topic-1 is empty: no rows, still a partition


def test_subscribe_pattern_matches_whole_names(spark, logdir):
    df = _read(spark, logdir, subscribePattern="my-.*")
    assert {r.topic for r in df.select("topic").distinct().collect()} == {"my-topic"}
    df = _read(spark, logdir, subscribePattern="o.*")
    assert {r.topic for r in df.select("topic").distinct().collect()} == {"orders", "other"}
    assert df.rdd.getNumPartitions() == 4


def test_assign(spark, logdir):
    df = _read(spark, logdir, assign=json.dumps({"orders": [2], "my-topic": [0]}))
    assert _counts(df) == {("orders", 2): LAYOUT["orders"][2], ("my-topic", 0): LAYOUT["my-topic"][0]}


def test_unknown_option_names_the_valid_ones(spark, logdir):
    with pytest.raises(
        Exception, match=r"unknown option.*startingoffset.*valid options are: path, subscribe"
    ):
        _read(spark, logdir, subscribe="orders", startingOffset="earliest").count()


def test_missing_path(spark, tmp_path):
    with pytest.raises(Exception, match="does not exist"):
        _read(spark, tmp_path / "nope", subscribe="orders").count()
    with pytest.raises(Exception, match="exactly one of option 'kafka.bootstrap.servers' .* option 'path'"):
        spark.read.format("kafkalite").option("subscribe", "orders").load().count()


def test_no_partitions_names_logdir_and_topics_found(spark, logdir):
    with pytest.raises(Exception, match=r"no partitions found for subscribe='nope'.*topic 'orders'"):
        _read(spark, logdir, subscribe="nope").count()


# ------------------------------------------------------------------------------ planning and reading


def test_plan_ranges(logdir):
    ranges = plan_ranges({"path": str(logdir), "subscribe": "my-topic,orders", "endingOffsets": "latest"})
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        ("my-topic", 0, 0, 7),
        ("my-topic", 1, 0, 0),
        ("orders", 0, 0, 60),
        ("orders", 1, 0, 85),
        ("orders", 2, 0, 110),
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "orders", "assign": '{"orders":[0]}'}, "exactly one of"),
        ({}, "exactly one of"),
        ({"subscribe": "orders", "startingOffsets": "latest"}, "not allowed in a batch query"),
        ({"subscribe": "orders", "endingOffsets": '{"orders":{"0":-2}}'}, "not allowed in a batch query"),
        ({"subscribe": "orders", "startingOffsets": '{"orders":{"0":61}}'}, r"valid range is \[0, 60\]"),
        (
            {"subscribe": "orders", "startingOffsets": '{"other":{"0":1}}'},
            "partitions not being read: other-0",
        ),
        ({"subscribe": "orders", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"assign": '{"orders":[7]}'}, "no directory orders-7"),
        ({"subscribePattern": "("}, "not a valid regex"),
        (
            {
                "subscribe": "orders",
                "startingOffsets": '{"orders":{"0":30}}',
                "endingOffsets": '{"orders":{"0":20}}',
            },
            "ending offset 20 is before starting offset 30",
        ),
    ],
)
def test_bad_options(logdir, options, message):
    from kafkalite.errors import KafkaError

    with pytest.raises(KafkaError, match=message):
        plan_ranges({"path": str(logdir), **options})


def test_read_range_yields_arrow_with_exact_schema(logdir):
    batches = list(read_range(logdir, OffsetRange("orders", 2, 5, 105), rows_per_batch=40))
    assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
    assert len(batches) > 1  # split into several Arrow batches
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(5, 105))
    first = batches[0].to_pylist()[0]
    assert first["partition"] == 2 and first["topic"] == "orders"
    assert first["timestamp"].timestamp() * 1000 == T0 + 5


def test_end_offset_is_fixed_at_planning(tmp_path):
    _write_partition(tmp_path, "live", 0, 20)
    (rng,) = plan_ranges({"path": str(tmp_path), "subscribe": "live"})
    log = Log.open(tmp_path / "live-0")
    try:
        log.append(build_batch([(None, b"late")] * 5, timestamp=T0 + 99))
    finally:
        log.close()
    rows = sum(b.num_rows for b in read_range(tmp_path, rng))
    assert (rng.end, rows) == (20, 20)


def test_fail_on_data_loss(tmp_path):
    _write_partition(tmp_path, "trimmed", 0, 40)
    log = Log.open(tmp_path / "trimmed-0", {"segment.bytes": 2048})
    try:
        log.delete_records(25)
        log_start = log.log_start_offset
    finally:
        log.close()
    options = {"path": str(tmp_path), "subscribe": "trimmed", "startingOffsets": '{"trimmed":{"0":3}}'}
    from kafkalite.errors import OffsetOutOfRangeError

    with pytest.raises(OffsetOutOfRangeError, match="below the log start offset.*failOnDataLoss=false"):
        plan_ranges(options)
    (rng,) = plan_ranges({**options, "failOnDataLoss": "false"})
    assert (rng.start, rng.end) == (log_start, 40)
    offsets = [o for b in read_range(tmp_path, rng) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(log_start, 40))


# ------------------------------------------------------------------- Spark: the rest of parity


def test_session_registers_the_source_and_is_shared(spark):
    from kafkalite.spark import session

    assert session(app="another") is spark  # one session per process: the active one is reused
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_include_headers(spark, tmp_path):
    log = Log.open(tmp_path / "h-0")
    try:
        log.append(
            build_batch([(b"k1", b"v1", (("trace", b"abc"), ("n", None))), (b"k2", b"v2")], timestamp=T0)
        )
    finally:
        log.close()
    df = _read(spark, tmp_path, subscribe="h", includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = df.orderBy("offset").collect()
    assert [(h.key, h.value) for h in rows[0].headers] == [("trace", b"abc"), ("n", None)]
    assert rows[1].headers is None  # as Spark's Kafka source: null when a record has no headers
    assert "headers" not in _read(spark, tmp_path, subscribe="h").columns


def test_min_partitions_splits_offset_ranges(spark, logdir):
    df = _read(spark, logdir, subscribe="orders", minPartitions="7")
    assert df.rdd.getNumPartitions() == 7
    assert _counts(df) == {("orders", p): n for p, n in enumerate(LAYOUT["orders"])}
    assert df.select("offset", "partition").distinct().count() == sum(LAYOUT["orders"])  # no overlap


def test_starting_timestamp_through_the_time_index(spark, logdir):
    df = _read(spark, logdir, subscribe="orders", startingTimestamp=str(T0 + 50))
    got = {
        r.partition: r.first
        for r in df.groupBy("partition").agg({"offset": "min"}).toDF("partition", "first").collect()
    }
    assert got == {0: 50, 1: 50, 2: 50}


def test_reads_committed_data_of_a_live_cluster(spark):
    """Cluster.dir: each partition from the replica with the highest checkpointed HW, up to that HW."""
    from kafkalite.host.cluster import Cluster

    with Cluster(brokers=3, seed=4) as cluster:
        cluster.create_topic("live", partitions=2, replication_factor=3)
        producer = cluster.producer(acks="all", linger_ms=0)
        futures = [producer.send("live", b"v%d" % i, key=b"k%d" % i) for i in range(120)]
        assert cluster.run_until(lambda: all(f.done() for f in futures), 30_000)
        cluster.checkpoint_high_watermarks()
        hws = {p: cluster.high_watermark("live", p) for p in range(2)}
        assert sum(hws.values()) == 120
        # Records the followers have not fetched yet are above the HW: written, not committed.
        leader = cluster.leader("live", 0)
        for other in cluster.replicas("live", 0):
            if other != leader:
                cluster.cut(leader, other)
        more = [producer.send("live", b"late", partition=0) for _ in range(5)]
        cluster.run_for(200)
        cluster.checkpoint_high_watermarks()
        assert cluster.replica(leader, "live", 0).log_end_offset > hws[0]
        df = _read(spark, cluster.dir, subscribe="live")
        assert _counts(df) == {("live", p): n for p, n in hws.items()}
        assert df.where("value = 'late'").count() == 0
        assert not all(f.done() for f in more)  # still waiting for acks=all


def test_reads_while_another_thread_appends(spark, tmp_path):
    """The planned end is fixed; a half-written batch at the tail is never read."""
    import threading
    import time

    _write_partition(tmp_path, "busy", 0, 500)
    stop = threading.Event()

    def writer():
        log = Log.open(tmp_path / "busy-0")
        try:
            i = 0
            while not stop.is_set():
                log.append(build_batch([(b"w", b"x" * 300)] * 50, timestamp=T0 + i))
                i += 1
                time.sleep(0.002)  # leave the GIL to the driver now and then
        finally:
            log.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        counts = []
        for _ in range(3):
            df = _read(spark, tmp_path, subscribe="busy")
            rows = df.select("offset").collect()
            offsets = sorted(r.offset for r in rows)
            assert offsets == list(range(len(offsets)))  # gap-free prefix, whole batches
            counts.append(len(offsets))
    finally:
        stop.set()
        t.join()
    assert counts == sorted(counts) and counts[-1] > 500


def test_fail_on_data_loss_through_spark(spark, tmp_path):
    _write_partition(tmp_path, "gone", 0, 60)
    log = Log.open(tmp_path / "gone-0", {"segment.bytes": 2048})
    try:
        log.delete_records(30)
    finally:
        log.close()
    opts = {"subscribe": "gone", "startingOffsets": '{"gone": {"0": 5}}'}
    with pytest.raises(Exception, match="below the log start offset 30"):
        _read(spark, tmp_path, **opts).count()
    assert _read(spark, tmp_path, failOnDataLoss="false", **opts).count() == 30


def test_records_deleted_after_planning_inside_a_batch_are_not_rows(tmp_path):
    """The log start moves into the middle of a batch between planning and reading: with
    failOnDataLoss=false the task goes on from the new log start, not from that batch's first record."""
    _write_partition(tmp_path, "mid", 0, 60)
    rng = OffsetRange("mid", 0, 0, 60)
    log = Log.open(tmp_path / "mid-0", {"segment.bytes": 2048})
    try:
        log.delete_records(33)  # batches of 1, 2, ... 9 records: 33 is inside the batch [28, 36)
    finally:
        log.close()
    with pytest.raises(OffsetOutOfRangeError, match=r"offsets \[0, 33\) were deleted"):
        list(read_range(tmp_path, rng))
    got = [
        o for b in read_range(tmp_path, rng, fail_on_data_loss=False) for o in b.column("offset").to_pylist()
    ]
    assert got == list(range(33, 60))
