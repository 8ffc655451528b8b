"""Tests for kafkalite.harness.checker: each anomaly by hand, then random histories with injected faults."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.harness.checker import (
    ACKED,
    AMBIGUOUS,
    ANOMALY_KINDS,
    DIVERGENT,
    DUPLICATE,
    FAILED,
    LOST,
    LOST_ACKS0,
    OFFSET_REUSED,
    REORDERED,
    UNEXPECTED,
    UNKNOWN,
    CheckReport,
    HistoryChecker,
    ReadRecord,
    SendRecord,
    as_tp,
    check_history,
    reads_from_dict,
    reads_from_records,
    sends_from_dicts,
    total_counts,
)
from kafkalite.records import Record

T0 = ("t", 0)


def acked(ident, offset, acks=-1, producer="", tp=T0):
    return SendRecord.acked(ident, *tp, offset, acks=acks, producer=producer)


def clean_history(n=5):
    sends = [acked(f"v{i}", i) for i in range(n)]
    reads = {T0: [(i, f"v{i}") for i in range(n)]}
    return sends, reads


def kinds(report: CheckReport) -> list[str]:
    return [a.kind for a in report.anomalies]


# --- clean and lost -------------------------------------------------------------------------------


def test_clean_history_is_ok():
    report = check_history(*clean_history())
    assert report.ok
    assert report.anomalies == ()
    assert report.counts == dict.fromkeys(ANOMALY_KINDS, 0)
    assert report.summary().startswith("OK: 5 sends, 5 acked, 5 read;")
    assert str(report) == report.summary()


def test_lost_acked_records_split_by_acks_level():
    sends = [acked("a", 0, acks=1), acked("b", 1, acks="all"), acked("c", 2, acks=-1)]
    report = check_history(sends, {T0: [(1, "b")]})
    assert not report.ok
    assert [(a.id, a.acks, a.offset) for a in report.lost] == [("a", 1, 0), ("c", -1, 2)]
    assert report.lost_by_acks == {0: 0, 1: 1, -1: 1}
    assert report.counts[LOST] == 2


def test_acks0_losses_are_reported_but_not_violations():
    sends = [acked("a", -1, acks=0), acked("b", None, acks=0), acked("c", 0, acks=1)]
    report = check_history(sends, {T0: [(0, "c")]})
    assert report.ok
    assert report.lost == []
    assert [a.id for a in report.lost_acks0] == ["a", "b"]
    assert all(not a.violation for a in report.lost_acks0)
    assert report.lost_by_acks == {0: 2, 1: 0, -1: 0}
    # acks=0 offsets (-1 from the client) name no position, so they are dropped on input
    assert sends[0].offset is None


def test_partition_missing_from_reads_counts_as_empty():
    report = check_history([acked("a", 0, tp=("other", 2))], {})
    assert [(a.topic, a.partition, a.id) for a in report.lost] == [("other", 2, "a")]


# --- duplicates, reuse, unexpected ----------------------------------------------------------------


def test_duplicate_read_at_two_offsets():
    sends, reads = clean_history(3)
    reads[T0].append((3, "v1"))
    report = check_history(sends, reads)
    assert not report.ok
    [dup] = report.duplicates
    assert (dup.id, dup.offset) == ("v1", 1)
    assert dup.detail == "read at t-0@1, t-0@3"
    assert kinds(report) == [DUPLICATE]


def test_redelivered_same_offset_is_not_a_duplicate():
    sends, reads = clean_history(3)
    reads[T0] += [(1, "v1"), (2, "v2")]
    assert check_history(sends, reads).anomalies == ()


def test_offset_reused_after_truncation():
    # "a" was acked at offset 1 by an old leader, truncated, and the new leader wrote "b" at offset 1.
    sends = [acked("z", 0), acked("a", 1, producer="p1"), acked("b", 1, producer="p2")]
    report = check_history(sends, {T0: [(0, "z"), (1, "b")]})
    assert not report.ok
    assert kinds(report) == [LOST, OFFSET_REUSED]
    [reused] = report.offset_reused
    assert (reused.id, reused.offset) == ("a", 1)
    assert reused.detail == "acked here, offset now holds b; record missing"


def test_offset_reused_when_record_moved():
    sends = [acked("a", 0), acked("b", 1)]
    report = check_history(sends, {T0: [(0, "b"), (1, "a")]})
    assert [(a.kind, a.id) for a in report.anomalies] == [
        (OFFSET_REUSED, "a"),
        (OFFSET_REUSED, "b"),
        (REORDERED, "b"),
    ]
    assert report.offset_reused[0].detail == "acked here, offset now holds b; record found at [1]"


def test_read_holding_two_ids_at_one_offset():
    sends = [acked("a", 0), acked("b", 0)]
    report = check_history(sends, {T0: [(0, "a"), (0, "b")]})
    [reused] = report.offset_reused
    assert reused.id is None and reused.offset == 0
    assert reused.detail == "read holds 2 ids: a, b"


def test_unexpected_records():
    sends, reads = clean_history(2)
    reads[T0] = [(0, "v0"), (1, "ghost")]
    reads[("t", 1)] = [(0, "v1")]  # misrouted: it never reached the partition it was acked on
    report = check_history(sends, reads)
    assert [(a.kind, a.topic, a.partition, a.id, a.detail) for a in report.anomalies] == [
        (LOST, "t", 0, "v1", "acks=-1"),
        (OFFSET_REUSED, "t", 0, "v1", "acked here, offset now holds ghost; record missing"),
        (UNEXPECTED, "t", 0, "ghost", "never sent"),
        (UNEXPECTED, "t", 1, "v1", "sent to t-0"),
    ]
    only_ghost = check_history(sends[:1], {T0: [(0, "v0"), (1, "ghost")]})
    assert only_ghost.ok and kinds(only_ghost) == [UNEXPECTED]


# --- divergence -----------------------------------------------------------------------------------


def test_divergent_replicas_below_min_log_end_offset():
    sends, reads = clean_history(3)
    replicas = {
        T0: {
            1: [(0, "v0"), (1, "v1"), (2, "v2"), (3, "x")],
            2: [(0, "v0"), (1, "old"), (2, "v2")],
            3: [(0, "v0"), (1, "v1"), (2, "v2"), (3, "y")],  # offset 3 is above replica 2's end
        }
    }
    report = check_history(sends, reads, replicas)
    assert not report.ok
    [div] = report.divergent
    assert (div.offset, div.id, div.detail) == (1, None, "1=v1, 2=old, 3=v1")


def test_divergence_with_high_watermark_skips_lagging_replicas():
    logs = {
        "a": [(0, "v0"), (1, "v1"), (2, "v2"), (3, "v3")],
        "b": [(0, "v0"), (2, "v2"), (3, "w3")],  # hole at 1 and a different value at 3
        "lagging": [(0, "v0")],
    }
    report = check_history([], {}, {"t-0": logs}, high_watermarks={"t-0": 4})
    assert [(a.offset, a.detail) for a in report.divergent] == [
        (1, "a=v1, b=-"),
        (3, "a=v3, b=w3"),
    ]
    # without a high watermark the bound is the lagging replica's end: nothing to compare above it
    assert check_history([], {}, {"t-0": logs}).divergent == []


def test_single_replica_cannot_diverge():
    assert check_history([], {}, {T0: {1: [(0, "a")]}}).anomalies == ()


# --- ordering -------------------------------------------------------------------------------------


def test_reordering_within_one_producer():
    sends = [
        acked("a", 2, producer="p"),
        acked("b", 0, producer="p"),
        acked("c", 1, producer="p"),
        acked("q", 3, producer="q"),
    ]
    reads = {T0: [(0, "b"), (1, "c"), (2, "a"), (3, "q")]}
    report = check_history(sends, reads)
    assert report.ok  # retries without idempotence may reorder; it is reported, not a violation
    [r] = report.reordered
    assert (r.id, r.offset) == ("b", 0)
    assert r.detail == "producer p sent after a (offset 2) but read before it"


def test_explicit_seq_overrides_list_order():
    sends = [
        SendRecord.acked("b", *T0, 1, producer="p", seq=2),
        SendRecord.acked("a", *T0, 0, producer="p", seq=1),
    ]
    assert check_history(sends, {T0: [(0, "a"), (1, "b")]}).reordered == []


def test_producers_interleaving_is_not_reordering():
    sends = [acked("p1", 1, producer="p"), acked("q1", 0, producer="q")]
    assert check_history(sends, {T0: [(0, "q1"), (1, "p1")]}).anomalies == ()


# --- ambiguity ------------------------------------------------------------------------------------


def test_failed_but_present_is_ambiguous_not_an_error():
    sends = [
        acked("a", 0),
        SendRecord.failed("b", *T0, "REQUEST_TIMED_OUT"),
        SendRecord.failed("c", *T0, "NOT_LEADER_OR_FOLLOWER"),
    ]
    report = check_history(sends, {T0: [(0, "a"), (1, "b")]})
    assert report.ok
    [amb] = report.ambiguous
    assert (amb.id, amb.offset, amb.detail) == ("b", 1, "failed (REQUEST_TIMED_OUT) but present")
    assert not amb.violation


def test_unknown_outcomes_resolved_either_way():
    sends = [acked("a", 0), SendRecord.unknown("u1", *T0), SendRecord.unknown("u2", *T0)]
    report = check_history(sends, {T0: [(0, "a"), (1, "u2")]})
    assert report.ok
    assert report.unknown_present == ("u2",)
    assert report.unknown_absent == ("u1",)
    assert [(a.id, a.offset, a.detail) for a in report.ambiguous] == [
        ("u1", None, "unknown outcome, absent"),
        ("u2", 1, "unknown outcome, present"),
    ]


# --- inputs and output ----------------------------------------------------------------------------


def test_inputs_from_records_and_dicts():
    records = [Record(5, 0, None, b"x"), Record(6, 0, b"k", b"y")]
    assert reads_from_records(records) == [ReadRecord(5, b"x"), ReadRecord(6, b"y")]
    assert reads_from_records(records, id_of=lambda r: r.key) == [ReadRecord(5, None), ReadRecord(6, b"k")]
    normal = reads_from_dict({"my-topic-3": records, ("t", "1"): [(0, "a"), ReadRecord(1, "b")]})
    assert normal == {
        ("my-topic", 3): [ReadRecord(5, b"x"), ReadRecord(6, b"y")],
        ("t", 1): [ReadRecord(0, "a"), ReadRecord(1, "b")],
    }
    sends = sends_from_dicts(
        [
            {"id": b"x", "topic": "my-topic", "partition": 3, "outcome": ACKED, "offset": 5, "acks": "all"},
            {"id": b"y", "topic": "my-topic", "partition": 3, "outcome": FAILED, "error": "E"},
        ]
    )
    assert sends[0].acks == -1 and sends[1].outcome == FAILED
    report = check_history(sends, {"my-topic-3": records})
    assert report.ok and [a.id for a in report.ambiguous] == [b"y"]


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="outcome"):
        SendRecord("a", "t", 0, "maybe")
    with pytest.raises(ValueError, match="acks"):
        SendRecord.acked("a", "t", 0, 0, acks=2)
    with pytest.raises(ValueError, match="used twice"):
        check_history([acked("a", 0), acked("a", 1)], {})
    with pytest.raises(ValueError, match="topic-partition"):
        as_tp("nopartition")
    with pytest.raises(ValueError, match="kind"):
        check_history([], {}).of_kind("bogus")


def test_table_str_and_totals():
    sends = [acked(b"a", 0), acked(b"\xff", 1), SendRecord.unknown(b"u", *T0)]
    report = check_history(sends, {T0: [(0, b"a"), (1, b"a")]})
    frame = pd.DataFrame(report.table())
    assert list(frame.columns) == [
        "kind",
        "topic",
        "partition",
        "offset",
        "id",
        "acks",
        "violation",
        "detail",
    ]
    assert list(frame["kind"]) == [LOST, DUPLICATE, OFFSET_REUSED, AMBIGUOUS]
    assert str(report) == "\n".join(
        [
            "VIOLATED: 3 sends, 2 acked, 2 read; lost=1 lost-acks0=0 duplicate=1 offset-reused=1 "
            "divergent=0 unexpected=0 reordered=0 ambiguous=1",
            "  lost          t-0@1 ff: acks=-1",
            "  duplicate     t-0@0 a: read at t-0@0, t-0@1",
            "  offset-reused t-0@1 ff: acked here, offset now holds a; record missing",
            "  ambiguous     t-0 u: unknown outcome, absent",
        ]
    )
    totals = total_counts([report, report, check_history(*clean_history())])
    assert totals[LOST] == 2 and totals[AMBIGUOUS] == 2 and list(totals) == list(ANOMALY_KINDS)


def test_incremental_checker_matches_function():
    sends, reads = clean_history(3)
    checker = HistoryChecker()
    for s in sends:
        checker.add_send(s)
    checker.add_read("t-0", [(0, "v0"), (2, "v2")])
    checker.add_replica(T0, "r1", [(0, "v0"), (1, "v1")])
    checker.add_replica(T0, "r2", [(0, "v0"), (1, "v9")])
    checker.set_high_watermark(T0, 2)
    report = checker.check()
    assert kinds(report) == [LOST, DIVERGENT]
    assert str(report) == str(check_history(sends, {T0: [(0, "v0"), (2, "v2")]}, checker.replicas, {T0: 2}))


def test_report_text_is_independent_of_input_order():
    sends = [acked("a", 0), acked("b", 1), acked("c", 0, tp=("t", 1)), SendRecord.unknown("u", "t", 1)]
    reads = {T0: [(1, "b"), (2, "b"), (3, "x")], ("t", 1): [(1, "u"), (0, "y")]}
    replicas = {T0: {"r1": [(0, "a"), (1, "b")], "r0": [(0, "q"), (1, "b")]}}
    first = check_history(sends, reads, replicas)
    flipped_reads = {k: list(reversed(v)) for k, v in reversed(list(reads.items()))}
    flipped_replicas = {T0: dict(reversed(list(replicas[T0].items())))}
    second = check_history(sends, flipped_reads, flipped_replicas)
    assert str(first) == str(second)
    assert first.table() == second.table()
    assert first.counts == {
        LOST: 2,
        LOST_ACKS0: 0,
        DUPLICATE: 1,
        OFFSET_REUSED: 1,
        DIVERGENT: 1,
        UNEXPECTED: 2,
        REORDERED: 0,
        AMBIGUOUS: 1,
    }


# --- random histories with injected anomalies -----------------------------------------------------

PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]


@st.composite
def histories(draw):
    """A clean history: per-partition logs in send order, plus the sends that built them."""
    sends: list[SendRecord] = []
    logs: dict = {tp: [] for tp in PARTITIONS}
    expected: set = set()
    for i in range(draw(st.integers(1, 30))):
        tp = draw(st.sampled_from(PARTITIONS))
        producer = draw(st.sampled_from(["p1", "p2"]))
        outcome = draw(st.sampled_from([ACKED, ACKED, ACKED, FAILED, UNKNOWN]))
        acks = draw(st.sampled_from([0, 1, -1]))
        ident = f"v{i}".encode()
        landed = (outcome == ACKED and acks != 0) or draw(st.booleans())
        offset = len(logs[tp]) if landed else None
        if landed:
            logs[tp].append((offset, ident))
        if outcome == ACKED:
            sends.append(SendRecord.acked(ident, *tp, offset if acks else -1, acks=acks, producer=producer))
            if not landed:
                expected.add((LOST_ACKS0, *tp, None, ident))
        elif outcome == FAILED:
            sends.append(SendRecord.failed(ident, *tp, "NETWORK_EXCEPTION", acks=acks, producer=producer))
            if landed:
                expected.add((AMBIGUOUS, *tp, offset, ident))
        else:
            sends.append(SendRecord.unknown(ident, *tp, acks=acks, producer=producer))
            expected.add((AMBIGUOUS, *tp, offset, ident))
    return sends, logs, expected


def fingerprint(report: CheckReport) -> set:
    return {(a.kind, a.topic, a.partition, a.offset, a.id) for a in report.anomalies}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data())
def test_injected_anomalies_are_reported_exactly(history, data):
    sends, logs, expected = history
    base_report = check_history(sends, logs, {tp: {"r1": log, "r2": log} for tp, log in logs.items()})
    assert fingerprint(base_report) == expected
    assert base_report.ok

    durable = [s for s in sends if s.outcome == ACKED and s.acks != 0]
    victims = data.draw(st.permutations(durable))
    n_drop = data.draw(st.integers(0, len(victims)))
    n_reuse = data.draw(st.integers(0, len(victims) - n_drop))
    dropped, reused = victims[:n_drop], victims[n_drop : n_drop + n_reuse]
    touched = {s.id for s in victims[: n_drop + n_reuse]}
    present = [(tp, o, i) for tp, log in logs.items() for o, i in log if i not in touched]
    duplicated = data.draw(st.lists(st.sampled_from(present), unique=True, max_size=5)) if present else []

    reads = {tp: list(log) for tp, log in logs.items()}
    sends = list(sends)
    for s in dropped:
        reads[s.tp].remove((s.offset, s.id))
        expected.add((LOST, *s.tp, s.offset, s.id))
    for j, s in enumerate(reused):
        # truncated and overwritten by a later send from another producer, acked at the same offset
        newcomer = f"late{j}".encode()
        reads[s.tp][reads[s.tp].index((s.offset, s.id))] = (s.offset, newcomer)
        sends.append(SendRecord.acked(newcomer, *s.tp, s.offset, producer=f"late{j}"))
        expected |= {(LOST, *s.tp, s.offset, s.id), (OFFSET_REUSED, *s.tp, s.offset, s.id)}
    for tp, offset, ident in duplicated:
        reads[tp].append((len(logs[tp]) + len(reads[tp]), ident))
        expected.add((DUPLICATE, *tp, offset, ident))

    replicas = {tp: {"r1": log, "r2": list(log)} for tp, log in logs.items()}
    diverged = data.draw(st.lists(st.sampled_from(present), unique=True, max_size=3)) if present else []
    for tp, offset, _ in diverged:
        replicas[tp]["r2"][offset] = (offset, b"other")
        expected.add((DIVERGENT, *tp, offset, None))

    report = check_history(sends, reads, replicas)
    assert fingerprint(report) == expected
    assert report.counts[LOST] == len(dropped) + len(reused)
    assert report.ok == (not (dropped or reused or duplicated or diverged))
    assert str(report) == str(check_history(sends, reads, replicas))
