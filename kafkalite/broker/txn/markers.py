"""The partition leaders' side of WriteTxnMarkers (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``).

A transaction coordinator sends each leader the COMMIT or ABORT markers of the transactions that wrote to
its partitions. The leader appends one control batch per partition through the replica manager's internal
append with acks=all (Kafka waits for the ISR before the coordinator completes the transaction), calls
``on_txn_marker`` for each marker written (the group coordinator completes the producer's transactional
offsets in ``__consumer_offsets``), and answers with each partition's outcome once all are known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol import (
    NO_ERROR,
    PartitionError,
    RequestEnvelope,
    TopicPartition,
    TxnMarkerResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkalite.records import build_control_batch

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager


def write_txn_markers(rm: ReplicaManager, env: RequestEnvelope, src: Any) -> None:
    """Append the markers of ``env``'s WriteTxnMarkers as the leader; answer ``src`` when all are done."""
    req: WriteTxnMarkersRequest = env.request  # type: ignore[assignment]
    results: list[dict[TopicPartition, int]] = [{} for _ in req.markers]
    waiting = sum(len(m.partitions) for m in req.markers)

    def reply() -> None:
        markers = tuple(
            TxnMarkerResult(
                producer_id=m.producer_id,
                partitions=tuple(PartitionError(tp=tp, error_code=r[tp]) for tp in m.partitions),
            )
            for m, r in zip(req.markers, results, strict=True)
        )
        rm._send(src, env.reply(WriteTxnMarkersResponse(markers=markers)))

    if waiting == 0:
        reply()
        return
    left = [waiting]
    now = rm.clock.now_ms()
    for i, m in enumerate(req.markers):
        batch = build_control_batch(m.committed, m.producer_id, m.producer_epoch, m.coordinator_epoch, now)
        for tp in m.partitions:

            def done(part: Any, i: int = i, tp: TopicPartition = tp, m: Any = m) -> None:
                results[i][tp] = part.error_code
                if part.error_code == NO_ERROR and rm.on_txn_marker is not None:
                    rm.on_txn_marker(tp, m.producer_id, m.committed)
                left[0] -= 1
                if left[0] == 0:
                    reply()

            rm.append_records(tp, batch, done, acks=-1, client_id="txn-markers")


__all__ = ["write_txn_markers"]
