"""A Spark standalone cluster on this machine: one master and workers, from the Spark that PySpark ships.

The pyspark wheel carries Spark's jars and ``bin/spark-class``, so Spark's own standalone deploy mode runs
without a separate Spark install: ``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker spark://HOST:PORT``. ``StandaloneCluster`` starts them on 127.0.0.1 with small
memory and cores, waits until every worker has registered with the master (the master's web UI serves
its state as JSON at ``/json/``), and stops them afterwards: each daemon runs in its own process group,
which holds the executors it launches and their Python workers too, and the group is killed as a whole,
so no JVM outlives the cluster::

    with StandaloneCluster(workers=2) as cluster:
        spark = cluster.session(app="demo")      # executors: this interpreter, this kafkalite
        ...
        spark.stop()

``executor_identity()``, called inside a task, says which executor runs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalite.common.procfs import live_group_members, proc_stat
from kafkalite.spark import quiet_conf, short_lived_jvm_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "StandaloneCluster",
    "executor_identity",
    "free_port",
    "spark_env",
    "spark_home",
    "stop_groups",
    "with_executor",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOST = "127.0.0.1"


def spark_home() -> Path:
    """The pyspark package directory: it holds ``bin/spark-class`` and ``jars/``, a complete SPARK_HOME."""
    import pyspark  # deferred: pyspark is heavy

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise RuntimeError(f"{home} has no bin/spark-class: this pyspark cannot run a standalone cluster")
    return home


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_env() -> dict[str, str]:
    """This process's environment for a Spark JVM started from here: the wheel's SPARK_HOME, 127.0.0.1, and
    Python workers that run this interpreter with this kafkalite first on their path."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(Path(__file__).resolve().parents[2])
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([root, *[p for p in paths if p != root]]),
    }


