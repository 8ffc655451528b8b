"""Example-based tests for kafkalite.records: known byte vectors, codecs, error messages."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c

from kafkalite.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from kafkalite.records import (
    BATCH_HEADER_SIZE,
    MAGIC_V2,
    BatchHeader,
    Compression,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_batch_tuples,
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    iter_batches,
    parse_control_record,
    stamp_batch,
    validate_batch,
)
from kafkalite.records.compression import XERIAL_MAGIC, compress, decompress

HEADER = struct.Struct(">qiibIhiqqqhii")


def refresh_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


# --- CRC and varints ---------------------------------------------------------------------------


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),  # zigzag 600 = 0b100_1011000 -> 0x58|0x80, 0x04
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
        (2**31, b"\x80\x80\x80\x80\x10"),
    ],
)
def test_varlong_known_encodings(value, encoded):
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded, 0) == (value, len(encoded))


def test_varint_range_checks():
    with pytest.raises(InvalidRecordError):
        encode_varint(2**31)
    with pytest.raises(InvalidRecordError):
        encode_varint(-(2**31) - 1)
    with pytest.raises(InvalidRecordError):
        encode_varlong(2**63)


def test_varint_decode_errors_name_position():
    with pytest.raises(CorruptRecordError, match="truncated varint at position 2"):
        decode_varint(b"\x00\x00\x80\x80", 2)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"", 0)
    with pytest.raises(CorruptRecordError, match="overlong varint at position 0"):
        decode_varint(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(CorruptRecordError, match="does not fit in 32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(CorruptRecordError, match="overlong varlong at position 1"):
        decode_varlong(b"\x00" + b"\xff" * 10 + b"\x01", 1)
    with pytest.raises(CorruptRecordError, match="does not fit in 64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x7f")


def test_uvarint():
    assert encode_uvarint(0) == b"\x00"
    assert encode_uvarint(300) == b"\xac\x02"
    assert decode_uvarint(b"\xac\x02") == (300, 2)
    with pytest.raises(InvalidRecordError):
        encode_uvarint(-1)


# --- a batch built by hand, field by field -------------------------------------------------------


def test_build_batch_matches_hand_built_bytes():
    # record 0: offsetDelta 0, tsDelta 0, key b"k", value b"hello", no headers
    rec0_body = bytes([0x00, 0x00, 0x00, 0x02]) + b"k" + bytes([0x0A]) + b"hello" + bytes([0x00])
    assert len(rec0_body) == 12
    rec0 = bytes([12 << 1]) + rec0_body
    # record 1: tsDelta 5, offsetDelta 1, null key, empty value, one header ("h", b"x")
    rec1_body = bytes([0x00, 0x0A, 0x02, 0x01, 0x00, 0x02, 0x02]) + b"h" + bytes([0x02]) + b"x"
    assert len(rec1_body) == 10
    rec1 = bytes([10 << 1]) + rec1_body
    records = rec0 + rec1
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CREATE_TIME, not transactional, not control
            1,  # lastOffsetDelta
            1_700_000_000_000,  # baseTimestamp
            1_700_000_000_005,  # maxTimestamp
            1234,  # producerId
            3,  # producerEpoch
            17,  # baseSequence
            2,  # recordsCount
        )
        + records
    )
    crc = crc32c(after_crc)
    expected = struct.pack(">qiib", 42, 49 + len(records), 7, 2) + struct.pack(">I", crc) + after_crc
    assert len(expected) == 61 + len(records)

    built = build_batch(
        [(b"k", b"hello"), (None, b"", [Header("h", b"x")])],
        base_offset=42,
        timestamp=[1_700_000_000_000, 1_700_000_000_005],
        producer_id=1234,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=7,
    )
    assert built == expected

    h = validate_batch(expected)
    assert h == BatchHeader(
        42, 49 + len(records), 7, 2, crc, 0, 1, 1_700_000_000_000, 1_700_000_000_005, 1234, 3, 17, 2
    )
    assert h.size == len(expected)
    assert h.last_offset == 43 and h.next_offset == 44
    assert RecordBatch.decode(expected).records == [
        Record(42, 1_700_000_000_000, b"k", b"hello"),
        Record(43, 1_700_000_000_005, None, b"", (Header("h", b"x"),)),
    ]


def test_header_constants_and_properties():
    assert BATCH_HEADER_SIZE == 61 == HEADER.size
    assert MAGIC_V2 == 2
    b = build_batch(
        [(b"a", b"b")],
        timestamp=5,
        compression=Compression.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        is_transactional=True,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
    )
    h = BatchHeader.parse(b)
    assert h.attributes == 1 | 8 | 16
    assert h.compression is Compression.GZIP
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert h.magic == 2 and h.records_count == 1


def test_empty_batch_and_delete_horizon():
    b = build_batch([], base_offset=10, last_offset_delta=4, delete_horizon_ms=99, producer_id=5)
    h = validate_batch(b)
    assert h.records_count == 0 and h.last_offset == 14 and h.has_delete_horizon
    assert h.delete_horizon_ms == 99 and h.base_timestamp == 99
    assert len(b) == 61
    assert RecordBatch.decode(b).records == []


# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec):
    recs = [
        (b"key", b"value"),
        (None, b"null key"),
        (b"tombstone", None),
        (b"", b""),
        (None, None),
        (
            b"h",
            b"v" * 1000,
            [Header("trace", b"abc"), Header("empty", b""), Header("none", None), Header("", b"x")],
        ),
        ("str-key", "str-value é"),
    ]
    b = build_batch(recs, base_offset=100, timestamp=1000, compression=codec)
    rb = RecordBatch.decode(b)
    assert rb.header.compression == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in rb]
    assert got == [
        (100, 1000, b"key", b"value", ()),
        (101, 1000, None, b"null key", ()),
        (102, 1000, b"tombstone", None, ()),
        (103, 1000, b"", b"", ()),
        (104, 1000, None, None, ()),
        (
            105,
            1000,
            b"h",
            b"v" * 1000,
            (Header("trace", b"abc"), Header("empty", b""), Header("none", None), Header("", b"x")),
        ),
        (106, 1000, b"str-key", "str-value é".encode(), ()),
    ]
    assert len(rb) == 7 and rb.last_offset == 106


@pytest.mark.parametrize("codec", list(Compression))
def test_large_batch_every_codec(codec):
    recs = [(b"%d" % i, bytes([i % 251]) * 300) for i in range(400)]  # 120 KB: several snappy blocks
    b = build_batch(recs, timestamp=[i * 3 - 500 for i in range(400)], compression=codec)
    rb = RecordBatch.decode(b)
    assert [(r.key, r.value) for r in rb] == recs
    assert [r.timestamp for r in rb] == [i * 3 - 500 for i in range(400)]
    assert rb.header.max_timestamp == 399 * 3 - 500


def test_snappy_is_xerial_framed():
    b = build_batch([(b"k", b"v" * 100_000)], timestamp=0, compression=Compression.SNAPPY)
    payload = b[61:]
    assert payload[:8] == b"\x82SNAPPY\x00" == XERIAL_MAGIC
    assert struct.unpack(">ii", payload[8:16]) == (1, 1)
    # blocks: [int32 length][raw snappy] until the end
    pos, blocks = 16, 0
    while pos < len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        pos += 4 + n
        blocks += 1
    assert pos == len(payload) and blocks >= 3


def test_snappy_decoder_accepts_raw_block():
    plain = build_batch([(b"k", b"hello" * 20)], timestamp=1)
    raw = bytes(cramjam.snappy.compress_raw(plain[61:]))
    b = bytearray(plain[:61] + raw)
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">h", b, 21, Compression.SNAPPY)
    refresh_crc(b)
    assert RecordBatch.decode(b).records[0].value == b"hello" * 20


def test_compress_unknown_codec():
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 6"):
        compress(6, b"x")
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 7"):
        decompress(7, b"x")
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(Compression.LZ4, b"not lz4 at all")


def test_corrupt_compressed_payload_names_codec():
    b = bytearray(build_batch([(b"k", b"v" * 200)], timestamp=1, compression=Compression.ZSTD))
    b[70] ^= 0xFF
    b[71] ^= 0xFF
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="zstd"):
        RecordBatch.decode(b)


def test_unknown_codec_in_batch():
    b = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    struct.pack_into(">h", b, 21, 5)
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 5"):
        validate_batch(b)


def test_record_like_inputs_and_offset_gaps():
    src = [Record(10, 500, b"a", b"1"), Record(13, 400, b"b", None, (Header("x", b"y"),))]
    b = build_batch(src, base_offset=10, offset_deltas=[0, 3], last_offset_delta=5)
    rb = RecordBatch.decode(b)
    assert rb.records == src
    assert rb.header.last_offset == 15 and rb.header.base_timestamp == 500 and rb.header.max_timestamp == 500
    with pytest.raises(InvalidRecordError):
        build_batch(src, offset_deltas=[0])
    with pytest.raises(InvalidRecordError):
        build_batch(src, offset_deltas=[0, 3], last_offset_delta=2)
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k",)])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", 5)])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v", [(None, b"x")])])


def test_default_timestamp_is_now():
    import time

    before = int(time.time() * 1000)
    h = validate_batch(build_batch([(b"k", b"v")]))
    assert before <= h.base_timestamp <= int(time.time() * 1000)


def test_decode_batch_tuples():
    b = build_batch([(b"k", b"v"), (None, None)], base_offset=3, timestamp=[7, 9])
    h, rows = decode_batch_tuples(b)
    assert h.records_count == 2
    assert rows == [(3, 7, b"k", b"v", ()), (4, 9, None, None, ())]


# --- validation errors -------------------------------------------------------------------------


def good() -> bytearray:
    return bytearray(build_batch([(b"key", b"value"), (b"k2", b"v2")], base_offset=0, timestamp=1))


def test_crc_mismatch_message():
    b = good()
    b[-1] ^= 0x01
    (stored,) = struct.unpack_from(">I", b, 17)
    computed = crc32c(bytes(b[21:]))
    with pytest.raises(CorruptRecordError) as ei:
        validate_batch(b)
    assert str(ei.value) == (
        f"CORRUPT_MESSAGE: CRC32C mismatch in batch at position 0: stored 0x{stored:08x}, computed 0x{computed:08x}"
    )
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch in batch at position 5"):
        validate_batch(b"\x00" * 5 + bytes(b), 5)
    # decoding without CRC check still works on the record bytes we did not damage
    RecordBatch.decode(good(), verify_crc=False)


def test_unknown_magic():
    b = good()
    b[16] = 1
    with pytest.raises(
        CorruptRecordError,
        match=r"unknown magic byte 1 at position 0 \(kafkalite reads record batch v2 only\)",
    ):
        validate_batch(b)
    with pytest.raises(CorruptRecordError, match="unknown magic byte 0 at position 0"):
        BatchHeader.parse(bytes(20))
    with pytest.raises(CorruptRecordError, match="unknown magic byte 1 at position 0"):
        list(iter_batches(b))


def test_truncated_messages():
    b = bytes(good())
    with pytest.raises(
        CorruptRecordError, match=f"truncated batch at position 0: need {len(b)} bytes, have {len(b) - 1}"
    ):
        validate_batch(b[:-1])
    with pytest.raises(
        CorruptRecordError, match="truncated batch at position 0: need 61 header bytes, have 10"
    ):
        validate_batch(b[:10])
    with pytest.raises(CorruptRecordError, match="truncated batch at position 3"):
        validate_batch(b"abc" + b[:60], 3)


def test_batch_length_below_minimum():
    b = good()
    struct.pack_into(">i", b, 8, 48)
    with pytest.raises(CorruptRecordError, match="batch_length 48, below the minimum 49"):
        validate_batch(b)
    with pytest.raises(CorruptRecordError, match="below the minimum 49"):
        list(iter_batches(b))


def test_negative_records_count_and_bad_last_offset_delta():
    b = good()
    struct.pack_into(">i", b, 57, -1)
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="negative records_count -1"):
        validate_batch(b)
    b = good()
    struct.pack_into(">i", b, 23, 0)  # two records but lastOffsetDelta 0
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="last_offset_delta 0 inconsistent with records_count 2"):
        validate_batch(b)
    b = good()
    struct.pack_into(">i", b, 57, 1000)
    struct.pack_into(">i", b, 23, 999)
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="claims 1000 records"):
        validate_batch(b)


def test_records_count_mismatch_on_decode():
    b = good()
    struct.pack_into(">i", b, 57, 1)
    refresh_crc(b)
    validate_batch(b)
    with pytest.raises(CorruptRecordError, match="unexpected bytes after 1 records"):
        RecordBatch.decode(b)
    b = good()
    struct.pack_into(">i", b, 57, 3)
    struct.pack_into(">i", b, 23, 2)
    refresh_crc(b)
    with pytest.raises(CorruptRecordError, match="ends inside a record"):
        RecordBatch.decode(b)


def test_max_size():
    b = good()
    assert validate_batch(b, max_size=len(b)).size == len(b)
    with pytest.raises(MessageTooLargeError, match=f"is {len(b)} bytes, larger than the limit of 50"):
        validate_batch(b, max_size=50)


# --- stamping ----------------------------------------------------------------------------------


def test_stamp_offset_and_epoch_keep_crc():
    b = good()
    crc_before = bytes(b[17:21])
    stamp_batch(b, 0, base_offset=1000, partition_leader_epoch=12)
    assert bytes(b[17:21]) == crc_before
    h = validate_batch(b)
    assert h.base_offset == 1000 and h.partition_leader_epoch == 12
    assert [r.offset for r in RecordBatch.decode(b)] == [1000, 1001]


def test_stamp_log_append_time_recomputes_crc():
    two = bytearray(bytes(good()) + bytes(good()))
    second = len(two) // 2
    mv = memoryview(two)
    stamp_batch(mv, second, base_offset=2, max_timestamp=777)
    validate_batch(two, 0)
    h = validate_batch(two, second)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.max_timestamp == 777 and h.base_offset == 2
    assert [r.timestamp for r in RecordBatch.decode(two, second)] == [777, 777]
    assert [r.timestamp for r in RecordBatch.decode(two, 0)] == [1, 1]


# --- iteration ---------------------------------------------------------------------------------


def test_iter_batches_positions_and_torn_tail():
    a = build_batch([(b"a", b"1")], base_offset=0, timestamp=1)
    b = build_batch([(b"b", b"2"), (b"c", b"3")], base_offset=1, timestamp=2)
    log = a + b + b[:40]
    got = list(iter_batches(log))
    assert [(p, h.base_offset) for p, h in got] == [(0, 0), (len(a), 1)]
    assert list(iter_batches(log, len(a))) == [(len(a), BatchHeader.parse(b))]
    assert [p for p, _ in iter_batches(log, 0, len(a) + len(b) - 1)] == [0]
    assert list(iter_batches(b"")) == []


# --- control records ---------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    b = build_control_batch(
        commit, producer_id=77, producer_epoch=2, coordinator_epoch=9, timestamp=123, base_offset=5
    )
    rb = RecordBatch.decode(b)
    h = rb.header
    assert h.is_control and h.is_transactional and h.producer_id == 77 and h.producer_epoch == 2
    (r,) = rb.records
    assert r.offset == 5 and r.timestamp == 123
    assert r.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert r.value == struct.pack(">hi", 0, 9)
    cr = parse_control_record(r.key, r.value)
    assert cr.type is (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert cr.is_commit is commit and cr.coordinator_epoch == 9


def test_control_parse_errors():
    with pytest.raises(CorruptRecordError, match="unknown control record type 7"):
        parse_control_record(struct.pack(">hh", 0, 7), struct.pack(">hi", 0, 0))
    with pytest.raises(CorruptRecordError, match="too short"):
        parse_control_record(b"\x00", b"")
    with pytest.raises(CorruptRecordError, match="too short"):
        parse_control_record(struct.pack(">hh", 0, 1), None)
