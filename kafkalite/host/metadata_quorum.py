"""``kafka-metadata-quorum`` for kafkalite: DescribeQuorum (API 55) served by a controller process over
Kafka's wire protocol, and the tool's ``describe --status`` / ``--replication`` views of the answer.

A controller process's Kafka listener (its ``listeners`` entry) answers ApiVersions, DescribeCluster (the
cluster id and the active controller, as Kafka's controllers do for ``--bootstrap-controller`` clients,
KIP-919) and DescribeQuorum, which only the quorum's leader answers; the others say
NOT_LEADER_OR_FOLLOWER, so the tool tries each bootstrap controller in turn. DescribeQuorum v0-v1 are served
(v2 adds directory ids and endpoints, KIP-853, which kafkalite's static quorum does not have).

With ``--bootstrap-server`` the tool asks a KRaft broker instead, which forwards the request to the active
controller (``ForwardingManager``) and relays the leader's answer, as Kafka's brokers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Any

from kafkalite.protocol.codec.binding import from_wire, to_wire
from kafkalite.protocol.codec.header import (
    API_VERSIONS_KEY,
    decode_response,
    encode_request,
    encode_response,
    spec_for,
)
from kafkalite.protocol.codec.messages import DESCRIBE_QUORUM
from kafkalite.protocol.codec.types import Reader
from kafkalite.protocol.error_response import UNKNOWN_SERVER_ERROR
from kafkalite.protocol.metadata import DescribeClusterRequest, DescribeClusterResponse
from kafkalite.protocol.raft import (
    DescribeQuorumPartition,
    DescribeQuorumPartitionResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from kafkalite.raft.kafka_raft_client import METADATA_TP

_SIZE = struct.Struct(">i")
DESCRIBE_CLUSTER_KEY = 60
NOT_LEADER_OR_FOLLOWER = 6
_ADVERTISED = (
    (API_VERSIONS_KEY, 0, 3),
    (DESCRIBE_CLUSTER_KEY, 0, 1),
    (DESCRIBE_QUORUM.api_key, DESCRIBE_QUORUM.min_version, DESCRIBE_QUORUM.max_version),
)


class ControllerListener:
    """The Kafka-protocol side of a controller process: ``describe`` gives the quorum as this node sees it
    (its Raft client's answer), ``cluster`` the (cluster id, active controller id)."""

    def __init__(
        self, describe: Callable[[], DescribeQuorumResponse], cluster: Callable[[], tuple[str, int]]
    ):
        self.describe, self.cluster = describe, cluster
        self._server: asyncio.base_events.Server | None = None

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 0 < size <= 1 << 20:
                    return
                frame = await reader.readexactly(size)
                out = self.answer(frame)
                if out is None:  # an API a controller does not serve here: close, as Kafka does
                    return
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def answer(self, frame: bytes) -> bytes | None:
        r = Reader(frame)
        api_key, version, corr = r.int16(), r.int16(), r.int32()
        r.string(nullable=True)  # client id
        if api_key == API_VERSIONS_KEY:
            keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in _ADVERTISED]
            body = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
            return encode_response(API_VERSIONS_KEY, min(version, 3), corr, body)
        if api_key == DESCRIBE_CLUSTER_KEY and spec_for(api_key, version) is not None:
            cluster_id, controller = self.cluster()
            resp = DescribeClusterResponse(cluster_id=cluster_id, controller_id=controller)
            return encode_response(api_key, version, corr, to_wire(resp, version))
        if api_key == DESCRIBE_QUORUM.api_key and spec_for(api_key, version) is not None:
            return encode_response(api_key, version, corr, to_wire(self.describe(), version))
        return None


# ------------------------------------------------------------------------------------- the client side


def _exchange(sock: socket.socket, api_key: int, version: int, corr: int, body: dict) -> dict:
    sock.sendall(encode_request(api_key, version, corr, "kafkalite-metadata-quorum", body))
    (size,) = _SIZE.unpack(_read(sock, 4))
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        buf += chunk
    return bytes(buf)


