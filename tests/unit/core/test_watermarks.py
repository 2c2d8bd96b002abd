"""Watermarks per partition and per task; heartbeats."""

from __future__ import annotations

from sidecar.core import LOG_APPEND_TIME, UNKNOWN, Heartbeat, MergeTask, Record, TaskConfig
from sidecar.core.watermarks import BoundedDelay, LogAppendTime, MinWindow

from .helpers import A0, B0, caught_up, drain, feed, task

EPSILON = 2000


def lat_records(timestamps: list[int], first_offset: int = 0) -> list[Record]:
    return [
        Record("a", 0, first_offset + i, ts, timestamp_type=LOG_APPEND_TIME)
        for i, ts in enumerate(timestamps)
    ]


# -- log-append time (Beam's near-perfect watermark) ------------------------------------------------


def test_log_append_time_watermark_is_the_last_record_taken_while_lagging() -> None:
    wm = LogAppendTime(EPSILON)
    wm.on_take(100, 150, now_ms=10_000)

    assert wm.compute(now_ms=10_000, caught_up_at=None) == 150


def test_log_append_time_watermark_advances_to_fetch_time_minus_epsilon_once_caught_up() -> None:
    wm = LogAppendTime(EPSILON)
    wm.on_take(100, 150, now_ms=10_000)

    assert wm.compute(now_ms=12_000, caught_up_at=11_000) == 11_000 - EPSILON


def test_near_perfect_watermark_end_to_end_through_the_task() -> None:
    t = MergeTask([A0], TaskConfig(max_task_idle_ms=0, watermark_policy="auto"), log_append_time_topics={"a"})
    t.observe_fetch(A0, high_watermark=5, position=3, now_ms=50_000)
    t.push(A0, lat_records([40_000, 40_100, 40_200]))
    drain(t, now=50_000)
    assert t.watermark == 40_200, "lag 2 on the broker: the last record taken"

    t.observe_fetch(A0, high_watermark=5, position=5, now_ms=50_100)
    t.push(A0, lat_records([40_300, 40_400], first_offset=3))
    drain(t, now=50_100)
    assert t.watermark == 50_100 - EPSILON, "empty and caught up: fetch time − epsilon"


def test_log_append_time_holds_while_records_are_still_buffered() -> None:
    t = MergeTask([A0, B0], TaskConfig(max_task_idle_ms=-1, watermark_policy="log-append-time"))
    caught_up(t, B0, now=9_000)
    t.observe_fetch(A0, high_watermark=2, position=2, now_ms=9_000)
    t.push(A0, lat_records([1_000, 1_100]))

    t.poll(9_000, max_records=1)

    assert t.watermark <= 1_100, "A0 still holds 1_100; the watermark must not pass it"


# -- bounded delay ----------------------------------------------------------------------------------


def test_bounded_delay_is_max_timestamp_minus_the_delay() -> None:
    wm = BoundedDelay(max_delay_ms=5_000)
    wm.on_take(10_000, 20_000, now_ms=30_000)

    assert wm.compute(now_ms=30_000, caught_up_at=None) == 15_000


def test_bounded_delay_never_trusts_timestamps_from_the_future() -> None:
    wm = BoundedDelay(max_delay_ms=5_000)
    wm.on_take(10_000, 99_000, now_ms=30_000)

    assert wm.compute(now_ms=30_000, caught_up_at=None) == 25_000


def test_bounded_delay_when_caught_up_and_idle_uses_the_check_time() -> None:
    wm = BoundedDelay(max_delay_ms=5_000)
    wm.on_take(1_000, 2_000, now_ms=3_000)

    assert wm.compute(now_ms=60_000, caught_up_at=50_000) == 45_000
    assert BoundedDelay(5_000).compute(now_ms=60_000, caught_up_at=50_000) == 45_000


# -- min-window ----------------------------------------------------------------------------------


