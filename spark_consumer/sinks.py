"""Where a job's results go: a Kafka topic (default), the console, or Parquet files.

Kafka records. Key = the result's ``key``; value = the result row as JSON; header
``timesync.timestamp`` = the output event time (``ts``, epoch ms, ASCII decimal).

Why a header: Spark 4.2's Kafka sink writes only ``topic``, ``key``, ``value``, ``headers`` and
``partition`` (its ``KafkaWriter`` has no timestamp column), so the Kafka timestamp of an output
record is the producer's send time (or the broker's, for a LogAppendTime topic). The output
event time therefore travels in the header and in the value's ``ts`` field; a Kafka Streams
consumer of the output topic reads it with a ``TimestampExtractor`` over the header.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from spark_consumer.jobs import JobOutput
from spark_consumer.options import UsageError

SinkKind = Literal["kafka", "console", "parquet"]
TIMESTAMP_HEADER = "timesync.timestamp"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """``trigger`` is ``"available-now"`` (process what is there, then stop) or a duration in ms."""

    kind: SinkKind
    checkpoint: str
    bootstrap_servers: str | None = None
    topic: str | None = None
    path: str | None = None
    trigger: str | int = 1000
    query_name: str | None = None
    kafka_options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind == "kafka" and not (self.topic and self.bootstrap_servers):
            raise UsageError(
                "--output-topic: required with the Kafka sink (or choose --sink console|parquet)"
            )
        if self.kind == "parquet" and not self.path:
            raise UsageError("--path: required with --sink parquet")


def kafka_records(frame: DataFrame) -> DataFrame:
    """``key``, ``value`` (the row as JSON) and ``headers`` for Spark's Kafka sink."""
    return frame.select(
        F.col("key").cast("string").alias("key"),
        # Keep NULLs ("right": null for an unmatched join row) so every record has every field.
        F.to_json(F.struct(*frame.columns), {"ignoreNullFields": "false"}).alias("value"),
        F.array(
            F.struct(
                F.lit(TIMESTAMP_HEADER).alias("key"),
                F.col("ts").cast("string").cast("binary").alias("value"),
            )
        ).alias("headers"),
    )


def start(output: JobOutput, sink: SinkOptions) -> StreamingQuery:
    """Start the streaming query writing ``output`` to ``sink``."""
    if sink.kind == "parquet" and output.output_mode != "append":
        raise UsageError(
            f"--sink parquet: Spark's file sink writes only append mode, not {output.output_mode}"
        )
    if output.check_checkpoint is not None:
        output.check_checkpoint(sink.checkpoint)
    frame = kafka_records(output.frame) if sink.kind == "kafka" else output.frame
    writer = (
        frame.writeStream.outputMode(output.output_mode)
        .option("checkpointLocation", sink.checkpoint)
        .queryName(sink.query_name or f"timesync-{sink.kind}")
    )
    if sink.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(sink.trigger)} milliseconds")
    if sink.kind == "kafka":
        writer = (
            writer.format("kafka")
            .option("kafka.bootstrap.servers", str(sink.bootstrap_servers))
            .option("topic", str(sink.topic))
        )
        for key, value in sink.kafka_options.items():
            writer = writer.option(key, value)
    elif sink.kind == "console":
        writer = writer.format("console").option("truncate", "false")
    else:
        writer = writer.format("parquet").option("path", str(sink.path))
    return writer.start()


def stop_between_batches(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Stop ``query``, after its running micro-batch (if any) finishes.

    ``StreamingQuery.stop()`` interrupts a running batch (which Spark then retries after a
    restart, and logs as aborted writes and cancelled tasks); waiting for the trigger to go idle
    first makes a clean stop the usual case.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.1)
    if query.isActive:
        query.stop()
