"""A real Spark standalone cluster (a master and two workers from PySpark's own Spark) writing through a
3-broker ``kafkalite cluster start``: executors on both workers produce with the wire-mode sink, the
rows are read back with confluent-kafka, and every Spark task says which executor ran it. Afterwards no
Spark JVM is left running."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")

from kafkalite.host.processes import start_cluster, stop_cluster  # noqa: E402
from kafkalite.spark.standalone import StandaloneCluster, executor_identity, spark_home  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROWS = 4000
TASKS = 4


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    d = tmp_path_factory.mktemp("brokers")
    state = start_cluster(d, 3)
    try:
        admin = cka.AdminClient({"bootstrap.servers": state["bootstrap_servers"], "log_level": 0})
        new = cka.NewTopic("standalone", 3, 3, config={"min.insync.replicas": "2"})
        for f in admin.create_topics([new]).values():
            f.result(30)
        yield state["bootstrap_servers"]
    finally:
        stop_cluster(d)


def test_pyspark_ships_a_spark_home_with_the_standalone_daemons():
    home = spark_home()
    assert (home / "bin" / "spark-class").exists() and any((home / "jars").glob("spark-core_*.jar"))


def test_executor_identity_outside_an_executor_is_the_driver():
    assert executor_identity() == "driver"


def test_standalone_cluster_writes_through_three_brokers(brokers, tmp_path):
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    if SparkContext._active_spark_context is not None:  # another module's local session
        SparkContext._active_spark_context.stop()
    with StandaloneCluster(workers=2, dir=tmp_path / "spark") as cluster:
        groups = [p.pid for p in cluster._procs]
        state = cluster.master_state()
        assert len(cluster.alive_workers(state)) == 2, state
        spark = cluster.session(app="kafkalite-standalone-test")
        try:
            assert spark.sparkContext.master == cluster.master_url
            who = F.udf(executor_identity).asNondeterministic()
            df = (
                spark.range(0, ROWS, numPartitions=TASKS)
                .withColumn("task", F.spark_partition_id())
                .withColumn("executor", who())
                .select(
                    F.col("id").cast("string").alias("key"),
                    F.col("id").cast("string").alias("value"),
                    F.array(
                        F.struct(
                            F.lit("task").alias("key"),
                            F.col("task").cast("string").cast("binary").alias("value"),
                        ),
                        F.struct(
                            F.lit("executor").alias("key"), F.col("executor").cast("binary").alias("value")
                        ),
                    ).alias("headers"),
                )
            )
            df.write.format("kafkalite").option("kafka.bootstrap.servers", brokers).option(
                "topic", "standalone"
            ).mode("append").save()
        finally:
            spark.stop()
    for pgid in groups:  # master, workers, executors and their Python workers: all gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)

    got = _consume(brokers, "standalone", ROWS)
    assert sorted(int(m.value()) for m in got) == list(range(ROWS)), "a row lost or doubled"
    ran_on: dict[int, set[str]] = {}
    for m in got:
        h = dict(m.headers())
        ran_on.setdefault(int(h["task"]), set()).add(h["executor"].decode())
    print("\nSpark task -> executor:", {t: sorted(e) for t, e in sorted(ran_on.items())})
    assert sorted(ran_on) == list(range(TASKS))
    assert all(len(e) == 1 and next(iter(e)).startswith("executor ") for e in ran_on.values()), ran_on
    executors = {next(iter(e)).split(" (")[0] for e in ran_on.values()}
    assert len(executors) == 2, f"both workers' executors should have run tasks: {ran_on}"
    assert {m.partition() for m in got} == {0, 1, 2}


def _consume(bootstrap: str, topic: str, n: int, timeout_s: float = 60.0) -> list:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "standalone-check", "log_level": 0,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        while (m := c.poll(1.0)) is not None:  # a duplicate would show up here
            if m.error() is None:
                got.append(m)
    finally:
        c.close()
    return got
