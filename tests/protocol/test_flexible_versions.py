"""The flexible versions of the data-path and group APIs, byte for byte: frames built here by hand from
Kafka's message definitions (ProduceRequest.json v9, FetchRequest.json / FetchResponse.json v12: compact
strings and arrays as unsigned varints of length + 1, a tagged-fields section after every struct, request
header v2 and response header v1), compared with what the codec and the dataclass bindings write and read.
Plus the version table the broker advertises, and the semantics a version brings with it."""

from __future__ import annotations

import struct

from kafkalite.protocol import (
    EpochEndOffset,
    FetchPartitionResponse,
    FetchResponse,
    JoinGroupResponse,
    ProduceRequest,
    TopicPartition,
)
from kafkalite.protocol.codec.adapter import to_body, to_request
from kafkalite.protocol.codec.header import decode_request, encode_request, encode_response
from kafkalite.protocol.codec.messages import SPECS, supported_versions


def _i8(n: int) -> bytes:
    return struct.pack(">b", n)


def _i16(n: int) -> bytes:
    return struct.pack(">h", n)


def _i32(n: int) -> bytes:
    return struct.pack(">i", n)


def _i64(n: int) -> bytes:
    return struct.pack(">q", n)


def _compact(raw: bytes) -> bytes:
    assert len(raw) + 1 < 0x80, "one-byte varint lengths keep these frames readable"
    return bytes([len(raw) + 1]) + raw


_NO_TAGS = b"\x00"
_BATCH = bytes(range(61))  # opaque to the codec: records pass through untouched


def _produce_v9_frame() -> bytes:
    header = _i16(0) + _i16(9) + _i32(7) + _i16(2) + b"me" + _NO_TAGS  # header v2: client id stays int16
    partition = _i32(3) + _compact(_BATCH) + _NO_TAGS
    topic = _compact(b"t") + bytes([1 + 1]) + partition + _NO_TAGS
    body = (
        b"\x00"  # transactional_id: a null compact string
        + _i16(-1)
        + _i32(1500)
        + bytes([1 + 1])  # topic_data: one topic
        + topic
        + _NO_TAGS
    )
    payload = header + body
    return _i32(len(payload)) + payload


def test_produce_v9_request_is_kafkas_bytes():
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": _BATCH}]}],
    }
    assert encode_request(0, 9, 7, "me", body) == _produce_v9_frame(), "Produce v9 encodes as Kafka's"
    header, decoded = decode_request(_produce_v9_frame()[4:])
    assert header == (0, 9, 7, "me"), "request header v2 read back"
    req = to_request(0, 9, decoded)
    assert isinstance(req, ProduceRequest), "a ProduceRequest"
    assert (req.acks, req.timeout_ms, req.transactional_id) == (-1, 1500, None), "top-level fields"
    (p,) = req.partitions
    assert (p.tp, bytes(p.records)) == (TopicPartition("t", 3), _BATCH), "the batch, untouched"


def _fetch_v12_frame(cluster_id: bytes | None) -> bytes:
    header = _i16(1) + _i16(12) + _i32(9) + _i16(1) + b"c" + _NO_TAGS
    partition = (
        _i32(0)  # partition
        + _i32(5)  # current_leader_epoch
        + _i64(42)  # fetch_offset
        + _i32(4)  # last_fetched_epoch
        + _i64(-1)  # log_start_offset
        + _i32(1 << 20)  # partition_max_bytes
        + _NO_TAGS
    )
    topic = _compact(b"orders") + bytes([1 + 1]) + partition + _NO_TAGS
    body = (
        _i32(-1)  # replica_id
        + _i32(500)  # max_wait_ms
        + _i32(1)  # min_bytes
        + _i32(52_428_800)  # max_bytes
        + _i8(1)  # isolation_level: read_committed
        + _i32(0)  # session_id
        + _i32(-1)  # session_epoch
        + bytes([1 + 1])
        + topic
        + bytes([0 + 1])  # forgotten_topics_data: empty
        + _compact(b"")  # rack_id
    )
    if cluster_id is None:
        body += _NO_TAGS
    else:
        tag = _compact(cluster_id)
        body += b"\x01" + b"\x00" + bytes([len(tag)]) + tag  # one tagged field: tag 0, its size, value
    payload = header + body
    return _i32(len(payload)) + payload


