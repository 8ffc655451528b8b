"""Kafka's broker configuration (``server.properties``): the keys the replication core and the controller
read, under Kafka's names and with Kafka's defaults.

``BrokerConfig.from_props`` parses strings as a ``.properties`` file would give them. Keys kafkalite does not
model are kept in ``extra`` (Kafka warns about unknown keys rather than failing). Topic-level overrides
(``min.insync.replicas``, ``unclean.leader.election.enable`` and every ``LogConfig`` key) are merged by
``topic_config``; broker-level log defaults may be given under Kafka's broker name (``log.roll.ms``,
``message.max.bytes``, see ``TOPIC_KEY_SYNONYMS``), with a ``log.`` prefix, or as the topic key itself.

``broker.rack`` (default null) names the broker's rack; the broker writes it into its ``/brokers/ids``
registration, and the controller places replicas rack-aware when every live broker has one (it refuses
to place when only some do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.config.base import parse_bool, parse_int
from kafkalite.config.topic import LogConfig
from kafkalite.errors import InvalidConfigError

# Kafka name -> (field, kind, default, minimum); kind "str?" is a string that may be null.
_SPECS: dict[str, tuple[str, str, Any, int | None]] = {
    "broker.id": ("broker_id", "int", -1, -1),
    "broker.rack": ("broker_rack", "str?", None, None),
    "log.dirs": ("log_dirs", "str", "/tmp/kafka-logs", None),
    "min.insync.replicas": ("min_insync_replicas", "int", 1, 1),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", "int", 30000, 0),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", "int", 500, 0),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", "int", 1, 0),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", "int", 1048576, 0),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", "int", 10485760, 0),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", "int", 1000, 0),
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", "int", 30000, 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", "bool", False, None),
    "delete.topic.enable": ("delete_topic_enable", "bool", True, None),
    # A Metadata request naming a missing topic creates it with these (KafkaApis + AutoTopicCreationManager).
    "auto.create.topics.enable": ("auto_create_topics_enable", "bool", True, None),
    "num.partitions": ("num_partitions", "int", 1, 1),
    "default.replication.factor": ("default_replication_factor", "int", 1, 1),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", "bool", True, None),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", "int", 3, 0),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_retry_backoff_ms", "int", 5000, 0),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", "bool", True, None),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", "int", 10, 0),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", "int", 300, 1),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", "int", 18000, 1),
    "replica.high.watermark.checkpoint.interval.ms": (
        "replica_high_watermark_checkpoint_interval_ms",
        "int",
        5000,
        1,
    ),
    "controller.socket.timeout.ms": ("controller_socket_timeout_ms", "int", 30000, 1),
    "alter.partition.retry.backoff.ms": ("alter_partition_retry_backoff_ms", "int", 1000, 0),
    # Log manager: retention checks and the log cleaner (compaction) on every replica.
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", "int", 300000, 1),
    # Producer state: ids idle this long are forgotten (their next batch is accepted at any sequence).
    "producer.id.expiration.ms": ("producer_id_expiration_ms", "int", 86400000, 1),
    "producer.id.expiration.check.interval.ms": (
        "producer_id_expiration_check_interval_ms",
        "int",
        600000,
        1,
    ),
    "log.cleaner.enable": ("log_cleaner_enable", "bool", True, None),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", "int", 15000, 0),
    # Group coordinator and the offsets topic (__consumer_offsets).
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", "int", 50, 1),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", "int", 3, 1),
    "offsets.topic.segment.bytes": ("offsets_topic_segment_bytes", "int", 104857600, 1),
    "offsets.commit.timeout.ms": ("offsets_commit_timeout_ms", "int", 5000, 1),
    "offsets.commit.required.acks": ("offsets_commit_required_acks", "int", -1, -1),
    "offsets.retention.minutes": ("offsets_retention_minutes", "int", 10080, 1),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", "int", 600000, 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", "int", 4096, 0),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", "int", 3000, 0),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", "int", 6000, 0),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", "int", 1800000, 0),
    "group.max.size": ("group_max_size", "int", 2**31 - 1, 1),
    # Transaction coordinator and its log (__transaction_state).
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", "int", 50, 1),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", "int", 3, 1),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", "int", 2, 1),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", "int", 104857600, 1),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", "int", 900000, 1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        "int",
        10000,
        1,
    ),
    # kafkalite switch: False = pre-KIP-101 follower truncation to the high watermark.
    "kafkalite.truncate.by.leader.epoch": ("truncate_by_leader_epoch", "bool", True, None),
}
_FIELD_TO_KEY = {f: k for k, (f, *_rest) in _SPECS.items()}
_TOPIC_KEYS = {"min.insync.replicas", "unclean.leader.election.enable"}

#: Topic key -> the broker key that sets its default, as Kafka names it (``server.properties``).
TOPIC_KEY_SYNONYMS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "preallocate": "log.preallocate",
    "message.format.version": "log.message.format.version",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
# The throttled-replica lists and remote.storage.enable / remote.log.* have no broker-level synonym in Kafka:
# a topic without an override has Kafka's default.
_LOG_KEY_FOR_BROKER_KEY = {b: t for t, b in TOPIC_KEY_SYNONYMS.items() if t not in _TOPIC_KEYS}


def _parse(key: str, kind: str, value: Any, minimum: int | None) -> Any:
    if kind == "str":
        return str(value)
    if kind == "str?":
        return None if value is None else str(value)
    if kind == "bool":
        return parse_bool(key, value)
    return parse_int(key, value, low=minimum)


@dataclass(frozen=True)
class BrokerConfig:
    """A broker's settings; build with ``from_props`` (Kafka names) or keyword fields."""

    broker_id: int = -1
    broker_rack: str | None = None
    log_dirs: str = "/tmp/kafka-logs"
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    zookeeper_session_timeout_ms: int = 18000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    controller_socket_timeout_ms: int = 30000
    alter_partition_retry_backoff_ms: int = 1000
    truncate_by_leader_epoch: bool = True
    log_retention_check_interval_ms: int = 300000
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_commit_timeout_ms: int = 5000
    offsets_commit_required_acks: int = -1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2**31 - 1
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104857600
    transaction_max_timeout_ms: int = 900000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    log_props: dict[str, Any] = field(default_factory=dict)
    """Broker-level defaults for topic (LogConfig) keys, under the topic key names."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys kafkalite does not interpret, kept as given."""

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **overrides: Any) -> BrokerConfig:
        """Parse a dict of Kafka broker keys; ``log.<key>`` / topic keys become log defaults."""
        merged: dict[str, Any] = dict(props or {})
        for name, value in overrides.items():
            merged[_FIELD_TO_KEY.get(name, name)] = value
        kwargs: dict[str, Any] = {}
        log_props: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        log_keys = set(LogConfig().to_props())
        for key, value in merged.items():
            spec = _SPECS.get(key)
            if spec is not None:
                fname, kind, _default, minimum = spec
                kwargs[fname] = _parse(key, kind, value, minimum)
            elif key in log_keys:
                log_props[key] = value
            elif key in _LOG_KEY_FOR_BROKER_KEY:
                log_props[_LOG_KEY_FOR_BROKER_KEY[key]] = value
            elif key.startswith("log.") and key[4:] in log_keys:
                log_props[key[4:]] = value
            else:
                extra[key] = value
        if log_props:
            LogConfig.from_props(log_props)  # fail now, naming the key, rather than at the first log
        return cls(**kwargs, log_props=log_props, extra=extra)

    @classmethod
    def coerce(cls, config: BrokerConfig | Mapping[str, Any] | None) -> BrokerConfig:
        if isinstance(config, BrokerConfig):
            return config
        return cls.from_props(config)

    def get(self, key: str) -> Any:
        """A value by Kafka key name (broker keys, log defaults, or kept extras)."""
        spec = _SPECS.get(key)
        if spec is not None:
            return getattr(self, spec[0])
        if key in self.log_props:
            return self.log_props[key]
        if key in self.extra:
            return self.extra[key]
        raise InvalidConfigError(f"unknown broker config key {key!r}")

    def to_props(self) -> dict[str, Any]:
        out = {k: getattr(self, f) for k, (f, *_r) in _SPECS.items()}
        out.update(self.log_props)
        out.update(self.extra)
        return out

    def log_config(self, topic_overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """The LogConfig of a topic: broker log defaults, then the topic's overrides."""
        props = dict(self.log_props)
        for k, v in (topic_overrides or {}).items():
            if k not in _TOPIC_KEYS:
                props[k] = v
        return LogConfig.from_props(props)

    def topic_config(self, topic_overrides: Mapping[str, Any] | None = None) -> TopicReplicationConfig:
        """Per-topic replication settings (``min.insync.replicas``, unclean election) with overrides."""
        o = topic_overrides or {}
        mir = _parse("min.insync.replicas", "int", o.get("min.insync.replicas", self.min_insync_replicas), 1)
        unclean = _parse(
            "unclean.leader.election.enable",
            "bool",
            o.get("unclean.leader.election.enable", self.unclean_leader_election_enable),
            None,
        )
        return TopicReplicationConfig(mir, unclean, self.log_config(o))


@dataclass(frozen=True)
class TopicReplicationConfig:
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    log: LogConfig


__all__ = ["TOPIC_KEY_SYNONYMS", "BrokerConfig", "TopicReplicationConfig"]
