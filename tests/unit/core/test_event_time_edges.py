"""Event time at the edges of a topology: a quiet input, an idle sidecar, an invalid timestamp
behind out-of-order data, and history the broker still accepts.

Each test is named for the rule it holds; each failed before the rule was fixed.
"""

from __future__ import annotations

import orjson
import pytest

from sidecar.config.extractor import parse_extractor
from sidecar.core import (
    BrokerTimestampLimits,
    Emit,
    Heartbeat,
    Idle,
    MergeTask,
    NeedFetch,
    Record,
    RefusedTimestampError,
    TaskConfig,
    WaitUntil,
)

from .helpers import A0, B0, caught_up, drain, feed, records, timestamps_of

HOUR = 3_600_000


# -- 1. a quiet input -------------------------------------------------------------------------


def test_an_input_that_never_received_a_record_does_not_freeze_the_watermark() -> None:
    """watermark.policy=auto decides every partition's policy at start: an empty CreateTime
    partition that a fetch showed caught up has a watermark like any other."""
    t = MergeTask([A0, B0], TaskConfig(max_task_idle_ms=100, watermark_heartbeat_ms=200))
    caught_up(t, B0, now=1_000)
    feed(t, A0, range(10_000, 10_100), now=1_000)
    assert drain(t, now=1_000)[0] == [], "B0 idles first"
    batches, _ = drain(t, now=1_200)  # B0's idle deadline (1_100) passed

    assert len(timestamps_of(batches)) == 100
    assert t.watermark >= 0, "known once every partition has a policy and a fetch"
    caught_up(t, A0, now=9_000)
    caught_up(t, B0, now=9_000)
    assert t.poll(9_000) == Heartbeat(t.watermark), "quiet spell: a heartbeat, not silence"
    assert t.watermark == 9_000 - 5_000, "caught up and idle: check time − watermark.max.delay.ms"


# -- 2. no busy wait ------------------------------------------------------------------------


@pytest.mark.parametrize("data", [False, True], ids=["nothing buffered", "data held by an unknown lag"])
def test_an_unknown_watermark_asks_for_no_wake_up_of_its_own(data: bool) -> None:
    """While the watermark is unknown only a fetch can make it known: the task asks to be woken
    by nothing but real deadlines, never 'in 1 ms' over and over."""
    t = MergeTask([A0, B0], TaskConfig(max_task_idle_ms=0, watermark_heartbeat_ms=200))
    if data:
        feed(t, A0, [5_000], now=0)  # B0 never fetched: its lag (and watermark) unknown
    t.poll(0)
    for now in (200, 201, 5_000):
        out = t.poll(now)
        assert isinstance(out, Idle | NeedFetch), out
        assert out.wake_at_ms is None, f"woken at {out.wake_at_ms} for a heartbeat it cannot write"


def test_a_known_watermark_wakes_exactly_when_the_heartbeat_is_due() -> None:
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=0, watermark_heartbeat_ms=200))
    feed(t, A0, [5_000], now=0)
    drain(t, now=0)
    out = t.poll(50)
    assert out == Idle(200)
    assert isinstance(t.poll(200), Heartbeat)
    out = t.poll(200)
    assert out == Idle(400), "the next one, not now + 1"


# -- 3. partition time for an invalid timestamp ------------------------------------------------


def test_partition_time_fallback_is_the_largest_time_before_the_record_in_its_partition() -> None:
    """Kafka Streams' UsePartitionTimeOnInvalidTimestamp: the partition's time so far, not the
    largest timestamp still buffered."""
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=-1, timestamp_invalid="partition-time"))
    feed(t, A0, [100])
    first, _ = drain(t, now=0)  # 100 taken: partition time 100
    feed(t, A0, [50])  # out of order, still buffered
    t.push(A0, records(A0, [-1], first_offset=2))
    later, _ = drain(t, now=0)

    assert timestamps_of(first) + timestamps_of(later) == [100, 50, 100]


