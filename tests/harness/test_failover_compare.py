"""Controller failover, ZooKeeper mode vs KRaft (kafkalite.harness.failover_compare): small sizes only."""

from __future__ import annotations

import dataclasses
import json
import math
from functools import cache

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cli import kafkalite
from kafkalite.harness import failover_compare
from kafkalite.harness.failover_compare import (
    BROKER,
    CONTROLLER,
    KRAFT,
    ZK,
    ZK_MAX_IN_FLIGHT_REQUESTS,
    ZK_SESSION_TIMEOUT_MS,
    FailoverResult,
    ZkRequestCounter,
    compare,
    format_table,
    from_json,
    model,
    run,
    to_json,
    zk_charge_ms,
)


@cache
def _run(mode: str, partitions: int, victim: str) -> FailoverResult:
    return run(mode, partitions, victim)  # ~0.3 s each


@pytest.mark.parametrize("mode", [ZK, KRAFT])
@pytest.mark.parametrize("victim", [CONTROLLER, BROKER])
def test_every_partition_gets_a_live_leader_every_broker_knows(mode: str, victim: str) -> None:
    # run() raises unless every partition has a live leader that every live broker's metadata agrees on
    r = _run(mode, 12, victim)
    assert (r.mode, r.victim, r.partitions, r.source) == (mode, victim, 12, "simulated")
    assert 0 < r.detect_ms <= r.sim_ms <= r.total_ms


def test_zk_controller_failover_reads_every_partition_state_and_grows_with_partitions() -> None:
    small, large = _run(ZK, 30, CONTROLLER), _run(ZK, 60, CONTROLLER)
    # one state znode read per partition, nothing else grows with one topic
    assert large.zk_reads - small.zk_reads == 30
    assert large.zk_writes == small.zk_writes
    assert large.zk_ms > small.zk_ms and large.total_ms > small.total_ms
    # the new controller waits for the old one's ZooKeeper session to expire first
    assert small.detect_ms == ZK_SESSION_TIMEOUT_MS


def test_zk_broker_failure_writes_one_state_znode_per_partition_it_replicates() -> None:
    # three replicas on three hosts: the dead broker is in every partition's ISR, so every state znode
    # changes (leader and ISR, or ISR alone)
    for n in (12, 30):
        r = _run(ZK, n, BROKER)
        assert r.zk_writes == n
        assert r.zk_ms == zk_charge_ms(r.zk_reads, r.zk_writes, 2)


def test_kraft_controller_failover_does_not_grow_with_partitions() -> None:
    small, large = _run(KRAFT, 12, CONTROLLER), _run(KRAFT, 60, CONTROLLER)
    assert large.total_ms == small.total_ms
    assert (large.zk_reads, large.zk_writes, large.zk_ms) == (0, 0, 0)
    # a Raft election, well inside the ZooKeeper session timeout
    assert large.total_ms < ZK_SESSION_TIMEOUT_MS / 2


def test_kraft_is_faster_for_both_victims() -> None:
    for victim in (CONTROLLER, BROKER):
        assert _run(KRAFT, 30, victim).total_ms < _run(ZK, 30, victim).total_ms


def test_model_reproduces_a_simulated_third_size() -> None:
    for mode in (ZK, KRAFT):
        for victim in (CONTROLLER, BROKER):
            predicted = model(_run(mode, 12, victim), _run(mode, 30, victim), 60)
            actual = _run(mode, 60, victim)
            assert predicted.source == "model"
            assert (predicted.zk_reads, predicted.zk_writes) == (actual.zk_reads, actual.zk_writes)
            assert (predicted.detect_ms, predicted.total_ms) == (actual.detect_ms, actual.total_ms)


def test_model_refuses_mixed_or_unordered_calibration() -> None:
    with pytest.raises(ValueError, match="second at more partitions"):
        model(_run(ZK, 30, CONTROLLER), _run(KRAFT, 60, CONTROLLER), 100)
    with pytest.raises(ValueError, match="second at more partitions"):
        model(_run(ZK, 60, CONTROLLER), _run(ZK, 30, CONTROLLER), 100)
    with pytest.raises(ValueError, match="second at more partitions"):
        model(run(ZK, 6, CONTROLLER, seed=1), _run(ZK, 30, CONTROLLER), 100)


def test_run_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="victim"):
        run(ZK, 12, "zk")
    with pytest.raises(ValueError, match="mode"):
        run("etcd", 12, CONTROLLER)
    with pytest.raises(ValueError, match="at least 3"):
        run(ZK, 2, CONTROLLER)


@given(
    reads=st.integers(0, 10**6),
    writes=st.integers(0, 10**6),
    rtt=st.integers(0, 50),
    in_flight=st.integers(1, 100),
)
def test_zk_charge_is_one_round_trip_per_window_of_in_flight_requests(
    reads: int, writes: int, rtt: int, in_flight: int
) -> None:
    charged = zk_charge_ms(reads, writes, rtt, in_flight)
    assert charged == (math.ceil(reads / in_flight) + math.ceil(writes / in_flight)) * rtt
    assert charged <= (reads + writes) * rtt  # pipelining never costs more than one at a time
    assert zk_charge_ms(reads + 1, writes, rtt, in_flight) >= charged


