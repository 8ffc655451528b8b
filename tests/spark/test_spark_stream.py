"""Streaming reads (offsets in the checkpoint, availableNow, maxOffsetsPerTrigger, restart), the sink
(batch and streaming), and a small run of ``kafkalite bench spark``; one SparkSession for the module."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from kafkalite.client.partitioner import partition_for_key  # noqa: E402
from kafkalite.errors import KafkaError, OffsetOutOfRangeError  # noqa: E402
from kafkalite.records import build_batch  # noqa: E402
from kafkalite.spark.sink import KafkaliteStreamWriter, StagedBatches  # noqa: E402
from kafkalite.spark.stream import KafkaliteStreamReader  # noqa: E402
from kafkalite.storage import Log  # noqa: E402

T0 = 1_700_000_000_000


def _append(root, topic, p, start, n, per_batch=25):
    log = Log.open(root / f"{topic}-{p}")
    try:
        for i in range(start, start + n, per_batch):
            ids = range(i, min(start + n, i + per_batch))
            log.append(
                build_batch(
                    [(b"k%d" % j, b"%s-%d-%d" % (topic.encode(), p, j)) for j in ids], timestamp=T0 + i
                )
            )
    finally:
        log.close()


def _stream(spark, path, **options):
    reader = spark.readStream.format("kafkalite").option("path", str(path))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _batch_sizes(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


# ------------------------------------------------------------------------------------------- source


def test_available_now_with_max_offsets_per_trigger(spark, tmp_path):
    for p, n in enumerate((300, 100)):
        _append(tmp_path / "in", "s", p, 0, n)
    df = _stream(
        spark, tmp_path / "in", subscribe="s", startingOffsets="earliest", maxOffsetsPerTrigger="120"
    )
    q = (
        df.writeStream.format("memory")
        .queryName("avail_now")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert _batch_sizes(q) == [120, 120, 120, 40]  # admission control, then it stops by itself
    rows = spark.table("avail_now").select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, i) for i in range(300)] + [
        (1, i) for i in range(100)
    ]
    # The checkpoint holds Spark's Kafka-style per-partition offsets JSON.
    logged = [f for f in (tmp_path / "ckpt" / "offsets").iterdir() if f.name.isdigit()]
    last = max(logged, key=lambda f: int(f.name))
    assert json.loads(last.read_text().splitlines()[-1]) == {"s": {"0": 300, "1": 100}}


def test_restart_from_checkpoint_loses_nothing_and_counts_nothing_twice(spark, tmp_path):
    """Kill the query mid-way (a micro-batch fails after its offsets were logged), add data, restart."""
    _append(tmp_path / "in", "r", 0, 0, 250)
    _append(tmp_path / "in", "r", 1, 0, 150)
    seen: dict[int, list[tuple[int, int]]] = {}
    attempts: list[int] = []

    def sink(df, batch_id):
        rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
        attempts.append(batch_id)
        if batch_id == 2 and attempts.count(2) == 1:
            seen[-1] = rows  # what the failed attempt saw
            raise RuntimeError("killed mid-way")
        seen[batch_id] = rows  # idempotent per batch id, as foreachBatch sinks should be

    def run():
        df = _stream(
            spark, tmp_path / "in", subscribe="r", startingOffsets="earliest", maxOffsetsPerTrigger="100"
        )
        q = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(120)
        except Exception as e:  # noqa: BLE001 - the injected failure
            assert "killed mid-way" in str(e)
            return False
        return True

    assert run() is False
    assert sorted(seen) == [-1, 0, 1]
    _append(tmp_path / "in", "r", 0, 250, 60)  # more data arrives while the query is down
    assert run() is True
    assert seen[2] == seen[-1]  # the replayed batch read exactly the same offsets
    del seen[-1]
    everything = [x for rows in seen.values() for x in rows]
    assert len(everything) == len(set(everything))  # nothing twice
    assert sorted(everything) == [(0, i) for i in range(310)] + [(1, i) for i in range(150)]  # nothing lost


def test_streaming_from_a_live_cluster_resumes_at_the_next_committed_offset(spark, tmp_path):
    from kafkalite.host.cluster import Cluster

    with Cluster(brokers=3, seed=11) as cluster:
        cluster.create_topic("events", partitions=2, replication_factor=3)
        producer = cluster.producer(acks="all", linger_ms=0)

        def produce(lo, hi):
            fs = [producer.send("events", b"e%d" % i, key=b"k%d" % i) for i in range(lo, hi)]
            assert cluster.run_until(lambda: all(f.done() for f in fs), 30_000)
            cluster.checkpoint_high_watermarks()

        got: list[bytes] = []

        def run():
            q = (
                _stream(spark, cluster.dir, subscribe="events", startingOffsets="earliest")
                .writeStream.foreachBatch(
                    lambda df, _id: got.extend(r.value for r in df.select("value").collect())
                )
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination(120)

        produce(0, 80)
        run()
        assert len(got) == 80
        produce(80, 130)
        run()  # same checkpoint: only what was committed since
        assert sorted(got) == sorted(b"e%d" % i for i in range(130))


def test_streaming_rejects_batch_only_options(spark, tmp_path):
    _append(tmp_path, "b", 0, 0, 5)
    with pytest.raises(Exception, match="for batch queries only"):
        _stream(spark, tmp_path, subscribe="b", endingOffsets="latest").writeStream.format(
            "memory"
        ).queryName("never").start().awaitTermination(30)


def test_stream_reader_data_loss_and_new_partitions(tmp_path, caplog):
    _append(tmp_path, "d", 0, 0, 100)
    reader = KafkaliteStreamReader({"path": str(tmp_path), "subscribe": "d", "startingOffsets": "earliest"})
    start = reader.initialOffset()
    assert start == {"d": {"0": 0}}
    log = Log.open(tmp_path / "d-0")
    try:
        log.delete_records(40)
    finally:
        log.close()
    end = {"d": {"0": 100}}
    with pytest.raises(OffsetOutOfRangeError, match=r"offsets \[0, 40\) were deleted.*failOnDataLoss=false"):
        reader.partitions(start, end)
    lenient = KafkaliteStreamReader({"path": str(tmp_path), "subscribe": "d", "failOnDataLoss": "false"})
    with caplog.at_level(logging.WARNING, logger="kafkalite.spark"):
        (part,) = lenient.partitions(start, end)
    assert (part.range.start, part.range.end) == (40, 100) and "deleted" in caplog.text
    # A partition created after the query started is read from its earliest offset.
    _append(tmp_path, "d", 1, 0, 30)
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    assert reader.latestOffset(end, ReadAllAvailable()) == {"d": {"0": 100, "1": 30}}
    # A partition that vanished is data loss.
    import shutil

    shutil.rmtree(tmp_path / "d-1")
    with pytest.raises(OffsetOutOfRangeError, match="d-1 disappeared"):
        reader.latestOffset({"d": {"0": 100, "1": 30}}, ReadAllAvailable())


# --------------------------------------------------------------------------------------------- sink


def _read_back(spark, path, topic):
    return spark.read.format("kafkalite").option("path", str(path)).option("subscribe", topic).load()


def test_batch_sink_round_trip_and_partitioning(spark, tmp_path):
    rows = [(f"key{i % 13}" if i % 5 else None, f"value-{i}") for i in range(400)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)  # 3 tasks write
    df.write.format("kafkalite").option("path", str(tmp_path)).option("topic", "out").option(
        "partitions", "4"
    ).mode("append").save()
    back = _read_back(spark, tmp_path, "out").collect()
    assert sorted(r.value.decode() for r in back) == sorted(v for _, v in rows)
    for r in back:
        if r.key is not None:  # Kafka's default partitioner: murmur2 of the key
            assert r.partition == partition_for_key(r.key, 4)
    null_parts = [r.partition for r in back if r.key is None]
    assert len(set(null_parts)) == 4  # round-robin spreads null keys
    for p in range(4):  # every partition's offsets are dense: appended once, in one order
        offs = sorted(r.offset for r in back if r.partition == p)
        assert offs == list(range(len(offs)))
    assert not (tmp_path / ".kafkalite-staging").exists() or not any(
        (tmp_path / ".kafkalite-staging").iterdir()
    )
    # Appending again goes after what is there; the topic keeps its 4 partitions.
    spark.createDataFrame([("again", "x")], "key string, value string").write.format("kafkalite").option(
        "path", str(tmp_path)
    ).option("topic", "out").mode("append").save()
    assert _read_back(spark, tmp_path, "out").count() == 401


def test_sink_topic_and_partition_columns_and_headers(spark, tmp_path):
    df = spark.createDataFrame(
        [("a", 0, b"k", b"v1"), ("b", 1, None, b"v2"), ("a", 0, b"k", b"v3")],
        "topic string, partition int, key binary, value binary",
    ).selectExpr(
        "topic", "partition", "key", "value", "array(named_struct('key', 'h', 'value', key)) AS headers"
    )
    df.write.format("kafkalite").option("path", str(tmp_path)).option("partitions", "2").mode("append").save()
    a = _read_back(spark, tmp_path, "a").orderBy("offset").collect()
    assert [(r.partition, r.value) for r in a] == [(0, b"v1"), (0, b"v3")]
    b = (
        spark.read.format("kafkalite")
        .option("path", str(tmp_path))
        .option("subscribe", "b")
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    assert [(r.partition, r.value, [(h.key, h.value) for h in r.headers]) for r in b] == [
        (1, b"v2", [("h", None)])
    ]
    # the topic option overrides a topic column
    df.write.format("kafkalite").option("path", str(tmp_path)).option("topic", "c").option(
        "partitions", "2"
    ).mode("append").save()
    assert _read_back(spark, tmp_path, "c").count() == 3


@pytest.mark.parametrize(
    ("frame", "options", "mode", "message"),
    [
        ("SELECT 'x' AS key", {"topic": "t"}, "append", "needs a 'value' column"),
        ("SELECT 'v' AS value", {}, "append", "needs option 'topic' or a 'topic' column"),
        ("SELECT 'v' AS value, 1.5 AS partition", {"topic": "t"}, "append", "'partition' must be integer"),
        ("SELECT 'v' AS value", {"topic": "t"}, "overwrite", "overwrite' is not supported"),
        (
            "SELECT 'v' AS value, 7 AS partition",
            {"topic": "t"},
            "append",
            "partition 7 of topic 't' does not exist",
        ),
    ],
)
def test_sink_errors(spark, tmp_path, frame, options, mode, message):
    writer = spark.sql(frame).write.format("kafkalite").option("path", str(tmp_path)).mode(mode)
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=message):
        writer.save()
    assert not list(tmp_path.glob("t-*"))  # nothing appended


def test_sink_refuses_a_cluster_directory(spark, tmp_path):
    (tmp_path / "broker-1").mkdir()
    with pytest.raises(Exception, match="standalone log directories only"):
        spark.sql("SELECT 'v' AS value").write.format("kafkalite").option("path", str(tmp_path)).option(
            "topic", "t"
        ).mode("append").save()


def test_streaming_sink_copies_a_topic(spark, tmp_path):
    _append(tmp_path / "in", "src", 0, 0, 200)
    _append(tmp_path / "in", "src", 1, 0, 80)
    src = _stream(
        spark, tmp_path / "in", subscribe="src", startingOffsets="earliest", maxOffsetsPerTrigger="100"
    )
    q = (
        src.selectExpr("key", "value", "timestamp")
        .writeStream.format("kafkalite")
        .option("path", str(tmp_path / "out"))
        .option("topic", "copy")
        .option("partitions", "2")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    got = _read_back(spark, tmp_path / "out", "copy").collect()
    assert sorted(r.value for r in got) == sorted(
        [b"src-0-%d" % i for i in range(200)] + [b"src-1-%d" % i for i in range(80)]
    )
    assert {r.timestamp.year for r in got} == {2023}  # the timestamp column set the record timestamps
    state = list((tmp_path / "out" / ".kafkalite-sink").glob("*.json"))
    assert len(state) == 1 and json.loads(state[0].read_text())["done"] is True


def _staged(tmp_path, writer, batch_id_task, values):
    """Stage one task's records the way a Spark task would, without Spark."""
    import pyarrow as pa

    from kafkalite.spark.sink import _Stager

    stager = _Stager(writer.opts, writer.job, batch_id_task, 0)
    stager.add_arrow(
        pa.RecordBatch.from_pydict({"value": values}, schema=pa.schema([("value", pa.binary())]))
    )
    return stager.finish()


