"""``ForwardingManager`` on its own, with a fake network and clock: which answers send a forwarded
request on to the controller the broker now knows, and which go back to the client."""

from __future__ import annotations

from typing import Any

from kafkalite.broker.forwarding_manager import RETRY_BACKOFF_MS, ForwardingManager
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope
from kafkalite.protocol.raft import (
    DescribeQuorumPartition,
    DescribeQuorumPartitionResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from kafkalite.raft.kafka_raft_client import METADATA_TP

NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT = 6, 7


class _Fake:
    def __init__(self) -> None:
        self.now = 0
        self.controller: int | None = 1
        self.sent: list[tuple[Any, Any]] = []
        self.timers: list[tuple[int, Any]] = []
        self.fm = ForwardingManager(9, lambda: self.controller, self._send, self._timer, lambda: self.now)

    def _send(self, dst: Any, msg: Any) -> None:
        self.sent.append((dst, msg))

    def _timer(self, delay: int, fn: Any) -> int:
        self.timers.append((self.now + delay, fn))
        return len(self.timers)

    def advance(self, ms: int) -> None:
        self.now += ms
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, fn in due:
            fn(self.now)


def _describe() -> RequestEnvelope:
    return RequestEnvelope(
        5, "tool", DescribeQuorumRequest(partitions=(DescribeQuorumPartition(tp=METADATA_TP),))
    )


def _answer(error: int, leader: int = -1) -> DescribeQuorumResponse:
    part = DescribeQuorumPartitionResponse(tp=METADATA_TP, error_code=error, leader_id=leader, leader_epoch=4)
    return DescribeQuorumResponse(partitions=(part,))


def test_describe_quorum_is_retried_at_the_new_leader_after_not_leader_or_follower() -> None:
    f = _Fake()
    f.fm.forward("client", _describe())
    ((dst, fwd),) = f.sent
    assert dst == 1 and isinstance(fwd.request, DescribeQuorumRequest)
    f.controller = 2  # the broker has learned of a new quorum leader meanwhile
    assert f.fm.on_response(ResponseEnvelope(fwd.correlation_id, _answer(NOT_LEADER_OR_FOLLOWER)))
    assert len(f.sent) == 1, "not relayed to the client"
    f.advance(RETRY_BACKOFF_MS)
    dst, again = f.sent[-1]
    assert dst == 2 and again.request == fwd.request and again.correlation_id != fwd.correlation_id
    assert f.fm.on_response(ResponseEnvelope(again.correlation_id, _answer(0, leader=2)))
    dst, back = f.sent[-1]
    assert dst == "client" and back.correlation_id == 5 and back.response == _answer(0, leader=2)


def test_describe_quorum_times_out_with_a_top_level_error() -> None:
    f = _Fake()
    f.controller = None  # no leader known, ever
    f.fm.forward("client", _describe())
    for _ in range(400):
        f.advance(RETRY_BACKOFF_MS)
    dst, back = f.sent[-1]
    assert dst == "client" and back.response == DescribeQuorumResponse(error_code=REQUEST_TIMED_OUT)
