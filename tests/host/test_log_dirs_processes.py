"""Several log dirs per broker in a cluster of broker processes (``kafkalite server start --broker-id
--log-dir A,B``, as Kafka's log.dirs): kafkalite log-dirs describes them, a replica moves between them
while a real client writes with acks=all, and a kill -9 after the move loses nothing."""

from __future__ import annotations

import json
import signal
import time

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.processes import restart_broker, signal_broker, start_cluster, stop_cluster
from kafkalite.protocol import TopicPartition
from tests.host.process_helpers import leaders, wait_for

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


def _describe(bootstrap: str) -> dict:
    out = CliRunner().invoke(kafkalite, ["log-dirs", "--bootstrap-server", bootstrap, "--describe"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output.splitlines()[2])


def _where(doc: dict, broker: int, partition: str) -> list[tuple[str, bool]]:
    (b,) = [b for b in doc["brokers"] if b["broker"] == broker]
    return [
        (d["logDir"], p["isFuture"])
        for d in b["logDirs"]
        for p in d["partitions"]
        if p["partition"] == partition
    ]


def test_broker_processes_with_two_log_dirs_move_a_replica_and_lose_nothing(tmp_path) -> None:
    state = start_cluster(tmp_path, 2, log_dirs_per_broker=2)
    try:
        bootstrap = state["bootstrap"]["PLAINTEXT"]
        admin = cka.AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        new = cka.NewTopic("t", 2, 2, config={"min.insync.replicas": "2"})
        for f in admin.create_topics([new]).values():
            f.result(30)
        wait_for(lambda: all(len(isr) == 2 for _l, isr in leaders(bootstrap, "t").values()), what="ISR")
        doc = _describe(bootstrap)
        dirs = {b["broker"]: [d["logDir"] for d in b["logDirs"]] for b in doc["brokers"]}
        assert dirs == {b: [str(tmp_path / f"broker-{b}" / f"dir-{i}") for i in (0, 1)] for b in (1, 2)}
        assert all(d["error"] is None for b in doc["brokers"] for d in b["logDirs"])
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
        acked: list[bytes] = []

        def done(err, msg) -> None:
            if err is None:
                acked.append(msg.value())

        for i in range(3000):
            producer.produce("t", f"v{i}".encode(), partition=0, on_delivery=done)
        producer.flush(30)
        ((here, _),) = _where(doc, 1, "t-0")
        there = next(d for d in dirs[1] if d != here)
        with AdminClient(bootstrap) as a:
            assert a.alter_replica_log_dirs(1, {TopicPartition("t", 0): there}) == {TopicPartition("t", 0): 0}
        for i in range(3000, 4000):  # writes go on while it moves
            producer.produce("t", f"v{i}".encode(), partition=0, on_delivery=done)
            producer.poll(0)
        producer.flush(30)
        wait_for(lambda: _where(_describe(bootstrap), 1, "t-0") == [(there, False)], what="the move")
        assert len(acked) == 4000
        signal_broker(tmp_path, 1, signal.SIGKILL)
        time.sleep(0.5)
        restart_broker(tmp_path, 1)
        wait_for(lambda: all(len(isr) == 2 for _l, isr in leaders(bootstrap, "t").values()), 60, "ISR again")
        assert _where(_describe(bootstrap), 1, "t-0") == [(there, False)], "it stays where it moved"
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                                **QUIET})  # fmt: skip
        consumer.assign([ck.TopicPartition("t", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 4000 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.close()
        assert got == acked, "every acknowledged record, in order, once"
    finally:
        stop_cluster(tmp_path)
