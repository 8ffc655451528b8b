"""Storage layer: segments, indexes, recovery, retention, compaction, read-only access."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from kafkalite.clock import ManualClock
from kafkalite.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from kafkalite.records import build_batch
from kafkalite.storage import FileSlice, Log, LogConfig, OffsetIndex, TimeIndex
from kafkalite.storage.checkpoint import CheckpointFile, LeaderEpochCheckpoint, OffsetCheckpoint
from kafkalite.storage.cleaner import LogCleaner
from kafkalite.storage.leader_epoch import LeaderEpochCache

T0 = 1_700_000_000_000


def batch(n: int = 3, *, ts: int = T0, key: bytes | None = b"k", value: bytes | None = b"v" * 50) -> bytes:
    return build_batch(
        [(key + b"%d" % i if key is not None else None, value) for i in range(n)], timestamp=ts
    )


def all_records(log: Log) -> list:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        recs = [r for r in log.read(offset, 1 << 20).records.records() if r.offset >= offset]
        if not recs:
            break
        out += recs
        offset = recs[-1].offset + 1
    return out


def dir_bytes(path) -> dict[str, tuple[bytes, int]]:
    return {n: ((path / n).read_bytes(), (path / n).stat().st_mtime_ns) for n in sorted(os.listdir(path))}


# ----- config ------------------------------------------------------------------------------------------
def test_config_defaults_and_strings():
    c = LogConfig.from_props({"segment.bytes": "2048", "cleanup.policy": "delete,compact"})
    assert c.segment_bytes == 2048
    assert c.cleanup_policy == "compact,delete" and c.compact and c.delete
    d = LogConfig()
    assert (d.segment_bytes, d.segment_ms, d.segment_index_bytes, d.index_interval_bytes) == (
        1073741824,
        604800000,
        10485760,
        4096,
    )
    assert d.flush_messages == d.flush_ms == (1 << 63) - 1
    assert (d.retention_ms, d.retention_bytes, d.max_message_bytes) == (604800000, -1, 1048588)
    assert d.to_props()["file.delete.delay.ms"] == 60000


@pytest.mark.parametrize(
    "props, words",
    [
        ({"segment.byte": 1}, ["segment.byte", "segment.bytes"]),
        ({"segment.bytes": "lots"}, ["segment.bytes", "integer"]),
        ({"cleanup.policy": "shred"}, ["cleanup.policy", "compact"]),
        ({"min.cleanable.dirty.ratio": 2}, ["min.cleanable.dirty.ratio", "<= 1.0"]),
        ({"retention.ms": -5}, ["retention.ms", ">= -1"]),
    ],
)
def test_config_errors_name_key(props, words):
    with pytest.raises(InvalidConfigError) as e:
        LogConfig.from_props(props)
    for w in words:
        assert w in str(e.value)


# ----- indexes -----------------------------------------------------------------------------------------
def test_offset_index_lookup_steps_and_layout(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 1000, 8 * 1024 + 5)
    assert idx.max_entries == 1024 and os.path.getsize(idx.path) == 8192  # preallocated, rounded down
    for i in range(1, 501):
        idx.append(1000 + 10 * i, 100 * i)
    assert idx.lookup(999) == (1000, 0)
    assert idx.lookup(1000 + 10 * 250 + 5) == (1000 + 2500, 25000)
    assert 1 <= idx.last_lookup_steps <= 9  # log2(500) rounded up
    assert idx.lookup(10**9) == (1000 + 5000, 50000)
    idx.trim()
    raw = idx.path.read_bytes()
    assert len(raw) == 500 * 8 and struct.unpack(">ii", raw[:8]) == (10, 100)
    again = OffsetIndex(idx.path, 1000, 8192, mutable=False)
    assert again.entries == idx.entries and again.corrupt_reason is None
    idx.resize()
    idx.truncate_to(1000 + 10 * 100)
    assert len(idx) == 99 and idx.last_offset == 1990


def test_offset_index_rejects_bad_entries_and_detects_corruption(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, 64)
    idx.append(5, 100)
    with pytest.raises(Exception, match="does not follow"):
        idx.append(5, 200)
    idx.close()
    (tmp_path / "b.index").write_bytes(struct.pack(">iiii", 9, 100, 3, 200))
    assert "not strictly increasing" in OffsetIndex(tmp_path / "b.index", 0, 64, mutable=False).corrupt_reason
    (tmp_path / "c.index").write_bytes(b"\x00" * 7)
    assert "multiple" in OffsetIndex(tmp_path / "c.index", 0, 64, mutable=False).corrupt_reason


def test_index_entries_reach_the_file_a_page_at_a_time(tmp_path):
    def in_file(idx):
        raw = idx.path.read_bytes()
        return [e for e in struct.iter_unpack(">ii", raw) if e != (0, 0)]

    idx = OffsetIndex(tmp_path / "p.index", 0, 8 * 2048)
    for i in range(1, 601):  # a page holds 512 entries of 8 bytes
        idx.append(i, 10 * i)
    assert len(in_file(idx)) == 512 and len(idx) == 600  # lookups see all 600 at once
    idx.flush()
    assert in_file(idx) == idx.entries
    idx.truncate_to(300)  # entries for 300 and later are zeroed in the file, not only forgotten
    assert in_file(idx) == idx.entries and len(idx) == 299
    idx.append(300, 3001)
    idx.trim()
    assert idx.path.read_bytes() == b"".join(struct.pack(">ii", *e) for e in idx.entries)


def test_crash_loses_unwritten_index_entries_and_recovery_rebuilds_them(tmp_path):
    d = tmp_path / "t-0"
    cfg = {"index.interval.bytes": 1}  # an entry per batch: a page fills after 512 batches
    log = Log.open(d, cfg)
    for i in range(700):
        log.append(batch(1, ts=T0 + i))
    entries = log.active_segment.offset_index.entries
    log.crash()
    on_disk = [
        e for e in struct.iter_unpack(">ii", log.active_segment.index_path.read_bytes()) if e != (0, 0)
    ]
    assert len(on_disk) == 512 < len(entries)
    log = Log.open(d, cfg)
    assert log.active_segment.offset_index.entries == entries
    assert next(log.read(650, 1).records.records()).offset == 650
    log.close()


def test_time_index_only_grows(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 50, 12 * 10)
    assert ti.maybe_append(100, 52)
    assert not ti.maybe_append(90, 55)  # timestamps in the file strictly increase
    assert ti.maybe_append(200, 60)
    assert ti.lookup(150) == (100, 52)
    assert ti.lookup(99) == (-1, 50)
    ti.close()
    assert os.path.getsize(ti.path) == 24
    assert struct.unpack(">qi", ti.path.read_bytes()[12:]) == (200, 10)


def test_checkpoint_format(tmp_path):
    LeaderEpochCheckpoint(tmp_path / "leader-epoch-checkpoint").write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    oc = OffsetCheckpoint(tmp_path / "cp")
    oc.write({("t", 1): 5, ("a", 0): 7})
    assert oc.read() == {("t", 1): 5, ("a", 0): 7}
    (tmp_path / "bad").write_text("0\n3\nx 1\n")
    with pytest.raises(Exception, match="header says 3"):
        CheckpointFile(tmp_path / "bad").read()
    assert not list(tmp_path.glob("*.tmp"))


# ----- append / read -----------------------------------------------------------------------------------
def test_append_read_round_trip_and_contiguous_offsets(tmp_path):
    log = Log.open(tmp_path / "t-0")
    infos = [log.append(batch(n)) for n in (1, 5, 3)]
    assert [i.num_records for i in infos] == [1, 5, 3]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 5), (6, 8)]
    assert log.log_end_offset == 9
    recs = all_records(log)
    assert [r.offset for r in recs] == list(range(9))
    assert recs[3].key == b"k2" and recs[3].value == b"v" * 50 and recs[3].timestamp == T0
    fd = log.read(3)
    assert fd.records.position == len(batch(1))  # whole batch containing offset 3 (base 1)
    assert [b.header.base_offset for b in fd.records.batches()] == [1, 6]
    assert log.read(9).records.size == 0  # at log end: empty slice
    log.close()
    files = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.log" in files and "00000000000000000000.index" in files
    assert "00000000000000000000.timeindex" in files


def test_out_of_range_names_range(tmp_path):
    log = Log.open(tmp_path / "t-0")
    log.append(batch(4))
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 4\]"):
        log.read(5)
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 4\]"):
        log.read(-1)


def test_max_bytes_whole_batches_and_max_offset(tmp_path):
    log = Log.open(tmp_path / "t-0", {"index.interval.bytes": 300})
    for _ in range(20):
        log.append(batch(2))
    size = len(batch(2))
    fd = log.read(0, size * 5 + 10)
    assert fd.records.size == size * 5
    assert log.read(0, 1).records.size == size  # at least one batch
    assert log.read(7, 1).records.position == 3 * size
    fd = log.read(0, 1 << 20, max_offset=10)
    assert fd.records.size == 5 * size and max(r.offset for r in fd.records.records()) == 9
    assert log.read(10, max_offset=10).records.size == 0


def test_too_large_and_corrupt_leave_log_unchanged(tmp_path):
    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 500})
    log.append(batch(2))
    before = dir_bytes(tmp_path / "t-0")
    big = batch(20)
    with pytest.raises(MessageTooLargeError, match=rf"{len(big)} bytes.*500"):
        log.append(big)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(bytes(bad))
    bad = bytearray(batch(2))
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        log.append(bytes(bad))
    assert log.log_end_offset == 2 and dir_bytes(tmp_path / "t-0") == before
    assert [r.offset for r in all_records(log)] == [0, 1]


def test_compacted_topic_rejects_null_keys(tmp_path):
    log = Log.open(tmp_path / "t-0", {"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append(batch(2, key=None))
    assert log.log_end_offset == 0


def test_log_append_time(tmp_path):
    clock = ManualClock(T0 + 5000)
    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    info = log.append(batch(2, ts=1))
    assert info.max_timestamp == info.log_append_time == T0 + 5000
    assert {r.timestamp for r in all_records(log)} == {T0 + 5000}


def test_leader_epoch_checkpoint(tmp_path):
    log = Log.open(tmp_path / "t-0")
    log.append(batch(2), leader_epoch=0)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(2), leader_epoch=3)
    assert log.leader_epoch_entries == [(0, 0), (3, 4)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 4\n"
    assert next(log.read(4).records.batches()).header.partition_leader_epoch == 3
    log.truncate_to(4)
    assert log.leader_epoch_entries == [(0, 0)] and log.log_end_offset == 4


def test_end_offset_for_an_epoch_below_every_entry(tmp_path):
    """Kafka's endOffsetFor: an epoch older than the first entry ends where the first entry starts."""
    cache = LeaderEpochCache(None, [(3, 50), (5, 70)])
    assert cache.end_offset_for(2, 80) == (2, 50)
    assert cache.end_offset_for(0, 80) == (0, 50)
    assert cache.end_offset_for(4, 80) == (3, 70)
    assert cache.end_offset_for(5, 80) == (5, 80)
    assert cache.end_offset_for(6, 80) == (-1, -1)
    assert cache.end_offset_for(-1, 80) == (-1, -1)
    assert LeaderEpochCache(None).end_offset_for(2, 80) == (-1, -1)


