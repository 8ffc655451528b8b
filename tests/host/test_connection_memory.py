"""A closed connection leaves nothing behind: its node, timers and link state leave the network, so a
server that has seen thousands of connections holds what it held before them."""

from __future__ import annotations

import gc
import socket
import struct
import time

import pytest

from kafkalite.net.sim import BaseNode, SimNetwork
from tests import hostile


class Recorder(BaseNode):
    def __init__(self) -> None:
        self.got: list = []

    def on_message(self, src, msg, now_ms):
        self.got.append(msg)


def test_a_removed_node_leaves_no_timer_message_or_link_behind() -> None:
    net = SimNetwork(latency_ms=5)
    a, b = net.add_node("a", Recorder()), net.add_node("b", Recorder())
    net.send("a", "b", "in flight")
    net.send("b", "a", "hello")
    b.set_timer(10, lambda now: b.got.append("timer"))
    net.delay("a", "b", 3)
    net.remove_node("b")
    net.run_until_idle()
    assert a.got == ["hello"] and b.got == []  # what was on its way to b is dropped
    assert net.node_ids == ["a"] and net.pending() == 0
    assert not any("b" in link for link in net._link_last) and not net._delays
    assert [e.fields["reason"] for e in net.events("drop")] == ["dst gone"]
    with pytest.raises(KeyError):
        net.send("a", "b", "to nobody")  # a typo in a simulation still raises
    net.drop_to_unknown = True
    assert net.send("a", "b", "to a closed connection") is False


def _metadata_frame(corr: int) -> bytes:
    body = struct.pack(">hhih", 3, 1, corr, 1) + b"x" + struct.pack(">i", -1)
    return struct.pack(">i", len(body)) + body


def _fetch_frame(corr: int) -> bytes:
    """A Fetch v4 that waits 500 ms for data that never comes."""
    body = struct.pack(">hhih", 1, 4, corr, 1) + b"x"
    body += struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", 5) + b"probe" + struct.pack(">i", 1)
    body += struct.pack(">iqi", 0, 0, 1 << 20)
    return struct.pack(">i", len(body)) + body


def test_thousands_of_closed_connections_leave_nothing_on_the_network() -> None:
    from kafkalite.host.server import BackgroundServer, ClientConnection, ConnectionId

    with BackgroundServer(1) as srv:
        srv.create_topic("probe", 1, 1)
        net = srv.server.net
        address = srv.server.addresses[1]

        def snapshot() -> tuple:
            gc.collect()
            conns = sum(isinstance(o, ClientConnection) for o in gc.get_objects())
            links = sum(isinstance(a, ConnectionId) or isinstance(b, ConnectionId) for a, b in net._link_last)
            return tuple(net.node_ids), links, net.pending(), conns

        hostile.wire_produce_and_fetch(address, "probe")  # the probe's own connection has come and gone
        time.sleep(0.3)
        before = srv.call(snapshot)
        for _wave in range(10):
            socks = [socket.create_connection(address, timeout=10) for _ in range(200)]
            for i, s in enumerate(socks):
                s.sendall(_metadata_frame(i) if i % 2 else _fetch_frame(i))
            for s in socks[1::2]:
                hostile.recv_frame(s)  # metadata is answered; the fetches are still waiting
            for s in socks:
                s.close()  # the waiting fetches' answers will find their connection gone
        deadline = time.time() + 20
        while srv.server.stats.connections_open and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # past the fetches' max wait
        assert srv.server.stats.connections_total >= 2000
        assert srv.call(snapshot) == before
        hostile.wire_produce_and_fetch(address, "probe")
