"""Print the contents of segment files, in the format of Kafka's ``kafka-dump-log.sh``.

The same field names as Kafka's DumpLogSegments tool so that output can be compared side by side:
one line per batch for a ``.log`` file (plus one ``| offset: ...`` line per record with
``--deep-iteration`` or ``--print-data-log``), one line per entry for ``.index`` and ``.timeindex``, one
line per producer for a producer-state ``.snapshot``.
Damage is reported as a line naming the byte position, never as a traceback.
``offsets_decoder`` (Kafka's ``--offsets-decoder``) reads the records as ``__consumer_offsets`` keys and values
and prints them decoded (offset commits and group metadata, ``<DELETE>`` for a tombstone);
``cluster_metadata_decoder`` (Kafka's ``--cluster-metadata-decoder``) reads them as KRaft metadata records.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from kafkalite.errors import KafkaError
from kafkalite.protocol.offsets_schema import format_record
from kafkalite.records import BatchHeader, RecordBatch, parse_control_record, validate_batch
from kafkalite.storage.producer_state import decode_snapshot
from kafkalite.storage.transaction_index import ENTRY_SIZE, read_txn_index

INT32_MAX = 2**31 - 1
LOG_OVERHEAD = 12  # base offset int64 + batch length int32: the part of a batch outside batch_length
MIN_BATCH_SIZE = 61  # a v2 batch header with zero records

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_TS_NAMES = {0: "CreateTime", 1: "LogAppendTime"}

Write = Callable[[str], None]


@contextmanager
def _mapped(path: Path):
    """The file's bytes without reading a 1 GiB segment into memory."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            yield m


def _base_offset(path: Path) -> int | None:
    return int(path.stem) if path.stem.isdigit() else None


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _seq_add(base: int, delta: int) -> int:
    """Producer sequence numbers wrap from int32 max to 0."""
    if base < 0:
        return -1
    return base + delta if base <= INT32_MAX - delta else delta - (INT32_MAX - base) - 1


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def dump(
    path: str | Path,
    *,
    print_data_log: bool = False,
    deep_iteration: bool = False,
    offsets_decoder: bool = False,
    cluster_metadata_decoder: bool = False,
    write: Write = print,
) -> int:
    """Dump one ``.log`` (or KRaft ``.checkpoint``), ``.index`` or ``.timeindex`` file through ``write``; returns problems found."""
    path = Path(path)
    write(f"Dumping {path}")
    suffix = path.suffix
    if suffix in (".log", ".checkpoint"):  # a KRaft snapshot is record batches too (KIP-630)
        return dump_log_segment(
            path,
            print_data_log=print_data_log,
            deep_iteration=deep_iteration,
            offsets_decoder=offsets_decoder,
            cluster_metadata_decoder=cluster_metadata_decoder,
            write=write,
        )
    if suffix == ".index":
        return dump_offset_index(path, write=write)
    if suffix == ".timeindex":
        return dump_time_index(path, write=write)
    if suffix == ".snapshot":
        return dump_producer_snapshot(path, write=write)
    if suffix == ".txnindex":
        return dump_txn_index(path, write=write)
    write(
        f"Ignoring unknown file {path}: expected a .log, .index, .timeindex, .snapshot, .txnindex or "
        ".checkpoint file"
    )
    return 1


def dump_txn_index(path: str | Path, *, write: Write = print) -> int:
    """One line per aborted transaction of a ``.txnindex`` file, as Kafka's tool prints it."""
    path = Path(path)
    try:
        entries = read_txn_index(path)
    except KafkaError as e:
        write(f"Corrupt transaction index {path.name}: {e}")
        return 1
    for e in entries:
        write(
            f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} "
            f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"
        )
    torn = path.stat().st_size % ENTRY_SIZE
    if torn:
        write(f"Found {torn} invalid bytes at the end of {path.name}: not a whole {ENTRY_SIZE}-byte entry")
        return 1
    return 0


def dump_producer_snapshot(path: str | Path, *, write: Write = print) -> int:
    """One line per producer of a ``.snapshot`` file (producer state), as Kafka's tool prints it."""
    path = Path(path)
    try:
        entries = decode_snapshot(path.read_bytes(), path.name)
    except KafkaError as e:
        write(f"Corrupt producer snapshot {path.name}: {e}")
        return 1
    for e in entries:
        txn = "OptionalLong.empty" if e.txn_first_offset < 0 else f"OptionalLong[{e.txn_first_offset}]"
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.last_timestamp} "
        )
        if e.batches:
            b = e.batches[-1]
            line += (
                f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {b.timestamp}"
            )
        write(line)
    return 0


