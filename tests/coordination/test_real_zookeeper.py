"""kafkalite brokers as separate processes on a real Apache ZooKeeper (through kazoo): they register,
elect a controller and keep topics in Kafka's znodes, survive a kill -9 of a leader under acks=all, and
the ZkLink calls keep their meaning (errors, multi with its failing op, one-shot watches, sessions).

The ZooKeeper is Debian's package (``tools/ensure_zookeeper.sh`` installs it during ``make`` set-up),
run standalone on a free port for this module."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from kafkalite.coordination import BadVersion, Check, Create, NodeExists, NoNode, SetData
from kafkalite.coordination.kazoo_link import KazooZkLink
from kafkalite.host.processes import free_port, restart_broker, signal_broker, start_cluster, stop_cluster

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ZOOKEEPER_JARS = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    assert Path("/usr/share/java/zookeeper.jar").exists(), "run tools/ensure_zookeeper.sh (make setup)"
    java = shutil.which("java")
    assert java, "ZooKeeper needs java (tools/ensure_java.sh)"
    data = tmp_path_factory.mktemp("zookeeper")
    port = free_port()
    proc = subprocess.Popen(
        [java, "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-cp", ZOOKEEPER_JARS,
         "org.apache.zookeeper.server.ZooKeeperServerMain", str(port), str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "ZooKeeper did not start"
            time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(30)


def _kazoo(hosts: str):
    from kazoo.client import KazooClient

    k = KazooClient(hosts=hosts)
    k.start(30)
    return k


class _Net:
    """The two things a ZkLink asks of its network when the ensemble is real: nothing is sent."""


def test_the_link_keeps_zklink_meanings_on_a_real_ensemble(zookeeper):
    async def run() -> list:
        woke: list[int] = []
        expired: list[bool] = []
        link = KazooZkLink(_Net(), 1, hosts=zookeeper + "/link-test", wake=lambda: woke.append(1),
                           session_timeout_ms=6000, on_expired=lambda: expired.append(True))  # fmt: skip
        sid = link.connect()
        assert sid and link.alive
        fired: list = []
        assert link.create("/a/b", b"x", make_parents=True) == "/a/b"
        assert link.exists("/a/c", watch=fired.append) is None
        with pytest.raises(NodeExists):
            link.create("/a/b")
        with pytest.raises(NoNode):
            link.get("/nope")
        data, stat = link.get("/a/b", watch=fired.append)
        assert data == b"x" and stat.version == 0 and stat.ephemeral_owner == 0
        with pytest.raises(BadVersion) as e:
            link.multi([Create("/a/c", b"1"), SetData("/a/b", b"y", version=7)])
        assert e.value.op_index == 1 and link.exists("/a/c") is None  # all or nothing
        out = link.multi(
            [Create("/t/x", b"1", make_parents=True), SetData("/a/b", b"y", version=0), Check("/a/b")]
        )
        assert out[0] == "/t/x" and out[1].version == 1 and out[2] is True
        link.create("/a/c", b"", ephemeral=True)
        for _ in range(100):  # the watch events arrive on this loop, from kazoo's thread
            if len(fired) == 2:
                break
            await asyncio.sleep(0.05)
        assert sorted(ev.type.value for ev in fired) == ["NodeCreated", "NodeDataChanged"]
        assert all(ev.session == sid for ev in fired) and woke
        link.close()  # a clean close: the ephemeral goes at once
        k = _kazoo(zookeeper + "/link-test")
        gone = k.exists("/a/c") is None
        k.stop()
        return [gone, expired]

    gone, expired = asyncio.run(run())
    assert gone and not expired


def test_a_cluster_on_a_real_zookeeper_keeps_kafkas_znodes_and_loses_nothing_acked(zookeeper, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    connect = zookeeper + "/kafkalite"
    state = start_cluster(tmp_path, 3, zookeeper=connect, config={"group.initial.rebalance.delay.ms": "0"})
    try:
        assert "store" not in state and state["zookeeper"] == connect
        boot = state["bootstrap_servers"]
        admin = AdminClient({"bootstrap.servers": boot, "log_level": 0})
        for f in admin.create_topics([NewTopic("zk", 3, 3, config={"min.insync.replicas": "2"})]).values():
            f.result(30)
        k = _kazoo(connect)
        assert sorted(k.get_children("/brokers/ids")) == ["1", "2", "3"]
        assert json.loads(k.get("/controller")[0])["brokerid"] in (1, 2, 3)
        assignment = json.loads(k.get("/brokers/topics/zk")[0])
        assert sorted(assignment["partitions"]) == ["0", "1", "2"]
        leader = json.loads(k.get("/brokers/topics/zk/partitions/0/state")[0])["leader"]

        acked: list[bytes] = []
        p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 2, "log_level": 0})
        for i in range(3000):
            p.produce("zk", f"{i}".encode(), partition=i % 3,
                      on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)  # fmt: skip
            if i == 1000:
                p.flush(30)
                signal_broker(tmp_path, leader, signal.SIGKILL)  # kill -9 a partition leader mid-run
            p.poll(0)
        assert p.flush(60) == 0
        for _ in range(150):  # the controller saw the session go and moved the leadership
            now = json.loads(k.get("/brokers/topics/zk/partitions/0/state")[0])["leader"]
            if now != leader:
                break
            time.sleep(0.2)
        assert now != leader and str(leader) not in k.get_children("/brokers/ids")
        restart_broker(tmp_path, leader)
        assert sorted(k.get_children("/brokers/ids")) == ["1", "2", "3"]
        k.stop()

        c = Consumer(
            {"bootstrap.servers": boot, "group.id": "zk", "enable.auto.commit": False, "log_level": 0}
        )
        c.assign([TopicPartition("zk", p, 0) for p in range(3)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not set(acked) <= got and time.monotonic() < deadline:
            got |= {m.value() for m in c.consume(1000, 1.0) if m.error() is None}
        c.close()
        assert len(acked) == 3000 and set(acked) <= got
    finally:
        stop_cluster(tmp_path)
