"""kafkalite's brokers on real TCP sockets, speaking Kafka's protocol to real clients.

One asyncio event loop (no thread per connection) runs the listeners and drives the same sans-I/O nodes
the book runs in the simulator: the cluster's ``SimNetwork`` is advanced to the wall clock (its virtual
clock starts at the epoch milliseconds of start-up and is kept level with real time by ``_pump``), so
brokers, controller, coordinators and the ZooKeeper-like store behave exactly as in every chapter, only
in real time. Each TCP connection is a node of that network: a decoded request goes to its broker as a
``RequestEnvelope`` and the broker's ``ResponseEnvelope`` comes back to the connection, which encodes it.

Per connection, responses go out in request order (Kafka clients rely on it) though the broker may
finish them out of order (an acks=all produce waits for the followers, a metadata request does not);
a produce with acks=0 gets no response at all, as in Kafka. A frame larger than
``socket.request.max.bytes``, or one that does not decode, closes that connection and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from kafkalite.config.base import parse_int
from kafkalite.errors import KafkaStorageError
from kafkalite.host.cluster import Cluster
from kafkalite.host.prometheus import LoopIdle, MetricsEndpoint
from kafkalite.net.sim import BaseNode
from kafkalite.protocol import RequestEnvelope, ResponseEnvelope
from kafkalite.protocol.codec.adapter import api_versions_body, to_body, to_request
from kafkalite.protocol.codec.header import (
    API_VERSIONS_KEY,
    UnsupportedVersion,
    decode_request,
    encode_response,
    encode_response_parts,
)
from kafkalite.protocol.codec.messages import KRAFT_ONLY_APIS
from kafkalite.protocol.codec.types import WireFormatError
from kafkalite.protocol.error_response import UNKNOWN_SERVER_ERROR, error_response
from kafkalite.security import admin as security_admin
from kafkalite.security import gate
from kafkalite.security.acl import ANONYMOUS, CLUSTER_NAME, ResourceType
from kafkalite.security.listeners import (
    ILLEGAL_SASL_STATE,
    Listener,
    SaslAuthenticator,
    enabled_mechanisms,
    parse_listeners,
    plain_users,
    principal_from_certificate,
    server_ssl_context,
)

log = logging.getLogger("kafkalite.host")

SOCKET_REQUEST_MAX_BYTES = 104_857_600  # Kafka's socket.request.max.bytes default
FAILED_AUTHENTICATION_DELAY_MS = 100  # Kafka's connection.failed.authentication.delay.ms default
EVENT_LOG_LIMIT = 10_000  # events a TCP host keeps for `kafkalite` diagnostics; older ones are dropped
UNSUPPORTED_VERSION = 35
PRODUCE_KEY = 0
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
ENDPOINT_APIS = {3, 10, 60}  # Metadata, FindCoordinator, DescribeCluster: broker addresses per listener
_SIZE = struct.Struct(">i")


def internal_topic_defaults(brokers: int) -> dict[str, int]:
    """Replication of ``__consumer_offsets`` and ``__transaction_state`` for a cluster of ``brokers``.

    Kafka refuses to create an internal topic with fewer live brokers than its replication factor (3 by
    default), so on a smaller cluster FindCoordinator answers COORDINATOR_NOT_AVAILABLE for ever; the
    single-node server.properties Kafka ships sets both factors, and the transaction log's min ISR, to 1.
    kafkalite's ``server start`` and ``cluster start`` do the same for any size: as many replicas as
    brokers up to 3, and a min ISR of up to 2 (1 on one broker), so groups and transactions work at once.
    """
    return {
        "offsets.topic.replication.factor": min(3, brokers),
        "transaction.state.log.replication.factor": min(3, brokers),
        "transaction.state.log.min.isr": min(2, brokers),
    }


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def drive(
    net: Any, wake: asyncio.Event, running: Callable[[], bool], on_turn: Callable[[], None] | None = None
) -> None:
    """Keep ``net``'s virtual clock level with the wall clock, running what falls due, until ``running()``
    turns false; ``wake`` cuts a wait short when something arrived from outside (a request, a frame).
    ``on_turn`` runs once a turn (the metrics' idle sampler)."""
    while running():
        if on_turn is not None:
            on_turn()
        now = wall_ms()
        try:
            net.run_for(max(0, now - net.now_ms()))
        except Exception as exc:  # noqa: BLE001 - the last guard: the loop must never stop serving
            # Brokers answer their own failures (KafkaApis.handle_error); what reaches here came
            # from another node. It is logged, and everything still queued runs on the next turn.
            log.error("unexpected error while running the cluster; it goes on", exc_info=exc)
            net.log(None, "node_failed", error=f"{type(exc).__name__}: {exc}")
        nxt = net.next_event_ms()
        delay = 0.05 if nxt is None else min(0.05, max(0.0, (nxt - wall_ms()) / 1000))
        wake.clear()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=delay)
        else:
            await asyncio.sleep(0)


