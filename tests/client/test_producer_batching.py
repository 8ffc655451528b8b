"""The producer's batching and partition choices against Kafka's client: exact record sizes decide when a
batch is full (``hasRoomFor``), the built-in sticky partitioner switches the way ``RecordAccumulator``
lets it, configured partitioners are asked again for a new batch, and a ready broker takes every
partition's first batch. Expected numbers are what Kafka's client does with the same inputs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.client import partitioner as partitioner_module
from kafkalite.client import producer as producer_module
from kafkalite.client.accumulator import CompressionRatioEstimator, batch_size_upper_bound
from kafkalite.errors import MessageTooLargeError
from kafkalite.protocol import MetadataRequest
from kafkalite.records import (
    BATCH_HEADER_SIZE,
    Compression,
    build_batch,
    decode_batch_tuples,
    record_size,
)
from kafkalite.records.record import encode_record
from tests.client.test_producer import produce_requests, setup


@pytest.fixture
def sequential_choices(monkeypatch):
    """Make the built-in partitioner's random draws 0, 1, 2, ... (Kafka's tests do the same)."""
    counter = itertools.count()
    monkeypatch.setattr(partitioner_module.BuiltInPartitioner, "random_partition", lambda self: next(counter))


def _warm(net, p):
    """Fetch metadata and send one keyed record, so timed sends start on a known sticky state."""
    p.send("t", b"w", key=b"k")
    net.run_for(10)
    p.flush()
    net.run_for(100)


def _load_metadata(net, p):
    """Learn topic t's partitions without sending anything through a partitioner."""
    p.metadata.add_topic("t")
    p.metadata.request_update()
    p.flush()
    net.run_for(50)
    assert p.partitions_for("t")


def _runs(futures) -> list[tuple[int, int]]:
    return [(k, len(list(g))) for k, g in itertools.groupby(f.partition for f in futures)]


def _batch_counts(p) -> dict[int, list[int]]:
    return {tp.partition: [b.record_count for b in dq] for tp, dq in p.accumulator.batches.items() if dq}


# ------------------------------------------------------------------------------------------ record sizes


@given(
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=20_000),
    headers=st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=3),
)
@settings(max_examples=200, deadline=None)
def test_record_size_is_the_encoded_size(offset_delta, timestamp_delta, key, value, headers):
    out = bytearray()
    encode_record(out, offset_delta, timestamp_delta, key, value, headers)
    assert record_size(offset_delta, timestamp_delta, key, value, headers) == len(out)
    # The upper bound holds whatever the deltas.
    assert len(out) <= batch_size_upper_bound(key, value, headers) - BATCH_HEADER_SIZE


@pytest.mark.parametrize(("value_size", "per_batch"), [(100, 148), (10, 910), (1000, 16)])
def test_a_default_batch_holds_what_kafkas_holds(value_size, per_batch, sequential_choices):
    net, _, p = setup(partitions=3, linger_ms=100_000, seed=1)
    _warm(net, p)
    for _ in range(per_batch + 1):
        p.send("t", bytes(value_size))
    first = next(dq for dq in p.accumulator.batches.values() if dq)
    assert first[0].record_count == per_batch
    # The first batch is exactly as large as its bytes will be, and the next record did not fit.
    assert first[0].size == len(first[0].encode(Compression.NONE)) <= 16384
    assert first[0].size + record_size(per_batch, 0, None, bytes(value_size)) > 16384


@pytest.mark.parametrize(
    ("value_size", "run"),
    [(100, 296), (1000, 32)],  # two full batches per partition, then the switch
)
def test_uniform_sticky_switches_after_batch_size_bytes(value_size, run, sequential_choices):
    net, _, p = setup(partitions=3, linger_ms=100_000, seed=1)
    _warm(net, p)
    futures = [p.send("t", bytes(value_size)) for _ in range(run * 4)]
    assert _runs(futures) == [(0, run), (1, run), (2, run), (0, run)]


def test_small_records_stay_until_twice_batch_size(sequential_choices):
    net, _, p = setup(partitions=3, linger_ms=100_000, seed=1)
    _warm(net, p)
    futures = [p.send("t", bytes(10)) for _ in range(1200)]
    assert _runs(futures) == [(0, 1200)]
    assert _batch_counts(p) == {0: [910, 290]}


