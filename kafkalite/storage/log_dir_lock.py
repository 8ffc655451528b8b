"""The ``.lock`` file a broker holds in each of its log directories, as Kafka's ``LogManager`` does.

A broker takes an exclusive, non-blocking ``flock`` on ``<dir>/.lock`` before it opens any log there and
keeps it until a clean shutdown; when the process dies the kernel drops the lock with the file
descriptor, so a crash never leaves a directory locked. Two brokers (or a broker and an outside writer
such as the Spark sink's path mode) can therefore never write one directory at once: the second is
refused with an error naming the directory.

``flock`` locks belong to an open file description, so a second ``LogDirLock`` on the same directory is
refused even inside the same process (two broker objects of one simulation on one dir, say).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

LOCK_FILE = ".lock"

__all__ = ["LOCK_FILE", "LogDirInUseError", "LogDirLock", "is_locked", "lock_log_dirs"]


class LogDirInUseError(RuntimeError):
    """Another broker (process or thread) holds ``<dir>/.lock``. Not a protocol error: it stops a broker
    from starting (Kafka throws a plain KafkaException), so it carries no Kafka error code."""


def _in_use(directory: Path) -> LogDirInUseError:
    return LogDirInUseError(
        f"Failed to acquire lock on file {LOCK_FILE} in {directory}: a broker in another process or "
        "thread is using this log directory"
    )


class LogDirLock:
    """An exclusive lock on ``<directory>/.lock``; ``acquire`` raises ``LogDirInUseError`` if it is held."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.file = self.dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> LogDirLock:
        if self._fd is not None:
            return self
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _in_use(self.dir) from None
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        """Unlock and close; the file stays (Kafka leaves its ``.lock`` files too)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> LogDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LogDirLock({str(self.dir)!r}, held={self.held})"


def lock_log_dirs(dirs: Iterable[str | Path]) -> list[LogDirLock]:
    """Lock every dir a broker is about to open (creating missing ones); all or none.

    A dir that cannot be created or opened is skipped: the replica manager reports it offline with the
    reason (Kafka's log dir failure), so only a lock held by someone else stops the broker here."""
    held: list[LogDirLock] = []
    try:
        for d in dirs:
            lock = LogDirLock(d)
            try:
                lock.dir.mkdir(parents=True, exist_ok=True)
                lock.acquire()
            except LogDirInUseError:
                raise
            except OSError:
                continue
            held.append(lock)
    except BaseException:
        for lock in held:
            lock.release()
        raise
    return held


def is_locked(directory: str | Path) -> bool:
    """Whether some broker (any process) holds ``<directory>/.lock`` right now; probes without waiting."""
    path = Path(directory) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)  # closing drops the probe's own lock, if it got one
    return False
