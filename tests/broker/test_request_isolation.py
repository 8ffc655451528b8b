"""One request never stops a broker: a handler, timer or tick that raises fails only its own request
(answered with UNKNOWN_SERVER_ERROR, or the Kafka error it raised, in its API's response shape), is
logged with its traceback and put in the event log, and the broker goes on serving everyone else."""

from __future__ import annotations

import logging
import time

import pytest

from kafkalite.errors import InvalidRequestError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    REQUESTS,
    AlterReplicaLogDirsRequest,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
    WriteTxnMarkersRequest,
)
from kafkalite.protocol.codec.adapter import to_body
from kafkalite.protocol.error_response import UNKNOWN_SERVER_ERROR, error_response
from kafkalite.records import build_batch
from tests import hostile

TP = TopicPartition("t", 0)


@pytest.fixture
def cluster():
    c = Cluster(brokers=1)
    c.create_topic("t", 1, 1)
    return c


def serves_produce_and_fetch(cluster: Cluster, tp: TopicPartition = TP, value: bytes = b"still here") -> None:
    """The broker leading ``tp`` appends a batch and returns it to a fetch."""
    leader = cluster.leader(tp.topic, tp.partition)
    batch = build_batch([(None, value, None)])
    produced = cluster.request(
        leader, ProduceRequest(acks=1, partitions=(ProducePartition(tp=tp, records=batch),))
    ).partitions[0]
    assert produced.error_code == 0, produced
    fetched = cluster.request(
        leader,
        FetchRequest(max_wait_ms=0, partitions=(FetchPartition(tp=tp, fetch_offset=produced.base_offset),)),
    ).partitions[0]
    assert fetched.error_code == 0 and value in bytes(fetched.records), fetched


def _codes(obj: object) -> list[int]:
    """Every ``error_code`` in a response, at any depth."""
    out = []
    for name in getattr(obj, "__slots__", ()):
        value = getattr(obj, name, None)
        if name == "error_code":
            out.append(value)
        elif isinstance(value, tuple):
            for v in value:
                out += _codes(v)
        elif hasattr(value, "__slots__"):
            out += _codes(value)
    return out


@pytest.mark.parametrize("cls", REQUESTS, ids=lambda c: c.__name__)
def test_every_api_has_an_error_response_that_names_what_was_asked(cls) -> None:
    from hypothesis import HealthCheck, given, settings

    from kafkalite.protocol.codec.messages import SPECS

    @settings(max_examples=20, suppress_health_check=list(HealthCheck), deadline=None)
    @given(hostile.message(cls))
    def check(req) -> None:
        resp = error_response(req, UNKNOWN_SERVER_ERROR)
        assert isinstance(resp, cls.response_type), resp
        assert set(_codes(resp)) <= {UNKNOWN_SERVER_ERROR}, resp
        # an answer that names nothing is right only for a request that named nothing
        named = [v for n in req.__slots__ if isinstance(v := getattr(req, n), tuple) and v]
        if isinstance(req, WriteTxnMarkersRequest):  # a marker is answered per partition
            named = [m for m in req.markers if m.partitions]
        if isinstance(req, AlterReplicaLogDirsRequest):  # answered per partition, a dir alone names none
            named = [d for d in req.dirs if d.partitions]
        assert _codes(resp) or not named, resp
        if cls.api_key in SPECS:  # and it converts for the wire codec
            to_body(resp, SPECS[cls.api_key].max_version)

    check()


def test_a_handler_that_raises_fails_only_its_request(cluster, caplog) -> None:
    broker = cluster.brokers[1]

    def broken(env, src):
        raise RuntimeError("boom")

    broker.rm.handle_list_offsets = broken
    with caplog.at_level(logging.ERROR, logger="kafkalite.broker"):
        resp = cluster.request(1, ListOffsetsRequest(partitions=(ListOffsetsPartition(tp=TP),)))
    assert [p.error_code for p in resp.partitions] == [UNKNOWN_SERVER_ERROR]
    [event] = cluster.events("request_failed")
    assert event.fields["api"] == "ListOffsetsRequest" and "RuntimeError: boom" in event.fields["error"]
    [record] = [r for r in caplog.records if "ListOffsetsRequest" in r.getMessage()]
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])
    serves_produce_and_fetch(cluster)


