"""The ordered topic's headers become typed columns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from sidecar.core.stamping import header_key_bytes
from spark_consumer.source import ordered_records
from testkit import raw_batches
from tests.spark import ordered_topic
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_headers_become_typed_columns(
    spark: SparkSession, bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topic = ordered_topic.create(bootstrap, topic_name("ordered"))
    stamp = Stamper(watermark_delay_ms=5)
    ordered_topic.produce(
        bootstrap,
        topic,
        [
            stamp.record(100, {"n": 1}, "a", topic="orders", partition=3),
            stamp.record(90, {"n": 2}, "b", topic="payments", partition=1, enforced=True),
            stamp.heartbeat(),
        ],
    )
    raw = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    rows = ordered_records(raw.option("includeHeaders", "true").load()).orderBy("kafka_offset").collect()

    columns = [
        "key", "value", "ts", "source_topic", "source_partition", "source_offset",
        "sidecar_watermark", "sidecar_stream_time", "late", "enforced", "is_control",
    ]  # fmt: skip
    assert [tuple(r[c] for c in columns) for r in rows] == [
        ("a", '{"n": 1}', 100, "orders", 3, 0, 95, 100, False, False, False),
        ("b", '{"n": 2}', 90, "payments", 1, 0, 95, 100, True, True, False),
        # A heartbeat: no source headers, so its own position stands in (a dedup key never NULL).
        (None, "", 95, topic, 0, 2, 95, None, False, False, True),
    ]


def test_a_header_key_that_is_not_utf8_breaks_nothing_and_reads_as_java_reads_it(
    spark: SparkSession, bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    """The sidecar passes such a key through; Spark's Kafka source (Java) decodes it with
    replacement characters, and the ``timesync.*`` headers after it read as ever."""
    topic = ordered_topic.create(bootstrap, topic_name("ordered"))
    stamped = Stamper().record(100, {"n": 1}, "a", topic="orders", partition=3)
    keyed = [(b"\x80trace", b"x"), *((header_key_bytes(k), v) for k, v in stamped.headers)]
    data = raw_batches.batch([raw_batches.record(0, b"a", stamped.value, keyed)], stamped.timestamp)
    asyncio.run(raw_batches.send(bootstrap, topic, 0, data, 1))

    raw = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    loaded = raw.option("includeHeaders", "true").load()
    [row] = ordered_records(loaded).collect()
    assert (
        row["key"],
        row["ts"],
        row["source_topic"],
        row["source_partition"],
        row["sidecar_stream_time"],
    ) == ("a", 100, "orders", 3, 100)
    [(key, header_value)] = [(h["key"], h["value"]) for h in loaded.collect()[0]["headers"][:1]]
    assert (key, header_value) == ("\ufffdtrace", b"x")
