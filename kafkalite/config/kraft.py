"""A KRaft node's settings, with Kafka's names and defaults (Kafka's ``KRaftConfigs``).

``process.roles`` says what the node runs: ``broker``, ``controller`` or both; empty means ZooKeeper mode,
where none of the other keys here apply. A controller must be one of ``controller.quorum.voters``
(``id@host:port`` entries) and a broker-only node must not be; ``node.id`` names the node in both roles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkalite.config.base import DeclaredConfig, invalid, key

ROLES = ("broker", "controller")


def _roles(name: str, value: Any) -> tuple[str, ...]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    items = [v for v in items if v]
    bad = [v for v in items if v not in ROLES]
    if bad or len(set(items)) != len(items):
        raise invalid(name, value, "each role once, from broker and controller", "broker, controller or both")
    return tuple(items)


def _names(name: str, value: Any) -> tuple[str, ...]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    return tuple(v for v in items if v)


def parse_voters(name: str, value: Any) -> dict[int, tuple[str, int]]:
    """``1@host:9093,2@host:9094`` -> ``{1: ("host", 9093), 2: ("host", 9094)}``."""
    if isinstance(value, dict):
        return dict(value)
    out: dict[int, tuple[str, int]] = {}
    for item in (v.strip() for v in str(value).split(",")):
        if not item:
            continue
        try:
            node, _, address = item.partition("@")
            host, _, port = address.rpartition(":")
            nid, p = int(node), int(port)
        except ValueError:
            raise invalid(name, value, f"{item!r} is not id@host:port", "id@host:port entries") from None
        if nid < 0 or nid in out or not host or not 0 <= p <= 65535:
            raise invalid(name, value, f"bad or repeated entry {item!r}", "id@host:port entries")
        out[nid] = (host, p)
    return out


@dataclass(frozen=True)
class KRaftConfig(DeclaredConfig):
    KIND = "KRaft"

    process_roles: tuple[str, ...] = key(
        "process.roles", "LIST", (),
        "The roles this node runs: broker, controller, or both; empty: ZooKeeper mode.", check=_roles,
    )  # fmt: skip
    node_id: int = key("node.id", "INT", -1, "This node's id in KRaft mode (-1: not set).", low=-1)
    controller_quorum_voters: dict = key(
        "controller.quorum.voters", "LIST", "",
        "The controller quorum, as id@host:port entries.", check=parse_voters,
    )  # fmt: skip
    controller_listener_names: tuple[str, ...] = key(
        "controller.listener.names", "LIST", (),
        "Listeners the controllers serve on (the first is the one brokers use).", check=_names,
    )  # fmt: skip
    broker_heartbeat_interval_ms: int = key(
        "broker.heartbeat.interval.ms", "INT", 2000,
        "How often a broker heartbeats to the active controller.", low=1,
    )  # fmt: skip
    broker_session_timeout_ms: int = key(
        "broker.session.timeout.ms", "INT", 9000,
        "A broker with no heartbeat for this long is fenced.", low=1,
    )  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.process_roles:
            return
        if self.node_id < 0:
            raise invalid("node.id", self.node_id, "KRaft mode (process.roles set) needs a node id", ">= 0")
        if not self.controller_quorum_voters:
            raise invalid(
                "controller.quorum.voters", "", "KRaft mode needs the controller quorum", "id@host:port"
            )
        if not self.controller_listener_names:
            raise invalid(
                "controller.listener.names", "", "KRaft mode needs the controllers' listener", "names"
            )
        voter = self.node_id in self.controller_quorum_voters
        if self.is_controller and not voter:
            raise invalid(
                "controller.quorum.voters", self.controller_quorum_voters,
                f"node {self.node_id} runs a controller but is not a voter", f"an entry for {self.node_id}",
            )  # fmt: skip
        if not self.is_controller and voter:
            raise invalid(
                "controller.quorum.voters", self.controller_quorum_voters,
                f"broker-only node {self.node_id} must not be a voter", f"no entry for {self.node_id}",
            )  # fmt: skip

    @classmethod
    def from_props(cls, props: dict[str, Any] | None = None, **overrides: Any) -> KRaftConfig:
        return cls(**cls.parse_props(props, **overrides))

    @property
    def is_kraft(self) -> bool:
        return bool(self.process_roles)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles
