"""Topic and broker configs as Kafka's brokers describe and alter them: the precedence of sources, the
change notification that reaches every replica's log, IncrementalAlterConfigs' four operations, and
Kafka's errors."""

from __future__ import annotations

import pytest

from kafkalite.errors import InvalidConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
)


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=5, config={"log.retention.bytes": 5_000_000, "min.insync.replicas": 2})
    c.create_topic("t", partitions=2, replication_factor=3, config={"retention.ms": 3_600_000})
    return c


def test_describe_shows_the_override_the_broker_setting_and_kafkas_default(cluster: Cluster) -> None:
    d = cluster.describe_configs("t", synonyms=True)
    assert (d["retention.ms"].value, d["retention.ms"].config_source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert [(s.name, s.value, s.source) for s in d["retention.ms"].synonyms] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]
    assert (d["retention.bytes"].value, d["retention.bytes"].config_source) == (
        "5000000", ConfigSource.STATIC_BROKER_CONFIG,
    )  # fmt: skip
    assert (d["min.insync.replicas"].value, d["min.insync.replicas"].config_source) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG,
    )  # fmt: skip
    assert (d["cleanup.policy"].value, d["cleanup.policy"].config_source) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert d["unclean.leader.election.enable"].value == "false"
    with pytest.raises(UnknownTopicOrPartitionError):
        cluster.describe_configs("nope")


def test_an_alteration_reaches_every_replicas_log(cluster: Cluster) -> None:
    cluster.alter_configs("t", set={"retention.ms": 1000, "segment.bytes": 4096})
    for b in (1, 2, 3):
        for p in (0, 1):
            log = cluster.replica(b, "t", p).log
            assert (log.config.retention_ms, log.config.segment_bytes) == (1000, 4096)
    assert cluster.describe_configs("t")["segment.bytes"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    cluster.alter_configs("t", delete=["retention.ms"])  # back to the broker's value
    assert cluster.replica(1, "t", 0).log.config.retention_ms == 604800000
    assert cluster.describe_configs("t")["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG
    assert cluster.events("topic_config_changed")


def test_append_and_subtract_work_on_lists_only(cluster: Cluster) -> None:
    def incremental(*configs: AlterableConfig) -> tuple[int, str | None]:
        res = AlterConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="t", configs=configs)
        r = cluster.request(1, IncrementalAlterConfigsRequest(resources=(res,))).results[0]
        cluster.run_for(10)
        return r.error_code, r.error_message

    assert incremental(AlterableConfig(name="cleanup.policy", value="compact", op=AlterConfigOp.APPEND)) == (
        0,
        None,
    )
    assert cluster.describe_configs("t")["cleanup.policy"].value == "delete,compact"
    assert cluster.replica(2, "t", 1).log.config.compact
    assert incremental(AlterableConfig(name="cleanup.policy", value="delete", op=AlterConfigOp.SUBTRACT)) == (
        0,
        None,
    )
    assert cluster.describe_configs("t")["cleanup.policy"].value == "compact"
    code, message = incremental(AlterableConfig(name="retention.ms", value="5", op=AlterConfigOp.APPEND))
    assert code == InvalidConfigError.code and "append is not allowed for config key: retention.ms" in message
    code, _ = incremental(
        AlterableConfig(name="retention.ms", value="5"), AlterableConfig(name="retention.ms", value="6")
    )
    assert code == InvalidRequestError.code  # a key twice in one resource


def test_bad_keys_values_and_resources_get_kafkas_errors_and_change_nothing(cluster: Cluster) -> None:
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: retention.parsecs"):
        cluster.alter_configs("t", set={"retention.parsecs": 1})
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        cluster.alter_configs("t", set={"segment.bytes": "lots"})
    with pytest.raises(UnknownTopicOrPartitionError):
        cluster.alter_configs("nope", set={"retention.ms": 1})
    cluster.alter_configs("t", set={"retention.ms": 5}, validate_only=True)
    assert cluster.describe_configs("t")["retention.ms"].value == "3600000"
    broker = AlterConfigsResource(
        resource_type=ConfigResourceType.BROKER,
        resource_name="1",
        configs=(AlterableConfig(name="log.retention.ms", value="5"),),
    )
    r = cluster.request(1, IncrementalAlterConfigsRequest(resources=(broker,))).results[0]
    assert r.error_code == InvalidRequestError.code and "dynamically" in r.error_message


def test_legacy_alter_configs_replaces_every_override(cluster: Cluster) -> None:
    res = AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC,
        resource_name="t",
        configs=(AlterableConfig(name="segment.ms", value="60000"),),
    )
    assert cluster.request(2, AlterConfigsRequest(resources=(res,))).results[0].error_code == 0
    cluster.run_for(10)
    d = cluster.describe_configs("t")
    assert d["segment.ms"].value == "60000"
    assert d["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG  # its override is gone


def test_broker_configs_are_described_read_only_with_their_source(cluster: Cluster) -> None:
    res = DescribeConfigsResource(
        resource_type=ConfigResourceType.BROKER,
        resource_name="2",
        configuration_keys=("min.insync.replicas", "log.retention.bytes", "log.roll.ms"),
    )
    result = cluster.request(2, DescribeConfigsRequest(resources=(res,))).results[0]
    got = {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}
    assert got == {
        "min.insync.replicas": ("2", ConfigSource.STATIC_BROKER_CONFIG, True),
        "log.retention.bytes": ("5000000", ConfigSource.STATIC_BROKER_CONFIG, True),
        "log.roll.ms": ("604800000", ConfigSource.DEFAULT_CONFIG, True),
    }
    other = DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="3")
    assert (
        cluster.request(2, DescribeConfigsRequest(resources=(other,))).results[0].error_code
        == InvalidRequestError.code
    )


def test_enabling_unclean_election_brings_a_leaderless_partition_back(tmp_path) -> None:
    c = Cluster(brokers=2, seed=9, config={"replica.lag.time.max.ms": 500})
    try:
        c.create_topic("u", partitions=1, replication_factor=2)
        leader = c.leader("u", 0)
        follower = next(b for b in c.replicas("u", 0) if b != leader)
        c.crash(follower)
        assert c.run_until(lambda: c.isr("u", 0) == (leader,), 60_000)
        c.crash(leader)
        c.restart(follower)
        assert c.run_until(lambda: follower in c.brokers and c.brokers[follower].registered, 60_000)
        assert c.run_until(lambda: c.leader("u", 0) in (None, -1), 60_000)  # its only ISR member is down
        c.alter_configs("u", set={"unclean.leader.election.enable": True})
        assert c.run_until(lambda: c.leader("u", 0) == follower, 10_000)
    finally:
        c.close()


def test_a_secret_in_the_broker_config_is_described_without_its_value() -> None:
    """As Kafka: a PASSWORD key, or one without a declared type (a per-listener override), is sensitive:
    DescribeConfigs names it but never sends its value."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="s3cret";'
    c = Cluster(brokers=1, seed=3, config={"sasl.jaas.config": jaas,
                                          "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas})  # fmt: skip
    try:
        res = DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="1")
        result = c.request(1, DescribeConfigsRequest(resources=(res,), include_synonyms=True)).results[0]
        got = {d.name: d for d in result.configs}
        for key in ("sasl.jaas.config", "listener.name.sasl_ssl.plain.sasl.jaas.config"):
            assert got[key].is_sensitive and got[key].value is None, got[key]
            assert all(s.value is None for s in got[key].synonyms)
        assert "s3cret" not in repr(result)
        assert not got["min.insync.replicas"].is_sensitive and got["min.insync.replicas"].value == "1"
    finally:
        c.close()
