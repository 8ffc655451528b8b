"""``kafkalite server start`` as a real process, with confluent-kafka and kafka-python: its metadata
survives restarts (topics, configs, ACLs, SCRAM users, producer ids) and transactions work on its
default single broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalite.host.processes import free_port
from kafkalite.records.batch import iter_batches

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


class Server:
    """``kafkalite server start`` in its own process, stopped with SIGTERM."""

    def __init__(self, port: int, log_dir: Path, *extra: str) -> None:
        cmd = [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port),
               "--log-dir", str(log_dir), *extra]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.bootstrap = f"127.0.0.1:{port}"
        self.said: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()  # type: ignore[union-attr]
            if not line:
                break
            self.said.append(line)
            if "broker(s) on" in line:
                return
        self.proc.kill()
        raise AssertionError(f"server start did not come up: {''.join(self.said)}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


def log_batches(partition_dir: Path) -> list:
    return [h for f in sorted(partition_dir.glob("*.log")) for _, h in iter_batches(f.read_bytes())]


def produce_idempotent(bootstrap: str, run: int) -> int:
    """10 records from an idempotent confluent-kafka producer and 10 from a kafka-python one; the count
    acknowledged."""
    acked = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **QUIET})
    for i in range(10):
        p.produce("kept", b"ck %d/%d" % (run, i), on_delivery=lambda err, m: acked.append(err is None))
    assert p.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    futures = [kp.send("kept", b"kp %d/%d" % (run, i)) for i in range(10)]
    kp.flush(30)
    kp.close()
    return sum(acked) + sum(f.succeeded() for f in futures)


def test_server_start_keeps_its_metadata_over_three_restarts(tmp_path: Path) -> None:
    port, logs = free_port(), tmp_path / "logs"
    auth = ("--override", "authorizer.class.name=kafkalite", "--override", "super.users=User:ANONYMOUS")
    alice = cka.AclBinding(cka.ResourceType.TOPIC, "kept", cka.ResourcePatternType.LITERAL, "User:alice", "*",
                           cka.AclOperation.READ, cka.AclPermissionType.ALLOW)  # fmt: skip
    acked = 0
    for run in range(4):  # the first start, then 3 restarts
        srv = Server(port, logs, *auth, "--topic", "kept:1:1")
        try:
            admin = cka.AdminClient({"bootstrap.servers": srv.bootstrap, **QUIET})
            if run == 0:
                res = cka.ConfigResource(cka.ResourceType.TOPIC, "kept")
                entry = cka.ConfigEntry("retention.ms", "123456",
                                        incremental_operation=cka.AlterConfigOpType.SET)  # fmt: skip
                res.add_incremental_config(entry)
                for f in admin.incremental_alter_configs([res]).values():
                    f.result(30)
                for f in admin.create_acls([alice]).values():
                    f.result(30)
                scram = cka.UserScramCredentialUpsertion(
                    "alice", cka.ScramCredentialInfo(cka.ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
                )
                for f in admin.alter_user_scram_credentials([scram]).values():
                    f.result(30)
            assert "kept" in admin.list_topics(timeout=10).topics, f"run {run}: the topic is gone"
            (described,) = admin.describe_configs(
                [cka.ConfigResource(cka.ResourceType.TOPIC, "kept")]
            ).values()
            assert described.result(30)["retention.ms"].value == "123456", f"run {run}: the config is gone"
            acl_filter = cka.AclBindingFilter(cka.ResourceType.ANY, None, cka.ResourcePatternType.ANY, None,
                                              None, cka.AclOperation.ANY, cka.AclPermissionType.ANY)  # fmt: skip
            assert admin.describe_acls(acl_filter).result(30) == [alice], f"run {run}: the ACL is gone"
            users = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
            assert [m.mechanism for m in users.scram_credential_infos] == [
                cka.ScramMechanism.SCRAM_SHA_256
            ], f"run {run}: the SCRAM user is gone"
            if run:  # --topic kept: found in the log dir, not created again
                assert any("topic kept already exists" in line for line in srv.said), srv.said
            acked += produce_idempotent(srv.bootstrap, run)
            c = ck.Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "check", **QUIET})
            _, end = c.get_watermark_offsets(ck.TopicPartition("kept", 0), timeout=10, cached=False)
            c.close()
            assert end == acked == 20 * (run + 1), f"run {run}: {acked} acknowledged, {end} in the log"
        finally:
            srv.stop()
    batches = log_batches(logs / "broker-1" / "kept-0")
    assert sum(h.records_count for h in batches) == 80
    pids = {h.producer_id for h in batches}
    assert len(pids) == 8, f"8 producers, but producer ids {sorted(pids)}: one was handed out again"


def test_server_start_refuses_a_log_dir_whose_metadata_is_damaged(tmp_path: Path) -> None:
    port, logs = free_port(), tmp_path / "logs"
    Server(port, logs, "--topic", "kept").stop()
    snapshot = logs / "store" / "store.snapshot"
    snapshot.write_bytes(snapshot.read_bytes()[:-10])
    out = subprocess.run(
        [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port), "--log-dir", str(logs)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1
    assert str(snapshot) in out.stderr and "torn write" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_transactions_on_the_default_single_broker(tmp_path: Path) -> None:
    srv = Server(free_port(), tmp_path / "logs", "--topic", "tx:2")
    try:
        bs = srv.bootstrap
        p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "ck-tx", **QUIET})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce("tx", b"ck commit %d" % i)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("tx", b"ck abort %d" % i)
        p.flush(30)  # in the log before the abort: read_committed must skip them
        p.abort_transaction(30)

        kp = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx", max_block_ms=30_000)
        kp.init_transactions()
        kp.begin_transaction()
        for i in range(4):
            kp.send("tx", b"kp commit %d" % i)
        kp.commit_transaction()
        kp.begin_transaction()
        for i in range(2):
            kp.send("tx", b"kp abort %d" % i)
        kp.flush()
        kp.abort_transaction()
        kp.close()

        want = sorted([b"ck commit %d" % i for i in range(5)] + [b"kp commit %d" % i for i in range(4)])
        kc = kafka.KafkaConsumer("tx", bootstrap_servers=bs, isolation_level="read_committed",
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)  # fmt: skip
        assert sorted(m.value for m in kc) == want
        kc.close()
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "rc", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", **QUIET})  # fmt: skip
        c.subscribe(["tx"])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < len(want):
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]  # and nothing more
        c.close()
        assert sorted(got) == want
    finally:
        srv.stop()
