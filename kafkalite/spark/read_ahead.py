"""``read_ahead``: a task's reading and decoding run one step ahead of Spark taking the batches.

A Python data source task does two things in turn: it makes the next Arrow batch (read the log or fetch
from the broker, check CRCs, decode records) and it hands that batch to Spark (Arrow IPC to the executor's
JVM). Both mostly run outside the GIL (file and socket I/O, numpy, pyarrow), so with the making moved to
a thread the two overlap on two cores, as they do in wire mode where the broker's own process reads the
log. A bounded queue keeps at most ``depth`` batches in memory.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

__all__ = ["read_ahead"]

_DONE = object()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield what ``items`` yields, in order, computed up to ``depth`` items ahead in a thread. An
    exception in ``items`` is raised here at the point it happened; closing this generator early stops
    the thread at its next item (and closes ``items`` there)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put(item):
                    break
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, who raises it
            put(_Failed(e))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        put(_DONE)

    worker = threading.Thread(target=run, name="kafkalite-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)
