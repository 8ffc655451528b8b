"""Which versions a real client negotiates with kafkalite: confluent-kafka (librdkafka 2.x) takes the
highest version both sides speak, so with the flexible versions advertised it produces with Produce v9 and
fetches with Fetch v12, and its group and offset requests use the new maxima too. The listener records the
(api key, version) of every request it handles; the clients' work must succeed at those versions."""

from __future__ import annotations

import collections
import time

import pytest

from kafkalite.host import server as wire_server
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol.codec.messages import SPECS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def versions_seen(monkeypatch):
    """client id -> {api name: {versions}} of the requests the listener handles."""
    seen: dict[str, dict[str, set[int]]] = collections.defaultdict(lambda: collections.defaultdict(set))
    handle = wire_server.ClientConnection._handle

    def recording(self, slot, key, version, corr, client_id, body):
        seen[client_id or ""][SPECS[key].name].add(version)
        return handle(self, slot, key, version, corr, client_id, body)

    monkeypatch.setattr(wire_server.ClientConnection, "_handle", recording)
    return seen


def test_confluent_kafka_negotiates_the_flexible_versions(versions_seen):
    from confluent_kafka import Consumer, Producer

    with BackgroundServer(1) as srv:
        srv.create_topic("t", 2, 1)
        boot = srv.bootstrap_servers
        p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "client.id": "prod"})
        for i in range(100):
            p.produce("t", key=str(i).encode(), value=f"m{i}".encode())
        assert p.flush(20) == 0, "every record delivered"
        txn = Producer({"bootstrap.servers": boot, "transactional.id": "tx", "client.id": "txn"})
        txn.init_transactions(20)
        txn.begin_transaction()
        txn.produce("t", key=b"k", value=b"in-txn")
        txn.commit_transaction(20)
        c = Consumer({
            "bootstrap.servers": boot, "group.id": "g", "auto.offset.reset": "earliest",
            "client.id": "cons", "enable.auto.commit": False,
        })  # fmt: skip
        c.subscribe(["t"])
        values, deadline = set(), time.time() + 30
        while len(values) < 101 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.add(m.value())
        c.commit(asynchronous=False)
        committed = c.committed([*c.assignment()], timeout=10)
        c.close()
    assert values == {f"m{i}".encode() for i in range(100)} | {b"in-txn"}, "all records consumed"
    assert sum(tp.offset for tp in committed) >= 101, f"committed past every record: {committed}"
    prod, cons, tx = versions_seen["prod"], versions_seen["cons"], versions_seen["txn"]
    assert prod["Produce"] == {9} and tx["Produce"] == {9}, f"Produce v9: {dict(prod)}"
    assert cons["Fetch"] == {12}, f"Fetch v12: {dict(cons)}"
    assert max(cons["OffsetCommit"]) >= 8 and max(cons["OffsetFetch"]) == 6, f"offsets: {dict(cons)}"
    assert max(cons["ListOffsets"]) >= 6, f"ListOffsets flexible: {dict(cons)}"
    assert prod["InitProducerId"] == {2} and tx["InitProducerId"] == {2}, f"InitProducerId v2: {dict(tx)}"
