"""The book build's shared Spark: a Spark Connect server from the pyspark wheel's own jars, and
``kafkalite.spark.session()`` answering with a Connect session on it when ``KAFKALITE_SPARK_REMOTE`` names
it. The session reads a kafkalite topic from its directory (the Python data source runs in the server's
Python workers), two sessions keep their own settings, and stopping the server leaves no process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("grpc")  # pyspark[connect]

from kafkalite.common.procfs import live_group_members  # noqa: E402
from kafkalite.records import build_batch  # noqa: E402
from kafkalite.spark import session  # noqa: E402
from kafkalite.spark.connect_server import REMOTE_ENV, ConnectServer  # noqa: E402
from kafkalite.storage import Log  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
COUNTS = [40, 75]


def _write_topic(root: Path) -> None:
    for partition, n in enumerate(COUNTS):
        log = Log.open(root / f"events-{partition}")
        try:
            for start in range(0, n, 10):
                log.append(build_batch([(b"k%d" % i, b"v%d" % i) for i in range(start, min(n, start + 10))]))
        finally:
            log.close()


@pytest.fixture(autouse=True)
def classic_afterwards() -> Iterator[None]:
    """PySpark marks the whole process as a Spark Connect client (this variable) once it makes a Connect
    session: unset afterwards, so that the other modules' local sessions stay local."""
    yield
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture(scope="module")
def server():
    srv = ConnectServer(cores=1).start()
    pgid = srv._proc.pid
    try:
        yield srv
    finally:
        srv.stop()
    assert live_group_members(pgid) == [], "the server's process group outlived stop()"


def test_session_on_the_server_reads_a_kafkalite_topic(server, tmp_path, monkeypatch):
    _write_topic(tmp_path)
    monkeypatch.setenv(REMOTE_ENV, server.url)
    spark = session(app="connect-test", cores=3)
    try:
        assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
        assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
        df = spark.read.format("kafkalite").option("path", str(tmp_path)).option("subscribe", "events").load()
        counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
        assert counts == dict(enumerate(COUNTS))
        first = df.where("partition = 1 AND offset = 7").select("key", "value").collect()
        assert [(bytes(r["key"]), bytes(r["value"])) for r in first] == [(b"k7", b"v7")]
    finally:
        spark.stop()
    # a second session after the first stopped: settings of its own, the source registered again
    other = session(app="connect-test-2", cores=1, conf={"spark.sql.caseSensitive": "true"})
    try:
        assert other.conf.get("spark.sql.shuffle.partitions") == "1"
        assert other.conf.get("spark.sql.caseSensitive") == "true"
        reader = other.read.format("kafkalite").option("path", str(tmp_path)).option("subscribe", "events")
        assert reader.load().count() == sum(COUNTS)
    finally:
        other.stop()


def test_a_server_that_cannot_start_says_why(monkeypatch):
    srv = ConnectServer(memory="not-a-size", timeout_s=60)
    with pytest.raises(RuntimeError, match="exited"):
        srv.start()
    assert srv._proc is None  # stopped, its group killed