def request_clock_ms() -> float:
    """The brokers' request-time clock over TCP: the wall clock in fractional ms (whole simulated ms would
    round most requests to 0)."""
    return time.perf_counter_ns() / 1e6


def halt_process(reason: str) -> None:
    """Kafka's ``Exit.halt(1)``: leave at once, exit status 1, writing nothing more (the broker's disk
    failed; ``reason`` was logged at CRITICAL by the replica manager)."""
    print(f"kafkalite: halting: {reason}", file=sys.stderr, flush=True)
    os._exit(1)


@dataclass
class ServerStats:
    connections_open: int = 0
    connections_total: int = 0
    requests: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    zero_copy_bytes: int = 0  # of bytes_out, those sent with sendfile
    closed_bad_frames: int = 0
    auth_failures: int = 0
    by_api: dict[int, int] = field(default_factory=dict)


class _FilePiece(NamedTuple):
    """A fetched slice waiting to be sent: a private file object on its segment, position and size."""

    file: Any
    position: int
    size: int

    @classmethod
    def of(cls, piece: Any) -> _FilePiece:
        return cls(piece.open_reader(), piece.position, piece.size)


class ConnectionId(NamedTuple):
    """A client connection's node id: unique by number, shown as the client's address (Kafka's
    DescribeGroups reports a member's host as ``/127.0.0.1``)."""

    number: int
    host: str

    def __str__(self) -> str:
        return self.host