def stop_groups(procs: list[subprocess.Popen], timeout_s: float = 20.0) -> None:
    """Kill the process group each of ``procs`` leads, last first: TERM, then KILL whatever outlives it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for p in procs:
                p.poll()  # reap the group leader: a zombie would count as alive
            if not any(_group_alive(p.pid) for p in procs):
                return
            time.sleep(0.2)


class StandaloneCluster:
    """One master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1; a context manager.

    ``master_url`` is ``spark://127.0.0.1:PORT``; ``session()`` builds a SparkSession on it whose
    executors run this Python with this kafkalite importable (``spark.pyspark.python``,
    ``spark.executorEnv.PYTHONPATH``). Daemon logs and the workers' work dirs go under ``dir``.
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
        dir: str | Path | None = None,
        timeout_s: float = 90.0,
    ) -> None:
        self.workers, self.cores, self.memory = workers, cores, memory
        self.daemon_memory = daemon_memory
        self.timeout_s = timeout_s
        self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-spark-") if dir is None else None
        self.dir = Path(self._tmp.name if self._tmp is not None else dir)  # type: ignore[arg-type]
        self.port = free_port()
        self.web_port = free_port()
        self.master_url = f"spark://{HOST}:{self.port}"
        self._procs: list[subprocess.Popen] = []

    # ------------------------------------------------------------------------------------ lifecycle

    def _env(self) -> dict[str, str]:
        return {
            **spark_env(),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": short_lived_jvm_options(),
            "SPARK_LOG_DIR": str(self.dir / "logs"),
        }

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.dir / "logs" / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,  # its own process group: its executors and Python workers too
            )
        self._procs.append(proc)
        return proc

    def start(self) -> StandaloneCluster:
        try:
            self._spawn("master", [MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                                   "--webui-port", str(self.web_port)])  # fmt: skip
            self._wait(lambda s: s is not None, "the master's web UI")
            for i in range(1, self.workers + 1):
                work = self.dir / f"worker-{i}"
                work.mkdir(parents=True, exist_ok=True)
                self._spawn(f"worker-{i}", [WORKER_CLASS, "--host", HOST, "--cores", str(self.cores),
                                            "--memory", self.memory, "--webui-port", str(free_port()),
                                            "--work-dir", str(work), self.master_url])  # fmt: skip
            self._wait(lambda s: s is not None and len(self.alive_workers(s)) >= self.workers,
                       f"{self.workers} workers to register")  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def master_state(self) -> dict[str, Any] | None:
        """The master's state (``/json/``: workers, applications), or None while it is not up."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.web_port}/json/", timeout=2) as r:
                return json.load(r)
        except (OSError, ValueError):  # ValueError: a web UI still starting may answer with no body
            return None

    @staticmethod
    def alive_workers(state: dict[str, Any]) -> list[dict[str, Any]]:
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not ready(self.master_state()):
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(
                    f"a Spark daemon exited (code {dead[0].returncode}); see {self.dir / 'logs'}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"timed out after {self.timeout_s}s waiting for {what}; see {self.dir / 'logs'}"
                )
            time.sleep(0.3)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Kill each daemon's process group (master, workers, executors, Python workers): TERM, then KILL."""
        procs, self._procs = self._procs, []
        stop_groups(procs, timeout_s)  # workers first, then the master
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------- sessions

    def session(self, app: str = "kafkalite-standalone", *, executors: int | None = None,
                conf: dict[str, str] | None = None) -> SparkSession:  # fmt: skip
        """A SparkSession on this cluster with the kafkalite source registered; returns once ``executors``
        executors (default: one per worker) have registered, so tasks spread over all of them."""
        from pyspark.sql import SparkSession  # deferred: pyspark is heavy

        from kafkalite.spark import register

        env = self._env()
        builder = (
            SparkSession.builder.master(self.master_url)
            .appName(app)
            .config("spark.driver.host", HOST)
            .config("spark.driver.bindAddress", HOST)
            .config("spark.executor.cores", str(self.cores))
            .config("spark.executor.memory", "512m")
            .config("spark.executor.extraJavaOptions", short_lived_jvm_options())
            .config("spark.cores.max", str(self.cores * self.workers))
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.executorEnv.PYTHONPATH", env["PYTHONPATH"])
            .config("spark.executorEnv.SPARK_LOCAL_IP", HOST)
            .config("spark.sql.shuffle.partitions", str(self.cores * self.workers))
        )
        # the driver's JVM options apply when its JVM is new
        for k, v in {**quiet_conf(short_lived_jvm_options()), **(conf or {})}.items():
            builder = builder.config(k, v)
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the driver's own Python workers (planning)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        want = self.workers if executors is None else executors
        deadline = time.monotonic() + self.timeout_s
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < want + 1:  # + the driver
            if time.monotonic() > deadline:
                spark.stop()
                raise TimeoutError(
                    f"{want} executors did not register with the application in {self.timeout_s}s"
                )
            time.sleep(0.2)
        return spark


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An executor's Python workers outlive it as zombies until init reaps them: those are gone.
    return not Path("/proc").is_dir() or bool(live_group_members(pgid))


def executor_identity() -> str:
    """Inside a Spark task: ``executor <id> (<host>:<jvm pid>)``, found by walking up from this Python
    worker to the executor JVM that launched it; ``driver`` when no executor is above (local mode)."""
    pid = os.getpid()
    for _ in range(6):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            break
        args = [a.decode(errors="replace") for a in cmd if a]
        if EXECUTOR_CLASS in args:
            opt = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
            return f"executor {opt.get('--executor-id', '?')} ({opt.get('--hostname', '?')}:{pid})"
        stat = proc_stat(pid)
        if stat is None or stat.ppid <= 1:
            break
        pid = stat.ppid
    return "driver"


def with_executor(df: DataFrame, marks: str | Path | None = None) -> DataFrame:
    """``df`` with an ``executor`` column: which executor's task produced each row (``executor_identity``).

    With ``marks``, each Arrow batch that reaches a task first appends ``<unix time> <rows so far>`` to
    ``marks/<Spark partition id>``: a record, outside Spark, of when each task passed its rows on."""
    from pyspark.sql.types import StringType, StructField, StructType  # deferred: pyspark is heavy

    where = None if marks is None else str(marks)

    def tag(batches):  # runs in the task
        import pyarrow as pa
        from pyspark import TaskContext

        me, task, seen = executor_identity(), TaskContext.get().partitionId(), 0
        for b in batches:
            seen += b.num_rows
            if b.num_rows and where is not None:
                with open(f"{where}/{task}", "a") as f:
                    f.write(f"{time.time()} {seen}\n")
            yield b.append_column("executor", pa.array([me] * b.num_rows, pa.string()))

    schema = StructType([*df.schema.fields, StructField("executor", StringType(), nullable=False)])
    return df.mapInArrow(tag, schema)
