"""CreateTopics and CreatePartitions refuse what Kafka refuses, with Kafka's error codes, before anything
is written: illegal names (INVALID_TOPIC_EXCEPTION), bad or unknown configs (INVALID_CONFIG), a name given
twice (INVALID_REQUEST), more partitions in one request than KRaft takes (POLICY_VIOLATION). The
broker goes on serving after each (the requests that found these stopped it)."""

from __future__ import annotations

import errno

import pytest

from kafkalite.coordination import paths
from kafkalite.errors import (
    InvalidConfigError,
    InvalidRequestError,
    InvalidTopicError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    MetadataRequest,
    TopicPartition,
)
from tests.broker.test_request_isolation import serves_produce_and_fetch

BAD_NAMES = ["", ".", "..", "../escape", "a/b", "x" * 300, "bad name!", "y" * 250, "tab\tname", "ü"]


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(brokers=1)
    c.create_topic("t", 1, 1)
    return c


def _create(cluster: Cluster, *topics: CreatableTopic) -> list:
    return list(cluster.request(cluster.controller(), CreateTopicsRequest(topics=topics)).topics)


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_an_illegal_topic_name_is_refused_before_it_reaches_a_znode_or_a_directory(cluster, name) -> None:
    [result] = _create(cluster, CreatableTopic(name=name, num_partitions=1, replication_factor=1))
    assert result.error_code == InvalidTopicError.code, result
    assert "Topic name is invalid" in (result.error_message or "")
    assert name not in cluster.store.get_children(paths.BROKER_TOPICS)
    assert sorted(p.name for p in cluster.brokers[1].log_dir.iterdir() if p.is_dir()) == ["t-0"]
    serves_produce_and_fetch(cluster)


def test_the_longest_legal_name_is_249_characters(cluster) -> None:
    cluster.create_topic("z" * 249, 1, 1)
    assert ("z" * 249) in cluster.store.get_children(paths.BROKER_TOPICS)


def test_names_that_differ_by_dot_and_underscore_collide(cluster) -> None:
    cluster.create_topic("orders.eu", 1, 1)
    [result] = _create(cluster, CreatableTopic(name="orders_eu", num_partitions=1, replication_factor=1))
    assert result.error_code == InvalidTopicError.code and "collides" in result.error_message


@pytest.mark.parametrize(
    "configs, why",
    [
        ((("segment.bytes", "1"),), "segment.bytes"),
        ((("retention.ms", "-5"),), "retention.ms"),
        ((("no.such.key", "1"),), "Unknown topic config name: no.such.key"),
        ((("cleanup.policy", "sometimes"),), "cleanup.policy"),
        ((("min.insync.replicas", "0"),), "min.insync.replicas"),
        ((("retention.ms", None),), "Null value not supported for topic configs: retention.ms"),
    ],
)
def test_a_bad_config_is_invalid_config_and_writes_nothing(cluster, configs, why) -> None:
    [result] = _create(
        cluster, CreatableTopic(name="cfg", num_partitions=1, replication_factor=1, configs=configs)
    )
    assert result.error_code == InvalidConfigError.code and why in result.error_message, result
    assert cluster.store.exists(paths.topic_path("cfg")) is None
    assert cluster.store.exists(f"{paths.CONFIG_TOPICS}/cfg") is None
    serves_produce_and_fetch(cluster)


def test_a_topic_named_twice_in_one_request_is_refused_both_times(cluster) -> None:
    results = _create(
        cluster,
        CreatableTopic(name="twice", num_partitions=1, replication_factor=1),
        CreatableTopic(name="once", num_partitions=1, replication_factor=1),
        CreatableTopic(name="twice", num_partitions=2, replication_factor=1),
    )
    assert [(r.name, r.error_code) for r in results] == [
        ("twice", InvalidRequestError.code),
        ("once", 0),
        ("twice", InvalidRequestError.code),
    ]
    assert cluster.store.exists(paths.topic_path("twice")) is None


def test_more_partitions_than_one_operation_may_create_is_a_policy_violation(cluster) -> None:
    with pytest.raises(PolicyViolationError, match="excessively large batch"):
        cluster.create_topic("huge", 20_000, 1)
    with pytest.raises(PolicyViolationError):
        cluster.create_topic("huge", 2**31 - 1, 1)  # placed, this would never finish
    with pytest.raises(PolicyViolationError):
        cluster.create_partitions("t", 20_000)
    assert cluster.store.exists(paths.topic_path("huge")) is None
    assert len(cluster.store.get_children(f"{paths.topic_path('t')}/partitions")) == 1
    serves_produce_and_fetch(cluster)


