"""Stream-stream joins of two source topics of the ordered topic."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_consumer.jobs import join
from spark_consumer.jobs.join import JoinOptions
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]

SCHEMA = StructType([StructField("id", StringType()), StructField("n", LongType())])


def options(how: str) -> JoinOptions:
    return JoinOptions("orders", "payments", within_ms=5, how=how, key_field="id", left_schema=SCHEMA)  # type: ignore[arg-type]


def test_join_output_time_is_the_later_of_the_two_inputs(spark: SparkSession, stream: Any) -> None:
    s = stream(lambda src: join.build(spark, src, options("inner")), watermark_delay_ms=10)
    stamp = Stamper()

    out = s.feed(
        stamp.record(10, {"id": "a", "n": 1}, topic="orders"),
        stamp.record(13, {"id": "a", "n": 2}, topic="payments"),  # right after left
        stamp.record(20, {"id": "b", "n": 3}, topic="payments"),
        stamp.record(22, {"id": "b", "n": 4}, topic="orders"),  # left after right
        stamp.record(40, {"id": "b", "n": 5}, topic="payments"),  # too far from b@22: no pair
    )

    pairs = sorted((r.key, r.left_ts, r.right_ts, r.ts, r.left.n, r.right.n) for r in out)
    assert pairs == [("a", 10, 13, 13, 1, 2), ("b", 22, 20, 22, 4, 3)]


@pytest.mark.parametrize("how", ["left", "outer"])
def test_unmatched_rows_come_out_once_the_watermark_passes(
    spark: SparkSession, stream: Any, how: str
) -> None:
    s = stream(lambda src: join.build(spark, src, options(how)), watermark_delay_ms=1)
    stamp = Stamper()

    matched = s.feed(
        stamp.record(10, {"id": "a", "n": 1}, topic="orders"),
        stamp.record(12, {"id": "a", "n": 2}, topic="payments"),
        stamp.record(30, {"id": "lonely-order", "n": 3}, topic="orders"),
        stamp.record(31, {"id": "lonely-payment", "n": 4}, topic="payments"),
    )
    assert [(r.key, r.ts) for r in matched] == [("a", 12)]  # the unmatched wait for the watermark

    # Only a heartbeat: Spark's watermark passes 31 + 5, the unmatched rows are final.
    unmatched = s.feed(stamp.heartbeat(100))

    got = sorted((r.key, r.left_ts, r.right_ts, r.ts) for r in unmatched)
    expected = [("lonely-order", 30, None, 30)]
    if how == "outer":
        expected.append(("lonely-payment", None, 31, 31))
    assert got == expected


NESTED = StructType(
    [StructField("order", StructType([StructField("id", LongType()), StructField("note", StringType())]))]
)


def test_a_key_field_nested_in_the_value_keys_the_join_as_the_whole_schema_reads_it(
    spark: SparkSession, stream: Any
) -> None:
    nested = JoinOptions("orders", "payments", within_ms=5, key_field="order.id", left_schema=NESTED)
    s = stream(lambda src: join.build(spark, src, nested), watermark_delay_ms=10)
    stamp = Stamper()

    out = s.feed(
        stamp.record(10, {"order": {"id": 7, "note": "left"}}, topic="orders"),
        stamp.record(11, {"order": {"id": 7, "note": "right"}}, topic="payments"),
        stamp.record(12, {"order": {"id": "not a number", "note": "x"}}, topic="payments"),
    )

    assert [(r.key, r.ts, r.left.order.note, r.right.order.note) for r in out] == [("7", 11, "left", "right")]