def test_a_held_back_switch_happens_once_the_batch_is_sent(sequential_choices):
    # 1000-byte batches, six 100-byte records per round, each round's batch sent by linger.ms. The
    # switch is due during round 2 (over 1000 bytes) but its batch is still open; Kafka makes it at the
    # start of round 3, when the partition has no open batch left.
    net, _, p = setup(partitions=3, linger_ms=10, seed=1, batch_size=1000)
    _warm(net, p)
    rounds = []
    for _ in range(3):
        rounds.append({f.partition for f in [p.send("t", bytes(100)) for _ in range(6)]})
        net.run_for(50)
    assert rounds == [{0}, {0}, {1}]


# ------------------------------------------------------------------------------ configured partitioners


def _round_robin(linger_ms: int):
    """Two partitions, 1000-byte batches, Kafka's RoundRobinPartitioner, metadata loaded."""
    net, cluster, p = setup(
        partitions=2, linger_ms=linger_ms, batch_size=1000,
        partitioner_class="org.apache.kafka.clients.producer.RoundRobinPartitioner",
    )  # fmt: skip
    _load_metadata(net, p)
    return net, cluster, p


def test_round_robin_spreads_evenly_over_two_partitions():
    net, _, p = _round_robin(100_000)
    futures = [p.send("t", bytes(100)) for _ in range(40)]
    assert [f.partition for f in futures] == [0, 1] * 20
    assert _batch_counts(p) == {0: [8, 8, 4], 1: [8, 8, 4]}


def test_a_new_batch_asks_a_configured_partitioner_twice():
    calls = []

    class Alternating:
        def partition(self, topic, key, value, num_partitions, available=None):
            calls.append(len(calls))
            return len(calls) % num_partitions

    net, _, p = setup(partitions=2, linger_ms=100_000, partitioner_class=Alternating())
    _load_metadata(net, p)
    futures = [p.send("t", bytes(10)) for _ in range(6)]
    # The first record would open a batch on partition 1, so the partitioner is asked again and says 0.
    # From then on every answer of 1 finds no batch there and is followed by a second answer, 0.
    assert len(calls) == 12
    assert [f.partition for f in futures] == [0, 0, 0, 0, 0, 0]


def test_batches_never_pass_batch_size_after_a_second_choice():
    net, cluster, p = _round_robin(0)
    for _ in range(40):
        p.send("t", bytes(100))
    net.run_for(100)
    sizes = [len(pp.records) for r in produce_requests(cluster) for pp in r.partitions]
    assert sizes and max(sizes) <= 1000


# -------------------------------------------------------------------------------------------- sending


def test_a_ready_broker_takes_lingering_batches_along():
    net, cluster, p = setup(partitions=2, linger_ms=100, seed=1)
    p.send("t", b"warm", partition=0)
    net.run_for(300)
    before = len(produce_requests(cluster))
    p.send("t", b"a", partition=0)
    net.run_for(50)
    p.send("t", b"b", partition=1)  # lingers until t+150, but p0 is ready at t+100
    net.run_for(200)
    requests = produce_requests(cluster)[before:]
    assert [[pp.tp.partition for pp in r.partitions] for r in requests] == [[0, 1]]


def test_only_a_ready_partition_makes_a_broker_ready_again():
    net, cluster, p = setup(linger_ms=10_000, batch_size=1000)
    net.run_for(10)
    for i in range(30):
        p.send("t", bytes([i]) * 100)
    net.run_for(20)  # three full batches go; the open fourth waits for linger.ms
    counts = [
        len(decode_batch_tuples(pp.records)[1]) for r in produce_requests(cluster) for pp in r.partitions
    ]
    assert counts == [8, 8, 8]


# ------------------------------------------------------------------------------------------- send checks


@pytest.mark.parametrize(("value_size", "too_large"), [(914, False), (915, True)])
def test_max_request_size_is_checked_against_the_upper_bound(value_size, too_large):
    # 61 (batch header) + 21 (most record overhead) + 1 (null key) + 2 + 915 (value) + 1 (headers) = 1001.
    net, _, p = setup(max_request_size=1000, linger_ms=0)
    future = p.send("t", bytes(value_size))
    net.run_for(50)
    assert isinstance(future.exception(), MessageTooLargeError) is too_large


def test_buffer_memory_is_named_when_it_is_the_limit():
    net, _, p = setup(buffer_memory=500, linger_ms=0)
    error = p.send("t", bytes(600)).exception()
    assert isinstance(error, MessageTooLargeError) and "buffer.memory" in str(error)


