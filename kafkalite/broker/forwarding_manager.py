"""``ForwardingManager``: a KRaft broker passes the admin requests only the controller can carry out
(CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs, CreateAcls, DeleteAcls,
AlterUserScramCredentials, ElectLeaders, Alter- and ListPartitionReassignments) on to the active controller and relays the answer
(Kafka's ``ForwardingManager``, KIP-590), so a client never needs to reach a controller. DescribeQuorum
goes the same way: only the quorum's leader can answer it (Kafka's brokers forward it too, which is what
``kafka-metadata-quorum --bootstrap-server`` relies on).

An answer of NOT_CONTROLLER (for DescribeQuorum: NOT_LEADER_OR_FOLLOWER, the Raft client's word for it),
or none within ``REQUEST_TIMEOUT_MS``, sends the request again to the controller the broker now knows,
until the request's own timeout; then the client gets REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.errors import NotControllerError, NotLeaderOrFollowerError, RequestTimedOutError
from kafkalite.protocol import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkalite.protocol.envelope import RequestEnvelope, ResponseEnvelope
from kafkalite.protocol.error_response import error_response
from kafkalite.protocol.raft import DescribeQuorumRequest, DescribeQuorumResponse
from kafkalite.protocol.security_admin import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
)

FORWARDED = (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    AlterUserScramCredentialsRequest,
    DescribeQuorumRequest,
    CreatePartitionsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
FORWARDING_CLIENT_SUFFIX = "-forwarding"
"""How a forwarded request's client id ends (``broker-1-forwarding``): a combined node's controller takes
those, its broker the clients' own."""
REQUEST_TIMEOUT_MS = 2000
RETRY_BACKOFF_MS = 100


class ForwardingManager:
    def __init__(
        self,
        broker_id: int,
        controller: Callable[[], int | None],
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], Any]], int],
        now_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self._controller = controller
        self._send = send
        self._set_timer = set_timer
        self._now = now_ms
        self._cid = 0
        self._pending: dict[int, tuple[Any, RequestEnvelope, int]] = {}  # our cid -> (client, env, deadline)

    def forward(self, src: Any, env: RequestEnvelope) -> None:
        timeout = getattr(env.request, "timeout_ms", 30_000)
        self._attempt(src, env, self._now() + max(timeout, REQUEST_TIMEOUT_MS))

    def _attempt(self, src: Any, env: RequestEnvelope, deadline: int) -> None:
        if self._now() >= deadline:
            self._send(src, env.reply(error_response(env.request, RequestTimedOutError.code)))
            return
        dst = self._controller()
        if dst is None:
            self._set_timer(RETRY_BACKOFF_MS, lambda _now: self._attempt(src, env, deadline))
            return
        self._cid += 1
        cid = self._cid
        self._pending[cid] = (src, env, deadline)
        self._send(
            dst, RequestEnvelope(cid, f"broker-{self.broker_id}{FORWARDING_CLIENT_SUFFIX}", env.request)
        )
        self._set_timer(REQUEST_TIMEOUT_MS, lambda _now: self._timed_out(cid))

    def _timed_out(self, cid: int) -> None:
        got = self._pending.pop(cid, None)
        if got is not None:
            self._attempt(*got)

    def on_response(self, env: ResponseEnvelope) -> bool:
        """An answer to a forwarded request; False if it is not one."""
        got = self._pending.get(env.correlation_id)
        if got is None or not isinstance(env.response, _RESPONSES):
            return False
        del self._pending[env.correlation_id]
        src, client_env, deadline = got
        if _not_controller(env.response):
            self._set_timer(RETRY_BACKOFF_MS, lambda _now: self._attempt(src, client_env, deadline))
        else:
            self._send(src, client_env.reply(env.response))
        return True


_RESPONSES = tuple(r.response_type for r in FORWARDED)


def _not_controller(resp: Any) -> bool:
    if isinstance(resp, DescribeQuorumResponse):
        parts = resp.partitions
        return bool(parts) and all(p.error_code == NotLeaderOrFollowerError.code for p in parts)
    code = NotControllerError.code
    if getattr(resp, "error_code", 0) == code:
        return True
    items = (
        getattr(resp, "topics", None)
        or getattr(resp, "results", None)
        or getattr(resp, "filter_results", None)
        or ()
    )
    return bool(items) and all(getattr(i, "error_code", 0) == code for i in items)
