"""A broker's ``.lock`` in every log dir: a second broker on the same dir is refused, a clean shutdown and a
crash both release it, and a broker process refused its dir exits before opening a port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.host.processes import start_cluster, stop_cluster
from kafkalite.storage.log_dir_lock import LOCK_FILE, LogDirInUseError, LogDirLock, is_locked


def test_second_lock_on_a_dir_is_refused_until_the_first_is_released(tmp_path):
    first = LogDirLock(tmp_path).acquire()
    assert (tmp_path / LOCK_FILE).exists() and is_locked(tmp_path)
    with pytest.raises(LogDirInUseError, match=f"Failed to acquire lock on file .lock in {tmp_path}"):
        LogDirLock(tmp_path).acquire()
    first.release()
    assert not is_locked(tmp_path)
    with LogDirLock(tmp_path) as again:
        assert again.held
    assert not is_locked(tmp_path)


def test_is_locked_sees_another_process_and_the_os_frees_it_when_that_process_dies(tmp_path):
    code = (
        "import sys, time; from kafkalite.storage.log_dir_lock import LogDirLock; "
        f"LogDirLock({str(tmp_path)!r}).acquire(); print('locked', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        assert is_locked(tmp_path)
        with pytest.raises(LogDirInUseError):
            LogDirLock(tmp_path).acquire()
    finally:
        os.kill(child.pid, signal.SIGKILL)  # a crash: no release by the process itself
        child.wait()
    assert not is_locked(tmp_path)


def test_broker_holds_its_dirs_and_a_second_broker_on_them_is_refused(tmp_path):
    c = Cluster(1, seed=1, dir=tmp_path, lock_log_dirs=True)
    try:
        assert is_locked(tmp_path / "broker-1")
        with pytest.raises(LogDirInUseError, match="broker-1"):
            Cluster(1, seed=2, dir=tmp_path, lock_log_dirs=True)
        c.crash(1)  # the process died: the OS released its locks
        assert not is_locked(tmp_path / "broker-1")
        c.restart(1)
        c.run_for(100)
        assert is_locked(tmp_path / "broker-1")
    finally:
        c.close()
    assert not is_locked(tmp_path / "broker-1")  # clean shutdown releases it
    Cluster(1, seed=3, dir=tmp_path, lock_log_dirs=True).close()  # and the dir is usable again


def test_simulations_do_not_lock_unless_asked(tmp_path):
    with Cluster(1, seed=1, dir=tmp_path):
        assert not (tmp_path / "broker-1" / LOCK_FILE).exists()


def test_tcp_server_locks_its_brokers_dirs_and_refuses_a_second_server(tmp_path):
    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(1, log_dir=tmp_path):
        assert is_locked(tmp_path / "broker-1")
        with pytest.raises(LogDirInUseError, match="broker-1"):
            BackgroundServer(1, log_dir=tmp_path)
    assert not is_locked(tmp_path / "broker-1")


def test_broker_process_refused_a_dir_another_broker_holds_exits_naming_it(tmp_path):
    state = start_cluster(tmp_path, 1)
    broker_dir = tmp_path / "broker-1"
    try:
        assert is_locked(broker_dir)
        # the running broker's own command line: same dir (and ports, which it must never reach)
        again = subprocess.run(state["brokers"]["1"]["cmd"], capture_output=True, text=True, timeout=60)
        assert again.returncode != 0
        assert f"Failed to acquire lock on file .lock in {broker_dir}" in again.stderr
    finally:
        stop_cluster(tmp_path)
    assert not is_locked(broker_dir)
