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


# A final result is final: eviction and restarts must not let a straggler reopen it.
TEN = WindowSpec("tumbling", size_ms=10)
EVICTING = SuppressOptions(TEN, grace_ms=0, ttl_ms=20)


def test_a_straggler_after_ttl_eviction_does_not_reopen_an_emitted_window(
    spark: SparkSession, stream: Any
) -> None:
    s = stream(lambda src: suppress.build(spark, src, EVICTING), watermark_delay_ms=0)
    stamp = Stamper()
    s.feed(stamp.record(T0 + 5, {"reading": 0}, "A"))
    flushed = s.feed(stamp.heartbeat(T0 + 30))  # past A's stream time + TTL (1005 + 20)
    assert [(r.key, r.window_start, r["count"], r.closed_by) for r in flushed] == [("A", 1000, 1, "ttl")]

    later = s.feed(stamp.record(T0 + 7, {"reading": 1}, "A"), stamp.record(T0 + 40, {"reading": 2}, "A"))
    assert later == [], "[1000, 1010) was emitted once; its straggler is late for A"
    assert s.drops().key_stream_time == 1


def test_a_restart_from_the_checkpoint_keeps_what_an_evicted_key_closed(
    spark: SparkSession, stream: Any
) -> None:
    s = stream(lambda src: suppress.build(spark, src, EVICTING), watermark_delay_ms=0)
    stamp = Stamper()
    s.feed(stamp.record(T0 + 5, {"reading": 0}, "A"))
    assert len(s.feed(stamp.heartbeat(T0 + 30))) == 1

    s.restart()
    assert s.feed(stamp.record(T0 + 7, {"reading": 1}, "A")) == []
    assert s.drops().key_stream_time == 1


def test_an_evicted_key_is_forgotten_after_the_closed_retention_and_counted(
    spark: SparkSession, stream: Any
) -> None:
    short = SuppressOptions(TEN, grace_ms=0, ttl_ms=20, closed_retention_ms=10)
    s = stream(lambda src: suppress.build(spark, src, short), watermark_delay_ms=0)
    stamp = Stamper()
    s.feed(stamp.record(T0 + 5, {"reading": 0}, "A"))
    s.feed(stamp.heartbeat(T0 + 30))  # evicted: windows emitted, closed horizon 1010 kept
    s.feed(stamp.heartbeat(T0 + 100))  # past horizon + TTL + retention: forgotten
    assert s.drops().forgotten_keys == 1

    s.feed(stamp.record(T0 + 7, {"reading": 1}, "A"))
    again = s.feed(stamp.heartbeat(T0 + 200))
    assert [(r.key, r.window_start, r["count"]) for r in again] == [("A", 1000, 1)], "starts afresh"


def test_the_per_key_late_rule_drops_at_end_plus_grace_and_keeps_what_has_not_reached_it(
    spark: SparkSession, stream: Any
) -> None:
    """Grace 1, windows of 2: after E@1003, [1000, 1002) has end + grace = 1003 = E's stream
    time, so it is closed and E@1001 is late; [1002, 1004) (1005) is still open, E@1002 counts."""
    s = stream(lambda src: suppress.build(spark, src, PER_KEY), watermark_delay_ms=GRACE_MS)
    stamp = Stamper()
    first = s.feed(stamp.record(T0, {"reading": 0}, "E"), stamp.record(T0 + 3, {"reading": 3}, "E"))
    assert [(r.window_start, r["count"]) for r in first] == [(1000, 1)]

    s.feed(stamp.record(T0 + 1, {"reading": 1}, "E"), stamp.record(T0 + 2, {"reading": 2}, "E"))
    assert s.drops().key_stream_time == 1, "E@1001: its window's end + grace equals E's stream time"
    closing = s.feed(stamp.record(T0 + 5, {"reading": 5}, "E"))
    assert [(r.window_start, r["count"]) for r in closing] == [(1002, 2)], "E@1002 was kept"


# The TTL timer is not moved on every micro-batch: a timer armed for an earlier stream time
# fires early and is moved on then. Eviction must still follow the key's latest stream time.


def test_a_key_is_evicted_at_the_ttl_of_its_latest_stream_time_not_an_earlier_one(
    spark: SparkSession, stream: Any
) -> None:
    s = stream(lambda src: suppress.build(spark, src, EVICTING), watermark_delay_ms=0)
    stamp = Stamper()
    assert s.feed(stamp.record(T0 + 5, {"reading": 0}, "A")) == []  # TTL at 1005 + 20
    closed = s.feed(stamp.record(T0 + 15, {"reading": 1}, "A"))  # TTL now at 1015 + 20
    assert [(r.window_start, r["count"], r.closed_by) for r in closed] == [(1000, 1, "stream-time")]

    assert s.feed(stamp.heartbeat(T0 + 30)) == [], "past 1005 + TTL but not 1015 + TTL: A stays"
    flushed = s.feed(stamp.heartbeat(T0 + 40))
    assert [(r.key, r.window_start, r["count"], r.closed_by) for r in flushed] == [("A", 1010, 1, "ttl")]


def test_a_key_far_behind_the_watermark_expires_at_the_next_watermark_advance(
    spark: SparkSession, stream: Any
) -> None:
    """One record per micro-batch: A's second record arrives in the batch whose watermark (1100)
    has already passed A's first TTL (1025) and its new one (1026). A is not evicted in that
    batch — its TTL is armed just above the watermark — but at the next advance."""
    s = stream(
        lambda src: suppress.build(spark, src, EVICTING), watermark_delay_ms=0, max_offsets_per_trigger=1
    )
    stamp = Stamper()
    held = s.feed(
        stamp.record(T0 + 5, {"reading": 0}, "A"),
        stamp.heartbeat(T0 + 100),
        stamp.record(T0 + 6, {"reading": 1}, "A"),
    )
    assert held == []
    flushed = s.feed(stamp.heartbeat(T0 + 110))
    assert [(r.key, r.window_start, r["count"], r.closed_by) for r in flushed] == [("A", 1000, 2, "ttl")]