def describe_quorum(address: tuple[str, int], timeout_s: float = 10.0) -> tuple[str, Any]:
    """(cluster id, the quorum's ``DescribeQuorumPartitionResponse``) as the node at ``address`` answers:
    a controller (``error_code`` NOT_LEADER_OR_FOLLOWER when it does not lead) or a KRaft broker, which
    forwards the request to the active controller. A top-level error (a broker's REQUEST_TIMED_OUT,
    CLUSTER_AUTHORIZATION_FAILED) comes back as the partition's. A node whose ApiVersions does not list
    DescribeQuorum v1 (a ZooKeeper-mode broker) raises ``ValueError``, as Kafka's admin client refuses to
    send a request the node does not support."""
    with socket.create_connection(address, timeout=timeout_s) as sock:
        hello = {"client_software_name": "kafkalite-metadata-quorum", "client_software_version": "1"}
        apis = {a["api_key"]: a for a in _exchange(sock, API_VERSIONS_KEY, 3, 0, hello)["api_keys"]}
        dq = apis.get(DESCRIBE_QUORUM.api_key)
        if dq is None or not dq["min_version"] <= 1 <= dq["max_version"]:
            raise ValueError("it does not serve DescribeQuorum (API 55): not a KRaft broker or controller")
        cluster = _exchange(sock, DESCRIBE_CLUSTER_KEY, 0, 1, to_wire(DescribeClusterRequest(), 0))
        req = DescribeQuorumRequest(partitions=(DescribeQuorumPartition(tp=METADATA_TP),))
        body = _exchange(sock, DESCRIBE_QUORUM.api_key, 1, 2, to_wire(req, 1))
    resp = from_wire(DescribeQuorumResponse, body, 1)
    if resp.error_code or not resp.partitions:
        code = resp.error_code or UNKNOWN_SERVER_ERROR
        return cluster["cluster_id"], DescribeQuorumPartitionResponse(tp=METADATA_TP, error_code=code)
    return cluster["cluster_id"], resp.partitions[0]


def status_lines(cluster_id: str, part: Any, now_ms: int) -> list[tuple[str, str]]:
    """``describe --status``: Kafka's fields, in its order."""
    leo = {r.replica_id: r.log_end_offset for r in part.current_voters}
    caught = {r.replica_id: r.last_caught_up_timestamp for r in part.current_voters}
    leader_leo = leo.get(part.leader_id, part.high_watermark)
    lag = max((leader_leo - o for o in leo.values()), default=0)
    lag_ms = max(
        (now_ms - t if t >= 0 else now_ms for r, t in caught.items() if r != part.leader_id), default=0
    )
    return [
        ("ClusterId", cluster_id),
        ("LeaderId", str(part.leader_id)),
        ("LeaderEpoch", str(part.leader_epoch)),
        ("HighWatermark", str(part.high_watermark)),
        ("MaxFollowerLag", str(lag)),
        ("MaxFollowerLagTimeMs", str(lag_ms if lag else 0)),
        ("CurrentVoters", "[" + ",".join(str(r.replica_id) for r in part.current_voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(r.replica_id) for r in part.observers) + "]"),
    ]


def replication_rows(part: Any) -> list[tuple[Any, ...]]:
    """``describe --replication``: NodeId, LogEndOffset, Lag, LastFetchTimestamp, LastCaughtUpTimestamp,
    Status (Leader, Follower or Observer), leader first."""
    leader_leo = next(
        (r.log_end_offset for r in part.current_voters if r.replica_id == part.leader_id), part.high_watermark
    )
    rows = []
    for status, group in (("Follower", part.current_voters), ("Observer", part.observers)):
        for r in group:
            st = "Leader" if r.replica_id == part.leader_id else status
            rows.append((r.replica_id, r.log_end_offset, max(0, leader_leo - r.log_end_offset),
                         r.last_fetch_timestamp, r.last_caught_up_timestamp, st))  # fmt: skip
    rows.sort(key=lambda row: (row[5] != "Leader", row[5] == "Observer", row[0]))
    return rows


__all__ = ["ControllerListener", "DESCRIBE_QUORUM", "describe_quorum", "replication_rows", "status_lines"]