def test_moving_the_log_start_trims_the_leader_epoch_cache(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d)
    log.append(batch(3), leader_epoch=0)
    log.append(batch(3), leader_epoch=1)
    assert log.leader_epoch_entries == [(0, 0), (1, 3)]
    log.delete_records(2)
    assert log.leader_epoch_entries == [(0, 2), (1, 3)]
    log.delete_records(5)
    assert log.leader_epoch_entries == [(1, 5)]
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 5)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n1 5\n"
    log.close()
    # A crash between the two checkpoints: the stale entries are trimmed on open.
    LeaderEpochCheckpoint(d / "leader-epoch-checkpoint").write([(0, 0), (1, 3)])
    log = Log.open(d)
    assert log.log_start_offset == 5 and log.leader_epoch_entries == [(1, 5)]


def test_retention_trims_the_leader_epoch_cache(tmp_path):
    props = {"segment.bytes": len(batch(2)), "retention.bytes": len(batch(2)) * 2}
    log = Log.open(tmp_path / "t-0", props, clock=ManualClock(T0))
    for epoch in (0, 0, 1, 1, 2):
        log.append(batch(2), leader_epoch=epoch)
    assert log.leader_epoch_entries == [(0, 0), (1, 4), (2, 8)]
    assert log.delete_old_segments() == [0, 2, 4]
    assert log.log_start_offset == 6 and log.leader_epoch_entries == [(1, 6), (2, 8)]


