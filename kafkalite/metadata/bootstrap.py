"""``bootstrap.checkpoint``: records a new cluster's first active controller writes before anything else
(Kafka's ``BootstrapMetadata`` and ``BootstrapDirectory``).

``kafkalite storage format --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'`` writes it into
a node's metadata log dir, as ``kafka-storage format --add-scram`` does (KIP-900), so that SCRAM users exist
before any broker starts: over a SASL-only listener nobody could create the first one otherwise. The
controller reads the file at start; when it becomes active on an empty log it writes the
``metadata.version`` feature and then these records, in one batch. A log that has records ignores it.

The file is one record batch (v2, CRC-checked) whose values are framed metadata records
(``MetadataRecordSerde``); Kafka's file is a snapshot, the same batches with a header and a footer. It is
written atomically (temporary file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from kafkalite.common.scram import MECHANISMS, ScramError
from kafkalite.errors import CorruptRecordError
from kafkalite.metadata.controller.scram_control import credential_record
from kafkalite.metadata.records import MetadataRecord, UserScramCredentialRecord
from kafkalite.metadata.serde import MetadataParseError, deserialize, serialize
from kafkalite.records.batch import build_batch, decode_batch_tuples
from kafkalite.storage.file_ops import OS_FILE_OPS

BOOTSTRAP_FILE = "bootstrap.checkpoint"


class BootstrapError(ValueError):
    """An unreadable bootstrap file or a bad ``--add-scram`` argument; the text says which."""


def write_bootstrap(directory: str | Path, records: Sequence[MetadataRecord]) -> Path:
    """Write ``records`` as ``directory``'s bootstrap file (replacing one that is there)."""
    path = Path(directory) / BOOTSTRAP_FILE
    values = [(None, serialize(r)) for r in records]
    OS_FILE_OPS.replace_atomically(path, build_batch(values, timestamp=0) if values else b"")
    return path


def read_bootstrap(directory: str | Path) -> list[MetadataRecord]:
    """The records of ``directory``'s bootstrap file; none when there is no file."""
    path = Path(directory) / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    if not data:
        return []
    try:
        header, rows = decode_batch_tuples(data)
        if header.size != len(data):
            raise BootstrapError(f"{path}: {len(data) - header.size} byte(s) after the batch")
        return [deserialize(row[3])[0] for row in rows]
    except (CorruptRecordError, MetadataParseError) as e:
        raise BootstrapError(f"{path} is unreadable: {e}") from None


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    """``MECHANISM=[name=USER,password=SECRET(,iterations=N)]`` (``kafka-storage format --add-scram``; a
    value may be double-quoted) -> the credential's record, with a random salt."""
    m = re.fullmatch(r"\s*([A-Z0-9-]+)\s*=\s*\[(.*)\]\s*", text)
    if m is None:
        raise BootstrapError(
            f"--add-scram looks like SCRAM-SHA-256=[name=alice,password=alice-secret], got {text!r}"
        )
    mechanism = m.group(1)
    if mechanism not in MECHANISMS:
        raise BootstrapError(
            f"--add-scram: unknown SCRAM mechanism {mechanism} (use {' or '.join(MECHANISMS)})"
        )
    fields: dict[str, str] = {}
    for part in re.findall(r'([a-z]+)=("[^"]*"|[^,]*)', m.group(2)):
        key, value = part
        fields[key] = value[1:-1] if value.startswith('"') else value
    unknown = set(fields) - {"name", "password", "iterations"}
    if unknown:
        raise BootstrapError(f"--add-scram: unknown key(s) {sorted(unknown)} (name, password, iterations)")
    if not fields.get("name") or "password" not in fields:
        raise BootstrapError(f"--add-scram needs name= and password=, got {text!r}")
    try:
        iterations = int(fields.get("iterations", "4096"))
        return credential_record(fields["name"], mechanism, fields["password"], iterations)
    except (ValueError, ScramError) as e:
        raise BootstrapError(f"--add-scram {text!r}: {e}") from None


__all__ = ["BOOTSTRAP_FILE", "BootstrapError", "parse_add_scram", "read_bootstrap", "write_bootstrap"]
