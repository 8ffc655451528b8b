"""The log side of transactions: the last stable offset, the aborted transaction index (``.txnindex``,
Kafka's layout), WriteTxnMarkers on the leader, and read_committed fetches that drop aborted records."""

from __future__ import annotations

import struct

import pytest

from kafkalite.errors import InvalidProducerEpochError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    ProducePartition,
    ProduceRequest,
    TopicPartition,
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from kafkalite.records import build_batch, build_control_batch, set_producer_fields
from kafkalite.storage import Log
from kafkalite.storage.transaction_index import AbortedTxn, read_txn_index, txn_index_path

TP = TopicPartition("t", 0)


def txn_batch(pid: int, seq: int, values: list[bytes], epoch: int = 0) -> bytes:
    buf = build_batch([(None, v, None) for v in values], timestamp=1000)
    return bytes(set_producer_fields(bytearray(buf), pid, epoch, seq, transactional=True))


def plain(values: list[bytes]) -> bytes:
    return build_batch([(None, v, None) for v in values], timestamp=1000)


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", {"segment.bytes": 4096})
    yield lg
    lg.close()


def test_an_open_transaction_holds_the_last_stable_offset(log):
    log.append(plain([b"a"]))  # 0
    log.append(txn_batch(1, 0, [b"t1", b"t2"]))  # 1, 2
    log.append(plain([b"b"]))  # 3
    assert log.first_unstable_offset() == 1
    assert log.last_stable_offset(high_watermark=4) == 1
    assert log.last_stable_offset(high_watermark=0) == 0  # never above the HW
    log.append(build_control_batch(True, 1, 0, 5, 1000))  # COMMIT at 4
    assert log.first_unstable_offset() is None and log.last_stable_offset(5) == 5
    assert log.aborted_transactions == []


def test_an_abort_is_indexed_in_kafkas_txnindex_layout(tmp_path, log):
    log.append(txn_batch(7, 0, [b"x"]))  # 0
    log.append(txn_batch(8, 0, [b"y"]))  # 1
    log.append(build_control_batch(False, 7, 0, 3, 1000))  # ABORT of 7 at 2; 8 still open from 1
    entry = AbortedTxn(7, 0, 2, 1)
    assert log.aborted_transactions == [entry]
    data = txn_index_path(log.dir, 0).read_bytes()
    assert data == struct.pack(">hqqqq", 0, 7, 0, 2, 1) and len(data) == 34
    assert log.collect_aborted(0, 10) == [entry]
    assert log.collect_aborted(3, 10) == []  # ended before the range
    assert log.last_stable_offset(10) == 1


def test_the_index_survives_restart_truncation_and_segment_deletion(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, {"segment.bytes": 300}) as lg:
        lg.append(txn_batch(7, 0, [b"x" * 100]))
        lg.append(build_control_batch(False, 7, 0, 3, 1000))
        lg.append(txn_batch(7, 1, [b"y" * 100]))
        lg.append(build_control_batch(False, 7, 0, 3, 1000))
        first_two = lg.aborted_transactions
    assert len(first_two) == 2
    with Log.open(d, {"segment.bytes": 300}) as lg:
        assert lg.aborted_transactions == first_two
        lg.truncate_to(3)
        assert lg.aborted_transactions == first_two[:1]
        assert sum(len(read_txn_index(p)) for p in d.glob("*.txnindex")) == 1
        lg.append(plain([b"z" * 200]))
        lg.roll()
        lg.append(plain([b"w"]))
        lg.delete_records(lg.log_end_offset - 1)
        lg.delete_old_segments()
        assert lg.aborted_transactions == [] and not list(d.glob("*.txnindex"))


def test_a_marker_from_an_older_epoch_is_fenced(log):
    log.append(txn_batch(7, 0, [b"x"], epoch=3))
    with pytest.raises(InvalidProducerEpochError, match="older than the producer's epoch 3"):
        log.append(build_control_batch(True, 7, 2, 0, 1000))


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=2)
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    return c


def _produce(c: Cluster, data: bytes) -> None:
    resp = c.request(
        c.leader("t", 0), ProduceRequest(acks=-1, partitions=(ProducePartition(tp=TP, records=data),))
    )
    assert resp.partitions[0].error_code == 0


def _markers(c: Cluster, pid: int, committed: bool) -> int:
    req = WriteTxnMarkersRequest(
        markers=(WritableTxnMarker(producer_id=pid, producer_epoch=0, committed=committed, partitions=(TP,)),)
    )
    resp = c.request(c.leader("t", 0), req)
    return resp.markers[0].partitions[0].error_code


def _read(c: Cluster, isolation: str) -> list[bytes]:
    consumer = c.consumer(isolation_level=isolation, auto_offset_reset="earliest")
    consumer.assign([TP])
    out: list[bytes] = []
    for _ in range(20):
        for recs in consumer.poll(200).values():
            out += [r.value for r in recs]
    consumer.close()
    return out


def test_read_committed_sees_committed_records_only_and_waits_for_open_ones(cluster):
    _produce(cluster, plain([b"p1"]))
    _produce(cluster, txn_batch(11, 0, [b"c1", b"c2"]))
    _produce(cluster, txn_batch(12, 0, [b"a1"]))
    _produce(cluster, plain([b"p2"]))
    assert _read(cluster, "read_committed") == [b"p1"]  # stops at the first open transaction (LSO)
    assert _markers(cluster, 11, True) == 0
    assert _markers(cluster, 12, False) == 0
    assert _read(cluster, "read_committed") == [b"p1", b"c1", b"c2", b"p2"]
    assert _read(cluster, "read_uncommitted") == [b"p1", b"c1", b"c2", b"a1", b"p2"]
    # Every replica has the abort in its own index, rebuilt from the replicated marker.
    for b in cluster.replicas("t", 0):
        assert [
            (e.producer_id, e.first_offset) for e in cluster.replica(b, "t", 0).log.aborted_transactions
        ] == [(12, 3)]


def test_the_spark_source_reads_committed_records_only_with_read_committed(cluster):
    from kafkalite.spark.source import plan_ranges, read_range

    _produce(cluster, plain([b"p1"]))
    _produce(cluster, txn_batch(21, 0, [b"c1"]))
    _produce(cluster, txn_batch(22, 0, [b"a1", b"a2"]))
    assert _markers(cluster, 21, True) == 0
    assert _markers(cluster, 22, False) == 0
    _produce(cluster, plain([b"p2"]))
    cluster.checkpoint_high_watermarks()

    def spark_values(isolation: str) -> list[bytes]:
        opts = {"path": str(cluster.dir), "subscribe": "t", "kafka.isolation.level": isolation}
        out = []
        for rng in plan_ranges(opts):
            for batch in read_range(cluster.dir, rng, read_committed=isolation == "read_committed"):
                out += batch.column("value").to_pylist()
        return out

    assert spark_values("read_committed") == [b"p1", b"c1", b"p2"]
    assert spark_values("read_uncommitted") == [b"p1", b"c1", b"a1", b"a2", b"p2"]