def test_partition_time_fallback_counts_earlier_records_of_the_same_fetch() -> None:
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=-1, timestamp_invalid="partition-time"))
    t.push(A0, records(A0, [30, 70, -1, 20]))
    batches, _ = drain(t, now=0)
    assert timestamps_of(batches) == [30, 70, 70, 20]


# -- 4. what the broker accepts ------------------------------------------------------------------


def json_task(**config: object) -> MergeTask:
    cfg = TaskConfig(max_task_idle_ms=-1, extractor=parse_extractor("json:ts"), **config)  # type: ignore[arg-type]
    return MergeTask([A0], cfg)


def json_record(offset: int, event_ms: int, produced_ms: int) -> Record:
    return Record("a", 0, offset, produced_ms, value=orjson.dumps({"ts": event_ms}))


def test_a_backfill_stamped_hours_before_its_event_times_is_emitted() -> None:
    """The broker judges a timestamp against its clock, not against the input's CreateTime."""
    now = 1_700_000_000_000
    t = json_task(output_limits=BrokerTimestampLimits(), errors_tolerance="none")
    loaded_at = now - 6 * HOUR  # load time, hours before the event times it carries
    t.push(A0, [json_record(0, now - HOUR, loaded_at), json_record(1, now + HOUR, loaded_at)])
    batches, _ = drain(t, now=now)
    assert timestamps_of(batches) == [now - HOUR, now + HOUR], "nothing the broker accepts is refused"


def test_a_time_the_broker_would_refuse_goes_to_the_dead_letter_queue_naming_the_setting() -> None:
    now = 1_700_000_000_000
    t = json_task(output_limits=BrokerTimestampLimits(after_max_ms=HOUR), errors_tolerance="all")
    t.push(A0, [json_record(0, now, now), json_record(1, now + HOUR + 1, now), json_record(2, now + 5, now)])
    batches, _ = drain(t, now=now)

    assert timestamps_of(batches) == [now, now + 5]
    (dead,) = [d for b in batches for d in b.dead_letters]
    assert dead.record.offset == 1
    assert "message.timestamp.after.max.ms=3600000" in dead.reason


def test_a_time_too_far_behind_the_clock_is_refused_only_when_before_max_is_set() -> None:
    now = 1_700_000_000_000
    old = now - 30 * 24 * HOUR
    unbounded = json_task(output_limits=BrokerTimestampLimits(), errors_tolerance="none")
    unbounded.push(A0, [json_record(0, old, now)])
    assert timestamps_of(drain(unbounded, now=now)[0]) == [old], "Kafka's default: no limit behind"

    bounded = json_task(output_limits=BrokerTimestampLimits(before_max_ms=24 * HOUR), errors_tolerance="none")
    bounded.push(A0, [json_record(0, old, now)])
    with pytest.raises(RefusedTimestampError, match=r"message\.timestamp\.before\.max\.ms=86400000"):
        drain(bounded, now=now)


def test_skip_drops_a_refused_time_and_counts_it() -> None:
    now = 1_700_000_000_000
    t = json_task(output_limits=BrokerTimestampLimits(), timestamp_invalid="skip")
    t.push(A0, [json_record(0, now + 2 * HOUR, now), json_record(1, now, now)])
    batches, _ = drain(t, now=now)
    assert timestamps_of(batches) == [now]
    assert t.dropped["refused-timestamp"] == 1


def test_a_log_append_time_output_refuses_nothing() -> None:
    now = 1_700_000_000_000
    t = json_task(output_limits=None, errors_tolerance="none")
    t.push(A0, [json_record(0, now + 100 * HOUR, now)])
    assert timestamps_of(drain(t, now=now)[0]) == [now + 100 * HOUR]


def test_refused_records_keep_the_batch_flags_of_the_others_in_place() -> None:
    now = 1_700_000_000_000
    t = MergeTask(
        [A0, B0],
        TaskConfig(max_task_idle_ms=-1, output_limits=BrokerTimestampLimits(), errors_tolerance="all"),
    )
    t.push(A0, records(A0, [now + 10, now + 2 * HOUR]))
    drain(t, now=now)
    t.push(B0, records(B0, [now + 1, now + 3 * HOUR, now + 2]))  # late behind stream time now + 10
    (batch,), _ = drain(t, now=now)
    assert isinstance(batch, Emit)
    assert batch.timestamps == [now + 1, now + 2]
    assert (batch.late, batch.lateness) == ([0, 1], [9, 8])
    assert [d.record.offset for d in batch.dead_letters] == [1]


