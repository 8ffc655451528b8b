"""tools/kernel_wait.py: a reply whose wake-up was lost is read within a slice, not at the timeout."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from queue import Empty

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import kernel_wait  # noqa: E402


class LostWakeUpSocket:
    """A socket whose reply arrives after ``arrives_s`` without waking a pending poll, like the shell
    socket after nbclient's Output widget sent on it: a poll sees it only when it ends."""

    def __init__(self, arrives_s: float) -> None:
        self.arrives = time.monotonic() + arrives_s

    async def poll(self, timeout_ms: int | None = None) -> int:
        if timeout_ms:
            await asyncio.sleep(timeout_ms / 1000)  # nothing wakes it early
        return int(time.monotonic() >= self.arrives)


class Channel:
    def __init__(self, socket: LostWakeUpSocket) -> None:
        self.socket = socket

    async def _recv(self) -> dict:
        return {"msg_type": "execute_reply"}


def test_a_reply_with_a_lost_wake_up_is_read_within_a_slice() -> None:
    channel = Channel(LostWakeUpSocket(arrives_s=0.2))
    start = time.monotonic()
    reply = asyncio.run(kernel_wait.sliced_get_msg(channel, timeout=30))
    assert reply == {"msg_type": "execute_reply"}
    assert time.monotonic() - start < kernel_wait.SLICE_S + 1, "read after the first slice, not at 30 s"


def test_the_timeout_still_holds() -> None:
    channel = Channel(LostWakeUpSocket(arrives_s=60))
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(kernel_wait.sliced_get_msg(channel, timeout=1.5))
    assert 1.5 <= time.monotonic() - start < 2.5


def test_installed_where_cells_run() -> None:
    from jupyter_client.channels import AsyncZMQSocketChannel

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["sphinx"]["local_extensions"].get("kernel_wait") == "tools/", "the book build installs it"
    assert "kernel_wait.install()" in (ROOT / "tools" / "execute_notebooks.py").read_text(encoding="utf-8")
    assert '"kernel_wait.py"' in (ROOT / "tools" / "papermill_matrix.py").read_text(encoding="utf-8")
    kernel_wait.install()
    assert AsyncZMQSocketChannel.get_msg is kernel_wait.sliced_get_msg
