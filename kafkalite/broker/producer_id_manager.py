"""Producer ids for idempotent producers, handed out in blocks claimed from the coordination store.

Kafka's ZooKeeper-mode ``ProducerIdManager``: a broker claims the next block of 1,000 ids by a versioned
write of ``/latest_producer_id_block`` (``{"version":1,"broker":N,"block_start":"S","block_end":"E"}``,
the bounds as strings, as Kafka writes them). Two brokers racing for a block cannot both win the write,
so no id is ever given twice, across brokers and restarts.
"""

from __future__ import annotations

import json
from typing import Any

from kafkalite.coordination.store import BadVersion, NodeExists, NoNode
from kafkalite.errors import CoordinatorNotAvailableError

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000
_CLAIM_ATTEMPTS = 10


def encode_block(broker_id: int, start: int, end: int) -> bytes:
    doc = {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_block(data: bytes) -> tuple[int, int, int]:
    """``(broker, block_start, block_end)`` of a ``/latest_producer_id_block`` value."""
    try:
        doc = json.loads(data)
        return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{PRODUCER_ID_BLOCK_PATH}: not a producer id block ({exc}): {data[:80]!r}"
        ) from None


class ProducerIdManager:
    """Gives out producer ids from this broker's current block, claiming a new block when it runs out."""

    def __init__(self, zk: Any, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._next = 0
        self._end = -1  # inclusive; no block yet

    def generate(self) -> int:
        if self._next > self._end:
            self._claim_block()
        pid = self._next
        self._next += 1
        return pid

    def _claim_block(self) -> None:
        for _ in range(_CLAIM_ATTEMPTS):
            try:
                data, stat = self.zk.get(PRODUCER_ID_BLOCK_PATH)
            except NoNode:
                start = 0
                try:
                    self.zk.create(
                        PRODUCER_ID_BLOCK_PATH, encode_block(self.broker_id, 0, self.block_size - 1)
                    )
                except NodeExists:
                    continue  # another broker claimed the first block; read it and go on from there
            else:
                start = decode_block(data)[2] + 1
                try:
                    self.zk.set(
                        PRODUCER_ID_BLOCK_PATH,
                        encode_block(self.broker_id, start, start + self.block_size - 1),
                        version=stat.version,
                    )
                except BadVersion:
                    continue
            self._next, self._end = start, start + self.block_size - 1
            return
        raise CoordinatorNotAvailableError("could not claim a producer id block: too much contention")
