"""kafkalite's brokers over TCP with real Kafka clients (kafka-python and confluent-kafka), and the
listener's handling of frames that are too large, malformed or of versions it does not serve."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkalite.host.server import BackgroundServer
from kafkalite.protocol.codec.header import decode_response, encode_request, spec_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def one_broker():
    with BackgroundServer(1, max_request_bytes=1 << 20) as srv:
        srv.create_topic("t", 2, 1)
        yield srv


@pytest.fixture(scope="module")
def three_brokers():
    with BackgroundServer(3) as srv:
        srv.create_topic("r", 3, 3, **{"min.insync.replicas": 2})
        yield srv


def _raw(srv: BackgroundServer) -> socket.socket:
    host, port = next(iter(srv.server.addresses.values()))
    s = socket.create_connection((host, port), timeout=5)
    return s


def _recv_frame(s: socket.socket) -> bytes:
    head = _recv_exactly(s, 4)
    (size,) = struct.unpack(">i", head)
    return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_kafka_python_produces_and_consumes(one_broker):
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=one_broker.bootstrap_servers, acks=1, linger_ms=5)
    futures = [p.send("t", key=str(i).encode(), value=f"v{i}".encode()) for i in range(500)]
    p.flush(10)
    metas = [f.get(timeout=10) for f in futures]
    assert {m.partition for m in metas} == {0, 1}
    p.close()
    c = KafkaConsumer(
        "t", bootstrap_servers=one_broker.bootstrap_servers, auto_offset_reset="earliest",
        consumer_timeout_ms=3000, group_id=None,
    )  # fmt: skip
    values = sorted(m.value for m in c)
    c.close()
    assert values == sorted(f"v{i}".encode() for i in range(500))


def test_confluent_idempotent_producer_and_group_consumer_on_three_brokers(three_brokers):
    from confluent_kafka import Consumer, Producer, TopicPartition

    srv = three_brokers
    p = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(3000):
        p.produce("r", f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []
    assert srv.server.stats.by_api.get(22, 0) >= 1  # InitProducerId: the producer is idempotent
    c = Consumer(
        {"bootstrap.servers": srv.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    c.subscribe(["r"])
    got = []
    per_partition = [0, 0, 0]
    deadline = time.time() + 30
    while len(got) < 3000 and time.time() < deadline:
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            got.append(m.value())
            per_partition[m.partition()] += 1
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("r", i) for i in range(3)], 10)
    c.close()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(3000))
    # librdkafka's sticky partitioner may put every record in one partition within a linger window;
    # a partition the group never read from has no committed offset (-1001), as in Kafka.
    assert [tp.offset for tp in committed] == [n if n else -1001 for n in per_partition]


def test_api_versions_of_an_unknown_version_answers_v0_with_the_served_versions(one_broker):
    s = _raw(one_broker)
    body = struct.pack(">hhi", 18, 77, 9) + struct.pack(">h", 1) + b"x"
    s.sendall(struct.pack(">i", len(body)) + body)
    corr, resp = decode_response(18, 0, _recv_frame(s))
    s.close()
    assert corr == 9 and resp["error_code"] == 35
    assert {a["api_key"] for a in resp["api_keys"]} >= {0, 1, 3, 18}


def test_a_zookeeper_mode_broker_neither_lists_nor_reads_describe_quorum(one_broker):
    # As Kafka's: DescribeQuorum's listeners are broker (KRaft) and controller, not zkBroker, so a
    # ZooKeeper-mode broker leaves it out of ApiVersions and closes a connection that sends it, though
    # the codec reads it (for KRaft brokers): the refusal is the ZooKeeper-mode listener's
    assert spec_for(55, 1) is not None
    s = _raw(one_broker)
    s.sendall(encode_request(18, 3, 1, "t", {"client_software_name": "t", "client_software_version": "1"}))
    _, resp = decode_response(18, 3, _recv_frame(s))
    keys = {a["api_key"] for a in resp["api_keys"]}
    assert 60 in keys and 55 not in keys
    topics = [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]
    s.sendall(encode_request(55, 1, 2, "t", {"topics": topics}))
    with pytest.raises(ConnectionError):
        _recv_frame(s)
    s.close()


def test_metadata_quorum_at_a_zookeeper_mode_broker_says_it_is_not_served(one_broker):
    from click.testing import CliRunner

    from kafkalite.cli import kafkalite

    host, port = next(iter(one_broker.server.addresses.values()))
    res = CliRunner().invoke(
        kafkalite, ["metadata-quorum", "--bootstrap-server", f"{host}:{port}", "describe", "--status"]
    )
    assert res.exit_code == 1 and "does not serve DescribeQuorum (API 55)" in res.output, res.output


def test_pipelined_requests_are_answered_in_order_and_acks0_not_at_all(one_broker):
    from kafkalite.records import build_batch

    s = _raw(one_broker)
    batch = build_batch([(None, b"x", None)])
    produce0 = {"transactional_id": None, "acks": 0, "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}  # fmt: skip
    metadata = {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
    frames = [
        encode_request(0, 8, 1, "raw", produce0),
        encode_request(3, 8, 2, "raw", metadata),
        encode_request(0, 8, 3, "raw", {**produce0, "acks": 1}),
        encode_request(3, 1, 4, "raw", metadata),
    ]
    s.sendall(b"".join(frames))
    corrs = []
    for api, version in ((3, 8), (0, 8), (3, 1)):
        corr, body = decode_response(api, version, _recv_frame(s))
        corrs.append(corr)
    s.close()
    assert corrs == [2, 3, 4]  # no answer to the acks=0 produce, the rest in order


def test_oversized_and_malformed_frames_close_only_their_connection(one_broker):
    bad = _raw(one_broker)
    bad.sendall(struct.pack(">i", (1 << 20) + 1))  # over this listener's socket.request.max.bytes
    assert bad.recv(10) == b""
    garbage = _raw(one_broker)
    junk = struct.pack(">hhi", 3, 8, 1) + b"\x7f\xff"  # a client id longer than the frame
    garbage.sendall(struct.pack(">i", len(junk)) + junk)
    assert garbage.recv(10) == b""
    good = _raw(one_broker)
    good.sendall(encode_request(3, 8, 11, "ok", {"topics": None, "allow_auto_topic_creation": False}))
    corr, body = decode_response(3, 8, _recv_frame(good))
    good.close()
    assert corr == 11 and {t["name"] for t in body["topics"]} >= {"t"}
    assert one_broker.server.stats.closed_bad_frames >= 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_server_start_serves_clients_and_stops_cleanly_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys

    from kafka import KafkaConsumer, KafkaProducer

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port), "--log-dir",
         str(tmp_path / "logs"), "--topic", "demo:2"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        assert f"127.0.0.1:{port}" in line, line
        p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        p.send("demo", b"hello").get(10)
        p.close()
        c = KafkaConsumer(
            "demo",
            bootstrap_servers=f"127.0.0.1:{port}",
            auto_offset_reset="earliest",
            consumer_timeout_ms=3000,
        )
        assert [m.value for m in c] == [b"hello"]
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    # A clean stop closes the logs: the producer state snapshot of the idempotent producer is there.
    assert list((tmp_path / "logs").glob("broker-1/demo-*/*.snapshot"))


def test_bench_wire_reports_every_case_and_the_ceiling():
    from kafkalite.harness.bench.wire import run_wire_bench

    r = run_wire_bench(2000, 50, security="SASL_SSL")
    assert [c.name[:3] for c in r.cases] == ["(a)", "(c)", "(d)", "(e)", "(b)"]
    assert all(c.errors == 0 and c.records >= 2000 for c in r.cases)
    assert r.loopback_mb_per_s > 0 and "loopback" in r.table()
    assert set(r.security_ratios) == {"produce over SASL_SSL", "consume over SASL_SSL"}
    assert "of PLAINTEXT" in r.table()
    assert set(r.fetch_serving) == {"sendfile", "copied"} and "page faults per fetch" in r.table()
    assert all(
        f.mb_per_s > 0 and f.faults_per_fetch >= 0 and f.cpu_ms_per_fetch >= 0
        for f in r.fetch_serving.values()
    )
    assert all(f.broker_cpu_ms_per_fetch is not None for f in r.fetch_serving.values())
    assert "broker) and" in r.table()  # the broker thread's own CPU beside the process's


def test_sendfile_serving_takes_no_page_fault_per_page_served():
    """Zero copy moves the records from the page cache to the socket: the broker's process maps no new
    memory for them, whereas a copy needs a page of its own per 4 KiB (fresh or reused)."""
    from kafkalite.harness.bench.wire import fetch_serving, produce_case
    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(1) as one:
        one.create_topic("t", 1, 1)
        produce_case(one.bootstrap_servers, "t", 40_000, bytes(100), {"acks": "1"})
        served = fetch_serving(one.bootstrap_servers, "t", rounds=5, broker_thread=one.thread_ident)
        # the last sendfile is counted once it returns, which may be after the client has read it all
        assert one.server.stats.zero_copy_bytes >= 4 * 4_000_000
    assert served.mb_per_s > 0
    # the broker's thread alone: some CPU, and no more than the whole process's (its client included)
    assert 0 < served.broker_cpu_ms_per_fetch <= served.cpu_ms_per_fetch + 1e-6
    assert served.faults_per_fetch < 4_000_000 / 4096 / 10  # a tenth of a fault per page served, at most


def test_admin_creates_topics_and_every_codec_round_trips(three_brokers):
    from confluent_kafka import Consumer, Producer
    from kafka.admin import KafkaAdminClient, NewTopic

    srv = three_brokers
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap_servers)
    result = admin.create_topics([NewTopic("codecs", 3, 2)])
    assert result is not None
    assert "codecs" in admin.list_topics()
    admin.close()
    sent = []
    for codec in ("gzip", "snappy", "lz4", "zstd", "none"):
        p = Producer({"bootstrap.servers": srv.bootstrap_servers, "compression.type": codec, "acks": "all"})
        for i in range(50):
            value = f"{codec}-{i}".encode()
            p.produce("codecs", value)
            sent.append(value)
        assert p.flush(20) == 0
    c = Consumer(
        {"bootstrap.servers": srv.bootstrap_servers, "group.id": "codecs", "auto.offset.reset": "earliest"}
    )
    c.subscribe(["codecs"])
    got = []
    deadline = time.time() + 20
    while len(got) < len(sent) and time.time() < deadline:
        got += [m.value() for m in c.consume(500, 0.5) if m.error() is None]
    c.close()
    assert sorted(got) == sorted(sent)


def test_leader_failover_under_a_confluent_producer_loses_and_duplicates_nothing():
    from confluent_kafka import Consumer, Producer

    with BackgroundServer(3, config={"zookeeper.session.timeout.ms": 2000}) as srv:
        srv.create_topic("f", 1, 3, **{"min.insync.replicas": 2})
        leader = srv.call(lambda: srv.server.cluster.leader("f", 0))
        p = Producer({
            "bootstrap.servers": srv.bootstrap_servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 60_000,
        })  # fmt: skip
        acked, failed = [], []

        def done(err, msg):
            (failed if err else acked).append(msg.value())

        for i in range(4000):
            p.produce("f", f"{i:05d}".encode(), on_delivery=done)
            p.poll(0)
            if i == 1500:
                srv.crash_broker(leader)
            if i % 200 == 0:
                time.sleep(0.02)
        assert p.flush(60) == 0
        new_leader = srv.call(lambda: srv.server.cluster.leader("f", 0))
        assert new_leader not in (None, leader)
        srv.restart_broker(leader)
        c = Consumer(
            {"bootstrap.servers": srv.bootstrap_servers, "group.id": "f", "auto.offset.reset": "earliest"}
        )
        c.subscribe(["f"])
        got = []
        deadline = time.time() + 30
        while len(got) < len(acked) and time.time() < deadline:
            got += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
        c.close()
    assert failed == [] and len(acked) == 4000
    assert got == sorted(acked)  # every acknowledged record once, in order


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative_sticky"])
def test_kafka_python_groups_share_partitions_and_take_over_when_one_leaves(strategy):
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignor = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative_sticky": CooperativeStickyAssignor,
    }[strategy]
    with BackgroundServer(1, config={"group.initial.rebalance.delay.ms": 0}) as srv:
        srv.create_topic("g", 4, 1)

        def member():
            return KafkaConsumer(
                "g", bootstrap_servers=srv.bootstrap_servers, group_id=f"grp-{strategy}",
                partition_assignment_strategy=[assignor], session_timeout_ms=6000,
                heartbeat_interval_ms=500, max_poll_interval_ms=10000,
                # No commit before each rebalance: on a loaded machine kafka-python's commit can outlast
                # a short poll and hold the cooperative second round back.
                enable_auto_commit=False,
            )  # fmt: skip

        a, b = member(), member()
        deadline = time.time() + 60
        while time.time() < deadline:
            a.poll(300)
            b.poll(300)
            shares = (a.assignment(), b.assignment())
            if all(shares) and len(shares[0] | shares[1]) == 4 and not shares[0] & shares[1]:
                break
        assert all(shares) and len(shares[0] | shares[1]) == 4 and not shares[0] & shares[1]
        b.close()  # LeaveGroup: its partitions move to the member left
        deadline = time.time() + 60
        while time.time() < deadline and len(a.assignment()) < 4:
            a.poll(300)
        assert len(a.assignment()) == 4
        described = srv.call(lambda: srv.server.cluster.describe_group(f"grp-{strategy}"))
        a.close()
    assert described is not None


def test_confluent_transactions_commit_and_abort_with_read_committed_consumers(three_brokers):
    from confluent_kafka import Consumer, Producer

    srv = three_brokers
    srv.create_topic("tx", 2, 3, **{"min.insync.replicas": 2})
    p = Producer({"bootstrap.servers": srv.bootstrap_servers, "transactional.id": "conf-1", "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("tx", f"c{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx", f"a{i}".encode())
    p.flush(30)  # the aborted records reach the log: read_uncommitted sees them, read_committed must not
    p.abort_transaction(30)
    seen = {}
    for iso in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": srv.bootstrap_servers, "group.id": f"tx-{iso}",
                      "auto.offset.reset": "earliest", "isolation.level": iso, "log_level": 0})  # fmt: skip
        c.subscribe(["tx"])
        got: list[bytes] = []
        deadline = time.time() + 15
        while time.time() < deadline and len(got) < (10 if iso == "read_committed" else 15):
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        c.close()
        seen[iso] = sorted(got)
    assert seen["read_committed"] == sorted(f"c{i}".encode() for i in range(10))
    assert seen["read_uncommitted"] == sorted(
        [f"c{i}".encode() for i in range(10)] + [f"a{i}".encode() for i in range(5)]
    )


def test_admin_cluster_partitions_elections_and_reassignments_over_the_wire():
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, NewPartitions
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    with BackgroundServer(3, config={"zookeeper.session.timeout.ms": 1500}) as srv:
        srv.create_topic("a", 2, 2)
        ca = AdminClient({"bootstrap.servers": srv.bootstrap_servers})
        cluster = ca.describe_cluster().result(10)
        assert cluster.cluster_id == "kafkalite" and sorted(n.id for n in cluster.nodes) == [1, 2, 3]
        assert ca.create_partitions([NewPartitions("a", 4)])["a"].result(10) is None
        with pytest.raises(Exception, match="INVALID_PARTITIONS"):
            ca.create_partitions([NewPartitions("a", 3)])["a"].result(10)  # can only grow
        deadline = time.time() + 10
        while len(ca.list_topics("a", timeout=10).topics["a"].partitions) < 4 and time.time() < deadline:
            time.sleep(0.1)
        assert sorted(ca.list_topics("a", timeout=10).topics["a"].partitions) == [0, 1, 2, 3]
        elected = ca.elect_leaders(ElectionType.PREFERRED, [CTP("a", 0)]).result(10)
        assert [e.code() for e in elected.values()] == [84]  # ELECTION_NOT_NEEDED: the first replica leads

        # OffsetForLeaderEpoch as a consumer asks it after a leader change: where did epoch 0 end?
        meta = ca.list_topics("a", timeout=10).topics["a"].partitions[0]
        leader_port = srv.server.addresses[meta.leader][1]
        s = socket.create_connection(("127.0.0.1", leader_port), timeout=5)
        body = {"replica_id": -1, "topics": [{"topic": "a", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}  # fmt: skip
        s.sendall(encode_request(23, 4, 7, "raw", body))
        corr, resp = decode_response(23, 4, _recv_frame(s))
        s.close()
        (answer,) = resp["topics"][0]["partitions"]
        assert corr == 7 and answer["error_code"] == 0 and answer["leader_epoch"] == 0
        assert answer["end_offset"] == 0  # nothing written yet

        # DeleteRecords: the log start moves on every replica, consumers start there, errors are Kafka's.
        from confluent_kafka import Consumer, Producer

        p = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all"})
        for i in range(30):
            p.produce("a", f"d{i}".encode(), partition=1)
        assert p.flush(30) == 0
        deleted = ca.delete_records([CTP("a", 1, 12)], operation_timeout=10)
        assert next(iter(deleted.values())).result(10).low_watermark == 12
        with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE"):
            next(iter(ca.delete_records([CTP("a", 1, 31)]).values())).result(10)
        c = Consumer(
            {"bootstrap.servers": srv.bootstrap_servers, "group.id": "d", "auto.offset.reset": "earliest"}
        )
        c.assign([CTP("a", 1)])
        first = None
        deadline = time.time() + 20
        while first is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first = (m.offset(), m.value())
        c.close()
        assert first == (12, b"d12")

        ka = KafkaAdminClient(bootstrap_servers=srv.bootstrap_servers)
        try:
            assert ka.describe_cluster()["controller_id"] == cluster.controller.id
            # A move that waits: a staying replica is down and out of the ISR, so the move cannot finish.
            topic = ca.list_topics("a", timeout=10).topics["a"]
            ctrl = cluster.controller.id
            part, victim = next(
                (p.id, r) for p in topic.partitions.values() for r in p.replicas if r not in (ctrl, p.leader)
            )
            replicas = list(topic.partitions[part].replicas)
            spare = next(b for b in (1, 2, 3) if b not in replicas)
            srv.crash_broker(victim)
            deadline = time.time() + 20
            while victim in ca.list_topics("a", timeout=10).topics["a"].partitions[part].isrs:
                assert time.time() < deadline, "the dead follower never left the ISR"
                time.sleep(0.2)
            tp = TopicPartition("a", part)
            assert ka.alter_partition_reassignments({tp: replicas + [spare]}) == {tp: None}
            listed = ka.list_partition_reassignments()
            assert list(listed) == [tp]
            assert listed[tp]["adding_replicas"] == [spare] and listed[tp]["removing_replicas"] == []
            srv.restart_broker(victim)
            deadline = time.time() + 20
            while ka.list_partition_reassignments() and time.time() < deadline:
                time.sleep(0.2)
            assert ka.list_partition_reassignments() == {}
        finally:
            ka.close()


def test_admin_describes_and_alters_topic_configs_with_both_clients(one_broker):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType as KType
    from kafka.admin import KafkaAdminClient

    one_broker.create_topic("cfg", 1, 1, **{"retention.ms": 3600000})
    ca = AdminClient({"bootstrap.servers": one_broker.bootstrap_servers})
    res = ConfigResource("TOPIC", "cfg")
    described = next(iter(ca.describe_configs([res]).values())).result(10)
    assert described["retention.ms"].value == "3600000" and not described["retention.ms"].is_default
    assert described["cleanup.policy"].value == "delete" and described["cleanup.policy"].is_default

    change = ConfigResource(
        "TOPIC", "cfg",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )  # fmt: skip
    assert next(iter(ca.incremental_alter_configs([change]).values())).result(10) is None
    bad = ConfigResource(
        "TOPIC",
        "cfg",
        incremental_configs=[
            ConfigEntry("segment.bytes", "big", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        next(iter(ca.incremental_alter_configs([bad]).values())).result(10)

    log = one_broker.server.cluster.replica(1, "cfg", 0).log
    assert set(log.config.cleanup_policy.split(",")) == {"delete", "compact"}
    assert log.config.retention_ms == 604800000  # the override was deleted: back to the default

    ka = KafkaAdminClient(bootstrap_servers=one_broker.bootstrap_servers)
    try:
        legacy = [KConfigResource(KType.TOPIC, "cfg", {"retention.ms": "1000"})]
        assert ka.alter_configs(legacy, incremental=False) == {"topic": {"cfg": "OK"}}
        got = ka.describe_configs([KConfigResource(KType.TOPIC, "cfg", None)], config_filter="all")["topic"][
            "cfg"
        ]
        broker = ka.describe_configs(
            [KConfigResource(KType.BROKER, "1", ["log.retention.ms"])], config_filter="all"
        )
    finally:
        ka.close()
    # kafka-python's legacy AlterConfigs resends the other overrides, as AlterConfigs replaces the whole set.
    assert (got["retention.ms"]["value"], got["retention.ms"]["config_source"]) == (
        "1000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert got["cleanup.policy"]["value"] == "delete,compact"
    assert got["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert got["retention.ms"]["config_type"] == "LONG"
    assert broker["broker"]["1"]["log.retention.ms"]["read_only"] is True
    assert log.config.retention_ms == 1000 and log.config.compact


def test_admin_deletes_an_empty_consumer_group(one_broker):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = Consumer(
        {"bootstrap.servers": one_broker.bootstrap_servers, "group.id": "dg", "auto.offset.reset": "earliest"}
    )
    c.subscribe(["t"])
    deadline = time.time() + 20
    while time.time() < deadline and not c.assignment():
        c.poll(0.2)
    c.commit(offsets=[TopicPartition("t", 0, 0)], asynchronous=False)
    c.close()
    ca = AdminClient({"bootstrap.servers": one_broker.bootstrap_servers})
    assert next(iter(ca.delete_consumer_groups(["dg"]).values())).result(10) is None
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        next(iter(ca.delete_consumer_groups(["dg"]).values())).result(10)
    listed = ca.list_consumer_groups().result(10)
    assert "dg" not in {g.group_id for g in listed.valid}


def test_admin_deletes_topics_with_both_clients(three_brokers):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient

    ca = AdminClient({"bootstrap.servers": three_brokers.bootstrap_servers})
    for f in ca.create_topics([NewTopic("gone1", 2, 3), NewTopic("gone2", 1, 2)]).values():
        f.result(10)
    assert next(iter(ca.delete_topics(["gone1"], operation_timeout=10).values())).result(15) is None
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        next(iter(ca.delete_topics(["never"], operation_timeout=10).values())).result(15)
    ka = KafkaAdminClient(bootstrap_servers=three_brokers.bootstrap_servers)
    try:
        ka.delete_topics(["gone2"], timeout_ms=10_000)
        deadline = time.time() + 20
        while {"gone1", "gone2"} & set(ka.list_topics()) and time.time() < deadline:
            time.sleep(0.2)
        assert not {"gone1", "gone2"} & set(ka.list_topics())
    finally:
        ka.close()
    logs = [p.name for b in three_brokers.server.cluster.brokers.values() for p in b.log_dir.glob("gone*")]
    assert logs == []


def test_a_controlled_shutdown_under_a_confluent_producer_costs_no_errors():
    from confluent_kafka import Producer

    with BackgroundServer(3) as srv:
        srv.create_topic("cs", 3, 3, **{"min.insync.replicas": 2})
        p = Producer({"bootstrap.servers": srv.bootstrap_servers, "acks": "all", "linger.ms": 5})
        errors, acked = [], []

        def report(e, m):
            (errors if e else acked).append(e or m.value())

        for i in range(2000):
            p.produce("cs", f"a{i}".encode(), partition=i % 3, on_delivery=report)
        p.flush(30)
        srv.stop_broker(2, controlled=True)
        for i in range(2000):
            p.produce("cs", f"b{i}".encode(), partition=i % 3, on_delivery=report)
        assert p.flush(60) == 0
        events = srv.call(lambda: srv.server.cluster.events("controlled_shutdown_complete"))
    assert errors == [] and len(acked) == 4000
    assert events[-1].fields["outcome"] == "done"
