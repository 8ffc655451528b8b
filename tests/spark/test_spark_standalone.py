"""A real Spark standalone cluster (a master and two workers from PySpark's own Spark) against the 3-broker
``kafkalite cluster start`` of ``conftest.wire_cluster``, through ``kafka.bootstrap.servers``: executors
on both workers read the partitions (each row says which executor read it) and write with the wire-mode
sink, and a leader SIGKILLed while both tasks are fetching moves them to the new leader with no row
lost or doubled. One standalone cluster serves the module; afterwards no Spark JVM is left running."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")

from kafkalite.common.procfs import live_group_members  # noqa: E402
from kafkalite.host.admin_client import AdminClient  # noqa: E402
from kafkalite.host.processes import restart_broker, signal_broker  # noqa: E402
from kafkalite.spark import wire  # noqa: E402
from kafkalite.spark.source import OffsetRange  # noqa: E402
from kafkalite.spark.standalone import (  # noqa: E402
    StandaloneCluster,
    executor_identity,
    spark_home,
    with_executor,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}
ROWS = 4000
TASKS = 4


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """The module's standalone cluster; on teardown every daemon's process group must be gone."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # another module's local session
        SparkContext._active_spark_context.stop()
    cluster = StandaloneCluster(workers=2, dir=tmp_path_factory.mktemp("spark")).start()
    groups = [p.pid for p in cluster._procs]
    try:
        yield cluster
    finally:
        cluster.stop()
    # master, workers, executors and their Python workers: all gone (exited; init may not have reaped
    # every zombie yet, and stop() does not wait for that)
    for pgid in groups:
        assert live_group_members(pgid) == [], f"process group {pgid} outlived stop()"


@pytest.fixture(scope="module")
def spark(standalone):
    # small Arrow batches into mapInArrow, so a task's rows reach it while the task is still fetching
    s = standalone.session(app="kafkalite-standalone-test",
                           conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "10"})  # fmt: skip
    yield s
    s.stop()


def create_topic(bs: str, name: str, parts: int = 3, assignment: list[list[int]] | None = None) -> None:
    admin = cka.AdminClient({"bootstrap.servers": bs, **QUIET})
    config = {"min.insync.replicas": "2"}
    new = (
        cka.NewTopic(name, -1, -1, replica_assignment=assignment, config=config)
        if assignment
        else cka.NewTopic(name, parts, 3, config=config)
    )
    for f in admin.create_topics([new]).values():
        f.result(30)


def produce(
    bs: str, topic: str, n: int, parts: int, conf: dict | None = None, pad: int = 0
) -> dict[tuple[int, int], bytes]:
    """``n`` records with acks=all, record i to partition i % parts, values padded to ``pad`` bytes;
    {(partition, offset): value}."""
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []

    def report(err, msg) -> None:
        if err:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()

    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2, **QUIET, **(conf or {})})
    for i in range(n):
        p.produce(topic, (b"%s-%d" % (topic.encode(), i)).ljust(pad, b"."), key=b"k%d" % i, partition=i % parts,
                  on_delivery=report)  # fmt: skip
        p.poll(0)
    assert p.flush(60) == 0 and errors == [] and len(acked) == n, f"produce to {topic} failed: {errors}"
    return acked


def leaders(bs: str, topic: str) -> dict[int, int]:
    with AdminClient(bs) as a:
        return {tp.partition: leader for tp, (leader, _) in a.partition_leaders([topic]).items()}


def read_with_executor(spark, bs: str, topic: str, marks: Path | None = None, **options):
    """The topic read through the brokers, tagged by ``with_executor`` (and its ``marks``)."""
    reader = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return with_executor(reader.load().select("partition", "offset", "value"), marks)


def test_pyspark_ships_a_spark_home_with_the_standalone_daemons():
    home = spark_home()
    assert (home / "bin" / "spark-class").exists() and any((home / "jars").glob("spark-core_*.jar"))


