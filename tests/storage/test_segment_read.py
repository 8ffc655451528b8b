"""Where a fetch ends: ``LogSegment.read`` finds the last whole batch within ``max_bytes`` from the offset
index alone when every batch from some position on has an entry, and scans batch headers otherwise.
Both must give the slice a plain walk over the segment file gives, whatever appends, truncations, rolls
and reopenings came before."""

from __future__ import annotations

import errno
import os
import random
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.errors import KafkaStorageError
from kafkalite.records import build_batch
from kafkalite.storage import Log

T0 = 1_700_000_000_000


def _batch(n: int, value_bytes: int, tag: int) -> bytes:
    return build_batch([(None, b"%d-" % tag + b"v" * value_bytes)] * n, timestamp=T0 + tag)


def _layout(path: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of every batch in a segment file, read from the file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, length + 12, base, base + delta))
        pos += length + 12
    return out


def _expected(log: Log, offset: int, max_bytes: int, max_offset: int | None, min_one: bool):
    """The slice ``Log.read`` must return, from the segment files: (file name, position, size)."""
    if max_offset is not None and offset >= max_offset:
        last = log.segments[-1]
        return last.log_path.name, last.size, 0  # nothing to fetch: an empty slice at the log's end
    for seg in log.segments:
        if seg.next_offset <= offset:
            continue
        batches = _layout(seg.log_path)
        first = next((b for b in batches if b[3] >= offset), None)
        if first is None:
            continue
        start = first[0]
        limit = seg.size
        if max_offset is not None and max_offset < seg.next_offset:
            cap = next((b for b in batches if b[3] >= max_offset), None)
            if cap is not None:
                limit = min(limit, cap[0])
        if start >= limit:
            return seg.log_path.name, start, 0
        end = start
        for pos, size, _base, _last in batches:
            if pos < start:
                continue
            if pos + size > limit or pos + size - start > max_bytes:
                break
            end = pos + size
        if end == start and min_one:
            end = start + first[1]
        return seg.log_path.name, start, end - start
    raise AssertionError(f"no segment holds offset {offset}")


def _check_reads(log: Log, rng: random.Random, rounds: int) -> None:
    leo = log.log_end_offset
    if leo == log.log_start_offset:
        return
    for _ in range(rounds):
        offset = rng.randrange(log.log_start_offset, leo)
        max_bytes = rng.choice([1, 100, 700, 1500, 2500, 4000, 6000, 1 << 20])
        max_offset = rng.choice([None, rng.randint(offset, leo)])
        min_one = rng.random() < 0.8
        # A consumer's walk: each fetch continues where the last one ended (the segment remembers).
        for _ in range(4):
            fs = log.read(offset, max_bytes, max_offset=max_offset, min_one=min_one).records
            got = (fs.path.name, fs.position, fs.size)
            want = _expected(log, offset, max_bytes, max_offset, min_one)
            assert got == want, (offset, max_bytes, max_offset, min_one)
            if not fs.size:
                break
            offset = max(b.header.next_offset for b in fs.batches())
            if offset >= (leo if max_offset is None else max_offset):
                break


@settings(max_examples=60, deadline=None)
@given(
    rng=st.randoms(use_true_random=True),
    interval=st.sampled_from([0, 100, 400, 1000]),
    segment_bytes=st.sampled_from([3000, 10_000, 40_000]),
)
def test_fetch_ends_where_a_walk_over_the_file_ends(rng, interval, segment_bytes):
    """Appends of batches above and below ``index.interval.bytes`` (the index dense in places, sparse
    in others), truncations, rolls, clean and unclean reopenings, with reads checked after each step."""
    tmp = Path(tempfile.mkdtemp())
    cfg = {"segment.bytes": segment_bytes, "index.interval.bytes": interval}
    try:
        d = tmp / "t-0"
        log = Log.open(d, cfg)
        for i in range(rng.randint(10, 60)):
            op = rng.choices(["append", "truncate", "roll", "reopen"], [20, 1, 1, 1])[0]
            if op == "append":
                log.append(_batch(rng.choice([1, 2, 5]), rng.choice([0, 30, 150, 400]), i))
            elif op == "truncate" and log.log_end_offset > log.log_start_offset:
                leo, start = log.log_end_offset, log.log_start_offset
                log.truncate_to(start + int((leo - start) * rng.random()))
            elif op == "roll":
                log.roll()
            elif op == "reopen":
                if rng.random() < 0.5:
                    log.close()  # clean: indexes loaded as they are, the segment files trusted
                else:
                    log.crash()  # unclean: the active segment is recovered, its index rebuilt
                log = Log.open(d, cfg)
            _check_reads(log, rng, rounds=2)
        _check_reads(log, rng, rounds=20)
        log.close()
    finally:
        shutil.rmtree(tmp)


def test_a_consumer_walk_over_indexed_batches_reads_no_headers(monkeypatch, tmp_path):
    """Batches of 16 KB, one index entry each (index.interval.bytes 4096): after the first fetch, each
    fetch's start comes from where the last one ended and its end from the index, with no read of the
    file until the bytes themselves are read."""
    log = Log.open(tmp_path / "t-0")
    for i in range(40):
        log.append(_batch(100, 150, i))
    log.truncate_to(3000)  # cuts inside the log: what stays is still indexed batch by batch
    for i in range(40, 60):
        log.append(_batch(100, 150, i))
    offset = log.read(0, 100_000).records
    offset = max(b.header.next_offset for b in offset.batches())
    reads = []
    real_pread = os.pread

    def counting_pread(fd, n, pos):
        reads.append((n, pos))
        return real_pread(fd, n, pos)

    slices = []
    while offset < log.log_end_offset:
        monkeypatch.setattr(os, "pread", counting_pread)
        fs = log.read(offset, 50_000).records
        monkeypatch.setattr(os, "pread", real_pread)
        slices.append(fs)
        offset = max(b.header.next_offset for b in fs.batches())
    assert len(slices) > 10
    assert reads == [], f"fetches read the segment file to find where they end: {reads[:5]}"
    assert offset == log.log_end_offset
    log.close()


def test_a_disk_error_while_reading_reports_the_log_dir(monkeypatch, tmp_path):
    """An ``OSError`` under ``Log.read`` (here the header scan of a segment loaded from disk) becomes
    KAFKA_STORAGE_ERROR naming partition and dir, and marks the log failed, as every log operation does."""
    log = Log.open(tmp_path / "t-0")
    for i in range(5):
        log.append(_batch(3, 30, i))
    log.close()
    log = Log.open(tmp_path / "t-0")

    def failing_pread(fd, n, pos):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pread", failing_pread)
    with pytest.raises(KafkaStorageError, match=r"Error while reading records from t-0 in dir .*: "):
        log.read(4, 1000)
    monkeypatch.undo()
    assert log.failed and "reading records from t-0" in log.failed
    log.crash()