def test_streaming_sink_commit_is_idempotent_per_micro_batch(tmp_path):
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("value", BinaryType())])
    opts = {"path": str(tmp_path), "topic": "t", "checkpointLocation": "/ckpt/q1"}
    writer = KafkaliteStreamWriter(opts, schema, False)

    def count():
        log = Log.open(tmp_path / "t-0", read_only=True)
        try:
            return log.log_end_offset
        finally:
            log.close()

    writer.commit([_staged(tmp_path, writer, 0, [b"a", b"b"])], 0)
    writer.commit([_staged(tmp_path, writer, 0, [b"a", b"b"])], 0)  # replay of a done batch: skipped
    assert count() == 2
    # A crash half-way through batch 1: intent recorded, records appended, never marked done.
    state_file = next((tmp_path / ".kafkalite-sink").glob("*.json"))
    state_file.write_text(json.dumps({"batch": 1, "done": False, "ends": {"t-0": 2}}))
    log = Log.open(tmp_path / "t-0")
    log.append(build_batch([(None, b"half")], timestamp=T0))
    log.close()
    writer.commit([_staged(tmp_path, writer, 0, [b"c"])], 1)  # the replay undoes the half append
    log = Log.open(tmp_path / "t-0", read_only=True)
    try:
        assert [r.value for r in log.iter_records()] == [b"a", b"b", b"c"]
    finally:
        log.close()
    other = KafkaliteStreamWriter({**opts, "checkpointLocation": "/ckpt/q2"}, schema, False)
    other.commit([_staged(tmp_path, other, 0, [b"d"])], 0)  # another query has its own batch ids
    assert count() == 4
    assert isinstance(_staged(tmp_path, other, 3, [b"e"]), StagedBatches)


