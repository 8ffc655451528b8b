"""The aborted transaction index: one ``<base offset>.txnindex`` file per segment, in Kafka's layout.

Each entry is 34 bytes: version int16 (0), producer id int64, first offset int64, last offset int64 (the
ABORT marker's offset) and the last stable offset int64 once the transaction ended. An entry goes into
the file of the segment that holds its marker. A read_committed fetch asks which aborted transactions
overlap the range it returns, and the consumer drops those producers' records in those ranges.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from kafkalite.errors import CorruptRecordError
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_path(dir: Path, base_offset: int) -> Path:
    return dir / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def read_txn_index(path: Path) -> list[AbortedTxn]:
    """Every entry of one file; a torn last entry (crash mid-write) is ignored, a bad version is not."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != VERSION:
            raise CorruptRecordError(f"{path.name}: entry at byte {pos} has unknown version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def append_txn_index(path: Path, entry: AbortedTxn, file_ops: FileOps = OS_FILE_OPS) -> None:
    file_ops.append_file(path, _ENTRY.pack(VERSION, *entry))


def write_txn_index(path: Path, entries: list[AbortedTxn], file_ops: FileOps = OS_FILE_OPS) -> None:
    """Replace the file with ``entries`` (after a truncation); no entries, no file."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    file_ops.write_file(tmp, b"".join(_ENTRY.pack(VERSION, *e) for e in entries))
    file_ops.replace(tmp, path)
