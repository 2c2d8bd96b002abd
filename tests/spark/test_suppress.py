"""Per-key final results: each key closes its windows on its own stream time.

The IoT example: device A reports t0..t3, then device B — whose uplink was down — reports its
own t0..t3. The skew between them (3 ms) is larger than the grace (1 ms).
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_consumer.jobs import aggregate, suppress
from spark_consumer.jobs.aggregate import AggregateOptions
from spark_consumer.jobs.suppress import SuppressOptions
from spark_consumer.options import WindowSpec
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]

T0 = 1_000
WINDOW = WindowSpec("tumbling", size_ms=2)  # [1000, 1002), [1002, 1004)
GRACE_MS = 1
PER_KEY = SuppressOptions(WINDOW, grace_ms=GRACE_MS, ttl_ms=10)


def device(stamp: Stamper, key: str) -> list[Any]:
    return [stamp.record(T0 + i, {"reading": i}, key) for i in range(4)]


def test_per_key_stream_time_keeps_the_skewed_key(spark: SparkSession, stream: Any) -> None:
    s = stream(lambda src: suppress.build(spark, src, PER_KEY), watermark_delay_ms=GRACE_MS)
    stamp = Stamper()

    a = s.feed(*device(stamp, "A"))
    # A's stream time 1003 reached 1002 + grace: A's first window is final, at once.
    assert [(r.key, r.window_start, r["count"], r.ts, r.closed_by) for r in a] == [
        ("A", 1000, 2, 1001, "stream-time")
    ]

    b = s.feed(*device(stamp, "B"))
    # B's records are late for the stream (and for Spark's watermark) but not for B.
    assert [(r.key, r.window_start, r["count"], r.ts) for r in b] == [("B", 1000, 2, 1001)]
    assert s.drops().total == 0


def test_global_watermark_drops_the_skewed_key(spark: SparkSession, stream: Any) -> None:
    """The same data through Spark's own windowing: one watermark for all keys."""
    options = AggregateOptions(WINDOW, output_mode="append")
    s = stream(lambda src: aggregate.build(spark, src, options), watermark_delay_ms=GRACE_MS)
    stamp = Stamper()

    a = s.feed(*device(stamp, "A"))
    assert [(r.key, r.window_start, r["count"]) for r in a] == [("A", 1000, 2)]

    b = s.feed(*device(stamp, "B"), stamp.heartbeat(T0 + 100))

    # The watermark (1003 − 1) had passed B's t0..t2: dropped. Only B's t3 survives.
    assert [(r.key, r.window_start, r["count"]) for r in b] == [("A", 1002, 2), ("B", 1002, 1)]
    assert s.drops().watermark == 3


def test_idle_key_is_flushed_and_evicted_after_the_ttl(spark: SparkSession, stream: Any) -> None:
    s = stream(lambda src: suppress.build(spark, src, PER_KEY), watermark_delay_ms=GRACE_MS)
    stamp = Stamper()

    assert s.feed(stamp.record(T0, {"reading": 0}, "C"), stamp.record(T0 + 1, {"reading": 1}, "C")) == []

    # C stays quiet; heartbeats move Spark's watermark past C's stream time + TTL (1001 + 10).
    flushed = s.feed(stamp.heartbeat(T0 + 50))

    assert [(r.key, r.window_start, r["count"], r.ts, r.closed_by) for r in flushed] == [
        ("C", 1000, 2, 1001, "ttl")
    ]


def test_replayed_records_do_not_double_count(spark: SparkSession, stream: Any) -> None:
    s = stream(lambda src: suppress.build(spark, src, PER_KEY), watermark_delay_ms=GRACE_MS)
    stamp = Stamper()
    s.feed(stamp.record(T0, {"reading": 0}, "D"), stamp.record(T0 + 1, {"reading": 1}, "D"))

    replay = Stamper().record
    out = s.feed(
        replay(T0 + 1, {"reading": 1}, "D", offset=1),
        replay(T0, {"reading": 0}, "D", offset=0),
        stamp.record(T0 + 3, {"reading": 3}, "D"),
    )

    assert [(r.key, r.window_start, r["count"], r.ts) for r in out] == [("D", 1000, 2, 1001)]
