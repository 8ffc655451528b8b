"""``MetadataOnlyLog``: a replica's log that holds no data and opens no file.

A broker with ``kafkalite.replica.metadata.only=true`` gives each replica one of these instead of a
``Log``: the replica still takes part in every metadata step (LeaderAndIsr / KRaft partition records,
leader epochs, ISR, topic ids), but it has no directory, no segments and no checkpoints. It exists for
simulations of the control plane alone at sizes whose data files would not fit in one process (the
failover comparison at 100,000 partitions needs 300,000 replicas, and a ``Log`` keeps several files open
each). Its log is always empty: offsets are 0, leader epochs are kept in memory. Anything that would
need data (an append, a read past offset 0, a truncation below 0) raises, so a caller that reaches the
data plane fails loudly instead of seeing an empty log where a real one would have had records.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kafkalite.config.topic import LogConfig
from kafkalite.errors import InconsistentTopicIdError, KafkaStorageError
from kafkalite.storage.leader_epoch import LeaderEpochCache

__all__ = ["MetadataOnlyLog"]


class _NoProducers:
    """Producer state of a log nothing was ever produced to."""

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        return []


class MetadataOnlyLog:
    """An always-empty replica log: the subset of ``Log`` a replica's metadata steps use, in memory."""

    log_start_offset = 0
    log_end_offset = 0
    read_only = False
    failed = None

    def __init__(self, dir: Path, config: LogConfig) -> None:
        self.dir = dir  # never created: names the replica (and its log dir) for the broker's bookkeeping
        self.config = config
        self.leader_epoch_cache = LeaderEpochCache(None)  # no checkpoint file: in memory only
        self.producer_state = _NoProducers()
        self.topic_id: uuid.UUID | None = None

    def __repr__(self) -> str:
        return f"MetadataOnlyLog({self.dir.name})"

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """As ``Log.assign_topic_id``, without ``partition.metadata``."""
        if self.topic_id is not None and self.topic_id != topic_id:
            raise InconsistentTopicIdError(f"log {self.dir.name} belongs to topic id {self.topic_id}")
        self.topic_id = topic_id

    def update_config(self, props: dict[str, Any]) -> None:
        self.config = self.config.with_overrides(props)

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(high_watermark, 0)

    def truncate_to(self, offset: int) -> bool:
        """Nothing to cut at or above 0 (a follower's truncation to the leader's end, 0)."""
        if offset < 0:
            raise KafkaStorageError(f"{self.dir.name}: cannot truncate a metadata-only log to {offset}")
        self.leader_epoch_cache.truncate_from_end(offset)
        return False

    def maybe_flush(self) -> bool:
        return False

    def delete_old_segments(self, *, high_watermark: int | None = None) -> list[int]:
        return []

    def close(self) -> None:
        pass

    def crash(self, lose_unflushed: bool = False) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        # Whatever else a Log offers reads or writes data, which this replica does not have.
        raise KafkaStorageError(
            f"{self.dir.name} is a metadata-only replica (kafkalite.replica.metadata.only): "
            f"it has no data log for {name!r}"
        )
