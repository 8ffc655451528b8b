"""How close does ``Log`` come to the file system under it?

Timings over the same pre-built batches, in one run:

(a) raw write: the batches written one by one into a single file (open, write per batch, fsync, close);
(b) ``Log.append`` of the same batches into a fresh log (open, append per batch, close, which fsyncs);
(c) raw read of the resulting segment files in 1 MiB chunks;
(d) ``Log.read`` + ``FileSlice.read`` over the whole log in 1 MiB fetches, as a consumer's fetches walk it.

Two more, to show where the gap between (a) and (b) lies, each timed like (a) with one write per batch
and no offsets stamped, no index kept:
(e) the least a log that checks its input can do, a follower's check: the batch header and CRC32C, as
    Kafka's broker does before any append;
(f) the least a leader can do: (e) plus the check of every record inside the batch (Kafka's
    LogValidator, ``storage.log_validator``), which ``Log.append`` runs as leader. Its record check
    remembers the batches' layout after the first batch, as it does for a producer that sends the same
    layout over and over.
(e) and (f) are ceilings for ``Log.append`` and the table gives its ratio to both.

Each write timing starts once the previous run's files are deleted and the delete is committed (an
fsync of their directory), so that no run pays for another's cleanup. Both write sides end with an
fsync: ``Log.close`` flushes its segment (and trims and syncs the indexes), as Kafka does on a clean
shutdown, so the raw writer fsyncs its file before closing too. No fsync per batch on either side
(``flush.messages`` keeps Kafka's default: never).
Reads come from the page cache (the files were just written; dropping the cache needs root), so (c)
and (d) measure CPU cost, not the disk. Each write timing is the best of ``repeats`` runs, each read
timing the best of ``3 * repeats`` (a read pass is short, so noise weighs more).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafkalite.harness.bench._report import JsonResult, per_s
from kafkalite.records import build_batch, iter_batches, stamp_batch
from kafkalite.records.batch import valid_header_fields
from kafkalite.storage import Log
from kafkalite.storage.checkpoint import fsync_dir
from kafkalite.storage.log_validator import validate_records

MiB = 1 << 20
FETCH_BYTES = 1 << 20
TARGET_RATIO = 0.9
READ_REPEAT_FACTOR = 3
BASE_TIMESTAMP = 1_700_000_000_000


@dataclass
class Timing:
    name: str
    seconds: float
    bytes: int
    records: int

    @property
    def mib_per_s(self) -> float:
        return per_s(self.bytes / MiB, self.seconds)

    @property
    def records_per_s(self) -> float:
        return per_s(self.records, self.seconds)

    def to_dict(self) -> dict:
        return {**asdict(self), "mib_per_s": self.mib_per_s, "records_per_s": self.records_per_s}


@dataclass
class StorageBenchResult(JsonResult):
    total_bytes: int
    records: int
    batches: int
    record_size: int
    batch_bytes: int
    repeats: int
    raw_write: Timing
    log_append: Timing
    raw_read: Timing
    log_read: Timing
    appended_equals_raw: bool
    segments: int
    checked_write_seconds: float = 0.0  # (e): batch check + one write per batch, open to fsync and close
    leader_write_seconds: float = 0.0  # (f): (e) plus the leader's record validation
    notes: list[str] = field(default_factory=list)

    @property
    def append_ratio(self) -> float:
        return self.log_append.mib_per_s / self.raw_write.mib_per_s

    @property
    def read_ratio(self) -> float:
        return self.log_read.mib_per_s / self.raw_read.mib_per_s

    @property
    def checked_write_ratio(self) -> float:
        """(e) against the raw write: the ceiling for any log that checks each batch before writing it."""
        return self.raw_write.seconds / self.checked_write_seconds if self.checked_write_seconds else 0.0

    @property
    def append_to_follower_ceiling(self) -> float:
        """Log.append against (e): how close it comes to a log that checks only batch headers."""
        return self.checked_write_seconds / self.log_append.seconds if self.log_append.seconds else 0.0

    @property
    def append_to_leader_ceiling(self) -> float:
        """Log.append against (f): how close it comes to a log that validates records as a leader must."""
        return self.leader_write_seconds / self.log_append.seconds if self.log_append.seconds else 0.0

    def per_batch_us(self, seconds: float) -> float:
        return seconds / self.batches * 1e6 if self.batches else 0.0

    def to_dict(self) -> dict:
        d = {
            k: v
            for k, v in asdict(self).items()
            if k not in ("raw_write", "log_append", "raw_read", "log_read")
        }
        for t in (self.raw_write, self.log_append, self.raw_read, self.log_read):
            d[t.name.replace(".", "_").replace(" ", "_").lower()] = t.to_dict()
        d.update(append_ratio=self.append_ratio, read_ratio=self.read_ratio, target_ratio=TARGET_RATIO)
        d["checked_write"] = {
            "seconds": self.checked_write_seconds,
            "us_per_batch": self.per_batch_us(self.checked_write_seconds),
            "ratio": self.checked_write_ratio,
            "append_ratio": self.append_to_follower_ceiling,
        }
        d["leader_write"] = {
            "seconds": self.leader_write_seconds,
            "us_per_batch": self.per_batch_us(self.leader_write_seconds),
            "validation_us_per_batch": self.per_batch_us(
                self.leader_write_seconds - self.checked_write_seconds
            ),
            "append_ratio": self.append_to_leader_ceiling,
        }
        return d

    def table(self) -> str:
        lines = [
            f"kafkalite storage benchmark: {self.total_bytes / MiB:.1f} MiB in {self.batches} batches of "
            f"~{self.batch_bytes} B, {self.records} records of {self.record_size} B",
            f"one fsync at the end of each write; best of {self.repeats} "
            f"(reads: of {READ_REPEAT_FACTOR * self.repeats})",
            f"{'phase':<12} {'seconds':>9} {'MiB/s':>9} {'records/s':>12}",
        ]
        for t in (self.raw_write, self.log_append, self.raw_read, self.log_read):
            lines.append(f"{t.name:<12} {t.seconds:>9.3f} {t.mib_per_s:>9.1f} {t.records_per_s:>12,.0f}")
        for label, r in (("append/raw-write", self.append_ratio), ("read/raw-read", self.read_ratio)):
            verdict = "ok" if r >= TARGET_RATIO else "below target"
            lines.append(f"{label:<17} {r:5.3f}  (target >= {TARGET_RATIO}: {verdict})")
        us = self.per_batch_us
        lines.append(
            f"per batch: raw write {us(self.raw_write.seconds):.1f} us, (e) batch check + write "
            f"{us(self.checked_write_seconds):.1f} us (ratio {self.checked_write_ratio:.2f}x of raw: the most a "
            f"log that checks CRCs can reach), (f) batch check + leader record validation + write "
            f"{us(self.leader_write_seconds):.1f} us, Log.append {us(self.log_append.seconds):.1f} us"
        )
        for label, r in (
            ("append/(e) follower ceiling (header check + write)", self.append_to_follower_ceiling),
            ("append/(f) leader ceiling (header + record validation + write)", self.append_to_leader_ceiling),
        ):
            verdict = "ok" if r >= TARGET_RATIO else "below target"
            lines.append(f"{label:<62} {r:5.3f}  (target >= {TARGET_RATIO}: {verdict})")
        lines.append(
            f"log segments: {self.segments}; appended bytes == raw bytes: {self.appended_equals_raw}"
        )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# inputs


def build_batches(
    total_bytes: int, record_size: int = 100, batch_bytes: int = 16384
) -> tuple[list[bytes], int]:
    """Batches of ``record_size``-byte values, each about ``batch_bytes`` long, adding up to >= total_bytes.

    One batch is encoded with ``build_batch``; the rest are copies given their own base offset with
    ``stamp_batch`` (the base offset sits outside the CRC), which builds 256 MiB in well under a second.
    Returns (batches, record count).
    """
    if record_size < 0 or batch_bytes <= 0 or total_bytes <= 0:
        raise ValueError("total_bytes and batch_bytes must be > 0, record_size >= 0")
    value = (os.urandom(16) * (record_size // 16 + 1))[:record_size]
    # Size one record by encoding two batches that differ by one record.
    one = len(build_batch([(None, value)], timestamp=BASE_TIMESTAMP))
    two = len(build_batch([(None, value)] * 2, timestamp=BASE_TIMESTAMP))
    per_record, header = two - one, 2 * one - two
    n = max(1, (batch_bytes - header) // per_record)
    while True:
        # Later records have longer offset/timestamp deltas than the sizing pair: shrink until it fits.
        template = build_batch([(None, value)] * n, timestamp=[BASE_TIMESTAMP + i for i in range(n)])
        if len(template) <= batch_bytes or n == 1:
            break
        n = max(1, n - -(-(len(template) - batch_bytes) // per_record))
    count = -(-total_bytes // len(template))
    batches = []
    for i in range(count):
        b = bytearray(template)
        stamp_batch(b, 0, base_offset=i * n)
        batches.append(bytes(b))
    return batches, count * n


def checked_write(path: Path, batches: list[bytes]) -> float:
    """Seconds to check each batch as the broker does (CRC32C included) and write it into a new file at
    ``path``, then fsync and close: (e) of the module docstring."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for b in batches:
            if valid_header_fields(b, 0) is None:
                raise ValueError("benchmark batch failed validation")
            os.write(fd, b)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def leader_checked_write(path: Path, batches: list[bytes]) -> float:
    """(f) of the module docstring: as ``checked_write``, plus the record validation ``Log.append``
    runs as leader (with a default topic config) before it writes a batch."""
    name = path.name
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for b in batches:
            f = valid_header_fields(b, 0)
            if f is None:
                raise ValueError("benchmark batch failed validation")
            validate_records(b, 0, f, name)
            os.write(fd, b)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def _settle(directory: Path) -> None:
    """Start a write timing from a quiet file system. The previous run's delete of its 256 MiB file is
    committed first (fsync of the directory that held it), or the next timing pays for it."""
    fsync_dir(directory)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------------------------------
