"""The shared config value parsers behind broker, topic and producer configs."""

from __future__ import annotations

import pytest

from kafkalite.config.base import parse_bool, parse_float, parse_int
from kafkalite.config.broker import BrokerConfig
from kafkalite.config.producer import ProducerConfig
from kafkalite.errors import InvalidConfigError
from kafkalite.storage import LogConfig


@pytest.mark.parametrize(
    ("value", "want"), [(True, True), ("true", True), (" FALSE ", False), (False, False)]
)
def test_parse_bool_accepts_what_kafka_accepts(value, want):
    assert parse_bool("k", value) is want


@pytest.mark.parametrize("value", ["yes", "1", 1, None])
def test_parse_bool_refuses_anything_else(value):
    with pytest.raises(InvalidConfigError, match="'k'.*true or false"):
        parse_bool("k", value)


@pytest.mark.parametrize(("value", "want"), [("16384", 16384), (" 7 ", 7), (3.0, 3), (-1, -1)])
def test_parse_int(value, want):
    assert parse_int("k", value, low=-1) == want


@pytest.mark.parametrize(
    ("value", "words"), [(True, "boolean"), ("lots", "integer"), (2.5, "integer"), (-2, ">= -1")]
)
def test_parse_int_errors_name_key_and_reason(value, words):
    with pytest.raises(InvalidConfigError) as e:
        parse_int("segment.bytes", value, low=-1)
    assert "'segment.bytes'" in str(e.value) and words in str(e.value)


def test_parse_float_bounds():
    assert parse_float("r", "0.25", low=0.0, high=1.0) == 0.25
    with pytest.raises(InvalidConfigError, match="out of range"):
        parse_float("r", 1.5, low=0.0, high=1.0)


def test_every_config_class_rejects_a_boolean_where_a_number_goes():
    for cls, key in (
        (LogConfig, "segment.bytes"),
        (BrokerConfig, "min.insync.replicas"),
        (ProducerConfig, "linger.ms"),
    ):
        with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
            cls.from_props({key: True})
