"""``broker.rack`` end to end: config, registration, rack-aware CreateTopics and CreatePartitions."""

from __future__ import annotations

import json
import random

import pytest

from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.errors import InvalidReplicaAssignmentError
from kafkalite.host.cluster import Cluster
from kafkalite.metadata.placement import assign_new_partitions, assign_replicas
from kafkalite.protocol import CreatableTopic, CreateTopicsRequest, ReplicaAssignment

RACKS = ["a", "a", "b", "b", "c", "c"]
RACK_OF = {b: RACKS[b - 1] for b in range(1, 7)}


def _controller_rng(cluster: Cluster) -> random.Random:
    return cluster.brokers[cluster.controller()].controller.rng  # type: ignore[index, union-attr]


def _rng_copy(cluster: Cluster) -> random.Random:
    """The controller's rng as it is now, so a test can replay the draws topic creation will make."""
    copy = random.Random()
    copy.setstate(_controller_rng(cluster).getstate())
    return copy


def _registration(cluster: Cluster, broker: int) -> dict:
    return json.loads(cluster.store.get(paths.broker_path(broker))[0])


@pytest.fixture
def racked():
    c = Cluster(brokers=6, seed=5, racks=RACKS)
    yield c
    c.close()


def test_config_key() -> None:
    assert BrokerConfig().broker_rack is None
    assert BrokerConfig.from_props({"broker.rack": "eu-1a"}).broker_rack == "eu-1a"
    assert BrokerConfig.from_props(broker_rack="x").get("broker.rack") == "x"
    assert BrokerConfig.from_props(BrokerConfig().to_props()).broker_rack is None


def test_registration_carries_rack(racked: Cluster) -> None:
    for b in range(1, 7):
        assert _registration(racked, b)["rack"] == RACK_OF[b]
        assert (
            paths.BrokerRegistration.decode(b, racked.store.get(paths.broker_path(b))[0]).rack == RACK_OF[b]
        )


def test_create_topic_is_rack_aware(racked: Cluster) -> None:
    replay = _rng_copy(racked)
    got = racked.create_topic("t", partitions=12, replication_factor=3)
    expected = assign_replicas(range(1, 7), 12, 3, rng=replay, broker_racks=RACK_OF)
    assert {p: list(r) for p, r in got.items()} == expected
    for replicas in got.values():
        assert len({RACK_OF[b] for b in replicas}) == 3
    leaders = [r[0] for r in got.values()]
    assert all(leaders.count(b) == 2 for b in range(1, 7))


def test_create_partitions_is_rack_aware(racked: Cluster) -> None:
    before = racked.create_topic("t", partitions=4, replication_factor=3)
    after = racked.create_partitions("t", 10)
    assert {p: after[p] for p in before} == before
    existing = {p: list(r) for p, r in before.items()}
    expected = assign_new_partitions(range(1, 7), existing, 6, broker_racks=RACK_OF)
    assert {p: list(after[p]) for p in range(4, 10)} == expected
    for p in range(4, 10):
        assert len({RACK_OF[b] for b in after[p]}) == 3
        assert racked.leader("t", p) == after[p][0]


@pytest.mark.parametrize("racks", [None, [None] * 6])
def test_without_racks_placement_is_unchanged(racks: list | None) -> None:
    c = Cluster(brokers=6, seed=5, racks=racks)
    try:
        assert "rack" not in _registration(c, 1)
        replay = _rng_copy(c)
        got = c.create_topic("t", partitions=12, replication_factor=3)
        assert {p: list(r) for p, r in got.items()} == assign_replicas(range(1, 7), 12, 3, rng=replay)
        assert _controller_rng(c).getstate() == replay.getstate()  # the same draws, no more
        after = c.create_partitions("t", 15)
        existing = {p: list(r) for p, r in got.items()}
        assert {p: list(after[p]) for p in range(12, 15)} == assign_new_partitions(range(1, 7), existing, 3)
    finally:
        c.close()


def test_some_brokers_without_rack_are_refused() -> None:
    c = Cluster(brokers=4, seed=2, racks=["a", "a", "b", None])
    try:
        rng_before = _controller_rng(c).getstate()
        with pytest.raises(InvalidReplicaAssignmentError, match=r"brokers \[4\] have no broker.rack"):
            c.create_topic("t", partitions=3, replication_factor=2)
        assert c.store.exists(paths.topic_path("t")) is None
        assert _controller_rng(c).getstate() == rng_before
        # An explicit plan needs no rack information; growing it by placement is refused again.
        plan = tuple(ReplicaAssignment(partition=p, broker_ids=(p + 1, (p + 1) % 4 + 1)) for p in range(2))
        resp = c.request(
            c.controller(), CreateTopicsRequest(topics=(CreatableTopic(name="u", assignments=plan),))
        )
        assert resp.topics[0].error_code == 0
        with pytest.raises(InvalidReplicaAssignmentError, match="have no broker.rack"):
            c.create_partitions("u", 4)
        assert c.create_partitions("u", 3, assignments=[[4, 1]])[2] == (4, 1)
        assert c.controller() is not None
    finally:
        c.close()


def test_racks_must_match_broker_count() -> None:
    with pytest.raises(ValueError, match="one entry per broker"):
        Cluster(brokers=3, racks=["a", "b"])