def test_truncate_fully_and_start_at(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, {"file.delete.delay.ms": 0})
    log.append(batch(3), leader_epoch=0)
    log.truncate_fully_and_start_at(7)
    assert (log.log_start_offset, log.log_end_offset, log.leader_epoch_entries) == (7, 7, [])
    assert [s.base_offset for s in log.segments] == [7]
    log.append(batch(2), leader_epoch=2)
    assert [r.offset for r in all_records(log)] == [7, 8]
    log.close()
    log = Log.open(d)
    assert (log.log_start_offset, log.log_end_offset, log.leader_epoch_entries) == (7, 9, [(2, 7)])


# ----- rolling / indexes on disk -----------------------------------------------------------------------
def test_roll_on_segment_bytes_and_index_entries(tmp_path):
    b = batch(3)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": len(b) * 4, "index.interval.bytes": len(b)})
    for _ in range(10):
        log.append(batch(3))
    assert [s.base_offset for s in log.segments] == [0, 12, 24]
    assert [s.size for s in log.segments] == [4 * len(b), 4 * len(b), 2 * len(b)]
    first = log.segments[0]
    # an entry once *more than* index.interval.bytes accumulated: before the 3rd batch only
    assert first.offset_index.entries == [(8, 2 * len(b))]
    assert os.path.getsize(first.index_path) == 8  # trimmed on roll
    assert os.path.getsize(first.timeindex_path) == 12  # (T0, 8): timestamp never grew after
    assert os.path.getsize(log.active_segment.index_path) == 10485760  # preallocated while active
    first.offset_index.lookup(10)
    assert first.offset_index.last_lookup_steps >= 1
    log.close()
    assert os.path.getsize(log.segments[-1].index_path) == 0


