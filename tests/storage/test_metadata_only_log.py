"""MetadataOnlyLog: the always-empty, file-less replica log of kafkalite.replica.metadata.only."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalite.config.topic import LogConfig
from kafkalite.errors import InconsistentTopicIdError, KafkaStorageError
from kafkalite.host.cluster import Cluster
from kafkalite.storage.metadata_only_log import MetadataOnlyLog


def test_metadata_only_log_keeps_epochs_and_topic_id_in_memory_and_refuses_data(tmp_path: Path) -> None:
    log = MetadataOnlyLog(tmp_path / "t-0", LogConfig.coerce({}))
    assert (log.log_start_offset, log.log_end_offset, log.last_stable_offset(0)) == (0, 0, 0)
    log.leader_epoch_cache.assign(3, 0)
    assert log.leader_epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 0)
    tid = uuid.uuid4()
    log.assign_topic_id(tid)
    log.assign_topic_id(tid)
    with pytest.raises(InconsistentTopicIdError):
        log.assign_topic_id(uuid.uuid4())
    log.update_config({"segment.bytes": 1 << 20})
    assert log.config.segment_bytes == 1 << 20
    with pytest.raises(KafkaStorageError, match="metadata-only"):
        log.append(b"")
    with pytest.raises(KafkaStorageError, match="metadata-only"):
        log.read(0, 100)
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_metadata_only_brokers_create_no_partition_directories(tmp_path: Path) -> None:
    config = {"kafkalite.replica.metadata.only": True}
    with Cluster(3, dir=tmp_path, config=config) as c:
        c.create_topic("t", 6, 3)
        assert all(c.leader("t", p) is not None for p in range(6))
        for node in c.brokers.values():
            parts = node.rm.partitions()
            assert len(parts) == 6 and all(isinstance(p.log, MetadataOnlyLog) for p in parts)
            assert not [d for d in node.rm.log_dir.iterdir() if d.name.startswith("t-")]
