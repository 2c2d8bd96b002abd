"""Offsets whose records could not be read at all (a corrupt batch): under errors.tolerance=all a
trace goes to the dead letter queue with the next batch, and commits pass them only once it is
acknowledged; under timestamp.invalid=skip they are dropped and counted."""

from __future__ import annotations

import pytest

from sidecar.core import Unreadable
from sidecar.core.deadletters import DeadLetterRatioExceeded
from sidecar.core.stamping import ERRORS_LAST_OFFSET, ERRORS_OFFSET, dead_letter

from .helpers import A0, B0, drain, feed, task

GONE = Unreadable(3, 9, "cannot read a[0] at offsets 3-8: Invalid CRC", b"\x00batch")


def test_their_trace_goes_out_with_the_next_batch_and_the_commit_waits_for_it() -> None:
    t = task(A0, max_task_idle_ms=-1, errors_tolerance="all")
    feed(t, A0, [1, 2, 3])
    t.push(A0, GONE)
    feed(t, A0, [4])

    batches, _ = drain(t, now=0)
    [dead] = [d for b in batches for d in b.dead_letters]
    assert (dead.record.offset, dead.last_offset, dead.reason) == (3, 8, GONE.reason)
    assert dead.record.value == b"\x00batch"
    assert [r.offset for b in batches for r in b.records] == [0, 1, 2, 9]
    assert t.committable() == {}
    assert t.acked([b.batch_id for b in batches]) == {A0: 10}


def test_the_trace_names_the_range_in_kafka_connects_headers_and_one_of_ours() -> None:
    t = task(A0, max_task_idle_ms=-1, errors_tolerance="all")
    t.push(A0, GONE)
    [batch], _ = drain(t, now=0)
    key, value, timestamp, headers = dead_letter(batch.dead_letters[0])
    named = dict(headers)
    assert (key, value, timestamp) == (None, b"\x00batch", None)
    assert (named[ERRORS_OFFSET], named[ERRORS_LAST_OFFSET]) == (b"3", b"8")
    assert named["__connect.errors.exception.class.name"] == b"CorruptRecordException"
    assert named["__connect.errors.exception.message"] == GONE.reason.encode()


def test_under_skip_they_are_dropped_counted_and_passed_at_once() -> None:
    t = task(A0, B0, max_task_idle_ms=-1, errors_tolerance="all", timestamp_invalid="skip")
    t.push(A0, GONE)

    assert t.committable() == {A0: 9}
    assert t.snapshot(0)["dropped"] == {"unreadable": 1}
    assert drain(t, now=0)[0] == []


def test_they_count_against_the_dead_letter_budget() -> None:
    t = task(A0, max_task_idle_ms=-1, errors_tolerance="all", dlq_max_ratio=0.5)
    feed(t, A0, [1] * 60)
    for i in range(60):  # 60 of 120 failed: not above half
        t.push(A0, Unreadable(60 + i, 61 + i, "bad"))
    with pytest.raises(DeadLetterRatioExceeded):
        t.push(A0, Unreadable(120, 121, "bad"))


def test_under_tolerance_none_they_never_reach_the_task() -> None:
    """The adapter stops first (the failure table names the offsets)."""
    with pytest.raises(ValueError, match=r"only under errors\.tolerance=all"):
        task(A0, errors_tolerance="none").push(A0, GONE)