def test_roll_on_segment_ms(tmp_path):
    clock = ManualClock(T0)
    log = Log.open(tmp_path / "t-0", {"segment.ms": 1000}, clock=clock)
    log.append(batch(1, ts=clock.now_ms()))
    clock.advance(600)
    log.append(batch(1, ts=clock.now_ms()))
    assert len(log.segments) == 1
    clock.advance(600)
    log.append(batch(1, ts=clock.now_ms()))  # 1200 ms after the segment's first batch
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_index_full(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 24, "index.interval.bytes": 0})
    for _ in range(10):
        log.append(batch(1))
    assert len(log.segments) > 1
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    assert [r.offset for r in all_records(log)] == list(range(10))


def test_offset_for_timestamp(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1000, "index.interval.bytes": 100})
    for i in range(40):
        log.append(batch(2, ts=T0 + 10 * i))
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(T0) == (0, T0)
    assert log.offset_for_timestamp(T0 + 10 * 17) == (34, T0 + 170)
    assert log.offset_for_timestamp(T0 + 10 * 17 - 3) == (34, T0 + 170)
    assert log.offset_for_timestamp(T0 + 10**6) is None
    assert log.offset_for_timestamp(-2) == (0, -1) and log.offset_for_timestamp(-1) == (80, -1)
    assert log.offset_for_timestamp(-3) == (79, T0 + 390)


def test_offset_for_timestamp_out_of_order(tmp_path):
    log = Log.open(tmp_path / "t-0", {"index.interval.bytes": 0})
    for ts in (50, 10, 70, 30, 90):
        log.append(batch(1, ts=T0 + ts))
    assert log.offset_for_timestamp(T0 + 20) == (0, T0 + 50)
    assert log.offset_for_timestamp(T0 + 60) == (2, T0 + 70)
    assert log.offset_for_timestamp(T0 + 80) == (4, T0 + 90)


