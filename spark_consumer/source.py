"""Read timesync's ordered topic: headers become columns, heartbeats move the watermark.

The sidecar writes every record with its event time as the Kafka timestamp and ``timesync.*``
headers (ASCII decimal), and, through quiet periods, *control records* (heartbeats): null key,
empty value, timestamp = the sidecar's watermark, header ``timesync.control=watermark``.

The pipeline here is, in this order:

1. Spark's Kafka source with ``includeHeaders=true``; headers → typed columns.
2. ``withWatermark`` on the Kafka timestamp, over *all* records, heartbeats included, so a
   heartbeat advances Spark's watermark as far as a data record with its timestamp would.
3. Control records filtered out.
4. Optionally, duplicates dropped on (source topic, partition, offset) within the watermark: an
   at-least-once replay by the sidecar repeats records with the same source headers.

Step 3 has a trap. Catalyst's ``PushPredicateThroughNonJoin`` moves a filter below
``EventTimeWatermark`` whenever the predicate does not reference the event-time column. A plain
``NOT is_control`` filter is therefore evaluated *before* the watermark, heartbeats never reach
it, and the last windows stay open until new data arrives. :func:`above_watermark` writes
predicates so that they stay above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_consumer.value_formats import BinaryValues

# Header names: the contract the sidecar writes and this reads.
from timesync_wire.headers import (
    CONTROL,
    ENFORCED,
    LATE,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    STREAM_TIME,
    WATERMARK,
)

EVENT_TIME = "event_time"  # TIMESTAMP: the Kafka record timestamp, the column Spark's watermark tracks
TS = "ts"  # the same instant as epoch milliseconds (BIGINT)
DEDUP_COLUMNS = ("source_topic", "source_partition", "source_offset")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Where the ordered topic is and how to read it.

    ``watermark_delay_ms`` is Spark's watermark delay: a record whose timestamp is at or below
    (max timestamp seen − delay) when its micro-batch starts is *late* for Spark's stateful
    operators and dropped (and counted). The ordered topic only holds records the sidecar marked
    late, so the delay can be small; it must be at least 1 ms to keep records whose timestamp
    equals the previous batch's maximum (Spark drops ``event time <= watermark``).

    ``values`` says how to decode Avro or Protobuf values (resolved against the registry at plan
    time, :func:`spark_consumer.value_decoders.plan_values`); ``None``: the value is JSON text.
    ``decode_values=False`` leaves an Avro or Protobuf ``value`` BINARY, for a job that decodes
    parts of the topic with different schemas (a join of two subjects).
    """

    bootstrap_servers: str
    topic: str
    watermark_delay_ms: int = 1000
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    values: BinaryValues | None = None
    decode_values: bool = True


def read_kafka(spark: SparkSession, options: SourceOptions) -> DataFrame:
    """The raw Kafka source (key, value, topic, partition, offset, timestamp, headers, …)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap_servers)
        .option("subscribe", options.topic)
        .option("startingOffsets", options.starting_offsets)
        .option("includeHeaders", "true")
    )
    if options.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
    for key, value in options.kafka_options.items():
        reader = reader.option(key, value)
    return reader.load()


def header(name: str) -> Column:
    """The value (BINARY) of the last header called ``name``, or NULL.

    The last one wins: the sidecar appends its headers after the input record's own, so a
    record that already carried a ``timesync.*`` header (a chained pipeline) reads the newest.

    Written without a lambda: a higher-order ``filter`` over the headers is interpreted, not
    code-generated, and on Spark 4.2 each element it reads asks for the SQL conf, which a task
    thread builds anew each time (a profile of ``aggregate``: 37 % of the driver's samples).
    The position of the name in the reversed keys is the last match counted from the end.
    """
    from_end = F.array_position(F.reverse(F.col("headers")["key"]), F.lit(name))
    return F.when(from_end > 0, F.element_at("headers", (-from_end).cast("int"))["value"])


def _decimal(name: str) -> Column:
    # try_cast: a malformed header gives NULL rather than failing the query (ANSI mode is on).
    return header(name).cast("string").try_cast("long")


def value_column(values: BinaryValues | None, binary: bool = False) -> Column:
    """``value``: the JSON text, or the Avro/Protobuf value decoded into a struct (NULL when it
    does not decode, as a heartbeat's empty value does not); with ``binary``, the bytes as read."""
    if binary:
        return F.col("value")
    if values is None:
        return F.col("value").cast("string")
    from spark_consumer.value_decoders import decoded_value

    return decoded_value(F.col("value"), values)


def ordered_records(raw: DataFrame, values: BinaryValues | None = None, binary: bool = False) -> DataFrame:
    """Typed columns of the ordered topic, control records included.

    ``value`` is :func:`value_column`. ``source_*`` fall back to the record's own Kafka
    coordinates when the headers are absent, so the deduplication key is never NULL (and a topic
    not written by timesync still reads).
    """
    return raw.select(
        F.col("key").cast("string").alias("key"),
        value_column(values, binary).alias("value"),
        F.col("timestamp").alias(EVENT_TIME),
        F.unix_millis("timestamp").alias(TS),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.coalesce(header(SOURCE_TOPIC).cast("string"), F.col("topic")).alias("source_topic"),
        F.coalesce(_decimal(SOURCE_PARTITION).cast("int"), F.col("partition")).alias("source_partition"),
        F.coalesce(_decimal(SOURCE_OFFSET), F.col("offset")).alias("source_offset"),
        _decimal(WATERMARK).alias("sidecar_watermark"),
        _decimal(STREAM_TIME).alias("sidecar_stream_time"),
        F.coalesce(header(LATE) == F.lit(b"1"), F.lit(False)).alias("late"),
        F.coalesce(header(ENFORCED) == F.lit(b"1"), F.lit(False)).alias("enforced"),
        header(CONTROL).isNotNull().alias("is_control"),
    )


def above_watermark(predicate: Column) -> Column:
    """``predicate``, written so Catalyst keeps it above ``withWatermark``.

    ``PushPredicateThroughNonJoin`` pushes any deterministic conjunct that does not reference
    the event-time column below ``EventTimeWatermark``; the watermark would then never see the
    rows the filter removes (heartbeats, or the other side of a join). OR-ing a term on the
    event-time column keeps the predicate a single conjunct that references it. The Kafka
    timestamp is never NULL (and the column is nullable, so the optimizer cannot fold the term
    away): the result equals ``predicate`` on every real record.
    """
    return predicate | F.col(EVENT_TIME).isNull()


def with_watermark(records: DataFrame, delay_ms: int) -> DataFrame:
    """Spark's watermark over every record, then the control records dropped (in that order)."""
    return records.withWatermark(EVENT_TIME, f"{int(delay_ms)} milliseconds").filter(
        above_watermark(~F.col("is_control"))
    )


def deduplicate(records: DataFrame) -> DataFrame:
    """Drop repeats of a source record (same topic, partition, offset) within the watermark.

    An at-least-once replay by the sidecar writes the same source record again with the same
    ``timesync.source.*`` headers; the state for a key is kept until the watermark passes its
    event time, which bounds how far apart the copies may be.
    """
    return records.dropDuplicatesWithinWatermark(list(DEDUP_COLUMNS))


def ordered_stream(spark: SparkSession, options: SourceOptions, *, dedup: bool = True) -> DataFrame:
    """Data records of the ordered topic, watermarked (heartbeats counted), optionally deduplicated."""
    binary = options.values is not None and not options.decode_values
    records = ordered_records(read_kafka(spark, options), options.values, binary)
    stream = with_watermark(records, options.watermark_delay_ms)
    return deduplicate(stream) if dedup else stream
