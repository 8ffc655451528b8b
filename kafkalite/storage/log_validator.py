"""Kafka's ``LogValidator``: what a leader checks in a batch beyond its header before appending it.

The header checks (size, magic, CRC, codec) run first, in ``Log.append``; a batch that fails them is
damaged in transit and refused with CORRUPT_MESSAGE. This module then looks inside the batch, as
Kafka's leader does for every produced batch and its followers never do (they copy what the leader
validated):

- the batch holds at least one record and its lastOffsetDelta is recordsCount - 1 (Kafka's
  "inconsistent batch offset range");
- from a client: no control batch (only coordinators write transaction markers) and a base sequence
  for a batch that carries a producer id;
- every record parses and fits exactly, the batch ends with its last record, offset deltas run
  0..n-1 (``records.validation``); a compressed batch is inflated first, at most to
  ``MAX_INFLATED_BYTES`` (``records.compression``);
- a compacted topic takes no record without a key;
- in a CreateTime topic, every record's timestamp lies within message.timestamp.before.max.ms before
  and message.timestamp.after.max.ms after the broker's clock (both unbounded by default, as in Kafka).

All of these refuse the batch with INVALID_RECORD (87), as Kafka's ``InvalidRecordException`` does,
except an unreadable compressed payload, which is CORRUPT_MESSAGE (2) like a bad CRC, and a timestamp
out of bounds, which is INVALID_TIMESTAMP (32). Nothing of a
refused batch is appended, and nothing of the other batches of the same request for that partition.
"""

from __future__ import annotations

from kafkalite.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkalite.records.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_BIT,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
)
from kafkalite.records.compression import MAX_INFLATED_BYTES, decompress
from kafkalite.records.record import decode_record_tuples
from kafkalite.records.validation import check_records


def validate_records(
    buf,
    pos: int,
    f: tuple,
    where: str,
    *,
    compact: bool = False,
    from_client: bool = False,
    max_inflated: int = MAX_INFLATED_BYTES,
    now_ms: int = 0,
    timestamp_bounds: tuple[int, int] | None = None,
) -> None:
    """Check the batch at ``pos`` of ``buf`` whose header fields (``BatchHeader`` order) are ``f`` and
    whose header already passed ``validate_batch``; ``where`` names the partition in messages.
    ``timestamp_bounds``: a CreateTime topic's (message.timestamp.before.max.ms,
    message.timestamp.after.max.ms), which every record's timestamp must keep around ``now_ms``.
    Raises ``InvalidRecordError`` (or ``CorruptRecordError`` for an unreadable compressed payload,
    ``InvalidTimestampError`` for a timestamp out of bounds)."""
    count, last_delta, attrs = f[12], f[6], f[5]
    if count <= 0:
        raise InvalidRecordError(
            f"batch at position {pos} of {where} holds no records (recordsCount {count})"
        )
    if last_delta != count - 1:
        raise InvalidRecordError(
            f"batch at position {pos} of {where} has lastOffsetDelta {last_delta} for {count} records: "
            f"a batch of n records spans offset deltas 0 to n-1"
        )
    if from_client:
        if attrs & CONTROL_BIT:
            raise InvalidRecordError(
                f"batch at position {pos} of {where} is a control batch: only a transaction coordinator "
                f"writes control records"
            )
        if f[9] >= 0 and f[11] < 0:
            raise InvalidRecordError(
                f"batch at position {pos} of {where} carries producer id {f[9]} but base sequence {f[11]}"
            )
    end = pos + f[1] + LOG_OVERHEAD
    codec = attrs & COMPRESSION_MASK
    try:
        span = None
        if codec:
            section = decompress(codec, memoryview(buf)[pos + BATCH_HEADER_SIZE : end], max_inflated)
        elif isinstance(buf, bytes):
            section, span = buf, (pos + BATCH_HEADER_SIZE, end)  # read in place
        else:
            section = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : end])
        deltas = None
        if timestamp_bounds is not None:
            if attrs & TIMESTAMP_TYPE_BIT:  # every record carries the batch's maxTimestamp
                _check_timestamp(f[8], 0, now_ms, timestamp_bounds, pos, where)
            else:
                lo, hi = now_ms - timestamp_bounds[0], now_ms + timestamp_bounds[1]
                deltas = (lo - f[7], hi - f[7])
        null_key, late = check_records(section, count, null_keys=compact, ts_deltas=deltas, span=span)
    except (InvalidRecordError, CorruptRecordError) as e:  # corrupt: an unreadable compressed payload
        raise _in_batch(e, pos, where) from None
    if late >= 0:  # a record out of range, unless its timestamp is -1 (none), which Kafka lets pass
        if span is not None:
            section = section[span[0] : span[1]]
        for i, tsd in enumerate(_deltas(section, count)):
            _check_timestamp(f[7] + tsd, i, now_ms, timestamp_bounds, pos, where)
    if null_key >= 0:
        err = InvalidRecordError(
            f"batch at position {pos} of {where}: compacted topic cannot accept a record without a key "
            f"(record {null_key} of {count})"
        )
        err.record_index = null_key  # type: ignore[attr-defined]
        raise err


def _check_timestamp(ts: int, index: int, now_ms: int, bounds, pos: int, where: str) -> None:
    lo, hi = now_ms - bounds[0], now_ms + bounds[1]
    if ts != NO_TIMESTAMP and not lo <= ts <= hi:
        err = InvalidTimestampError(
            f"batch at position {pos} of {where}: timestamp {ts} of record {index} is out of range: it "
            f"must be within [{lo}, {hi}] (message.timestamp.before.max.ms={bounds[0]}, "
            f"message.timestamp.after.max.ms={bounds[1]})"
        )
        err.record_index = index  # type: ignore[attr-defined]
        raise err


def _deltas(section: bytes, count: int) -> list[int]:
    """The timestamp deltas of a section that passed ``check_records``."""
    return [row[1] for row in decode_record_tuples(section, count, 0, 0)]


def _in_batch(e: InvalidRecordError | CorruptRecordError, pos: int, where: str) -> Exception:
    err = type(e)(f"batch at position {pos} of {where}: {e.message}")
    index = getattr(e, "record_index", None)
    if index is not None:
        err.record_index = index
    return err


__all__ = ["validate_records"]
