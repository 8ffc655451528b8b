"""Measurements of this machine's disk and socket paths, for the storage and performance chapters.

Two questions the seeds answer with numbers from spinning disks: how much faster is appending than
writing at random places, and what does zero copy (``sendfile``) save over read-then-send. These
functions answer them for the machine the book runs on. They return plain dicts of figures; nothing
here asserts a speed.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from pathlib import Path


def _mb_per_s(nbytes: int, seconds: float) -> float:
    return nbytes / (1 << 20) / max(seconds, 1e-9)


def sequential_vs_random_write(
    directory: str | Path,
    *,
    block_size: int = 4096,
    blocks: int = 4096,
    sync_each_write: bool = False,
    seed: int = 0,
) -> dict[str, float]:
    """Write ``blocks`` blocks in file order, then the same blocks at shuffled positions.

    With ``sync_each_write`` every write is followed by ``os.fsync``: the device, not the page cache,
    then decides the speed (the setting the seeds' 600 MB/s vs 100 KB/s claim is about). Without it
    both runs end with a single fsync, so both pay for reaching the disk once.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    payload = random.Random(seed).randbytes(block_size)
    order = list(range(blocks))
    random.Random(seed).shuffle(order)
    results: dict[str, float] = {"block_size": block_size, "blocks": blocks}
    for name, positions in (("sequential", range(blocks)), ("random", order)):
        path = directory / f"{name}.bin"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            # Preallocate so the random run rewrites existing blocks instead of growing a sparse file.
            os.ftruncate(fd, block_size * blocks)
            os.fsync(fd)
            start = time.perf_counter()
            for block in positions:
                os.pwrite(fd, payload, block * block_size)
                if sync_each_write:
                    os.fsync(fd)
            os.fsync(fd)
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
            path.unlink()
        results[f"{name}_mb_s"] = _mb_per_s(block_size * blocks, elapsed)
    results["ratio"] = results["sequential_mb_s"] / results["random_mb_s"]
    return results


def cold_vs_warm_read(path: str | Path, *, chunk: int = 1 << 20) -> dict[str, float]:
    """Read ``path`` once after asking the kernel to drop its cached pages, then again from the cache.

    ``posix_fadvise(DONTNEED)`` evicts only clean pages of this one file (it is fsynced first), so no
    root rights are needed and nothing else is disturbed. On a virtual disk the "cold" read may still be
    served by the host's cache; the figure is what this machine does, not what a disk can do.
    """
    path = Path(path)
    size = path.stat().st_size
    results: dict[str, float] = {"bytes": size}
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        for name in ("cold", "warm"):
            if name == "cold":
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            start = time.perf_counter()
            offset = 0
            while data := os.pread(fd, chunk, offset):
                offset += len(data)
            results[f"{name}_mb_s"] = _mb_per_s(offset, time.perf_counter() - start)
    finally:
        os.close(fd)
    results["ratio"] = results["warm_mb_s"] / results["cold_mb_s"]
    return results


def _drain(sock: socket.socket, expected: int, received: list[int]) -> None:
    total = 0
    while total < expected:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        total += len(chunk)
    received.append(total)


def _send_file(path: Path, repeats: int, zero_copy: bool, buffer_size: int) -> tuple[int, float]:
    size = path.stat().st_size
    left, right = socket.socketpair()
    received: list[int] = []
    reader = threading.Thread(target=_drain, args=(right, size * repeats, received), daemon=True)
    reader.start()
    start = time.perf_counter()
    with open(path, "rb") as f:
        for _ in range(repeats):
            if zero_copy:
                offset = 0
                while offset < size:
                    offset += os.sendfile(left.fileno(), f.fileno(), offset, size - offset)
            else:
                f.seek(0)
                while chunk := f.read(buffer_size):
                    left.sendall(chunk)
    reader.join()
    elapsed = time.perf_counter() - start
    left.close()
    right.close()
    if received[0] != size * repeats:
        raise RuntimeError(f"socket pair delivered {received[0]} bytes, expected {size * repeats}")
    return size * repeats, elapsed


def sendfile_vs_read_send(
    path: str | Path, *, repeats: int = 8, buffer_size: int = 64 * 1024
) -> dict[str, float]:
    """Send a file through a real socket pair with ``os.sendfile`` and with read + ``sendall``.

    Both runs read the same (page-cached) file and a thread drains the other end, so the only
    difference is whether the bytes pass through this process's memory.
    """
    path = Path(path)
    _send_file(path, 1, True, buffer_size)  # warm the page cache for both runs alike
    sent, t_zero = _send_file(path, repeats, True, buffer_size)
    _, t_copy = _send_file(path, repeats, False, buffer_size)
    return {
        "bytes": sent,
        "sendfile_mb_s": _mb_per_s(sent, t_zero),
        "read_send_mb_s": _mb_per_s(sent, t_copy),
        "ratio": t_copy / max(t_zero, 1e-9),
    }
