"""KRaft combined mode as OS processes (``kafkalite cluster start --kraft --combined``): three processes,
each ``process.roles=broker,controller`` with one node id, form the metadata quorum and serve clients.
confluent-kafka produces with acks=all through the SIGKILL of the node that is the active controller
(and a broker), and reads every acknowledged record back; the controller listener is never advertised."""

from __future__ import annotations

import json
import signal
import time

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.kraft_processes import restart_controller, signal_controller
from kafkalite.host.processes import _reap
from tests.host.process_helpers import leaders, wait_for
from tests.host.test_kraft_processes import create_topic, quorum_leader

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("kraft-combined")
    res = CliRunner().invoke(
        kafkalite,
        ["cluster", "start", "--kraft", "--combined", "--controllers", "3", "--brokers", "3", "--dir", str(d),
         "--override", "group.initial.rebalance.delay.ms=0", "--override", "broker.session.timeout.ms=3000"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    state = json.loads((d / "cluster.json").read_text())
    yield d, state
    stop = CliRunner().invoke(kafkalite, ["cluster", "stop", "--dir", str(d)])
    assert stop.exit_code == 0, stop.output
    assert not any(not _reap(b["pid"]) for b in state["brokers"].values()), "every node stopped"


def consume_assigned(
    bootstrap: str, topic: str, parts: int, want: set[bytes], timeout_s: float = 40.0
) -> set:
    """Read ``topic`` from the start by assignment: no group, so no __consumer_offsets, whose three
    replicas Kafka will not place while a node is down."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                     **QUIET})  # fmt: skip
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(parts)])
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not want <= got:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    return got


def test_three_processes_each_broker_and_controller(cluster) -> None:
    d, state = cluster
    assert state["controllers"] == {} and sorted(state["brokers"]) == ["1", "2", "3"]
    assert len({b["pid"] for b in state["brokers"].values()}) == 3, "one process per node, both roles"
    assert state["voters"].startswith("1@") and ",2@" in state["voters"] and ",3@" in state["voters"]
    props = (d / "config" / "broker-1.properties").read_text()
    assert "process.roles=broker,controller" in props and "controller.listener.names=CONTROLLER" in props
    assert "CONTROLLER://" in props
    with AdminClient(state["bootstrap_servers"]) as a:
        assert sorted(a.brokers) == [1, 2, 3]
        # clients see the broker listeners only: the controller listener is not advertised
        advertised = {f"{h}:{p}" for h, p in a.brokers.values()}
    assert advertised == set(state["bootstrap_servers"].split(","))
    assert not advertised & set(state["bootstrap_controllers"].split(","))
    res = CliRunner().invoke(
        kafkalite,
        ["metadata-quorum", "--bootstrap-controller", state["bootstrap_controllers"], "describe", "--status"],
    )
    assert res.exit_code == 0, res.output
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in res.output.splitlines())}
    assert fields["CurrentVoters"] == "[1,2,3]" and fields["CurrentObservers"] == "[]"


def test_acks_all_survives_sigkill_of_the_active_controllers_node(cluster) -> None:
    d, state = cluster
    bs = state["bootstrap_servers"]
    create_topic(bs, "combined")
    victim = quorum_leader(state["bootstrap_controllers"])
    assert victim in (1, 2, 3)
    acked: set[bytes] = set()
    errors: list[str] = []

    def report(err, msg) -> None:
        (errors.append(str(err)) if err else acked.add(msg.value()))

    p = ck.Producer(
        {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **QUIET}
    )
    for i in range(2000):
        p.produce("combined", str(i).encode(), key=str(i).encode(), on_delivery=report)
        p.poll(0)
        if i == 700:
            p.flush(10)
            signal_controller(d, victim, signal.SIGKILL)  # the active controller and a broker, both gone
    assert p.flush(60) == 0
    assert errors == [] and len(acked) == 2000
    others = ",".join(b["listener"] for nid, b in state["brokers"].items() if int(nid) != victim)
    wait_for(lambda: quorum_leader(others) not in (None, victim), 30, "the other voters to elect a leader")
    wait_for(
        lambda: len(now := leaders(bs, "combined")) == 3
        and all(leader != victim and victim not in isr for leader, isr in now.values()),
        30, "the new active controller to fence the killed node and move its leaderships",
    )  # fmt: skip
    assert acked - consume_assigned(bs, "combined", 3, acked) == set()
    restart_controller(d, victim)  # both roles come back: a voter again, and a broker in every ISR
    wait_for(lambda: all(victim in isr for _, isr in leaders(bs, "combined").values()), 60, "the ISR to grow")
    wait_for(
        lambda: quorum_leader(state["bootstrap_controllers"]) is not None, 30, "the quorum to answer again"
    )


def test_a_combined_node_needs_its_controller_listener(tmp_path) -> None:
    cfg = tmp_path / "node.properties"
    cfg.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        f"controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'n1'}\n"
    )
    res = CliRunner().invoke(kafkalite, ["server", "start", "--config-file", str(cfg)])
    assert res.exit_code != 0 and "controller.listener.names CONTROLLER must be in listeners" in res.output
    res = CliRunner().invoke(
        kafkalite, ["server", "start", "--config-file", str(cfg), "--inter-broker-port", "5"]
    )
    assert res.exit_code != 0 and "takes no --inter-broker-port" in res.output


def test_combined_needs_kraft_and_enough_brokers(tmp_path) -> None:
    res = CliRunner().invoke(kafkalite, ["cluster", "start", "--combined", "--dir", str(tmp_path)])
    assert res.exit_code != 0 and "--combined goes with --kraft" in res.output
    res = CliRunner().invoke(
        kafkalite,
        ["cluster", "start", "--kraft", "--combined", "--brokers", "1", "--controllers", "3", "--dir",
         str(tmp_path)],
    )  # fmt: skip
    assert res.exit_code != 0 and "needs 1 to --brokers 1" in res.output


def test_cluster_stop_stops_broker_only_nodes_before_the_combined_ones(tmp_path) -> None:
    from kafkalite.host.kraft_processes import start_kraft_cluster
    from kafkalite.host.processes import stop_cluster

    state = start_kraft_cluster(tmp_path, brokers=2, controllers=1, combined=True)
    assert state["brokers"]["1"]["roles"] == "broker,controller" and "roles" not in state["brokers"]["2"]
    stopped = stop_cluster(tmp_path)
    # the broker-only node first, while the quorum can still approve its controlled shutdown
    assert stopped == [state["brokers"]["2"]["pid"], state["brokers"]["1"]["pid"]]
    assert all(_reap(b["pid"]) for b in state["brokers"].values())
