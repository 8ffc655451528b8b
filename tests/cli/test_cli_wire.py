"""``kafkalite topics`` and ``kafkalite consumer-groups`` with --bootstrap-server: the command-line tools
over Kafka's protocol, against kafkalite brokers on TCP."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.common.kafka_uuid import uuid_to_str
from kafkalite.host.server import BackgroundServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def srv():
    with BackgroundServer(3, config={"group.initial.rebalance.delay.ms": 0}) as s:
        yield s


def cli(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(kafkalite, list(args))
    assert (result.exit_code == 0) == ok, result.output
    return result.output


def test_topics_create_list_describe_delete(srv) -> None:
    boot = ("--bootstrap-server", srv.bootstrap_servers)
    out = cli("topics", *boot, "--create", "--topic", "orders", "--partitions", "3",
              "--replication-factor", "2", "--config", "retention.ms=1000")  # fmt: skip
    assert out == "Created topic orders.\n"
    assert "orders" in cli("topics", *boot, "--list").split()
    lines = cli("topics", *boot, "--describe", "--topic", "orders").splitlines()
    tid = srv.call(lambda: srv.server.cluster.brokers[1].cache.topic_id("orders"))
    assert lines[0] == (
        f"Topic: orders\tTopicId: {uuid_to_str(tid)}\tPartitionCount: 3\tReplicationFactor: 2\t"
        "Configs: retention.ms=1000"
    )
    assert [line.split("\t")[2] for line in lines[1:]] == ["Partition: 0", "Partition: 1", "Partition: 2"]
    assert all(len(line.split("\t")[4].split(",")) == 2 for line in lines[1:])  # two replicas each
    again = cli("topics", *boot, "--create", "--topic", "orders", "--partitions", "1", ok=False)
    assert "already exists" in again
    cli("topics", *boot, "--delete", "--topic", "orders")
    deadline = time.time() + 20
    while "orders" in cli("topics", *boot, "--list").split() and time.time() < deadline:
        time.sleep(0.2)
    assert "orders" not in cli("topics", *boot, "--list").split()
    assert "does not exist" in cli("topics", *boot, "--describe", "--topic", "orders", ok=False)
    assert "HOST:PORT" in cli("topics", "--bootstrap-server", "nowhere", "--list", ok=False)


def test_consumer_groups_list_describe_reset_and_delete(srv) -> None:
    from confluent_kafka import Consumer, Producer

    boot = ("--bootstrap-server", srv.bootstrap_servers)
    cli("topics", *boot, "--create", "--topic", "clicks", "--partitions", "2", "--replication-factor", "3")
    p = Producer({"bootstrap.servers": srv.bootstrap_servers})
    for i in range(40):
        p.produce("clicks", f"c{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": srv.bootstrap_servers, "group.id": "web", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    c.subscribe(["clicks"])
    got = 0
    deadline = time.time() + 30
    while got < 30 and time.time() < deadline:
        got += len([m for m in c.consume(30 - got, 0.5) if m.error() is None])
    c.commit(asynchronous=False)
    assert "web" in cli("consumer-groups", *boot, "--list").split()
    described = cli("consumer-groups", *boot, "--describe", "--group", "web")
    assert "Stable" in described or "active members" in described or "clicks" in described
    with pytest.raises(AssertionError):
        cli("consumer-groups", *boot, "--delete", "--group", "web")  # a member is still in it
    c.close()
    described = cli("consumer-groups", *boot, "--describe", "--group", "web")
    lags = {
        line.split()[2]: int(line.split()[5]) for line in described.splitlines() if line.startswith("web ")
    }
    assert sum(lags.values()) == 10  # 40 written, 30 committed
    reset = cli(
        "consumer-groups",
        *boot,
        "--reset-offsets",
        "--group",
        "web",
        "--all-topics",
        "--to-earliest",
        "--execute",
    )
    assert "clicks" in reset
    described = cli("consumer-groups", *boot, "--describe", "--group", "web")
    lags = {
        line.split()[2]: int(line.split()[5]) for line in described.splitlines() if line.startswith("web ")
    }
    assert sum(lags.values()) == 40
    out = cli("consumer-groups", *boot, "--delete", "--group", "web")
    assert "successful" in out
    assert "web" not in cli("consumer-groups", *boot, "--list").split()
