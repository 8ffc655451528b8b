"""Every topic-level key Kafka 3.9 has is accepted with a valid value and refused (INVALID_CONFIG, naming
the key) with a bad one, whether kafkalite acts on it or only stores it; a real client creating a topic
with ``compression.type=lz4`` over TCP gets its topic, and DescribeConfigs reports every key."""

from __future__ import annotations

import pytest

from kafkalite.broker.topic_validator import validate_topic_configs
from kafkalite.config.base import describe_keys
from kafkalite.config.broker import BrokerConfig
from kafkalite.config.topic import TOPIC_KEYS, LogConfig
from kafkalite.errors import InvalidConfigError
from kafkalite.host.cluster import Cluster
from kafkalite.host.server import BackgroundServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Kafka 3.9's topic-level keys (TopicConfig / LogConfig), each with a valid and an invalid value.
KAFKA_39_TOPIC_KEYS: dict[str, tuple[str, str]] = {
    "cleanup.policy": ("compact,delete", "sometimes"),
    "compression.gzip.level": ("9", "0"),
    "compression.lz4.level": ("17", "18"),
    "compression.zstd.level": ("-5", "23"),
    "compression.type": ("lz4", "brotli"),
    "delete.retention.ms": ("1000", "-1"),
    "file.delete.delay.ms": ("0", "-1"),
    "flush.messages": ("1", "0"),
    "flush.ms": ("1000", "soon"),
    "follower.replication.throttled.replicas": ("0:1,1:2", "0-1"),
    "index.interval.bytes": ("4096", "-1"),
    "leader.replication.throttled.replicas": ("*", "*,0:1"),
    "local.retention.bytes": ("-2", "-3"),
    "local.retention.ms": ("3600000", "-3"),
    "max.compaction.lag.ms": ("60000", "0"),
    "max.message.bytes": ("2000000", "-1"),
    "message.downconversion.enable": ("false", "maybe"),
    "message.format.version": ("3.0-IV1", "three"),
    "message.timestamp.after.max.ms": ("3600000", "-1"),
    "message.timestamp.before.max.ms": ("3600000", "-1"),
    "message.timestamp.difference.max.ms": ("3600000", "-1"),
    "message.timestamp.type": ("LogAppendTime", "WallTime"),
    "min.cleanable.dirty.ratio": ("0.1", "1.5"),
    "min.compaction.lag.ms": ("0", "-1"),
    "min.insync.replicas": ("2", "0"),
    "preallocate": ("true", "yes please"),
    "remote.log.copy.disable": ("true", "2"),
    "remote.log.delete.on.disable": ("false", "1.0"),
    "remote.storage.enable": ("false", "off!"),
    "retention.bytes": ("-1", "-2"),
    "retention.ms": ("-1", "-5"),
    "segment.bytes": ("1048576", "13"),
    "segment.index.bytes": ("4096", "4"),
    "segment.jitter.ms": ("1000", "-1"),
    "segment.ms": ("3600000", "0"),
    "unclean.leader.election.enable": ("true", "sure"),
}


def test_the_declarations_are_kafkas_topic_keys() -> None:
    assert set(TOPIC_KEYS) == set(KAFKA_39_TOPIC_KEYS)


@pytest.mark.parametrize("name", sorted(KAFKA_39_TOPIC_KEYS))
def test_each_kafka_topic_key_is_accepted_with_a_valid_value(name: str) -> None:
    good, _bad = KAFKA_39_TOPIC_KEYS[name]
    validate_topic_configs(BrokerConfig(), {name: good})
    tc = BrokerConfig().topic_config({name: good})
    got = tc.log.get(name) if name in LogConfig.config_keys() else getattr(tc, TOPIC_KEYS[name].attr)
    assert TOPIC_KEYS[name].render(got) == good


@pytest.mark.parametrize("name", sorted(KAFKA_39_TOPIC_KEYS))
def test_each_kafka_topic_key_is_refused_with_a_bad_value_naming_the_key(name: str) -> None:
    _good, bad = KAFKA_39_TOPIC_KEYS[name]
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        validate_topic_configs(BrokerConfig(), {name: bad})


def test_every_key_is_documented_and_says_whether_kafkalite_acts_on_it() -> None:
    rows = {r["name"]: r for r in describe_keys(TOPIC_KEYS)}
    assert all(r["doc"] and r["valid"] and r["type"] for r in rows.values())
    assert rows["compression.type"]["acted_on"] is False and rows["retention.ms"]["acted_on"] is True
    assert rows["compression.type"]["default"] == "producer"


def test_a_stored_key_survives_an_alteration_and_is_described() -> None:
    c = Cluster(brokers=1, seed=3)
    c.create_topic("t", 1, 1, config={"compression.type": "zstd", "preallocate": "true"})
    d = c.describe_configs("t")
    assert set(TOPIC_KEYS) <= set(d)
    assert d["compression.type"].value == "zstd" and d["preallocate"].value == "true"
    assert d["remote.storage.enable"].value == "false"
    c.alter_configs("t", set={"retention.ms": 1000})
    c.run_for(10)
    assert c.describe_configs("t")["retention.ms"].value == "1000"
    c.close()


def test_a_real_client_creates_a_topic_with_compression_type_lz4_over_the_wire() -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    with BackgroundServer(1) as srv:
        ca = AdminClient({"bootstrap.servers": srv.bootstrap_servers})
        created = ca.create_topics([NewTopic("lz", 1, 1, config={"compression.type": "lz4"})])
        assert created["lz"].result(10) is None
        bad = ca.create_topics([NewTopic("bad", 1, 1, config={"compression.type": "brotli"})])
        with pytest.raises(Exception, match="INVALID_CONFIG|compression.type"):
            bad["bad"].result(10)
        described = next(iter(ca.describe_configs([ConfigResource("TOPIC", "lz")]).values())).result(10)
        assert described["compression.type"].value == "lz4" and not described["compression.type"].is_default
