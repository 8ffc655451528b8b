"""KIP-848's consumer group protocol over TCP: a raw ConsumerGroupHeartbeat, Metadata by topic id, and
confluent-kafka (librdkafka) consumers with ``group.protocol=consumer`` sharing a topic through a scale-out."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from kafkalite.host.server import BackgroundServer
from kafkalite.protocol.codec.messages import SPECS
from kafkalite.protocol.metadata import NO_TOPIC_ID, topic_id
from tests import hostile

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOPIC = "kip848"


@pytest.fixture(scope="module")
def server():
    config = {"group.consumer.heartbeat.interval.ms": 300, "group.initial.rebalance.delay.ms": 0}
    with BackgroundServer(1, config=config) as srv:
        srv.create_topic(TOPIC, 6, 1)
        yield srv


def _sock(srv: BackgroundServer) -> socket.socket:
    host, port = next(iter(srv.server.addresses.values()))
    return socket.create_connection((host, port), timeout=10)


def test_api_versions_advertise_the_heartbeat_and_metadata_by_topic_id(server) -> None:
    with _sock(server) as s:
        answer = hostile.call(s, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert served[68] == (0, 1) and served[3] == (0, 12)
    assert SPECS[3].flexible(9) and not SPECS[3].flexible(8)


def test_a_raw_heartbeat_joins_and_metadata_names_the_assigned_topic_ids(server) -> None:
    with _sock(server) as s:
        coord = hostile.call(s, 10, 2, {"key": "raw", "key_type": 0})
        assert coord["error_code"] == 0 or coord["error_code"] == 15  # the offsets topic may be on its way
        deadline = time.monotonic() + 20
        while coord["error_code"] and time.monotonic() < deadline:
            time.sleep(0.2)
            coord = hostile.call(s, 10, 2, {"key": "raw", "key_type": 0})
        join = {
            "group_id": "raw", "member_id": "m-raw", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [TOPIC], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [],
        }  # fmt: skip
        r = hostile.call(s, 68, 1, join)
        assert r["error_code"] == 0 and r["member_epoch"] >= 1, r
        [entry] = r["assignment"]["topic_partitions"]
        named = {"topics": [{"topic_id": NO_TOPIC_ID, "name": TOPIC}], "allow_auto_topic_creation": False,
                 "include_topic_authorized_operations": False}  # fmt: skip
        [by_name] = hostile.call(s, 3, 12, named)["topics"]
        # the id the coordinator assigns by is the broker's own (KIP-516), not one derived from the name
        assert entry["topic_id"] == by_name["topic_id"] != topic_id(TOPIC)
        assert sorted(entry["partitions"]) == list(range(6))
        missing = topic_id("no-such-topic")
        body = {
            "topics": [{"topic_id": entry["topic_id"], "name": None}, {"topic_id": missing, "name": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        }  # fmt: skip
        meta = hostile.call(s, 3, 12, body)
        by_id = {t["topic_id"]: t for t in meta["topics"]}
        assert by_id[entry["topic_id"]]["name"] == TOPIC and len(by_id[entry["topic_id"]]["partitions"]) == 6
        assert by_id[missing]["name"] is None and by_id[missing]["error_code"] == 100  # UNKNOWN_TOPIC_ID
        leave = {**join, "member_epoch": -1, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                 "topic_partitions": None}  # fmt: skip
        assert hostile.call(s, 68, 1, leave)["error_code"] == 0


class _Member:
    """One confluent-kafka consumer and what it owns, kept from its rebalance callbacks."""

    def __init__(self, srv: BackgroundServer, name: str, log: list) -> None:
        from confluent_kafka import Consumer, KafkaException

        self.name, self.log, self.owned, self.revoked = name, log, set(), []
        self.consumer = Consumer({
            "bootstrap.servers": srv.bootstrap_servers, "group.id": "kip848-group",
            "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip

        def on_assign(c, parts) -> None:
            self.owned |= {p.partition for p in parts}
            log.append((name, "assign", sorted(p.partition for p in parts)))

        def on_revoke(c, parts) -> None:
            # what this member consumed of them is committed before another may take them (an error:
            # nothing consumed since the last commit)
            with contextlib.suppress(KafkaException):
                c.commit(asynchronous=False)
            self.owned -= {p.partition for p in parts}
            self.revoked.append(sorted(p.partition for p in parts))
            log.append((name, "revoke", sorted(p.partition for p in parts)))

        self.consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)

    def poll(self, got: list) -> None:
        m = self.consumer.poll(0.05)
        if m is None or m.error():
            return
        assert m.partition() in self.owned, (self.name, m.partition(), self.owned)
        got.append((self.name, m.partition(), m.offset(), m.value()))
        self.consumer.commit(asynchronous=True)


def _produce(srv: BackgroundServer, start: int, count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all"})
    for i in range(start, start + count):
        p.produce(TOPIC, f"v{i}".encode(), partition=i % 6)
    assert p.flush(30) == 0


def test_confluent_kafka_consumers_share_a_topic_and_scale_out_incrementally(server) -> None:
    """Two members split 6 partitions and read every record once; a third joins and takes partitions
    one by one from the others (each revokes only what moves), never two owners of a partition at once."""
    log: list = []
    got: list = []
    members = [_Member(server, "a", log), _Member(server, "b", log)]

    def poll_until(done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            for m in members:
                m.poll(got)
                owners = [p for x in members for p in x.owned]
                assert len(owners) == len(set(owners)), log  # no partition owned by two at once
        assert done(), (log, len(got))

    try:
        _produce(server, 0, 600)
        poll_until(lambda: len(got) >= 600 and all(len(m.owned) == 3 for m in members), 60)
        assert sorted(v for *_, v in got) == sorted(f"v{i}".encode() for i in range(600))
        assert {n for n, *_ in got} == {"a", "b"}
        before = [len(m.revoked) for m in members]
        members.append(_Member(server, "c", log))
        _produce(server, 600, 600)
        poll_until(lambda: len(got) >= 1200 and all(len(m.owned) == 2 for m in members), 90)
        values = [v for *_, v in got]
        assert len(values) == len(set(values)) == 1200, "a record was read twice or lost"
        # incremental: a and b each gave up one partition and kept the other two all along
        for m, n in zip(members, before, strict=False):
            assert [len(r) for r in m.revoked[n:]] == [1], (m.name, log)
        assert sorted(p for m in members for p in m.owned) == list(range(6))
    finally:
        for m in members:
            m.consumer.close()


def test_confluent_admin_lists_and_describes_a_consumer_type_group(server) -> None:
    """ListGroups v5 (group type, types filter) and ConsumerGroupDescribe, as librdkafka's AdminClient
    asks for them, beside a classic group."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    log: list = []
    new = _Member(server, "n", log)
    classic = __import__("confluent_kafka").Consumer({
        "bootstrap.servers": server.bootstrap_servers, "group.id": "kip848-classic",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    classic.subscribe([TOPIC])
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(new.owned) == 6 and classic.assignment()):
            new.poll([])
            classic.poll(0.05)
        assert len(new.owned) == 6 and classic.assignment(), log
        listed = admin.list_consumer_groups(request_timeout=10).result()
        types = {g.group_id: g.type for g in listed.valid}
        assert types["kip848-group"] == ConsumerGroupType.CONSUMER
        assert types["kip848-classic"] == ConsumerGroupType.CLASSIC
        only = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=10).result()
        assert {g.group_id for g in only.valid} >= {"kip848-group"}
        assert "kip848-classic" not in {g.group_id for g in only.valid}
        [desc] = admin.describe_consumer_groups(["kip848-group"], request_timeout=10).values()
        d = desc.result()
        assert d.type == ConsumerGroupType.CONSUMER and d.state == ConsumerGroupState.STABLE
        assert d.partition_assignor == "uniform" and len(d.members) == 1
        assert sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == list(range(6))
        # kafkalite's own AdminClient and tool over the same wire
        from click.testing import CliRunner

        from kafkalite.cli import kafkalite
        from kafkalite.host.admin_client import AdminClient as LiteAdmin

        lite = LiteAdmin(server.bootstrap_servers)
        try:
            found = {g.group_id: (g.group_type, g.group_state) for g in lite.list_groups()}
            assert found["kip848-group"] == ("consumer", "Stable")
            assert found["kip848-classic"][0] == "classic"
            consumer_type = {g.group_id for g in lite.list_groups(types=["consumer"])}
            assert "kip848-group" in consumer_type and "kip848-classic" not in consumer_type
        finally:
            lite.close()
        out = CliRunner().invoke(
            kafkalite, ["consumer-groups", "--bootstrap-server", server.bootstrap_servers, "--list", "--type"]
        )
        assert out.exit_code == 0, out.output
        assert ["kip848-group", "Consumer"] in [line.split() for line in out.output.splitlines()]
    finally:
        new.consumer.close()
        classic.close()