def batch_line(pos: int, h, valid: bool) -> str:
    """The one-line summary Kafka's tool prints for a batch header."""
    last_seq = _seq_add(h.base_sequence, h.last_offset_delta)
    ts_name = _TS_NAMES.get(int(h.timestamp_type), "CreateTime")
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {last_seq} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"position: {pos} {ts_name}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {_CODECS.get(int(h.compression), str(int(h.compression)))} "
        f"crc: {h.crc & 0xFFFFFFFF} isvalid: {_bool(valid)}"
    )


def _control_text(rec) -> str:
    from kafkalite.records.control import ControlRecordType, control_type

    try:
        kind = control_type(rec.key)
    except KafkaError as e:
        return f" controlRecord: unreadable ({e})"
    if kind in (ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.SNAPSHOT_FOOTER):  # a KRaft snapshot
        value = rec.value or b""
        if len(value) < (10 if kind == ControlRecordType.SNAPSHOT_HEADER else 2):
            return f" {kind.name}: unreadable"
        if kind == ControlRecordType.SNAPSHOT_FOOTER:
            return f" SnapshotFooter: version: {struct.unpack_from('>h', value)[0]}"
        version, last_ts = struct.unpack_from(">hq", value)
        return f" SnapshotHeader: version: {version} lastContainedLogTimestamp: {last_ts}"
    try:
        marker = parse_control_record(rec.key, rec.value)
    except KafkaError as e:  # a damaged marker is worth showing, not worth a traceback
        return f" controlRecord: unreadable ({e})"
    if marker.type.name == "LEADER_CHANGE":  # a KRaft epoch's first batch: who leads, over which voters
        from kafkalite.raft.metadata_log import parse_leader_change

        try:
            leader, voters = parse_leader_change(rec.value or b"")
        except struct.error:
            return " LeaderChange: unreadable"
        return f" LeaderChange: leader: {leader} voters: {list(voters)}"
    return f" endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"


def _offsets_text(rec) -> str:
    try:
        return " " + format_record(rec.key, rec.value)
    except KafkaError as e:  # not an offsets record (or damaged): say so and go on
        return f" unreadable as __consumer_offsets data ({e})"


def _metadata_text(rec) -> str:
    from kafkalite.metadata.serde import MetadataParseError, deserialize  # a tool: import only when asked

    try:
        record, version = deserialize(rec.value or b"")
    except MetadataParseError as e:
        return f" unreadable as a metadata record ({e})"
    return f" payload: {type(record).__name__}(v{version}) {record!r}"


def record_line(
    batch, rec, print_data_log: bool, offsets_decoder: bool = False, metadata_decoder: bool = False
) -> str:
    h = batch.header
    ts_name = _TS_NAMES.get(int(h.timestamp_type), "CreateTime")
    seq = _seq_add(h.base_sequence, rec.offset - h.base_offset)
    header_keys = ",".join(x.key for x in rec.headers)
    line = (
        f"| offset: {rec.offset} {ts_name}: {rec.timestamp} "
        f"keySize: {-1 if rec.key is None else len(rec.key)} "
        f"valueSize: {-1 if rec.value is None else len(rec.value)} "
        f"sequence: {seq} headerKeys: [{header_keys}]"
    )
    if print_data_log or offsets_decoder or metadata_decoder:
        if h.is_control:
            line += _control_text(rec)
        elif metadata_decoder:
            line += _metadata_text(rec)
        elif offsets_decoder:
            line += _offsets_text(rec)
        else:
            if rec.key is not None:
                line += f" key: {_text(rec.key)}"
            if rec.value is not None:
                line += f" payload: {_text(rec.value)}"
    return line


