"""One MetadataCache per broker, shared with its replica manager, and fenced by the controller epoch."""

from __future__ import annotations

import pytest

from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.errors import StaleControllerEpochError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    BrokerEndpoint,
    MetadataRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)


def _update(epoch: int, leader: int, brokers: tuple[int, ...]) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=epoch,
        partition_states=(
            UpdateMetadataPartitionState(
                tp=TopicPartition("t", 0), controller_epoch=epoch, leader=leader, replicas=(1, 2), isr=(1, 2)
            ),
        ),
        live_brokers=tuple(BrokerEndpoint(node_id=b, host=f"h{b}", port=9092) for b in brokers),
    )


def test_cache_refuses_an_older_controller_epoch() -> None:
    cache = MetadataCache()
    cache.update(_update(2, leader=1, brokers=(1, 2)))
    with pytest.raises(StaleControllerEpochError):
        cache.update(_update(1, leader=2, brokers=(2,)))
    assert cache.controller_epoch == 2
    assert cache.partitions[TopicPartition("t", 0)].leader == 1
    assert sorted(cache.live_brokers) == [1, 2]
    cache.update(_update(2, leader=2, brokers=(2,)))  # the same epoch is the current controller
    assert cache.partitions[TopicPartition("t", 0)].leader == 2 and sorted(cache.live_brokers) == [2]


def test_stale_update_metadata_changes_neither_view() -> None:
    c = Cluster(brokers=3, seed=1)
    try:
        c.create_topic("t", partitions=1, replication_factor=3)
        c.run_for(500)
        b = c.brokers[2]
        assert b.rm.metadata_cache is b.cache, "the replica manager reads the broker's one cache"
        before = (b.cache.metadata(MetadataRequest()), dict(b.cache.live_brokers), b.cache.controller_epoch)
        stale = UpdateMetadataRequest(
            controller_id=3,
            controller_epoch=b.cache.controller_epoch - 1,
            broker_epoch=b.broker_epoch,
            partition_states=(),
            live_brokers=(BrokerEndpoint(node_id=3, host="elsewhere", port=1),),
        )
        resp = c.request(2, stale)
        assert resp.error_code == StaleControllerEpochError.code
        after = (b.cache.metadata(MetadataRequest()), dict(b.cache.live_brokers), b.cache.controller_epoch)
        assert after == before
        assert sorted(b.rm.metadata_cache.live_brokers) == [1, 2, 3]
    finally:
        c.close()
