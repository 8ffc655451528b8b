"""Poison batches: a produced batch with a valid CRC but malformed records inside is refused by the leader
(INVALID_RECORD, or CORRUPT_MESSAGE for an unreadable compressed payload) with nothing appended, as
Kafka's LogValidator does, instead of being acknowledged, replicated and then wedging every consumer.

The batches are made by hand (``poison_helpers``); ``test_poison_batches`` follows them through whole
clusters and real clients.
"""

from __future__ import annotations

import tempfile
import tracemalloc

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkalite.clock import ManualClock
from kafkalite.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkalite.records import Compression, build_batch, decode_batches
from kafkalite.records.batch import RecordBatch
from kafkalite.records.compression import decompress
from kafkalite.records.record import encode_record
from kafkalite.records.validation import _check_exact, _check_runs, check_records
from kafkalite.storage import Log
from kafkalite.storage.log_validator import validate_records
from tests.poison_helpers import (
    CODECS,
    GOOD,
    HEADER,
    T0,
    good_batch,
    poison_batches,
    raw_batch,
    records,
    second_record,
)

INVALID_RECORD, CORRUPT_MESSAGE = 87, 2


# ----- the records walk ------------------------------------------------------------------------------
def test_check_records_accepts_what_producers_send_and_names_the_bad_record():
    assert check_records(GOOD, 3) == (-1, -1)
    keyless_last = records([b"v"] * 300, keys=[b"k"] * 299 + [None])
    assert check_records(keyless_last, 300, null_keys=True) == (299, -1)
    at = second_record(GOOD)
    with pytest.raises(InvalidRecordError, match="record 1 of 3: declares 63 bytes"):
        check_records(GOOD[:at] + b"\x7e" + GOOD[at + 1 :], 3)
    with pytest.raises(InvalidRecordError, match="record 1 of 3: has offset delta 2"):
        check_records(records([b"a", b"b", b"c"], deltas=[0, 2, 1]), 3)
    with pytest.raises(InvalidRecordError, match="2 bytes follow the last of the batch's 3 records"):
        check_records(GOOD + b"\0\0", 3)


def test_vectorised_walk_agrees_with_the_exact_one_on_big_batches():
    # 200 records: the numpy path; the same bytes with one record's offset delta wrong are refused.
    section = records([b"x" * 100] * 200)
    assert check_records(section, 200) == (-1, -1)
    bad = records([b"x" * 100] * 200, deltas=list(range(150)) + [151] + list(range(151, 200)))
    with pytest.raises(InvalidRecordError, match="record 150 of 200"):
        check_records(bad, 200)
    with_headers = records([b"v"] * 100, headers=[[("h", b"1")] if i % 10 == 0 else [] for i in range(100)])
    assert check_records(with_headers, 100) == (-1, -1) == _check_exact(with_headers, 100, False)


def test_a_full_producer_batch_past_8191_records_takes_the_runs_walk():
    # 1 MB of 100-byte values is ~9,000 records (what librdkafka sends to a busy leader, batch.size 1 MB):
    # offset deltas from 8,192 on are three-byte varints. The runs walk must answer for them too; the
    # exact walk, a hundred times slower, made the leader slower, so batches grew, so more took it.
    n = 9_082
    section = records([b"x" * 100] * n)
    assert _check_runs(section, n, 0, len(section)) == 0  # the walk answered: record 0 has no key
    assert check_records(section, n) == (-1, -1) == _check_exact(section, n, False)
    keyless_last = records([b"v"] * n, keys=[b"k"] * (n - 1) + [None])
    assert _check_runs(keyless_last, n, 0, len(keyless_last)) == n - 1
    wrong = records([b"x" * 100] * n, deltas=[*range(9_000), 9_001, *range(9_001, n)])
    assert _check_runs(wrong, n, 0, len(wrong)) is None
    with pytest.raises(InvalidRecordError, match=f"record 9000 of {n}: has offset delta 9001"):
        check_records(wrong, n)
    # 8,193 empty records: the layout is small enough to be remembered, and the next batch checked by it
    empty = records([b""] * 8_193)
    assert check_records(empty, 8_193) == (-1, -1) == check_records(empty, 8_193)
    late = bytearray(empty)
    late[-4] = 2  # the last record's offset delta 8,192 -> 16,384 (third byte of its varint)
    with pytest.raises(InvalidRecordError, match="record 8192 of 8193: has offset delta 16384"):
        check_records(bytes(late), 8_193)


