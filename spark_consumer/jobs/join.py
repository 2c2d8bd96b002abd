"""Stream-stream join of two source topics of the ordered topic, on a key, within a time bound.

The ordered topic interleaves several input topics; the ``timesync.source.topic`` header tells
them apart. The left side is one source topic, the right side another; a pair joins when the
keys are equal and the right record's event time is within ``within`` of the left one's.

The output timestamp is ``max(left.ts, right.ts)``, the rule Kafka Streams uses for join
results: a join result cannot exist before both of its inputs do. Unmatched rows of a left/outer
join carry their own timestamp and come out once Spark's watermark passes their event time plus the bound; the
ordered topic's heartbeats move the watermark, so they come out through quiet periods too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.source import EVENT_TIME, TS, SourceOptions, above_watermark, deduplicate, ordered_stream
from spark_consumer.value_formats import BinaryValues
from spark_consumer.values import DATA, key_column, with_data

JoinHow = Literal["inner", "left", "outer"]
_SPARK_HOW = {"inner": "inner", "left": "left_outer", "outer": "full_outer"}


@dataclass(frozen=True, slots=True)
class JoinOptions:
    """``right_values``: the right side's Avro or Protobuf values when they have a subject of
    their own (the left side's are the source's); ``None``: one decoding for both sides."""

    left_topic: str
    right_topic: str
    within_ms: int
    how: JoinHow = "inner"
    key_field: str | None = None
    left_schema: StructType | None = None
    right_schema: StructType | None = None
    right_values: BinaryValues | None = None


def side(
    records: DataFrame,
    source_topic: str,
    schema: StructType | None,
    key_field: str | None,
    values: BinaryValues | None = None,
) -> DataFrame:
    """One join side: the records of ``source_topic``, deduplicated, with key, time and value
    (the value still BINARY in ``records`` is decoded here with ``values``).

    The topic filter is written with :func:`above_watermark`: pushed below the watermark, it
    would hide the heartbeats (and the other topic's records) from this side's watermark.
    """
    mine = deduplicate(records.filter(above_watermark(F.col("source_topic") == F.lit(source_topic))))
    if values is not None:
        from spark_consumer.value_decoders import decoded_value

        mine = mine.withColumn("value", decoded_value(F.col("value"), values))
    mine = with_data(mine, schema)
    return mine.select(key_column(key_field).alias("key"), EVENT_TIME, TS, DATA)


def _interval(ms: int) -> Column:
    return F.expr(f"INTERVAL {int(ms)} MILLISECONDS")


def join(left: DataFrame, right: DataFrame, within_ms: int, how: JoinHow = "inner") -> DataFrame:
    """Join two sides (columns key, event_time, ts, data) on key, |right − left| ≤ within.

    Output: ``key``, ``ts`` = max(left ts, right ts), ``left_ts``, ``right_ts``, ``left``,
    ``right`` (the parsed values; NULL on the unmatched side of an outer join).
    """
    lt = left.select(
        F.col("key").alias("l_key"),
        F.col(EVENT_TIME).alias("l_time"),
        F.col(TS).alias("left_ts"),
        F.col(DATA).alias("left"),
    )
    rt = right.select(
        F.col("key").alias("r_key"),
        F.col(EVENT_TIME).alias("r_time"),
        F.col(TS).alias("right_ts"),
        F.col(DATA).alias("right"),
    )
    condition = (
        (F.col("l_key") == F.col("r_key"))
        & (F.col("r_time") >= F.col("l_time") - _interval(within_ms))
        & (F.col("r_time") <= F.col("l_time") + _interval(within_ms))
    )
    joined = lt.join(rt, condition, _SPARK_HOW[how])
    return joined.select(
        F.coalesce("l_key", "r_key").alias("key"),
        # greatest() skips NULLs: an unmatched row keeps its own timestamp.
        F.greatest("left_ts", "right_ts").alias(TS),
        "left_ts",
        "right_ts",
        "left",
        "right",
    )


def build(spark: SparkSession, source: SourceOptions, options: JoinOptions) -> JobOutput:
    # Each side deduplicates its own rows. With two subjects the source leaves the value BINARY
    # and each side decodes its own records.
    apart = options.right_values is not None
    records = ordered_stream(spark, dataclasses.replace(source, decode_values=not apart), dedup=False)
    left = side(
        records, options.left_topic, options.left_schema, options.key_field, source.values if apart else None
    )
    right_schema = options.right_schema or options.left_schema
    right = side(records, options.right_topic, right_schema, options.key_field, options.right_values)
    return JobOutput(join(left, right, options.within_ms, options.how), "append")
