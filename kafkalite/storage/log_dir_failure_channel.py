"""Kafka's ``LogDirFailureChannel``: where the log layer reports a log directory whose disk failed.

A ``Log`` that gets an ``OSError`` from its files (a full disk, an I/O error) does not try to go on: it
reports its log directory here, refuses every later write, and raises ``KafkaStorageError`` (Kafka's
``KAFKA_STORAGE_ERROR``, 56) to its caller, so the request that hit the failure is answered with that
error and never acknowledged. The broker's ``ReplicaManager`` listens: it takes the directory offline,
stops serving the replicas in it, tells the controller (which moves their leadership to other replicas)
and halts the broker when no directory is left, as Kafka's ``ReplicaManager.handleLogDirFailure`` and
``LogManager.handleLogDirFailure`` do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["LogDirFailureChannel"]


class LogDirFailureChannel:
    """Offline log directories, each reported once; ``listener(dir, message)`` hears of each new one."""

    def __init__(self, listener: Callable[[Path, str], None] | None = None) -> None:
        self.offline: dict[Path, str] = {}  # dir -> why it went offline
        self.listener = listener

    def has_offline(self, dir: str | os.PathLike) -> bool:
        return Path(dir) in self.offline

    def maybe_add_offline_log_dir(self, dir: str | os.PathLike, message: str, error: BaseException) -> None:
        """Report ``dir`` as failed (``message`` says during what, ``error`` is the cause); the first
        report of a directory reaches the listener, later ones are ignored."""
        path = Path(dir)
        if path in self.offline:
            return
        why = f"{message}: {error}"
        self.offline[path] = why
        if self.listener is not None:
            self.listener(path, why)
