"""``AssignmentsManager``: a KRaft broker tells the controller in which log dir it keeps each replica
(KIP-858, Kafka's ``AssignmentsManager``).

A partition placed on a broker with several log dirs is written unassigned: the broker picks the dir when
it creates the log. The controller must learn that choice, or it cannot tell which partitions a failed
dir takes offline. After each metadata update the broker hands this manager the replicas whose
registration names another dir than the one holding their log; it sends them to the active controller
in one AssignReplicasToDirs, one request at a time, again after a backoff when the request fails or goes
unanswered. The controller's PartitionChangeRecords then bring the registrations in line, and the next
update hands over nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafkalite.protocol.api import NO_ERROR
from kafkalite.protocol.broker_lifecycle import (
    AssignDirectory,
    AssignPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignTopic,
)
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope

RETRY_BACKOFF_MS = 500
REQUEST_TIMEOUT_MS = 5000

Replica = tuple[uuid.UUID, int]
"""(topic id, partition index)"""


class AssignmentsManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller: Callable[[], int | None],
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], Any]], int],
        cancel_timer: Callable[[int], Any],
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch, self._controller = broker_epoch, controller
        self._send, self._set_timer, self._cancel_timer = send, set_timer, cancel_timer
        self._wanted: dict[Replica, uuid.UUID] = {}
        self._acked: dict[Replica, uuid.UUID] = {}
        """Assignments the controller accepted, not yet seen in the replayed metadata: not sent again."""
        self._cid = 0
        self._inflight: int | None = None
        self._timer: int | None = None
        self.sent = 0
        """AssignReplicasToDirs requests sent (for tests)."""

    def reconcile(self, wanted: Mapping[Replica, uuid.UUID]) -> None:
        """``wanted``: every replica whose registered dir differs from the dir holding its log."""
        self._wanted = dict(wanted)
        self._acked = {k: d for k, d in self._acked.items() if self._wanted.get(k) == d}
        self._maybe_send()

    def close(self) -> None:
        if self._timer is not None:
            self._cancel_timer(self._timer)
        self._timer = self._inflight = None

    def _todo(self) -> dict[Replica, uuid.UUID]:
        return {k: d for k, d in self._wanted.items() if self._acked.get(k) != d}

    def _retry(self, delay_ms: int) -> None:
        if self._timer is not None:
            self._cancel_timer(self._timer)
        self._timer = self._set_timer(delay_ms, self._on_timer)

    def _on_timer(self, _now: int) -> None:
        self._timer = None
        self._inflight = None  # unanswered: ask again
        self._maybe_send()

    def _maybe_send(self) -> None:
        if self._inflight is not None:
            return
        todo = self._todo()
        if not todo:
            return
        dst, epoch = self._controller(), self._broker_epoch()
        if dst is None or epoch < 0:
            self._retry(RETRY_BACKOFF_MS)
            return
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (tid, p), d in sorted(todo.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            by_dir.setdefault(d, {}).setdefault(tid, []).append(p)
        req = AssignReplicasToDirsRequest(
            broker_id=self.broker_id,
            broker_epoch=epoch,
            directories=tuple(
                AssignDirectory(
                    id=d,
                    topics=tuple(
                        AssignTopic(
                            topic_id=tid, partitions=tuple(AssignPartition(partition_index=p) for p in ps)
                        )
                        for tid, ps in topics.items()
                    ),
                )
                for d, topics in by_dir.items()
            ),
        )
        self._cid += 1
        self._inflight = self._cid
        self.sent += 1
        self._send(dst, RequestEnvelope(self._cid, f"broker-{self.broker_id}-assignments", req))
        self._retry(REQUEST_TIMEOUT_MS)

    def on_response(self, env: ResponseEnvelope) -> bool:
        """An answer to an AssignReplicasToDirs; False if it is not one."""
        resp = env.response
        if not isinstance(resp, AssignReplicasToDirsResponse):
            return False
        if env.correlation_id != self._inflight:
            return True  # an answer to a request given up on
        self._inflight = None
        if resp.error_code != NO_ERROR:  # not the controller, a stale epoch: after a backoff
            self._retry(RETRY_BACKOFF_MS)
            return True
        if self._timer is not None:
            self._cancel_timer(self._timer)
            self._timer = None
        for d in resp.directories:
            for t in d.topics:
                for p in t.partitions:
                    # an error (the replica moved off this broker meanwhile) is not worth asking again
                    # either: the next metadata update says what is wanted then
                    self._acked[(t.topic_id, p.partition_index)] = d.id
        self._maybe_send()
        return True


__all__ = ["AssignmentsManager"]
