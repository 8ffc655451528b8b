"""Control records: the COMMIT / ABORT markers a transaction coordinator writes into each partition.

A control batch has attribute bits 4 (transactional) and 5 (control) set and holds one record whose
key is ``version int16 (0) + type int16`` and whose value is ``version int16 (0) + coordinatorEpoch
int32``. Consumers never see these records; they use them to finish or discard a transaction.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kafkalite.errors import CorruptRecordError
from kafkalite.records.batch import build_batch

CONTROL_KEY_VERSION = 0
CONTROL_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    """KRaft: the first batch a new leader writes in its epoch (KIP-595); never in a data partition."""
    SNAPSHOT_HEADER = 3
    """KRaft: the first record of a metadata snapshot (KIP-630), with the last contained log timestamp."""
    SNAPSHOT_FOOTER = 4
    """KRaft: the last record of a metadata snapshot; a snapshot without it is incomplete."""


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A parsed end-transaction marker."""

    type: ControlRecordType
    coordinator_epoch: int
    version: int = CONTROL_VALUE_VERSION

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT


def control_key(record_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(record_type))


def control_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(CONTROL_VALUE_VERSION, coordinator_epoch)


def control_type(key: bytes | None) -> ControlRecordType:
    """The marker type from a control record key."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key too short: {key!r}")
    version, typ = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(typ)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {typ}") from None


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Parse an end-transaction marker from a control record's key and value."""
    typ = control_type(key)
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"control record value too short: {value!r}")
    version, epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid control record value version {version}")
    return ControlRecord(typ, epoch, version)


def build_control_batch(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding a COMMIT (``commit=True``) or ABORT marker."""
    typ = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_batch(
        [(control_key(typ), control_value(coordinator_epoch))],
        base_offset=base_offset,
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
