"""A real full disk (issue 24, item 5): ``kafkalite server start`` with its log dir on a small tmpfs.

Needs ``mount -t tmpfs`` (root, and a kernel that lets this process mount); skipped with the reason when
the machine does not allow it. The same behaviour is tested without mounting anything through the storage
layer's ``DiskFaults`` seam (tests/storage/test_log_dir_failure.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(r.stderr or r.stdout).strip() or r.returncode}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def test_a_full_tmpfs_gets_storage_errors_halts_and_keeps_every_acknowledged_record(tmpfs: Path, tmp_path):
    port = _port()
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port), "--log-dir",
           str(tmpfs / "data"), "--topic", "full:1:1", "--override", "log.segment.bytes=1048576"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    _wait_port(port)
    # Leave about 3 MiB free: the broker's own files take some of it.
    filler = tmpfs / "filler"
    free = os.statvfs(tmpfs).f_bavail * os.statvfs(tmpfs).f_frsize
    filler.write_bytes(b"\0" * max(0, free - (3 << 20)))
    acked: set[bytes] = set()
    errors: list[str] = []

    def report(err, msg) -> None:
        (errors.append(err.name()) if err else acked.add(msg.value()))

    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 20000, "retries": 2, "log_level": 0})  # fmt: skip
    for i in range(60_000):
        if proc.poll() is not None:
            break
        p.produce("full", b"%06d" % i + b"x" * 200, on_delivery=report)
        p.poll(0)
        if i % 500 == 0:
            p.flush(10)
    p.flush(30)
    assert proc.wait(60) == 1, "the broker with no log dir left exits with status 1"
    text = log.read_text()
    assert "No space left on device" in text and "have failed" in text, text[-3000:]
    assert acked and errors, (len(acked), errors[:3])
    # Free the disk, start again: every acknowledged record is there.
    filler.unlink()
    proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        _wait_port(port)
        c = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g", "enable.auto.commit": False,
                         "log_level": 0})  # fmt: skip
        c.assign([ck.TopicPartition("full", 0, 0)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not acked <= got:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.add(m.value())
        c.close()
        assert acked - got == set(), f"{len(acked - got)} of {len(acked)} acknowledged records lost"
    finally:
        proc.terminate()
        proc.wait(60)