def dump_log_segment(
    path: str | Path,
    *,
    print_data_log: bool = False,
    deep_iteration: bool = False,
    offsets_decoder: bool = False,
    cluster_metadata_decoder: bool = False,
    write: Write = print,
) -> int:
    """One line per batch; with ``deep_iteration``/``print_data_log``/a decoder one more per record."""
    path = Path(path)
    deep = deep_iteration or print_data_log or offsets_decoder or cluster_metadata_decoder
    problems = 0
    base = _base_offset(path)
    if base is not None:
        write(f"Log starting offset: {base}")
    with _mapped(path) as buf:
        size = len(buf)
        pos = 0
        while pos < size:
            left = size - pos
            if left < MIN_BATCH_SIZE:
                write(
                    f"Found {left} invalid bytes at the end of {path.name} (position {pos}): too short for a batch"
                )
                return problems + 1
            try:
                h = BatchHeader.parse(buf, pos)
            except KafkaError as e:
                write(f"Corrupt batch at position {pos} of {path.name}: {e}; nothing after it can be read")
                return problems + 1
            if h.size < MIN_BATCH_SIZE:
                write(
                    f"Corrupt batch at position {pos} of {path.name}: batch length {h.batch_length} is smaller "
                    "than a batch header; nothing after it can be read"
                )
                return problems + 1
            if h.size > left:
                write(
                    f"Found {left} invalid bytes at the end of {path.name} (position {pos}): a batch of "
                    f"{h.size} bytes starts there but only {left} bytes are left (torn write?)"
                )
                return problems + 1
            error = None
            try:
                validate_batch(buf, pos)
            except KafkaError as e:
                error = e
            write(batch_line(pos, h, error is None))
            if error is not None:
                problems += 1
                write(f"Corrupt batch at position {pos} of {path.name}: {error}")
            elif deep:
                try:
                    batch = RecordBatch.decode(buf, pos)
                except KafkaError as e:
                    problems += 1
                    write(f"Corrupt records in batch at position {pos} of {path.name}: {e}")
                else:
                    for rec in batch.records:
                        write(
                            record_line(batch, rec, print_data_log, offsets_decoder, cluster_metadata_decoder)
                        )
            pos += h.size
    return problems


def _index_entries(path: Path, entry_size: int, fmt: str, write: Write) -> tuple[list[tuple[int, int]], int]:
    data = path.read_bytes()
    whole = len(data) - len(data) % entry_size
    entries = []
    for i, (a, b) in enumerate(struct.iter_unpack(fmt, data[:whole])):
        # An active index is preallocated with zeros; the first all-zero entry after the first marks its end.
        if i > 0 and a == 0 and b == 0:
            break
        entries.append((a, b))
    problems = 0
    if whole != len(data):
        problems += 1
        write(
            f"Found {len(data) - whole} invalid bytes at the end of {path.name} (position {whole}): "
            f"not a whole {entry_size}-byte entry"
        )
    return entries, problems


def dump_offset_index(path: str | Path, *, write: Write = print) -> int:
    """``offset: N position: P`` per entry; checks each entry against the segment's .log if present."""
    path = Path(path)
    base = _base_offset(path) or 0
    entries, problems = _index_entries(path, 8, ">ii", write)
    log_path = path.with_suffix(".log")
    checker = _batch_at(log_path) if log_path.exists() else None
    for rel, position in entries:
        offset = base + rel
        write(f"offset: {offset} position: {position}")
        if checker is not None:
            found = checker(position)
            if found is None:
                problems += 1
                write(f"Index entry offset: {offset} position: {position}: no batch starts at that position")
            elif not found[0] <= offset <= found[1]:
                problems += 1
                write(
                    f"Index offset mismatch at position {position}: index says {offset}, the batch there "
                    f"holds offsets {found[0]}..{found[1]}"
                )
    return problems


def _batch_at(log_path: Path):
    data = log_path.read_bytes()

    def lookup(position: int) -> tuple[int, int] | None:
        try:
            h = BatchHeader.parse(data, position)
        except (KafkaError, IndexError, struct.error):
            return None
        return h.base_offset, h.last_offset

    return lookup


def dump_time_index(path: str | Path, *, write: Write = print) -> int:
    """``timestamp: T offset: O`` per entry; flags timestamps that go backwards."""
    path = Path(path)
    base = _base_offset(path) or 0
    entries, problems = _index_entries(path, 12, ">qi", write)
    last_ts = None
    for ts, rel in entries:
        write(f"timestamp: {ts} offset: {base + rel}")
        if last_ts is not None and ts < last_ts:
            problems += 1
            write(f"Time index timestamp {ts} is smaller than the previous entry's {last_ts}")
        last_ts = ts
    return problems