# ----- recovery -------------------------------------------------------------------------------------------
def test_torn_tail_truncated(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d)
    for _ in range(5):
        log.append(batch(2))
    log.close()
    seg = d / "00000000000000000000.log"
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)
    log = Log.open(d)
    assert log.log_end_offset == 8
    assert log.recovery_report.bytes_truncated == size // 5 - 7
    assert "torn" in str(log.recovery_report)
    assert seg.stat().st_size == size // 5 * 4
    log.append(batch(2))
    assert [r.offset for r in all_records(log)] == list(range(10))


def test_corrupt_byte_in_tail_batch(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d)
    for _ in range(5):
        log.append(batch(2))
    log.close()
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[len(data) - 20] ^= 0x55
    seg.write_bytes(bytes(data))
    log = Log.open(d)
    assert log.log_end_offset == 8
    assert "CRC" in log.recovery_report.truncations[0]


def test_missing_or_corrupt_index_rebuilt_identically(tmp_path):
    d = tmp_path / "t-0"
    b = batch(3)
    cfg = {"segment.bytes": len(b) * 6, "index.interval.bytes": 100}
    log = Log.open(d, cfg)
    for i in range(20):
        log.append(batch(3, ts=T0 + i))
    first = log.segments[0]
    entries, tentries = first.offset_index.entries, first.time_index.entries
    assert entries and tentries
    log.close()
    first.index_path.unlink()
    log = Log.open(d, cfg)
    assert log.segments[0].offset_index.entries == entries
    assert log.segments[0].time_index.entries == tentries
    assert "missing" in log.recovery_report.indexes_rebuilt[0]
    log.close()
    raw = bytearray(first.index_path.read_bytes())
    raw[0:8] = struct.pack(">ii", 99, 99999)  # out of order
    first.index_path.write_bytes(bytes(raw))
    log = Log.open(d, cfg)
    assert 0 in log.recovery_report.indexes_rebuilt
    assert log.segments[0].offset_index.entries == entries
    assert first.index_path.read_bytes() == b"".join(struct.pack(">ii", *e) for e in entries)
    assert [r.offset for r in all_records(log)] == list(range(60))


def test_interrupted_delete_and_clean_finished_on_open(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, {"segment.bytes": 400})
    for _ in range(6):
        log.append(batch(2))
    log.close()
    (d / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (d / "00000000000000000099.log.deleted").write_bytes(b"old")
    log = Log.open(d, {"segment.bytes": 400})
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.deleted"))
    assert log.recovery_report.cleaned_files_removed and log.recovery_report.deleted_files_removed
    assert log.log_end_offset == 12


# ----- retention ------------------------------------------------------------------------------------------
def _filled(tmp_path, clock, n=10, **props):
    cfg = {"segment.bytes": len(batch(2)), **props}
    log = Log.open(tmp_path / "t-0", cfg, clock=clock)
    for i in range(n):
        log.append(batch(2, ts=T0 + 1000 * i))
    return log


def test_retention_by_time_renames_then_unlinks(tmp_path):
    clock = ManualClock(T0 + 10_000)
    log = _filled(tmp_path, clock, **{"retention.ms": 5500})
    assert len(log.segments) == 10
    deleted = log.delete_old_segments()
    # segments whose newest record is > 5500 ms older than now (T0+10000): timestamps T0 .. T0+4000
    assert deleted == [0, 2, 4, 6, 8]
    assert log.log_start_offset == 10
    d = tmp_path / "t-0"
    assert (d / "00000000000000000000.log.deleted").exists()  # file.delete.delay.ms = 60 s pending
    assert log.pending_deletes == [0, 2, 4, 6, 8]
    clock.advance(60_000)
    assert log.run_scheduled_deletes() == [0, 2, 4, 6, 8]
    assert not list(d.glob("*.deleted"))
    with pytest.raises(OffsetOutOfRangeError, match=r"\[10, 20\]"):
        log.read(3)
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 10\n"


def test_retention_never_deletes_active(tmp_path):
    clock = ManualClock(T0 + 10**9)
    log = _filled(tmp_path, clock, n=3, **{"retention.ms": 1, "file.delete.delay.ms": 0})
    assert log.delete_old_segments() == [0, 2]
    assert [s.base_offset for s in log.segments] == [4]
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_retention_by_size(tmp_path):
    clock = ManualClock(T0)
    log = _filled(tmp_path, clock, n=10, **{"retention.bytes": len(batch(2)) * 4 + 1})
    assert log.delete_old_segments() == [0, 2, 4, 6, 8]
    assert log.size_bytes == len(batch(2)) * 5


def test_delete_records_and_start_offset_retention(tmp_path):
    clock = ManualClock(T0)
    log = _filled(tmp_path, clock, n=5)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4)
    assert log.read(5).records.position == 0  # batch holding 4..5 is still readable from 5
    assert log.delete_old_segments() == [0, 2]
    log.close()
    log = Log.open(tmp_path / "t-0", {"segment.bytes": len(batch(2))}, clock=clock)
    assert log.log_start_offset == 5


