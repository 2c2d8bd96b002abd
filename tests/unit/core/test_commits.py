"""Commits: an input offset is safe only once every output from it and before it is acked."""

from __future__ import annotations

from sidecar.core import Record

from .helpers import A0, B0, drain, feed, task


def test_nothing_is_committable_before_its_batch_is_acked() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [1, 2, 3])
    (batch,), _ = drain(t, now=0)

    assert t.committable() == {}
    assert t.acked([batch.batch_id]) == {A0: 3}


def test_an_ack_out_of_order_waits_for_the_earlier_batches() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [1, 2])
    first, _ = drain(t, now=0)
    feed(t, A0, [3, 4])
    second, _ = drain(t, now=0)

    assert t.acked([second[0].batch_id]) == {}
    assert t.acked([first[0].batch_id]) == {A0: 4}


def test_records_still_buffered_hold_the_commit_back() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 5, 9])
    feed(t, B0, [2], lag_after=3)  # B0 runs dry with data on the broker: A0's 5 and 9 wait
    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [1, 2]
    assert t.acked([batch.batch_id]) == {A0: 1, B0: 1}


def test_skipped_invalid_records_become_committable_with_nothing_pending() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="skip")
    t.push(A0, [Record("a", 0, 0, -1), Record("a", 0, 1, -1)])

    assert t.committable() == {A0: 2}


def test_a_dead_letter_is_committed_only_once_its_batch_is_acked() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="fail", errors_tolerance="all")
    t.push(A0, [Record("a", 0, 0, -1)])
    (batch,), _ = drain(t, now=0)

    assert t.committable() == {}
    assert t.acked([batch.batch_id]) == {A0: 1}


def test_a_dead_letter_sent_early_does_not_let_the_commit_jump_buffered_records() -> None:
    t = task(A0, B0, max_task_idle_ms=0, timestamp_invalid="fail", errors_tolerance="all")
    t.push(A0, [Record("a", 0, 0, 10), Record("a", 0, 1, -1)])  # B0 unknown: offset 0 stays buffered
    dead_only = t.poll(0)

    assert dead_only.dead_letters  # type: ignore[union-attr]
    assert t.acked([dead_only.batch_id]) == {}, "offset 0 is still buffered"  # type: ignore[union-attr]


def test_dropped_late_records_are_committed_with_the_batch_that_took_them() -> None:
    t = task(A0, max_task_idle_ms=-1, late_records="drop")
    feed(t, A0, [5, 1])
    (batch,), _ = drain(t, now=0)

    assert batch.dropped_late == 1
    assert t.acked([batch.batch_id]) == {A0: 2}


def test_nothing_is_committable_until_every_batch_is_acked() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [1])
    (batch,), _ = drain(t, now=0)

    assert t.committable() == {}
    assert t.acked([batch.batch_id]) == {A0: 1}
