"""A private RabbitMQ node beside kafkalite, for the queues chapter and its tests.

``RabbitMQNode`` runs Debian's ``rabbitmq-server`` (installed by ``tools/ensure_rabbitmq.sh``) as a child process
of this one, on 127.0.0.1 only, with free ports and its own temporary directories: the data (Mnesia) and log
directories, a config file, an empty plugins list, a home directory for the Erlang cookie and its own epmd on
its own port. Nothing is read from /etc/rabbitmq or /var/lib/rabbitmq, so two nodes (or a system service) never
collide. The context manager waits until an AMQP connection (pika) succeeds, and on exit stops the broker with
SIGTERM (RabbitMQ's graceful shutdown), then its epmd, and removes the directories.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# The scripts behind /usr/sbin's wrappers: those switch to the rabbitmq user and its /var/lib home; these run as
# whoever calls them, with the environment set below.
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
SERVER = RABBITMQ_BIN / "rabbitmq-server"
CTL = RABBITMQ_BIN / "rabbitmqctl"
# Set to "none" to run as if RabbitMQ were not installed (how the queues chapter's stored-results path is checked).
HIDE_ENV = "KAFKALITE_RABBITMQ"


def _hidden() -> bool:
    return os.environ.get(HIDE_ENV, "").strip().lower() == "none"


def available() -> bool:
    """True when RabbitMQ's server and epmd (Erlang's port mapper) are installed."""
    return not _hidden() and os.access(SERVER, os.X_OK) and shutil.which("epmd") is not None


def missing_reason() -> str:
    """Why ``available()`` is False, in words (for a skip message or a chapter's note)."""
    if _hidden():
        return f"RabbitMQ is hidden ({HIDE_ENV}=none)"
    if not os.access(SERVER, os.X_OK):
        return f"RabbitMQ is not installed ({SERVER} not found; tools/ensure_rabbitmq.sh installs it)"
    if shutil.which("epmd") is None:
        return "Erlang's epmd is not on PATH (it comes with Debian's erlang-base, a dependency of rabbitmq-server)"
    return ""


def server_version() -> str:
    """The installed server's version from its directory's name, e.g. ``3.10.8``; '' if unknown."""
    for home in sorted(Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*")):
        return home.name.removeprefix("rabbitmq_server-")
    return ""


def _free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    # Hold every socket until all are bound, so the n ports differ.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class RabbitMQError(RuntimeError):
    """The node did not start (the message carries the tail of its output)."""


START_ATTEMPTS = 3  # a start that lost one of its ports to another program is tried again


class RabbitMQNode:
    """One RabbitMQ node on 127.0.0.1 that lives as long as the ``with`` block."""

    def __init__(self, *, start_timeout_s: float = 60.0, config: dict[str, str] | None = None) -> None:
        self.start_timeout_s = start_timeout_s
        self.extra_config = dict(config or {})
        self.host = "127.0.0.1"
        self.port = 0
        self.nodename = ""
        self.directory: Path | None = None
        self._server: subprocess.Popen[bytes] | None = None
        self._epmd: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> RabbitMQNode:
        if not available():
            raise RabbitMQError(missing_reason())
        for _ in range(START_ATTEMPTS - 1):
            try:
                return self._start_once()
            except RabbitMQError as e:
                # The free ports were free when picked and released; another program may bind one before
                # the node does. Then it starts again on other ports.
                if "eaddrinuse" not in str(e):
                    raise
        return self._start_once()

    def _start_once(self) -> RabbitMQNode:
        self.directory = Path(tempfile.mkdtemp(prefix="kafkalite-rabbitmq-"))
        d = self.directory
        for sub in ("home", "mnesia", "log"):
            (d / sub).mkdir()
        node_port, dist_port, epmd_port, ctl_port = _free_ports(4)
        self.port = node_port
        self.nodename = f"kafkalite-{uuid.uuid4().hex[:12]}@localhost"
        config = {
            "listeners.tcp.default": f"{self.host}:{node_port}",
            "log.console": "false",
            "log.file.level": "warning",
            **self.extra_config,
        }
        (d / "rabbitmq.conf").write_text("".join(f"{k} = {v}\n" for k, v in config.items()))
        (d / "enabled_plugins").write_text("[].\n")
        (d / "rabbitmq-env.conf").write_text("")
        self._env = {
            **os.environ,
            "HOME": str(d / "home"),  # where Erlang writes (and rabbitmqctl reads) the cookie
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": self.host,
            "RABBITMQ_NODENAME": self.nodename,
            "RABBITMQ_NODE_IP_ADDRESS": self.host,
            "RABBITMQ_NODE_PORT": str(node_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_CTL_DIST_PORT_MIN": str(ctl_port),
            "RABBITMQ_CTL_DIST_PORT_MAX": str(ctl_port),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
            "RABBITMQ_PID_FILE": str(d / "rabbitmq.pid"),
        }
        try:
            # Our own epmd in the foreground, so that it is our child and stops with the node (the one erl
            # would start itself is a daemon that outlives it).
            self._epmd = subprocess.Popen(
                ["epmd", "-port", str(epmd_port), "-address", self.host],
                env=self._env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._wait_port(epmd_port, 10.0, "epmd")
            self._server = subprocess.Popen(
                [str(SERVER)],
                env=self._env,
                cwd=d,
                stdout=open(d / "server.out", "wb"),  # noqa: SIM115 (the child keeps it)
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self._wait_amqp()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_port(self, port: int, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, port), timeout=1.0).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RabbitMQError(f"{what} did not listen on {self.host}:{port} within {timeout_s} s")

    def _wait_amqp(self) -> None:
        import pika  # only the RabbitMQ side needs it

        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            assert self._server is not None
            if self._server.poll() is not None:
                raise RabbitMQError(
                    f"rabbitmq-server exited with {self._server.returncode}: {self._output_tail()}"
                )
            try:
                pika.BlockingConnection(self.parameters()).close()
                return
            except pika.exceptions.AMQPError:
                time.sleep(0.2)
        raise RabbitMQError(
            f"RabbitMQ did not accept AMQP within {self.start_timeout_s} s: {self._output_tail()}"
        )

    def _output_tail(self) -> str:
        assert self.directory is not None
        try:
            return (self.directory / "server.out").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the broker gracefully (SIGTERM), then epmd; kill what is left; remove the directories."""
        for proc, grace in ((self._server, 30.0), (self._epmd, 5.0)):
            if proc is None:
                continue
            if proc.poll() is None:
                # rabbitmq-server's script traps TERM, passes it to beam (a graceful shutdown) and waits for it.
                proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(grace)
            # The group also holds beam's helpers (erl_child_setup, inet_gethost): none may outlive the node.
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)
        self._server = self._epmd = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> RabbitMQNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- using it ---------------------------------------------------------------------------------
    def parameters(self, blocked_timeout_s: float | None = 30) -> Any:
        """pika's ConnectionParameters for this node (the default guest user, allowed from localhost). A
        connection the node blocks (a resource alarm) is closed after ``blocked_timeout_s`` (None: never)."""
        import pika

        return pika.ConnectionParameters(
            host=self.host,
            port=self.port,
            connection_attempts=1,
            blocked_connection_timeout=blocked_timeout_s,
        )

    def connect(self, blocked_timeout_s: float | None = 30) -> Any:
        """A new pika BlockingConnection to this node."""
        import pika

        return pika.BlockingConnection(self.parameters(blocked_timeout_s))

    def ctl(self, *args: str, timeout_s: float = 60.0) -> str:
        """Run ``rabbitmqctl`` against this node and return its standard output."""
        out = subprocess.run(
            [str(CTL), "-n", self.nodename, "-q", *args],
            env=self._env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
        return out.stdout

    def list_queues(self) -> dict[str, dict[str, int]]:
        """Each queue's ``messages`` (ready + unacknowledged) and ``memory`` (bytes) as the broker reports."""
        rows: dict[str, dict[str, int]] = {}
        for line in self.ctl("list_queues", "--no-table-headers", "name", "messages", "memory").splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[1].isdigit():
                rows[parts[0]] = {"messages": int(parts[1]), "memory": int(parts[2])}
        return rows

    @property
    def pids(self) -> list[int]:
        """The process ids of the broker's and epmd's process groups' leaders (for tests)."""
        return [p.pid for p in (self._server, self._epmd) if p is not None]


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
