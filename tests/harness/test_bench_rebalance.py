"""``kafkalite bench rebalance``: the table's shape and the qualitative facts of the three protocols (never
timings of the machine: every number is virtual time, deterministic for a seed)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.harness.bench.rebalance import PROTOCOLS, SCENARIOS, measure, run_rebalance_bench

N = 12


@pytest.fixture(scope="module")
def result():
    return run_rebalance_bench((N,))


def case(result, scenario: str, protocol: str):
    [found] = [c for c in result.cases if (c.scenario, c.protocol) == (scenario, protocol)]
    return found


def test_every_scenario_and_protocol_is_a_row(result) -> None:
    assert [(c.scenario, c.protocol) for c in result.cases] == [(s, p) for s in SCENARIOS for p in PROTOCOLS]
    lines = result.table().splitlines()
    assert len(lines) == 3 + len(SCENARIOS) * len(PROTOCOLS)
    assert lines[1].split()[:4] == ["scenario", "partitions", "protocol", "settled"]


def test_no_partition_ever_has_two_owners(result) -> None:
    assert {c.max_owners for c in result.cases} == {1}


def test_eager_stops_every_partition_the_others_only_those_that_move(result) -> None:
    assert case(result, "scale-out", "eager").paused == N
    # 3 -> 6 members: half the partitions move to the new members, the other half keep being consumed.
    assert case(result, "scale-out", "cooperative").paused == N // 2
    assert case(result, "scale-out", "consumer").paused == N // 2


def test_a_rolling_restart_costs_the_new_protocol_least(result) -> None:
    eager, coop, new = (case(result, "rolling-restart", p) for p in PROTOCOLS)
    assert new.unowned_mean_ms < coop.unowned_mean_ms <= eager.unowned_mean_ms
    assert new.settled_ms < eager.settled_ms
    # Eager revokes every member's partitions at each of the 3 restarts; the others only the leaver's.
    assert eager.revocations == 9 and coop.revocations == new.revocations == 3


def test_the_same_seed_gives_the_same_numbers() -> None:
    assert measure("consumer", N, "scale-out", seed=3) == measure("consumer", N, "scale-out", seed=3)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="protocol"):
        measure("sticky", N, "scale-out")
    with pytest.raises(ValueError, match="partitions"):
        measure("eager", 5, "scale-out")
    runner = CliRunner()
    out = runner.invoke(kafkalite, ["bench", "rebalance", "--partitions", "2"])
    assert out.exit_code == 2 and "partitions must be at least 6" in out.output


def test_cli_prints_json() -> None:
    out = CliRunner().invoke(
        kafkalite, ["bench", "rebalance", "--partitions", "6", "--scenario", "scale-out", "--protocol", "consumer",
                    "--json"]
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [c["protocol"] for c in data["cases"]] == ["consumer"] and data["heartbeat_ms"] == 3000