def test_every_cluster_jvm_compiles_with_c1_only(standalone, spark):
    import psutil

    from kafkalite.spark import SHORT_LIVED_JVM

    groups = {p.pid for p in standalone._procs}
    jvms = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.pid) in groups and proc.info["name"] == "java":
                jvms.append(proc.info["cmdline"])
    # master, two workers, and the application's two executors
    assert len(jvms) == 5, jvms
    assert all(SHORT_LIVED_JVM in cmd for cmd in jvms), jvms


def test_every_cluster_jvm_maps_the_class_sharing_archive(standalone, spark):
    from kafkalite.spark.class_sharing import archive_path

    archive = str(archive_path())
    mapped = []
    for pgid in {p.pid for p in standalone._procs}:
        for pid in live_group_members(pgid):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/exe").resolve().name == "java":
                    mapped.append(archive in Path(f"/proc/{pid}/maps").read_text())
    assert mapped == [True] * 5, mapped  # master, two workers, two executors


def test_executor_identity_outside_an_executor_is_the_driver():
    assert executor_identity() == "driver"


def test_standalone_cluster_reads_three_brokers_on_both_executors(standalone, spark, wire_cluster):
    bs = wire_cluster.bootstrap
    state = standalone.master_state()
    assert len(standalone.alive_workers(state)) == 2, state
    assert spark.sparkContext.master == standalone.master_url
    create_topic(bs, "sa-read", parts=TASKS)
    acked = produce(bs, "sa-read", ROWS, TASKS)

    rows = read_with_executor(spark, bs, "sa-read").collect()
    got = {}
    for r in rows:
        assert (r.partition, r.offset) not in got, f"row {r.partition}/{r.offset} read twice"
        got[(r.partition, r.offset)] = (bytes(r.value), r.executor)
    assert {k: v for k, (v, _) in got.items()} == acked, "a row lost, doubled or changed"
    read_by: dict[int, set[str]] = {}
    for (part, _), (_, executor) in got.items():
        read_by.setdefault(part, set()).add(executor)
    print("\npartition -> executor that read it:", {p: sorted(e) for p, e in sorted(read_by.items())})
    assert sorted(read_by) == list(range(TASKS))
    assert all(len(e) == 1 and next(iter(e)).startswith("executor ") for e in read_by.values()), read_by
    executors = {next(iter(e)).split(" (")[0] for e in read_by.values()}
    assert len(executors) == 2, f"both workers' executors should have read partitions: {read_by}"


