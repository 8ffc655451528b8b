"""A kafkalite cluster as separate OS processes (``kafkalite cluster start``): real clients against it,
kill -9 of a broker with acks=all, SIGTERM's controlled shutdown, and a stop/start that keeps the data."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalite.cli import _properties, kafkalite
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.processes import (
    _reap,
    parse_address,
    parse_peers,
    restart_broker,
    signal_broker,
    start_cluster,
    stop_cluster,
)
from tests.host.process_helpers import leaders, wait_for

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    state = start_cluster(d, 3, config={"group.initial.rebalance.delay.ms": "0"})
    yield d, state
    stop_cluster(d)


def create_topic(bootstrap: str, name: str, parts: int = 3) -> None:
    admin = cka.AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    new = cka.NewTopic(name, parts, 3, config={"min.insync.replicas": "2"})
    for f in admin.create_topics([new]).values():
        f.result(30)


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


def join(bootstrap: str, topic: str, group: str) -> None:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment()
    c.close()


def test_every_broker_is_its_own_process(cluster) -> None:
    d, state = cluster
    pids = {state["store"]["pid"], *(b["pid"] for b in state["brokers"].values())}
    assert len(pids) == 4 and not any(_reap(p) for p in pids)
    with AdminClient(state["bootstrap_servers"]) as a:
        assert sorted(a.brokers) == [1, 2, 3] and a.controller_id in (1, 2, 3)
    assert (
        json.loads((Path(d) / "cluster.json").read_text())["bootstrap_servers"] == state["bootstrap_servers"]
    )
    again = CliRunner().invoke(kafkalite, ["cluster", "start", "--dir", str(d)])
    assert again.exit_code != 0 and "already running" in again.output


def test_kill_9_loses_nothing_acknowledged_with_acks_all(cluster) -> None:
    d, state = cluster
    bs = state["bootstrap_servers"]
    create_topic(bs, "crash")
    join(bs, "crash", "readers")  # the offsets topic needs 3 live brokers to be created, as in Kafka
    victim = leaders(bs, "crash")[0][0]
    acked: set[bytes] = set()
    errors: list[str] = []

    def report(err, msg) -> None:
        (errors.append(str(err)) if err else acked.add(msg.value()))

    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, **QUIET})
    for i in range(4000):
        p.produce("crash", str(i).encode(), key=str(i).encode(), on_delivery=report)
        p.poll(0)
        if i == 1500:
            p.flush(10)
            signal_broker(d, victim, signal.SIGKILL)
    assert p.flush(60) == 0
    assert errors == [] and len(acked) == 4000
    now = leaders(bs, "crash")
    assert all(leader != victim and victim not in isr for leader, isr in now.values())
    got = consume(bs, "crash", "readers", acked)
    assert acked - got == set()
    # back from the dead: it recovers its logs and the controller returns it to every ISR
    restart_broker(d, victim)
    wait_for(lambda: all(victim in isr for _, isr in leaders(bs, "crash").values()), 60, "the ISR to grow")


def test_sigterm_moves_leaderships_away_first(cluster) -> None:
    d, state = cluster
    bs = state["bootstrap_servers"]
    create_topic(bs, "calm", parts=6)
    before = leaders(bs, "calm")
    victim = max(
        {leader for leader, _ in before.values()}, key=lambda b: sum(v[0] == b for v in before.values())
    )
    signal_broker(d, victim, signal.SIGTERM)
    after = leaders(bs, "calm")
    assert all(leader not in (victim, -1) for leader, _ in after.values())
    assert all(victim not in isr for _, isr in after.values())  # removed from the ISRs before it left
    restart_broker(d, victim)
    wait_for(lambda: all(victim in isr for _, isr in leaders(bs, "calm").values()), 60, "the ISR to grow")


def test_kafka_python_round_trip(cluster) -> None:
    kp = pytest.importorskip("kafka")
    bs = cluster[1]["bootstrap_servers"].split(",")
    create_topic(cluster[1]["bootstrap_servers"], "kp", parts=2)
    prod = kp.KafkaProducer(bootstrap_servers=bs, acks="all")
    for i in range(200):
        prod.send("kp", key=b"k%d" % (i % 7), value=b"v%d" % i)
    prod.flush(30)
    prod.close()
    cons = kp.KafkaConsumer(
        "kp", bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    got = {m.value for m in cons}
    cons.close()
    assert got == {b"v%d" % i for i in range(200)}


def test_stop_and_start_keeps_the_data(tmp_path) -> None:
    state = start_cluster(tmp_path, 2)
    bs = state["bootstrap_servers"]
    admin = cka.AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics([cka.NewTopic("kept", 2, 2)]).values():
        f.result(30)
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", **QUIET})
    for i in range(500):
        p.produce("kept", b"%d" % i)
    assert p.flush(30) == 0
    assert len(stop_cluster(tmp_path)) == 3
    state = start_cluster(tmp_path, 2)  # new ports, the same logs and znodes
    try:
        got = consume(state["bootstrap_servers"], "kept", "after-restart", {b"%d" % i for i in range(500)})
        assert got == {b"%d" % i for i in range(500)}
    finally:
        stop_cluster(tmp_path)


def test_command_line_parsing_names_what_is_wrong(tmp_path) -> None:
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_peers("2=h:1,3=h:2") == {2: ("h", 1), 3: ("h", 2)}
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("9092")
    with pytest.raises(ValueError, match="ID=HOST:PORT"):
        parse_peers("h:1")
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions = 4\nlog.retention.hours=1\n")
    assert _properties(str(props), ("num.partitions=2",)) == {
        "num.partitions": "2",
        "log.retention.hours": "1",
    }
    props.write_text("num.partitions\n")
    out = CliRunner().invoke(kafkalite, ["server", "start", "--config-file", str(props)])
    assert out.exit_code != 0 and "expected KEY=VALUE" in out.output
    out = CliRunner().invoke(kafkalite, ["server", "start", "--broker-id", "1"])
    assert out.exit_code != 0 and "--broker-id goes with --store or --zookeeper" in out.output
    out = CliRunner().invoke(kafkalite, ["server", "start", "--zookeeper", "h:2181"])
    assert out.exit_code != 0 and "--broker-id goes with" in out.output
    both = ["server", "start", "--broker-id", "1", "--store", "h:1", "--zookeeper", "h:2181"]
    out = CliRunner().invoke(kafkalite, both)
    assert out.exit_code != 0 and "not both" in out.output


def test_bridge_frames_carry_data_never_code() -> None:
    import os
    import pickle

    from kafkalite.net.bridge import dumps, loads
    from kafkalite.protocol import TopicPartition

    assert loads(dumps(("m", TopicPartition("t", 3), b"x"))) == ("m", TopicPartition("t", 3), b"x")

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        loads(pickle.dumps(Evil()))


def test_store_snapshot_keeps_persistent_znodes_only(tmp_path) -> None:
    from kafkalite.clock import ManualClock as SimClock
    from kafkalite.coordination.remote import load_snapshot, save_snapshot
    from kafkalite.coordination.store import CoordinationStore

    store = CoordinationStore(SimClock())
    session = store.connect(6000)
    store.create("/brokers", b"")
    store.create("/brokers/topics", b"")
    store.create("/brokers/topics/t", b'{"partitions":{"0":[1]}}')
    store.create("/brokers/ids", b"")
    store.create("/brokers/ids/1", b"me", ephemeral=True, session=session)
    store.set("/brokers/topics/t", b"v2")
    save_snapshot(store, tmp_path / "store.snapshot")
    again = CoordinationStore(SimClock())
    assert load_snapshot(again, tmp_path / "store.snapshot")
    assert again.get("/brokers/topics/t")[0] == b"v2" and again.get("/brokers/topics/t")[1].version == 1
    assert again.get_children("/brokers/ids") == [] and again.zxid == store.zxid
    assert again.connect(6000) > session  # an old session id is never handed out again
    assert not load_snapshot(CoordinationStore(SimClock()), tmp_path / "missing")
