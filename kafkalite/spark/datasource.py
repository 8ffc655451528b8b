"""``format("kafkalite")``: the class Spark registers, which hands out the batch reader (``source.py``), the
streaming reader (``stream.py``) and the batch and streaming writers (``sink.py``).

Spark starts a fresh Python process to look the source up, another to ask it for its schema and another to
plan each read, and each of them imports this module first. So this module imports only what those steps
use, and each method imports the reader or writer it hands out: a process that only asks for the schema
of a wire-mode read then does not load the record decoders, the storage engine or the protocol tables
(about a second of CPU each time).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from kafkalite.spark.options import HEADERS_DDL, SCHEMA_DDL, parse_read_options

if TYPE_CHECKING:
    import pyarrow as pa

    from kafkalite.spark.source import KafkaliteInputPartition


class KafkaliteDataSource(DataSource):
    """``format("kafkalite")``: batch and streaming reads, batch and streaming writes."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> str:
        opts = parse_read_options(self.options, streaming=None)  # fail at load(), not at the first action
        if not opts.wire:  # wire mode asks the brokers when planning, as Spark's Kafka source does
            from kafkalite.spark.source import select_partitions
            from kafkalite.storage.log_dirs import locate_partitions

            select_partitions(opts, locate_partitions(opts.path))
        return f"{SCHEMA_DDL}, {HEADERS_DDL}" if opts.include_headers else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaliteReader(dict(self.options))

    def streamReader(self, schema: StructType):  # noqa: ANN201 - DataSourceStreamReader
        from kafkalite.spark.stream import KafkaliteStreamReader

        return KafkaliteStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool):  # noqa: ANN201 - DataSourceArrowWriter
        from kafkalite.spark.sink import KafkaliteWriter

        return KafkaliteWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):  # noqa: ANN201
        from kafkalite.spark.sink import KafkaliteStreamWriter

        return KafkaliteStreamWriter(dict(self.options), schema, overwrite)


class KafkaliteReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.opts = parse_read_options(options)

    def partitions(self) -> list[KafkaliteInputPartition]:
        from kafkalite.spark.source import input_partitions, plan_ranges

        return input_partitions(self.opts, plan_ranges(self.opts))

    def read(self, partition: KafkaliteInputPartition) -> Iterator[pa.RecordBatch]:
        from kafkalite.spark.source import read_partition

        return read_partition(partition)
