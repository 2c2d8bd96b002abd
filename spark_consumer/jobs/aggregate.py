"""Windowed aggregation: tumbling, hopping and session windows; count, sum, min, max.

The output timestamp of a window is the largest record timestamp in it (``ts``), the rule Kafka
Streams uses for windowed aggregates: an update for a window never carries a time earlier than
a record it includes, and time never goes backwards inside a window even when the records came
out of order.

In ``append`` mode a window is written once, after Spark's watermark passes its end — the
heartbeats of the ordered topic move that watermark through quiet periods, so the last window
closes without new data. ``update`` mode writes the window again after every micro-batch that
changed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.options import AggSpec, WindowSpec
from spark_consumer.source import EVENT_TIME, TS, SourceOptions, ordered_stream
from spark_consumer.values import data_field, key_column, with_data


@dataclass(frozen=True, slots=True)
class AggregateOptions:
    window: WindowSpec
    aggs: Sequence[AggSpec] = field(default_factory=lambda: (AggSpec("count"),))
    key_field: str | None = None
    value_schema: StructType | None = None
    output_mode: Literal["append", "update"] = "append"


def window_column(window: WindowSpec) -> Column:
    if window.kind == "session":
        return F.session_window(EVENT_TIME, f"{window.gap_ms} milliseconds")
    slide = window.slide_ms if window.kind == "hopping" else window.size_ms
    return F.window(EVENT_TIME, f"{window.size_ms} milliseconds", f"{slide} milliseconds")


def agg_column(spec: AggSpec) -> Column:
    if spec.function == "count":
        counted = data_field(spec.field) if spec.field else F.lit(1)
        return F.count(counted).alias(spec.column)
    assert spec.field is not None
    function = {"sum": F.sum, "min": F.min, "max": F.max}[spec.function]
    return function(data_field(spec.field)).alias(spec.column)


def aggregate(records: DataFrame, window: WindowSpec, aggs: Sequence[AggSpec], key: Column) -> DataFrame:
    """Per key and window: the aggregations, the window bounds and ``ts`` (all epoch ms).

    ``records`` is a watermarked stream with ``event_time``, ``ts`` and ``data`` columns (see
    :mod:`spark_consumer.source`); ``key`` is evaluated on it.
    """
    grouped = records.groupBy(key.alias("key"), window_column(window).alias("window"))
    result = grouped.agg(*(agg_column(a) for a in aggs), F.max(TS).alias(TS))
    return result.select(
        "key",
        F.unix_millis("window.start").alias("window_start"),
        F.unix_millis("window.end").alias("window_end"),
        *(a.column for a in aggs),
        TS,
    )


def build(spark: SparkSession, source: SourceOptions, options: AggregateOptions) -> JobOutput:
    records = with_data(ordered_stream(spark, source), options.value_schema)
    frame = aggregate(records, options.window, options.aggs, key_column(options.key_field))
    return JobOutput(frame, options.output_mode)
