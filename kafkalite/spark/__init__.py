"""PySpark integration: the ``kafkalite`` data source (batch and streaming reads and writes).

``session()`` gives the shared, quiet local SparkSession the book and tests use, with the source
registered; ``register(spark)`` registers it on a session you built yourself::

    spark = kafkalite.spark.session(app="spark-chapter")
    # through the brokers (wire mode), Spark's Kafka source options and meanings
    df = spark.read.format("kafkalite").option("kafka.bootstrap.servers", "127.0.0.1:9092") \
        .option("subscribe", "flights").load()
    # or straight from a copy of the log directories (path mode)
    df = spark.read.format("kafkalite").option("path", cluster.dir).option("subscribe", "flights").load()
    df.write.format("kafkalite").option("path", out_dir).option("topic", "copy").mode("append").save()
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["REMOTE_ENV", "SHORT_LIVED_JVM", "quiet_conf", "register", "session", "short_lived_jvm_options"]

# Set by the book build (``kafkalite.spark.connect_server``): the Spark Connect server sessions go to.
REMOTE_ENV = "KAFKALITE_SPARK_REMOTE"

# The JVMs here (driver, standalone daemons, executors) live for seconds to minutes. HotSpot's second
# compiler (C2) then spends about half of a JVM's CPU time on code that never runs long enough to pay it
# back, on the same two cores as the Python workers doing the reading; C1 alone halves that start-up
# cost (measured: 22 s -> 12 s of JVM CPU for a session and its first query).
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def short_lived_jvm_options() -> str:
    """``SHORT_LIVED_JVM``, and the class-sharing archive when this environment has one (see
    ``kafkalite.spark.class_sharing``): the options of every JVM the book starts."""
    from kafkalite.spark.class_sharing import jvm_options

    return f"{SHORT_LIVED_JVM} {jvm_options()}".strip()


def quiet_conf(jvm_options: str = "") -> dict[str, str]:
    """The settings of every Spark driver the book starts, local or a Connect server: no UI, no console
    progress bar, UTC in Spark and in the JVM, and ``jvm_options`` for the driver."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {jvm_options}".strip(),
    }


def register(spark: SparkSession) -> None:
    """Make ``format("kafkalite")`` available in ``spark`` (a PySpark 4.x session)."""
    from kafkalite.spark.datasource import KafkaliteDataSource  # pyspark is only needed once this is called

    spark.dataSource.register(KafkaliteDataSource)


def session(
    app: str = "kafkalite",
    cores: int = 2,
    conf: Mapping[str, str] | None = None,
    *,
    short_lived: bool = True,
    connect: bool = True,
) -> SparkSession:
    """A local SparkSession (``local[cores]``) with the kafkalite source registered.

    With ``KAFKALITE_SPARK_REMOTE`` set (``sc://HOST:PORT``, as the book build sets it), the session is a
    Spark Connect session on that server instead, with the same session settings and the source registered;
    ``connect=False`` keeps a local session for code that needs the classic API (``df.rdd``,
    ``spark.sparkContext``), which Spark Connect does not offer. (PySpark then treats the whole process
    as a Spark Connect client: a local session cannot follow a Connect one in the same process.)

    Only one SparkSession runs per Python process: an active one is reused (``app`` and ``cores`` then
    apply only to the first call). Quiet settings: no UI, no console progress bar, log level ERROR,
    session time zone UTC, ``spark.sql.shuffle.partitions`` = ``cores``, and, unless ``short_lived`` is
    false, a driver JVM that compiles with C1 only (``SHORT_LIVED_JVM``). A benchmark measuring steady
    throughput wants ``short_lived=False``: the JVM's side of each row then runs C2's code. More Spark settings go in
    ``conf``, e.g. ``session(conf={"spark.driver.memory": "2g"})``.
    """
    # Python workers must run this interpreter and import this kafkalite (an editable install or not).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PACKAGE_ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *paths])
    from pyspark.sql import SparkSession  # deferred: pyspark is heavy

    remote = os.environ.get(REMOTE_ENV)
    if remote and connect:
        # A session on the shared server: its static settings (UI, JVM options) are the server's.
        spark = SparkSession.builder.remote(remote).getOrCreate()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.conf.set("spark.sql.shuffle.partitions", str(cores))
        for key, value in (conf or {}).items():
            spark.conf.set(key, value)
        register(spark)
        return spark

    jit = short_lived_jvm_options() if short_lived else ""
    settings = {**quiet_conf(jit), "spark.sql.shuffle.partitions": str(cores), **(conf or {})}
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
