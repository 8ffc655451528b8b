"""Request/response dataclasses: api keys, defaults, value semantics and a repr the event log can print."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

import kafkalite.protocol as protocol
from kafkalite.protocol import (
    REQUEST_TYPES,
    REQUESTS,
    RESPONSE_TYPES,
    AbortedTransaction,
    ApiKey,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    IsolationLevel,
    JoinGroupRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    Message,
    MetadataRequest,
    ProducePartition,
    ProduceRequest,
    Request,
    Response,
    TopicPartition,
    controller,
    fetch,
    group,
    metadata,
    produce,
    txn,
)

T0 = TopicPartition("orders", 0)

MESSAGE_CLASSES = sorted(
    {
        obj
        for mod in (protocol.api, produce, fetch, metadata, controller, group, txn)
        for obj in vars(mod).values()
        if inspect.isclass(obj) and issubclass(obj, Message) and dataclasses.is_dataclass(obj)
    },
    key=lambda c: c.__name__,
)


def _example(cls: type[Message]) -> Message:
    """An instance with only the required fields filled in."""
    required = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING:
            required[f.name] = T0 if f.name == "tp" else 7 if "int" in str(f.type) else "x"
    return cls(**required)


def test_api_key_values() -> None:
    expected = {
        "PRODUCE": 0,
        "FETCH": 1,
        "LIST_OFFSETS": 2,
        "METADATA": 3,
        "LEADER_AND_ISR": 4,
        "STOP_REPLICA": 5,
        "UPDATE_METADATA": 6,
        "CONTROLLED_SHUTDOWN": 7,
        "OFFSET_COMMIT": 8,
        "OFFSET_FETCH": 9,
        "FIND_COORDINATOR": 10,
        "JOIN_GROUP": 11,
        "HEARTBEAT": 12,
        "LEAVE_GROUP": 13,
        "SYNC_GROUP": 14,
        "DESCRIBE_GROUPS": 15,
        "LIST_GROUPS": 16,
        "SASL_HANDSHAKE": 17,
        "API_VERSIONS": 18,
        "CREATE_TOPICS": 19,
        "DELETE_TOPICS": 20,
        "DELETE_RECORDS": 21,
        "INIT_PRODUCER_ID": 22,
        "OFFSET_FOR_LEADER_EPOCH": 23,
        "ADD_PARTITIONS_TO_TXN": 24,
        "ADD_OFFSETS_TO_TXN": 25,
        "END_TXN": 26,
        "WRITE_TXN_MARKERS": 27,
        "TXN_OFFSET_COMMIT": 28,
        "DESCRIBE_ACLS": 29,
        "CREATE_ACLS": 30,
        "DELETE_ACLS": 31,
        "SASL_AUTHENTICATE": 36,
        "CREATE_PARTITIONS": 37,
        "ELECT_LEADERS": 43,
        "ALTER_PARTITION_REASSIGNMENTS": 45,
        "LIST_PARTITION_REASSIGNMENTS": 46,
        "ALTER_PARTITION": 56,
    }
    for name, value in expected.items():
        assert ApiKey[name] == value
    assert [int(k) for k in ApiKey] == list(range(len(ApiKey)))  # dense, no duplicates


def test_topic_partition() -> None:
    assert str(TopicPartition("orders", 3)) == "orders-3"
    assert f"{TopicPartition('a-b', 10)}" == "a-b-10"
    tps = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]
    assert sorted(tps) == [TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)]
    assert TopicPartition("a", 1) == ("a", 1) and hash(TopicPartition("a", 1)) == hash(("a", 1))
    assert TopicPartition("a", 1)._replace(partition=2).partition == 2
    assert repr(TopicPartition("a", 1)) == "TopicPartition(topic='a', partition=1)"


@pytest.mark.parametrize("req", REQUESTS, ids=lambda c: c.__name__)
def test_request_knows_its_api_and_response(req: type[Request]) -> None:
    resp = req.response_type
    assert isinstance(req.api_key, ApiKey)
    assert issubclass(resp, Response)
    assert resp.api_key is req.api_key
    assert REQUEST_TYPES[req.api_key] is req and RESPONSE_TYPES[req.api_key] is resp
    assert req.__name__.removesuffix("Request") == resp.__name__.removesuffix("Response")
    assert req().api_key is req.api_key  # a class attribute, not a field
    assert "api_key" not in {f.name for f in dataclasses.fields(req)}
    # the request's name is the api key's, in CamelCase
    assert req.__name__.removesuffix("Request") == req.api_key.name.title().replace("_", "")


def test_one_request_class_per_api_key() -> None:
    assert len(REQUEST_TYPES) == len(REQUESTS)
    for name in [
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
        "LeaderAndIsr",
        "StopReplica",
        "UpdateMetadata",
        "OffsetForLeaderEpoch",
        "CreateTopics",
        "DeleteRecords",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "InitProducerId",
        "AddPartitionsToTxn",
        "EndTxn",
        "WriteTxnMarkers",
    ]:
        assert getattr(protocol, f"{name}Request") in REQUESTS


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
def test_every_message_is_frozen_slotted_plain_data(cls: type[Message]) -> None:
    a, b = _example(cls), _example(cls)
    assert a == b and hash(a) == hash(b)
    assert not hasattr(a, "__dict__")
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(a, name, getattr(a, name))
    with pytest.raises(TypeError):  # keyword-only
        cls(*[getattr(a, f.name) for f in dataclasses.fields(cls)])
    for f in dataclasses.fields(cls):  # no mutable defaults: lists are tuples
        assert not isinstance(f.default, list | dict | set)
    text = repr(a)
    assert text.startswith(f"{cls.__name__}(") and not re.search(r"0x[0-9a-f]+| object at ", text)


@pytest.mark.parametrize("cls", [c for c in MESSAGE_CLASSES if issubclass(c, Request | Response)])
def test_top_level_messages_construct_from_defaults(cls: type[Message]) -> None:
    msg = cls()
    assert repr(msg) == f"{cls.__name__}()"  # nothing but defaults: nothing to show
    if hasattr(msg, "error_code"):
        assert msg.error_code == 0


def test_kafka_defaults() -> None:
    f = FetchRequest()
    assert (f.replica_id, f.min_bytes, f.max_wait_ms, f.isolation_level) == (-1, 1, 500, 0)
    assert (f.session_id, f.session_epoch) == (0, -1)
    p = FetchPartition(tp=T0, fetch_offset=42)
    assert (p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch) == (-1, -1, -1)
    r = FetchPartitionResponse(tp=T0)
    assert (r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset) == (0, -1, -1, -1)
    assert r.diverging_epoch is None and r.aborted_transactions is None and r.preferred_read_replica == -1
    assert EpochEndOffset() == EpochEndOffset(epoch=-1, end_offset=-1)
    assert (ProduceRequest().acks, ProduceRequest().transactional_id) == (-1, None)
    assert MetadataRequest().topics is None and MetadataRequest().allow_auto_topic_creation
    s = LeaderAndIsrPartitionState(tp=T0)
    assert (s.leader, s.leader_epoch, s.partition_epoch, s.is_new) == (-1, -1, -1, False)
    assert protocol.OffsetForLeaderEpochRequest().replica_id == -2
    assert protocol.FindCoordinatorRequest().key_type == protocol.CoordinatorType.GROUP == 0
    assert protocol.InitProducerIdResponse() == protocol.InitProducerIdResponse(
        producer_id=-1, producer_epoch=-1
    )


def test_equality_and_hashing_by_value() -> None:
    def req(records: bytes) -> ProduceRequest:
        return ProduceRequest(acks=1, partitions=(ProducePartition(tp=T0, records=records),))

    assert req(b"abc") == req(b"abc")
    assert req(b"abc") != req(b"abd")
    assert len({req(b"abc"), req(b"abc"), req(b"x")}) == 2
    assert ProduceRequest(acks=1) != ProduceRequest(acks=-1)
    assert dataclasses.replace(req(b"abc"), acks=-1).acks == -1  # the way to "change" a message


def test_repr_is_stable_and_compact() -> None:
    resp = FetchResponse(
        partitions=(
            FetchPartitionResponse(
                tp=T0,
                high_watermark=10,
                last_stable_offset=8,
                aborted_transactions=(AbortedTransaction(producer_id=4000, first_offset=3),),
                records=b"\x00" * 61,
                diverging_epoch=EpochEndOffset(epoch=2, end_offset=7),
            ),
        )
    )
    assert repr(resp) == (
        "FetchResponse(partitions=(FetchPartitionResponse(tp=orders-0, high_watermark=10, "
        "last_stable_offset=8, diverging_epoch=EpochEndOffset(epoch=2, end_offset=7), "
        "aborted_transactions=(AbortedTransaction(producer_id=4000, first_offset=3),), records=<61 bytes>),))"
    )
    req = LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=3,
        partition_states=(
            LeaderAndIsrPartitionState(tp=T0, leader=2, leader_epoch=5, isr=(2, 1), replicas=(1, 2)),
        ),
    )
    assert repr(req) == (
        "LeaderAndIsrRequest(controller_id=1, controller_epoch=3, partition_states=(LeaderAndIsrPartitionState("
        "tp=orders-0, leader=2, leader_epoch=5, isr=(2, 1), replicas=(1, 2)),))"
    )
    assert repr(JoinGroupRequest(group_id="g", member_id="")) == "JoinGroupRequest(group_id='g')"


def test_enums_print_as_ints_so_equal_messages_print_alike() -> None:
    a = FetchRequest(isolation_level=IsolationLevel.READ_COMMITTED)
    b = FetchRequest(isolation_level=1)
    assert a == b and repr(a) == repr(b) == "FetchRequest(isolation_level=1)"


def test_records_may_be_a_file_slice() -> None:
    class Slice:  # like storage.FileSlice: no repr of its own, a length
        __slots__ = ("size",)

        def __init__(self, size: int) -> None:
            self.size = size

        def __len__(self) -> int:
            return self.size

    r = FetchPartitionResponse(tp=T0, records=Slice(100))
    assert repr(r) == "FetchPartitionResponse(tp=orders-0, records=<Slice 100 bytes>)"
    assert repr(FetchPartitionResponse(tp=T0, records=memoryview(b"ab"))).endswith("records=<2 bytes>)")


def test_file_slice_from_storage_prints_without_address(tmp_path) -> None:
    from kafkalite.storage.file_slice import FileSlice

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x00" * 10)
    r = FetchPartitionResponse(tp=T0, records=FileSlice(path, 0, 10))
    text = repr(r)
    assert text.startswith("FetchPartitionResponse(tp=orders-0, records=") and "FileSlice" in text
    assert not re.search(r"0x[0-9a-f]+| object at ", text)
    assert repr(FetchPartitionResponse(tp=T0, records=FileSlice(path, 0, 10))) == text


def test_public_names_are_exported() -> None:
    for name in protocol.__all__:
        assert hasattr(protocol, name)
    assert {c.__name__ for c in MESSAGE_CLASSES} <= set(protocol.__all__)