# the four measurements


def raw_write(path: Path, batches: list[bytes]) -> float:
    """Seconds to write ``batches`` one write each into a new file at ``path``, fsync and close it."""
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for b in batches:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def log_append(log_dir: Path, batches: list[bytes], *, config: dict | None = None) -> float:
    """Seconds to open a fresh log at ``log_dir``, append each batch and close it (close fsyncs)."""
    t0 = time.perf_counter()
    log = Log.open(log_dir, config)
    try:
        append = log.append
        for b in batches:
            append(b)
    finally:
        log.close()
    return time.perf_counter() - t0


def segment_files(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("*.log"))


def raw_read(paths: list[Path], chunk: int = FETCH_BYTES) -> tuple[float, int]:
    """Seconds and bytes to read ``paths`` start to end in ``chunk``-byte reads.

    Each read returns a new ``bytes`` object, as ``FileSlice.read`` does: the same copy-out work, so the
    ratio measures only what ``Log.read`` adds (index lookup, batch boundaries).
    """
    total = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while data := f.read(chunk):
                total += len(data)
    return time.perf_counter() - t0, total


def log_read(log_dir: Path, fetch_bytes: int = FETCH_BYTES) -> tuple[float, int]:
    """Seconds and bytes to fetch the whole log ``fetch_bytes`` at a time, as a consumer's fetches would.

    Timed: ``Log.read`` plus ``FileSlice.read`` (what a broker does to serve a fetch). Not timed: opening
    the log (recovery scan) and the caller's walk over the batch headers of each fetch to learn the next
    fetch offset, which is consumer work.
    """
    log = Log.open(log_dir, read_only=True)
    total = 0
    elapsed = 0.0
    clock = time.perf_counter
    try:
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            t0 = clock()
            data = log.read(offset, fetch_bytes).records.read()
            elapsed += clock() - t0
            if not data:
                break
            total += len(data)
            *_, (_, last) = iter_batches(data)
            offset = last.next_offset
    finally:
        log.close()
    return elapsed, total