def test_default_pipelining_is_kafkas() -> None:
    assert ZK_MAX_IN_FLIGHT_REQUESTS == 10
    assert zk_charge_ms(100_000, 0, 2) == 20_000


def test_request_counter_counts_reads_and_writes_and_passes_the_rest_through() -> None:
    class Link:
        session_id = 7

        def get(self, path: str) -> str:
            return f"got {path}"

        def multi(self, ops: list) -> list:
            return ops

    c = ZkRequestCounter(Link())
    assert c.get("/a") == "got /a"
    assert c.multi([1, 2]) == [1, 2]
    assert c.session_id == 7
    assert (c.reads, c.writes) == (1, 1)


def test_compare_simulates_small_sizes_and_models_large_ones_and_json_round_trips() -> None:
    rows = compare([12, 1000], [CONTROLLER], simulate_up_to=12, calibrate=(12, 30))
    assert [(r.mode, r.partitions, r.source) for r in rows] == [
        (ZK, 12, "simulated"),
        (ZK, 1000, "model"),
        (KRAFT, 12, "simulated"),
        (KRAFT, 1000, "model"),
    ]
    assert from_json(to_json(rows)) == rows
    assert json.loads(to_json(rows))[1]["total_ms"] == rows[1].total_ms
    table = format_table(rows, calibrate=(12, 30))
    assert "controller" in table and "1,000" in table and "model" in table and "12 and 30" in table


def test_table_gives_the_median_and_the_range_over_seeds() -> None:
    rows = compare([6], [CONTROLLER], seeds=range(3))
    kraft = sorted(r.total_ms for r in rows if r.mode == KRAFT)
    assert len(kraft) == 3 and kraft[0] < kraft[2]  # the brokers find the new quorum leader by luck
    line = next(ln for ln in format_table(rows).splitlines() if ln.startswith("controller"))
    assert f"{kraft[1]:,} ({kraft[0]:,}-{kraft[2]:,})" in line


def test_cli_bench_failover_prints_the_table() -> None:
    res = CliRunner().invoke(
        kafkalite,
        ["bench", "failover", "--partitions", "6,12", "--victim", "controller", "--simulate-up-to", "12"],
    )
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("controller")]
    assert [ln.split()[1] for ln in lines] == ["6", "12"]
    bad = CliRunner().invoke(kafkalite, ["bench", "failover", "--partitions", "6,x"])
    assert bad.exit_code != 0 and "--partitions" in bad.output


# ----- metadata-only mode: replicas without data logs, for the large sizes --------------------------


@pytest.mark.parametrize("mode", [ZK, KRAFT])
@pytest.mark.parametrize("victim", [CONTROLLER, BROKER])
def test_metadata_only_mode_gives_the_same_failover_as_data_logs(mode: str, victim: str) -> None:
    for seed in (0, 1):
        full = run(mode, 30, victim, seed=seed) if seed else _run(mode, 30, victim)
        bare = run(mode, 30, victim, seed=seed, metadata_only=True)
        assert (full.metadata_only, bare.metadata_only) == (False, True)
        assert full.leaders and bare.leaders == full.leaders  # every partition led by the same broker
        assert dataclasses.replace(bare, metadata_only=False) == full  # timings and ZooKeeper requests


def test_metadata_only_run_must_end_before_a_dead_follower_would_leave_the_isr(monkeypatch) -> None:
    monkeypatch.setattr(failover_compare, "REPLICA_LAG_TIME_MAX_MS", 5_000)
    with pytest.raises(RuntimeError, match="replica.lag.time.max.ms"):
        run(ZK, 6, BROKER, metadata_only=True)  # ~18 s: the dead broker's ZooKeeper session expiry
    assert run(ZK, 6, BROKER).sim_ms > 5_000  # with data logs the same run is allowed


def test_compare_runs_sizes_above_data_logs_up_to_metadata_only_and_reports_each_run() -> None:
    seen: list[FailoverResult] = []
    rows = compare([6, 12], [CONTROLLER], data_logs_up_to=6, on_run=seen.append)
    assert [(r.mode, r.partitions, r.source, r.metadata_only) for r in rows] == [
        (ZK, 6, "simulated", False),
        (ZK, 12, "simulated", True),
        (KRAFT, 6, "simulated", False),
        (KRAFT, 12, "simulated", True),
    ]
    assert seen == rows and all(r.wall_s > 0 for r in seen)
    assert from_json(to_json(rows)) == rows
    lines = {ln.split()[1]: ln for ln in format_table(rows).splitlines() if ln.startswith("controller")}
    assert lines["12"].endswith("simulated, metadata-only") and lines["6"].endswith("simulated")
