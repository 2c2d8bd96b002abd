"""An operator's pause (``PUT /pause``) holds a task: nothing out, no heartbeat, idle clocks frozen."""

from __future__ import annotations

from sidecar.core import Emit, Heartbeat
from sidecar.core.task import Idle, WaitUntil

from .helpers import A0, B0, caught_up, drain, emitted, feed, task


def test_a_held_task_emits_nothing_and_writes_no_heartbeat_however_long_it_waits() -> None:
    t = task(A0, B0, max_task_idle_ms=-1, watermark_heartbeat_ms=100, watermark_policy="bounded-delay")
    feed(t, A0, [10, 20], now=0)
    caught_up(t, B0, now=0)
    assert sorted(t.hold(0)) == [A0, B0], "every partition is to be paused on the consumer"
    for now in (0, 1_000, 60_000):
        assert t.poll(now) == Idle()
    assert t.snapshot(60_000)["partitions"][0]["paused"]
    assert sorted(t.release(60_000)) == [A0, B0]
    batches, _ = drain(t, 60_000)
    assert emitted(batches) == [("a", 0, 10), ("a", 1, 20)]


def test_idle_clocks_are_frozen_while_held_and_go_on_with_the_time_they_had_left() -> None:
    t = task(A0, B0, max_task_idle_ms=1_000, watermark_heartbeat_ms=0)
    feed(t, A0, [10], now=0)
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(1_000)
    t.hold(400)  # 600 ms left on B0's idle clock
    assert t.poll(50_000) == Idle()
    t.release(50_000)
    assert t.poll(50_100) == WaitUntil(50_600), "not enforced at once for the time spent held"
    out = t.poll(50_600)
    assert isinstance(out, Emit)
    assert out.enforced_from == 0


def test_backpressure_does_not_resume_a_partition_the_operator_holds() -> None:
    t = task(A0, B0, buffered_records_per_partition=2, max_task_idle_ms=-1)
    feed(t, A0, [1, 2, 3], now=0)
    assert t.pause_hint(0).pause == (A0,)
    assert t.hold(0) == (B0,), "A0 is paused already, for backpressure"
    assert not t.pause_hint(0), "no hint changes anything while held"
    t.release(10)
    drain(t, 10)
    assert t.pause_hint(10).resume == (A0,)


def test_a_second_hold_or_a_release_without_hold_changes_nothing() -> None:
    t = task(A0)
    assert t.release(0) == ()
    assert t.hold(0) == (A0,)
    assert t.hold(5) == ()
    assert t.held
    assert t.release(10) == (A0,)
    assert not t.held
    assert not isinstance(t.poll(10), Heartbeat)
