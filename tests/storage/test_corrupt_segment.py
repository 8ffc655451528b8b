"""A corrupt closed segment (issue 24, item 3): served as Kafka serves it, without wedging anything.

Bytes overwritten in the middle of a closed segment while the broker is stopped. Kafka keeps serving:
consumers get the records before the bad batch and a CRC error at it, the other partitions and produce to
this one keep working. kafkalite also logs partition, segment file and offset the first time a fetch
runs into it, and never cuts a closed segment on recovery (a torn tail of the *active* segment is still
cut after an unclean stop).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalite.errors import CorruptRecordError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.records import build_batch, iter_batches
from kafkalite.storage import Log

SEGMENT = {"segment.bytes": 4096}


def corrupt_middle_batch(partition_dir: Path, *, header: bool = False) -> int:
    """Damage one batch in the middle of the partition's first (closed) segment; returns its offset.
    ``header``: wreck its length field (unreadable) instead of one payload byte (CRC mismatch)."""
    seg = sorted(partition_dir.glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    batches = list(iter_batches(data))
    pos, h = batches[len(batches) // 2]
    if header:
        data[pos + 8 : pos + 12] = b"\xff\xff\xff\xff"
    else:
        data[pos + h.batch_length + 12 - 3] ^= 0xFF  # inside the last record: only the CRC notices
    seg.write_bytes(bytes(data))
    return h.base_offset


def _write_log(d: Path, n: int = 100) -> None:
    log = Log.open(d, SEGMENT)
    for i in range(n):
        log.append(build_batch([(b"k", b"value-%03d" % i * 4)], timestamp=1000 + i))
    assert len(log.segments) > 2 or n < 50
    log.close()


def _read_all(log: Log) -> tuple[list[int], list[tuple[int, str]]]:
    """What a consumer loop sees: offsets read, and (offset, error) where it got stuck and skipped."""
    got, errors, off = [], [], log.log_start_offset
    while off < log.log_end_offset:
        try:
            fs = log.read(off, 2000, verify=True).records
            batches = list(fs.batches())
        except CorruptRecordError as e:
            errors.append((off, str(e)))
            off += 1
            continue
        except Exception as e:  # noqa: BLE001 - what a client's CRC check raises
            errors.append((off, str(e)))
            off = next(fs.headers()).next_offset
            continue
        for b in batches:
            got += [r.offset for r in b.records]
        off = batches[-1].header.next_offset
    return got, errors


# ----------------------------------------------------------------------------------------- storage


def test_a_crc_bad_batch_in_a_closed_segment_is_served_alone_after_the_good_ones(tmp_path):
    d = tmp_path / "c-0"
    _write_log(d)
    bad = corrupt_middle_batch(d)
    log = Log.open(d, SEGMENT)
    assert log.log_end_offset == 100, "nothing is cut from a closed segment"
    info = log.read(0, 1 << 20, verify=True)
    assert info.bad_batch is not None and info.bad_batch.offset == bad
    assert [r.offset for r in info.records.records()] == list(range(bad)), "served up to the bad batch"
    at = log.read(bad, 1 << 20, verify=True)
    assert [h.base_offset for h in at.records.headers()] == [bad], "the bad batch alone"
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(at.records.batches())
    assert f"c-0 at offset {bad}" in at.bad_batch.describe("c-0")
    assert "00000000000000000000.log" in at.bad_batch.describe("c-0")
    got, errors = _read_all(log)
    assert got == [o for o in range(100) if o != bad] and [e[0] for e in errors] == [bad]


def test_an_unreadable_header_in_a_closed_segment_answers_corrupt_message_naming_where(tmp_path):
    d = tmp_path / "c-0"
    _write_log(d)
    bad = corrupt_middle_batch(d, header=True)
    log = Log.open(d, SEGMENT)
    assert log.log_end_offset == 100
    assert [r.offset for r in log.read(0, 1 << 20, verify=True).records.records()] == list(range(bad))
    with pytest.raises(CorruptRecordError) as e:
        log.read(bad, 1 << 20, verify=True)
    assert f"c-0 at offset {bad}" in str(e.value) and "00000000000000000000.log" in str(e.value)
    nxt = log.segments[1].base_offset
    assert [r.offset for r in log.read(nxt, 100, verify=True).records.records()][0] == nxt
    seg = sorted(d.glob("*.log"))[0]
    assert b"\xff\xff\xff\xff" in seg.read_bytes(), "the damaged bytes are kept for the operator"


def test_recovery_still_cuts_a_torn_tail_of_the_active_segment(tmp_path):
    d = tmp_path / "c-0"
    _write_log(d, 10)
    log = Log.open(d, SEGMENT)
    end = log.log_end_offset
    active = log.active_segment.log_path
    log.crash()
    with open(active, "ab") as f:
        f.write(b"\x00" * 30)  # half a batch: an unclean stop mid-write
    again = Log.open(d, SEGMENT)
    assert again.log_end_offset == end and again.recovery_report.bytes_truncated == 30


# ----------------------------------------------------------------------------------------- simulator


def test_simulated_broker_serves_up_to_the_bad_batch_logs_it_and_keeps_working(tmp_path):
    c = Cluster(1, seed=3, dir=tmp_path)
    c.create_topic("c", 1, 1, config=SEGMENT)
    c.create_topic("ok", 1, 1)
    p = c.producer(config={"acks": "all", "linger.ms": 0})
    for i in range(100):  # one batch each
        p.send("c", b"value-%03d" % i * 4, partition=0)
        p.send("ok", b"%d" % i, partition=0)
        p.flush()
        c.run_for(20)
    c.shutdown(1, controlled=False)
    bad = corrupt_middle_batch(tmp_path / "broker-1" / "c-0")
    c.restart(1)
    assert c.run_until(lambda: c._partition_ready("c", 0), 30_000)

    consumer = c.consumer(config={"auto.offset.reset": "earliest"})
    tp = TopicPartition("c", 0)
    consumer.assign([tp])
    got: list[int] = []
    with pytest.raises(CorruptRecordError) as e:
        for _ in range(50):
            got += [r.offset for r in consumer.poll(500).get(tp, [])]
    assert got == list(range(bad)), "the records before the bad batch"
    assert f"partition {tp} at offset {bad}" in str(e.value) and "CRC" in str(e.value)
    logged = [ev for ev in c.net.events("corrupt_batch", node=1)]
    assert logged and "00000000000000000000.log" in logged[0].fields["error"], logged
    assert f"at offset {bad}" in logged[0].fields["error"]
    # Produce to the same partition, and the other topic, still work; seeking past the batch reads on.
    p.send("c", b"after", partition=0)
    p.flush()
    c.run_for(100)
    consumer.seek(tp, bad + 1)
    rest: list = []
    for _ in range(20):
        rest += consumer.poll(200).get(tp, [])
    assert [r.offset for r in rest] == list(range(bad + 1, 101)) and rest[-1].value == b"after"
    other = c.consumer(config={"auto.offset.reset": "earliest"})
    other.assign([TopicPartition("ok", 0)])
    seen: list = []
    for _ in range(20):
        seen += other.poll(200).get(TopicPartition("ok", 0), [])
    assert len(seen) == 100
    c.close()


# ----------------------------------------------------------------------------------------- processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    ck = pytest.importorskip("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0})
    for v in values:
        p.produce(topic, v, partition=0)
        p.flush(10)  # one batch per record: many batches, several segments
    assert p.flush(30) == 0


def _confluent_reads(bootstrap: str, topic: str) -> tuple[list[int], str]:
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "check.crcs": True,
                     "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got, error = [], ""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not error:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            error = f"{m.error()} offset={m.offset()}"
        else:
            got.append(m.offset())
    c.close()
    return got, error


def _kafka_python_reads(bootstrap: str, topic: str) -> tuple[list[int], str]:
    kp = pytest.importorskip("kafka")
    c = kp.KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, check_crcs=True)
    tp = kp.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got, error = [], ""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not error:
        try:
            for recs in c.poll(500).values():
                got += [r.offset for r in recs]
        except Exception as e:  # noqa: BLE001 - kafka-python's CorruptRecordError
            error = f"{type(e).__name__}: {e}"
    c.close()
    return got, error


def _check_clients(bootstrap: str, bad: int) -> None:
    got, error = _confluent_reads(bootstrap, "c")
    assert got == list(range(bad)), (bad, got[-5:])
    assert str(bad) in error and ("CRC" in error.upper() or "BAD_MSG" in error.upper()), error
    got, error = _kafka_python_reads(bootstrap, "c")
    assert got == list(range(bad)), (bad, got[-5:])
    assert "CorruptRecord" in error and f"offset {bad}" in error and "crc" in error.lower(), error
    # produce to the same partition and to another topic still works
    _produce(bootstrap, "c", [b"after"])
    _produce(bootstrap, "ok", [b"x"])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_server_start_keeps_serving_a_partition_with_a_corrupt_segment(tmp_path):
    pytest.importorskip("confluent_kafka")
    port = _free_port()
    log_path = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "kafkalite.cli", "server", "start", "--port", str(port), "--log-dir",
           str(tmp_path / "data"), "--override", "log.segment.bytes=4096", "--topic", "c:1:1",
           "--topic", "ok:1:1"]  # fmt: skip
    # The topics are named at each start: the partition directories (and their data) are found again.

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(cmd, stdout=log_path.open("ab"), stderr=subprocess.STDOUT)
        _wait_port(port)
        return proc

    proc = start()
    try:
        bs = f"127.0.0.1:{port}"
        _produce(bs, "c", [b"value-%03d" % i * 4 for i in range(150)])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    (part,) = (tmp_path / "data").glob("**/c-0")
    bad = corrupt_middle_batch(part)
    proc = start()
    try:
        _check_clients(f"127.0.0.1:{port}", bad)
        assert proc.poll() is None, "the broker is not wedged or gone"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    text = log_path.read_text()
    assert f"c-0 at offset {bad}" in text and "00000000000000000000.log" in text, text[-2000:]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cluster_start_keeps_the_partition_and_serves_up_to_the_corrupt_batch(tmp_path):
    pytest.importorskip("confluent_kafka")
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.host.processes import start_cluster, stop_cluster

    state = start_cluster(tmp_path, 1, config={"log.segment.bytes": "4096"})
    try:
        bs = state["bootstrap_servers"]
        with AdminClient(bs) as a:
            a.create_topic("c", 1, 1)
            a.create_topic("ok", 1, 1)
        _produce(bs, "c", [b"value-%03d" % i * 4 for i in range(150)])
    finally:
        stop_cluster(tmp_path)
    (part,) = tmp_path.glob("broker-*/c-0")
    bad = corrupt_middle_batch(part)
    state = start_cluster(tmp_path, 1, config={"log.segment.bytes": "4096"})
    try:
        bs = state["bootstrap_servers"]
        with AdminClient(bs) as a:
            (t,) = a.metadata(["c"])["topics"]
            assert t["error_code"] == 0 and t["partitions"][0]["error_code"] == 0
        _check_clients(bs, bad)
    finally:
        stop_cluster(tmp_path)
    text = "".join(p.read_text() for p in (tmp_path / "logs").glob("broker-*.log"))
    assert f"c-0 at offset {bad}" in text and "00000000000000000000.log" in text, text[-2000:]
