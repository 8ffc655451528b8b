"""BrokerRegistration, BrokerHeartbeat and AllocateProducerIds: Kafka's fields and layout, round trips."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.broker_lifecycle import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from kafkalite.protocol.codec.binding import from_wire, schema_of, to_wire
from kafkalite.protocol.codec.schema import decode, encode


def _round_trip(msg, version: int):
    cls = type(msg)
    data = encode(schema_of(cls), to_wire(msg, version), version, True)
    return data, from_wire(cls, decode(schema_of(cls), data, version, True), version)


def test_heartbeat_layout_is_kafkas() -> None:
    data, back = _round_trip(
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=9), 0
    )
    assert data == struct.pack(">iqq??", 1, 5, 9, False, False) + b"\x00"
    assert back == BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=9)


@settings(max_examples=50, deadline=None)
@given(
    broker_id=st.integers(0, 2**31 - 1),
    inc=st.uuids(),
    port=st.integers(0, 65535),
    rack=st.none() | st.text(max_size=5),
    version=st.integers(0, 4),
    prev=st.integers(-1, 2**40),
)
def test_registration_round_trips(broker_id, inc, port, rack, version, prev) -> None:
    req = BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id="abc",
        incarnation_id=inc,
        listeners=(Listener(name="PLAINTEXT", host="h", port=port),),
        rack=rack,
        previous_broker_epoch=prev if version >= 3 else -1,
        log_dirs=(uuid.UUID(int=3),) if version >= 2 else (),
    )
    assert _round_trip(req, version)[1] == req


@pytest.mark.parametrize(
    "msg",
    [
        BrokerRegistrationResponse(error_code=101, broker_epoch=-1),
        BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
        AllocateProducerIdsRequest(broker_id=2, broker_epoch=7),
        AllocateProducerIdsResponse(producer_id_start=1000, producer_id_len=1000),
    ],
)
def test_responses_and_producer_ids_round_trip(msg) -> None:
    assert _round_trip(msg, 0)[1] == msg


def test_assign_replicas_to_dirs_layout_is_kafkas() -> None:
    from kafkalite.protocol.broker_lifecycle import (
        AssignDirectory,
        AssignPartition,
        AssignReplicasToDirsRequest,
        AssignTopic,
    )

    d, t = uuid.UUID(int=5), uuid.UUID(int=6)
    req = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=9,
        directories=(
            AssignDirectory(
                id=d, topics=(AssignTopic(topic_id=t, partitions=(AssignPartition(partition_index=2),)),)
            ),
        ),
    )
    data, back = _round_trip(req, 0)
    assert back == req
    # flexible v0: compact arrays (length + 1), every struct ends with an empty tagged-field section
    topic = t.bytes + b"\x02" + struct.pack(">i", 2) + b"\x00" + b"\x00"  # partition, topic tags
    directory = d.bytes + b"\x02" + topic + b"\x00"
    assert data == struct.pack(">iq", 1, 9) + b"\x02" + directory + b"\x00"
