"""The coordination store on disk (``store.snapshot``): every acknowledged write is in the file first, a
cluster built again on it has its topics, configs, ACLs, SCRAM users and producer-id block back, and a
file that cannot be read is refused with the reason rather than replaced by empty metadata."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.clock import ManualClock
from kafkalite.coordination.snapshot import (
    SNAPSHOT_FILE,
    StoreSnapshotError,
    keep_snapshot,
    load_snapshot,
    save_snapshot,
)
from kafkalite.coordination.store import CoordinationStore, NoNode
from kafkalite.coordination.zk_node import ConnectionLossError
from kafkalite.host.cluster import Cluster
from kafkalite.records.batch import iter_batches


def tree(store: CoordinationStore) -> dict:
    """Persistent znodes: path -> (data, version, cversion, czxid, mzxid)."""
    return {
        p: (d, s.version, s.cversion, s.czxid, s.mzxid)
        for p, (d, s) in store.dump().items()
        if not s.ephemeral_owner
    }


def small_store() -> CoordinationStore:
    store = CoordinationStore(ManualClock())
    session = store.connect(6000)
    store.create("/brokers/topics/t", b'{"partitions":{"0":[1]}}', make_parents=True)
    store.create("/bin", bytes(range(256)))  # not UTF-8: kept as base64
    store.create("/brokers/ids/1", b"me", ephemeral=True, session=session, make_parents=True)
    store.set("/brokers/topics/t", b"v2")
    return store


def test_every_acknowledged_write_is_on_disk_before_it_returns(tmp_path: Path) -> None:
    store = CoordinationStore(ManualClock())
    assert not keep_snapshot(store, tmp_path / "store")  # nothing yet: starts empty, creates the dir
    path = tmp_path / "store" / SNAPSHOT_FILE
    store.create("/config/topics/t", b'{"version":1,"config":{}}', make_parents=True)
    store.create("/bin", bytes(range(256)))
    store.set("/bin", b"\xff\x00")
    on_disk = CoordinationStore(ManualClock())
    assert load_snapshot(on_disk, path)
    assert tree(on_disk) == tree(store) and on_disk.zxid == store.zxid
    assert on_disk.get("/bin")[0] == b"\xff\x00"
    # a second store on the same directory loads it, and goes on from there
    again = CoordinationStore(ManualClock())
    assert keep_snapshot(again, tmp_path / "store")
    again.delete("/bin")
    fresh = CoordinationStore(ManualClock())
    load_snapshot(fresh, path)
    with pytest.raises(NoNode):
        fresh.get("/bin")


def test_a_write_that_cannot_be_made_durable_has_no_effect(tmp_path: Path) -> None:
    store = CoordinationStore(ManualClock())
    keep_snapshot(store, tmp_path / "store")
    store.create("/a", b"1")
    before, zxid = tree(store), store.zxid
    (tmp_path / "store").rename(tmp_path / "gone")  # the snapshot's directory vanishes
    with pytest.raises(ConnectionLossError, match="cannot write"):
        store.set("/a", b"2")
    with pytest.raises(ConnectionLossError):
        store.create("/b", b"")
    assert tree(store) == before and store.zxid == zxid  # rolled back, as ZooKeeper never applied it
    (tmp_path / "gone").rename(tmp_path / "store")
    store.set("/a", b"2")
    assert store.get("/a")[0] == b"2"


def test_the_snapshot_keeps_persistent_znodes_only(tmp_path: Path) -> None:
    store = small_store()
    save_snapshot(store, tmp_path / SNAPSHOT_FILE)
    again = CoordinationStore(ManualClock())
    assert load_snapshot(again, tmp_path / SNAPSHOT_FILE)
    assert tree(again) == tree(store)
    assert again.get_children("/brokers/ids") == [] and again.get("/bin")[0] == bytes(range(256))
    assert again.connect(6000) > max(store.sessions())  # an old session id is never handed out again


def test_a_snapshot_in_the_old_pickled_format_still_loads(tmp_path: Path) -> None:
    store = small_store()
    nodes = {p: (n.data, n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.version, n.cversion)
             for p, n in store._nodes.items() if not n.ephemeral_owner}  # fmt: skip
    old = {"zxid": store.zxid, "next_session": store._next_session, "nodes": nodes}
    (tmp_path / SNAPSHOT_FILE).write_bytes(pickle.dumps(old, protocol=pickle.HIGHEST_PROTOCOL))
    again = CoordinationStore(ManualClock())
    assert load_snapshot(again, tmp_path / SNAPSHOT_FILE)
    assert tree(again) == tree(store)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[: len(b) // 2], "torn write"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "checksum mismatch"),
        (lambda b: b"", "does not start with"),
        (lambda b: b"{}", "does not start with"),
        (lambda b: b.replace(b" 1 crc32", b" 9 crc32", 1), "format version 9"),
        (lambda b: b.split(b"\n")[0], "malformed header"),
    ],
)
def test_a_damaged_snapshot_is_refused_naming_the_file_and_the_fault(tmp_path: Path, damage, reason) -> None:
    path = tmp_path / SNAPSHOT_FILE
    save_snapshot(small_store(), path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(StoreSnapshotError, match=reason) as err:
        load_snapshot(CoordinationStore(ManualClock()), path)
    assert str(path) in str(err.value) and "will not start without it" in str(err.value)


def test_a_snapshot_that_is_not_a_tree_is_refused(tmp_path: Path) -> None:
    import json
    import zlib

    path = tmp_path / SNAPSHOT_FILE
    node = {
        "data": "",
        "czxid": 1,
        "mzxid": 1,
        "pzxid": 1,
        "ctime": 0,
        "mtime": 0,
        "version": 0,
        "cversion": 0,
    }
    for nodes, reason in (({"/a/b": node, "/": node}, "no parent /a"), ({"/a": node}, "no root"),
                          ({"/": node, "a": node}, "must be absolute")):  # fmt: skip
        body = json.dumps({"zxid": 1, "next_session": 1, "nodes": nodes}).encode()
        path.write_bytes(
            b"kafkalite-store-snapshot 1 crc32=%08x bytes=%d\n" % (zlib.crc32(body), len(body)) + body
        )
        with pytest.raises(StoreSnapshotError, match=reason):
            load_snapshot(CoordinationStore(ManualClock()), path)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_flipped_or_cut_byte_is_refused_or_harmless(tmp_path_factory, data) -> None:
    """Damage anywhere in the file is either caught (StoreSnapshotError) or changes nothing that was
    stored (an upper-case hex digit in the header): never a silently different tree."""
    path = tmp_path_factory.mktemp("snap") / SNAPSHOT_FILE
    store = small_store()
    save_snapshot(store, path)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), "cut"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), "length")]
    else:
        i = data.draw(st.integers(0, len(raw) - 1), "position")
        raw[i] ^= data.draw(st.integers(1, 255), "xor")
    path.write_bytes(bytes(raw))
    again = CoordinationStore(ManualClock())
    try:
        load_snapshot(again, path)
    except StoreSnapshotError:
        return
    assert tree(again) == tree(store) and again.zxid == store.zxid


# ------------------------------------------------------------------------------ a whole cluster


def producer_ids(log_dir: Path) -> set[int]:
    return {h.producer_id for f in sorted(log_dir.glob("*.log")) for _, h in iter_batches(f.read_bytes())}


def test_a_cluster_built_again_on_its_directories_keeps_its_metadata(tmp_path: Path) -> None:
    from kafkalite.security.acl import (
        AccessControlEntry,
        AclBinding,
        AclBindingFilter,
        Operation,
        PatternType,
        Permission,
        ResourcePattern,
        ResourceType,
    )
    from kafkalite.security.admin import add_scram_user, scram_credential

    config = {"authorizer.class.name": "kafkalite", "super.users": "User:ANONYMOUS"}
    alice = AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                       AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW))  # fmt: skip
    acked = 0
    for run in range(4):  # the first start, then 3 restarts
        c = Cluster(brokers=1, dir=tmp_path, store_dir=tmp_path / "store", config=config)
        try:
            if run == 0:
                c.create_topic("t", 1, 1, config={"retention.ms": 123456})
                c.brokers[1].authorizer.create_acls([alice])
                add_scram_user(c.store, "alice", "alice-secret")
            else:
                assert c.partitions_for("t") == [0], f"run {run}: the topic is gone"
                assert c.describe_configs("t")["retention.ms"].value == "123456"
                assert c.brokers[1].authorizer.describe_acls(AclBindingFilter()) == [alice]
                assert scram_credential(c.store, "SCRAM-SHA-256", "alice") is not None
            p = c.producer(acks="all", enable_idempotence=True, linger_ms=0)
            futures = [p.send("t", b"run %d #%d" % (run, i), partition=0) for i in range(10)]
            p.flush()
            assert c.run_until(lambda fs=futures: all(f.done() for f in fs), 10_000)
            acked += sum(f.exception() is None for f in futures)
            assert c.high_watermark("t", 0) == acked == 10 * (run + 1)
        finally:
            c.close()
    pids = producer_ids(tmp_path / "broker-1" / "t-0")
    assert len(pids) == 4, f"a producer id was handed out again after a restart: {sorted(pids)}"


def test_a_cluster_refuses_a_store_directory_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / SNAPSHOT_FILE).write_bytes(b"kafkalite-store-snapshot 1 crc32=00000000 bytes=2\n{}")
    with pytest.raises(StoreSnapshotError, match="checksum mismatch"):
        Cluster(brokers=1, dir=tmp_path, store_dir=tmp_path / "store")