# ----- bounded inflation ----------------------------------------------------------------------------
def test_a_gzip_bomb_is_refused_in_little_memory():
    bomb = poison_batches()["gzip bomb"]
    assert len(bomb) < 250_000  # about 199 KB that inflate to 200 MB
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError, match="inflates past the limit"):
            validate_records(bomb, 0, _fields(bomb), "t-0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"refusing the bomb held {peak:,} bytes"


def _fields(batch: bytes) -> tuple:
    return HEADER.unpack_from(batch, 0)


# ----- Log.append as the leader -------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(poison_batches()))
def test_leader_refuses_a_poison_batch_and_appends_nothing(tmp_path, name):
    bad = poison_batches()[name]
    with Log.open(tmp_path / "t-0") as log:
        log.append(good_batch([b"1", b"2"]))
        size = log.size_bytes
        with pytest.raises(InvalidRecordError) as err:
            log.append(bad, from_client=True)
        assert err.value.message.startswith("batch at position 0")
        assert (log.log_end_offset, log.size_bytes) == (2, size)
        log.append(good_batch([b"3"]))
        assert [r.value for r in log.iter_records()] == [b"1", b"2", b"3"]


def test_an_unreadable_compressed_payload_is_corrupt(tmp_path):
    with Log.open(tmp_path / "t-0") as log, pytest.raises(CorruptRecordError, match="gzip"):
        log.append(raw_batch(b"", 3, codec=Compression.GZIP, payload=b"\x1f\x8b not gzip at all"))
        assert log.log_end_offset == 0


def test_one_poison_batch_refuses_the_whole_multi_batch_request(tmp_path):
    first = good_batch([b"1"])
    data = first + poison_batches()["trailing bytes"] + good_batch([b"2"])
    with Log.open(tmp_path / "t-0") as log:
        with pytest.raises(InvalidRecordError, match=f"batch at position {len(first)} of t-0"):
            log.append(data)
        assert log.log_end_offset == 0 and log.size_bytes == 0


def test_clients_may_not_write_control_batches_or_unsequenced_idempotent_ones(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        with pytest.raises(InvalidRecordError, match="control batch"):
            log.append(raw_batch(GOOD, 3, attributes=0x20), from_client=True)
        with pytest.raises(InvalidRecordError, match="producer id 7 but base sequence -1"):
            log.append(raw_batch(GOOD, 3, producer_id=7), from_client=True)
        assert log.log_end_offset == 0


def test_compacted_topic_names_the_record_without_a_key(tmp_path):
    with Log.open(tmp_path / "t-0", {"cleanup.policy": "compact"}) as log:
        with pytest.raises(InvalidRecordError, match=r"without a key \(record 1 of 2\)") as err:
            log.append(build_batch([(b"k", b"v"), (None, b"v")], timestamp=T0))
        assert err.value.record_index == 1


def test_timestamps_outside_the_topic_bounds_are_invalid_timestamp(tmp_path):
    clock = ManualClock(T0)
    cfg = {"message.timestamp.before.max.ms": 60_000, "message.timestamp.after.max.ms": 1_000}
    with Log.open(tmp_path / "t-0", cfg, clock=clock) as log:
        log.append(build_batch([(None, b"ok")] * 3, timestamp=[T0 - 60_000, T0, T0 + 1_000]))
        stamps = [T0, T0, T0 - 60_001] + [T0] * 200  # the numpy walk and the exact one agree
        for ts in ([T0, T0 + 1_001], stamps):
            with pytest.raises(InvalidTimestampError, match=r"of record (1|2) is out of range") as err:
                log.append(build_batch([(None, b"x")] * len(ts), timestamp=ts))
            assert err.value.record_index in (1, 2)
        assert log.log_end_offset == 3
    with Log.open(tmp_path / "u-0", {**cfg, "message.timestamp.type": "LogAppendTime"}, clock=clock) as log:
        log.append(build_batch([(None, b"old")], timestamp=0))  # the leader stamps its own time
        assert log.log_end_offset == 1


def test_section_checks_find_the_first_late_record_either_way():
    section = records([b"v"] * 50)
    assert check_records(section, 50, ts_deltas=(0, 0)) == (-1, -1)
    assert check_records(section, 50, ts_deltas=(1, 5)) == (-1, 0) == _check_exact(section, 50, False, (1, 5))


def test_followers_keep_their_checks_and_copy_what_the_leader_wrote(tmp_path):
    with Log.open(tmp_path / "leader") as leader, Log.open(tmp_path / "follower") as follower:
        leader.append(good_batch([b"a"] * 5), leader_epoch=3)
        follower.append_as_follower(leader.read(0).records.read())
        assert [r.value for r in follower.iter_records()] == [b"a"] * 5


def test_validated_compressed_batches_decode_on_every_reader(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        for codec in CODECS:
            log.append(build_batch([(None, b"v%d" % i) for i in range(50)], timestamp=T0, compression=codec))
        assert len(list(log.iter_records())) == 200


def test_decoders_agree_on_a_validated_batch():
    batch = raw_batch(records([b"v"] * 40, keys=[b"k"] * 40), 40)
    validate_records(batch, 0, _fields(batch), "t-0")
    exact = RecordBatch.decode(batch).records
    assert decode_batches(batch, [0]) == exact and [r.offset for r in exact] == list(range(40))


# ----- property: refused, or read back exactly; never appended-then-unreadable ----------------------------
_values = st.one_of(st.none(), st.binary(max_size=12), st.binary(min_size=60, max_size=200))
_headers = st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2)


@st.composite
def mutated_batches(draw) -> tuple[bytes, int]:
    n = draw(st.integers(1, 30))
    keys = draw(st.lists(_values, min_size=n, max_size=n))
    values = draw(st.lists(_values, min_size=n, max_size=n))
    headers = draw(st.lists(_headers, min_size=n, max_size=n))
    section = bytearray(records(values, keys=keys, headers=headers))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(section)))
        kind = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        if kind == "set" and at < len(section):
            section[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            section[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif kind == "delete":
            del section[at : at + draw(st.integers(1, 3))]
        else:
            del section[at:]
    count = n + draw(st.sampled_from([0, 0, 0, -1, 1]))
    codec = draw(st.sampled_from([0, 0, *CODECS]))
    return raw_batch(bytes(section), count, codec=codec), codec


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_batches())
def test_any_mutated_batch_is_refused_or_every_reader_reads_exactly_its_records(case):
    batch, codec = case
    count = HEADER.unpack_from(batch)[12]
    with tempfile.TemporaryDirectory() as d, Log.open(f"{d}/t-0") as log:
        try:
            log.append(batch, from_client=True)
        except (InvalidRecordError, CorruptRecordError) as e:
            event(f"refused: {e.name}")
            assert e.code in (INVALID_RECORD, CORRUPT_MESSAGE)
            assert (log.log_end_offset, log.size_bytes) == (0, 0)
            return
        stored = log.read(0).records.read()
    event("accepted")
    exact = RecordBatch.decode(stored).records
    assert [r.offset for r in exact] == list(range(count))
    assert decode_batches(stored, [0]) == exact
    section = decompress(codec, stored[61:]) if codec else stored[61:]
    assert _check_exact(section, count, False) == (-1, -1)  # the numpy walk accepted only what it does
    if codec in (0, Compression.GZIP):  # kafka-python here has no snappy, lz4 or zstd library
        theirs = [(r.offset, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(bytearray(stored))]
        ours = [(r.offset, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in exact]
        assert theirs == ours


@st.composite
def alike_sections(draw) -> tuple[bytes, int]:
    """Runs of alike records (what the fast walk looks for), then a few byte edits."""
    n = draw(st.integers(1, 150))
    size = draw(st.sampled_from([0, 1, 50, 100, 300]))
    keyed = draw(st.booleans())
    stamps = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n))
    out = bytearray()
    for i in range(n):
        encode_record(out, i, stamps[i] if draw(st.booleans()) else 0, b"k" if keyed else None, b"v" * size)
    for _ in range(draw(st.integers(0, 2))):
        if out:
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out), n + draw(st.sampled_from([0, 0, 0, 1, -1]))


