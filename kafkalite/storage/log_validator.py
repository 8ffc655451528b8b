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
- a compacted topic takes no record without a key.

All of these refuse the batch with INVALID_RECORD (87), as Kafka's ``InvalidRecordException`` does,
except an unreadable compressed payload, which is CORRUPT_MESSAGE (2) like a bad CRC. Nothing of a
refused batch is appended, and nothing of the other batches of the same request for that partition.
"""

from __future__ import annotations

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.records.batch import BATCH_HEADER_SIZE, COMPRESSION_MASK, CONTROL_BIT, LOG_OVERHEAD
from kafkalite.records.compression import MAX_INFLATED_BYTES, decompress
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
) -> None:
    """Check the batch at ``pos`` of ``buf`` whose header fields (``BatchHeader`` order) are ``f`` and
    whose header already passed ``validate_batch``; ``where`` names the partition in messages.
    Raises ``InvalidRecordError`` (or ``CorruptRecordError`` for an unreadable compressed payload)."""
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
        if codec:
            section = decompress(codec, memoryview(buf)[pos + BATCH_HEADER_SIZE : end], max_inflated)
        else:
            section = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : end])
        null_key = check_records(section, count, null_keys=compact)
    except (InvalidRecordError, CorruptRecordError) as e:  # corrupt: an unreadable compressed payload
        raise _in_batch(e, pos, where) from None
    if null_key >= 0:
        err = InvalidRecordError(
            f"batch at position {pos} of {where}: compacted topic cannot accept a record without a key "
            f"(record {null_key} of {count})"
        )
        err.record_index = null_key  # type: ignore[attr-defined]
        raise err


def _in_batch(e: InvalidRecordError | CorruptRecordError, pos: int, where: str) -> Exception:
    err = type(e)(f"batch at position {pos} of {where}: {e.message}")
    index = getattr(e, "record_index", None)
    if index is not None:
        err.record_index = index
    return err


__all__ = ["validate_records"]
