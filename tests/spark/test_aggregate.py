"""Windowed aggregation over the ordered topic: output time, heartbeats, duplicates."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from spark_consumer.jobs import aggregate
from spark_consumer.jobs.aggregate import AggregateOptions
from spark_consumer.options import AggSpec, WindowSpec
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]

TUMBLING_5 = WindowSpec("tumbling", size_ms=5)
N_SCHEMA = StructType([StructField("n", LongType())])


def test_window_output_time_is_the_max_record_time_in_the_window(spark: SparkSession, stream: Any) -> None:
    """The seed example: 1,2,5,6,4,3,7,9, tumbling windows of 5, one record per micro-batch."""
    options = AggregateOptions(TUMBLING_5, output_mode="update")
    s = stream(lambda src: aggregate.build(spark, src, options), watermark_delay_ms=5)
    stamp = Stamper()

    updates = []
    for ts in [1, 2, 5, 6, 4, 3, 7, 9]:
        updates += [(r.window_start, r.ts) for r in s.feed(stamp.record(ts, {"n": ts}, "k"))]

    assert [ts for start, ts in updates if start == 0] == [1, 2, 4, 4]
    assert [ts for start, ts in updates if start == 5] == [5, 6, 7, 9]
    assert s.drops().total == 0


def test_a_heartbeat_alone_closes_the_last_window(spark: SparkSession, stream: Any) -> None:
    options = AggregateOptions(TUMBLING_5, output_mode="append")
    s = stream(lambda src: aggregate.build(spark, src, options), watermark_delay_ms=1)
    stamp = Stamper()

    first = s.feed(*(stamp.record(ts, {"n": ts}, "k") for ts in [1, 2, 6]))
    assert [(r.window_start, r["count"], r.ts) for r in first] == [(0, 2, 2)]  # [5, 10) still open

    closed = s.feed(stamp.heartbeat(20))  # no data: only the sidecar's watermark moved

    assert [(r.key, r.window_start, r.window_end, r["count"], r.ts) for r in closed] == [("k", 5, 10, 1, 6)]


def test_duplicates_from_an_at_least_once_replay_do_not_double_count(
    spark: SparkSession, stream: Any
) -> None:
    options = AggregateOptions(
        TUMBLING_5, aggs=(AggSpec("count"), AggSpec("sum", "n")), value_schema=N_SCHEMA, output_mode="append"
    )
    s = stream(lambda src: aggregate.build(spark, src, options), watermark_delay_ms=5)
    stamp = Stamper()
    originals = [stamp.record(ts, {"n": ts}, "k") for ts in [1, 2, 3]]
    s.feed(*originals)

    # The sidecar crashed before committing offsets 1 and 2 and wrote them again.
    replay = Stamper(stream_time=3).record
    out = s.feed(replay(2, {"n": 2}, "k", offset=1), replay(3, {"n": 3}, "k", offset=2), stamp.heartbeat(20))

    assert [(r.window_start, r["count"], r.sum_n, r.ts) for r in out] == [(0, 3, 6, 3)]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        # Hopping windows of 10 every 5 over 1, 3, 12: each record is in two windows.
        (
            WindowSpec("hopping", size_ms=10, slide_ms=5),
            [(-5, 5, 2, 3), (0, 10, 2, 3), (5, 15, 1, 12), (10, 20, 1, 12)],
        ),
        # Session windows with a 3 ms gap: a session ends 3 ms after its last record.
        (WindowSpec("session", gap_ms=3), [(1, 6, 2, 3), (12, 15, 1, 12)]),
    ],
    ids=["hopping", "session"],
)
def test_hopping_and_session_windows_are_stamped_with_their_max_time(
    spark: SparkSession, stream: Any, window: WindowSpec, expected: list[tuple[int, int, int, int]]
) -> None:
    s = stream(lambda src: aggregate.build(spark, src, AggregateOptions(window)), watermark_delay_ms=1)
    stamp = Stamper()

    out = s.feed(*(stamp.record(ts, {"n": ts}, "k") for ts in [1, 3, 12]), stamp.heartbeat(50))

    assert sorted((r.window_start, r.window_end, r["count"], r.ts) for r in out) == expected
