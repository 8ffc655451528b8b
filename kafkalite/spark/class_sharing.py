"""A class-data-sharing archive for the Spark JVMs: Spark's classes parsed once, mapped by every JVM after.

A Spark JVM spends most of its start loading, verifying and linking some twenty thousand classes from the
jars PySpark ships. HotSpot's dynamic CDS archive (JDK 13+) stores them as they are after linking: a JVM
started with ``-XX:SharedArchiveFile`` maps the archive instead (measured here: a local session and its
first query 11.7 s -> 7.6 s). ``build()`` writes the archive once per environment (``make`` does it during
set-up) by running a small but representative workload, the kafkalite source included, in a JVM started
with ``-XX:ArchiveClassesAtExit``. ``jvm_options()`` names it for the next JVMs while it exists.

The archive is only a cache. A JVM checks that it was made by the same JVM build from the same jars, and
if not runs without it, silently (its CDS warnings are switched off): slower, never different.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["archive_path", "build", "jvm_options"]

_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    """Where this environment keeps the archive: under the interpreter's prefix (the project's .venv), one
    file per PySpark version."""
    import pyspark  # deferred: pyspark is heavy

    return Path(sys.prefix) / "share" / "kafkalite" / f"spark-{pyspark.__version__}.jsa"


def jvm_options() -> str:
    """``-XX:SharedArchiveFile=...`` (and quiet CDS logging) when the archive exists, else nothing: naming a
    missing archive would switch off the JDK's own default archive too."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path.is_file() else ""


def build(force: bool = False, timeout_s: float = 600.0) -> Path | None:
    """Write the archive (unless it exists and not ``force``); its path, or None when the JVM could not
    write one (the reason is printed; Spark still works, only its JVMs start slower)."""
    final = archive_path()
    if final.is_file() and not force:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(f"{final.name}.{os.getpid()}.partial")
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kafkalite.spark.class_sharing", "--workload", str(partial)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        print(f"kafkalite: no Spark class-sharing archive (exit {done.returncode}):\n{tail}", file=sys.stderr)
        return None
    partial.replace(final)  # atomic: a JVM starting now sees the whole archive or none
    size_mb = final.stat().st_size / 2**20
    print(
        f"kafkalite: Spark class-sharing archive {final} ({size_mb:.0f} MiB, {time.monotonic() - t0:.0f} s)"
    )
    return final


def _workload(dump_to: str) -> None:
    """Run what the book's Spark cells run (the kafkalite source in batch and streaming, JSON, Parquet,
    pandas and Arrow), in a driver JVM that dumps the classes it loaded when it exits."""
    import json

    import kafkalite.spark as ks
    from kafkalite.clock import ManualClock
    from kafkalite.records import build_batch
    from kafkalite.storage import Log

    dump = f"-Duser.timezone=UTC {ks.SHORT_LIVED_JVM} -XX:ArchiveClassesAtExit={dump_to} {_QUIET}"
    with tempfile.TemporaryDirectory(prefix="kafkalite-cds-") as work:
        logs = Path(work) / "logs"
        for p in range(2):  # a small topic of JSON records, written as a broker would
            log = Log.open(logs / f"flights-{p}", {}, clock=ManualClock())
            for b in range(10):
                rows = [{"carrier": f"C{i % 7}", "distance": 100 + i} for i in range(100)]
                log.append(build_batch([(b"k", json.dumps(r).encode()) for r in rows], timestamp=b))
            log.close()
        spark = ks.session(app="kafkalite-class-sharing", conf={"spark.driver.extraJavaOptions": dump})
        from pyspark.sql import functions as F

        df = spark.read.format("kafkalite").option("path", str(logs)).option("subscribe", "flights").load()
        parsed = df.select(
            F.from_json(F.col("value").cast("string"), "carrier string, distance int").alias("v")
        )
        parsed.groupBy("v.carrier").agg(F.sum("v.distance")).toPandas()
        df.write.parquet(str(Path(work) / "parquet"))
        df.write.format("noop").mode("overwrite").save()
        df.mapInArrow(lambda batches: batches, df.schema).count()
        stream = (
            spark.readStream.format("kafkalite")
            .option("path", str(logs))
            .option("subscribe", "flights")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 500)
            .load()
        )
        query = (
            stream.writeStream.foreachBatch(lambda batch, _: batch.count())
            .option("checkpointLocation", str(Path(work) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes; wait for it to finish.
    from pyspark import SparkContext

    jvm = SparkContext._gateway.proc
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--workload"]:
        _workload(sys.argv[2])
    else:
        sys.exit(0 if build(force="--force" in sys.argv) is not None else 1)