def test_leader_killed_while_both_executors_fetch(spark, wire_cluster, tmp_path):
    """One partition, read as two tasks (minPartitions=2), one per executor. Each Fetch brings one batch
    (the partition limit is 1 byte) and the broker holds every Fetch ``fetch.max.wait.ms`` (``fetch.min.bytes``
    is more than the limit lets through), so the tasks read for tens of seconds. The leader is SIGKILLed
    once both tasks have passed rows on; both must go on at the new leader, with exactly the produced
    rows at the end."""
    bs, rows, tasks, wait_ms = wire_cluster.bootstrap, 6000, 2, 200
    create_topic(bs, "sa-kill", parts=1)
    # 1 KiB values: a task's Python worker flushes its output every 64 KiB, so rows reach mapInArrow
    # (and the marks) a few fetches after they were read
    acked = produce(bs, "sa-kill", rows, 1, conf={"batch.num.messages": 10}, pad=1024)
    victim = leaders(bs, "sa-kill")[0]
    # the most records one Fetch can bring: one batch (a 1-byte limit still returns the first batch whole)
    per_fetch = max(
        b.num_rows for b in wire.read_range(OffsetRange("sa-kill", 0, 0, rows), bs, (), fetch_max_bytes=1)
    )
    warm = read_with_executor(
        spark, bs, "sa-kill", minPartitions=str(tasks), endingOffsets='{"sa-kill": {"0": 20}}'
    )
    assert warm.count() == 20  # the executors' Python workers are up: the query below starts at once
    marks = tmp_path / "marks"
    marks.mkdir()
    df = read_with_executor(spark, bs, "sa-kill", marks, minPartitions=str(tasks), **{
        "kafka.max.partition.fetch.bytes": "1", "kafka.fetch.min.bytes": str(1 << 20),
        "kafka.fetch.max.wait.ms": str(wait_ms)})  # fmt: skip
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["rows"] = df.collect()
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            result["error"] = e

    def marked(t: int) -> list[tuple[float, int]]:  # (time, rows task t had passed on)
        f = marks / str(t)
        lines = f.read_text().split("\n") if f.exists() else []
        return [(float(ln.split()[0]), int(ln.split()[1])) for ln in lines if ln]

    started = time.time()
    query = threading.Thread(target=run, daemon=True)
    query.start()
    try:
        deadline = time.monotonic() + 240
        while not all(marked(t) and marked(t)[-1][1] >= 50 for t in range(tasks)):
            assert query.is_alive(), f"the query ended before the kill: {result}"
            assert time.monotonic() < deadline, "the tasks did not start reading in 240 s"
            time.sleep(0.1)
        killed_at = time.time()
        signal_broker(wire_cluster.dir, victim, signal.SIGKILL)
        query.join(600)
        assert not query.is_alive(), "the query did not finish in 600 s after the kill"
        assert "error" not in result, f"the query failed: {result.get('error')}"
        after = leaders(bs, "sa-kill")[0]
    finally:
        restart_broker(wire_cluster.dir, victim)

    # The kill landed mid-read: each task had passed rows on before it and more after it, and by then
    # no task could have fetched all its rows (the broker holds each Fetch wait_ms), so it fetched after.
    for t in range(tasks):
        times = [at for at, _ in marked(t)]
        assert min(times) < killed_at < max(times), f"task {t}: no rows on both sides of the kill"
    could_have = int((killed_at - started) * 1000 / wait_ms + 1) * per_fetch
    assert could_have < rows // tasks, f"the kill came too late to be mid-read ({could_have} rows)"
    assert after not in (victim, -1), f"partition 0 is still led by {after}"

    got: dict[tuple[int, int], bytes] = {}
    read_by: set[str] = set()
    for r in result["rows"]:  # type: ignore[union-attr]
        assert (r.partition, r.offset) not in got, f"row {r.partition}/{r.offset} read twice"
        got[(r.partition, r.offset)] = bytes(r.value)
        read_by.add(r.executor)
    assert got == acked, f"{len(set(acked) - set(got))} rows lost across the leader change"
    print(f"\nleader {victim} SIGKILLed {killed_at - started:.1f}s into the query; leader now {after};",
          f"read by {sorted(read_by)}")  # fmt: skip
    assert len({e.split(" (")[0] for e in read_by}) == tasks, f"one task per executor: {read_by}"


def test_standalone_cluster_writes_through_three_brokers(spark, wire_cluster):
    from pyspark.sql import functions as F

    bs = wire_cluster.bootstrap
    create_topic(bs, "standalone", parts=3)
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
                F.struct(F.lit("executor").alias("key"), F.col("executor").cast("binary").alias("value")),
            ).alias("headers"),
        )
    )
    df.write.format("kafkalite").option("kafka.bootstrap.servers", bs).option("topic", "standalone").mode(
        "append"
    ).save()

    got = _consume(bs, "standalone", ROWS)
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


def test_master_state_is_none_while_the_web_ui_answers_without_json(tmp_path):
    """A master's web UI that is still starting can answer 200 with no body: not up yet, not an error."""
    import http.server

    class Empty(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Empty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster = StandaloneCluster(workers=1, dir=tmp_path)
        cluster.web_port = server.server_address[1]
        assert cluster.master_state() is None
    finally:
        server.shutdown()
