"""The storage layer's one door to the disk: every call that writes, syncs, renames or opens for writing.

Segments, indexes, checkpoints, producer-state snapshots and transaction indexes write through a
``FileOps`` object instead of calling ``os`` themselves. The default, ``OS_FILE_OPS``, *is* ``os``: its
attributes are the ``os`` functions themselves, so the append path pays nothing for the indirection.
``DiskFaults`` is a ``FileOps`` that fails on purpose: the tests, ``kafkalite bench faults --disk`` and the
troubleshooting chapter use it to give a log directory a full disk (``ENOSPC``) or a dying one (``EIO``)
deterministically: after N bytes, on the Nth call, for one directory, without mounting anything.

Kafka's counterpart is every ``IOException`` its log layer catches (``LocalLog.maybeHandleIOException``):
whatever the cause, the directory is reported to the ``LogDirFailureChannel``; the same happens here with
the ``OSError`` these calls raise (see ``Log`` and ``ReplicaManager``).
"""

from __future__ import annotations

import errno as _errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OS_FILE_OPS", "DiskFaults", "FaultRule", "FileOps"]


class FileOps:
    """The real thing: each method is the ``os`` call of the same name (no wrapper, no cost)."""

    open = staticmethod(os.open)
    write = staticmethod(os.write)
    writev = staticmethod(os.writev)
    pwrite = staticmethod(os.pwrite)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    replace = staticmethod(os.replace)

    def write_file(self, path: Path, data: bytes, *, sync: bool = True) -> None:
        """Write ``path`` whole (created or emptied first); fsync it when ``sync``."""
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[self.write(fd, view) :]
            if sync:
                self.fsync(fd)
        finally:
            os.close(fd)

    def append_file(self, path: Path, data: bytes) -> None:
        """Append ``data`` to ``path`` (created if missing)."""
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[self.write(fd, view) :]
        finally:
            os.close(fd)

    def fsync_dir(self, path: Path) -> None:
        """fsync a directory so a rename inside it survives a crash."""
        fd = os.open(path, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    def replace_atomically(self, path: Path, data: bytes, *, sync: bool = True) -> None:
        """Kafka's checkpoint write: ``<name>.tmp``, fsync, rename over ``path``, fsync the directory."""
        tmp = path.with_name(path.name + ".tmp")
        self.write_file(tmp, data, sync=sync)
        self.replace(tmp, path)
        if sync:
            self.fsync_dir(path.parent)


OS_FILE_OPS = FileOps()

_WRITES = ("write", "writev", "pwrite")
_ALL = (*_WRITES, "fsync", "ftruncate", "replace", "open")


@dataclass
class FaultRule:
    """One planned failure: ``error`` (an errno) for the matching calls.

    ``under``: only files inside this directory (None: any). ``ops``: which calls (names of ``FileOps``
    methods). ``after_bytes``: let this many bytes of matching writes through first (the write that
    crosses the limit writes what fits, as a filling disk does, and the next one fails). ``on_call``: fail
    from the Nth matching call on (1 = the first). ``times``: how many failures before the rule is spent
    (None: until ``DiskFaults.clear``).
    """

    error: int
    under: Path | None = None
    ops: tuple[str, ...] = _ALL
    after_bytes: int | None = None
    on_call: int | None = None
    times: int | None = None
    calls: int = 0
    written: int = 0
    failed: int = 0

    def matches(self, op: str, path: str | None) -> bool:
        if op not in self.ops or (self.times is not None and self.failed >= self.times):
            return False
        return self.under is None or (path is not None and _inside(path, self.under))


def _inside(path: str, root: Path) -> bool:
    r = str(root)
    return path == r or path.startswith(r.rstrip("/") + "/")


class DiskFaults(FileOps):
    """A ``FileOps`` whose calls fail as planned: ``fail`` adds a rule, ``clear`` frees the disk again.

    The errors are real ``OSError``s with real errnos, raised where the kernel would raise them, so the
    code above cannot tell them from a full or broken disk. ``failures`` lists what failed, in order.
    """

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.failures: list[tuple[str, str | None, int]] = []  # (op, path, errno)
        self._paths: dict[int, str] = {}  # fd -> the path it was opened with

    # ----- planning ---------------------------------------------------------------------------------
    def fail(
        self,
        error: int = _errno.ENOSPC,
        *,
        under: str | os.PathLike | None = None,
        ops: Sequence[str] | None = None,
        after_bytes: int | None = None,
        on_call: int | None = None,
        times: int | None = None,
    ) -> FaultRule:
        """Plan failures with ``error`` (``errno.ENOSPC``, ``errno.EIO``, ...); see ``FaultRule``."""
        if ops is None:
            ops = _WRITES + ("fsync", "ftruncate", "open") if after_bytes is None else _WRITES
        unknown = set(ops) - set(_ALL)
        if unknown:
            raise ValueError(f"unknown file operations {sorted(unknown)}; choose from {list(_ALL)}")
        rule = FaultRule(
            error,
            Path(os.path.abspath(under)) if under is not None else None,
            tuple(ops),
            after_bytes,
            on_call,
            times,
        )
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Forget every rule: the disk has room again (or was replaced)."""
        self.rules.clear()

    # ----- the checks -------------------------------------------------------------------------------
    def _allowance(self, op: str, path: str | None, size: int) -> int:
        """How many of ``size`` bytes may go through; raises the planned error when none may."""
        allowed = size
        for rule in self.rules:
            if not rule.matches(op, path):
                continue
            rule.calls += 1
            # With no threshold at all, every matching call fails.
            fire = rule.calls >= rule.on_call if rule.on_call is not None else rule.after_bytes is None
            if rule.after_bytes is not None:
                room = max(0, rule.after_bytes - rule.written)
                if room == 0:
                    fire = True
                elif not fire:
                    allowed = min(allowed, room)
            if fire:
                rule.failed += 1
                self.failures.append((op, path, rule.error))
                raise OSError(rule.error, os.strerror(rule.error), path)
        for rule in self.rules:
            if rule.after_bytes is not None and rule.matches(op, path):
                rule.written += allowed
        return allowed

    def _path(self, fd: int) -> str | None:
        return self._paths.get(fd)

    # ----- FileOps ----------------------------------------------------------------------------------
    def open(self, path, flags: int, mode: int = 0o777, *, dir_fd=None) -> int:  # type: ignore[override]
        p = os.path.abspath(path)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            self._allowance("open", p, 0)
        fd = os.open(path, flags, mode)
        self._paths[fd] = p
        return fd

    def write(self, fd: int, data) -> int:  # type: ignore[override]
        n = self._allowance("write", self._path(fd), len(data))
        if n < len(data):
            return os.write(fd, memoryview(data)[:n])
        return os.write(fd, data)

    def writev(self, fd: int, buffers: Iterable) -> int:  # type: ignore[override]
        bufs = list(buffers)
        total = sum(len(b) for b in bufs)
        n = self._allowance("writev", self._path(fd), total)
        if n < total:
            return os.write(fd, b"".join(bytes(b) for b in bufs)[:n])
        return os.writev(fd, bufs)

    def pwrite(self, fd: int, data, offset: int) -> int:  # type: ignore[override]
        n = self._allowance("pwrite", self._path(fd), len(data))
        return os.pwrite(fd, memoryview(data)[:n], offset)

    def fsync(self, fd: int) -> None:  # type: ignore[override]
        self._allowance("fsync", self._path(fd), 0)
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:  # type: ignore[override]
        self._allowance("ftruncate", self._path(fd), 0)
        os.ftruncate(fd, length)

    def replace(self, src, dst) -> None:  # type: ignore[override]
        self._allowance("replace", os.path.abspath(dst), 0)
        os.replace(src, dst)