class ClientConnection(BaseNode):
    """One TCP connection to one broker, as a node of the cluster's network."""

    def __init__(
        self,
        server: WireServer,
        broker_id: int,
        writer: asyncio.StreamWriter,
        listener: Listener | None = None,
        client_host: str = "",
    ) -> None:
        self.server = server
        self.broker_id = broker_id
        self.writer = writer
        self.listener = listener
        self.client_host = client_host
        self.sasl: SaslAuthenticator | None = None
        self.principal = ANONYMOUS
        if listener is not None and listener.sasl:
            self.sasl = server.sasl_authenticator(broker_id, listener)
        elif listener is not None and listener.tls:
            self.principal = principal_from_certificate(
                writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            )
        # correlation id -> (slot, api key, version, how to merge refused parts into the answer)
        self.pending: dict[int, tuple[int, int, int, Any]] = {}
        self.ready: dict[int, bytes | None] = {}  # slot -> encoded response (None: nothing to send)
        self.next_slot = 0
        self.next_write = 0
        self.closed = False
        # Fetch data goes out with sendfile (zero copy) except through TLS, which must encrypt it in
        # user space (as in Kafka). Pieces wait in ``outq`` while a slice is going out.
        self.zero_copy = server.zero_copy and (listener is None or not listener.tls)
        self.outq: deque[bytes | _FilePiece] = deque()
        self.sending: _FilePiece | None = None  # the slice going out now
        self._sent = 0  # of its bytes
        # A second descriptor of the socket, watched for room while a slice goes out: the event loops
        # refuse to watch the transport's own one (asyncio and uvloop alike)
        self._watch_fd: int | None = None
        self._watch_loop: asyncio.AbstractEventLoop | None = None
        # After a failed authentication: requests are ignored until the delayed close
        self.auth_failed = False
        self._delayed_close: asyncio.TimerHandle | None = None

    def submit(self, frame: bytes) -> None:
        """Handle one request frame (without its size prefix)."""
        if self.auth_failed or self.closed:
            return
        stats = self.server.stats
        try:
            header, body = decode_request(frame)
            if header.api_key in KRAFT_ONLY_APIS and not self._kraft():
                # Kafka's ZooKeeper-mode listener does not enable these APIs: it closes the connection
                raise UnsupportedVersion(header, f"api key {header.api_key} is served only in KRaft mode")
        except UnsupportedVersion as e:
            h = e.header
            if h.api_key == API_VERSIONS_KEY:
                # Kafka answers an ApiVersions it cannot read in v0, with the versions it can: the client
                # then retries with one of them.
                slot = self._slot()
                self._finish(
                    slot,
                    encode_response(
                        API_VERSIONS_KEY,
                        0,
                        h.correlation_id,
                        api_versions_body(UNSUPPORTED_VERSION, kraft=self._kraft()),
                    ),
                )
                return
            log.info("closing connection: %s", e)
            stats.closed_bad_frames += 1
            self.close()
            return
        except WireFormatError as e:
            log.info("closing connection: malformed request (%s)", e)
            stats.closed_bad_frames += 1
            self.close()
            return
        stats.requests += 1
        stats.by_api[header.api_key] = stats.by_api.get(header.api_key, 0) + 1
        slot = self._slot()
        key, version, corr = header.api_key, header.api_version, header.correlation_id
        try:
            self._handle(slot, key, version, corr, header.client_id, body)
        except Exception as exc:  # noqa: BLE001 - fails this request, not the connection or the server
            self._request_failed(slot, key, version, corr, body, exc)

    def _kraft(self) -> bool:
        """The broker behind this listener runs in KRaft mode (its ApiVersions lists KRaft-only APIs)."""
        return bool(getattr(self.server.broker_node(self.broker_id), "kraft", False))

    def _handle(
        self, slot: int, key: int, version: int, corr: int, client_id: str | None, body: dict
    ) -> None:
        stats = self.server.stats
        if key == API_VERSIONS_KEY:
            self._finish(slot, encode_response(key, version, corr, api_versions_body(kraft=self._kraft())))
            return
        if key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            self._sasl_step(slot, key, version, corr, body)
            return
        if self.sasl is not None and not self.sasl.done:
            # Kafka closes a connection that sends anything but ApiVersions and SASL before authenticating
            log.info("closing connection: api key %d before SASL authentication", key)
            stats.closed_bad_frames += 1
            self._fail_authentication(slot, None)
            return
        merge = None
        request = None
        authz = self.server.authorizer(self.broker_id)
        if key in security_admin.APIS:
            allowed = authz is None or self._may(authz)(
                security_admin.required_operation(key), ResourceType.CLUSTER, CLUSTER_NAME
            )
            answer = security_admin.handle(key, body, self.server.broker_node(self.broker_id), allowed)
            if answer is not None:
                self._finish(slot, encode_response(key, version, corr, answer))
                return
            # a KRaft broker: the active controller writes the change, the broker forwards it there
            request = security_admin.forwarded_request(key, version, body)
        elif authz is not None:
            broker = self.server.broker_node(self.broker_id)
            fwd, merge, whole = gate.check(key, body, self._may(authz), lambda: authz.may_write_some_topic(
                self.principal, self.client_host), lambda t: broker.config.auto_create_topics_enable
                and not broker.cache.has_topic(t))  # fmt: skip
            if whole is not None:
                quiet = key == PRODUCE_KEY and body.get("acks") == 0
                self._finish(slot, None if quiet else encode_response(key, version, corr, whole))
                return
            body = fwd
        if request is None:
            request = to_request(key, version, body)
        if key == PRODUCE_KEY and request.acks == 0:
            self._finish(slot, None)  # acks=0: the client waits for nothing
        else:
            self.pending[corr] = (slot, key, version, merge)
        self.server.net.send(
            self.node_id, self.broker_id, RequestEnvelope(corr, client_id or "", request, self.zero_copy)
        )
        self.server.wake()

    def _request_failed(
        self, slot: int, key: int, version: int, corr: int, body: dict, exc: Exception
    ) -> None:
        """A request that raised at the listener gets the error answer of its API (UNKNOWN_SERVER_ERROR),
        logged with its traceback; if not even that can be written, the connection closes."""
        log.error("unexpected error handling api key %d from %s", key, self.client_host, exc_info=exc)
        self.server.net.log(self.node_id, "request_failed", api_key=key, error=f"{type(exc).__name__}: {exc}")
        self.pending.pop(corr, None)
        if slot < self.next_write or slot in self.ready:
            return  # already answered
        if key == PRODUCE_KEY and body.get("acks") == 0:
            self._finish(slot, None)
            return
        try:
            if key in security_admin.APIS:
                answer = security_admin.refusal(key, body, UNKNOWN_SERVER_ERROR, None)
            else:
                try:
                    answer = to_body(error_response(to_request(key, version, body)), version)
                except Exception:  # noqa: BLE001 - the request does not even convert: a bare error
                    answer = {"error_code": UNKNOWN_SERVER_ERROR}
            frame = encode_response(key, version, corr, answer)
        except Exception as again:  # noqa: BLE001
            log.error("closing connection: no error answer for api key %d (%r)", key, again)
            self.close()
            return
        self._finish(slot, frame)

    def on_message(self, src: Any, msg: Any, now_ms: int) -> None:
        if not isinstance(msg, ResponseEnvelope):
            return
        entry = self.pending.pop(msg.correlation_id, None)
        if entry is None:
            return
        slot, key, version, merge = entry
        try:
            body = to_body(msg.response, version)
            if merge is not None:
                body = merge(body)
            if key in ENDPOINT_APIS and self.listener is not None:
                body = self.server.endpoints_for(self.broker_id, self.listener.name, key, body)
            # split: large records go out as their own piece, never copied into (and out of) the frame
            parts = encode_response_parts(
                key, version, msg.correlation_id, body, zero_copy=self.zero_copy, split=True
            )
        except Exception as exc:  # noqa: BLE001 - as Kafka's network thread: close this connection only
            log.error("closing connection: cannot write the answer to api key %d", key, exc_info=exc)
            self.server.net.log(self.node_id, "response_failed", api_key=key, error=repr(exc))
            self.close()
            return
        try:
            # Opened now, while the slice is known good: a file of our own survives the segment being
            # deleted or rolled before the bytes go out.
            pieces = [p if isinstance(p, bytes) else _FilePiece.of(p) for p in parts]
        except (KafkaStorageError, OSError) as e:
            log.info("closing connection: fetched segment no longer readable (%s)", e)
            self.close()
            return
        self._finish(slot, pieces)

    def _may(self, authz: Any) -> Callable[[Any, Any, str], bool]:
        principal, host = self.principal, self.client_host
        return lambda op, rtype, name: authz.authorize(principal, host, op, rtype, name)

    def _sasl_step(self, slot: int, key: int, version: int, corr: int, body: dict) -> None:
        sasl = self.sasl
        if key == SASL_HANDSHAKE_KEY:
            code = ILLEGAL_SASL_STATE if sasl is None else sasl.handshake(body["mechanism"])
            mechs = [] if sasl is None else sasl.mechanisms
            answer = {"error_code": code, "mechanisms": mechs}
            # SaslHandshake's answer has no message field; the log names what was asked and what is served
            message = (
                f"mechanism {body['mechanism']!r} asked, the listener enables {', '.join(mechs) or 'none'}"
            )
        elif sasl is None:
            code, message, out = ILLEGAL_SASL_STATE, "this listener does not speak SASL", b""
            answer = {"error_code": code, "error_message": message, "auth_bytes": b""}
        else:
            code, message, out = sasl.authenticate(bytes(body["auth_bytes"]))
            answer = {
                "error_code": code,
                "error_message": message,
                "auth_bytes": out,
                "session_lifetime_ms": 0,
            }
            if sasl.done:
                self.principal = sasl.principal  # type: ignore[assignment]
        frame = encode_response(key, version, corr, answer)
        if not code:
            self._finish(slot, frame)
            return
        log.info("closing connection after SASL error %d: %s", code, message)
        self.server.stats.auth_failures += 1
        self._fail_authentication(slot, frame)

    def _fail_authentication(self, slot: int, frame: bytes | None) -> None:
        """Kafka's failed-authentication delay: the error answer and the close wait
        ``connection.failed.authentication.delay.ms``, which slows a password guesser down without
        holding anything else up (a timer on the loop; other connections are served meanwhile)."""
        self.auth_failed = True

        def answer_and_close() -> None:
            self._delayed_close = None
            self._finish(slot, frame)
            self.close()

        delay = self.server.failed_authentication_delay_ms
        if delay <= 0:
            answer_and_close()
        else:
            self._delayed_close = asyncio.get_running_loop().call_later(delay / 1000, answer_and_close)

    def _slot(self) -> int:
        s = self.next_slot
        self.next_slot += 1
        return s

    def _finish(self, slot: int, data: bytes | list[bytes | _FilePiece] | None) -> None:
        self.ready[slot] = data
        while self.next_write in self.ready:
            out = self.ready.pop(self.next_write)
            self.next_write += 1
            if out is None or self.closed:
                continue
            if isinstance(out, bytes):
                self.outq.append(out)
            else:
                self.outq.extend(out)
        self._flush()

    def _flush(self) -> None:
        stats = self.server.stats
        while self.outq and self.sending is None and not self.closed:
            part = self.outq.popleft()
            if isinstance(part, bytes):
                self.writer.write(part)
                stats.bytes_out += len(part)
            else:
                self.sending, self._sent = part, 0
                self._send_slice()

    def _send_slice(self) -> None:
        """Send the pending slice straight from the page cache to the socket with ``os.sendfile``, as far
        as the socket takes it, then whatever queued up behind it; called again when the socket has room.

        Not ``loop.sendfile``: uvloop does not implement it, and asyncio's pauses reading and spends a
        task, plus an event-loop turn after every partial send. The bytes written before the slice (the
        frame's head) must have left the transport first, or they would be overtaken."""
        piece = self.sending
        if piece is None or self.closed:
            return
        transport = self.writer.transport
        try:
            if transport.get_write_buffer_size():
                self._watch()  # the head is still queued in the transport: wait for it to drain
                return
            out = transport.get_extra_info("socket").fileno()
            fd = piece.file.fileno()
            while self._sent < piece.size:
                n = os.sendfile(out, fd, piece.position + self._sent, piece.size - self._sent)
                if n == 0:
                    # the log was truncated under the fetch (Kafka fails the send the same way)
                    raise KafkaStorageError(f"sent {self._sent} of {piece.size} bytes: segment truncated")
                self._sent += n
        except (BlockingIOError, InterruptedError):
            self._watch()  # the socket's buffer is full: go on when it has room
            return
        except (KafkaStorageError, OSError) as e:
            log.info("closing connection: sendfile failed (%s)", e)
            self.close()
            return
        self._unwatch()
        stats = self.server.stats
        stats.bytes_out += piece.size
        stats.zero_copy_bytes += piece.size
        piece.file.close()
        self.sending = None
        self._flush()

    def _watch(self) -> None:
        if self._watch_fd is None:
            self._watch_fd = os.dup(self.writer.transport.get_extra_info("socket").fileno())
            self._watch_loop = asyncio.get_running_loop()
            self._watch_loop.add_writer(self._watch_fd, self._send_slice)

    def _unwatch(self) -> None:
        if self._watch_fd is not None:
            self._watch_loop.remove_writer(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = None

    def close(self) -> None:
        if self._delayed_close is not None:
            self._delayed_close.cancel()
            self._delayed_close = None
        if not self.closed:
            self.closed = True
            self._unwatch()  # before the transport closes the socket: no watch outlives it
            self.writer.close()
            if self.sending is not None:
                self.sending.file.close()
                self.sending = None
            for part in self.outq:
                if not isinstance(part, bytes):
                    part.file.close()
            self.outq.clear()


class WireServer:
    """TCP listeners for every broker of a ``Cluster`` driven in real time (see the module docstring).

    ``ports`` maps broker id to port (0: any free port; ``addresses`` tells which one was taken).
    ``log_dir`` holds broker N's logs in ``broker-N`` and the coordination store's snapshot in ``store``,
    so a server started again on it has its topics, configs, ACLs and SCRAM users back. With
    Kafka's ``listeners`` in ``config`` (``PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0``) every broker
    gets each listener, broker N on port+N-1 (0: free ports); ``endpoints[name]`` has their addresses.
    The brokers' own listener (``inter.broker.listener.name``, else the first) is the one other brokers
    and the tools use (``addresses``, ``bootstrap_servers``).
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        host: str = "127.0.0.1",
        ports: Mapping[int, int] | None = None,
        log_dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
        log_dirs_per_broker: int = 1,
    ) -> None:
        self.brokers = brokers
        self.log_dirs_per_broker = log_dirs_per_broker  # >1: each broker's log.dirs are dir-0, dir-1, ...
        self.host = host
        self.ports = dict(ports or {})
        self.log_dir = log_dir
        self.config = {**internal_topic_defaults(brokers), **(config or {})}
        self.max_request_bytes = max_request_bytes
        self.failed_authentication_delay_ms = parse_int(
            "connection.failed.authentication.delay.ms",
            self.config.get("connection.failed.authentication.delay.ms", FAILED_AUTHENTICATION_DELAY_MS),
            low=0,
        )
        # sendfile for fetched data on listeners without TLS; False copies it through Python instead
        # (what the bench compares); a connection reads this when it opens
        self.zero_copy = True
        text = self.config.get("listeners")
        self.listeners = (
            parse_listeners(str(text), self.config.get("listener.security.protocol.map"), host)
            if text
            else [Listener("PLAINTEXT", host, 0, "PLAINTEXT")]
        )
        inter = str(self.config.get("inter.broker.listener.name") or "").upper()
        if inter:
            if inter not in {x.name for x in self.listeners}:
                raise ValueError(f"inter.broker.listener.name {inter} is not one of the listeners")
            # the brokers' own listener comes first: it is the address other brokers and the tools use
            self.listeners.sort(key=lambda x: x.name != inter)
        self._ssl = {x.name: server_ssl_context(self.config, x.name) for x in self.listeners if x.tls}
        for x in self.listeners:
            if x.sasl:
                enabled_mechanisms(self.config, x.name)  # a bad mechanism list fails here, not per connection
        port = self.config.get("metrics.port")
        # Prometheus endpoint: broker N's process serves on metrics.port + N - 1 (0: a free port)
        self.metrics_port = None if port in (None, "") else parse_int("metrics.port", port, low=0)
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.loop_idle = LoopIdle()
        self.exit_on_halt = False  # the CLI's server: exit 1 when no broker is left (a disk failed)
        self.cluster: Any = None
        self.net: Any = None
        self.stats = ServerStats()
        self.addresses: dict[int, tuple[str, int]] = {}
        self.endpoints: dict[str, dict[int, tuple[str, int]]] = {x.name: {} for x in self.listeners}
        self._servers: dict[int, list[asyncio.base_events.Server]] = {}
        self._conns: dict[int, set[ClientConnection]] = {}
        self._wake_event: asyncio.Event | None = None
        self._pump_task: asyncio.Task | None = None
        self._conn_ids = itertools.count(1)
        self._running = False
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Bind the listeners, start the cluster on them and begin driving it."""
        socks = {}
        for b in range(1, self.brokers + 1):
            socks[b] = await self._listen(b, self.ports.get(b, 0))
        self.addresses = socks
        try:
            self.cluster = Cluster(
                brokers=self.brokers,
                dir=self.log_dir,
                config=self.config,
                latency_ms=0,
                start_ms=wall_ms(),
                listeners=socks,
                endpoints={b: self.registered_endpoints(b) for b in socks},
                # beside the brokers' logs, as `cluster start` keeps it: a restart finds its metadata again
                store_dir=None if self.log_dir is None else Path(self.log_dir) / "store",
                lock_log_dirs=True,  # real brokers: another server on these dirs is refused
                log_dirs_per_broker=self.log_dirs_per_broker,
            )
        except BaseException:
            for srv in (srv for group in self._servers.values() for srv in group):
                srv.close()
            raise
        self.net = self.cluster.net
        self.net.drop_to_unknown = True  # answers to connections that have closed
        self.net.limit_log(EVENT_LOG_LIMIT)  # a server runs for weeks: keep only the recent events
        if self.exit_on_halt:
            for b, node in self.cluster.brokers.items():
                node.halt_hook = partial(self._halt, b)
        for node in self.cluster.brokers.values():
            self.instrument(node)
        await self.start_metrics()
        self._wake_event = asyncio.Event()
        self._running = True
        self._pump_task = asyncio.create_task(self._pump())

    def instrument(self, node: Any) -> None:
        """Time ``node``'s requests by the wall clock (this incarnation's metrics and the next ones)."""
        node.request_clock = request_clock_ms
        if getattr(node, "metrics", None) is not None:
            node.metrics.request_clock = request_clock_ms

    def broker_metrics(self) -> dict[int, Any]:
        """Each broker of this process by id: its current metrics (None while it is down)."""
        return {b: getattr(self.broker_node(b), "metrics", None) for b in self.addresses}

    async def start_metrics(self) -> None:
        """Open the Prometheus endpoint when ``metrics.port`` is set."""
        if self.metrics_port is None:
            return
        port = self.metrics_port + min(self.addresses) - 1 if self.metrics_port else 0
        self.metrics_endpoint = MetricsEndpoint(self.broker_metrics, self.loop_idle)
        await self.metrics_endpoint.start(self.host, port)

    def _halt(self, broker_id: int, reason: str) -> None:
        """A broker's last log dir failed: it stops (its node crashes); the process exits with status 1
        once no broker in it is left, as a Kafka broker process halts."""
        net = self.net
        others = [b for b in self.cluster.brokers if b != broker_id and net.is_up(b)]
        if not others:
            halt_process(reason)
        net.after(0, lambda: net.is_up(broker_id) and net.crash(broker_id))

    def _port(self, listener: Listener, broker_id: int, port: int) -> int:
        if listener is self.listeners[0] and port:
            return port
        return listener.port + broker_id - 1 if listener.port else 0

    async def _listen(self, broker_id: int, port: int) -> tuple[str, int]:
        """Open every listener of ``broker_id`` (the first on ``port`` when given); the first's address."""
        servers = []
        for x in self.listeners:
            known = self.endpoints[x.name].get(broker_id)
            want = known[1] if known else self._port(x, broker_id, port)
            server = await asyncio.start_server(
                lambda r, w, b=broker_id, x=x: self._serve(b, r, w, x), x.host, want, reuse_address=True,
                ssl=self._ssl.get(x.name),
            )  # fmt: skip
            self.endpoints[x.name][broker_id] = (x.host, server.sockets[0].getsockname()[1])
            servers.append(server)
        self._servers[broker_id] = servers
        return self.endpoints[self.listeners[0].name][broker_id]

    def bootstrap(self, listener: str) -> str:
        """``HOST:PORT,...`` of every broker on the named listener."""
        return ",".join(f"{h}:{p}" for h, p in self.endpoints[listener.upper()].values())

    def broker_node(self, broker_id: int) -> Any:
        return self.cluster.brokers[broker_id]

    def authorizer(self, broker_id: int) -> Any:
        return self.broker_node(broker_id).authorizer

    def sasl_authenticator(self, broker_id: int, listener: Listener) -> SaslAuthenticator:
        def lookup(mechanism: str, user: str) -> Any:
            return security_admin.broker_scram_credential(self.broker_node(broker_id), mechanism, user)

        return SaslAuthenticator(
            enabled_mechanisms(self.config, listener.name), plain_users(self.config, listener.name), lookup
        )

    def registered_endpoints(self, broker_id: int) -> tuple[str, ...]:
        return tuple(
            f"{x.name}://{h}:{p}" for x in self.listeners for h, p in [self.endpoints[x.name][broker_id]]
        )

    def endpoints_for(self, broker_id: int, listener: str, api_key: int, body: dict) -> dict:
        """Point a Metadata, FindCoordinator or DescribeCluster answer at ``listener``'s addresses, as a
        Kafka broker answers each client with the endpoints of the listener it came in on (brokers
        without that listener are left out). The addresses are the registrations ``broker_id`` knows."""
        if listener == self.listeners[0].name:
            return body
        prefix = f"{listener}://"
        eps: dict[int, tuple[str, int]] = {}
        for node in self.broker_node(broker_id).cache.live_brokers.values():
            for ep in node.listeners:
                if ep.startswith(prefix):
                    h, _, p = ep[len(prefix) :].rpartition(":")
                    eps[node.node_id] = (h, int(p))
        if api_key == 10:
            ep = eps.get(body.get("node_id", -1))
            return {**body, "host": ep[0], "port": ep[1]} if ep else body
        id_key = "broker_id" if api_key == 60 else "node_id"
        brokers = [
            {**b, "host": eps[b[id_key]][0], "port": eps[b[id_key]][1]}
            for b in body.get("brokers") or []
            if b[id_key] in eps
        ]
        return {**body, "brokers": brokers}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.addresses.values())

    def crash_broker(self, broker_id: int) -> None:
        """Kill a broker as kill -9 would: its listener and connections vanish, its unflushed state too."""
        for server in self._servers.pop(broker_id, ()):
            server.close()
        for conn in list(self._conns.get(broker_id, ())):
            conn.close()
        self.cluster.crash(broker_id)

    async def stop_broker(self, broker_id: int, *, controlled: bool = True) -> None:
        """Stop one broker cleanly, as SIGTERM stops a Kafka broker: with ``controlled`` its leaderships
        move to other ISR members first, then its listener and connections close."""
        done = asyncio.Event()
        node = self.cluster.brokers[broker_id]
        if controlled:
            node.controlled_shutdown(done.set)
            self.wake()
            await done.wait()
        else:
            node.shutdown()
        self.net.crash(broker_id)
        for server in self._servers.pop(broker_id, ()):
            server.close()
        for conn in list(self._conns.get(broker_id, ())):
            conn.close()

    async def restart_broker(self, broker_id: int) -> None:
        """Bring a crashed broker back on its port: it recovers its logs and rejoins."""
        await self._listen(broker_id, self.addresses[broker_id][1])  # every listener on its old port
        self.cluster.restart(broker_id)
        self.wake()

    def wake(self) -> None:
        if self._wake_event is not None:
            self._wake_event.set()

    async def _pump(self) -> None:
        await drive(self.net, self._wake_event, lambda: self._running, self.loop_idle.sample)

    async def _serve(
        self,
        broker_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        listener: Listener | None = None,
    ) -> None:
        if self.net is None:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else "unknown"
        conn = ClientConnection(self, broker_id, writer, listener, host)
        self._conns.setdefault(broker_id, set()).add(conn)
        node_id = ConnectionId(next(self._conn_ids), host)
        self.net.add_node(node_id, conn)
        self.stats.connections_open += 1
        self.stats.connections_total += 1
        try:
            while not conn.closed:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 0 or size > self.max_request_bytes:
                    log.warning(
                        "closing connection from %s: request of %d bytes exceeds socket.request.max.bytes=%d",
                        writer.get_extra_info("peername"), size, self.max_request_bytes,
                    )  # fmt: skip
                    self.stats.closed_bad_frames += 1
                    break
                frame = await reader.readexactly(size)
                self.stats.bytes_in += size + 4
                conn.submit(frame)
                if writer.transport.get_write_buffer_size() > 4 << 20:
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # noqa: BLE001 - a frame the codec chokes on costs its connection only
            log.error("closing connection from %s: unexpected error", host, exc_info=exc)
        finally:
            conn.close()
            self._conns.get(broker_id, set()).discard(conn)
            self.net.remove_node(node_id)  # nothing of a closed connection stays on the network
            self.stats.connections_open -= 1
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def stop(self) -> None:
        self._running = False
        self.wake()
        if self._pump_task is not None:
            await self._pump_task
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        servers = [srv for group in self._servers.values() for srv in group]
        for srv in servers:
            srv.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for srv in servers:
            await srv.wait_closed()
        if self.cluster is not None:
            self.cluster.close()

    # ------------------------------------------------------------------------------- conveniences

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 1, **config: Any
    ) -> None:
        """Create a topic from inside the loop (between pumps); the cluster runs ahead of the wall clock
        only as long as the creation takes in virtual time."""
        self.cluster.create_topic(name, partitions, replication_factor, config=config or None)


