"""``kafkalite bench consume``: every case reads every record exactly as many as were produced; the
result's structure and the CLI (never the timings)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.harness.bench.consume import (
    KAFKA_2014_RECORDS_PER_S,
    TOPIC,
    consume_single,
    decode_baseline,
    fill_topic,
    group_supported,
    run_consume_bench,
)
from kafkalite.host.cluster import Cluster


def test_fill_deals_records_evenly_and_cases_read_all() -> None:
    with Cluster(brokers=1, seed=0) as cluster:
        fill_topic(cluster, 1200, 20, 4)
        assert [cluster.high_watermark(TOPIC, p) for p in range(4)] == [300] * 4
        base = decode_baseline(cluster, 4, 20)
        assert base.records == 1200 and base.bytes_read > 1200 * 20
        single = consume_single(cluster, 1200, 4, 20)
        assert single.records == 1200 and single.per_consumer == [1200]
        assert single.fetches >= 1 and single.bytes_read >= base.bytes_read
        assert single.records_per_s > 0 and single.mb_per_s > 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="records"):
        run_consume_bench(0)
    with pytest.raises(ValueError, match="group_size"):
        run_consume_bench(10, group_size=0)


def test_bench_without_group() -> None:
    r = run_consume_bench(900, 50, partitions=3, group=False)
    assert r.group is None and r.single.records == r.baseline.records == 900
    assert not [n for n in r.notes if "expected" in n]
    d = r.to_dict()
    assert d["kafka_2014"]["records_per_s"] == KAFKA_2014_RECORDS_PER_S == 940_521
    assert d["single_vs_baseline"] > 0 and "940,521" in r.table()


@pytest.mark.skipif(not group_supported(), reason="Consumer.subscribe not available yet")
def test_group_of_three_on_six_partitions_reads_everything_once() -> None:
    r = run_consume_bench(1800, 20, partitions=6, group_size=3)
    assert r.group is not None and r.group.consumers == 3
    assert r.group.records == 1800 and sum(r.group.per_consumer) == 1800
    # Range over 6 partitions and 3 members: two partitions of 300 records each per member.
    assert r.group.per_consumer == [600, 600, 600]


def test_cli_bench_consume_json() -> None:
    out = CliRunner().invoke(kafkalite, ["bench", "consume", "--records", "600", "--no-group", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["single"]["records"] == d["baseline"]["records"] == 600 and d["group"] is None
    assert d["partitions"] == 6
