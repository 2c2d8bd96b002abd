"""Order, stream time and lateness: DESIGN's "Order" and "Time" rules."""

from __future__ import annotations

import pytest

from sidecar.core import Emit, TopicPartition
from sidecar.core.stamping import Stamper

from .helpers import A0, A1, B0, B1, caught_up, drain, emitted, feed, task, timestamps_of


def test_the_head_with_the_smallest_timestamp_goes_first() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [1, 5, 9])
    feed(t, B0, [2, 3, 10])

    batches, _ = drain(t, now=0)

    assert emitted(batches) == [("a", 0, 1), ("b", 0, 2), ("b", 1, 3), ("a", 1, 5), ("a", 2, 9), ("b", 2, 10)]


def test_ties_are_broken_by_topic_order_then_partition() -> None:
    t = task(B1, A1, B0, A0, topic_order=["b", "a"], max_task_idle_ms=-1)
    for tp in (A0, A1, B0, B1):
        feed(t, tp, [7])

    batches, _ = drain(t, now=0)

    assert [(r.topic, r.partition) for b in batches for r in b.records] == [
        ("b", 0),
        ("b", 1),
        ("a", 0),
        ("a", 1),
    ]


def test_equal_timestamps_inside_one_partition_keep_offset_order() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [4, 4, 4])
    feed(t, B0, [4])

    batches, _ = drain(t, now=0)

    assert emitted(batches) == [("a", 0, 4), ("a", 1, 4), ("a", 2, 4), ("b", 0, 4)]


def test_records_are_never_reordered_inside_a_partition() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [10, 1, 2])  # out of order on the partition itself
    feed(t, B0, [5])

    batches, _ = drain(t, now=0)

    assert [(tp, off) for tp, off, _ in emitted(batches)] == [("b", 0), ("a", 0), ("a", 1), ("a", 2)]


def test_a_run_from_one_partition_stops_as_soon_as_another_head_is_smaller() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, list(range(0, 100, 2)))
    feed(t, B0, list(range(1, 100, 2)))

    batches, _ = drain(t, now=0)

    assert timestamps_of(batches) == list(range(100))


def test_an_unsorted_partition_merges_exactly_like_record_by_record() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [3, 9, 4, 4, 12, 1])
    feed(t, B0, [5, 6, 13])

    batches, _ = drain(t, now=0)

    # heads: a3<b5 → a3; a9>b5 → b5, b6; a9<b13 → a9, a4, a4 (each below b13), a12, a1; then b13
    assert timestamps_of(batches) == [3, 5, 6, 9, 4, 4, 12, 1, 13]


def test_stream_time_is_the_largest_timestamp_emitted_and_never_decreases() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [5, 3, 8, 2])

    batches, _ = drain(t, now=0)

    assert t.stream_time == 8
    stamped = Stamper().stamp(batches[0])
    assert [dict(h)["timesync.stream.time"] for *_, h in stamped] == [b"5", b"5", b"8", b"8"]


def test_a_record_below_stream_time_is_late_by_the_difference() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [5, 3, 8, 2])

    (batch,), _ = drain(t, now=0)

    assert batch.late == [1, 3]
    assert batch.lateness == [2, 6]
    assert t.late_total == 2


def test_late_records_drop_removes_and_counts_them() -> None:
    t = task(A0, max_task_idle_ms=-1, late_records="drop")
    feed(t, A0, [5, 3, 8, 2])

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [5, 8]
    assert batch.dropped_late == 2
    assert t.dropped["late"] == 2


def test_late_records_topic_routes_them_aside_with_their_lateness() -> None:
    t = task(A0, max_task_idle_ms=-1, late_records="topic")
    feed(t, A0, [5, 3, 8, 2])

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [5, 8]
    assert [(x.record.offset, x.timestamp, x.lateness) for x in batch.late_routed] == [(1, 3, 2), (3, 2, 6)]


def test_partition_time_is_the_largest_timestamp_taken_from_the_partition() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [4, 9, 2])
    feed(t, B0, [1])

    drain(t, now=0)

    parts = {(p["topic"], p["partition"]): p for p in t.snapshot(0)["partitions"]}
    assert parts[("a", 0)]["partition_time"] == 9
    assert parts[("b", 0)]["partition_time"] == 1


def test_poll_returns_everything_that_may_go_out_now_as_one_batch() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, range(0, 1000, 2), lag_after=1)
    feed(t, B0, range(1, 1000, 2), lag_after=1)

    first = t.poll(0)

    assert isinstance(first, Emit)
    assert len(first) == 999, "all but B0's 999, which waits: A0 ran dry with a record on the broker"


def test_max_records_caps_a_batch() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, range(10))

    batches, _ = drain(t, now=0, max_records=4)

    assert [len(b) for b in batches] == [4, 4, 2]
    assert timestamps_of(batches) == list(range(10))


def test_a_queue_survives_compaction_of_its_consumed_prefix() -> None:
    t = task(A0, max_task_idle_ms=-1)
    for chunk in range(10):
        feed(t, A0, range(chunk * 1000, chunk * 1000 + 1000))
        drain(t, now=0, max_records=700)
    _batches, _ = drain(t, now=0)

    assert t.records_out == 10_000
    assert t._part(A0).queue.head < 10_000, "the consumed prefix was dropped"  # type: ignore[attr-defined]


def test_unknown_partition_is_a_clear_error() -> None:
    t = task(A0)
    with pytest.raises(KeyError, match=r"not an input partition of this task"):
        feed(t, TopicPartition("zzz", 3), [1])


def test_a_task_needs_distinct_partitions_in_known_topics() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        task(A0, A0)
    with pytest.raises(ValueError, match="not in the topic order"):
        task(A0, B0, topic_order=["a"])


def test_caught_up_partition_without_records_does_not_stop_others_with_idle_disabled() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    caught_up(t, B0)
    feed(t, A0, [1])

    batches, _ = drain(t, now=0)

    assert timestamps_of(batches) == [1]
