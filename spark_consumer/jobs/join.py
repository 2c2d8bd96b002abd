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
from pyspark.sql.types import StructField, StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.join_checkpoint import check_plan
from spark_consumer.jobs.join_operator import INPUT_COLUMNS, run_operator, state_variable
from spark_consumer.join_rule import How
from spark_consumer.source import EVENT_TIME, TS, SourceOptions, above_watermark, ordered_stream
from spark_consumer.value_formats import BinaryValues

JoinHow = How


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


@dataclass(frozen=True, slots=True)
class _Side:
    """What the operator carries for one side, and how its value becomes the output's.

    ``carried`` is the side's value as the operator holds it: the JSON text when ``parse_after``
    is its schema (it is parsed after the operator, for the rows that come out), else the value as
    decoded (Avro, Protobuf) or the text (no schema)."""

    carried: Column
    parse_after: StructType | None

    def key(self, path: str) -> Column:
        """The side's ``path`` field: from the carried text, parsed with only that field's schema
        (the parser skips the rest; the field reads as the full schema would read it)."""
        if self.parse_after is None:
            return _field(self.carried, path)
        return _field(F.from_json(self.carried, _only(self.parse_after, path)), path)

    def value(self, column: str) -> Column:
        """The output's value column from the operator's ``column``."""
        if self.parse_after is None:
            return F.col(column)
        return F.from_json(column, self.parse_after)


def _side(records: DataFrame, schema: StructType | None, values: BinaryValues | None) -> _Side:
    """One side's value: decoded with ``values`` (BINARY still), taken as the source decoded it
    (a struct), or JSON text (parsed after the operator with ``schema``, when there is one)."""
    if values is not None:
        from spark_consumer.value_decoding import decoded_value

        return _Side(decoded_value(F.col("value"), values), None)
    if isinstance(records.schema["value"].dataType, StructType):
        return _Side(F.col("value"), None)
    return _Side(F.col("value"), schema)


def _field(column: Column, path: str) -> Column:
    for part in path.split("."):
        column = column.getField(part)
    return column


def _only(schema: StructType, path: str) -> StructType:
    """``schema`` with only the fields on ``path`` (the whole schema when ``path`` is not in it)."""
    parts = path.split(".")
    head = parts[0]
    if head not in schema.fieldNames():
        return schema
    field = schema[head]
    inner = field.dataType
    if len(parts) > 1:
        if not isinstance(inner, StructType) or parts[1] not in inner.fieldNames():
            return schema
        inner = _only(inner, ".".join(parts[1:]))
    return StructType([StructField(head, inner, field.nullable, field.metadata)])


def operator_input(
    records: DataFrame, options: JoinOptions, left_values: BinaryValues | None = None
) -> tuple[DataFrame, tuple[_Side, _Side]]:
    """The operator's input (:data:`~spark_consumer.jobs.join_operator.INPUT_COLUMNS`) from the
    ordered topic's watermarked data records: the two sides' records, each value in ``left`` or
    ``right`` (the other NULL), keyed by ``key_field`` of it or by the Kafka key; and both sides'
    :class:`_Side`, which :func:`join` needs to make the output's values.

    The topic filter is written with :func:`above_watermark`: pushed below the watermark, it
    would hide the heartbeats (and the other topics' records) from the watermark.
    """
    topics = F.col("source_topic").isin(options.left_topic, options.right_topic)
    mine = records.filter(above_watermark(topics))
    is_left = F.col("source_topic") == F.lit(options.left_topic)
    left = _side(mine, options.left_schema, left_values)
    right = _side(mine, options.right_schema or options.left_schema, options.right_values)
    key = F.col("key")
    if options.key_field is not None:
        # Only the side's own decoding runs for a record: CASE WHEN evaluates one branch.
        key = F.when(is_left, left.key(options.key_field)).otherwise(right.key(options.key_field))
    inputs = mine.select(
        key.cast("string").alias("key"),
        EVENT_TIME,
        TS,
        is_left.alias("is_left"),
        "source_partition",
        "source_offset",
        F.when(is_left, left.carried).alias("left"),
        F.when(~is_left, right.carried).alias("right"),
    )
    return inputs.select(*INPUT_COLUMNS), (left, right)


def join(inputs: DataFrame, sides: tuple[_Side, _Side], within_ms: int, how: JoinHow = "inner") -> DataFrame:
    """The interval join of :func:`operator_input`'s two sides on key, ``|right.ts − left.ts| <=
    within_ms`` (the rule of :mod:`spark_consumer.join_rule`).

    Output: ``key``, ``ts`` = max(left ts, right ts), ``left_ts``, ``right_ts``, ``left``,
    ``right`` (the parsed values; NULL on the unmatched side of an outer join).
    """
    joined = run_operator(inputs, within_ms, how)
    left, right = sides
    return joined.select(
        "key",
        TS,
        "left_ts",
        "right_ts",
        left.value("left").alias("left"),
        right.value("right").alias("right"),
    )


def build(spark: SparkSession, source: SourceOptions, options: JoinOptions) -> JobOutput:
    # With two subjects the source leaves the value BINARY and each side decodes its own records.
    apart = options.right_values is not None
    records = ordered_stream(spark, dataclasses.replace(source, decode_values=not apart), dedup=False)
    inputs, sides = operator_input(records, options, source.values if apart else None)
    frame = join(inputs, sides, options.within_ms, options.how)
    variable = state_variable(inputs)
    return JobOutput(frame, "append", check_checkpoint=lambda path: check_plan(path, variable))
