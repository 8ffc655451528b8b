"""``RPCProducerIdManager``: a KRaft broker's producer ids, from blocks the active controller hands out
(AllocateProducerIds, KIP-730), as Kafka's.

The broker asks for the next block before the current one runs out (at 90% used) so InitProducerId
rarely waits; with no block at hand ``generate`` raises COORDINATOR_NOT_AVAILABLE (the producer retries)
and a request for one goes out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.errors import CoordinatorNotAvailableError
from kafkalite.protocol.broker_lifecycle import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope

PREFETCH_AT = 0.9
REQUEST_TIMEOUT_MS = 1000
"""A block request unanswered this long (its controller died) is sent again, maybe elsewhere."""


class RPCProducerIdManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller: Callable[[], int | None],
        send: Callable[[Any, Any], Any],
        now_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller = controller
        self._send = send
        self._now = now_ms
        self._sent_at = 0
        self._blocks: list[tuple[int, int]] = []  # [next id, end exclusive), current first
        self._cid = 0
        self._inflight: int | None = None

    def generate(self) -> int:
        while self._blocks and self._blocks[0][0] >= self._blocks[0][1]:
            self._blocks.pop(0)
        if not self._blocks:
            self._request()
            raise CoordinatorNotAvailableError("no producer id block from the controller yet")
        nxt, end = self._blocks[0]
        self._blocks[0] = (nxt + 1, end)
        if len(self._blocks) == 1 and (nxt + 1 - (end - self._size)) >= PREFETCH_AT * self._size:
            self._request()
        return nxt

    _size = 1000

    def prefetch(self) -> None:
        """Ask for a first block now (the broker just registered), so the first InitProducerId finds one."""
        if not self._blocks:
            self._request()

    def _request(self) -> None:
        dst = self._controller()
        if self._inflight is not None and self._now() - self._sent_at < REQUEST_TIMEOUT_MS:
            return
        if dst is None or dst < 0 or self._broker_epoch() < 0:
            return
        self._sent_at = self._now()
        self._cid += 1
        self._inflight = self._cid
        req = AllocateProducerIdsRequest(broker_id=self.broker_id, broker_epoch=self._broker_epoch())
        self._send(dst, RequestEnvelope(self._cid, f"broker-{self.broker_id}-pid", req))

    def on_response(self, env: ResponseEnvelope) -> bool:
        resp = env.response
        if not isinstance(resp, AllocateProducerIdsResponse):
            return False
        if env.correlation_id == self._inflight:
            self._inflight = None
            if resp.error_code == 0 and resp.producer_id_len > 0:
                self._size = resp.producer_id_len
                self._blocks.append((resp.producer_id_start, resp.producer_id_start + resp.producer_id_len))
        return True
