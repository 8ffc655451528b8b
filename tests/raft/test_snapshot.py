"""KIP-630 snapshots: the ``.checkpoint`` file format, and the metadata log's snapshots (log start offset,
segment deletion, recovery, the verdict on a fetch below the log start)."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.clock import ManualClock
from kafkalite.protocol.codec.binding import from_wire, schema_of, to_wire
from kafkalite.protocol.codec.schema import decode, encode
from kafkalite.protocol.fetch import FetchPartitionResponse, FetchResponse, SnapshotId
from kafkalite.raft.metadata_log import KafkaMetadataLog, MetadataLogConfig
from kafkalite.raft.snapshot import (
    CorruptSnapshotError,
    RawSnapshotWriter,
    parse_snapshot_name,
    read_snapshot,
    snapshot_filename,
    write_snapshot,
)
from kafkalite.raft.snapshot import (
    SnapshotId as OffsetAndEpoch,
)
from kafkalite.records.batch import RecordBatch, iter_batches
from kafkalite.records.control import ControlRecordType, control_type
from tests.raft.harness import scratch_dir


@pytest.fixture
def tmp():
    d = scratch_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_the_file_name_is_kafkas_offset_and_epoch() -> None:
    sid = OffsetAndEpoch(1234, 7)
    assert snapshot_filename(sid) == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_name(snapshot_filename(sid)) == (sid, "")
    assert parse_snapshot_name("00000000000000001234-0000000007-123abc.checkpoint.part") == (sid, "partial")
    assert parse_snapshot_name("00000000000000001234-0000000007.checkpoint.deleted") == (sid, "deleted")
    assert parse_snapshot_name("00000000000000001234.log") is None


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(min_size=0, max_size=300), max_size=60),
    end_offset=st.integers(0, 2**40),
    epoch=st.integers(0, 2**31 - 1),
    timestamp=st.integers(0, 2**41),
    batch_bytes=st.integers(1, 4096),
)
def test_a_snapshot_file_round_trips(records, end_offset, epoch, timestamp, batch_bytes) -> None:
    d = scratch_dir()
    try:
        sid = OffsetAndEpoch(end_offset, epoch)
        path = write_snapshot(d, sid, records, timestamp, now_ms=5, batch_bytes=batch_bytes)
        assert path.name == snapshot_filename(sid)
        back = read_snapshot(path)
        assert back.snapshot_id == sid
        assert list(back.records) == records
        assert back.last_contained_timestamp == timestamp
        # Record batch v2: header and footer control batches around the data, every batch in the
        # snapshot's epoch, offsets counting from 0 in the file.
        data = path.read_bytes()
        batches = [RecordBatch.decode(data, pos) for pos, _ in iter_batches(data)]
        assert control_type(batches[0].records[0].key) == ControlRecordType.SNAPSHOT_HEADER
        assert control_type(batches[-1].records[0].key) == ControlRecordType.SNAPSHOT_FOOTER
        assert {b.header.partition_leader_epoch for b in batches} == {epoch}
        assert [r.offset for b in batches for r in b.records] == list(range(len(records) + 2))
        assert not list(path.parent.glob("*.part")), "the partial file was renamed into place"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=30), data=st.data())
def test_a_torn_snapshot_is_refused(records, data) -> None:
    d = scratch_dir()
    try:
        path = write_snapshot(d, OffsetAndEpoch(10, 2), records, 1, now_ms=1, batch_bytes=64)
        whole = path.read_bytes()
        cut = data.draw(st.integers(0, len(whole) - 1))
        path.write_bytes(whole[:cut])
        with pytest.raises(CorruptSnapshotError, match=path.name):
            read_snapshot(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_writer_only_publishes_a_whole_snapshot(tmp) -> None:
    sid = OffsetAndEpoch(5, 1)
    good = write_snapshot(tmp, OffsetAndEpoch(9, 9), [b"a", b"b"], 1, now_ms=1).read_bytes()
    w = RawSnapshotWriter(tmp, sid)
    w.append(good[:-3])
    with pytest.raises(CorruptSnapshotError):
        w.freeze()
    assert not any(p.name.startswith(snapshot_filename(sid)[:31]) for p in w.dir.iterdir())


def _log(root, clock, **cfg) -> KafkaMetadataLog:
    config = MetadataLogConfig(segment_bytes=1024, segment_min_bytes=512, **cfg)
    return KafkaMetadataLog(root, clock, config)


def _fill(log: KafkaMetadataLog, n: int, epoch: int = 1) -> None:
    for i in range(n):
        log.append_as_leader([b"record-%04d" % i + b"." * 100], epoch, 0)


def test_a_snapshot_moves_the_log_start_and_deletes_the_segments_it_covers(tmp) -> None:
    clock = ManualClock(0)
    log = _log(tmp, clock, retention_bytes=0)
    _fill(log, 40)
    segments = len(log.log.segments)
    assert segments > 3
    assert log.create_snapshot(OffsetAndEpoch(20, 1), [b"state@20"], 0, high_watermark=40, now_ms=0)
    assert log.start_offset == 0, "the only snapshot is kept, and so is the log before it"
    with pytest.raises(ValueError, match="high watermark"):
        log.create_snapshot(OffsetAndEpoch(40, 1), [b"x"], 0, high_watermark=30, now_ms=0)
    assert log.create_snapshot(OffsetAndEpoch(30, 1), [b"state@30"], 0, high_watermark=40, now_ms=0)
    assert log.maybe_clean(0), "log and snapshots exceed metadata.max.retention.bytes"
    assert log.start_offset == 30
    assert log.snapshots == {OffsetAndEpoch(30, 1): None}
    assert not (log.dir / snapshot_filename(OffsetAndEpoch(20, 1))).exists()
    assert len(log.log.segments) < segments
    assert all(s.base_offset <= 30 for s in log.log.segments[:1])
    # A fetch below the log start, or from an empty fetcher, is sent to the latest snapshot.
    assert log.validate_offset_and_epoch(10, 1) == ("snapshot", 30, 1)
    assert log.validate_offset_and_epoch(35, 1) == ("valid", 35, 1)
    assert log.validate_offset_and_epoch(30, 0) == ("snapshot", 30, 1)
    log.close()


def test_retention_keeps_the_latest_snapshot_and_the_log_after_it(tmp) -> None:
    clock = ManualClock(0)
    log = _log(tmp, clock)  # Kafka's default retention (100 MiB, 7 days): nothing goes
    _fill(log, 40)
    log.create_snapshot(OffsetAndEpoch(10, 1), [b"a"], 0, 40, 0)
    log.create_snapshot(OffsetAndEpoch(20, 1), [b"b"], 0, 40, 0)
    assert not log.maybe_clean(0) and log.start_offset == 0
    # metadata.max.retention.ms: the older snapshot's last record is too old now.
    log.close()
    log = KafkaMetadataLog(
        tmp, clock, MetadataLogConfig(segment_bytes=1024, segment_min_bytes=512, retention_ms=1000)
    )
    assert log.maybe_clean(5000) and log.start_offset == 20
    assert log.snapshots == {OffsetAndEpoch(20, 1): None}
    log.close()


def test_a_restart_keeps_whole_snapshots_and_deletes_partial_ones(tmp) -> None:
    clock = ManualClock(0)
    log = _log(tmp, clock, retention_bytes=0)
    _fill(log, 40)
    log.create_snapshot(OffsetAndEpoch(20, 1), [b"a"], 0, 40, 0)
    log.create_snapshot(OffsetAndEpoch(30, 1), [b"b"], 0, 40, 0)
    log.maybe_clean(0)
    RawSnapshotWriter(log.dir, OffsetAndEpoch(35, 1)).append(b"half a download")
    log.crash(lose_unflushed=True)
    again = _log(tmp, clock)
    assert again.start_offset == 30 and again.end_offset == 40
    assert again.latest_snapshot_id() == OffsetAndEpoch(30, 1)
    assert not list(again.dir.glob("*.part"))
    again.close()


def test_a_downloaded_snapshot_past_the_log_replaces_the_whole_log(tmp) -> None:
    clock = ManualClock(0)
    log = _log(tmp, clock)
    _fill(log, 5, epoch=1)
    w = log.create_new_snapshot_unchecked(OffsetAndEpoch(100, 3))
    w.append(write_snapshot(scratch_dir(), OffsetAndEpoch(100, 3), [b"s"], 0, 0).read_bytes())
    w.freeze()
    log.on_snapshot_frozen(OffsetAndEpoch(100, 3))
    assert log.truncate_to_latest_snapshot()
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (100, 100, 3)
    assert log.validate_offset_and_epoch(100, 3) == ("valid", 100, 3)
    assert log.read_snapshot(OffsetAndEpoch(100, 3)).records == (b"s",)
    log.close()


def test_fetch_carries_the_snapshot_id_in_its_tagged_field() -> None:
    from kafkalite.protocol.api import TopicPartition

    part = FetchPartitionResponse(
        tp=TopicPartition("__cluster_metadata", 0), snapshot_id=SnapshotId(end_offset=42, epoch=3)
    )
    resp = FetchResponse(partitions=(part,))
    schema = schema_of(FetchResponse)
    back = from_wire(FetchResponse, decode(schema, encode(schema, to_wire(resp, 12), 12, True), 12, True), 12)
    assert back.partitions[0].snapshot_id == SnapshotId(end_offset=42, epoch=3)