def run_storage_bench(
    total_mb: float = 256,
    record_size: int = 100,
    batch_bytes: int = 16384,
    directory: str | Path | None = None,
    *,
    repeats: int = 3,
    config: dict | None = None,
) -> StorageBenchResult:
    """Run (a)-(d) ``repeats`` times each on the same batches and keep the best time of each."""
    total_bytes = int(total_mb * MiB)
    batches, records = build_batches(total_bytes, record_size, batch_bytes)
    nbytes = sum(len(b) for b in batches)
    owned = directory is None
    root = Path(tempfile.mkdtemp(prefix="kafkalite-bench-") if owned else directory)
    root.mkdir(parents=True, exist_ok=True)
    try:
        raw_path = root / "raw.log"
        log_dir = root / "bench-0"
        checked = leader = float("inf")
        best = {
            "raw write": float("inf"),
            "Log.append": float("inf"),
            "raw read": float("inf"),
            "Log.read": float("inf"),
        }
        read_bytes = {}
        for _ in range(repeats):
            raw_path.unlink(missing_ok=True)
            _settle(root)
            best["raw write"] = min(best["raw write"], raw_write(raw_path, batches))
            _fresh(log_dir)
            _settle(root)
            best["Log.append"] = min(best["Log.append"], log_append(log_dir, batches, config=config))
            raw_path.unlink(missing_ok=True)
            _settle(root)
            checked = min(checked, checked_write(raw_path, batches))
            raw_path.unlink(missing_ok=True)
            _settle(root)
            leader = min(leader, leader_checked_write(raw_path, batches))
        segs = segment_files(log_dir)
        appended = b"".join(p.read_bytes() for p in segs) if nbytes <= 64 * MiB else None
        equal = (appended == b"".join(batches)) if appended is not None else _same_bytes(segs, batches)
        # A read pass takes tens of milliseconds, so it gets more tries against scheduling noise.
        for _ in range(READ_REPEAT_FACTOR * repeats):
            secs, read_bytes["raw read"] = raw_read(segs)
            best["raw read"] = min(best["raw read"], secs)
            secs, read_bytes["Log.read"] = log_read(log_dir)
            best["Log.read"] = min(best["Log.read"], secs)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
        else:
            raw_path.unlink(missing_ok=True)
            shutil.rmtree(log_dir, ignore_errors=True)
    timings = {name: Timing(name, secs, read_bytes.get(name, nbytes), records) for name, secs in best.items()}
    notes = [
        "reads are page-cache reads (the files were just written; dropping the cache needs root)",
        "batches are built before timing; a write timing includes open, one final fsync and close "
        "(Log.close flushes the log like Kafka's clean shutdown, so the raw writer fsyncs too)",
    ]
    if read_bytes.get("Log.read") != nbytes:
        notes.append(f"Log.read returned {read_bytes.get('Log.read')} bytes, expected {nbytes}")
    return StorageBenchResult(
        total_bytes=nbytes,
        records=records,
        batches=len(batches),
        record_size=record_size,
        batch_bytes=len(batches[0]),
        repeats=repeats,
        raw_write=timings["raw write"],
        log_append=timings["Log.append"],
        raw_read=timings["raw read"],
        log_read=timings["Log.read"],
        appended_equals_raw=equal,
        segments=len(segs),
        checked_write_seconds=checked,
        leader_write_seconds=leader,
        notes=notes,
    )


def _same_bytes(paths: list[Path], batches: list[bytes]) -> bool:
    """Compare segment files with the batches without holding both copies in memory."""
    it = iter(batches)
    pending = memoryview(b"")
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(FETCH_BYTES):
                view = memoryview(chunk)
                while view:
                    if not pending:
                        nxt = next(it, None)
                        if nxt is None:
                            return False
                        pending = memoryview(nxt)
                    k = min(len(view), len(pending))
                    if view[:k] != pending[:k]:
                        return False
                    view, pending = view[k:], pending[k:]
    return not pending and next(it, None) is None
