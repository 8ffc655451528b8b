"""``partition.metadata`` (KIP-516): the codec round-trips any id, matches Kafka's text, and a malformed
file is refused with an error naming it."""

from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.kafka_uuid import uuid_from_str, uuid_to_str
from kafkalite.errors import KafkaStorageError
from kafkalite.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadataFile,
    decode,
    encode,
)

ids = st.builds(lambda b: uuid.UUID(bytes=b), st.binary(min_size=16, max_size=16)).filter(lambda u: u.int)


@given(ids)
def test_round_trip(tid: uuid.UUID) -> None:
    assert decode(encode(tid)) == tid
    assert uuid_from_str(uuid_to_str(tid)) == tid


def test_kafka_text() -> None:
    # Kafka's Uuid string is the URL-safe base64 of the 16 bytes, unpadded; the file has two lines
    tid = uuid.UUID("fb0d6ae3-f1c2-4d95-b2e4-0d0a37c3e3ff")
    text = base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")
    assert len(text) == 22
    assert encode(tid) == f"version: 0\ntopic_id: {text}".encode()
    assert decode(b"version: 0\ntopic_id: " + text.encode() + b"\n") == tid  # a trailing newline is fine


def test_file_write_read(tmp_path) -> None:
    f = PartitionMetadataFile(tmp_path)
    assert f.read() is None  # no file yet
    tid = uuid.uuid4()
    f.write(tid)
    assert (tmp_path / PARTITION_METADATA_FILE).read_text().startswith("version: 0\n")
    assert f.read() == tid
    assert not (tmp_path / (PARTITION_METADATA_FILE + ".tmp")).exists()
    with pytest.raises(ValueError, match="zero topic id"):
        f.write(uuid.UUID(int=0))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "found 0 line"),
        (b"version: 0\n", "found 1 line"),
        (b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "unrecognized version '1'"),
        (b"topic_id: x\nversion: 0", "expected 'version: <value>'"),
        (b"version: 0\ntopicid: AAAAAAAAAAAAAAAAAAAAAQ", "expected 'topic_id: <value>'"),
        (b"version: 0\ntopic_id: not-an-id", "not a Kafka Uuid"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAB", "unused low bits"),
        (b"version: 0\ntopic_id: \xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_file_names_itself(tmp_path, content: bytes, why: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(content)
    with pytest.raises(KafkaStorageError, match=why) as e:
        PartitionMetadataFile(tmp_path).read()
    assert str(tmp_path / PARTITION_METADATA_FILE) in str(e.value)


@given(st.binary(max_size=80))
def test_garbage_never_escapes_as_another_error(data: bytes) -> None:
    try:
        decode(data, "p/partition.metadata")
    except KafkaStorageError as e:
        assert "p/partition.metadata" in str(e)


def test_a_log_takes_its_topic_id_once_and_refuses_another(tmp_path) -> None:
    from kafkalite.clock import ManualClock
    from kafkalite.errors import InconsistentTopicIdError
    from kafkalite.records import build_batch
    from kafkalite.storage import Log

    first, other = uuid.uuid4(), uuid.uuid4()
    d = tmp_path / "orders-0"
    with Log.open(d, clock=ManualClock(0)) as log:
        assert log.topic_id is None
        log.append(build_batch([(b"k", b"v")]))
        log.assign_topic_id(first)
        log.assign_topic_id(first)  # the same id again: nothing to do
        with pytest.raises(InconsistentTopicIdError, match=str(d)):
            log.assign_topic_id(other)
    assert PartitionMetadataFile(d).read() == first
    with Log.open(d, clock=ManualClock(0)) as log:
        assert log.topic_id == first, "read back after a restart"
        assert log.log_end_offset == 1, "the records stay"
    with Log.open(d, clock=ManualClock(0), read_only=True) as log:
        (d / PARTITION_METADATA_FILE).unlink()
        with pytest.raises(KafkaStorageError, match="read-only"):
            log.assign_topic_id(first)
