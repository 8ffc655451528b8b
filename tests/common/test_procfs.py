"""procfs: a process that exited but is not reaped counts as gone; live processes do not."""

import os
import subprocess
import sys
import time

import pytest

from kafkalite.common.procfs import exited, live_group_members, proc_stat

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux /proc")


def _until(pred, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_own_stat_names_parent_and_group() -> None:
    st = proc_stat(os.getpid())
    assert st is not None and st.state in "RS" and st.ppid == os.getppid() and st.pgrp == os.getpgrp()


def test_no_such_process() -> None:
    assert proc_stat(2**22 + 12345) is None and not exited(2**22 + 12345)


def test_unreaped_child_has_exited_and_leaves_its_group() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert not exited(child.pid) and live_group_members(child.pid) == [child.pid]
        child.terminate()
        # not reaped (no wait): a zombie, which kill(pid, 0) would still find
        assert _until(lambda: exited(child.pid))
        os.kill(child.pid, 0)
        assert live_group_members(child.pid) == []
    finally:
        child.kill()
        child.wait()
    assert proc_stat(child.pid) is None
