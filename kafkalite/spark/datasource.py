"""``format("kafkalite")``: the class Spark registers, which hands out the batch reader (``source.py``), the
streaming reader (``stream.py``) and the batch and streaming writers (``sink.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from kafkalite.spark.options import parse_read_options
from kafkalite.spark.sink import KafkaliteStreamWriter, KafkaliteWriter
from kafkalite.spark.source import (
    HEADERS_DDL,
    SCHEMA_DDL,
    KafkaliteInputPartition,
    input_partitions,
    plan_ranges,
    read_partition,
    select_partitions,
)
from kafkalite.spark.stream import KafkaliteStreamReader
from kafkalite.storage.log_dirs import locate_partitions


class KafkaliteDataSource(DataSource):
    """``format("kafkalite")``: batch and streaming reads, batch and streaming writes."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> str:
        opts = parse_read_options(self.options, streaming=None)  # fail at load(), not at the first action
        if not opts.wire:  # wire mode asks the brokers when planning, as Spark's Kafka source does
            select_partitions(opts, locate_partitions(opts.path))
        return f"{SCHEMA_DDL}, {HEADERS_DDL}" if opts.include_headers else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaliteReader(dict(self.options))

    def streamReader(self, schema: StructType):  # noqa: ANN201 - DataSourceStreamReader
        return KafkaliteStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool):  # noqa: ANN201 - DataSourceArrowWriter
        return KafkaliteWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):  # noqa: ANN201
        return KafkaliteStreamWriter(dict(self.options), schema, overwrite)


class KafkaliteReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.opts = parse_read_options(options)

    def partitions(self) -> list[KafkaliteInputPartition]:
        return input_partitions(self.opts, plan_ranges(self.opts))

    def read(self, partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)
