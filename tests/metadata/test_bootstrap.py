"""The bootstrap file (``storage format --add-scram``): SCRAM users the first active controller writes right
after ``metadata.version``, so they exist before any broker starts; a log that has records ignores it."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.common.scram import ScramClient, ScramServer
from kafkalite.metadata.bootstrap import (
    BOOTSTRAP_FILE,
    BootstrapError,
    parse_add_scram,
    read_bootstrap,
    write_bootstrap,
)
from kafkalite.metadata.records import FeatureLevelRecord, UserScramCredentialRecord
from kafkalite.metadata.serde import deserialize
from tests.metadata.kraft_harness import CLUSTER_ID, CONTROLLERS, KRaftQuorum
from tests.raft.harness import scratch_dir


def authenticates(rec: UserScramCredentialRecord, mechanism: str, password: str) -> bool:
    server = ScramServer(mechanism, lambda _user: rec)
    client = ScramClient(mechanism, rec.name, password)
    try:
        client.verify(server.step(client.final(server.step(client.first()))))
        return True
    except ValueError:
        return False


def test_add_scram_makes_a_credential_of_the_password() -> None:
    rec = parse_add_scram('SCRAM-SHA-512=[name=alice,password="s3cret, with a comma",iterations=8192]')
    assert (rec.name, rec.mechanism, rec.iterations, len(rec.salt)) == ("alice", 2, 8192, 32)
    assert authenticates(rec, "SCRAM-SHA-512", "s3cret, with a comma")
    assert not authenticates(rec, "SCRAM-SHA-512", "s3cret")
    assert parse_add_scram("SCRAM-SHA-256=[name=bob,password=x]").iterations == 4096


@pytest.mark.parametrize(
    "text, reason",
    [
        ("alice:secret", "looks like"),
        ("SCRAM-SHA-1=[name=a,password=b]", "unknown SCRAM mechanism"),
        ("SCRAM-SHA-256=[name=a]", "needs name= and password="),
        ("SCRAM-SHA-256=[password=b]", "needs name= and password="),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=10]", "iterations must be between"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=many]", "invalid literal"),
        ("SCRAM-SHA-256=[name=a,password=b,salt=c]", "unknown key"),
    ],
)
def test_a_bad_add_scram_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(BootstrapError, match=reason):
        parse_add_scram(text)


def test_the_file_round_trips_and_a_damaged_one_is_refused(tmp_path) -> None:
    recs = [
        parse_add_scram("SCRAM-SHA-256=[name=a,password=b]"),
        parse_add_scram("SCRAM-SHA-512=[name=c,password=d]"),
    ]
    path = write_bootstrap(tmp_path, recs)
    assert path.name == BOOTSTRAP_FILE and read_bootstrap(tmp_path) == recs
    assert read_bootstrap(tmp_path / "elsewhere") == []
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BootstrapError, match="unreadable"):
        read_bootstrap(tmp_path)


def test_the_first_active_controller_writes_the_bootstrap_users_after_metadata_version() -> None:
    root = scratch_dir()
    admin = parse_add_scram("SCRAM-SHA-256=[name=admin,password=admin-secret]")
    for n in CONTROLLERS:
        d = os.path.join(root, f"controller-{n}")
        os.makedirs(d, exist_ok=True)
        write_bootstrap(d, [admin])
    q = KRaftQuorum(seed=5, root=root)
    try:
        assert q.net.run_until(lambda: q.active() is not None and q.image().scram, 10_000)
        assert q.image().scram[("admin", 1)].stored_key == admin.stored_key
        committed = q.checker.committed  # offset -> record bytes, as every node committed them
        first = [deserialize(committed[o])[0] for o in sorted(committed)[:2]]
        assert first == [FeatureLevelRecord(name="metadata.version", feature_level=20), admin]
        # every broker replays it: a SASL login works before anyone could have called the admin API
        assert q.net.run_until(lambda: all(b.loader.image.scram for b in q.brokers.values()), 5000)
        # a new leader on a log that has records does not write it again
        before = len(q.image().scram)
        q.net.crash(q.active().node_id)
        assert q.net.run_until(lambda: q.active() is not None and q.active().controller.activations, 10_000)
        q.net.run_for(2000)
        writes = [o for o, v in committed.items() if deserialize(v)[0] == admin]
        assert len(writes) == 1 and len(q.image().scram) == before
    finally:
        q.close()


def test_storage_format_add_scram_writes_the_metadata_log_dir(tmp_path) -> None:
    cfg = tmp_path / "controller.properties"
    cfg.write_text(
        f"process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'logs'}\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    res = CliRunner().invoke(kafkalite, ["storage", "format", "-t", CLUSTER_ID, "-c", str(cfg),
                                         "-S", "SCRAM-SHA-256=[name=admin,password=admin-secret]"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "wrote 1 SCRAM credential(s)" in res.output
    (rec,) = read_bootstrap(tmp_path / "meta")
    assert rec.name == "admin" and authenticates(rec, "SCRAM-SHA-256", "admin-secret")
    assert not (tmp_path / "logs" / BOOTSTRAP_FILE).exists()
    bad = CliRunner().invoke(kafkalite, ["storage", "format", "-t", CLUSTER_ID, "-c", str(cfg), "-g",
                                         "--add-scram", "admin:admin-secret"])  # fmt: skip
    assert bad.exit_code == 2 and "looks like" in bad.output
