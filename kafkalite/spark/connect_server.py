"""One Spark Connect server on this machine, which many Python processes share as their Spark.

Each chapter of the book that runs Spark would otherwise start its own driver JVM, load Spark's classes
and compile its hot code again: about 30 s of CPU a chapter, most of it before the first row is read.
The book build starts one server instead (the ``SparkConnectServer`` class that the pyspark wheel's jars
carry) and exports its address as ``KAFKALITE_SPARK_REMOTE``; ``kafkalite.spark.session()`` then gives a
Spark Connect session on it, with the kafkalite source registered, in place of a local one::

    with ConnectServer() as server:
        os.environ[REMOTE_ENV] = server.url   # kernels started from here inherit it
        ...

The server runs ``local[cores]`` with the settings ``session()`` gives a local session (no UI, UTC, the
short-lived JVM options); its Python workers run this interpreter with this kafkalite importable. It runs
in its own process group, killed as a whole on ``stop()``, so no JVM or Python worker outlives it.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path

from kafkalite.spark import REMOTE_ENV, quiet_conf, short_lived_jvm_options
from kafkalite.spark.standalone import HOST, free_port, spark_env, spark_home, stop_groups

__all__ = ["REMOTE_ENV", "SERVER_CLASS", "ConnectServer"]

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """A Spark Connect server on 127.0.0.1 (``url``: ``sc://127.0.0.1:PORT``); a context manager."""

    def __init__(self, cores: int = 2, *, memory: str = "1g", timeout_s: float = 120.0) -> None:
        self.cores, self.memory, self.timeout_s = cores, memory, timeout_s
        self.port = free_port()
        self.url = f"sc://{HOST}:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-connect-")
        self.log = Path(self._tmp.name) / "server.log"
        self._proc: subprocess.Popen | None = None

    def start(self) -> ConnectServer:
        conf = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.memory": self.memory,
            **quiet_conf(short_lived_jvm_options()),
        }
        args = [str(spark_home() / "bin" / "spark-submit"), "--master", f"local[{self.cores}]"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        args += ["--class", SERVER_CLASS, "spark-internal"]
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=spark_env(), start_new_session=True
            )
        try:
            self._wait()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Spark Connect server exited (code {self._proc.returncode}):\n{tail}")
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the Spark Connect server did not listen in {self.timeout_s}s; see {self.log}"
                )
            time.sleep(0.3)

    def stop(self) -> None:
        """Kill the server's process group (its JVM and Python workers): TERM, then KILL."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_groups([proc])
        self._tmp.cleanup()

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