def test_truncate_to(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 500, "file.delete.delay.ms": 0})
    for _ in range(10):
        log.append(batch(2))
    assert len(log.segments) > 2
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert [r.offset for r in all_records(log)] == list(range(6))
    log.append(batch(2))
    log.close()
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 500})
    assert [r.offset for r in all_records(log)] == list(range(8))


# ----- compaction -------------------------------------------------------------------------------------------
def test_compaction_keeps_latest_per_key_and_drops_tombstones_after_horizon(tmp_path):
    clock = ManualClock(T0)
    cfg = {
        "cleanup.policy": "compact",
        "segment.bytes": 600,
        "delete.retention.ms": 1000,
        "file.delete.delay.ms": 0,
    }
    log = Log.open(tmp_path / "c-0", cfg, clock=clock)
    expected = {}
    writes = [(b"key%d" % (i % 7), b"value-%d" % i) for i in range(60)]
    writes += [(b"key0", None), (b"key1", None)]  # tombstones
    writes += [(b"key%d" % (2 + i % 5), b"later-%d" % i) for i in range(20)]
    for i, (key, value) in enumerate(writes):
        log.append(build_batch([(key, value)], timestamp=T0 + i))
        expected[key] = (i, value)
    active_base = log.active_segment.base_offset
    before = log.size_bytes
    stats = LogCleaner().clean(log)
    assert stats.bytes_before > stats.bytes_after and log.size_bytes < before
    assert stats.records_removed > 0
    recs = all_records(log)
    cleaned = {r.key: (r.offset, r.value) for r in recs if r.offset < active_base}
    for key, (off, value) in expected.items():
        if off < active_base:
            assert cleaned[key] == (off, value)  # latest value, original offset (tombstones kept for now)
    assert [r.offset for r in recs] == sorted(r.offset for r in recs)
    assert all(r.offset >= active_base or cleaned[r.key][0] == r.offset for r in recs)
    tomb_keys = {k for k, (o, v) in expected.items() if v is None and o < active_base}
    assert tomb_keys
    clock.advance(999)
    assert LogCleaner().clean(log).tombstones_removed == 0
    clock.advance(1)
    stats = LogCleaner().clean(log)
    assert stats.tombstones_removed == len(tomb_keys)
    assert not any(r.value is None and r.offset < active_base for r in all_records(log))
    log.close()
    log = Log.open(tmp_path / "c-0", cfg, clock=clock)
    assert log.log_end_offset == 82 and all_records(log)[-1].offset == 81


def test_clean_swap_completed_after_crash(tmp_path):
    clock = ManualClock(T0)
    cfg = {"cleanup.policy": "compact", "segment.bytes": 400}
    d = tmp_path / "c-0"
    log = Log.open(d, cfg, clock=clock)
    for i in range(20):
        log.append(build_batch([(b"k", b"v%d" % i)], timestamp=T0))
    LogCleaner().clean(log)
    after = [(r.offset, r.value) for r in all_records(log)]
    log.close()
    # Simulate a crash after the swap file was written but before it replaced the old segment.
    seg0 = d / "00000000000000000000.log"
    (d / "00000000000000000000.log.swap").write_bytes(seg0.read_bytes())
    seg0.write_bytes(b"garbage that would fail recovery")
    log = Log.open(d, cfg, clock=clock)
    assert log.recovery_report.swaps_completed == [0]
    assert [(r.offset, r.value) for r in all_records(log)] == after


