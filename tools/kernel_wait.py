"""Never wait on an idle kernel: read a kernel's replies by polling in one-second slices.

Cause. nbclient (under myst-nb in the book build, and under papermill) waits for a cell's
``execute_reply`` with one ``poll`` of the shell socket (zmq.asyncio) lasting the whole cell timeout,
600 s here. While that poll is pending, nbclient also *sends* on the same socket: for a cell with an
ipywidgets ``interact`` (the partitioning chapter's last cell) its stand-in for the Output widget answers
the kernel's comm messages over the shell channel. Under load, such a send can swallow the wake-up the
poll was waiting for (the socket signals readiness by edge); the reply then sits in the socket, the kernel
is idle, and only when the poll times out does pyzmq look at the socket once more, find the reply and let
the cell finish: 600 s late and "successful". A parallel build on a busy machine made the partitioning
chapter take 642.8 s instead of 35 s this way. tools/interact_stall.py reproduces it: on the loaded
2-core machine, 5 of 200 interact cells took exactly their 30 s timeout without the fix, none with it.

Fix. ``install()`` makes every async channel ``get_msg`` poll in slices of at most ``SLICE_S`` seconds
until its timeout: each slice ends with pyzmq checking the socket itself, so a lost wake-up costs at most
a second and a reply never waits for the timeout. The timeout itself is unchanged: a cell that really
runs long still fails after 600 s. Installed by the book build (a Sphinx extension in _config.yml),
tools/execute_notebooks.py and tools/papermill_matrix.py (``python tools/kernel_wait.py papermill ...``).
"""

from __future__ import annotations

import sys
import time
from queue import Empty
from typing import Any

SLICE_S = 1.0


async def sliced_get_msg(self: Any, timeout: float | None = None) -> dict[str, Any]:
    """``AsyncZMQSocketChannel.get_msg``, polling in slices of at most SLICE_S seconds."""
    assert self.socket is not None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if deadline is None else deadline - time.monotonic()
        # pyzmq treats 0 ms as "look now, don't wait"; a slice always ends with such a look.
        if await self.socket.poll(max(0, int(min(SLICE_S, left) * 1000))):
            return await self._recv()
        if deadline is not None and time.monotonic() >= deadline:
            raise Empty


def install() -> None:
    """Replace the async channels' ``get_msg`` with the sliced one (idempotent)."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    AsyncZMQSocketChannel.get_msg = sliced_get_msg  # type: ignore[method-assign]


def setup(app: Any) -> dict[str, Any]:
    """Sphinx extension: install before Sphinx forks the processes that execute the chapters."""
    install()
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__" and sys.argv[1:2] == ["papermill"]:
    # python tools/kernel_wait.py papermill ARGS...: papermill's command line, with the fix installed.
    install()
    from papermill.cli import papermill

    sys.argv = ["papermill", *sys.argv[2:]]
    papermill()
