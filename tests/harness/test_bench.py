"""The storage benchmark at toy size: structure and byte-equality, never timings."""

from __future__ import annotations

import pytest

from kafkalite.harness.bench import storage as bench
from kafkalite.records import iter_batches

storage = pytest.importorskip("kafkalite.storage")
needs_log = pytest.mark.skipif(
    not hasattr(storage, "Log"), reason="kafkalite.storage.Log is not available yet"
)


def test_build_batches_sizes_and_offsets():
    batches, records = bench.build_batches(200_000, record_size=100, batch_bytes=4096)
    assert sum(len(b) for b in batches) >= 200_000
    assert all(len(b) == len(batches[0]) <= 4096 for b in batches)
    next_offset = 0
    for b in batches:
        ((pos, h),) = list(iter_batches(b))
        assert (pos, h.base_offset) == (0, next_offset)
        next_offset = h.next_offset
    assert next_offset == records


def test_raw_read_counts_bytes(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 3_000_001)
    secs, n = bench.raw_read([p], chunk=1 << 20)
    assert n == 3_000_001 and secs >= 0


@needs_log
def test_run_storage_bench_tiny(tmp_path):
    # small segments so that rolls happen at toy size too
    result = bench.run_storage_bench(
        0.5,
        record_size=50,
        batch_bytes=2048,
        directory=tmp_path,
        repeats=2,
        config={"segment.bytes": 100_000},
    )
    assert result.appended_equals_raw
    assert result.segments >= 5
    for t in (result.raw_write, result.log_append, result.raw_read, result.log_read):
        assert t.bytes == result.total_bytes
        assert t.records == result.records
        assert t.seconds > 0
    d = result.to_dict()
    assert set(d) >= {"raw_write", "log_append", "raw_read", "log_read", "append_ratio", "read_ratio"}
    assert d["log_append"]["mib_per_s"] > 0
    assert d["checked_write"]["us_per_batch"] > 0 and d["checked_write"]["ratio"] > 0
    table = result.table()
    assert "Log.append" in table and "target >= 0.9" in table and "page-cache" in table
    assert "batch check + write" in table
    # Two ceilings for Log.append, each with its ratio: a follower's (batch header check + write) and a
    # leader's (also every record validated), the one Log.append as leader can reach.
    lw = d["leader_write"]
    assert lw["us_per_batch"] >= lw["validation_us_per_batch"] and lw["append_ratio"] > 0
    assert d["checked_write"]["append_ratio"] > 0
    assert result.leader_write_seconds > 0
    assert "append/(e) follower ceiling" in table and "append/(f) leader ceiling" in table
    assert list(tmp_path.iterdir()) == []  # cleaned up after itself


@needs_log
def test_appended_bytes_equal_raw_bytes(tmp_path):
    batches, _ = bench.build_batches(50_000, record_size=10, batch_bytes=1000)
    log_dir = tmp_path / "b-0"
    bench.log_append(log_dir, batches, config={"segment.bytes": 8000})
    segs = bench.segment_files(log_dir)
    assert len(segs) > 1
    assert b"".join(p.read_bytes() for p in segs) == b"".join(batches)
    assert bench._same_bytes(segs, batches)
    assert not bench._same_bytes(segs, batches[:-1])
    secs, n = bench.log_read(log_dir, fetch_bytes=3000)
    assert n == sum(len(b) for b in batches)
