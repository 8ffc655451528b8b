"""Producer rules checked against Kafka's client: ``buffer.memory`` as a total, splitting by
``batch.size`` (KAFKA-8350), a partitioner answer past the partition count, and the metadata that the
callback of a failed send receives."""

from __future__ import annotations

import random

from kafkalite.client.accumulator import RecordMetadata
from kafkalite.client.partitioner import partition_for_key
from kafkalite.errors import BufferExhaustedError, RequestTimedOutError
from kafkalite.protocol import TopicPartition
from kafkalite.records import decode_batch_tuples
from tests.client.test_producer import produce_requests, setup

T0 = TopicPartition("t", 0)


def _records_per_request(cluster) -> list[list[int]]:
    return [[len(decode_batch_tuples(p.records)[1]) for p in r.partitions] for r in produce_requests(cluster)]


def _warm(net, p) -> None:
    """One acknowledged send, so that the producer knows the topic (a send before that waits for
    metadata instead) and its offsets start at 1."""
    assert net.run_until(p.send("t", b"warm").done, 1000)


# ------------------------------------------------------------------------------------ buffer.memory


def _two_batches_of_memory(**config):
    # 900-byte values: each fills a 1,000-byte batch alone, and 2,500 bytes hold two such batches.
    net, cluster, p = setup(batch_size=1000, buffer_memory=2500, linger_ms=0, **config)
    _warm(net, p)
    cluster.brokers[0].delay_ms = 100
    return net, cluster, p


def test_a_send_blocks_until_completed_batches_free_memory():
    net, _, p = _two_batches_of_memory()
    start = net.now_ms()
    first = [p.send("t", bytes(900)) for _ in range(2)]
    assert net.now_ms() == start
    third = p.send("t", bytes(900))  # no memory left: send() runs the network until a batch completes
    assert start + 100 < net.now_ms() < start + 120 and first[0].done()  # one batch's memory is enough
    net.run_for(500)
    assert third.result().offset == 3


def test_a_send_that_waits_longer_than_max_block_ms_fails_with_buffer_exhausted():
    net, cluster, p = _two_batches_of_memory(max_block_ms=300)
    cluster.brokers[0].delay_ms = 10_000
    p.send("t", bytes(900))
    p.send("t", bytes(900))
    seen = []
    start = net.now_ms()
    fut = p.send("t", bytes(900), callback=lambda md, err: seen.append((md, err)))
    assert net.now_ms() == start + 300
    assert isinstance(fut.exception(), BufferExhaustedError) and fut.exception().retriable
    assert "2500" in str(fut.exception())
    assert seen == [(RecordMetadata("t", 0, -1, -1), fut.exception())]
    assert p.history[-1].error == "BufferExhaustedException"


def test_memory_is_a_total_across_partitions():
    net, cluster, p = setup(partitions=3, batch_size=1000, buffer_memory=2500, linger_ms=50, max_block_ms=40)
    _warm(net, p)
    cluster.brokers[0].delay_ms = 10_000
    ok = [p.send("t", b"x", partition=i) for i in range(2)]
    refused = p.send("t", b"x", partition=2)  # a third open batch would make 3,000 bytes
    assert isinstance(refused.exception(), BufferExhaustedError)
    net.run_for(11_000)
    assert [f.result().partition for f in ok] == [0, 1]
    start = net.now_ms()
    assert p.send("t", b"x", partition=2).exception() is None and net.now_ms() == start  # memory is back


def test_records_joining_an_open_batch_take_no_new_memory():
    net, _, p = setup(batch_size=1000, buffer_memory=1000, linger_ms=50)
    _warm(net, p)
    start = net.now_ms()
    futs = [p.send("t", bytes(10)) for _ in range(20)]
    assert net.now_ms() == start  # no send blocked
    net.run_for(100)
    assert [f.result().offset for f in futs] == list(range(1, 21))


def test_a_send_inside_the_run_loop_cannot_block_and_fails_at_once():
    net, cluster, p = _two_batches_of_memory(max_block_ms=60_000)
    cluster.brokers[0].delay_ms = 10_000
    p.send("t", bytes(900))
    inner = []
    net.after(5, lambda: inner.append((net.now_ms(), p.send("t", bytes(900)), p.send("t", bytes(900)))))
    net.run_for(10)
    now, second, third = inner[0]
    assert second.exception() is None and not second.done()
    assert isinstance(third.exception(), BufferExhaustedError) and now == net.now_ms() - 5


# ----------------------------------------------------------------------- MESSAGE_TOO_LARGE (KAFKA-8350)


