"""KRaft's node settings: Kafka's names and defaults, and the combinations Kafka refuses."""

from __future__ import annotations

import pytest

from kafkalite.config.kraft import KRaftConfig
from kafkalite.errors import InvalidConfigError

VOTERS = "1@localhost:9093,2@localhost:9094,3@localhost:9095"


def test_defaults_are_kafkas_and_empty_roles_mean_zookeeper_mode() -> None:
    c = KRaftConfig.from_props({})
    assert (c.broker_heartbeat_interval_ms, c.broker_session_timeout_ms) == (2000, 9000)
    assert not c.is_kraft


def test_a_combined_node() -> None:
    c = KRaftConfig.from_props(
        {"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": VOTERS,
         "controller.listener.names": "CONTROLLER"}
    )  # fmt: skip
    assert c.is_broker and c.is_controller and c.controller_quorum_voters[2] == ("localhost", 9094)
    assert c.controller_listener_names == ("CONTROLLER",)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"process.roles": "broker,zookeeper"}, "process.roles"),
        ({"process.roles": "broker", "controller.quorum.voters": VOTERS, "controller.listener.names": "C"}, "node.id"),
        ({"process.roles": "controller", "node.id": 4, "controller.quorum.voters": VOTERS,
          "controller.listener.names": "C"}, "not a voter"),
        ({"process.roles": "broker", "node.id": 1, "controller.quorum.voters": VOTERS,
          "controller.listener.names": "C"}, "must not be a voter"),
        ({"process.roles": "broker", "node.id": 4, "controller.quorum.voters": VOTERS}, "controller.listener.names"),
        ({"controller.quorum.voters": "1@localhost"}, "id@host:port"),
        ({"broker.session.timeout.ms": 0}, "broker.session.timeout.ms"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_naming_the_key(props, message) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        KRaftConfig.from_props(props)