# ---------------------------------------------------------------------------------------- benchmark


def test_bench_spark_small_run(spark):
    from kafkalite.harness.bench.spark import run_spark_bench

    result = run_spark_bench(records=20_000, repeats=1, partitions=(1, 2))
    assert [c.partitions for c in result.kafkalite] == [1, 2]
    assert all(c.rows == 20_000 and c.rows_per_s > 0 for c in result.kafkalite)
    assert result.parquet.rows_per_s > 0 and result.scaling(2) > 0
    # the topics went through a broker; path mode read its log dir, the same topics wire mode reads
    assert result.source.startswith("the broker's log dir")
    table = result.table()
    assert "2 partitions / 1 partition" in table and "Parquet" in table
    assert "path mode / Python-source ceiling, 2 partition(s)" in table
    if result.wire:  # the source reads through the brokers: 1 and 2 tasks, compared with path mode
        assert [c.partitions for c in result.wire] == [1, 2] and all(c.rows_per_s > 0 for c in result.wire)
        assert "wire mode / path mode, 2 partition(s)" in table
    else:  # not yet: the row is left out, and the table says why
        assert any(n.startswith("wire mode skipped") and "kafka.bootstrap.servers" in n for n in result.notes)
    doc = json.loads(result.to_json())
    assert doc["records"] == 20_000 and doc["targets"]["wire_vs_path"] == 0.6


def test_cli_has_bench_spark():
    from click.testing import CliRunner

    from kafkalite.cli import kafkalite

    out = CliRunner().invoke(kafkalite, ["bench", "spark", "--help"])
    assert out.exit_code == 0 and "Parquet" in out.output


def test_errors_are_kafka_errors():
    assert issubclass(OffsetOutOfRangeError, KafkaError)


def test_available_now_target_is_fixed_at_query_start(tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    _append(tmp_path, "a", 0, 0, 50)
    reader = KafkaliteStreamReader(
        {"path": str(tmp_path), "subscribe": "a", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "30"}
    )
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    _append(tmp_path, "a", 0, 50, 20)  # arrives after the query started
    _append(tmp_path, "a", 1, 0, 10)  # a new partition, too
    first = reader.latestOffset(start, ReadMaxRows(30))
    assert first == {"a": {"0": 30, "1": 0}}
    assert reader.latestOffset(first, ReadAllAvailable()) == {"a": {"0": 50, "1": 0}}
    assert reader.reportLatestOffset() == {"a": {"0": 70, "1": 10}}
    assert [(p.range.start, p.range.end) for p in reader.partitions(start, first)] == [(0, 30)]