@settings(max_examples=400, deadline=None)
@given(alike_sections())
def test_the_runs_walk_accepts_only_what_the_exact_walk_accepts(case):
    section, n = case
    fast = _check_runs(section, n, 0, len(section)) if n > 0 else None
    event("runs walk answered" if fast is not None else "runs walk declined")
    try:
        exact = _check_exact(section, n, True)
    except InvalidRecordError:
        assert fast is None
        return
    if fast is not None:
        assert (fast, -1) == exact


_LONG: dict[int, bytes] = {}


@st.composite
def long_alike_sections(draw) -> tuple[bytes, int]:
    """More than 8,191 alike records (three-byte offset deltas from 8,192 on), then byte edits, most
    often in the framing of a record past the 8,191st."""
    n = draw(st.sampled_from([8_193, 8_194, 8_300]))
    if n not in _LONG:
        _LONG[n] = records([b"v" * 5] * n)
    out = bytearray(_LONG[n])
    size = len(records([b"v" * 5], deltas=[8_192]))  # every record from the 8,193rd on
    for _ in range(draw(st.integers(0, 2))):
        late = len(out) - (n - draw(st.integers(8_192, n - 1))) * size + draw(st.integers(0, size - 1))
        at = draw(st.just(late) | st.integers(0, len(out) - 1))
        out[at] = draw(st.integers(0, 255))
    return bytes(out), n + draw(st.sampled_from([0, 0, 0, 1, -1]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_alike_sections())
def test_the_runs_walk_accepts_only_what_the_exact_walk_accepts_past_8191_records(case):
    section, n = case
    fast = _check_runs(section, n, 0, len(section))
    event("runs walk answered" if fast is not None else "runs walk declined")
    try:
        exact = _check_exact(section, n, True)
    except InvalidRecordError:
        assert fast is None
        return
    if fast is not None:
        assert (fast, -1) == exact
