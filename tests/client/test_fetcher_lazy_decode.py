"""The consumer builds a fetch's records as ``poll`` takes them (Kafka's CompletedFetch), not all at once,
and a batch that turns out bad while being decoded ends the records as it did when decoding was eager."""

from __future__ import annotations

import struct

import pytest

from kafkalite.client.fetcher import PendingBatches
from kafkalite.errors import CorruptRecordError
from kafkalite.protocol import TopicPartition
from kafkalite.records import BATCH_HEADER_SIZE, build_values_batch, decode_batches, stamp_batch
from kafkalite.records.batch import compute_crc

TP0 = TopicPartition("t", 0)
T0 = 1_700_000_000_000


def test_a_fetch_is_decoded_as_poll_takes_it(make_cluster) -> None:
    cluster = make_cluster(brokers=1, seed=3)
    cluster.create_topic("t", partitions=1, replication_factor=1)
    producer = cluster.producer(linger_ms=5)
    values = [b"%04d" % i + b"x" * 200 for i in range(2000)]  # about 75 records a batch
    futures = [producer.send("t", v, partition=0) for v in values]
    assert cluster.run_until(lambda: all(f.done() for f in futures), 20_000)
    consumer = cluster.consumer(auto_offset_reset="earliest", max_poll_records=10)
    consumer.assign([TP0])
    st = consumer._subscriptions.assigned[TP0]
    got = consumer.poll(1_000)[TP0]
    assert len(got) == 10
    fetches = consumer.metrics["fetch-total"]
    # One fetch brought every record; only the next poll's worth and the rest of a batch are built.
    assert st.pending is not None
    assert 0 < len(st.buffer) < 200, len(st.buffer)
    while len(got) < len(values):
        more = consumer.poll(1_000).get(TP0, [])
        assert more, "poll returned nothing before every record was read"
        assert len(more) <= 10
        got += more
        assert consumer.position(TP0) == got[-1].offset + 1
        if st.buffer or st.pending is not None:
            assert consumer.metrics["fetch-total"] == fetches  # no fetch while that one lasts
    assert [r.offset for r in got] == list(range(len(values)))
    assert [r.value for r in got] == values


def _batch(value: bytes, base_offset: int, *, bad_records: bool = False) -> bytes:
    """Three records; with ``bad_records`` the first record's length is wrong but the CRC is right,
    so only decoding the records can find it."""
    b = bytearray(build_values_batch([value] * 3, [T0] * 3))
    stamp_batch(b, 0, base_offset=base_offset)
    if bad_records:
        b[BATCH_HEADER_SIZE] = 0x7E  # a record length of 63: past the end of the batch
        struct.pack_into(">I", b, 17, compute_crc(b))
    return bytes(b)


@pytest.fixture
def bad_after_good() -> bytes:
    good, bad = _batch(b"a", 0), _batch(b"b", 3, bad_records=True)
    with pytest.raises(CorruptRecordError):
        decode_batches(bad, [0], verify_crc=True)
    decode_batches(good, [0], verify_crc=True)
    return good + bad


def _pending_consumer(cluster, data: bytes, positions: list[int], position: int, max_poll_records: int):
    cluster.create_topic("t", partitions=1, replication_factor=1)
    consumer = cluster.consumer(max_poll_records=max_poll_records)
    consumer.assign([TP0])
    consumer.seek(TP0, position)
    st = consumer._subscriptions.assigned[TP0]
    st.pending = PendingBatches(data, positions, [3] * len(positions), position)
    st.buffer_end = 6
    return consumer, st


def test_a_bad_batch_met_after_records_were_returned_ends_them_without_an_error(
    make_cluster, bad_after_good
) -> None:
    cluster = make_cluster(brokers=1, seed=3)
    consumer, st = _pending_consumer(cluster, bad_after_good, [0, len(bad_after_good) // 2], 0, 2)
    assert [r.offset for r in consumer.poll(0)[TP0]] == [0, 1]
    assert [r.offset for r in consumer.poll(0)[TP0]] == [2]
    # The records stop before the bad batch; the position waits there (a fetch from it will say why).
    assert (consumer.position(TP0), st.pending, st.error) == (3, None, None)


@pytest.mark.parametrize("with_good_batch", [False, True])
def test_a_bad_batch_before_any_record_is_the_next_polls_error(
    make_cluster, bad_after_good, with_good_batch
) -> None:
    """Alone, or after a batch whose records all lie below the position: nothing comes before it."""
    cluster = make_cluster(brokers=1, seed=3)
    positions = [0, len(bad_after_good) // 2] if with_good_batch else [len(bad_after_good) // 2]
    consumer, _st = _pending_consumer(cluster, bad_after_good, positions, 3, 500)
    with pytest.raises(CorruptRecordError, match="partition t-0 at offset 3 is invalid"):
        consumer.poll(100)
    assert consumer.position(TP0) == 3
