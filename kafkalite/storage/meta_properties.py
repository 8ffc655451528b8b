"""``meta.properties``: which cluster and which node a log directory belongs to (Kafka's ``MetaProperties``).

Kafka writes this small properties file at the top of every log directory. Version 0 is the ZooKeeper
era's (``broker.id``, and ``cluster.id`` once the broker learnt it from ZooKeeper); version 1 is KRaft's
(``node.id`` and ``cluster.id``, both required), written before the node ever starts by
``kafka-storage format`` (here ``kafkalite storage format``). Since KIP-858 each directory also carries its
own ``directory.id``. A node checks every directory at start: all must name the same cluster and its own
id, so a disk moved to the wrong machine, or a node pointed at another cluster's data, stops with a clear
error instead of merging two clusters' logs.

Cluster and directory ids are Kafka ``Uuid`` strings: 16 random bytes in URL-safe base64 without padding
(22 characters).
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

META_PROPERTIES = "meta.properties"
ZK_VERSION = 0
KRAFT_VERSION = 1

__all__ = [
    "KRAFT_VERSION",
    "META_PROPERTIES",
    "ZK_VERSION",
    "InconsistentClusterIdError",
    "InconsistentNodeIdError",
    "MetaProperties",
    "MetaPropertiesError",
    "format_dirs",
    "parse_uuid",
    "random_uuid",
    "read",
    "verify_dirs",
    "write",
]


class MetaPropertiesError(RuntimeError):
    """A log directory's ``meta.properties`` is missing, unreadable or wrong; the node must not start.
    Not a protocol error (Kafka throws at startup), so it carries no Kafka error code."""


class InconsistentClusterIdError(MetaPropertiesError):
    """A directory belongs to another cluster than the one this node is joining (Kafka's
    ``InconsistentClusterIdException``)."""


class InconsistentNodeIdError(MetaPropertiesError):
    """A directory belongs to another node id (Kafka's ``InconsistentBrokerIdException``)."""


# ------------------------------------------------------------------------------------------------- Uuid
_ZERO = bytes(16)
_METADATA_TOPIC_ID = bytes(15) + b"\x01"  # Uuid(0, 1), reserved by Kafka for __cluster_metadata


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def random_uuid(token_bytes: Callable[[int], bytes] = secrets.token_bytes) -> str:
    """A new cluster or directory id, as ``kafka-storage random-uuid`` prints one. Like Kafka's
    ``Uuid.randomUuid`` it never returns the two reserved ids, nor a string starting with ``-`` (it would
    read as an option on a command line)."""
    while True:
        raw = token_bytes(16)
        text = _encode(raw)
        if raw not in (_ZERO, _METADATA_TOPIC_ID) and not text.startswith("-"):
            return text


def parse_uuid(text: str, what: str = "cluster id") -> str:
    """``text`` if it is a Kafka Uuid string (22 URL-safe base64 characters for 16 bytes), else an error."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as e:
        raise MetaPropertiesError(f"{what} {text!r} is not a valid Kafka Uuid: {e}") from None
    if len(text) != 22 or len(raw) != 16 or _encode(raw) != text:
        raise MetaPropertiesError(
            f"{what} {text!r} is not a valid Kafka Uuid: 22 URL-safe base64 characters encoding 16 bytes "
            "(make one with `kafkalite storage random-uuid`)"
        )
    return text


# ------------------------------------------------------------------------------------------ the file
@dataclass(frozen=True, slots=True)
class MetaProperties:
    """One directory's identity. ``node_id`` is ``broker.id`` in version 0 and ``node.id`` in version 1."""

    version: int
    node_id: int
    cluster_id: str | None = None
    directory_id: str | None = None

    def __post_init__(self) -> None:
        if self.version not in (ZK_VERSION, KRAFT_VERSION):
            raise MetaPropertiesError(f"meta.properties version {self.version} is not 0 or 1")
        if self.version == KRAFT_VERSION and self.cluster_id is None:
            raise MetaPropertiesError("meta.properties version 1 requires cluster.id")
        if self.node_id < 0:
            raise MetaPropertiesError(f"meta.properties has a negative node id {self.node_id}")

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        props["node.id" if self.version == KRAFT_VERSION else "broker.id"] = str(self.node_id)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    @classmethod
    def from_properties(cls, props: dict[str, str], where: str = "meta.properties") -> MetaProperties:
        try:
            version = int(props["version"])
            if version not in (ZK_VERSION, KRAFT_VERSION):
                raise MetaPropertiesError(f"{where} has version {version}, not 0 or 1")
            id_key = "node.id" if version == KRAFT_VERSION else "broker.id"
            return cls(version, int(props[id_key]), props.get("cluster.id"), props.get("directory.id"))
        except KeyError as e:
            raise MetaPropertiesError(f"{where} has no {e.args[0]}") from None
        except ValueError as e:
            raise MetaPropertiesError(f"{where}: {e}") from None


def _parse(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        props[key.strip()] = value.strip()
    return props


def read(directory: str | Path) -> MetaProperties | None:
    """The directory's ``meta.properties``, or None if it has none (an unformatted directory)."""
    path = Path(directory) / META_PROPERTIES
    try:
        text = path.read_text(encoding="latin-1")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MetaPropertiesError(f"cannot read {path}: {e}") from None
    return MetaProperties.from_properties(_parse(text), str(path))


def write(directory: str | Path, meta: MetaProperties) -> Path:
    """Write ``meta.properties`` durably: a temporary file, fsync, rename over, fsync the directory, so a
    crash leaves either the old file or the new one, never a torn one."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path, tmp = d / META_PROPERTIES, d / (META_PROPERTIES + ".tmp")
    body = "#\n# written by kafkalite storage; do not edit\n" + "".join(
        f"{k}={v}\n" for k, v in sorted(meta.to_properties().items())
    )
    with open(tmp, "w", encoding="latin-1") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


# ------------------------------------------------------------------------------------ whole nodes
def format_dirs(
    dirs: Iterable[str | Path],
    cluster_id: str,
    node_id: int,
    *,
    ignore_formatted: bool = False,
    new_uuid: Callable[[], str] = random_uuid,
) -> list[Path]:
    """``kafka-storage format``: write a version-1 ``meta.properties`` into each directory (created if
    missing), each with a directory id of its own; returns the directories written.

    A directory that already has one is an error naming it, unless ``ignore_formatted``, in which case it is
    left untouched (and must then belong to this cluster and node). Nothing is written unless every
    directory passes, so a refused format leaves no directory half-done."""
    parse_uuid(cluster_id)
    todo: list[Path] = []
    for d in (Path(x) for x in dirs):
        existing = read(d)
        if existing is None:
            todo.append(d)
        elif not ignore_formatted:
            raise MetaPropertiesError(
                f"log directory {d} is already formatted (cluster {existing.cluster_id}, node "
                f"{existing.node_id}); pass --ignore-formatted to skip it and format the others"
            )
        else:
            _check(d, existing, cluster_id, node_id)
    for d in todo:
        write(d, MetaProperties(KRAFT_VERSION, node_id, cluster_id, new_uuid()))
    return todo


def _check(d: Path, meta: MetaProperties, cluster_id: str | None, node_id: int) -> None:
    if cluster_id is not None and meta.cluster_id is not None and meta.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"log directory {d} belongs to cluster {meta.cluster_id}, not to cluster {cluster_id} that this "
            "node is joining: is the node pointed at the wrong cluster, or the wrong disk?"
        )
    if meta.node_id != node_id:
        raise InconsistentNodeIdError(
            f"log directory {d} belongs to node {meta.node_id}, but this node's id is {node_id}: if the data "
            "moved, configure the id it was written with; for a new node, give it empty directories"
        )


def verify_dirs(
    dirs: Iterable[str | Path],
    node_id: int,
    *,
    cluster_id: str | None = None,
    require_formatted: bool = False,
) -> str | None:
    """Check every directory at node start; returns the cluster id they name (None if none does yet).

    All directories must agree on one cluster id, equal to ``cluster_id`` when given, and name this node.
    With ``require_formatted`` (KRaft) an unformatted directory is an error, as Kafka refuses to start a
    KRaft node before ``kafka-storage format``; ZooKeeper mode writes its version-0 file itself instead."""
    seen: dict[str, Path] = {}
    for d in (Path(x) for x in dirs):
        meta = read(d)
        if meta is None:
            if require_formatted:
                raise MetaPropertiesError(
                    f"log directory {d} has no {META_PROPERTIES}: format it first "
                    "(`kafkalite storage format --cluster-id ID --config FILE`)"
                )
            continue
        _check(d, meta, cluster_id, node_id)
        if meta.cluster_id is not None:
            seen.setdefault(meta.cluster_id, d)
    if len(seen) > 1:
        listed = ", ".join(f"{c} in {d}" for c, d in seen.items())
        raise InconsistentClusterIdError(
            f"this node's log directories belong to different clusters: {listed}"
        )
    return next(iter(seen), cluster_id)
