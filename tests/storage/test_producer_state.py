"""Producer state on the log: the idempotent producer's sequence checks, duplicates answered with the first
copy's offsets, ``.snapshot`` files in Kafka's layout, and rebuilding the state from the log."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
)
from kafkalite.records import build_batch, set_producer_fields
from kafkalite.storage import Log
from kafkalite.storage.producer_state import (
    MAX_SEQUENCE,
    ProducerBatchInfo,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    next_sequence,
    snapshot_name,
)

PID = 7


def batch(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, tag: str = "v") -> bytes:
    buf = build_batch([(None, f"{tag}{seq}-{i}".encode(), None) for i in range(n)], timestamp=1000 + seq)
    return bytes(set_producer_fields(bytearray(buf), pid, epoch, seq))


def info(first_seq: int, n: int = 1, *, epoch: int = 0, offset: int = 0) -> ProducerBatchInfo:
    return ProducerBatchInfo(
        PID, epoch, first_seq, next_sequence(first_seq, n - 1), offset, offset + n - 1, 0, False
    )


def values(log: Log) -> list[bytes]:
    return [r.value for r in log.iter_records()]


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", {"segment.bytes": 4096})
    yield lg
    lg.close()


# ------------------------------------------------------------------------------------- the checks


def test_in_order_batches_are_appended_and_tracked(log):
    for seq in (0, 2, 5):
        log.append(batch(seq, 2 if seq == 0 else (3 if seq == 2 else 1)))
    entry = log.producer_state.producers[PID]
    assert entry.epoch == 0 and entry.last_seq == 5 and entry.last_offset == 5
    assert log.log_end_offset == 6


@pytest.mark.parametrize("which", range(5))
def test_a_retry_of_any_of_the_last_five_batches_gets_its_first_offsets_back(log, which):
    for seq in range(6):
        log.append(batch(seq))
    # Batch 0 fell out of the window of five; batches 1..5 are remembered.
    seq = which + 1
    dup = log.append(batch(seq))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (seq, seq)
    assert log.log_end_offset == 6 and len(values(log)) == 6


def test_a_retry_older_than_the_window_is_out_of_order(log):
    for seq in range(6):
        log.append(batch(seq))
    with pytest.raises(OutOfOrderSequenceNumberError, match="0 \\(incoming seq. number\\), 5"):
        log.append(batch(0))


def test_a_gap_is_refused_and_nothing_is_written(log):
    log.append(batch(0))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append(batch(2))
    assert log.log_end_offset == 1
    log.append(batch(1))  # the missing batch still goes in
    assert log.log_end_offset == 2


def test_an_older_epoch_is_fenced(log):
    log.append(batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 3"):
        log.append(batch(1, epoch=2))


def test_a_new_epoch_must_start_at_sequence_zero(log):
    log.append(batch(0, epoch=0))
    with pytest.raises(OutOfOrderSequenceNumberError, match="new epoch"):
        log.append(batch(1, epoch=1))
    log.append(batch(0, epoch=1))
    assert log.producer_state.producers[PID].epoch == 1


def test_an_unknown_producer_may_start_at_any_sequence(log):
    # Since KIP-360 a leader that knows nothing of a producer (its state was removed with old data)
    # accepts whatever sequence comes.
    log.append(batch(41))
    assert log.producer_state.producers[PID].last_seq == 41


def test_sequences_wrap_after_the_largest_int32(log):
    log.append(batch(MAX_SEQUENCE - 1, 2))  # MAX-1, MAX
    log.append(batch(0, 3))  # wraps to 0
    entry = log.producer_state.producers[PID]
    assert entry.last_seq == 2 and log.log_end_offset == 5
    dup = log.append(batch(MAX_SEQUENCE - 1, 2))
    assert dup.duplicate and dup.first_offset == 0
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append(batch(4))


def test_next_sequence_wraps():
    assert next_sequence(MAX_SEQUENCE, 1) == 0
    assert next_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert next_sequence(0, -1) == MAX_SEQUENCE


def test_batches_without_a_producer_id_are_not_tracked(log):
    log.append(build_batch([(None, b"plain", None)]))
    assert log.producer_state.producers == {}


def test_one_call_checks_every_batch_before_writing(log):
    log.append(batch(0))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_many([batch(1), batch(5)])  # the second is out of order: neither is written
    assert log.log_end_offset == 1
    infos = log.append_many([batch(1), batch(2)])
    assert [i.first_offset for i in infos] == [1, 2]


# ------------------------------------------------------------------------------------- snapshots


def test_snapshot_layout_is_kafkas(tmp_path):
    e = ProducerStateEntry(5, 2)
    e.batches.append(info(10, 3, epoch=2, offset=100)._replace(producer_id=5, max_timestamp=1234))
    e.last_timestamp = 1234
    data = encode_snapshot([e])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1) and crc == crc32c.crc32c(data[6:])
    fields = struct.unpack_from(">qhiqiqiq", data, 10)
    # id, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch, txn first offset
    assert fields == (5, 2, 12, 102, 2, 1234, -1, -1)
    assert len(data) == 10 + 46
    (back,) = decode_snapshot(data)
    assert (back.producer_id, back.epoch, back.last_seq, back.last_offset) == (5, 2, 12, 102)
    assert back.batches[-1].first_seq == 10 and back.batches[-1].first_offset == 100


def test_a_corrupt_snapshot_is_reported():
    data = bytearray(encode_snapshot([ProducerStateEntry(1, 0)]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_snapshot(bytes(data))
    with pytest.raises(CorruptRecordError, match="too short"):
        decode_snapshot(b"\x00")


def test_close_writes_a_snapshot_and_open_loads_it(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d) as lg:
        for seq in range(3):
            lg.append(batch(seq))
    assert (d / snapshot_name(3)).exists()
    with Log.open(d) as lg:
        entry = lg.producer_state.producers[PID]
        assert entry.last_seq == 2
        # Only the last batch survives a snapshot, as in Kafka: its retry is still a duplicate.
        assert lg.append(batch(2)).duplicate
        lg.append(batch(3))


def test_state_is_rebuilt_from_the_log_when_no_snapshot_is_left(tmp_path):
    d = tmp_path / "t-0"
    lg = Log.open(d, {"segment.bytes": 300})
    for seq in range(12):
        lg.append(batch(seq))
    lg.crash()
    for p in d.glob("*.snapshot"):
        p.unlink()
    with Log.open(d) as lg:
        entry = lg.producer_state.producers[PID]
        assert entry.last_seq == 11
        assert [b.first_seq for b in entry.batches] == [7, 8, 9, 10, 11]
        assert lg.append(batch(9)).duplicate


def test_roll_snapshots_let_recovery_replay_only_the_tail(tmp_path):
    d = tmp_path / "t-0"
    lg = Log.open(d, {"segment.bytes": 300})
    for seq in range(12):
        lg.append(batch(seq))
    assert len(lg.segments) > 2
    assert sorted(p.name for p in d.glob("*.snapshot")) == [
        snapshot_name(s.base_offset) for s in lg.segments[1:]
    ]
    lg.crash()
    with Log.open(d) as lg:
        assert lg.producer_state.producers[PID].last_seq == 11


def test_truncation_rolls_the_state_back(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, {"segment.bytes": 300}) as lg:
        for seq in range(10):
            lg.append(batch(seq))
        lg.truncate_to(4)
        assert lg.producer_state.producers[PID].last_seq == 3
        assert all(int(p.name.split(".")[0]) <= 4 for p in d.glob("*.snapshot"))
        lg.append(batch(4, tag="again"))  # sequence 4 is expected again after the cut
        assert lg.log_end_offset == 5


def test_a_follower_rebuilds_the_same_state(tmp_path, log):
    for i in range(7):
        log.append(batch(2 * i, 2))
    with Log.open(tmp_path / "f-0") as follower:
        follower.append_as_follower(log.read(0, 1 << 20).records.read())
        lead, foll = log.producer_state.producers[PID], follower.producer_state.producers[PID]
        assert list(lead.batches) == list(foll.batches) and lead.epoch == foll.epoch


def test_producers_whose_data_is_gone_are_forgotten(log):
    log.append(batch(0, pid=1))
    log.append(batch(0, pid=2))
    log.delete_records(1)
    assert set(log.producer_state.producers) == {2}


def test_state_manager_alone_rejects_without_changing_anything(tmp_path):
    ps = ProducerStateManager(tmp_path, "t-0")
    ps.update(info(0))
    with pytest.raises(OutOfOrderSequenceNumberError):
        ps.check_client_batches([info(1, offset=1), info(3, offset=2)])
    assert ps.producers[PID].last_seq == 0


# ---------------------------------------------------------------------------------- a property


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    attempts=st.lists(st.integers(0, 11), max_size=40),
)
def test_retries_in_any_order_never_duplicate_nor_reorder(tmp_path_factory, sizes, attempts):
    """A producer resends any of its batches any number of times, in any order, and then sends each
    missing one in order: the log holds every batch once, in sequence order."""
    d = tmp_path_factory.mktemp("p") / "t-0"
    seqs, s = [], 0
    for n in sizes:
        seqs.append(s)
        s += n
    batches = [batch(seq, n) for seq, n in zip(seqs, sizes, strict=True)]
    with Log.open(d) as lg:
        sent = 0
        for a in attempts:
            i = a % len(batches)
            if i > sent:
                continue  # a producer never sends past the first unacknowledged batch and its window
            try:
                info_ = lg.append(batches[i])
            except OutOfOrderSequenceNumberError:
                continue
            if not info_.duplicate:
                assert i == sent
                sent += 1
        for i in range(sent, len(batches)):
            lg.append(batches[i])
        got = values(lg)
    want = [f"v{seq}-{j}".encode() for seq, n in zip(seqs, sizes, strict=True) for j in range(n)]
    assert got == want
