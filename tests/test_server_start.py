"""``kafkalite server start`` as a real process, with confluent-kafka and kafka-python: transactions work
on its default single broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalite.wire.processes import free_port

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


class Server:
    """``kafkalite server start`` in its own process, stopped with SIGTERM."""

    def __init__(self, port: int, log_dir: Path, *extra: str) -> None:
        cmd = [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port),
               "--log-dir", str(log_dir), *extra]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.bootstrap = f"127.0.0.1:{port}"
        self.said: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()  # type: ignore[union-attr]
            if not line:
                break
            self.said.append(line)
            if "broker(s) on" in line:
                return
        self.proc.kill()
        raise AssertionError(f"server start did not come up: {''.join(self.said)}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


def test_transactions_on_the_default_single_broker(tmp_path: Path) -> None:
    srv = Server(free_port(), tmp_path / "logs", "--topic", "tx:2")
    try:
        bs = srv.bootstrap
        p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "ck-tx", **QUIET})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce("tx", b"ck commit %d" % i)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("tx", b"ck abort %d" % i)
        p.flush(30)  # in the log before the abort: read_committed must skip them
        p.abort_transaction(30)

        kp = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx", max_block_ms=30_000)
        kp.init_transactions()
        kp.begin_transaction()
        for i in range(4):
            kp.send("tx", b"kp commit %d" % i)
        kp.commit_transaction()
        kp.begin_transaction()
        for i in range(2):
            kp.send("tx", b"kp abort %d" % i)
        kp.flush()
        kp.abort_transaction()
        kp.close()

        want = sorted([b"ck commit %d" % i for i in range(5)] + [b"kp commit %d" % i for i in range(4)])
        kc = kafka.KafkaConsumer("tx", bootstrap_servers=bs, isolation_level="read_committed",
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)  # fmt: skip
        assert sorted(m.value for m in kc) == want
        kc.close()
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "rc", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", **QUIET})  # fmt: skip
        c.subscribe(["tx"])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < len(want):
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]  # and nothing more
        c.close()
        assert sorted(got) == want
    finally:
        srv.stop()