def test_metadata_and_describe_configs_name_an_illegal_topic(cluster) -> None:
    meta = cluster.request(1, MetadataRequest(topics=("../escape",), allow_auto_topic_creation=False))
    assert meta.topics[0].error_code == InvalidTopicError.code
    res = DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="a/b")
    [result] = cluster.request(1, DescribeConfigsRequest(resources=(res,))).results
    assert result.error_code == InvalidTopicError.code
    res = DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="absent")
    [result] = cluster.request(1, DescribeConfigsRequest(resources=(res,))).results
    assert result.error_code == UnknownTopicOrPartitionError.code


def test_a_replica_whose_log_cannot_be_opened_fails_alone(monkeypatch) -> None:
    c = Cluster(brokers=1)
    rm = c.brokers[1].rm
    real = rm._get_or_create

    def out_of_fds(tp: TopicPartition):
        if tp.partition == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(tp)

    monkeypatch.setattr(rm, "_get_or_create", out_of_fds)
    with pytest.raises(RequestTimedOutError):  # partition 1 never gets a working leader
        c.create_topic("t", 2, 1, timeout_ms=2_000)
    events = c.events("replica_storage_error")  # each LeaderAndIsr for it fails the same way
    assert events and {e.fields["tp"] for e in events} == {"t-1"}
    assert all("Too many open files" in e.fields["error"] for e in events)
    serves_produce_and_fetch(c, TopicPartition("t", 0))


# ------------------------------------------------------------------------------- real clients


@pytest.fixture(scope="module")
def three_brokers():
    from kafkalite.host.server import BackgroundServer

    with BackgroundServer(3) as srv:
        srv.create_topic("probe", 1, 3)
        yield srv


def _produce_with_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15_000})
    errors: list = []
    p.produce(topic, b"after", on_delivery=lambda e, m: errors.append(e))
    assert p.flush(20) == 0 and errors == [None], errors


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_confluent_admin_gets_kafkas_codes_and_the_controller_keeps_serving(three_brokers) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap_servers})
    asked = {
        "../escape": (NewTopic("../escape", 1, 1), KafkaError.TOPIC_EXCEPTION),
        "bad name!": (NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION),
        "w" * 250: (NewTopic("w" * 250, 1, 1), KafkaError.TOPIC_EXCEPTION),
        "seg": (NewTopic("seg", 1, 1, config={"segment.bytes": "1"}), KafkaError.INVALID_CONFIG),
        "ret": (NewTopic("ret", 1, 1, config={"retention.ms": "-5"}), KafkaError.INVALID_CONFIG),
        "unk": (NewTopic("unk", 1, 1, config={"no.such.key": "x"}), KafkaError.INVALID_CONFIG),
    }
    futures = admin.create_topics([t for t, _ in asked.values()], operation_timeout=10)
    for name, (_, code) in asked.items():
        err = futures[name].exception(15)
        assert err is not None and err.args[0].code() == code, (name, err)
    # too many partitions fails its whole request, as KRaft's bounded batch does
    futures = admin.create_topics([NewTopic("huge", 20_000, 1), NewTopic("fine", 1, 1)], operation_timeout=10)
    assert {n: f.exception(15).args[0].code() for n, f in futures.items()} == {
        "huge": KafkaError.POLICY_VIOLATION,
        "fine": KafkaError.POLICY_VIOLATION,
    }
    _produce_with_confluent(three_brokers.bootstrap_servers, "probe")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_kafka_python_admin_gets_kafkas_codes_and_the_cluster_keeps_serving(three_brokers) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=three_brokers.bootstrap_servers)
    try:
        result = admin.create_topics(
            [
                NewTopic("", 1, 1),
                NewTopic("..", 1, 1),
                NewTopic("cfg", 1, 1, topic_configs={"segment.bytes": "1"}),
            ],
            raise_errors=False,
        )
    finally:
        admin.close()
    codes = {t["name"]: t["error_code"] for t in result["topics"]}
    assert codes == {"": InvalidTopicError.code, "..": InvalidTopicError.code, "cfg": InvalidConfigError.code}
    _produce_with_confluent(three_brokers.bootstrap_servers, "probe")
