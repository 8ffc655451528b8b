"""``kafkalite bench produce``: structure and completeness of the result (never its timings), and the
fast record encoder against the reference one byte for byte."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.cli import kafkalite
from kafkalite.harness.bench.produce import TARGET_RATIO, run_case, run_produce_bench
from kafkalite.records import build_batch, decode_batch_tuples
from kafkalite.records.record import encode_plain_records, encode_record


def test_single_broker_case_acknowledges_everything() -> None:
    r = run_case(500, 100)
    assert r.all_acknowledged and r.errors == 0
    assert r.acknowledged == r.high_watermark == 500
    assert r.batches >= 1 and r.requests >= 1 and r.sim_events > 0
    d = r.to_dict()
    assert {"records_per_s", "mb_per_s", "events_per_s", "all_acknowledged"} <= d.keys()


def test_round_robin_spreads_records_over_every_partition(tmp_path) -> None:
    one = run_case(2_000, 100, partitions=1, round_robin=True, log_root=str(tmp_path))
    many = run_case(2_000, 100, partitions=64, round_robin=True, log_root=str(tmp_path))
    for r in (one, many):
        assert r.all_acknowledged and r.high_watermark == 2_000
    assert many.partitions == 64 and one.partitions == 1
    # 2,000 records over 64 partitions: about 31 each, far from a full 16 KiB batch
    assert many.batches >= 64 > one.batches
    assert list(tmp_path.iterdir()) == [], "each run removes its logs"


def test_keyless_records_fill_batches_at_any_partition_count() -> None:
    one = run_case(5_000, 100, partitions=1)
    many = run_case(5_000, 100, partitions=32)
    assert many.all_acknowledged and many.high_watermark == 5_000
    # the sticky partitioner fills one partition's batch before it moves on
    assert many.batches <= one.batches * 1.1


def test_run_case_refuses_no_partitions() -> None:
    with pytest.raises(ValueError, match="partitions"):
        run_case(10, partitions=0)


def test_bench_runs_both_cases() -> None:
    result = run_produce_bench(800, 50, offer_per_ms=100)
    assert result.single.brokers == 1 and result.single.acks == "1"
    assert result.replicated.brokers == 3 and result.replicated.replication_factor == 3
    assert result.replicated.acks == "all"
    assert result.idempotent is not None and result.idempotent.acks == "all"
    for case in (result.single, result.replicated, result.idempotent):
        assert case.all_acknowledged and case.high_watermark == 800
    d = result.to_dict()
    assert d["idempotent_ratio"] > 0 and d["target_idempotent_ratio"] == 0.9
    assert "idempotent acks=all / acks=all" in result.table()
    assert d["target_ratio"] == TARGET_RATIO and d["ratio"] > 0
    assert d["producer_config"]["batch.size"] == 16384 and d["producer_config"]["linger.ms"] == 5
    assert "821,557" in result.table() and "acks=all / acks=1" in result.table()
    assert "421,823 records/s (40.2 MB/s), 0.51 of no replication" in result.table()
    assert result.notes and all("expected" not in n for n in result.notes)
    assert any(n.startswith("best of 3 runs per case, run alternately") for n in result.notes)
    # Each round's own ratios: three rounds, each with the seconds of (a), (b) and (c).
    assert len(d["rounds_seconds"]) == 3 and all(len(r) == 3 for r in d["rounds_seconds"])
    per_round = sorted(a / b for a, b, _ in d["rounds_seconds"])
    assert d["paired_ratio"] == per_round[1], "the median of the rounds' acks=all / acks=1"
    per_round = sorted(b / c for _, b, c in d["rounds_seconds"])
    assert d["paired_idempotent_ratio"] == per_round[1]
    assert "per round: median" in result.table()
    v = d["validation"]
    assert v["us_per_batch"] > 0 and v["records_per_batch"] >= 1 and 0 < v["share_of_single"] < 1
    assert "leader record validation, alone and hot" in result.table()
    # In situ: timed inside each run, once per batch a leader appended (one leader per case).
    for case in (result.single, result.replicated, result.idempotent):
        assert case.validations >= case.batches and case.validation_seconds > 0
        assert 0 < case.validation_share < 1 and case.validation_us > 0
    assert set(d["validation_in_situ"]) == {
        result.single.name,
        result.replicated.name,
        result.idempotent.name,
    }
    assert "leader record validation, in situ (timed inside each run): (a) " in result.table()
    from kafkalite.storage import log
    from kafkalite.storage.log_validator import validate_records

    assert log.validate_records is validate_records, "the timing wrapper is taken out after each run"


def test_bench_repeats_are_noted_and_validated() -> None:
    result = run_produce_bench(400, 50, offer_per_ms=100, repeats=2)
    assert any(n.startswith("best of 2 runs per case, run alternately") for n in result.notes)
    # two rounds: the median is the mean of their two ratios
    (a1, b1, _), (a2, b2, _) = result.rounds
    assert result.paired_ratio == pytest.approx((a1 / b1 + a2 / b2) / 2)
    with pytest.raises(ValueError, match="repeats"):
        run_produce_bench(400, 50, repeats=0)


def test_cli_bench_produce_json() -> None:
    out = CliRunner().invoke(kafkalite, ["bench", "produce", "--records", "2000", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["single"]["records"] == d["replicated"]["records"] == 2000
    assert d["single"]["all_acknowledged"] and d["replicated"]["all_acknowledged"]
    assert d["kafka_2014"]["records_per_s"] == 821_557
    # Kafka's own acks=all cost in the same 2014 post: 421,823 of 821,557 records/s.
    assert d["kafka_2014_sync_replication"]["records_per_s"] == 421_823
    assert round(d["kafka_2014_sync_replication"]["ratio"], 2) == 0.51


def _reference(records, stamps, base_ts) -> bytes:
    out = bytearray()
    for od, (rec, ts) in enumerate(zip(records, stamps, strict=True)):
        key, value = rec[0], rec[1]
        encode_record(out, od, ts - base_ts, key, value, rec[2] if len(rec) == 3 and rec[2] else ())
    return bytes(out)


# Lengths of 64+ take two varint bytes, 8192+ fall outside the precomputed table.
_blob = st.one_of(
    st.none(), st.binary(max_size=200), st.sampled_from([bytes(8191), bytes(8192), b"x" * 9000])
)
_record = st.one_of(
    st.tuples(_blob, _blob),
    st.tuples(_blob, _blob, st.sampled_from([None, (), []])),
)
_ts = st.one_of(
    st.integers(-(1 << 40), 1 << 40),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.sampled_from([0, 63, 64, 8191, 8192, 1 << 13, -(1 << 13) - 1]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_record, _ts), max_size=40), _ts)
def test_fast_encoder_matches_reference(items, base_ts) -> None:
    records = [r for r, _ in items]
    stamps = [t for _, t in items]
    fast = encode_plain_records(records, stamps, base_ts)
    deltas_ok = all(-(1 << 63) <= t - base_ts < (1 << 63) for t in stamps)
    if not deltas_ok:
        assert fast is None  # out of range: the reference path raises the error
        return
    assert fast is not None
    assert bytes(fast) == _reference(records, stamps, base_ts)


@settings(max_examples=100, deadline=None)
@given(st.lists(_record, min_size=1, max_size=30), st.integers(0, 1 << 42), st.integers(0, 3000))
def test_build_batch_fast_path_is_byte_identical(records, t0, spread) -> None:
    stamps = [t0 + (i * spread) % 7919 for i in range(len(records))]
    fast = build_batch(records, timestamp=stamps, base_offset=5)
    # offset_deltas forces the reference encoder with the same deltas 0, 1, 2, ...
    ref = build_batch(records, timestamp=stamps, base_offset=5, offset_deltas=range(len(records)))
    assert fast == ref
    h, rows = decode_batch_tuples(fast)
    assert [(r[2], r[3]) for r in rows] == [(r[0], r[1]) for r in records]


def test_fast_encoder_declines_what_it_does_not_handle() -> None:
    assert encode_plain_records([(None, b"v", [("h", b"x")])], [0], 0) is None
    assert encode_plain_records([("k", b"v")], [0], 0) is None  # str key: the reference encodes it
    assert encode_plain_records([[None, b"v"]], [0], 0) is None
    assert encode_plain_records([(None, b"v")], [1.5], 0) is None
    with_headers = build_batch([(None, b"v", [("h", b"x")])], timestamp=7)
    assert decode_batch_tuples(with_headers)[1][0][4][0].key == "h"


def test_cli_bench_faults_is_registered() -> None:
    out = CliRunner().invoke(kafkalite, ["bench", "faults", "--help"])
    assert out.exit_code == 0 and "--seeds" in out.output and "--start" in out.output
