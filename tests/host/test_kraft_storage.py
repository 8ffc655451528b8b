"""KRaft nodes start only on dirs ``kafkalite storage format`` wrote for their cluster and node."""

from __future__ import annotations

import pytest

from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.storage.meta_properties import (
    KRAFT_VERSION,
    InconsistentClusterIdError,
    MetaProperties,
    MetaPropertiesError,
    random_uuid,
    read,
    write,
)


def test_the_cluster_formats_every_node_dir_before_it_starts(tmp_path) -> None:
    c = KRaftCluster(brokers=1, controllers=3, dir=tmp_path)
    c.close()
    for d, node in (("controller-3001", 3001), ("broker-1", 1), ("broker-1-metadata", 1)):
        meta = read(tmp_path / d)
        assert meta is not None and (meta.version, meta.node_id, meta.cluster_id) == (
            KRAFT_VERSION,
            node,
            c.cluster_id,
        )


def test_a_kraft_broker_refuses_a_dir_formatted_for_another_cluster(tmp_path) -> None:
    write(tmp_path / "broker-2", MetaProperties(KRAFT_VERSION, 2, random_uuid()))
    with pytest.raises(InconsistentClusterIdError, match="broker-2 belongs to cluster"):
        KRaftCluster(brokers=3, controllers=1, dir=tmp_path)


def test_a_kraft_controller_refuses_an_unformatted_dir(tmp_path) -> None:
    from kafkalite.metadata.controller import ControllerSettings
    from kafkalite.metadata.controller.controller_server import ControllerServer
    from kafkalite.metadata.placement import assign_replicas
    from kafkalite.net.sim import SimNetwork
    from kafkalite.raft import QuorumConfig

    net = SimNetwork(seed=1, log_messages="none")
    node = ControllerServer(
        QuorumConfig(voters=(1,)), tmp_path / "c1", ControllerSettings(random_uuid()), assign_replicas
    )
    with pytest.raises(MetaPropertiesError, match="format it first"):
        net.add_node(1, node)
