"""``meta.properties``: Kafka Uuids, the file's two versions, ``storage format`` and the checks at start."""

from __future__ import annotations

import base64

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cli import kafkalite
from kafkalite.host.cluster import Cluster
from kafkalite.storage import meta_properties as mp

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # any 22-character Uuid string


@given(st.binary(min_size=16, max_size=16))
def test_a_uuid_is_16_bytes_in_22_url_safe_characters(raw):
    text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert len(text) == 22
    assert mp.parse_uuid(text) == text


@pytest.mark.parametrize(
    "bad", ["", "kafkalite", "MkU3OEVBNTcwNTJENDM2Qg=", "MkU3OEVBNTcwNTJENDM2Q", "MkU3OEVBNTcwNTJENDM2Q!"]
)
def test_a_cluster_id_that_is_no_uuid_is_refused_by_value(bad):
    with pytest.raises(mp.MetaPropertiesError, match="not a valid Kafka Uuid"):
        mp.parse_uuid(bad)


def test_random_uuid_skips_the_reserved_ids_and_a_leading_dash():
    draws = iter([bytes(16), bytes(15) + b"\x01", b"\xf8" + bytes(15), b"\x01" * 16])
    got = mp.random_uuid(lambda n: next(draws))
    assert got == base64.urlsafe_b64encode(b"\x01" * 16).rstrip(b"=").decode()
    assert len({mp.random_uuid() for _ in range(50)}) == 50


def test_both_versions_round_trip_through_the_file(tmp_path):
    v1 = mp.MetaProperties(mp.KRAFT_VERSION, 3, CLUSTER, mp.random_uuid())
    mp.write(tmp_path / "a", v1)
    assert mp.read(tmp_path / "a") == v1
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert "node.id=3" in text and f"cluster.id={CLUSTER}" in text and "version=1" in text
    v0 = mp.MetaProperties(mp.ZK_VERSION, 2, "kafkalite")
    mp.write(tmp_path / "b", v0)
    assert "broker.id=2" in (tmp_path / "b" / "meta.properties").read_text()
    assert mp.read(tmp_path / "b") == v0
    assert mp.read(tmp_path / "c") is None
    assert not (tmp_path / "a" / "meta.properties.tmp").exists()


def test_a_file_missing_its_keys_names_what_is_missing(tmp_path):
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(mp.MetaPropertiesError, match="requires cluster.id"):
        mp.read(tmp_path)
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\n")
    with pytest.raises(mp.MetaPropertiesError, match="no node.id"):
        mp.read(tmp_path)
    (tmp_path / "meta.properties").write_text("version=7\nnode.id=1\n")
    with pytest.raises(mp.MetaPropertiesError, match="version 7"):
        mp.read(tmp_path)


