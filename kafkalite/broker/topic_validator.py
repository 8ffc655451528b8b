"""What a topic must be before it exists: Kafka's rules for names (``Topic.validate``, the '.'/'_'
collision check) and for the overrides it is created or altered with (``LogConfig.validate``).

A name is 1 to 249 characters of ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``: it becomes a
directory name (``<topic>-<partition>``) and a znode, so anything else could escape the log directory,
break the store's paths or exceed the file system's name limit. Two names that differ only by '.'
against '_' collide (Kafka's metric names cannot tell them apart), so the second is refused too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.config.broker import BrokerConfig
from kafkalite.config.topic import TOPIC_KEYS
from kafkalite.errors import InvalidConfigError, InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_topic_reason(name: str) -> str | None:
    """Why ``name`` cannot be a topic, or None when it can (Kafka's wording)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_valid_topic(name: str) -> bool:
    return invalid_topic_reason(name) is None


def validate_topic(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION for a name Kafka refuses."""
    why = invalid_topic_reason(name)
    if why is not None:
        raise InvalidTopicError(f"Topic name is invalid: {why}")


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """Existing topics that ``name`` collides with ('.' and '_' at the same place), itself excluded."""
    if "." not in name and "_" not in name:
        return []
    unified = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == unified)


def validate_topic_configs(broker: BrokerConfig, configs: Mapping[str, Any]) -> None:
    """Raise INVALID_CONFIG for a null value, a key Kafka topics do not have or a value out of its range;
    the message names the key."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise InvalidConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    for key in configs:
        if key not in TOPIC_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
    broker.topic_config(configs)  # parses every value against its range


__all__ = [
    "MAX_NAME_LENGTH",
    "colliding_topics",
    "invalid_topic_reason",
    "is_valid_topic",
    "validate_topic",
    "validate_topic_configs",
]
