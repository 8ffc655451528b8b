"""KRaft mode as separate OS processes (``kafkalite cluster start --kraft``): three controller processes
form the metadata quorum, three broker processes observe it; real clients produce and consume, and a
SIGKILLed broker's leaderships move to the others with nothing acknowledged lost."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.kraft_processes import restart_controller, signal_controller
from kafkalite.host.processes import _reap, restart_broker, signal_broker, stop_cluster
from kafkalite.storage import meta_properties
from tests.host.process_helpers import leaders, wait_for

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("kraft")
    res = CliRunner().invoke(
        kafkalite,
        ["cluster", "start", "--kraft", "--controllers", "3", "--brokers", "3", "--dir", str(d),
         "--override", "group.initial.rebalance.delay.ms=0"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    state = json.loads((d / "cluster.json").read_text())
    assert res.output.strip() == state["bootstrap_servers"]
    yield d, state
    stop = CliRunner().invoke(kafkalite, ["cluster", "stop", "--dir", str(d)])
    assert stop.exit_code == 0, stop.output


def create_topic(bootstrap: str, name: str, parts: int = 3) -> None:
    admin = cka.AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    new = cka.NewTopic(name, parts, 3, config={"min.insync.replicas": "2"})
    for f in admin.create_topics([new]).values():
        f.result(30)
    # CreateTopics answers once the records are committed; each broker leads after it replays them
    wait_for(lambda: len(leaders(bootstrap, name)) == parts, 30, f"{name} to have leaders")


def consume(bootstrap: str, topic: str, group: str, want: set[bytes], timeout_s: float = 40.0) -> set[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **QUIET})  # fmt: skip
    c.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not want <= got:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    return got


def test_each_node_is_a_formatted_process_of_one_cluster(cluster) -> None:
    d, state = cluster
    nodes = {**state["controllers"], **state["brokers"]}
    assert sorted(state["controllers"]) == ["3001", "3002", "3003"] and sorted(state["brokers"]) == [
        "1",
        "2",
        "3",
    ]
    assert len({n["pid"] for n in nodes.values()}) == 6 and not any(_reap(n["pid"]) for n in nodes.values())
    dirs = [d / f"controller-{c}" for c in state["controllers"]]
    dirs += [d / f"broker-{b}{s}" for b in state["brokers"] for s in ("", "-metadata")]
    metas = [meta_properties.read(x) for x in dirs]
    assert {m.cluster_id for m in metas} == {state["cluster_id"]}  # one id, formatted before any start
    props = (d / "config" / "broker-1.properties").read_text()
    assert "process.roles=broker" in props and f"controller.quorum.voters={state['voters']}" in props
    with AdminClient(state["bootstrap_servers"]) as a:
        assert sorted(a.brokers) == [1, 2, 3]


def test_a_node_refuses_an_unformatted_dir(tmp_path) -> None:
    cfg = tmp_path / "controller.properties"
    cfg.write_text(
        "process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'c1'}\n"
    )
    res = CliRunner().invoke(kafkalite, ["server", "start", "--config-file", str(cfg)])
    assert res.exit_code != 0 and "format it first" in res.output


def test_idempotent_acks_all_produce_and_group_consume(cluster) -> None:
    _, state = cluster
    bs = state["bootstrap_servers"]
    create_topic(bs, "orders")
    acked: set[bytes] = set()
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, **QUIET})
    for i in range(300):
        p.produce("orders", f"o{i}".encode(), key=str(i).encode(),
                  on_delivery=lambda err, m: err is None and acked.add(m.value()))  # fmt: skip
    assert p.flush(30) == 0 and len(acked) == 300
    assert consume(bs, "orders", "billing", acked) == acked


def test_sigkilled_broker_leaderships_move_and_nothing_acked_is_lost(cluster) -> None:
    d, state = cluster
    bs = state["bootstrap_servers"]
    create_topic(bs, "crash")
    victim = leaders(bs, "crash")[0][0]
    acked: set[bytes] = set()
    errors: list[str] = []

    def report(err, msg) -> None:
        (errors.append(str(err)) if err else acked.add(msg.value()))

    p = ck.Producer(
        {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **QUIET}
    )
    for i in range(3000):
        p.produce("crash", str(i).encode(), key=str(i).encode(), on_delivery=report)
        p.poll(0)
        if i == 1000:
            p.flush(10)
            signal_broker(d, victim, signal.SIGKILL)
    assert p.flush(60) == 0
    assert errors == [] and len(acked) == 3000
    wait_for(
        lambda: len(now := leaders(bs, "crash")) == 3
        and all(leader != victim and victim not in isr for leader, isr in now.values()),
        30, "the controller to fence the killed broker and move its leaderships",
    )  # fmt: skip
    assert acked - consume(bs, "crash", "readers", acked) == set()
    restart_broker(d, victim)  # it recovers its logs, registers again and rejoins every ISR
    wait_for(lambda: all(victim in isr for _, isr in leaders(bs, "crash").values()), 60, "the ISR to grow")


def test_kafka_python_round_trip(cluster) -> None:
    kp = pytest.importorskip("kafka")
    bs = cluster[1]["bootstrap_servers"]
    create_topic(bs, "kp", parts=2)
    prod = kp.KafkaProducer(bootstrap_servers=bs.split(","), acks="all", enable_idempotence=True)
    for i in range(200):
        prod.send("kp", key=b"k%d" % (i % 7), value=b"v%d" % i)
    prod.flush(30)
    prod.close()
    cons = kp.KafkaConsumer("kp", bootstrap_servers=bs.split(","), group_id="kp-readers",
                            auto_offset_reset="earliest", consumer_timeout_ms=8000)  # fmt: skip
    got = {m.value for m in cons}
    cons.close()
    assert got == {b"v%d" % i for i in range(200)}


def quorum_leader(bootstrap_controllers: str) -> int | None:
    res = CliRunner().invoke(
        kafkalite,
        ["metadata-quorum", "--bootstrap-controller", bootstrap_controllers, "describe", "--status"],
    )
    if res.exit_code != 0:
        return None
    return int(dict(line.split(":", 1) for line in res.output.splitlines())["LeaderId"])


def quorum_leader_via(bootstrap_servers: str) -> int | None:
    res = CliRunner().invoke(
        kafkalite, ["metadata-quorum", "--bootstrap-server", bootstrap_servers, "describe", "--status"]
    )
    if res.exit_code != 0:
        return None
    return int(dict(line.split(":", 1) for line in res.output.splitlines())["LeaderId"])


def test_sigkilled_active_controller_is_replaced_and_rejoins(cluster) -> None:
    d, state = cluster
    old = quorum_leader(state["bootstrap_controllers"])
    assert old is not None
    signal_controller(d, old, signal.SIGKILL)
    others = ",".join(c["listener"] for cid, c in state["controllers"].items() if int(cid) != old)
    wait_for(lambda: quorum_leader(others) not in (None, old), 30, "the other voters to elect a leader")
    # a broker's forwarding follows the quorum to its new leader
    wait_for(
        lambda: quorum_leader_via(state["bootstrap_servers"]) == quorum_leader(others),
        30, "a broker to relay the new leader's DescribeQuorum",
    )  # fmt: skip
    create_topic(state["bootstrap_servers"], "after-failover")  # forwarded to the new active controller
    restart_controller(d, old)
    wait_for(
        lambda: quorum_leader(state["bootstrap_controllers"]) is not None,
        30, "the quorum to answer with all three controllers up",
    )  # fmt: skip

    def rejoined() -> bool:
        res = CliRunner().invoke(
            kafkalite,
            [
                "metadata-quorum",
                "--bootstrap-controller",
                state["bootstrap_controllers"],
                "describe",
                "--replication",
            ],
        )
        rows = (
            {r[0]: r for r in (line.split() for line in res.output.splitlines()[1:])}
            if res.exit_code == 0
            else {}
        )
        return str(old) in rows and rows[str(old)][2] == "0" and int(rows[str(old)][1]) > 0

    wait_for(rejoined, 30, "the restarted controller to catch up as a voter")


def test_cluster_stop_stops_brokers_then_controllers(tmp_path) -> None:
    from kafkalite.host.kraft_processes import start_kraft_cluster

    state = start_kraft_cluster(tmp_path, brokers=1, controllers=1)
    pids = [state["brokers"]["1"]["pid"], state["controllers"]["3001"]["pid"]]
    assert len(stop_cluster(tmp_path)) == 2 and all(_reap(p) for p in pids)
    assert Path(tmp_path / "controller-3001" / "meta.properties").exists()


def test_metadata_quorum_describe_shows_three_voters_and_three_observers(cluster) -> None:
    _, state = cluster
    runner = CliRunner()
    # a follower controller alone answers NOT_LEADER_OR_FOLLOWER; the tool goes on to the next bootstrap one
    res = runner.invoke(
        kafkalite,
        ["metadata-quorum", "--bootstrap-controller", state["bootstrap_controllers"], "describe", "--status"],
    )
    assert res.exit_code == 0, res.output
    fields = dict(line.split(":", 1) for line in res.output.splitlines())
    fields = {k: v.strip() for k, v in fields.items()}
    assert list(fields) == [
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers",
    ]  # fmt: skip
    assert fields["ClusterId"] == state["cluster_id"]
    assert fields["CurrentVoters"] == "[3001,3002,3003]" and fields["CurrentObservers"] == "[1,2,3]"
    assert int(fields["LeaderId"]) in (3001, 3002, 3003) and int(fields["HighWatermark"]) > 0
    rep = runner.invoke(
        kafkalite,
        [
            "metadata-quorum",
            "--bootstrap-controller",
            state["bootstrap_controllers"],
            "describe",
            "--replication",
        ],
    )
    assert rep.exit_code == 0, rep.output
    header, *rows = [line.split() for line in rep.output.splitlines()]
    assert header == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert rows[0][0] == fields["LeaderId"] and rows[0][5] == "Leader"
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 3001, 3002, 3003]
    assert sorted(r[5] for r in rows) == [
        "Follower",
        "Follower",
        "Leader",
        "Observer",
        "Observer",
        "Observer",
    ]
    assert all(int(r[1]) > 0 and int(r[2]) >= 0 for r in rows)


def _status(option: str, bootstrap: str) -> dict[str, str]:
    res = CliRunner().invoke(kafkalite, ["metadata-quorum", option, bootstrap, "describe", "--status"])
    assert res.exit_code == 0, res.output
    return {k: v.strip() for k, v in (line.split(":", 1) for line in res.output.splitlines())}


def test_metadata_quorum_through_a_broker_shows_what_the_controllers_do(cluster) -> None:
    # kafka-metadata-quorum --bootstrap-server: the broker forwards DescribeQuorum to the active controller
    _, state = cluster
    broker = state["bootstrap_servers"].split(",")[1]  # broker 2 alone
    direct = _status("--bootstrap-controller", state["bootstrap_controllers"])
    via = _status("--bootstrap-server", broker)
    assert list(via) == list(direct)
    same = ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters", "CurrentObservers")
    assert {k: via[k] for k in same} == {k: direct[k] for k in same}
    assert via["CurrentObservers"] == "[1,2,3]" and int(via["HighWatermark"]) > 0
    rep = CliRunner().invoke(kafkalite, ["metadata-quorum", "--bootstrap-server", broker, "describe",
                                         "--replication"])  # fmt: skip
    assert rep.exit_code == 0, rep.output
    rows = [line.split() for line in rep.output.splitlines()[1:]]
    assert rows[0][0] == via["LeaderId"] and rows[0][5] == "Leader"
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 3001, 3002, 3003]


def test_admin_clients_grow_elect_and_reassign_on_kraft(cluster, tmp_path) -> None:
    """confluent-kafka's create_partitions and elect_leaders and kafka-python's partition reassignments
    against the process cluster: brokers forward them, the quorum controller writes the records."""
    kp = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient

    bs = cluster[1]["bootstrap_servers"]
    admin = cka.AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics([cka.NewTopic("adm", 2, 1)]).values():
        f.result(30)
    wait_for(lambda: len(leaders(bs, "adm")) == 2, 30, "adm to have leaders")
    assert admin.create_partitions([cka.NewPartitions("adm", 4)])["adm"].result(30) is None
    with pytest.raises(ck.KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([cka.NewPartitions("adm", 3)])["adm"].result(30)
    wait_for(lambda: len(leaders(bs, "adm")) == 4, 30, "the new partitions to have leaders")
    elected = admin.elect_leaders(ck.ElectionType.PREFERRED, [ck.TopicPartition("adm", 0)]).result(30)
    assert [e.code() for e in elected.values()] == [84]  # ELECTION_NOT_NEEDED: the only replica leads

    prod = ck.Producer({"bootstrap.servers": bs, "acks": "all", **QUIET})
    for i in range(50):
        prod.produce("adm", value=b"r%d" % i, partition=0)
    assert prod.flush(30) == 0
    (old,) = leaders(bs, "adm")[0][1]
    target = [b for b in (1, 2, 3) if b != old][:2]
    ka = KafkaAdminClient(bootstrap_servers=bs.split(","))
    try:
        tp = kp.TopicPartition("adm", 0)
        assert ka.alter_partition_reassignments({tp: target}) == {tp: None}
        wait_for(lambda: ka.list_partition_reassignments() == {}, 30, "the move to finish")
        wait_for(lambda: sorted(leaders(bs, "adm")[0][1]) == sorted(target), 30, "the target ISR")
        assert leaders(bs, "adm")[0][0] in target
    finally:
        ka.close()
    # the same through `kafkalite reassign-partitions`, Kafka's tool and JSON
    (old1,) = leaders(bs, "adm")[1][1]
    target1 = [b for b in (3, 2, 1) if b != old1][:2]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "adm", "partition": 1, "replicas": target1}]}))
    tool = ["reassign-partitions", "--bootstrap-server", bs, "--reassignment-json-file", str(plan)]
    r = CliRunner().invoke(kafkalite, [*tool, "--execute"])
    assert r.output.splitlines()[-1] == "Successfully started partition reassignment for adm-1", r.output
    wait_for(
        lambda: "is completed." in CliRunner().invoke(kafkalite, [*tool, "--verify"]).output,
        30,
        "adm-1 to move",
    )
    wait_for(lambda: sorted(leaders(bs, "adm")[1][1]) == sorted(target1), 30, "adm-1's target ISR")
    cons = ck.Consumer({"bootstrap.servers": bs, "group.id": "adm-reader", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, **QUIET})  # fmt: skip
    cons.assign([ck.TopicPartition("adm", 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        m = cons.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value())
    cons.close()
    assert got == [b"r%d" % i for i in range(50)], "the moved replicas hold every record"


def test_metadata_quorum_needs_exactly_one_bootstrap_option() -> None:
    for opts in ([], ["--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:1"]):
        res = CliRunner().invoke(kafkalite, ["metadata-quorum", *opts, "describe", "--status"])
        assert (
            res.exit_code == 2
            and "exactly one of --bootstrap-server and --bootstrap-controller" in res.output
        )


def test_controller_listener_closes_on_an_api_it_does_not_serve() -> None:
    import struct

    from kafkalite.host.metadata_quorum import ControllerListener

    listener = ControllerListener(lambda: None, lambda: ("x", -1))  # type: ignore[arg-type,return-value]
    produce = struct.pack(">hhih", 0, 7, 1, -1)  # Produce v7, no client id
    assert listener.answer(produce) is None
    versions = struct.pack(">hhih", 18, 0, 5, -1)
    out = listener.answer(versions)
    assert out is not None and struct.unpack(">ii", out[:8])[1] == 5  # correlation id echoed


def test_start_names_a_node_that_exited(tmp_path, monkeypatch) -> None:
    from kafkalite.host import kraft_processes

    # a broker given a config it refuses (a voter id as its node.id) exits; start says which and why
    monkeypatch.setattr(
        kraft_processes, "write_properties", _bad_broker_config(kraft_processes.write_properties)
    )
    try:
        # the time the broker's process has to start and refuse its config before start gives up
        with pytest.raises(TimeoutError, match=r"broker 1 exited: .*must not be a voter"):
            kraft_processes.start_kraft_cluster(tmp_path, brokers=1, controllers=1, timeout_s=15)
    finally:
        stop_cluster(tmp_path)  # the controller that did start, whatever the outcome


def _bad_broker_config(write):
    def bad(path: Path, props: dict) -> None:
        if props.get("process.roles") == "broker":
            props = {
                **props,
                "controller.quorum.voters": f"1@127.0.0.1:1,{props['controller.quorum.voters']}",
            }
            props["node.id"] = 1
        write(path, props)

    return bad


def test_a_broker_checks_every_one_of_its_log_dirs(tmp_path) -> None:
    cid = meta_properties.random_uuid()
    meta_properties.format_dirs([tmp_path / "a", tmp_path / "meta"], cid, 1)
    cfg = tmp_path / "broker.properties"
    cfg.write_text(
        "process.roles=broker\nnode.id=1\ncontroller.quorum.voters=3001@127.0.0.1:1\n"
        "controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    res = CliRunner().invoke(kafkalite, ["server", "start", "--config-file", str(cfg)])
    assert res.exit_code != 0 and f"{tmp_path / 'b'} has no meta.properties" in res.output


def test_processes_snapshot_the_metadata_log_and_a_restarted_broker_starts_from_its_snapshot(
    tmp_path,
) -> None:
    from kafkalite.host.kraft_processes import start_kraft_cluster

    small = {
        "metadata.log.max.record.bytes.between.snapshots": "2048",
        "metadata.max.retention.bytes": "0",
        "metadata.log.segment.bytes": "4096",
        "metadata.log.segment.min.bytes": "1024",
    }
    state = start_kraft_cluster(tmp_path, brokers=1, controllers=1, config=small)
    try:
        bootstrap = state["bootstrap_servers"]
        ctl_dir = next(tmp_path.glob("controller-*/__cluster_metadata-0"))
        broker_dir = tmp_path / "broker-1-metadata" / "__cluster_metadata-0"
        for i in range(8):
            admin = cka.AdminClient({"bootstrap.servers": bootstrap, **QUIET})
            for f in admin.create_topics([cka.NewTopic(f"s{i}", 1, 1)]).values():
                f.result(30)

        def dropped(d: Path) -> bool:
            return any(d.glob("*.checkpoint")) and not (d / f"{0:020d}.log").exists()

        wait_for(lambda: dropped(ctl_dir) and dropped(broker_dir), 60, "snapshots and a log start past 0")
        signal_broker(tmp_path, 1, signal.SIGKILL)
        restart_broker(tmp_path, 1)
        admin = cka.AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        wait_for(
            lambda: {f"s{i}" for i in range(8)} <= set(admin.list_topics(timeout=5).topics), 30, "topics"
        )
    finally:
        stop = CliRunner().invoke(kafkalite, ["cluster", "stop", "--dir", str(tmp_path)])
        assert stop.exit_code == 0, stop.output
