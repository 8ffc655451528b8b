"""``acks`` and ``isolation.level`` are enums from the config to the broker: Kafka's strings parse into
them, the Fetch and ListOffsets requests and the produce path carry them, and there is one
``IsolationLevel`` (the protocol re-exports the common one)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kafkalite.protocol
from kafkalite.common.acks import Acks
from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.config.consumer import ConsumerConfig
from kafkalite.config.producer import ProducerConfig
from kafkalite.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("given_", "level"),
    [
        ("all", Acks.ALL),
        ("ALL ", Acks.ALL),
        ("-1", Acks.ALL),
        (-1, Acks.ALL),
        ("0", Acks.NONE),
        (1, Acks.LEADER),
    ],
)
def test_the_producers_acks_parse_into_the_enum(given_: object, level: Acks) -> None:
    cfg = ProducerConfig.from_props({"acks": given_, "enable.idempotence": level == Acks.ALL})
    assert cfg.acks is level and cfg["acks"] == level.config_name


@given(st.one_of(st.integers(), st.text(), st.booleans(), st.floats()))
def test_anything_else_is_not_an_acks_level(value: object) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value in (-1, 0, 1):
        return
    if isinstance(value, str) and value.strip().lower() in ("all", "-1", "0", "1", "+1", "-0", "+0"):
        return
    with pytest.raises(InvalidConfigError, match="acks"):
        ProducerConfig.from_props({"acks": value})


@pytest.mark.parametrize(
    ("given_", "level"),
    [
        ("read_committed", IsolationLevel.READ_COMMITTED),
        ("Read_Committed ", IsolationLevel.READ_COMMITTED),
        ("read_uncommitted", IsolationLevel.READ_UNCOMMITTED),
    ],
)
def test_the_consumers_isolation_level_parses_into_the_enum(given_: str, level: IsolationLevel) -> None:
    cfg = ConsumerConfig.from_props({"isolation.level": given_})
    assert cfg.isolation_level is level and cfg["isolation.level"] == level.config_name


def test_there_is_one_isolation_level_and_the_broker_has_no_constant_of_its_own() -> None:
    import kafkalite.broker.replica_manager as rm

    assert kafkalite.protocol.IsolationLevel is IsolationLevel
    assert not hasattr(rm, "READ_COMMITTED")


def test_the_consumer_fetches_and_lists_offsets_with_its_isolation_level(monkeypatch) -> None:
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.host.cluster import Cluster

    seen: list[tuple[str, object]] = []
    for name in ("handle_fetch", "handle_list_offsets"):
        original = getattr(ReplicaManager, name)

        def spy(self, env, src, _original=original, _name=name):  # type: ignore[no-untyped-def]
            if env.request.replica_id == -1:
                seen.append((_name, env.request.isolation_level))
            return _original(self, env, src)

        monkeypatch.setattr(ReplicaManager, name, spy)
    c = Cluster(brokers=1, seed=1)
    c.create_topic("t", 1, 1)
    consumer = c.consumer(isolation_level="read_committed", auto_offset_reset="latest")
    consumer.assign([("t", 0)])
    c.run_until(lambda: {n for n, _ in seen} == {"handle_fetch", "handle_list_offsets"}, 5_000)
    consumer.poll(100)
    assert {n for n, _ in seen} == {"handle_fetch", "handle_list_offsets"}, seen
    assert all(level is IsolationLevel.READ_COMMITTED for _, level in seen), seen
    c.close()


def test_requests_carrying_the_enums_cross_the_process_bridge() -> None:
    from kafkalite.net.bridge import dumps, loads
    from kafkalite.protocol import FetchRequest, ListOffsetsRequest, ProduceRequest

    for req in (
        FetchRequest(isolation_level=IsolationLevel.READ_COMMITTED),
        ListOffsetsRequest(isolation_level=IsolationLevel.READ_COMMITTED),
        ProduceRequest(acks=Acks.LEADER),
    ):
        assert loads(dumps(req)) == req