# ----- read-only and FileSlice ------------------------------------------------------------------------------
def test_read_only_never_modifies_and_tolerates_torn_tail(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, {"segment.bytes": 500})
    for _ in range(8):
        log.append(batch(2))
    log.flush()  # no close: active index stays preallocated, like a live writer
    with open(log.active_segment.log_path, "ab") as f:
        f.write(batch(2)[:30])  # a write in progress
    (d / log.segments[0].index_path.name).unlink()  # and a missing index
    before = dir_bytes(d)
    ro = Log.open(d, read_only=True)
    assert ro.log_end_offset == 16
    assert [r.offset for r in all_records(ro)] == list(range(16))
    assert ro.recovery_report.bytes_truncated == 30 and 0 in ro.recovery_report.indexes_rebuilt
    with pytest.raises(Exception, match="read-only"):
        ro.append(batch(1))
    ro.close()
    assert dir_bytes(d) == before
    with pytest.raises(Exception, match="does not exist"):
        Log.open(tmp_path / "nope-0", read_only=True)
    assert not (tmp_path / "nope-0").exists()


def test_read_only_while_writer_appends(tmp_path):
    d = tmp_path / "t-0"
    writer = Log.open(d, {"segment.bytes": 2000})
    writer.append(batch(2))
    stop = threading.Event()

    def produce():
        for _ in range(3000):
            if stop.is_set():
                break
            writer.append(batch(2))

    t = threading.Thread(target=produce)
    t.start()
    try:
        for _ in range(10):
            ro = Log.open(d, read_only=True)
            recs = all_records(ro)
            assert [r.offset for r in recs] == list(range(ro.log_end_offset))
            ro.close()
    finally:
        stop.set()
        t.join()


def test_file_slice_sendfile_matches_read(tmp_path):
    log = Log.open(tmp_path / "t-0")
    for _ in range(30):
        log.append(batch(5, value=os.urandom(200)))
    fs = log.read(7, 5000).records
    assert isinstance(fs, FileSlice) and len(fs) > 0
    a, b = socket.socketpair()
    with a, b:
        sent = fs.send_to(a)
        got = b""
        while len(got) < sent:
            got += b.recv(1 << 16)
    assert sent == fs.size and got == fs.read()
    raw = FileSlice(fs.path, fs.position, fs.size)  # path-only slice
    assert raw.read() == got


def test_flush_policy_and_append_many(tmp_path):
    log = Log.open(tmp_path / "t-0", {"flush.messages": 5})
    log.append(batch(3))
    assert log.recovery_point == 0
    log.append(batch(3))  # 6 unflushed messages >= flush.messages
    assert log.recovery_point == 6
    infos = log.append_many([batch(2), batch(4)])
    assert [(i.first_offset, i.last_offset) for i in infos] == [(6, 7), (8, 11)]
    merged = log.append(batch(1) + batch(2))  # a record set of two batches
    assert (merged.first_offset, merged.last_offset, merged.num_records) == (12, 14, 3)
    assert [r.offset for r in all_records(log)] == list(range(15))
    clock = ManualClock(T0)
    timed = Log.open(tmp_path / "u-0", {"flush.ms": 1000}, clock=clock)
    timed.append(batch(1))
    assert not timed.maybe_flush()
    clock.advance(1000)
    assert timed.maybe_flush() and timed.recovery_point == 1


def test_append_many_rejects_whole_set(tmp_path):
    log = Log.open(tmp_path / "t-0")
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_many([batch(2), bytes(bad)])
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_iter_records_crosses_segments_and_compaction_gaps(tmp_path):
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 600, "cleanup.policy": "compact"}, clock=clock)
    for i in range(60):
        log.append(build_batch([(b"k%d" % (i % 7), b"v%d" % i)], timestamp=clock.now_ms()))
    log.roll()
    assert len(log.segments) > 3
    assert [r.offset for r in log.iter_records()] == list(range(60))
    assert [r.offset for r in log.iter_records(17, 23)] == list(range(17, 23))
    LogCleaner(clock=clock).clean(log)
    survivors = list(log.iter_records())
    assert sorted(r.key for r in survivors) == sorted(b"k%d" % k for k in range(7))
    assert [r.value for r in survivors] == [b"v%d" % i for i in range(53, 60)]
    log.close()