def test_no_heartbeat_is_written_that_the_broker_would_refuse() -> None:
    """Replaying a month-old history into a topic with before.max = 1 day: the watermark is a
    month old, so a heartbeat stamped with it would fail its batch."""
    now = 1_700_000_000_000
    old = now - 30 * 24 * HOUR
    cfg = TaskConfig(
        max_task_idle_ms=0,
        watermark_heartbeat_ms=200,
        output_limits=BrokerTimestampLimits(before_max_ms=24 * HOUR),
        errors_tolerance="all",
    )
    t = MergeTask([A0], cfg)
    feed(t, A0, [now - HOUR], now=now)
    drain(t, now=now)
    t.observe_fetch(A0, 1, 1, now)
    assert isinstance(t.poll(now + 200), Heartbeat), "a recent watermark: heartbeats as usual"

    replay = MergeTask([A0], cfg)
    feed(replay, A0, [old], now=now)
    replay.observe_fetch(A0, 2, 1, now)  # more on the broker: the watermark stays a month old
    drain(replay, now=now)
    out = replay.poll(now + 5_000)
    assert not isinstance(out, Heartbeat)
    assert isinstance(out, Idle | NeedFetch | WaitUntil)


def test_sorted_buffers_refuse_the_same_records_as_the_general_merge() -> None:
    """Both merge paths (sorted buffers cut and sorted at once; runs) leave the same records out."""
    now = 1_700_000_000_000
    limits = BrokerTimestampLimits(after_max_ms=HOUR, before_max_ms=HOUR)
    stamps = [now - 2 * HOUR, now - 5, now, now + 5, now + 2 * HOUR]
    sorted_task = MergeTask(
        [A0, B0], TaskConfig(max_task_idle_ms=-1, output_limits=limits, errors_tolerance="all")
    )
    sorted_task.push(A0, records(A0, stamps))
    sorted_task.push(B0, records(B0, [now + 1]))
    (batch,), _ = drain(sorted_task, now=now)
    assert batch.timestamps == [now - 5, now, now + 1, now + 5]
    assert sorted(d.record.offset for d in batch.dead_letters) == [0, 4]
    assert sorted_task.stream_time == now + 5, "a refused time is not stream time"


#: A topic accepting one hour ahead and two hours behind, judged at NOW.
EDGES = BrokerTimestampLimits(after_max_ms=HOUR, before_max_ms=2 * HOUR)
NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("timestamp", "refused_by"),
    [
        (NOW + HOUR, None),
        (NOW + HOUR + 1, "message.timestamp.after.max.ms=3600000"),
        (NOW - 2 * HOUR, None),
        (NOW - 2 * HOUR - 1, "message.timestamp.before.max.ms=7200000"),
    ],
)
def test_the_broker_accepts_a_time_exactly_at_either_limit_and_refuses_one_ms_beyond(
    timestamp: int, refused_by: str | None
) -> None:
    """Kafka refuses ``ts > now + after.max.ms`` and ``ts < now - before.max.ms``, nothing else."""
    reason = EDGES.refusal(timestamp, NOW)
    if refused_by is None:
        assert reason is None
        assert EDGES.window(NOW)[0] <= timestamp <= EDGES.window(NOW)[1]
    else:
        assert reason is not None
        assert refused_by in reason


@pytest.mark.parametrize("in_order", [True, False], ids=["sorted-buffer", "runs"])
def test_the_merge_emits_times_at_the_limits_and_dead_letters_those_one_ms_beyond(in_order: bool) -> None:
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=-1, output_limits=EDGES, errors_tolerance="all"))
    edges = [NOW - 2 * HOUR - 1, NOW - 2 * HOUR, NOW + HOUR, NOW + HOUR + 1]
    t.push(A0, records(A0, edges if in_order else edges[::-1]))  # no clock reading yet: judged at emit
    batches, _ = drain(t, now=NOW)
    assert sorted(timestamps_of(batches)) == [NOW - 2 * HOUR, NOW + HOUR]
    dead = [d.record for b in batches for d in b.dead_letters]
    assert sorted(r.timestamp for r in dead) == [NOW - 2 * HOUR - 1, NOW + HOUR + 1]


