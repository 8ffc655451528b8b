"""The coordination store on disk: a snapshot of its persistent znodes, rewritten on every change.

ZooKeeper keeps its data tree in ``dataDir`` (a transaction log and snapshots), so a restarted ensemble
still holds every topic, topic config, ACL, SCRAM credential, the producer-id block and the controller
epoch; only sessions and their ephemeral znodes (broker registrations, ``/controller``) are gone, and the
brokers register again. kafkalite's store does the same with one file, ``store.snapshot``: the znodes
and counters, written to a temporary file, fsynced and renamed over the old one (then the directory is
fsynced), before the write that changed them is acknowledged (``keep_snapshot``).

The file is one header line, ``kafkalite-store-snapshot 1 crc32=<hex> bytes=<n>``, then a JSON body
(znode data as text when it is UTF-8, else base64). A file that does not match its header or does not
describe a tree raises ``StoreSnapshotError`` naming the file and the fault: a broker must not start
with empty metadata beside logs whose topics that metadata named.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from pathlib import Path
from typing import Any

from kafkalite.coordination import store as store_mod
from kafkalite.coordination.store import CoordinationStore
from kafkalite.coordination.zk_node import ConnectionLossError
from kafkalite.net.bridge import loads

SNAPSHOT_FILE = "store.snapshot"
_MAGIC = b"kafkalite-store-snapshot"
_VERSION = 1
_LOST = (
    "it holds the cluster's topics, topic configs, ACLs, SCRAM users and producer ids, so kafkalite will "
    "not start without it; restore it, or move it away to start with no metadata (the partitions in the "
    "log directories then belong to no topic)"
)


class StoreSnapshotError(Exception):
    """A snapshot file exists but cannot be read back; the message names the file and what is wrong."""


def save_snapshot(store: CoordinationStore, path: Path, zxid: int | None = None) -> None:
    """Write the persistent znodes and counters of ``store`` to ``path`` atomically and durably.
    ``zxid``: the transaction being committed (default: the store's last committed one)."""
    nodes = {}
    for p, n in store._nodes.items():
        if n.ephemeral_owner:
            continue
        try:
            data: dict[str, Any] = {"data": n.data.decode("utf-8")}
        except UnicodeDecodeError:
            data = {"data64": base64.b64encode(n.data).decode("ascii")}
        nodes[p] = {**data, "czxid": n.czxid, "mzxid": n.mzxid, "pzxid": n.pzxid, "ctime": n.ctime,
                    "mtime": n.mtime, "version": n.version, "cversion": n.cversion}  # fmt: skip
    doc = {"zxid": store.zxid if zxid is None else zxid, "next_session": store._next_session, "nodes": nodes}
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    header = b"%s %d crc32=%08x bytes=%d\n" % (_MAGIC, _VERSION, zlib.crc32(body), len(body))
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(header + body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)  # the rename itself must survive a crash
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_snapshot(store: CoordinationStore, path: Path) -> bool:
    """Restore what ``save_snapshot`` wrote into ``store``; False when there is no snapshot yet.
    Raises ``StoreSnapshotError`` when the file is there but damaged or not a snapshot."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as e:
        raise StoreSnapshotError(
            f"{path}: cannot read the coordination store's snapshot ({e}); {_LOST}"
        ) from e
    try:
        doc = _decode(raw)
        nodes, zxid, next_session = _tree(doc)
    except (ValueError, KeyError, TypeError) as e:
        raise StoreSnapshotError(
            f"{path}: the coordination store's snapshot is damaged ({e}); {_LOST}"
        ) from e
    store._nodes = nodes
    store._zxid = zxid
    store._next_session = max(store._next_session, next_session + 1000)  # old sessions stay dead
    return True


def keep_snapshot(store: CoordinationStore, directory: Path) -> bool:
    """Load ``directory/store.snapshot`` into ``store`` if it is there (creating the directory), then
    rewrite it before every write the store acknowledges. Returns whether a snapshot was loaded.

    A snapshot that cannot be written fails the write (the store rolls it back) with ZooKeeper's
    CONNECTIONLOSS, as a client of a server that cannot log a transaction sees: nothing was changed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SNAPSHOT_FILE
    loaded = load_snapshot(store, path)

    def before_commit(zxid: int) -> None:
        try:
            save_snapshot(store, path, zxid)
        except OSError as e:
            raise ConnectionLossError(f"the coordination store cannot write {path}: {e}") from e

    store.before_commit = before_commit
    return loaded


def _decode(raw: bytes) -> dict:
    if not raw.startswith(_MAGIC):
        if raw[:1] == b"\x80":  # what kafkalite wrote before this format: a pickle of plain data
            try:
                return _from_legacy(loads(raw))
            except Exception as e:  # noqa: BLE001 - any unpickling fault means the same: unreadable
                raise ValueError(f"an old-format snapshot that does not unpickle: {e}") from None
        raise ValueError(f"it does not start with {_MAGIC.decode()!r}: {raw[:40]!r}")
    line, sep, body = raw.partition(b"\n")
    fields = line.split()
    if (
        not sep
        or len(fields) != 4
        or not fields[2].startswith(b"crc32=")
        or not fields[3].startswith(b"bytes=")
    ):
        raise ValueError(f"a malformed header line {line[:80]!r}")
    if int(fields[1]) != _VERSION:
        raise ValueError(f"format version {int(fields[1])}, this kafkalite reads version {_VERSION}")
    size, crc = int(fields[3][6:]), int(fields[2][6:], 16)
    if len(body) != size:
        raise ValueError(f"{len(body)} bytes after the header, the header says {size} (a torn write?)")
    if zlib.crc32(body) != crc:
        raise ValueError(f"checksum mismatch: stored crc32 {crc:08x}, computed {zlib.crc32(body):08x}")
    return json.loads(body)


def _from_legacy(snap: dict) -> dict:
    keys = ("czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion")
    nodes = {}
    for p, (data, *rest) in snap["nodes"].items():
        nodes[p] = {"data64": base64.b64encode(data).decode("ascii"), **dict(zip(keys, rest, strict=True))}
    return {"zxid": snap["zxid"], "next_session": snap["next_session"], "nodes": nodes}


def _tree(doc: dict) -> tuple[dict[str, store_mod._Node], int, int]:
    nodes: dict[str, store_mod._Node] = {}
    for p, n in doc["nodes"].items():
        store_mod.validate_path(p)
        data = n["data"].encode("utf-8") if "data" in n else base64.b64decode(n["data64"], validate=True)
        nodes[p] = store_mod._Node(data, int(n["czxid"]), int(n["mzxid"]), int(n["pzxid"]), int(n["ctime"]),
                                   int(n["mtime"]), int(n["version"]), int(n["cversion"]))  # fmt: skip
    if "/" not in nodes:
        raise ValueError("there is no root znode")
    for p in sorted(nodes):
        if p != "/":
            parent = store_mod.parent_of(p)
            if parent not in nodes:
                raise ValueError(f"znode {p} has no parent {parent}")
            nodes[parent].children.add(p.rsplit("/", 1)[1])
    return nodes, int(doc["zxid"]), int(doc["next_session"])


__all__ = ["SNAPSHOT_FILE", "StoreSnapshotError", "keep_snapshot", "load_snapshot", "save_snapshot"]
