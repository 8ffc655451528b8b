"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's ``PartitionMetadataFile``,
KIP-516).

Two lines of text, ``version: 0`` and ``topic_id: <id>``, the id in Kafka's ``Uuid`` string form (the 16
bytes in URL-safe base64 without padding, 22 characters). A directory's name only says which topic *name*
it holds; the id says which topic of that name, so a broker that was down while a topic was deleted and
created again can tell its old log from the new topic's. Written once, when the replica learns the id,
the way Kafka's checkpoints are: ``partition.metadata.tmp``, fsync, rename, fsync the directory.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from kafkalite.common.kafka_uuid import uuid_from_str, uuid_to_str
from kafkalite.errors import KafkaStorageError
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0
_SEPARATOR = re.compile(r":\s+")


def encode(topic_id: uuid.UUID) -> bytes:
    """The file's content. Kafka writes no newline after the id; readers accept one."""
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_str(topic_id)}".encode()


def decode(data: bytes, path: str | Path = PARTITION_METADATA_FILE) -> uuid.UUID:
    """The topic id in a ``partition.metadata`` file's content; ``KafkaStorageError`` naming ``path`` and
    what is wrong when it is not one."""

    def bad(why: str) -> KafkaStorageError:
        return KafkaStorageError(f"malformed partition metadata file {path}: {why}")

    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise bad(f"not UTF-8 text ({e})") from None
    if len(lines) < 2:
        raise bad(f"expected a version line and a topic_id line, found {len(lines)} line(s)")
    fields = []
    for line, key in zip(lines[:2], ("version", "topic_id"), strict=True):
        parts = _SEPARATOR.split(line.strip(), maxsplit=1)
        if len(parts) != 2 or parts[0] != key:
            raise bad(f"expected '{key}: <value>', found {line!r}")
        fields.append(parts[1].strip())
    if fields[0] != str(PARTITION_METADATA_VERSION):
        raise bad(f"unrecognized version {fields[0]!r} (only {PARTITION_METADATA_VERSION} is known)")
    try:
        return uuid_from_str(fields[1])
    except ValueError as e:
        raise bad(str(e)) from None


class PartitionMetadataFile:
    """The ``partition.metadata`` file of one partition directory."""

    def __init__(self, dir: str | Path, file_ops: FileOps = OS_FILE_OPS) -> None:
        self.path = Path(dir) / PARTITION_METADATA_FILE
        self.file_ops = file_ops

    def exists(self) -> bool:
        return self.path.is_file()

    def read(self) -> uuid.UUID | None:
        """The topic id, or None when the directory has no file (a log from before ids, or created
        without one); ``KafkaStorageError`` when the file is there but malformed."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return decode(data, self.path)

    def write(self, topic_id: uuid.UUID) -> None:
        """Record ``topic_id`` durably (temp file, fsync, rename, fsync the directory)."""
        if topic_id.int == 0:
            raise ValueError(f"refusing to write the zero topic id to {self.path}")
        self.file_ops.replace_atomically(self.path, encode(topic_id))


__all__ = [
    "PARTITION_METADATA_FILE",
    "PartitionMetadataFile",
    "decode",
    "encode",
]
