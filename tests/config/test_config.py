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


# ------------------------------------------------------------------ listeners, TLS, SASL, ACLs


def test_security_keys_are_declared_with_kafkas_names_and_defaults():
    keys = BrokerConfig.config_keys()
    want = {
        "listeners": ("STRING", None),
        "listener.security.protocol.map": (
            "STRING",
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        ),
        "ssl.keystore.location": ("STRING", None),
        "ssl.truststore.location": ("STRING", None),
        "ssl.client.auth": ("STRING", "none"),
        "sasl.jaas.config": ("PASSWORD", None),
        "authorizer.class.name": ("STRING", ""),
    }
    assert {k: (keys[k].type, keys[k].default) for k in want} == want


def test_security_keys_parse_and_reach_the_props_the_broker_reads(tmp_path):
    c = BrokerConfig.from_props(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENTS:SASL_SSL",
            "ssl.keystore.location": tmp_path / "broker.pem",
            "ssl.client.auth": " Required ",
            "listener.name.clients.ssl.client.auth": "none",
        }
    )
    props = c.to_props()
    assert c.ssl_client_auth == props["ssl.client.auth"] == "required"
    assert props["ssl.keystore.location"] == str(tmp_path / "broker.pem")
    assert props["listener.security.protocol.map"] == "CLIENTS:SASL_SSL"
    assert props["listener.name.clients.ssl.client.auth"] == "none", "a per-listener key is kept"
    assert props["authorizer.class.name"] == ""


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("ssl.client.auth", "sometimes", r"'ssl.client.auth'.*one of required, requested, none"),
        ("listener.security.protocol.map", "CLIENTS:TLS", r"'listener.security.protocol.map'.*'CLIENTS:TLS'"),
        ("listener.security.protocol.map", 7, r"'listener.security.protocol.map'.*expected a string"),
        ("sasl.jaas.config", 3, r"'sasl.jaas.config'.*expected a string"),
    ],
)
def test_a_bad_security_value_is_refused_naming_the_key(key, value, words):
    with pytest.raises(InvalidConfigError, match=words):
        BrokerConfig.from_props({key: value})


def test_sasl_enabled_mechanisms_is_declared_and_checked_when_the_broker_is_configured():
    # The SASL listeners always read the key; declared, it is listed with the broker's settings and a
    # mechanism kafkalite does not serve (Kafka's own default, GSSAPI) is refused when the config is parsed.
    key = BrokerConfig.config_keys()["sasl.enabled.mechanisms"]
    assert (key.type, key.default) == ("LIST", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    c = BrokerConfig.from_props({"sasl.enabled.mechanisms": " plain, SCRAM-SHA-512 "})
    assert c.sasl_enabled_mechanisms == c.to_props()["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512"
    with pytest.raises(InvalidConfigError, match=r"'sasl.enabled.mechanisms'.*does not serve GSSAPI"):
        BrokerConfig.from_props({"sasl.enabled.mechanisms": "PLAIN,GSSAPI"})
