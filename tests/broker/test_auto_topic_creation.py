"""Kafka's topic auto-creation: a Metadata request that names a missing topic, with
``allow_auto_topic_creation`` and the broker's ``auto.create.topics.enable`` (default true), creates it
with ``num.partitions`` and ``default.replication.factor``, answering LEADER_NOT_AVAILABLE meanwhile;
consumers ask only with ``allow.auto.create.topics``; with an authorizer the principal needs CREATE on
the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import pytest

from kafkalite.coordination import paths
from kafkalite.errors import (
    InvalidReplicationFactorError,
    InvalidTopicError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import MetadataRequest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _meta(cluster: Cluster, topic: str, allow: bool = True):
    return cluster.request(1, MetadataRequest(topics=(topic,), allow_auto_topic_creation=allow)).topics[0]


def test_a_producer_creates_its_topic_with_the_brokers_defaults() -> None:
    c = Cluster(brokers=3, config={"num.partitions": 3, "default.replication.factor": 2})
    p = c.producer(acks="all")
    sent = p.send("fresh", b"v")
    assert c.run_until(sent.done, 20_000), "the send never completed"
    assert sent.exception() is None and sent.result().topic == "fresh"
    assert [len(c.replicas("fresh", n)) for n in range(3)] == [2, 2, 2]
    [event] = c.events("auto_create_topic")
    assert event.fields == {"topic": "fresh", "partitions": 3, "replication_factor": 2}


def test_metadata_answers_leader_not_available_while_the_topic_is_created() -> None:
    c = Cluster(brokers=1)
    assert _meta(c, "fresh").error_code == LeaderNotAvailableError.code
    assert c.run_until(lambda: _meta(c, "fresh").error_code == 0, 5_000)
    assert c.store.exists(paths.topic_path("fresh")) is not None


def test_nothing_is_created_when_the_broker_or_the_request_says_no() -> None:
    off = Cluster(brokers=1, config={"auto.create.topics.enable": False})
    assert _meta(off, "nope").error_code == UnknownTopicOrPartitionError.code
    on = Cluster(brokers=1)
    assert _meta(on, "nope", allow=False).error_code == UnknownTopicOrPartitionError.code
    assert on.request(1, MetadataRequest(topics=None)).topics == ()  # "every topic" creates none
    for c in (off, on):
        c.run_for(1_000)
        assert c.store.exists(paths.topic_path("nope")) is None and not c.events("auto_create_topic")


def test_an_illegal_name_is_invalid_topic_and_a_failed_creation_is_reported() -> None:
    c = Cluster(brokers=1, config={"default.replication.factor": 3})
    assert _meta(c, "bad name!").error_code == InvalidTopicError.code
    assert _meta(c, "needs3").error_code == LeaderNotAvailableError.code
    c.run_for(100)
    assert _meta(c, "needs3").error_code == InvalidReplicationFactorError.code
    [failed] = c.events("auto_create_topic_failed")
    assert failed.fields["error_code"] == InvalidReplicationFactorError.code
    assert c.store.exists(paths.topic_path("needs3")) is None


def test_a_consumer_creates_only_with_allow_auto_create_topics() -> None:
    c = Cluster(brokers=1)
    no = c.consumer(config={"allow.auto.create.topics": False, "group.id": "g1"})
    no.subscribe(["quiet"])
    no.poll(1_000)
    assert c.store.exists(paths.topic_path("quiet")) is None
    yes = c.consumer(config={"group.id": "g2"})
    yes.subscribe(["loud"])
    yes.poll(3_000)
    assert c.store.exists(paths.topic_path("loud")) is not None


# ------------------------------------------------------------------------------- real clients


@pytest.fixture(scope="module")
def server():
    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(1) as srv:
        yield srv


def test_confluent_producer_to_a_new_topic_succeeds(server) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": server.bootstrap_servers, "message.timeout.ms": 20_000})
    errors: list = []
    for i in range(10):
        p.produce("made-by-confluent", f"v{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None] * 10, errors


def test_kafka_python_producer_to_a_new_topic_succeeds(server) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=server.bootstrap_servers)
    try:
        meta = p.send("made-by-kafka-python", b"v").get(timeout=20)
    finally:
        p.close()
    assert meta.topic == "made-by-kafka-python" and meta.offset == 0


JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)


@pytest.fixture(scope="module")
def secure():
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from kafkalite.host.server import BackgroundServer

    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafkalite.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener is the brokers' own
    }
    with BackgroundServer(1, config=config) as srv:
        admin = AdminClient({"bootstrap.servers": srv.server.bootstrap("PLAINTEXT")})

        def allow(user: str, op: AclOperation, rtype=ResourceType.TOPIC, name="*") -> AclBinding:
            pattern = ResourcePatternType.LITERAL
            return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)

        bindings = [
            allow(u, op) for u in ("alice", "bob") for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        bindings.append(allow("bob", AclOperation.CREATE, name="bobs"))
        for f in admin.create_acls(bindings).values():
            f.result(20)
        yield srv


def _sasl(srv, user: str) -> dict:
    return {
        "bootstrap.servers": srv.server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def test_without_create_permission_confluent_gets_topic_authorization_failed(secure) -> None:
    from confluent_kafka import KafkaError, Producer

    p = Producer({**_sasl(secure, "alice"), "message.timeout.ms": 20_000})
    errors: list = []
    p.produce("alices", b"v", on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    node = secure.server.broker_node(1)
    assert secure.call(node.cache.has_topic, "alices") is False


def test_with_create_permission_on_the_topic_it_is_created(secure) -> None:
    from confluent_kafka import Producer

    p = Producer({**_sasl(secure, "bob"), "message.timeout.ms": 20_000})
    errors: list = []
    p.produce("bobs", b"v", on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None], errors


def test_without_create_permission_kafka_python_is_refused(secure) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    p = KafkaProducer(
        bootstrap_servers=secure.server.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        max_block_ms=10_000,
    )
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("alices-too", b"v").get(timeout=20)
    finally:
        p.close()


def test_against_server_start_both_clients_produce_to_new_topics(tmp_path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from confluent_kafka import Producer
    from kafka import KafkaProducer

    from kafkalite.host.processes import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "kafkalite.cli",
        "server",
        "start",
        "--port",
        str(port),
        "--log-dir",
        str(tmp_path),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "broker(s) on" not in (
            proc.stderr.readline() or "broker(s) on"
        ):
            pass
        bootstrap = f"127.0.0.1:{port}"
        p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20_000, "log_level": 0})
        errors: list = []
        p.produce("new-for-confluent", b"v", on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0 and errors == [None], errors
        kp = KafkaProducer(bootstrap_servers=bootstrap)
        try:
            assert kp.send("new-for-kafka-python", b"v").get(timeout=20).offset == 0
        finally:
            kp.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