def test_min_window_is_the_smallest_timestamp_taken_in_the_window() -> None:
    wm = MinWindow(window_ms=1_000)
    wm.on_take(500, 900, now_ms=10_000)
    wm.on_take(700, 800, now_ms=10_400)

    assert wm.compute(now_ms=10_500, caught_up_at=None) == 500
    assert wm.compute(now_ms=11_200, caught_up_at=None) == 700, "the take at 10_000 left the window"
    assert wm.compute(now_ms=20_000, caught_up_at=None) is None
    assert wm.compute(now_ms=20_000, caught_up_at=19_000) == 18_000


# -- auto and the task watermark ---------------------------------------------------------------------


def test_auto_picks_log_append_time_for_the_topics_the_adapter_says_the_broker_stamps() -> None:
    t = MergeTask([A0, B0], TaskConfig(max_task_idle_ms=-1), log_append_time_topics={"a"})

    assert isinstance(t._part(A0).watermark_policy, LogAppendTime), "decided at start, before any record"
    assert isinstance(t._part(B0).watermark_policy, BoundedDelay)


def test_auto_picks_bounded_delay_for_create_time_and_for_json_timestamps() -> None:
    t = task(A0, max_task_idle_ms=-1)
    feed(t, A0, [5_000])
    assert isinstance(t._part(A0).watermark_policy, BoundedDelay)

    from sidecar.config.extractor import parse_extractor

    j = MergeTask([A0], TaskConfig(extractor=parse_extractor("json:ts")), log_append_time_topics={"a"})
    assert isinstance(j._part(A0).watermark_policy, BoundedDelay), "event time is not the broker's time"


def test_task_watermark_is_unknown_until_every_partition_knows_one() -> None:
    t = task(A0, B0, max_task_idle_ms=-1, watermark_policy="bounded-delay", watermark_max_delay_ms=10)
    feed(t, A0, [1_000, 2_000], lag_after=1)
    drain(t, now=10_000)
    t.poll(10_000)
    assert t.watermark == UNKNOWN

    feed(t, B0, [1_500], lag_after=1)
    drain(t, now=10_000)
    t.poll(10_000)
    assert t.watermark == 1_490, "min(A0: 1_990, B0: 1_490)"


def test_task_watermark_never_decreases_and_is_never_negative() -> None:
    t = task(A0, max_task_idle_ms=-1, watermark_policy="min-window", watermark_window_ms=100)
    feed(t, A0, [50, 500], lag_after=1)
    drain(t, now=1_000)
    t.poll(1_000)
    assert t.watermark == 50
    feed(t, A0, [10], lag_after=1)  # a smaller minimum in the window
    drain(t, now=1_010)
    t.poll(1_010)
    assert t.watermark == 50

    u = task(A0, max_task_idle_ms=-1, watermark_policy="bounded-delay", watermark_max_delay_ms=5_000)
    feed(u, A0, [3])
    drain(u, now=10)
    u.poll(10)
    assert u.watermark == 0


# -- heartbeats ---------------------------------------------------------------------------------------


def test_a_quiet_task_writes_a_heartbeat_with_its_watermark() -> None:
    t = task(A0, max_task_idle_ms=0, watermark_policy="bounded-delay", watermark_max_delay_ms=100)
    feed(t, A0, [5_000])  # fetched at 0
    drain(t, now=10_000)  # the last output went out at 10_000
    caught_up(t, A0, now=10_500)  # a later fetch still shows lag 0

    assert not isinstance(t.poll(10_999), Heartbeat)
    beat = t.poll(11_000)

    assert beat == Heartbeat(watermark=10_500 - 100), "caught up and idle: check time − max delay"
    assert not isinstance(t.poll(11_500), Heartbeat), "the next one is due a full interval later"
    assert isinstance(t.poll(12_000), Heartbeat)


def test_no_heartbeat_before_the_watermark_is_known() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [5_000])  # B0 never fetched: task watermark unknown

    assert not isinstance(t.poll(60_000), Heartbeat)


def test_heartbeats_off_when_the_interval_is_zero() -> None:
    t = task(A0, max_task_idle_ms=0, watermark_heartbeat_ms=0)
    caught_up(t, A0)

    assert not isinstance(t.poll(10**9), Heartbeat)
