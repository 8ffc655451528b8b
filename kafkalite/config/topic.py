"""Per-log configuration: every topic-level key Kafka 3.9 has, under Kafka's names, with Kafka's defaults.

Values may arrive as strings (``"1024"``), as they do in a Kafka ``.properties`` file or an
AlterConfigs request; ``LogConfig.from_props`` parses and range-checks every one of them and names the
key and the allowed values when something is wrong. Each key is declared once (``key(...)``) with its
type, default, valid values and a line of documentation; keys kafkalite does not act on (compression on
the broker, preallocation, tiered storage, throttles, down-conversion) are still stored, validated and
described, and their declaration says ``acted_on=False``. ``min.insync.replicas`` and
``unclean.leader.election.enable`` are topic keys too, but the replication layer reads them with the
broker's defaults, so they are declared apart (``REPLICATION_KEYS``) and ``TOPIC_KEYS`` holds all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.config.base import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    DeclaredConfig,
    invalid,
    key,
)

# Smallest segment that can hold anything: Kafka's floor is the legacy record overhead (14 bytes).
MIN_SEGMENT_BYTES = 14
OFFSET_INDEX_ENTRY = 8

_POLICIES = ("delete", "compact", "compact,delete")
_POLICIES_VALID = "one of " + ", ".join(repr(c) for c in _POLICIES)
_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")
_REPLICA = re.compile(r"\d+:\d+")


def _cleanup_policy(name: str, value: Any) -> str:
    text = value.strip() if isinstance(value, str) else None
    if text is not None:
        # "delete,compact" and "compact, delete" mean the same policy: keep one spelling.
        parts = sorted({p.strip() for p in text.split(",") if p.strip()})
        text = "compact,delete" if parts == ["compact", "delete"] else ",".join(parts)
    if text not in _POLICIES:
        raise invalid(name, value, "not a recognised value", _POLICIES_VALID)
    return text


def _throttled_replicas(name: str, value: Any) -> str:
    """``*`` or ``partition:broker`` pairs, comma separated (Kafka's ThrottledReplicaListValidator)."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else None
    if items == [""]:
        return ""
    if items is None or not (items == ["*"] or all(_REPLICA.fullmatch(i) for i in items)):
        raise invalid(name, value, "not a throttled replica list", _THROTTLE_VALID)
    return ",".join(items)


def _message_format_version(name: str, value: Any) -> str:
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _VERSION.fullmatch(text):
        raise invalid(name, value, "not a Kafka version", _VERSION_VALID)
    return text


def _gzip_level(name: str, value: Any) -> int:
    level = int(ConfigKey(name, "INT", -1, "", valid=_GZIP_VALID).parse(value))
    if level != -1 and not 1 <= level <= 9:
        raise invalid(name, value, "out of range", _GZIP_VALID)
    return level


_THROTTLE_VALID = "'*' or a comma-separated list of partition:broker pairs, or empty"
_VERSION_VALID = "a Kafka version such as 2.8 or 3.0-IV1"
_GZIP_VALID = "-1 (the codec's default) or an integer >= 1 and <= 9"
_NOT_ACTED = {"acted_on": False}


@dataclass(frozen=True)
class LogConfig(DeclaredConfig):
    """The settings one partition's log obeys. Build with ``from_props`` to get Kafka names and checks."""

    KIND = "log"

    segment_bytes: int = key(
        "segment.bytes", "INT", 1073741824, "Roll a new segment when the active one reaches this size.",
        low=MIN_SEGMENT_BYTES, high=INT_MAX,
    )  # fmt: skip
    segment_ms: int = key(
        "segment.ms", "LONG", 604800000, "Roll a new segment when the active one is this old.",
        low=1, high=LONG_MAX,
    )  # fmt: skip
    segment_index_bytes: int = key(
        "segment.index.bytes", "INT", 10485760, "Size of a segment's offset index (and so its entry limit).",
        low=OFFSET_INDEX_ENTRY, high=INT_MAX,
    )  # fmt: skip
    index_interval_bytes: int = key(
        "index.interval.bytes", "INT", 4096, "Bytes appended between two offset index entries.",
        low=0, high=INT_MAX,
    )  # fmt: skip
    flush_messages: int = key(
        "flush.messages", "LONG", LONG_MAX, "Fsync the log after this many messages.", low=1, high=LONG_MAX
    )
    flush_ms: int = key("flush.ms", "LONG", LONG_MAX, "Fsync the log after this long.", low=0, high=LONG_MAX)
    retention_ms: int = key(
        "retention.ms", "LONG", 604800000, "Delete segments older than this (-1: keep forever).",
        low=-1, high=LONG_MAX,
    )  # fmt: skip
    retention_bytes: int = key(
        "retention.bytes", "LONG", -1, "Delete old segments while the log is larger (-1: no limit).",
        low=-1, high=LONG_MAX,
    )  # fmt: skip
    cleanup_policy: str = key(
        "cleanup.policy", "LIST", "delete", "Delete old segments, compact by key, or both.",
        choices=_POLICIES, check=_cleanup_policy,
    )  # fmt: skip
    delete_retention_ms: int = key(
        "delete.retention.ms", "LONG", 86400000, "How long a compacted topic keeps tombstones.",
        low=0, high=LONG_MAX,
    )  # fmt: skip
    min_cleanable_dirty_ratio: float = key(
        "min.cleanable.dirty.ratio", "DOUBLE", 0.5, "Compact once this share of the log is uncompacted.",
        low=0.0, high=1.0,
    )  # fmt: skip
    min_compaction_lag_ms: int = key(
        "min.compaction.lag.ms", "LONG", 0, "A record stays uncompacted at least this long.",
        low=0, high=LONG_MAX,
    )  # fmt: skip
    max_message_bytes: int = key(
        "max.message.bytes", "INT", 1048588, "Largest record batch the log accepts.", low=0, high=INT_MAX
    )
    message_timestamp_type: str = key(
        "message.timestamp.type", "STRING", "CreateTime",
        "Keep the producer's timestamp or stamp the broker's append time.",
        choices=("CreateTime", "LogAppendTime"),
    )  # fmt: skip
    message_timestamp_before_max_ms: int = key(
        "message.timestamp.before.max.ms", "LONG", LONG_MAX,
        "Refuse a batch whose timestamp is further than this in the past.", low=0, high=LONG_MAX,
    )  # fmt: skip
    message_timestamp_after_max_ms: int = key(
        "message.timestamp.after.max.ms", "LONG", LONG_MAX,
        "Refuse a batch whose timestamp is further than this in the future.", low=0, high=LONG_MAX,
    )  # fmt: skip
    file_delete_delay_ms: int = key(
        "file.delete.delay.ms", "LONG", 60000, "Wait this long before deleting a removed segment's files.",
        low=0, high=LONG_MAX,
    )  # fmt: skip
    # Kafka topic keys kafkalite stores, validates and describes but does not act on.
    compression_type: str = key(
        "compression.type", "STRING", "producer",
        "Codec the broker writes batches with ('producer' keeps the producer's).",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), **_NOT_ACTED,
    )  # fmt: skip
    compression_gzip_level: int = key(
        "compression.gzip.level", "INT", -1, "gzip level when the broker compresses.",
        check=_gzip_level, valid=_GZIP_VALID, **_NOT_ACTED,
    )  # fmt: skip
    compression_lz4_level: int = key(
        "compression.lz4.level", "INT", 9, "lz4 level when the broker compresses.",
        low=1, high=17, **_NOT_ACTED,
    )  # fmt: skip
    compression_zstd_level: int = key(
        "compression.zstd.level", "INT", 3, "zstd level when the broker compresses.",
        low=-131072, high=22, **_NOT_ACTED,
    )  # fmt: skip
    preallocate: bool = key(
        "preallocate", "BOOLEAN", False, "Preallocate a new segment's file on disk.", **_NOT_ACTED
    )
    segment_jitter_ms: int = key(
        "segment.jitter.ms", "LONG", 0, "Random amount taken off segment.ms so segments do not roll together.",
        low=0, high=LONG_MAX, **_NOT_ACTED,
    )  # fmt: skip
    max_compaction_lag_ms: int = key(
        "max.compaction.lag.ms", "LONG", LONG_MAX, "A record stays uncompacted at most this long.",
        low=1, high=LONG_MAX, **_NOT_ACTED,
    )  # fmt: skip
    message_downconversion_enable: bool = key(
        "message.downconversion.enable", "BOOLEAN", True,
        "Whether old fetch versions may be answered by down-converting batches.", **_NOT_ACTED,
    )  # fmt: skip
    message_format_version: str = key(
        "message.format.version", "STRING", "3.0-IV1", "Deprecated: ignored for inter-broker versions >= 3.0.",
        check=_message_format_version, valid=_VERSION_VALID, **_NOT_ACTED,
    )  # fmt: skip
    message_timestamp_difference_max_ms: int = key(
        "message.timestamp.difference.max.ms", "LONG", LONG_MAX,
        "Deprecated: largest gap between a batch's timestamp and the broker's clock.",
        low=0, high=LONG_MAX, **_NOT_ACTED,
    )  # fmt: skip
    leader_replication_throttled_replicas: str = key(
        "leader.replication.throttled.replicas", "LIST", "",
        "Replicas whose log is throttled on the leader side ('*' for all).",
        check=_throttled_replicas, valid=_THROTTLE_VALID, **_NOT_ACTED,
    )  # fmt: skip
    follower_replication_throttled_replicas: str = key(
        "follower.replication.throttled.replicas", "LIST", "",
        "Replicas whose log is throttled on the follower side ('*' for all).",
        check=_throttled_replicas, valid=_THROTTLE_VALID, **_NOT_ACTED,
    )  # fmt: skip
    remote_storage_enable: bool = key(
        "remote.storage.enable", "BOOLEAN", False, "Tier old segments to remote storage.", **_NOT_ACTED
    )
    local_retention_ms: int = key(
        "local.retention.ms", "LONG", -2, "Local retention time when tiered (-2: retention.ms).",
        low=-2, high=LONG_MAX, **_NOT_ACTED,
    )  # fmt: skip
    local_retention_bytes: int = key(
        "local.retention.bytes", "LONG", -2, "Local retention size when tiered (-2: retention.bytes).",
        low=-2, high=LONG_MAX, **_NOT_ACTED,
    )  # fmt: skip
    remote_log_copy_disable: bool = key(
        "remote.log.copy.disable", "BOOLEAN", False, "Stop copying segments to remote storage.", **_NOT_ACTED
    )
    remote_log_delete_on_disable: bool = key(
        "remote.log.delete.on.disable", "BOOLEAN", False,
        "Delete remote segments when tiered storage is turned off.", **_NOT_ACTED,
    )  # fmt: skip

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **overrides: Any) -> LogConfig:
        """Build from Kafka key names (``{"segment.bytes": "1024"}``); unknown keys are rejected."""
        return cls(**cls.parse_props(props, **overrides))

    @classmethod
    def coerce(cls, config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        """Accept a LogConfig, a Kafka-style dict or None (all defaults)."""
        if isinstance(config, LogConfig):
            return config
        return cls.from_props(config)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with some keys changed (Kafka names), as a dynamic topic config update does."""
        merged = self.to_props()
        merged.update(props)
        return LogConfig.from_props(merged)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY


#: The replication layer's topic keys, read with the broker's defaults (``BrokerConfig.topic_config``).
REPLICATION_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "min.insync.replicas", "INT", 1, "Replicas that must be in sync for an acks=all write.", low=1,
            high=INT_MAX, attr="min_insync_replicas",
        ),
        ConfigKey(
            "unclean.leader.election.enable", "BOOLEAN", False,
            "Let a replica outside the ISR become leader (losing acknowledged writes).",
            attr="unclean_leader_election_enable",
        ),
    )
}  # fmt: skip

#: Every topic-level key, by Kafka name: the log's and the replication layer's.
TOPIC_KEYS: dict[str, ConfigKey] = dict(sorted({**LogConfig.config_keys(), **REPLICATION_KEYS}.items()))

__all__ = ["LONG_MAX", "REPLICATION_KEYS", "TOPIC_KEYS", "LogConfig"]
