"""A TCP host's event log is bounded: a broker that runs for weeks must not grow it forever."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.host.server import EVENT_LOG_LIMIT, WireServer
from kafkalite.net.sim import SimNetwork


def test_limit_log_keeps_the_newest_events() -> None:
    net = SimNetwork(0)
    for i in range(5):
        net.log(None, "early", i=i)
    net.limit_log(3)
    for i in range(4):
        net.log(None, "late", i=i)
    assert [(e.kind, e.fields["i"]) for e in net.events()] == [("late", 1), ("late", 2), ("late", 3)]
    assert [e.fields["i"] for e in net.events("late")] == [1, 2, 3]
    net.clear_log()
    assert net.events() == []


def test_limit_log_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="max_events"):
        SimNetwork(0).limit_log(0)


def test_the_wire_server_keeps_a_bounded_log(tmp_path) -> None:
    async def run() -> int:
        server = WireServer(brokers=1, log_dir=tmp_path)
        await server.start()
        try:
            for i in range(EVENT_LOG_LIMIT + 50):
                server.net.log(None, "filler", i=i)
            return len(server.net.events())
        finally:
            await server.stop()

    assert asyncio.run(run()) == EVENT_LOG_LIMIT
