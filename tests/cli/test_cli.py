"""``kafkalite dump-log`` and the CLI wiring."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.records import Compression, build_batch, build_control_batch

T0 = 1_700_000_000_000


def _invoke(*args: str):
    return CliRunner().invoke(kafkalite, list(args), catch_exceptions=False)


@pytest.fixture
def segment(tmp_path) -> Path:
    """A hand-assembled segment: a plain batch, a gzip idempotent batch, a commit marker."""
    b1 = build_batch(
        [(b"abc", b"hello"), (None, b"world", [("h1", b"x"), ("h2", None)])],
        timestamp=T0,
        partition_leader_epoch=0,
    )
    b2 = build_batch(
        [(b"k", None), (b"k2", b"v2")],
        base_offset=2,
        timestamp=[T0 + 5, T0 + 6],
        compression=Compression.GZIP,
        producer_id=7,
        producer_epoch=1,
        base_sequence=2147483647,
        is_transactional=True,
        partition_leader_epoch=0,
    )
    b3 = build_control_batch(True, 7, 1, 3, T0 + 9, base_offset=4, partition_leader_epoch=0)
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b1 + b2 + b3)
    return path


def test_dump_batches(segment):
    result = _invoke("dump-log", str(segment))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    assert len(lines) == 5
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 "
        f"CreateTime: {T0} size: "
    )
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1])
    assert "isvalid: true" in lines[2]
    # sequence numbers wrap at int32 max
    assert "baseSequence: 2147483647 lastSequence: 0 producerId: 7 producerEpoch: 1" in lines[3]
    assert "isTransactional: true" in lines[3] and "compresscodec: gzip" in lines[3]
    assert "isControl: true" in lines[4]
    size0 = int(lines[2].split("size: ")[1].split()[0])
    assert f"position: {size0} " in lines[3]


def test_dump_records_with_data(segment):
    result = _invoke("dump-log", str(segment), "--print-data-log")
    assert result.exit_code == 0, result.output
    records = [x for x in result.output.splitlines() if x.startswith("|")]
    assert records == [
        f"| offset: 0 CreateTime: {T0} keySize: 3 valueSize: 5 sequence: -1 headerKeys: [] key: abc payload: hello",
        f"| offset: 1 CreateTime: {T0} keySize: -1 valueSize: 5 sequence: -1 headerKeys: [h1,h2] payload: world",
        f"| offset: 2 CreateTime: {T0 + 5} keySize: 1 valueSize: -1 sequence: 2147483647 headerKeys: [] key: k",
        f"| offset: 3 CreateTime: {T0 + 6} keySize: 2 valueSize: 2 sequence: 0 headerKeys: [] key: k2 payload: v2",
        f"| offset: 4 CreateTime: {T0 + 9} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 3",
    ]


def test_deep_iteration_without_data(segment):
    result = _invoke("dump-log", str(segment), "--deep-iteration")
    records = [x for x in result.output.splitlines() if x.startswith("|")]
    assert len(records) == 5
    assert not any("payload" in x or "key:" in x for x in records)


def test_corrupt_batch_and_torn_tail(segment):
    data = bytearray(segment.read_bytes())
    data[80] ^= 0xFF  # inside the first batch's records: CRC mismatch
    segment.write_bytes(bytes(data) + data[:30])  # plus a torn partial batch
    result = _invoke("dump-log", str(segment), "--print-data-log")
    assert result.exit_code == 1
    out = result.output
    assert "Traceback" not in out
    assert "isvalid: false" in out
    assert "Corrupt batch at position 0 of" in out and "CRC" in out
    assert f"Found 30 invalid bytes at the end of {segment.name} (position {len(data)})" in out
    assert out.count("isvalid: true") == 2  # the batches after the damaged one are still read


def test_bad_magic_stops_with_position(segment):
    data = bytearray(segment.read_bytes())
    size0 = struct.unpack_from(">i", data, 8)[0] + 12
    data[size0 + 16] = 7  # magic of the second batch
    segment.write_bytes(bytes(data))
    result = _invoke("dump-log", str(segment))
    assert result.exit_code == 1
    assert f"Corrupt batch at position {size0} of {segment.name}" in result.output
    assert "magic" in result.output


def test_dump_index_and_timeindex(segment):
    base = 0
    index = segment.with_suffix(".index")
    # two real entries then preallocated zeros, as an active index looks on disk
    size0 = struct.unpack_from(">i", segment.read_bytes(), 8)[0] + 12
    index.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 3, size0) + bytes(8 * 6))
    timeindex = segment.with_suffix(".timeindex")
    timeindex.write_bytes(struct.pack(">qi", T0, 1) + struct.pack(">qi", T0 + 6, 3) + bytes(12 * 4))
    result = _invoke("dump-log", str(index), str(timeindex))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"Dumping {index}",
        f"offset: {base} position: 0",
        f"offset: {base + 3} position: {size0}",
        f"Dumping {timeindex}",
        f"timestamp: {T0} offset: 1",
        f"timestamp: {T0 + 6} offset: 3",
    ]


def test_index_entry_pointing_nowhere(segment):
    index = segment.with_suffix(".index")
    index.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 13) + b"\x00\x01")
    result = _invoke("dump-log", str(index))
    assert result.exit_code == 1
    assert "offset: 5 position: 13: no batch starts at that position" in result.output
    assert f"Found 2 invalid bytes at the end of {index.name}" in result.output


def test_real_log_segments(tmp_path):
    storage = pytest.importorskip("kafkalite.storage")
    if not hasattr(storage, "Log"):
        pytest.skip("kafkalite.storage.Log is not available yet")
    log = storage.Log.open(tmp_path / "t-0", {"segment.bytes": 1024, "index.interval.bytes": 100})
    try:
        for i in range(40):
            log.append(build_batch([(f"k{i}".encode(), b"x" * 50)], timestamp=T0 + i))
        first = log.segments[0]
        paths = [str(first.log_path), str(first.index_path), str(first.timeindex_path)]
        n_batches = first.next_offset - first.base_offset
    finally:
        log.close()
    result = _invoke("dump-log", *paths, "--print-data-log")
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert sum(x.startswith("baseOffset:") for x in out) == n_batches
    assert sum(x.startswith("| offset:") and "key: k" in x for x in out) == n_batches
    assert any(x.startswith("offset: ") for x in out)  # index entries, each checked against the .log
    assert any(x.startswith("timestamp: ") for x in out)


def test_help_and_version():
    result = _invoke("--help")
    assert "dump-log" in result.output and "bench" in result.output
    assert _invoke("--version").output.startswith("kafkalite ")


def test_unknown_file_type(tmp_path):
    f = tmp_path / "x.txnidx"
    f.write_bytes(b"")
    result = _invoke("dump-log", str(f))
    assert result.exit_code == 1
    assert "expected a .log, .index, .timeindex, .snapshot, .txnindex or .checkpoint file" in result.output


def test_bench_storage_command(tmp_path):
    storage = pytest.importorskip("kafkalite.storage")
    if not hasattr(storage, "Log"):
        pytest.skip("kafkalite.storage.Log is not available yet")
    import json

    result = _invoke("bench", "storage", "--mb", "0.25", "--repeats", "1", "--dir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["appended_equals_raw"] is True
    result = _invoke("bench", "storage", "--mb", "0.25", "--repeats", "1", "--dir", str(tmp_path))
    assert "append/raw-write" in result.output and "read/raw-read" in result.output


def test_bench_group_faults_runs_and_reports() -> None:
    result = _invoke("bench", "group-faults", "--seeds", "1", "--protocol", "range")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[1] for line in lines[:3]] == ["crash", "pause", "coordinator"]
    assert all("1 ok, 0 violating" in line for line in lines[:3])
    assert lines[-1] == "runs: 3, violations: 0"


def test_dump_producer_snapshot(tmp_path):
    from kafkalite.records import set_producer_fields
    from kafkalite.storage import Log

    d = tmp_path / "t-0"
    with Log.open(d) as log:
        for seq in (0, 2):
            b = build_batch([(None, b"a", None), (None, b"b", None)], timestamp=T0 + seq)
            log.append(bytes(set_producer_fields(bytearray(b), 42, 3, seq)))
    snap = d / f"{4:020d}.snapshot"
    result = _invoke("dump-log", str(snap))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == (
        "producerId: 42 producerEpoch: 3 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {T0 + 2} firstSequence: 2 lastSequence: 3 lastOffset: 3 offsetDelta: 1 "
        f"timestamp: {T0 + 2}"
    )
    snap.write_bytes(snap.read_bytes()[:-1] + b"\x00")
    result = _invoke("dump-log", str(snap))
    assert "Corrupt producer snapshot" in result.output and result.exit_code != 0


def test_dump_txn_index(tmp_path):
    from kafkalite.records import set_producer_fields
    from kafkalite.storage import Log

    d = tmp_path / "t-0"
    with Log.open(d) as log:
        b = build_batch([(None, b"a", None)], timestamp=T0)
        log.append(bytes(set_producer_fields(bytearray(b), 9, 0, 0, transactional=True)))
        log.append(build_control_batch(False, 9, 0, 4, T0))
    result = _invoke("dump-log", str(d / f"{0:020d}.txnindex"))
    assert result.exit_code == 0, result.output
    assert (
        result.output.splitlines()[1]
        == "version: 0 producerId: 9 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"
    )


def test_python_dash_m_runs_the_same_command_line():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "kafkalite", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "cluster" in out.stdout and out.stdout.startswith("Usage: kafkalite")


def test_dump_log_decodes_the_kraft_metadata_log(tmp_path) -> None:
    from kafkalite.host.kraft_cluster import KRaftCluster

    c = KRaftCluster(brokers=1, controllers=1, dir=tmp_path)
    c.create_topic("orders", partitions=1)
    c.close()
    seg = sorted(tmp_path.glob("controller-*/__cluster_metadata-0/*.log"))[0]
    out = _invoke("dump-log", "--cluster-metadata-decoder", str(seg)).output
    assert "LeaderChange: leader: 3001 voters: [3001]" in out
    assert "payload: FeatureLevelRecord(v0)" in out and "name='metadata.version'" in out
    assert (
        "payload: RegisterBrokerRecord(v3)" in out
        and "payload: TopicRecord(v0) TopicRecord(name='orders'" in out
    )
