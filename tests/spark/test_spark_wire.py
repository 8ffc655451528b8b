"""Wire mode of ``format("kafkalite")`` (``kafka.bootstrap.servers``) against three broker processes:
batch reads over PLAINTEXT and SASL_SSL equal what confluent-kafka produced, minPartitions, read_committed
with an aborted transaction, streaming stop/restart, failOnDataLoss after DeleteRecords, and a leader
killed between two fetches of a task and between two micro-batches."""

from __future__ import annotations

import json
import logging
import signal

import pytest

pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")

from kafkalite.errors import InvalidConfigError, OffsetOutOfRangeError  # noqa: E402
from kafkalite.host.admin_client import AdminClient  # noqa: E402
from kafkalite.host.processes import restart_broker, signal_broker  # noqa: E402
from kafkalite.spark import wire  # noqa: E402
from kafkalite.spark.options import parse_read_options  # noqa: E402
from kafkalite.spark.source import plan_ranges  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


def create_topic(bs: str, name: str, parts: int = 2) -> None:
    admin = cka.AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics(
        [cka.NewTopic(name, parts, 3, config={"min.insync.replicas": "2"})]
    ).values():
        f.result(30)


def produce(
    bs: str, topic: str, n: int, parts: int = 2, start: int = 0, conf: dict | None = None
) -> dict[tuple[int, int], tuple]:
    """``n`` records with acks=all, record i to partition i % parts; returns {(partition, offset): (key,
    value, headers)} from the delivery reports."""
    acked: dict[tuple[int, int], tuple] = {}
    errors: list[str] = []

    def report(err, msg) -> None:
        if err:
            errors.append(str(err))
        else:
            i = int(msg.key()[1:])  # a delivery report carries no headers: rebuild what was sent
            acked[(msg.partition(), msg.offset())] = (
                msg.key(),
                msg.value(),
                [("h", b"%d" % i)] if i % 3 == 0 else None,
            )

    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2, **QUIET, **(conf or {})})
    for i in range(start, start + n):
        headers = [("h", b"%d" % i)] if i % 3 == 0 else None
        p.produce(topic, b"%s-%d" % (topic.encode(), i), key=b"k%d" % i, partition=i % parts,
                  headers=headers, on_delivery=report)  # fmt: skip
        p.poll(0)
    assert p.flush(60) == 0 and errors == [], f"produce to {topic} failed: {errors}"
    return acked


def read(spark, bootstrap: str | None = None, **options):
    reader = spark.read.format("kafkalite")
    if bootstrap:
        reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def rows_of(df) -> dict[tuple[int, int], tuple]:
    out = {}
    for r in df.collect():
        headers = None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]
        assert (r.partition, r.offset) not in out, f"row {r.partition}/{r.offset} read twice"
        out[(r.partition, r.offset)] = (bytes(r.key), bytes(r.value), headers)
    return out


def leader_of(bs: str, topic: str, partition: int) -> int:
    with AdminClient(bs) as a:
        from kafkalite.protocol import TopicPartition

        return a.partition_leaders([topic])[TopicPartition(topic, partition)][0]


# --------------------------------------------------------------------------------------- options


def test_exactly_one_of_path_and_bootstrap_and_spark_refusals() -> None:
    for given, word in (({}, "neither"), ({"path": "/x", "kafka.bootstrap.servers": "h:1"}, "both")):
        with pytest.raises(InvalidConfigError, match=rf"'kafka.bootstrap.servers'.*'path'.*{word}"):
            parse_read_options({"subscribe": "t", **given})
    for name in ("auto.offset.reset", "key.deserializer", "value.deserializer", "enable.auto.commit",
                 "interceptor.classes"):  # fmt: skip
        with pytest.raises(InvalidConfigError, match=rf"'kafka\.{name}' is not supported"):
            parse_read_options({"subscribe": "t", "kafka.bootstrap.servers": "h:1", f"kafka.{name}": "x"})
    with pytest.raises(InvalidConfigError, match="kafka.security.protocol.*'path' read"):
        parse_read_options({"subscribe": "t", "path": "/x", "kafka.security.protocol": "SSL"})
    with pytest.raises(InvalidConfigError, match="kafka.bootstrap.servers.*HOST:PORT"):
        parse_read_options({"subscribe": "t", "kafka.bootstrap.servers": "nohost"})
    o = parse_read_options({"subscribe": "t", "kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SSL",
                            "kafka.group.id": "g", "kafka.isolation.level": "read_committed"})  # fmt: skip
    assert o.wire and o.path is None and o.read_committed
    assert dict(o.kafka_params) == {"security.protocol": "SSL", "group.id": "g"}