def test_a_push_keeps_a_time_exactly_at_the_ahead_limit_and_refuses_one_ms_beyond() -> None:
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=-1, output_limits=EDGES, errors_tolerance="none"))
    t.observe_fetch(A0, 0, 0, NOW)
    with pytest.raises(RefusedTimestampError) as refused:
        t.push(A0, records(A0, [NOW + HOUR, NOW + HOUR + 1]))
    assert refused.value.offset == 1
    assert timestamps_of(drain(t, now=NOW)[0]) == [NOW + HOUR]


# -- found by the state machine (test_task_state_machine) -----------------------------------------


def test_no_commit_passes_a_dead_letter_still_waiting_for_its_batch() -> None:
    """An invalid record with no partition time to fall back on is a dead letter from the moment
    it is pushed, but only written with the next batch: a commit (a rebalance) before that batch
    must not pass it."""
    t = MergeTask(
        [A0], TaskConfig(max_task_idle_ms=-1, timestamp_invalid="partition-time", errors_tolerance="all")
    )
    t.push(A0, records(A0, [-1]))
    assert t.committable() == {}, "offset 1 would lose the dead letter"
    (batch,), _ = drain(t, now=0)
    assert [d.record.offset for d in batch.dead_letters] == [0]
    assert t.acked([batch.batch_id]) == {A0: 1}


@pytest.mark.parametrize(
    ("times", "before"),
    [
        ([0, 1, 3, 2 * HOUR], 3),  # non-decreasing: the sorted-buffer path; refused last
        ([1, 0, 2 * HOUR, 3], 2),  # out of order: the run merge
    ],
    ids=["sorted", "runs"],
)
def test_a_refused_time_under_tolerance_none_stops_before_it_and_is_never_committed(
    times: list[int], before: int
) -> None:
    """What comes before it goes out; it stays unconsumed, so no commit passes it (a restart
    meets it again) and nothing after it is taken."""
    now = 1_700_000_000_000
    t = json_task(output_limits=BrokerTimestampLimits(), errors_tolerance="none")
    t.push(A0, [json_record(i, now + ts, now) for i, ts in enumerate(times)])
    out = t.poll(now)
    assert isinstance(out, Emit)
    assert [r.offset for r in out.records] == list(range(before))
    with pytest.raises(RefusedTimestampError, match=f"offset {before}"):
        t.poll(now)
    assert t.acked([out.batch_id]) == {A0: before}, "never past the refused record"


def test_a_time_too_far_ahead_is_refused_when_fetched_and_does_not_hold_its_partition_back() -> None:
    """Left in the buffer until it goes out, a far-future time would sort after every other
    partition's records and make its own partition's next records late (test_bad_input found it)."""
    now = 1_700_000_000_000
    cfg = TaskConfig(
        max_task_idle_ms=0,
        extractor=parse_extractor("json:ts"),
        output_limits=BrokerTimestampLimits(),
        errors_tolerance="all",
    )
    t = MergeTask([A0, B0], cfg)
    a = [json_record(0, now, now), json_record(1, now + 5 * HOUR, now), json_record(2, now + 2, now)]
    b = [Record("b", 0, i, now, value=orjson.dumps({"ts": ts})) for i, ts in enumerate([now + 1, now + 3])]
    t.observe_fetch(A0, 3, 3, now)
    t.push(A0, a)
    t.observe_fetch(B0, 2, 2, now)
    t.push(B0, b)
    batches, _ = drain(t, now=now)
    assert timestamps_of(batches) == [now, now + 1, now + 2, now + 3]
    assert not any(b.late for b in batches)
    assert [d.record.offset for b in batches for d in b.dead_letters] == [1]