@pytest.mark.parametrize(("field", "bad"), [("partition", -1), ("timestamp", -5)])
def test_negative_partition_or_timestamp_is_refused(field, bad):
    net, _, p = setup(partitions=3)
    with pytest.raises(ValueError, match=f"invalid {field}"):
        p.send("t", b"x", **{field: bad})


# ------------------------------------------------------------------------------------------- compression


def test_compression_ratio_estimator_steps():
    est = CompressionRatioEstimator()
    assert est.estimation("t", 1) == 1.0
    assert est.update("t", 1, 0.3) == pytest.approx(0.995)  # better: down by 0.005 at most
    assert est.update("t", 1, 1.2) == pytest.approx(1.2)  # worse: up to the observed ratio at once
    assert est.update("t", 1, 1.21) == pytest.approx(1.25)  # worse, but by at least 0.05
    assert est.estimation("t", 2) == 1.0 and est.estimation("u", 1) == 1.0


def test_compressed_batches_grow_as_the_estimate_improves():
    net, _, p = setup(linger_ms=0, compression_type="gzip")
    _load_metadata(net, p)
    counts = []
    for _ in range(4):
        for _ in range(200):
            p.send("t", bytes(100))
        counts.append([b.record_count for dq in p.accumulator.batches.values() for b in dq][0])
        net.run_for(100)
    # First batch: 61 + 1.05 x the records' bytes must fit, so fewer records than uncompressed (148).
    assert counts[0] == 141
    assert counts == sorted(counts) and counts[-1] > counts[0]


@given(
    steps=st.lists(
        st.tuples(st.integers(0, 9000), st.integers(1, 40), st.integers(0, 70)), min_size=1, max_size=12
    )
)
@settings(max_examples=40, deadline=None)
def test_batch_sizes_are_exact_whatever_the_values_and_timing(steps):
    # Value lengths and clock gaps cross the varint widths the fast path assumes constant.
    net, cluster, p = setup(partitions=2, linger_ms=150, seed=3)
    _load_metadata(net, p)
    for value_size, count, gap in steps:
        for _ in range(count):
            p.send("t", bytes(value_size))
        for dq in p.accumulator.batches.values():
            for b in dq:
                # Encoding a copy: encode() itself would close the batch to further records.
                assert b.size == len(build_batch(b.records, timestamp=b.timestamps))
        net.run_for(gap)
    net.run_for(200)
    for r in produce_requests(cluster):
        for pp in r.partitions:
            n = len(decode_batch_tuples(pp.records)[1])
            assert n == 1 or len(pp.records) <= 16384


@given(
    index=st.integers(0, 20_000),
    delta=st.integers(0, 2**41),
    vlen=st.integers(0, 70_000),
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_a_send_regime_gives_exact_record_sizes(index, delta, vlen, data):
    """Inside a regime of the fast path (value length lmin..lmax, index below idx_end, timestamp delta up
    to the regime's end), a record's exact size is ``c`` plus its value length."""
    hot = producer_module._HotBatch.__new__(producer_module._HotBatch)
    hot.stamps = [1_000]
    if not producer_module._regime(hot, index, 1_000 + delta, vlen, 1_048_576):
        assert vlen > 1_048_576 - 200  # only a value near max.request.size has no regime
        return
    assert hot.lmin <= vlen <= hot.lmax and index < hot.idx_end and 1_000 + delta <= hot.ts_end
    i = data.draw(st.integers(index, hot.idx_end - 1))
    d = data.draw(st.integers(delta, hot.ts_end - 1_000))
    v = data.draw(st.integers(hot.lmin, hot.lmax))
    assert record_size(i, d, None, bytes(v), None) == hot.c + v


def _requests_and_outcomes(steps, fast: bool, monkeypatch) -> tuple[list, list]:
    """Run ``steps`` (value size, sends, then ms of network) on a fresh producer; with ``fast`` off,
    ``send()``'s fast path never opens, so every record takes the full path."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(producer_module.Producer, "_make_hot", lambda *a, **k: None)
        net, cluster, p = setup(partitions=3, linger_ms=40, seed=5)
        _load_metadata(net, p)
        futures = []
        for value_size, count, gap in steps:
            futures += [p.send("t", bytes([value_size % 251]) * value_size) for _ in range(count)]
            net.run_for(gap)
        p.flush()
        net.run_for(500)
        if not fast:
            assert not p._hot  # the patch held: no send took the fast path
        requests = [(pp.tp, pp.records) for r in produce_requests(cluster) for pp in r.partitions]
        return requests, [f.result() for f in futures]


@given(
    steps=st.lists(
        st.tuples(st.sampled_from([0, 1, 63, 64, 100, 8000, 8200]), st.integers(1, 90), st.integers(0, 70)),
        min_size=1,
        max_size=10,
    )
)
@settings(max_examples=40, deadline=None)
def test_the_fast_path_builds_the_batches_the_full_path_builds(steps):
    """Byte for byte the same batches, partitions and offsets, with sends that cross the offset delta's
    (record 64), the timestamp delta's (64 ms) and the value length's varint widths."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _requests_and_outcomes(steps, True, monkeypatch) == _requests_and_outcomes(
            steps, False, monkeypatch
        )


