"""Kafka's broker configuration (``server.properties``): the keys the replication core and the controller
read, under Kafka's names and with Kafka's defaults.

Each key is declared once on ``BrokerConfig`` (``key(...)``: Kafka's name, type, default, range and a line
of documentation). ``BrokerConfig.from_props`` parses strings as a ``.properties`` file would give them. Keys kafkalite does not
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

from kafkalite.common.security_protocol import PROTOCOLS, protocol_map
from kafkalite.config.base import DeclaredConfig, choice_of, invalid, key
from kafkalite.config.topic import REPLICATION_KEYS, LogConfig
from kafkalite.errors import InvalidConfigError

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


def _text(_name: str, value: Any) -> str:
    return str(value)  # a .properties file gives text; a path or a number given in Python is kept as text


# Kafka's default: every security protocol is also a listener name that speaks it.
_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
_PROTOCOL_MAP_VALID = "NAME:PROTOCOL pairs, comma separated; PROTOCOL one of " + ", ".join(PROTOCOLS)
_CLIENT_AUTH = ("required", "requested", "none")


SERVER_ASSIGNORS = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
"""The consumer group protocol's server-side assignors: Kafka's class name -> its ``name()``."""


def server_assignor_names(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``group.consumer.assignors`` as assignor names: a comma list of names or of Kafka's class names."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(SERVER_ASSIGNORS.get(v.strip(), v.strip()) for v in items if v.strip())
    known = sorted(SERVER_ASSIGNORS.values())
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InvalidConfigError(
            f"group.consumer.assignors: unknown assignor(s) {unknown or value!r}; known: {known}"
        )
    return names


_MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _assignors(_name: str, value: Any) -> str:
    # Refused at startup naming the key, not later when the first consumer-protocol member joins.
    return ",".join(server_assignor_names(value))


def _protocol_map(name: str, value: Any) -> str:
    text = value.strip() if isinstance(value, str) else None
    try:
        protocol_map(text)
    except ValueError as e:
        raise invalid(name, value, str(e), _PROTOCOL_MAP_VALID) from None
    if text is None:
        raise invalid(name, value, "expected a string", _PROTOCOL_MAP_VALID)
    return text


# The SASL mechanisms kafkalite's listeners serve (kafkalite.security.listeners reads the key per listener).
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _sasl_mechanisms(name: str, value: Any) -> str:
    allowed = "a comma-separated list of " + ", ".join(_SASL_MECHANISMS)
    if not isinstance(value, (str, list, tuple)):
        raise invalid(name, value, "expected a comma-separated list", allowed)
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    mechanisms = [m.strip().upper() for m in items if m.strip()]
    bad = [m for m in mechanisms if m not in _SASL_MECHANISMS]
    if bad:
        raise invalid(name, value, f"kafkalite does not serve {', '.join(bad)}", allowed)
    return ",".join(mechanisms)


@dataclass(frozen=True)
class BrokerConfig(DeclaredConfig):
    """A broker's settings; build with ``from_props`` (Kafka names) or keyword fields."""

    KIND = "broker"

    broker_id: int = key("broker.id", "INT", -1, "This broker's id (-1: not set).", low=-1)
    broker_rack: str | None = key(
        "broker.rack", "STRING", None,
        "The rack this broker sits in, for rack-aware replica placement (null: none).",
        nullable=True, check=_text,
    )  # fmt: skip
    log_dirs: str = key(
        "log.dirs", "STRING", "/tmp/kafka-logs",
        "Directories holding the partitions' logs, comma separated.", check=_text,
    )  # fmt: skip
    log_dir_failure_timeout_ms: int = key(
        "log.dir.failure.timeout.ms", "LONG", 30000,
        "KRaft: a broker halts if the controller has not heard of a failed log dir within this long.",
        low=1,
    )  # fmt: skip
    min_insync_replicas: int = key(
        "min.insync.replicas", "INT", 1,
        "Default replicas that must be in sync for an acks=all write.", low=1,
    )  # fmt: skip
    replica_lag_time_max_ms: int = key(
        "replica.lag.time.max.ms", "LONG", 30000,
        "A follower that has not caught up for this long leaves the ISR.", low=0,
    )  # fmt: skip
    replica_fetch_wait_max_ms: int = key(
        "replica.fetch.wait.max.ms", "INT", 500,
        "Longest a follower's fetch waits at the leader for data.", low=0,
    )  # fmt: skip
    replica_fetch_min_bytes: int = key(
        "replica.fetch.min.bytes", "INT", 1,
        "Bytes a follower's fetch waits for before it is answered.", low=0,
    )  # fmt: skip
    replica_fetch_max_bytes: int = key(
        "replica.fetch.max.bytes", "INT", 1048576,
        "Bytes a follower fetches per partition per request.", low=0,
    )  # fmt: skip
    replica_fetch_response_max_bytes: int = key(
        "replica.fetch.response.max.bytes", "INT", 10485760,
        "Bytes a follower's whole fetch response may hold.", low=0,
    )  # fmt: skip
    replica_fetch_backoff_ms: int = key(
        "replica.fetch.backoff.ms", "INT", 1000,
        "Pause after a follower's fetch fails.", low=0,
    )  # fmt: skip
    max_incremental_fetch_session_cache_slots: int = key(
        "max.incremental.fetch.session.cache.slots", "INT", 1000,
        "Incremental fetch sessions (KIP-227) a broker keeps; 0: every fetch is a full one.", low=0,
    )  # fmt: skip
    replica_socket_timeout_ms: int = key(
        "replica.socket.timeout.ms", "INT", 30000,
        "Timeout of a follower's fetch request.", low=1,
    )  # fmt: skip
    unclean_leader_election_enable: bool = key(
        "unclean.leader.election.enable", "BOOLEAN", False,
        "Default: let a replica outside the ISR become leader (losing acknowledged writes).",
    )  # fmt: skip
    delete_topic_enable: bool = key(
        "delete.topic.enable", "BOOLEAN", True,
        "Whether DeleteTopics deletes (else it is refused).",
    )  # fmt: skip
    # A Metadata request naming a missing topic creates it with these (KafkaApis + AutoTopicCreationManager).
    auto_create_topics_enable: bool = key(
        "auto.create.topics.enable", "BOOLEAN", True,
        "Create a topic a Metadata request names when it does not exist.",
    )  # fmt: skip
    num_partitions: int = key("num.partitions", "INT", 1, "Partitions of an auto-created topic.", low=1)
    default_replication_factor: int = key(
        "default.replication.factor", "INT", 1,
        "Replication factor of an auto-created topic.", low=1,
    )  # fmt: skip
    controlled_shutdown_enable: bool = key(
        "controlled.shutdown.enable", "BOOLEAN", True,
        "Move leadership away before the broker stops.",
    )  # fmt: skip
    controlled_shutdown_max_retries: int = key(
        "controlled.shutdown.max.retries", "INT", 3,
        "Attempts at a controlled shutdown before stopping anyway.", low=0,
    )  # fmt: skip
    controlled_shutdown_retry_backoff_ms: int = key(
        "controlled.shutdown.retry.backoff.ms", "LONG", 5000,
        "Pause between controlled shutdown attempts.", low=0,
    )  # fmt: skip
    auto_leader_rebalance_enable: bool = key(
        "auto.leader.rebalance.enable", "BOOLEAN", True,
        "Move leadership back to preferred replicas in the background.",
    )  # fmt: skip
    leader_imbalance_per_broker_percentage: int = key(
        "leader.imbalance.per.broker.percentage", "INT", 10,
        "Share of non-preferred leaders a broker tolerates before a rebalance.", low=0,
    )  # fmt: skip
    leader_imbalance_check_interval_seconds: int = key(
        "leader.imbalance.check.interval.seconds", "LONG", 300,
        "How often the controller checks leader imbalance.", low=1,
    )  # fmt: skip
    zookeeper_session_timeout_ms: int = key(
        "zookeeper.session.timeout.ms", "INT", 18000,
        "A broker whose session is silent this long is dead to the controller.", low=1,
    )  # fmt: skip
    replica_high_watermark_checkpoint_interval_ms: int = key(
        "replica.high.watermark.checkpoint.interval.ms", "LONG", 5000,
        "How often high watermarks are written to disk.", low=1,
    )  # fmt: skip
    controller_socket_timeout_ms: int = key(
        "controller.socket.timeout.ms", "INT", 30000,
        "Timeout of the controller's requests to brokers.", low=1,
    )  # fmt: skip
    alter_partition_retry_backoff_ms: int = key(
        "alter.partition.retry.backoff.ms", "INT", 1000,
        "Pause before a leader retries a failed AlterPartition.", low=0,
    )  # fmt: skip
    # Log manager: retention checks and the log cleaner (compaction) on every replica.
    log_retention_check_interval_ms: int = key(
        "log.retention.check.interval.ms", "LONG", 300000,
        "How often the log manager applies retention.", low=1,
    )  # fmt: skip
    # Producer state: ids idle this long are forgotten (their next batch is accepted at any sequence).
    producer_id_expiration_ms: int = key(
        "producer.id.expiration.ms", "INT", 86400000,
        "A producer id idle this long is forgotten.", low=1,
    )  # fmt: skip
    producer_id_expiration_check_interval_ms: int = key(
        "producer.id.expiration.check.interval.ms", "INT", 600000,
        "How often idle producer ids are looked for.", low=1,
    )  # fmt: skip
    log_cleaner_enable: bool = key("log.cleaner.enable", "BOOLEAN", True, "Run the log cleaner (compaction).")
    log_cleaner_backoff_ms: int = key(
        "log.cleaner.backoff.ms", "LONG", 15000,
        "Pause of the log cleaner when there is nothing to clean.", low=0,
    )  # fmt: skip
    # Group coordinator and the offsets topic (__consumer_offsets).
    offsets_topic_num_partitions: int = key(
        "offsets.topic.num.partitions", "INT", 50,
        "Partitions of __consumer_offsets.", low=1,
    )  # fmt: skip
    offsets_topic_replication_factor: int = key(
        "offsets.topic.replication.factor", "SHORT", 3,
        "Replication factor of __consumer_offsets.", low=1,
    )  # fmt: skip
    offsets_topic_segment_bytes: int = key(
        "offsets.topic.segment.bytes", "INT", 104857600,
        "Segment size of __consumer_offsets.", low=1,
    )  # fmt: skip
    offsets_commit_timeout_ms: int = key(
        "offsets.commit.timeout.ms", "INT", 5000,
        "Longest an offset commit waits for its write to replicate.", low=1,
    )  # fmt: skip
    offsets_commit_required_acks: int = key(
        "offsets.commit.required.acks", "SHORT", -1,
        "acks of the offset commit write.", low=-1,
    )  # fmt: skip
    offsets_retention_minutes: int = key(
        "offsets.retention.minutes", "INT", 10080,
        "Committed offsets of an empty group are kept this long.", low=1,
    )  # fmt: skip
    offsets_retention_check_interval_ms: int = key(
        "offsets.retention.check.interval.ms", "LONG", 600000,
        "How often expired offsets are looked for.", low=1,
    )  # fmt: skip
    offset_metadata_max_bytes: int = key(
        "offset.metadata.max.bytes", "INT", 4096,
        "Largest metadata string an offset commit may carry.", low=0,
    )  # fmt: skip
    group_initial_rebalance_delay_ms: int = key(
        "group.initial.rebalance.delay.ms", "INT", 3000,
        "How long a new group waits for more members before its first rebalance.", low=0,
    )  # fmt: skip
    group_min_session_timeout_ms: int = key(
        "group.min.session.timeout.ms", "INT", 6000,
        "Smallest session timeout a member may ask for.", low=0,
    )  # fmt: skip
    group_max_session_timeout_ms: int = key(
        "group.max.session.timeout.ms", "INT", 1800000,
        "Largest session timeout a member may ask for.", low=0,
    )  # fmt: skip
    group_max_size: int = key("group.max.size", "INT", 2**31 - 1, "Most members a group may have.", low=1)
    # The consumer group protocol (KIP-848): the broker sets the members' timing and assigns.
    group_consumer_session_timeout_ms: int = key(
        "group.consumer.session.timeout.ms", "INT", 45000,
        "A consumer-protocol member silent this long is fenced.", low=1,
    )  # fmt: skip
    group_consumer_heartbeat_interval_ms: int = key(
        "group.consumer.heartbeat.interval.ms", "INT", 5000,
        "The heartbeat interval the coordinator gives consumer-protocol members.", low=1,
    )  # fmt: skip
    group_consumer_max_size: int = key(
        "group.consumer.max.size", "INT", 2**31 - 1, "Most members a consumer-protocol group may have.", low=1,
    )  # fmt: skip
    group_consumer_assignors: str = key(
        "group.consumer.assignors", "LIST", "uniform,range",
        "Server-side assignors by name (uniform, range) or Kafka class name; the first is the default.",
        check=_assignors,
    )  # fmt: skip
    group_consumer_migration_policy: str = key(
        "group.consumer.migration.policy", "STRING", "bidirectional",
        "Which online conversions of a group with members are allowed between the classic and the consumer "
        "protocol: bidirectional, upgrade, downgrade or disabled.",
        choices=_MIGRATION_POLICIES, check=choice_of(*_MIGRATION_POLICIES),
    )  # fmt: skip
    # Transaction coordinator and its log (__transaction_state).
    transaction_state_log_num_partitions: int = key(
        "transaction.state.log.num.partitions", "INT", 50,
        "Partitions of __transaction_state.", low=1,
    )  # fmt: skip
    transaction_state_log_replication_factor: int = key(
        "transaction.state.log.replication.factor", "SHORT", 3,
        "Replication factor of __transaction_state.", low=1,
    )  # fmt: skip
    transaction_state_log_min_isr: int = key(
        "transaction.state.log.min.isr", "INT", 2,
        "min.insync.replicas of __transaction_state.", low=1,
    )  # fmt: skip
    transaction_state_log_segment_bytes: int = key(
        "transaction.state.log.segment.bytes", "INT", 104857600,
        "Segment size of __transaction_state.", low=1,
    )  # fmt: skip
    transaction_max_timeout_ms: int = key(
        "transaction.max.timeout.ms", "INT", 900000,
        "Largest transaction timeout a producer may ask for.", low=1,
    )  # fmt: skip
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "INT", 10000,
        "How often timed-out transactions are aborted.", low=1,
    )  # fmt: skip
    # Listeners, TLS, SASL and ACLs (kafkalite.security): the host server and the broker read these;
    # a per-listener override (listener.name.<name>.<key>) stays in ``extra`` and wins over them.
    listeners: str | None = key(
        "listeners", "STRING", None,
        "NAME://HOST:PORT entries the broker accepts connections on (null: one PLAINTEXT listener on "
        "a free port; Kafka's default is PLAINTEXT://:9092).",
        nullable=True, check=_text,
    )  # fmt: skip
    listener_security_protocol_map: str = key(
        "listener.security.protocol.map", "STRING", _PROTOCOL_MAP,
        "Which security protocol each listener name speaks, as NAME:PROTOCOL pairs.",
        check=_protocol_map, valid=_PROTOCOL_MAP_VALID,
    )  # fmt: skip
    ssl_keystore_location: str | None = key(
        "ssl.keystore.location", "STRING", None,
        "PEM file with the broker's private key and certificate chain, for TLS listeners.",
        nullable=True, check=_text,
    )  # fmt: skip
    ssl_truststore_location: str | None = key(
        "ssl.truststore.location", "STRING", None,
        "PEM file of the CA certificates a client certificate must chain to.",
        nullable=True, check=_text,
    )  # fmt: skip
    ssl_client_auth: str = key(
        "ssl.client.auth", "STRING", "none",
        "Whether a TLS listener asks clients for a certificate: required, requested or none.",
        choices=_CLIENT_AUTH, check=choice_of(*_CLIENT_AUTH),
    )  # fmt: skip
    sasl_jaas_config: str | None = key(
        "sasl.jaas.config", "PASSWORD", None,
        "JAAS line of the SASL login; for PLAIN, its user_<name>=\"<password>\" entries are the users.",
        nullable=True,
    )  # fmt: skip
    sasl_enabled_mechanisms: str = key(
        "sasl.enabled.mechanisms", "LIST", ",".join(_SASL_MECHANISMS),
        "SASL mechanisms a SASL listener accepts in SaslHandshake; another gets UNSUPPORTED_SASL_MECHANISM. "
        "Kafka's default is GSSAPI (Kerberos), which kafkalite does not serve.",
        check=_sasl_mechanisms, valid="a comma-separated list of " + ", ".join(_SASL_MECHANISMS),
    )  # fmt: skip
    authorizer_class_name: str = key(
        "authorizer.class.name", "STRING", "",
        "Any value turns on ACL authorization (kafkalite has one authorizer); empty: none.", check=_text,
    )  # fmt: skip
    # kafkalite switch: False = pre-KIP-101 follower truncation to the high watermark.
    truncate_by_leader_epoch: bool = key(
        "kafkalite.truncate.by.leader.epoch", "BOOLEAN", True,
        "kafkalite switch: false truncates followers to the high watermark (before KIP-101).",
    )  # fmt: skip
    # kafkalite switch: replicas without data, for simulating the control plane alone at large sizes.
    replica_metadata_only: bool = key(
        "kafkalite.replica.metadata.only", "BOOLEAN", False,
        "kafkalite switch: replicas keep no data log (no files) and followers do not fetch; for "
        "simulations of metadata alone (leaders, ISR, epochs) where nothing is produced.",
    )  # fmt: skip
    log_props: dict[str, Any] = field(default_factory=dict)
    """Broker-level defaults for topic (LogConfig) keys, under the topic key names."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys kafkalite does not interpret, kept as given."""

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **overrides: Any) -> BrokerConfig:
        """Parse a dict of Kafka broker keys; ``log.<key>`` / topic keys become log defaults."""
        keys = cls.config_keys()
        by_attr = {spec.attr: name for name, spec in keys.items()}
        merged: dict[str, Any] = dict(props or {})
        for name, value in overrides.items():
            merged[by_attr.get(name, name)] = value
        kwargs: dict[str, Any] = {}
        log_props: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        log_keys = LogConfig.config_keys()
        for name, value in merged.items():
            spec = keys.get(name)
            if spec is not None:
                kwargs[spec.attr] = spec.parse(value)
            elif name in log_keys:
                log_props[name] = value
            elif name in _LOG_KEY_FOR_BROKER_KEY:
                log_props[_LOG_KEY_FOR_BROKER_KEY[name]] = value
            elif name.startswith("log.") and name[4:] in log_keys:
                log_props[name[4:]] = value
            else:
                extra[name] = value
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
        spec = self.config_keys().get(key)
        if spec is not None:
            return getattr(self, spec.attr)
        if key in self.log_props:
            return self.log_props[key]
        if key in self.extra:
            return self.extra[key]
        raise InvalidConfigError(f"unknown broker config key {key!r}")

    def to_props(self) -> dict[str, Any]:
        """The declared keys, then the broker-level log defaults and the extras, under Kafka names."""
        out = super().to_props()
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
        mir = REPLICATION_KEYS["min.insync.replicas"].parse(
            o.get("min.insync.replicas", self.min_insync_replicas)
        )
        unclean = REPLICATION_KEYS["unclean.leader.election.enable"].parse(
            o.get("unclean.leader.election.enable", self.unclean_leader_election_enable)
        )
        return TopicReplicationConfig(mir, unclean, self.log_config(o))


@dataclass(frozen=True)
class TopicReplicationConfig:
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    log: LogConfig


__all__ = ["TOPIC_KEY_SYNONYMS", "BrokerConfig", "TopicReplicationConfig"]