def test_a_kafka_error_escaping_a_handler_keeps_its_own_code(cluster) -> None:
    def broken(env, src):
        raise InvalidRequestError("the partition list is odd")

    cluster.brokers[1].rm.handle_list_offsets = broken
    resp = cluster.request(1, ListOffsetsRequest(partitions=(ListOffsetsPartition(tp=TP),)))
    assert [p.error_code for p in resp.partitions] == [InvalidRequestError.code]
    serves_produce_and_fetch(cluster)


def test_a_timer_or_tick_that_raises_is_logged_and_the_broker_goes_on(cluster, caplog) -> None:
    broker = cluster.brokers[1]

    def bad_timer(now_ms):
        raise ValueError("timer trouble")

    broker.set_timer(5, bad_timer)
    real_tick = broker.rm.tick
    failures = iter([True])

    def flaky_tick(now_ms):
        if next(failures, False):
            raise OSError("tick trouble")
        real_tick(now_ms)

    broker.rm.tick = flaky_tick
    with caplog.at_level(logging.ERROR, logger="kafkalite.broker"):
        cluster.run_for(500)
    assert [e.fields["error"] for e in cluster.events("timer_failed")] == ["ValueError: timer trouble"]
    assert [e.fields["error"] for e in cluster.events("tick_failed")] == ["OSError: tick trouble"]
    assert sum(r.exc_info is not None for r in caplog.records) == 2
    serves_produce_and_fetch(cluster)


# ------------------------------------------------------------------------------------ over TCP


@pytest.fixture(scope="module")
def server():
    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(1) as srv:
        srv.create_topic("probe", 1, 1)
        yield srv


def _list_offsets(topic: str) -> dict:
    return {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }


def test_over_tcp_a_handler_that_raises_fails_only_its_request(server, caplog) -> None:
    import socket

    rm = server.server.broker_node(1).rm
    real = rm.handle_list_offsets

    def broken(env, src):
        raise RuntimeError("boom")

    server.call(setattr, rm, "handle_list_offsets", broken)
    try:
        with socket.create_connection(server.server.addresses[1], timeout=10) as s:
            answer = hostile.call(s, 2, 1, _list_offsets("probe"))
            assert answer["topics"][0]["partitions"][0]["error_code"] == UNKNOWN_SERVER_ERROR, answer
            # the same connection goes on: the next request is served
            meta = hostile.call(s, 3, 1, {"topics": [{"name": "probe"}]}, corr=2)
            assert meta["topics"][0]["error_code"] == 0, meta
    finally:
        server.call(setattr, rm, "handle_list_offsets", real)
    hostile.wire_produce_and_fetch(server.server.addresses[1], "probe")


def test_over_tcp_a_listener_failure_answers_the_error_and_the_connection_goes_on(
    server, monkeypatch
) -> None:
    import socket

    import kafkalite.host.server as wire

    real = wire.to_request
    failures = iter([True])

    def flaky(key, version, body):
        if key == 3 and next(failures, False):
            raise KeyError("a field the adapter did not expect")
        return real(key, version, body)

    monkeypatch.setattr(wire, "to_request", flaky)
    with socket.create_connection(server.server.addresses[1], timeout=10) as s:
        meta = hostile.call(s, 3, 1, {"topics": [{"name": "probe"}]})
        assert [t["error_code"] for t in meta["topics"]] == [UNKNOWN_SERVER_ERROR], meta
        meta = hostile.call(s, 3, 1, {"topics": [{"name": "probe"}]}, corr=2)
        assert meta["topics"][0]["error_code"] == 0, meta
    events = server.call(server.server.net.events, "request_failed")
    assert any("KeyError" in e.fields["error"] for e in events), events
    hostile.wire_produce_and_fetch(server.server.addresses[1], "probe")


def test_over_tcp_the_loop_survives_any_node_that_raises(server) -> None:
    from kafkalite.net.sim import BaseNode

    class Grenade(BaseNode):
        def on_message(self, src, msg, now_ms):
            raise RuntimeError("a node blew up")

    def plant() -> None:
        net = server.server.net
        if "grenade" not in net.node_ids:
            net.add_node("grenade", Grenade())
        net.send("admin", "grenade", "pull")
        server.server.wake()

    server.call(plant)
    deadline = time.time() + 10
    while not server.call(server.server.net.events, "node_failed") and time.time() < deadline:
        time.sleep(0.05)
    assert server.call(server.server.net.events, "node_failed")
    hostile.wire_produce_and_fetch(server.server.addresses[1], "probe")