# ------------------------------------------------------------------------------------------ batch


def test_batch_read_equals_what_was_produced(spark, wire_cluster) -> None:
    bs = wire_cluster.bootstrap
    create_topic(bs, "wb")
    acked = produce(bs, "wb", 400)
    df = read(spark, bs, subscribe="wb", includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert rows_of(df) == {k: (key, value, h) for k, (key, value, h) in acked.items()}
    assert {r.topic for r in df.select("topic").distinct().collect()} == {"wb"}
    # endingOffsets and assign keep their meaning: partition 1 only, offsets [10, 50)
    part = read(
        spark,
        bs,
        assign='{"wb": [1]}',
        startingOffsets='{"wb": {"1": 10}}',
        endingOffsets='{"wb": {"1": 50}}',
    )
    assert sorted(r.offset for r in part.select("offset").collect()) == list(range(10, 50))
    # startingOffsetsByTimestamp: ListOffsets for a timestamp at the leader
    stamps = {
        r.offset: r.ms
        for r in df.where("partition = 0").selectExpr("offset", "unix_millis(timestamp) AS ms").collect()
    }
    ts = stamps[100]
    by_ts = read(spark, bs, assign='{"wb": [0]}', startingOffsetsByTimestamp=json.dumps({"wb": {"0": ts}}))
    assert min(r.offset for r in by_ts.collect()) == min(o for o, ms in stamps.items() if ms >= ts)
    # minPartitions cuts each partition's range across several tasks, with the same rows
    split = read(spark, bs, subscribe="wb", minPartitions="6", includeHeaders="true")
    assert split.rdd.getNumPartitions() == 6
    assert rows_of(split) == rows_of(df)


def test_sasl_ssl_batch_read(spark, wire_cluster) -> None:
    create_topic(wire_cluster.bootstrap, "ws")
    acked = produce(wire_cluster.bootstrap, "ws", 60)
    opts = {k: v for k, v in wire_cluster.sasl_options().items() if k != "kafka.bootstrap.servers"}
    df = read(spark, wire_cluster.sasl_bootstrap, subscribe="ws", includeHeaders="true", **opts)
    assert rows_of(df) == {k: (key, value, h) for k, (key, value, h) in acked.items()}
    bad = {**opts, **{k: v for k, v in wire_cluster.sasl_options(password="wrong").items() if "jaas" in k}}
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED|[Aa]uthentication"):
        read(spark, wire_cluster.sasl_bootstrap, subscribe="ws", **bad).count()


def test_read_committed_drops_an_aborted_transaction(spark, wire_cluster) -> None:
    bs = wire_cluster.bootstrap
    create_topic(bs, "wt", parts=1)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "wt-tx", **QUIET})
    p.init_transactions(30)
    for label, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(20):
            p.produce("wt", b"%s%d" % (label.encode(), i), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    committed = read(spark, bs, subscribe="wt", **{"kafka.isolation.level": "read_committed"})
    values = [bytes(r.value) for r in committed.orderBy("offset").collect()]
    assert values == [b"a%d" % i for i in range(20)] + [b"c%d" % i for i in range(20)]
    everything = sorted(bytes(r.value) for r in read(spark, bs, subscribe="wt").collect())
    assert len(everything) == 60 and b"b7" in everything  # markers are never rows; aborted ones are read


# ------------------------------------------------------------------------------------- streaming


def stream_once(spark, bs: str, topic: str, ckpt, got: list, **options) -> list[int]:
    """One availableNow run of a streaming query into ``got``; the sizes of its micro-batches."""
    reader = (
        spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    sizes: list[int] = []

    def sink(df, _epoch) -> None:
        rows = [(r.partition, r.offset, bytes(r.value)) for r in df.collect()]
        sizes.append(len(rows))
        got.extend(rows)

    q = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    if q.exception() is not None:
        raise q.exception()
    return [n for n in sizes if n]


def test_streaming_stop_restart_and_leader_killed_between_micro_batches(
    spark, wire_cluster, tmp_path
) -> None:
    bs = wire_cluster.bootstrap
    create_topic(bs, "wst")
    acked = produce(bs, "wst", 300)
    got: list = []
    opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "100"}
    assert stream_once(spark, bs, "wst", tmp_path / "ckpt", got, **opts) == [100, 100, 100]
    logged = sorted((tmp_path / "ckpt" / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    assert json.loads(logged[-1].read_text().splitlines()[-1]) == {"wst": {"0": 150, "1": 150}}
    acked.update(produce(bs, "wst", 150, start=300))
    victim = leader_of(bs, "wst", 0)
    signal_broker(wire_cluster.dir, victim, signal.SIGKILL)  # the restarted query must find the new leaders
    try:
        assert stream_once(spark, bs, "wst", tmp_path / "ckpt", got, **opts) == [100, 50]
    finally:
        restart_broker(wire_cluster.dir, victim)
    assert len(got) == len(set(got)) == 450, "rows lost or doubled across the restart"
    assert {(p, o): v for p, o, v in got} == {k: v[1] for k, v in acked.items()}


# ------------------------------------------------------------------------------------ data loss


def delete_records(bs: str, topic: str, partition: int, before: int) -> None:
    admin = cka.AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.delete_records([ck.TopicPartition(topic, partition, before)]).values():
        f.result(30)


def test_fail_on_data_loss_after_delete_records(spark, wire_cluster, tmp_path, caplog) -> None:
    bs = wire_cluster.bootstrap
    create_topic(bs, "wl", parts=1)
    produce(bs, "wl", 100, parts=1)
    opts = parse_read_options({"kafka.bootstrap.servers": bs, "subscribe": "wl"})
    (planned,) = plan_ranges(opts)
    assert (planned.start, planned.end) == (0, 100)
    delete_records(bs, "wl", 0, 40)  # after planning, before the task reads: the task finds it out
    with pytest.raises(OffsetOutOfRangeError, match=r"wl-0: offsets \[0, 40\) were deleted"):
        list(wire.read_range(planned, bs, ()))
    with caplog.at_level(logging.WARNING, logger="kafkalite.spark"):
        batches = list(wire.read_range(planned, bs, (), fail_on_data_loss=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(40, 100))
    assert "wl-0: offsets [0, 40) were deleted" in caplog.text
    # Through Spark: a streaming query has read up to 100; retention then takes [0, 130) of 150.
    got: list = []
    stream_once(spark, bs, "wl", tmp_path / "ckpt", got, startingOffsets='{"wl": {"0": 40}}')
    assert sorted(o for _, o, _ in got) == list(range(40, 100))
    produce(bs, "wl", 50, parts=1, start=100)
    delete_records(bs, "wl", 0, 130)
    with pytest.raises(Exception, match=r"wl-0: offsets \[100, 130\) were deleted"):
        stream_once(spark, bs, "wl", tmp_path / "ckpt", [], failOnDataLoss="true")
    got = []
    stream_once(spark, bs, "wl", tmp_path / "ckpt", got, failOnDataLoss="false")  # same checkpoint, goes on
    assert sorted(o for _, o, _ in got) == list(range(130, 150))
    # A batch query starting below the log start: refused, or from the log start with failOnDataLoss=false
    with pytest.raises(Exception, match=r"offset 50 for wl-0 is below the log start offset 130"):
        read(spark, bs, subscribe="wl", startingOffsets='{"wl": {"0": 50}}').count()
    lenient = read(spark, bs, subscribe="wl", startingOffsets='{"wl": {"0": 50}}', failOnDataLoss="false")
    assert sorted(r.offset for r in lenient.collect()) == list(range(130, 150))


# ------------------------------------------------------------------------------------- leader kill


def test_leader_killed_between_two_fetches_of_a_task(wire_cluster) -> None:
    bs = wire_cluster.bootstrap
    create_topic(bs, "wk", parts=1)
    acked = produce(bs, "wk", 2000, parts=1, conf={"batch.num.messages": 50})
    (planned,) = plan_ranges(parse_read_options({"kafka.bootstrap.servers": bs, "subscribe": "wk"}))
    victim = leader_of(bs, "wk", 0)
    fetches: list[int] = []

    def between_fetches(offset: int) -> None:
        fetches.append(offset)
        if len(fetches) == 3:
            signal_broker(wire_cluster.dir, victim, signal.SIGKILL)

    try:
        batches = list(wire.read_range(planned, bs, (), fetch_max_bytes=4096, on_fetch=between_fetches))
    finally:
        restart_broker(wire_cluster.dir, victim)
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    values = [bytes(v) for b in batches for v in b.column("value").to_pylist()]
    assert len(fetches) > 3 and fetches[2] > 0, "the kill did not land between fetches"
    assert offsets == list(range(2000)), "rows lost or doubled across the leader change"
    assert values == [acked[(0, o)][1] for o in offsets]
