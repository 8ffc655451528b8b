"""PySpark integration: ``register(spark)`` then ``spark.read.format("kafkalite")``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make ``format("kafkalite")`` available in ``spark`` (a PySpark 4.x session)."""
    from kafkalite.spark.source import KafkaliteDataSource  # pyspark is only needed once this is called

    spark.dataSource.register(KafkaliteDataSource)