def _fetch_v12_body(cluster_id: str | None) -> dict:
    part = {
        "partition": 0,
        "current_leader_epoch": 5,
        "fetch_offset": 42,
        "last_fetched_epoch": 4,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {
        "cluster_id": cluster_id,
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52_428_800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "orders", "partitions": [part]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_fetch_v12_request_is_kafkas_bytes():
    for cid in (None, "kl-cluster"):
        want = _fetch_v12_frame(None if cid is None else cid.encode())
        assert encode_request(1, 12, 9, "c", _fetch_v12_body(cid)) == want, f"cluster id {cid}"
        header, decoded = decode_request(want[4:])
        assert decoded["cluster_id"] == cid, "ClusterId is tagged field 0"
        (fp,) = to_request(1, 12, decoded).partitions
        assert (fp.tp, fp.fetch_offset, fp.last_fetched_epoch) == (TopicPartition("orders", 0), 42, 4), (
            "LastFetchedEpoch is read from v12 on"
        )


def test_fetch_v12_response_writes_only_the_tagged_fields_that_are_set():
    """A partition answer in v12 carries DivergingEpoch (tag 0) when it is set, and no CurrentLeader or
    SnapshotId when they are not: Kafka writes a tagged field only when it differs from its default."""
    resp = FetchResponse(
        partitions=(
            FetchPartitionResponse(
                tp=TopicPartition("orders", 0),
                high_watermark=40,
                last_stable_offset=40,
                log_start_offset=0,
                diverging_epoch=EpochEndOffset(epoch=3, end_offset=38),
            ),
        )
    )
    diverging = _i32(3) + _i64(38) + _NO_TAGS
    partition = (
        _i32(0)
        + _i16(0)
        + _i64(40)  # high_watermark
        + _i64(40)  # last_stable_offset
        + _i64(0)  # log_start_offset
        + b"\x00"  # aborted_transactions: null
        + _i32(-1)  # preferred_read_replica
        + b"\x01"  # records: empty
        + b"\x01\x00"  # one tagged field, tag 0 (DivergingEpoch)
        + bytes([len(diverging)])
        + diverging
    )
    topic = _compact(b"orders") + bytes([1 + 1]) + partition + _NO_TAGS
    body = _i32(0) + _i16(0) + _i32(0) + bytes([1 + 1]) + topic + _NO_TAGS
    payload = _i32(77) + _NO_TAGS + body  # response header v1
    want = _i32(len(payload)) + payload
    assert encode_response(1, 12, 77, to_body(resp, 12)) == want, "Fetch v12 answer as Kafka writes it"
    plain = FetchResponse(partitions=(FetchPartitionResponse(tp=TopicPartition("orders", 0)),))
    frame = encode_response(1, 12, 77, to_body(plain, 12))
    assert frame.endswith(b"\x01" + _NO_TAGS + _NO_TAGS + _NO_TAGS), "no tagged field when none is set"


def test_join_group_below_v9_names_the_old_leader_when_assignment_is_skipped():
    """KIP-814: a static leader rejoining a stable group must not assign again. v9 says so with
    SkipAssignment; below v9 Kafka names the leader's previous member id, so the client is a follower."""
    resp = JoinGroupResponse(
        generation_id=4,
        protocol_type="consumer",
        protocol_name="range",
        leader="new-id",
        member_id="new-id",
        skip_assignment=True,
        leader_before_rejoin="old-id",
    )
    v9, v8 = to_body(resp, 9), to_body(resp, 8)
    assert (v9["leader"], v9["skip_assignment"]) == ("new-id", True), "v9: leader, told to skip"
    assert (v8["leader"], v8["members"]) == ("old-id", []), "v8: the previous id leads, no members"


# Kafka 3.9's maxima for the APIs below, and why kafkalite stops lower where it does (see messages.py).
_MAX = {
    0: 9,  # Produce: v10 (KIP-951 leader hints), v11 (KIP-890) not implemented
    1: 12,  # Fetch: v13 names topics by id
    2: 9,  # ListOffsets
    3: 12,  # Metadata
    8: 9,  # OffsetCommit
    9: 6,  # OffsetFetch: v7 require_stable (KIP-447)
    10: 3,  # FindCoordinator: v4 batches keys
    11: 9,  # JoinGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    14: 5,  # SyncGroup
    15: 5,  # DescribeGroups
    16: 5,  # ListGroups
    22: 2,  # InitProducerId: v3 is KIP-360's epoch bump
    24: 3,  # AddPartitionsToTxn: v4 is broker-to-broker, v5 KIP-890
    25: 3,  # AddOffsetsToTxn: v4 KIP-890
    26: 3,  # EndTxn: v4 KIP-890
    28: 3,  # TxnOffsetCommit: v4 KIP-890
}
_FLEXIBLE_FROM = {0: 9, 1: 12, 2: 6, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 22: 2, 24: 3}


def test_the_advertised_versions_are_the_flexible_ones():
    served = {k: hi for k, _, hi in supported_versions()}
    assert {k: served[k] for k in _MAX} == _MAX, "ApiVersions advertises these maxima"
    for k, v in _FLEXIBLE_FROM.items():
        assert (SPECS[k].flexible(v - 1), SPECS[k].flexible(v)) == (False, True), f"api {k} turns at v{v}"
