"""``settings_table``: the table of the settings a chapter names, read from whichever component declares
each key (``"producer:acks"``), so that the book's config tables and the declarations cannot disagree."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.config.broker import TOPIC_KEY_SYNONYMS
from kafkalite.config.topic import TOPIC_KEYS
from kafkalite.errors import InvalidConfigError
from kafkalite.tools.configs import (
    COMPONENTS,
    component_keys,
    declared_setting,
    settings_table,
    show_settings,
)


def test_a_qualified_name_reads_that_components_declaration() -> None:
    topic, spec = declared_setting("topic:min.insync.replicas")
    broker, broker_spec = declared_setting("broker:min.insync.replicas")
    assert (topic, broker) == ("topic", "broker")
    assert spec.doc != broker_spec.doc, "the broker's key is the default, the topic's the override"
    assert declared_setting("producer:acks")[1].default is not None


def test_a_bare_name_one_component_declares_needs_no_component() -> None:
    assert declared_setting("isolation.level")[0] == "consumer"
    assert declared_setting("segment.bytes")[0] == "topic"
    assert declared_setting("zookeeper.session.timeout.ms")[0] == "broker"
    assert declared_setting("process.roles")[0] == "broker"


def test_the_broker_declares_the_kraft_keys_as_kafkas_broker_configs_list_them() -> None:
    keys = component_keys("broker")
    assert {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"} <= set(keys)
    assert keys["broker.session.timeout.ms"].default == 9000 and keys["node.id"].default == -1
    row = settings_table("broker:broker.heartbeat.interval.ms").splitlines()[2]
    assert row.startswith("| broker | `broker.heartbeat.interval.ms` | INT | `2000` |"), row


def test_a_bare_name_several_components_declare_must_say_which() -> None:
    with pytest.raises(InvalidConfigError, match=r"'compression.type'.*topic:compression.type"):
        declared_setting("compression.type")


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("offsets.storage", r"'offsets.storage' is not declared by any of topic, broker"),
        ("consumer:acks", r"'acks' is not declared for the consumer"),
        ("zookeeper:tickTime", r"unknown config component 'zookeeper'"),
    ],
)
def test_an_unknown_name_is_refused_naming_it(name: str, words: str) -> None:
    with pytest.raises(InvalidConfigError, match=words):
        settings_table("producer:acks", name)


def test_a_broker_takes_a_topic_keys_default_under_kafkas_broker_name() -> None:
    _, spec = declared_setting("broker:log.flush.interval.messages")
    flush = TOPIC_KEYS["flush.messages"]
    assert (spec.name, spec.type, spec.default, spec.low) == (
        "log.flush.interval.messages", flush.type, flush.default, flush.low,
    )  # fmt: skip
    assert "flush.messages" in spec.doc


def test_the_table_has_a_row_per_name_in_the_order_given() -> None:
    lines = settings_table("consumer:group.id", "producer:acks", "topic:retention.ms").splitlines()
    assert lines[0].startswith("| component | key | type | default | valid values |")
    assert [line.split(" | ")[:2] for line in lines[2:]] == [
        ["| consumer", "`group.id`"], ["| producer", "`acks`"], ["| topic", "`retention.ms`"],
    ]  # fmt: skip
    assert "| `all` | one of all, -1, 0, 1 |" in lines[3]


def test_show_settings_is_markdown_for_the_page() -> None:
    shown = show_settings("producer:linger.ms")
    assert shown._repr_markdown_() == settings_table("producer:linger.ms")


_EVERY = [f"{c}:{name}" for c in COMPONENTS for name in component_keys(c)]


@given(st.lists(st.sampled_from(_EVERY), min_size=1, max_size=8))
def test_every_declared_key_renders_one_row_of_seven_cells(names: list[str]) -> None:
    lines = settings_table(*names).splitlines()
    assert len(lines) == 2 + len(names)
    for name, line in zip(names, lines[2:], strict=True):
        component, key = name.split(":", 1)
        cells = line.replace("\\|", "").split("|")[1:-1]
        assert len(cells) == 7, line
        assert (cells[0].strip(), cells[1].strip()) == (component, f"`{key}`")


def test_every_broker_synonym_is_declared_for_the_broker() -> None:
    assert set(TOPIC_KEY_SYNONYMS.values()) <= set(component_keys("broker"))