class BackgroundServer:
    """A ``WireServer`` on its own event loop in a daemon thread: for tests, notebooks and benchmarks,
    where the caller's thread runs blocking Kafka clients. ``call`` runs a function on the loop."""

    def __init__(self, brokers: int = 1, **kwargs: Any) -> None:
        self.server = WireServer(brokers, **kwargs)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafkalite-wire", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap_servers

    @property
    def thread_ident(self) -> int | None:
        """The loop thread's ident: what ``time.pthread_getcpuclockid`` takes to time the brokers' CPU."""
        return self._thread.ident

    def call(self, fn: Any, *args: Any, timeout: float = 60, **kwargs: Any) -> Any:
        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 1, **config: Any
    ) -> None:
        self.call(self.server.create_topic, name, partitions, replication_factor, **config)

    def crash_broker(self, broker_id: int) -> None:
        self.call(self.server.crash_broker, broker_id)

    def stop_broker(self, broker_id: int, *, controlled: bool = True) -> None:
        asyncio.run_coroutine_threadsafe(
            self.server.stop_broker(broker_id, controlled=controlled), self.loop
        ).result(120)

    def restart_broker(self, broker_id: int) -> None:
        asyncio.run_coroutine_threadsafe(self.server.restart_broker(broker_id), self.loop).result(60)

    def close(self) -> None:
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