def test_message_too_large_splits_by_batch_size_then_halves_a_split_batch():
    net, cluster, p = setup(linger_ms=20)
    cluster.brokers[0].errors[T0] = [10, 10]
    futs = [p.send("t", f"r{i:02d}".encode()) for i in range(20)]
    net.run_for(500)
    # 20 small records fit one batch.size batch: the first split changes nothing, as in Kafka; a batch
    # that was already split is halved (KAFKA-8350) so that the retries converge.
    # Halving means half the batch's bytes, header included: 6 records of ~10 bytes each.
    assert _records_per_request(cluster) == [[20], [20], [6], [6], [6], [2]]
    assert [f.result().offset for f in futs] == list(range(20))
    assert p.metrics["batch-split-total"] == 2


def test_split_by_batch_size_makes_batches_no_larger_than_batch_size():
    net, cluster, p = setup(linger_ms=20, batch_size=1000, compression_type="gzip")
    _warm(net, p)
    # A learned ratio of 0.1 lets a 1,000-byte batch take about 10 KB of records; these do not compress.
    p.accumulator.ratios.reset("t", p._compression, 0.1)
    rng = random.Random(7)
    cluster.brokers[0].errors[T0] = [10]
    futs = [p.send("t", rng.randbytes(200)) for _ in range(40)]
    net.run_for(1000)
    # The first batch closed at 34 records (its estimate reached batch.size); split by batch.size, each
    # batch takes 4 (61 + 4 x 206 bytes fit in 1,000, a fifth record does not). The other 6 records
    # were batched before the split and go as they are.
    assert _records_per_request(cluster)[1:] == [[34]] + [[4]] * 8 + [[2], [6]]
    assert [f.result().offset for f in futs] == list(range(1, 41))
    assert p.accumulator.ratios.estimation("t", p._compression) >= 1.0  # reset by the split


# --------------------------------------------------------------------- partitioner past the count


class _Fixed:
    def __init__(self, partition: int) -> None:
        self.answer = partition

    def partition(self, topic, key, value, num_partitions, available):
        return self.answer


def test_a_partitioner_answer_past_the_count_waits_then_expires():
    net, cluster, p = setup(partitioner_class=_Fixed(5), delivery_timeout_ms=2000, request_timeout_ms=1000)
    seen = []
    fut = p.send("t", b"x", callback=lambda md, err: seen.append((md, err)))
    assert not fut.done()
    net.run_for(1900)
    assert not fut.done() and produce_requests(cluster) == []
    net.run_for(200)
    assert isinstance(fut.exception(), RequestTimedOutError) and "t-5" in str(fut.exception())
    assert seen == [(RecordMetadata("t", 5, -1, -1), fut.exception())]


def test_a_partitioner_answer_past_the_count_is_sent_once_the_topic_grows():
    net, cluster, p = setup(partitioner_class=_Fixed(5), metadata_max_age_ms=500)
    fut = p.send("t", b"x")
    net.run_for(100)
    cluster.create("t", 6)
    net.run_for(2000)
    assert fut.result().partition == 5 and cluster.values("t", 5) == [b"x"]


def test_an_idle_producer_refreshes_its_metadata_and_keys_go_by_the_new_count():
    """Kafka's Sender polls the network client, which refreshes metadata every metadata.max.age.ms, busy
    or not: a producer that sat idle while the topic grew hashes its next key by the new count."""
    net, cluster, p = setup(partitions=2, metadata_max_age_ms=1000)
    _warm(net, p)
    cluster.create("t", 8)
    net.run_for(1500)  # idle past metadata.max.age.ms
    key = next(k for k in (f"key-{i}".encode() for i in range(100)) if partition_for_key(k, 8) >= 2)
    fut = p.send("t", b"v", key=key)
    assert net.run_until(fut.done, 1000)
    assert fut.result().partition == partition_for_key(key, 8)


# -------------------------------------------------------------------- callbacks of failed sends


def test_early_failure_callbacks_get_topic_and_partition():
    net, _, p = setup(partitions=3, max_request_size=1000)
    seen = []
    p.send("t", bytes(2000), partition=2, callback=lambda md, err: seen.append(md))
    p.send("t", bytes(2000), callback=lambda md, err: seen.append(md))
    assert seen == [RecordMetadata("t", 2, -1, -1), RecordMetadata("t", -1, -1, -1)]


def test_batch_failure_callbacks_get_topic_and_partition():
    net, cluster, p = setup(linger_ms=0)
    cluster.brokers[0].errors[T0] = [10]
    seen = []
    p.send("t", b"v", callback=lambda md, err: seen.append((md, err.name)))
    net.run_for(100)
    assert seen == [(RecordMetadata("t", 0, -1, -1), "MESSAGE_TOO_LARGE")]
