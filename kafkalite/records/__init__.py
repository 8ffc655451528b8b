"""The bytes layer: Kafka's record batch v2 format, byte for byte.

Everything above this package (log segments, fetch, the Spark source) moves these bytes around
without re-encoding them; only producers build batches and only consumers decode records.
"""

from kafkalite.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    RecordBatch,
    TimestampType,
    build_batch,
    build_values_batch,
    compute_crc,
    decode_batch_tuples,
    decode_batches,
    iter_batches,
    set_producer_fields,
    stamp_batch,
    valid_header_fields,
    validate_batch,
)
from kafkalite.records.compression import Compression
from kafkalite.records.control import (
    ControlRecord,
    ControlRecordType,
    build_control_batch,
    parse_control_record,
)
from kafkalite.records.record import Header, Record, record_size, record_size_upper_bound
from kafkalite.records.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "BatchHeader",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_values_batch",
    "build_control_batch",
    "compute_crc",
    "decode_batch_tuples",
    "decode_batches",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "iter_batches",
    "parse_control_record",
    "record_size",
    "record_size_upper_bound",
    "set_producer_fields",
    "stamp_batch",
    "valid_header_fields",
    "validate_batch",
]
