"""The leader's remembered layouts (``records.validation``'s plans): once a producer's batch has been
walked, later batches of the same count and size are checked by gathering their framing bytes. That
shortcut must refuse exactly what the record-by-record walk refuses."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kafkalite.errors import InvalidRecordError
from kafkalite.records import build_values_batch
from kafkalite.records.batch import BATCH_HEADER_SIZE
from kafkalite.records.record import encode_record
from kafkalite.records.validation import _PLANS, _SEEN, _check_exact, _fits, check_records
from kafkalite.records.varint import decode_varint
from kafkalite.storage import Log
from tests.poison_helpers import raw_batch


def _section(n: int, stamps: list[int], key: bytes | None, values: list[bytes]) -> bytes:
    out = bytearray()
    for i in range(n):
        encode_record(out, i, stamps[i], key, values[i])
    return bytes(out)


def _same_answer(section: bytes, n: int) -> str:
    """Assert ``check_records`` (through whatever plan is remembered) answers as the exact walk does."""
    try:
        want = _check_exact(section, n, True)
    except InvalidRecordError as e:
        with pytest.raises(InvalidRecordError) as got:
            check_records(section, n, null_keys=True)
        assert got.value.message == e.message
        return "refused"
    assert check_records(section, n, null_keys=True) == want
    return "accepted"


@st.composite
def layouts(draw) -> tuple[bytes, bytes, int]:
    """Two sections laid out alike (the same record count, sizes and varint widths) whose values and
    timestamps differ: what one producer sends twice."""
    n = draw(st.integers(1, 150))
    size = draw(st.sampled_from([0, 1, 50, 100, 300]))
    key = draw(st.sampled_from([None, b"k", b"key-0"]))
    # Timestamp deltas of one byte or two, switching at a few records: a few runs of alike records.
    switches = sorted(draw(st.lists(st.integers(1, n), max_size=4)))
    wide = [sum(s <= i for s in switches) % 2 == 1 for i in range(n)]
    rnd = draw(st.randoms(use_true_random=False))

    def stamps() -> list[int]:
        return [rnd.randint(64, 8191) if w else rnd.randint(0, 63) for w in wide]

    def values() -> list[bytes]:
        return [rnd.randbytes(size) for _ in range(n)]

    return _section(n, stamps(), key, values()), _section(n, stamps(), key, values()), n


@settings(max_examples=300, deadline=None)
@given(layouts(), st.data())
def test_a_remembered_layout_takes_the_next_batch_and_refuses_any_bad_byte(case, data):
    first, second, n = case
    _PLANS.clear()
    _SEEN.clear()
    assert check_records(first, n, null_keys=True) == _check_exact(first, n, True)
    assert (n, 0, len(first)) not in _PLANS, "a count and size seen once make no plan"
    assert check_records(first, n, null_keys=True) == _check_exact(first, n, True)
    plan = _PLANS.get((n, 0, len(first)))
    assert plan is not None, "a second batch of runs of alike records leaves its layout behind"
    assert _fits(plan, second), "the same producer's next batch fits the layout"
    assert check_records(second, n, null_keys=True) == _check_exact(second, n, True)
    # One byte changed anywhere: the plan may take it only if the exact walk does, with the same answer.
    bad = bytearray(second)
    at = data.draw(st.integers(0, len(bad) - 1))
    bad[at] = data.draw(st.integers(0, 255).filter(lambda b: b != second[at]))
    fits = _fits(plan, bytes(bad))
    event(f"fits the plan: {fits}")
    if fits:
        assert _check_exact(bytes(bad), n, True) == _check_exact(second, n, True)
    _PLANS[(n, 0, len(first))] = plan  # the failed check may have replaced it: answer through the plan
    event(_same_answer(bytes(bad), n))


def test_every_byte_of_a_producer_batch_is_either_free_or_checked():
    # A producer's batch: 148 records of 100 bytes, offset deltas of one byte then two from record 64.
    n = 148
    values = [bytes([i]) * 100 for i in range(n)]
    batch = build_values_batch(values, [1_700_000_000_000 + i for i in range(n)])
    section = batch[BATCH_HEADER_SIZE:]
    _PLANS.clear()
    _SEEN.clear()
    assert check_records(section, n) == (-1, -1)
    assert check_records(section, n) == (-1, -1)  # the second time a count and size come: a plan
    plan = _PLANS[(n, 0, len(section))]
    starts = [0]
    for _ in range(n):
        length, body = decode_varint(section, starts[-1])
        starts.append(body + length)
    # Every byte of the records where a layout could change: the first, around the switch of offset
    # deltas to two bytes, the last.
    tried = refused = 0
    for r in (0, 1, 62, 63, 64, 65, n - 1):
        for at in range(starts[r], starts[r + 1]):
            for b in {0x00, 0x01, 0x7F, 0x80, 0xFF, section[at] ^ 0x01, section[at] ^ 0x80} - {section[at]}:
                bad = section[:at] + bytes([b]) + section[at + 1 :]
                tried += 1
                if _fits(plan, bad):  # only a key or value byte: the record is still sound
                    assert _check_exact(bad, n, False) == (-1, -1), f"byte {at} set to {b:#x} slips through"
                else:  # walked afresh: refused, or (a null key made empty, say) another valid layout
                    _PLANS[(n, 0, len(section))] = plan
                    refused += _same_answer(bad, n) == "refused"
    assert refused > 7 * 5 * 6 and tried > refused, "framing bytes were refused, value bytes taken"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_leader_that_took_a_producers_batch_refuses_the_next_one_with_a_bad_byte(data):
    # Through Log.append, as the leader meets them: the producer's batches share a layout, and one
    # byte of the next is damaged inside the records (its CRC made right, as a buggy client would).
    n = data.draw(st.integers(60, 150))
    values = [bytes([i & 0xFF]) * 100 for i in range(n)]
    good = build_values_batch(values, [1_700_000_000_000 + i for i in range(n)])
    section = good[BATCH_HEADER_SIZE:]
    at = data.draw(st.integers(0, len(section) - 1))
    bad = bytearray(section)
    bad[at] = data.draw(st.integers(0, 255).filter(lambda b: b != section[at]))
    try:
        _check_exact(bytes(bad), n, False)
        valid = True
    except InvalidRecordError:
        valid = False
    event("damaged batch valid" if valid else "damaged batch invalid")
    with tempfile.TemporaryDirectory() as d, Log.open(f"{d}/t-0") as log:
        log.append(raw_batch(section, n), from_client=True)
        log.append(raw_batch(section, n), from_client=True)  # the count and size again: a plan
        assert _PLANS.get((n, BATCH_HEADER_SIZE, len(good))) is not None
        if valid:
            log.append(raw_batch(bytes(bad), n), from_client=True)
            assert log.log_end_offset == 3 * n
        else:
            with pytest.raises(InvalidRecordError):
                log.append(raw_batch(bytes(bad), n), from_client=True)
            assert log.log_end_offset == 2 * n
