"""The describe paths read the keys' declarations: DescribeConfigs gives each topic key's type and (when
asked) its documentation, ``kafkalite configs --describe`` prints topics' and brokers' configs as Kafka's
kafka-configs does, and ``config_table`` prints a declaration table for the book."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.config.producer import ProducerConfig
from kafkalite.config.topic import TOPIC_KEYS
from kafkalite.host.cluster import Cluster
from kafkalite.host.server import BackgroundServer
from kafkalite.protocol import (
    ConfigResourceType,
    ConfigType,
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kafkalite.tools.configs import config_table

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def cli(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(kafkalite, list(args))
    assert (result.exit_code == 0) == ok, result.output
    return result.output


def test_describe_configs_answers_types_and_documentation_from_the_declarations() -> None:
    c = Cluster(brokers=1, seed=2)
    c.create_topic("t", 1, 1)
    res = DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="t")
    req = DescribeConfigsRequest(resources=(res,), include_documentation=True)
    got = {d.name: d for d in c.request(1, req).results[0].configs}
    assert set(got) == set(TOPIC_KEYS)
    for name, spec in TOPIC_KEYS.items():
        assert (got[name].config_type, got[name].documentation) == (ConfigType[spec.type], spec.doc), name
    plain = c.request(1, DescribeConfigsRequest(resources=(res,))).results[0].configs
    assert all(d.documentation is None for d in plain)  # only when asked, as Kafka
    c.close()


def test_the_cli_describes_topic_and_broker_configs_as_kafka_configs_does() -> None:
    with BackgroundServer(1) as srv:
        srv.create_topic("zipped", 1, 1, **{"compression.type": "lz4"})
        boot = ("--bootstrap-server", srv.bootstrap_servers)
        out = cli("configs", *boot, "--entity-type", "topics", "--entity-name", "zipped", "--describe")
        assert out.splitlines() == [
            "Dynamic configs for topic zipped are:",
            "  compression.type=lz4 sensitive=false "
            "synonyms={DYNAMIC_TOPIC_CONFIG:compression.type=lz4, DEFAULT_CONFIG:compression.type=producer}",
        ]
        every = cli(
            "configs", *boot, "--entity-type", "topics", "--entity-name", "zipped", "--describe", "--all"
        )
        lines = every.splitlines()
        assert lines[0] == "All configs for topic zipped are:"
        assert [line.split("=")[0].strip() for line in lines[1:]] == sorted(TOPIC_KEYS)
        assert "  preallocate=false sensitive=false synonyms={DEFAULT_CONFIG:log.preallocate=false}" in lines
        broker = cli(
            "configs", *boot, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"
        )
        assert (
            "  log.retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.ms=604800000}"
            in (broker.splitlines())
        )
        assert "--alter" in cli(
            "configs", *boot, "--entity-type", "topics", "--alter", "--entity-name", "x", ok=False
        )


def test_a_config_table_has_one_row_per_declared_key() -> None:
    table = config_table(TOPIC_KEYS).splitlines()
    assert len(table) == 2 + len(TOPIC_KEYS)
    row = next(line for line in table if line.startswith("| `compression.type` |"))
    assert "`producer`" in row and "'lz4'" in row and row.endswith("| no (stored, validated, described) |")
    acks = next(line for line in config_table(ProducerConfig.config_keys()).splitlines() if "`acks`" in line)
    assert "| `all` | one of all, -1, 0, 1 |" in acks
