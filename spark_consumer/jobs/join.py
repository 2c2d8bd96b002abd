"""Stream-stream join of two source topics of the ordered topic, on a key, within a time bound.

The ordered topic interleaves several input topics; the ``timesync.source.topic`` header tells
them apart. The left side is one source topic, the right side another; a pair joins when the
keys are equal and the right record's event time is within ``within`` of the left one's.

The output timestamp is ``max(left.ts, right.ts)``, the rule Kafka Streams uses for join
results: a join result cannot exist before both of its inputs do. Unmatched rows of a left/outer
join carry their own timestamp and come out once Spark's watermark passes their event time plus
the bound; the ordered topic's heartbeats move the watermark, so they come out through quiet
periods too.

The rule is written once, as plain Python, in ``spark_consumer/join_rule.py`` (the
specification, which also says why the result equals Spark's own stream-stream join); it runs
inside Spark as a JVM ``StatefulProcessor`` (``transformWithState``, time mode ``EventTime``,
RocksDB state, one state row per key), built from ``operators/join`` and driven through py4j
(``join_operator.py``). Both sides go through one operator, read from one scan of the topic:
Spark's own join kept four state stores per side and deduplicated each side in a stateful
operator of its own; here a key's one row holds both sides' records, replays are recognised
among them, and the watermarked ``event_time`` in the operator's input makes Spark drop late
records before it, as it did before its join.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.join_checkpoint import check_plan
from spark_consumer.jobs.join_operator import INPUT_COLUMNS, run_operator, state_variable
from spark_consumer.join_rule import How
from spark_consumer.source import EVENT_TIME, TS, SourceOptions, above_watermark, ordered_stream
from spark_consumer.value_formats import BinaryValues
from spark_consumer.values import DATA, with_data

JoinHow = How
RAW = "raw_value"  # the value as read, while each side decodes its own records from it


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


def _decoded(
    records: DataFrame, name: str, mine: Column, schema: StructType | None, values: BinaryValues | None
) -> DataFrame:
    """``records`` with ``name``: the value of the records ``mine`` selects as the values layer
    decodes it (:func:`~spark_consumer.values.with_data`: decoded with ``values`` when the value
    is still BINARY, parsed with ``schema`` when it is JSON), NULL for the other records — a NULL
    value is neither decoded nor counted, so each record is decoded once, by its own side."""
    value = F.col(RAW)
    if values is not None:
        from spark_consumer.value_decoders import decoded_value

        value = decoded_value(value, values)
    decoded = with_data(records.withColumn("value", F.when(mine, value)), schema)
    return decoded.withColumnRenamed(DATA, name)


def operator_input(
    records: DataFrame, options: JoinOptions, left_values: BinaryValues | None = None
) -> DataFrame:
    """The operator's input (:data:`~spark_consumer.jobs.join_operator.INPUT_COLUMNS`) from the
    ordered topic's watermarked data records: the two sides' records, each value decoded with its
    side's schema into ``left`` or ``right`` (the other NULL), keyed by ``key_field`` of it or
    by the Kafka key. One read of the topic: both sides are columns of the same rows.

    The topic filter is written with :func:`above_watermark`: pushed below the watermark, it
    would hide the heartbeats (and the other topics' records) from the watermark.
    """
    topics = F.col("source_topic").isin(options.left_topic, options.right_topic)
    mine = records.filter(above_watermark(topics)).withColumn(RAW, F.col("value"))
    is_left = F.col("source_topic") == F.lit(options.left_topic)
    sides = _decoded(mine, "left", is_left, options.left_schema, left_values)
    right_schema = options.right_schema or options.left_schema
    sides = _decoded(sides, "right", ~is_left, right_schema, options.right_values)
    key = F.col("key")
    if options.key_field is not None:
        path = options.key_field
        key = F.when(is_left, F.col(f"left.{path}")).otherwise(F.col(f"right.{path}")).cast("string")
    inputs = sides.select(
        key.alias("key"),
        EVENT_TIME,
        TS,
        is_left.alias("is_left"),
        "source_partition",
        "source_offset",
        "left",
        "right",
    )
    return inputs.select(*INPUT_COLUMNS)


def join(inputs: DataFrame, within_ms: int, how: JoinHow = "inner") -> DataFrame:
    """The interval join of :func:`operator_input`'s two sides on key, ``|right.ts − left.ts| <=
    within_ms`` (the rule of :mod:`spark_consumer.join_rule`).

    Output: ``key``, ``ts`` = max(left ts, right ts), ``left_ts``, ``right_ts``, ``left``,
    ``right`` (the parsed values; NULL on the unmatched side of an outer join).
    """
    return run_operator(inputs, within_ms, how)


def build(spark: SparkSession, source: SourceOptions, options: JoinOptions) -> JobOutput:
    # With two subjects the source leaves the value BINARY and each side decodes its own records.
    apart = options.right_values is not None
    records = ordered_stream(spark, dataclasses.replace(source, decode_values=not apart), dedup=False)
    inputs = operator_input(records, options, source.values if apart else None)
    frame = join(inputs, options.within_ms, options.how)
    variable = state_variable(inputs)
    return JobOutput(frame, "append", check_checkpoint=lambda path: check_plan(path, variable))