# --------------------------------------------------------------------------------- adaptive partitioning


def test_adaptive_weights_wait_until_every_partition_had_a_batch():
    # One request in flight and the network not run: batches queue behind it.
    net, _, p = setup(
        partitions=3, linger_ms=100_000, batch_size=200, max_in_flight_requests_per_connection=1
    )
    _load_metadata(net, p)
    state = p.partitioner.built_in("t")
    for _ in range(6):
        p.send("t", bytes(100), partition=0)  # one record per batch: six batches on partition 0 only
    p._run(net._now)
    assert state._cft is None  # partitions 1 and 2 never had a batch: uniform choice, as Kafka
    p.send("t", bytes(100), partition=1)
    p.send("t", bytes(100), partition=2)
    p._run(net._now)
    assert state._cft_ids == [0, 1, 2] and state._cft is not None
    weights = [b - a for a, b in zip([0, *state._cft], state._cft, strict=False)]
    assert weights[0] < weights[1] == weights[2]  # the longest queue is picked least


def test_adaptive_weights_are_dropped_when_too_few_partitions_have_a_leader():
    net, cluster, p = setup(partitions=3, linger_ms=100_000, batch_size=200)
    _load_metadata(net, p)
    for part in (0, 0, 0, 0, 1, 2):
        p.send("t", bytes(100), partition=part)
    p._run(net._now)
    state = p.partitioner.built_in("t")
    assert state._cft is not None
    p.metadata.leader_for = lambda tp: 1 if tp.partition == 0 else -1
    p._run(net._now)
    # One partition with a leader out of three entries: still weighted, over that partition alone.
    assert state._cft_ids == [0]
    assert {state.next_partition(3, [0]) for _ in range(20)} == {0}


def test_new_metadata_ends_the_fast_path():
    """An applied metadata response cools every fast-path entry (the per-record path does not compare
    metadata versions); the next send takes the full path, which sees the new partition info."""
    net, cluster, p = setup(partitions=3, linger_ms=1000)
    _load_metadata(net, p)
    for _ in range(3):
        p.send("t", bytes(10))
    hot = p._hot["t"]
    batch = hot.batch
    assert batch.hot is hot
    cluster.create("u", 1, 1)  # any response will do: it is applied, so the version moves on
    p.metadata.update(cluster.brokers[0]._metadata(MetadataRequest(topics=("t", "u"))), net.now_ms())
    assert not p._hot and batch.hot is None
    fut = p.send("t", bytes(10))
    assert fut.batch is batch and fut.index == 3  # the full path appends to the same open batch
    assert p._hot["t"].batch is batch  # and opens the fast path again


def test_a_closed_batch_takes_no_record_from_the_fast_path():
    """The sender closing a batch (draining it into a request) ends appends to it, also by send()'s fast
    path, whose entry still points at the batch until the next send."""
    net, _, p = setup(linger_ms=5)
    _load_metadata(net, p)
    first = [p.send("t", bytes(10)) for _ in range(5)]
    batch = first[0].batch
    hot = p._hot["t"]
    net.run_for(10)  # linger.ms passes: the batch is drained and sent
    assert batch.full and hot.cap == 0
    later = p.send("t", bytes(10))
    assert later.batch is not batch and batch.record_count == 5
    net.run_for(50)
    assert [f.result().offset for f in first] == [0, 1, 2, 3, 4]
    assert later.result().offset == 5