def test_format_writes_every_dir_each_with_its_own_directory_id(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    assert mp.format_dirs(dirs, CLUSTER, 1) == dirs
    metas = [mp.read(d) for d in dirs]
    assert {(m.version, m.node_id, m.cluster_id) for m in metas} == {(1, 1, CLUSTER)}
    assert metas[0].directory_id != metas[1].directory_id
    assert mp.verify_dirs(dirs, 1, cluster_id=CLUSTER, require_formatted=True) == CLUSTER


def test_format_refuses_a_formatted_dir_and_writes_nothing_unless_told_to_skip_it(tmp_path):
    mp.format_dirs([tmp_path / "old"], CLUSTER, 1)
    with pytest.raises(mp.MetaPropertiesError, match=f"{tmp_path / 'old'} is already formatted"):
        mp.format_dirs([tmp_path / "new", tmp_path / "old"], CLUSTER, 1)
    assert mp.read(tmp_path / "new") is None, "a refused format wrote a directory"
    assert mp.format_dirs([tmp_path / "new", tmp_path / "old"], CLUSTER, 1, ignore_formatted=True) == [
        tmp_path / "new"
    ]
    other = mp.random_uuid()
    with pytest.raises(mp.InconsistentClusterIdError, match=f"belongs to cluster {CLUSTER}"):
        mp.format_dirs([tmp_path / "old"], other, 1, ignore_formatted=True)


def test_verify_refuses_another_cluster_another_node_mixed_dirs_and_unformatted_kraft_dirs(tmp_path):
    mp.format_dirs([tmp_path / "a"], CLUSTER, 1)
    with pytest.raises(mp.InconsistentClusterIdError, match=f"{tmp_path / 'a'} belongs to cluster {CLUSTER}"):
        mp.verify_dirs([tmp_path / "a"], 1, cluster_id=mp.random_uuid())
    with pytest.raises(mp.InconsistentNodeIdError, match="belongs to node 1, but this node's id is 2"):
        mp.verify_dirs([tmp_path / "a"], 2)
    mp.format_dirs([tmp_path / "b"], mp.random_uuid(), 1)
    with pytest.raises(mp.InconsistentClusterIdError, match="different clusters"):
        mp.verify_dirs([tmp_path / "a", tmp_path / "b"], 1)
    with pytest.raises(mp.MetaPropertiesError, match="has no meta.properties: format it first"):
        mp.verify_dirs([tmp_path / "a", tmp_path / "c"], 1, require_formatted=True)
    assert mp.verify_dirs([tmp_path / "a", tmp_path / "c"], 1) == CLUSTER  # ZooKeeper mode writes its own


def test_storage_cli_random_uuid_format_and_info(tmp_path):
    run = CliRunner().invoke
    out = run(kafkalite, ["storage", "random-uuid"])
    assert out.exit_code == 0 and mp.parse_uuid(out.output.strip())
    cid = out.output.strip()
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"process.roles=broker,controller\nnode.id=4\nlog.dirs={tmp_path / 'l1'},{tmp_path / 'l2'}\n"
                   f"metadata.log.dir={tmp_path / 'meta'}\n")  # fmt: skip
    out = run(kafkalite, ["storage", "format", "-t", cid, "-c", str(cfg)])
    assert out.exit_code == 0, out.output
    assert out.output.count("formatted ") == 3
    again = run(kafkalite, ["storage", "format", "--cluster-id", cid, "--config", str(cfg)])
    assert again.exit_code != 0 and "already formatted" in again.output
    skip = run(kafkalite, ["storage", "format", "-t", cid, "-c", str(cfg), "--ignore-formatted"])
    assert skip.exit_code == 0 and "already formatted" in skip.output
    info = run(kafkalite, ["storage", "info", "-c", str(cfg)])
    assert info.exit_code == 0 and info.output.count(f"cluster.id={cid}") == 3 and "node.id=4" in info.output
    bad = run(kafkalite, ["storage", "format", "-t", "nope", "-c", str(cfg)])
    assert bad.exit_code != 0 and "'nope' is not a valid Kafka Uuid" in bad.output
    cfg.write_text("log.dirs=/tmp/x\n")
    noid = run(kafkalite, ["storage", "format", "-t", cid, "-c", str(cfg)])
    assert noid.exit_code != 0 and "neither node.id nor broker.id" in noid.output


def test_a_locking_broker_writes_version_0_and_refuses_another_brokers_dir(tmp_path):
    with Cluster(1, seed=1, dir=tmp_path, lock_log_dirs=True):
        pass
    meta = mp.read(tmp_path / "broker-1")
    assert meta == mp.MetaProperties(mp.ZK_VERSION, 1, "kafkalite")
    mp.write(tmp_path / "broker-1", mp.MetaProperties(mp.ZK_VERSION, 7, "kafkalite"))
    with pytest.raises(mp.InconsistentNodeIdError, match="belongs to node 7, but this node's id is 1"):
        Cluster(1, seed=2, dir=tmp_path, lock_log_dirs=True)
    mp.write(tmp_path / "broker-1", mp.MetaProperties(mp.KRAFT_VERSION, 1, CLUSTER))
    with pytest.raises(mp.InconsistentClusterIdError, match=f"belongs to cluster {CLUSTER}"):
        Cluster(1, seed=3, dir=tmp_path, lock_log_dirs=True)
