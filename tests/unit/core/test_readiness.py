"""The idle rule (KIP-353 / KIP-695, counted from the last arrival): one test per rule.

The first two tests are the rule as tables — the verdict, and the quiet clock's events — so that
another implementation (a C merge kernel) can be held to the same rows. The rest are the rules
through a task, then the topologies that break rules of this kind: an empty partition, a quiet
hour, a backlog, a replay of history, a rebalance in the middle of a batch.
"""

from __future__ import annotations

import pytest

from sidecar.core import Emit, MergeTask, NeedFetch, TaskConfig, WaitUntil
from sidecar.core.merge import PartitionState
from sidecar.core.readiness import (
    IDLE_FOREVER,
    Verdict,
    arrived,
    fetched,
    judge,
    passes_at,
    pause,
    quiet_for,
    resume,
    task_empty,
    task_holds,
)
from sidecar.core.records import TopicPartition
from sidecar.core.task import Idle
from sidecar.core.watermarks import make_policy

from .helpers import A0, A1, B0, C0, caught_up, drain, emitted, enforced_flags, feed, task

IDLE = 100


def partition(lag: int | None, counted_from: int | None, paused: bool = False) -> PartitionState:
    """A partition of a task that holds records (its clock runs unless it is paused)."""
    p = PartitionState(TopicPartition("t", 0), 0, 0, make_policy("bounded-delay", False, 0, 0, 0))
    p.lag, p.quiet_since, p.counted_from = lag, counted_from, counted_from
    p.stopped_at = None
    if paused:
        pause(p, 0)
    return p


# -- the rule, as tables --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lag", "counted_from", "paused", "idle", "now", "verdict"),
    [
        (None, None, False, IDLE, 10**9, Verdict.LAG_UNKNOWN),  # never fetched: however long
        (5, None, False, IDLE, 10**9, Verdict.LAG_ON_BROKER),  # data on the broker: however long
        (0, 1_000, False, IDLE, 1_000, Verdict.IDLING),  # quiet since its last arrival
        (0, 1_000, False, IDLE, 1_099, Verdict.IDLING),
        (0, 1_000, False, IDLE, 1_100, Verdict.PASSED),  # quiet for the whole idle
        (0, 1_000, False, 0, 1_000, Verdict.PASSED),  # idle 0: caught up is enough
        (0, 0, False, IDLE_FOREVER, 10**18, Verdict.IDLING),  # max: waits for data
        (0, 0, False, 2**64, 10**18, Verdict.IDLING),  # above max: the same
        (0, 0, True, IDLE, 10**9, Verdict.PAUSED),  # paused: its lag is stale
    ],
)
def test_the_verdict_on_an_empty_partition(
    lag: int | None, counted_from: int | None, paused: bool, idle: int, now: int, verdict: Verdict
) -> None:
    assert judge(partition(lag, counted_from, paused), now, idle) is verdict


def test_the_quiet_clock() -> None:
    p = PartitionState(TopicPartition("t", 0), 0, 0, make_policy("bounded-delay", False, 0, 0, 0))
    steps = [  # (event, time, quiet_since, counted quiet after it)
        ("fetch lag 0", 5, 5, 0),  # caught up, but the task holds nothing: the clock stands still
        ("task holds records", 10, 5, 0),  # from here it counts
        ("fetch lag 3", 12, None, None),  # behind: not quiet
        ("arrival", 12, None, None),  # records, still behind
        ("fetch lag 0", 20, 20, 0),  # caught up with nothing new: quiet from this fetch
        ("fetch lag 0", 30, 20, 10),  # an empty fetch does not restart the spell
        ("arrival", 40, 40, 0),  # records: quiet from their arrival
        ("pause", 50, 40, 10),  # 10 ms quiet when paused...
        ("resume", 90, 40, 10),  # ...the clock stood still for the 40 ms of the pause
        ("task holds nothing", 95, 40, 15),  # nothing held back: it stops again...
        ("arrival", 120, 120, 0),  # ...records while stopped begin the spell, counted from 0
        ("task holds records", 200, 120, 0),
        ("pause", 230, 120, 30),
        ("task holds nothing", 240, 120, 30),
        ("task holds records", 250, 120, 30),  # still paused: still stopped
        ("resume", 300, 120, 30),
        ("fetch lag 2", 310, None, None),  # data on the broker: the spell ends
        ("fetch lag 0", 320, 320, 0),  # caught up, though nothing came (an aborted transaction)
    ]
    for event, now, since, counted in steps:
        if event.startswith("fetch lag"):
            fetched(p, int(event.split()[-1]), now)
        elif event == "arrival":
            arrived(p, now)
        elif event == "pause":
            pause(p, now)
        elif event == "resume":
            resume(p, now, task_holds_records=True)
        elif event == "task holds records":
            task_holds([p], now)
        else:
            task_empty([p], now)
        assert (p.quiet_since, quiet_for(p, now)) == (since, counted), f"after {event} at {now}"


def test_passes_at_is_when_the_counted_quiet_reaches_the_idle_and_none_while_the_clock_stands_still() -> None:
    p = partition(0, 1_000)
    assert (quiet_for(p, 1_040), passes_at(p, IDLE)) == (40, 1_100)
    pause(p, 1_040)
    assert (quiet_for(p, 9_000), passes_at(p, IDLE)) == (40, None)
    resume(p, 9_000, task_holds_records=True)
    assert (quiet_for(p, 9_000), passes_at(p, IDLE)) == (40, 9_060)
    assert p.quiet_since == 1_000, "the spell still began at the arrival"
    assert passes_at(p, IDLE_FOREVER) is None
    assert passes_at(partition(4, None), IDLE) is None


# -- the settings -----------------------------------------------------------------------------------


def test_idle_disabled_is_always_ready_when_any_partition_has_data() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [1, 2])  # B0 never fetched: its lag is unknown

    batches, _ = drain(t, now=0)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2]


def test_idle_disabled_never_marks_enforced() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    caught_up(t, B0)
    feed(t, A0, [1, 2, 3])

    batches, _ = drain(t, now=10_000)

    assert enforced_flags(batches) == [False, False, False]
    assert t.enforced_total == 0


def test_idle_zero_proceeds_once_a_fetch_shows_lag_zero() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 2])
    assert isinstance(t.poll(0), NeedFetch)

    caught_up(t, B0, now=5)
    batches, _ = drain(t, now=5)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2]
    assert enforced_flags(batches) == [True, True], "emitted while B0 was empty: enforced processing"


def test_idle_max_waits_forever() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE_FOREVER)
    feed(t, A0, [1])
    caught_up(t, B0)

    out = t.poll(now_ms=10**12)

    assert not isinstance(out, Emit)
    assert t.snapshot(10**12)["blocked_by"][0]["reason"] == (
        "idling: caught up, and max.task.idle.ms=max waits for data forever"
    )


def test_idle_values_at_or_above_long_max_wait_forever() -> None:
    t = task(A0, B0, max_task_idle_ms=2**64)
    feed(t, A0, [1])
    caught_up(t, B0)

    assert not isinstance(t.poll(now_ms=2**62), Emit)


# -- lag ------------------------------------------------------------------------------------------


def test_an_empty_partition_with_unknown_lag_blocks() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 2])

    out = t.poll(now_ms=1_000_000)

    assert isinstance(out, NeedFetch)
    assert out.partitions == (B0,)


def test_lag_on_the_broker_never_passes_however_long_the_partition_was_quiet() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    caught_up(t, B0, now=0)  # quiet from 0...
    t.observe_fetch(B0, high_watermark=5, position=0, now_ms=3_600_000)  # ...then 5 records appear
    feed(t, A0, [1, 2], now=3_600_000)

    out = t.poll(now_ms=7_200_000)

    assert isinstance(out, NeedFetch)
    assert out.partitions == (B0,)
    assert t.enforced_total == 0
    assert t.snapshot(7_200_000)["blocked_by"][0]["reason"] == "lag 5 on the broker, not fetched yet"


def test_a_fetch_showing_lag_ends_the_quiet_spell_and_the_next_caught_up_fetch_starts_one() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    t.observe_fetch(B0, high_watermark=3, position=0, now_ms=50)
    t.observe_fetch(B0, high_watermark=3, position=3, now_ms=80)  # the records never came (aborted)

    assert t.poll(80) == WaitUntil(80 + IDLE), "quiet from the caught-up fetch, not from 0"


def test_need_fetch_names_every_blocking_partition() -> None:
    t = task(A0, B0, C0, max_task_idle_ms=0)
    feed(t, A0, [1])
    t.observe_fetch(C0, 9, 2, 0)

    out = t.poll(0)

    assert isinstance(out, NeedFetch)
    assert set(out.partitions) == {B0, C0}


# -- quiet since the last arrival ------------------------------------------------------------------


def test_a_partition_is_waited_for_until_its_idle_has_passed_since_its_last_arrival() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    feed(t, B0, [1], now=1_000)  # B0's last arrival
    feed(t, A0, [2, 3], now=1_030)

    batches, out = drain(t, now=1_030)
    assert emitted(batches) == [("b", 0, 1)]
    assert out == WaitUntil(1_100), "from B0's arrival at 1,000, not from when it ran dry at 1,030"

    batches, _ = drain(t, now=1_100)
    assert [ts for _, _, ts in emitted(batches)] == [2, 3]
    assert enforced_flags(batches) == [True, True]


def test_a_partition_quiet_for_its_idle_when_it_runs_dry_passes_at_once() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    feed(t, A0, [1, 4, 5], now=0)
    feed(t, B0, [2, 3], now=0)

    batches, out = drain(t, now=500)  # the task gets to them late (a slow start, a long batch)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2, 3, 4, 5]
    assert enforced_flags(batches) == [False, False, False, True, True]
    assert isinstance(out, Idle)


def test_data_arriving_mid_wait_restarts_the_quiet_spell() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    feed(t, A0, [1, 5])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(IDLE)

    feed(t, B0, [3], now=40)  # B0 delivers before its idle ran out: nothing is enforced
    batches, out = drain(t, now=40)

    assert [ts for _, _, ts in emitted(batches)] == [1, 3]
    assert enforced_flags(batches) == [False, False]
    assert out == WaitUntil(40 + IDLE), "B0 is empty again, quiet since its arrival at 40"


def test_an_empty_fetch_does_not_restart_the_quiet_spell() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(IDLE)

    caught_up(t, B0, now=50)
    assert t.poll(50) == WaitUntil(IDLE)


def test_a_partition_that_passed_is_not_waited_for_again_until_it_delivers() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    drain(t, now=IDLE)

    feed(t, A0, [2], now=5_000)
    batches, _ = drain(t, now=5_000)

    assert [ts for _, _, ts in emitted(batches)] == [2], "no new wait: B0 is still quiet"
    assert enforced_flags(batches) == [True]


def test_the_earliest_passing_time_is_what_the_task_waits_for() -> None:
    t = task(A0, B0, C0, max_task_idle_ms=IDLE)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert isinstance(t.poll(0), NeedFetch), "C0's lag is still unknown"
    caught_up(t, C0, now=30)

    assert t.poll(30) == WaitUntil(IDLE), "B0 passes at 100, before C0 at 130"


def test_a_partition_running_dry_mid_batch_switches_enforcement_on_for_the_rest() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 4, 5])
    feed(t, B0, [2])  # lag 0 after this fetch

    batches, _ = drain(t, now=0)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2, 4, 5]
    assert enforced_flags(batches) == [False, False, True, True]


def test_nothing_is_enforced_while_every_partition_has_data() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 4], lag_after=10)
    feed(t, B0, [2, 3], lag_after=10)

    batches, out = drain(t, now=0)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2, 3]
    assert enforced_flags(batches) == [False, False, False]
    assert out == NeedFetch((B0,), wake_at_ms=1000), "B0 ran dry with data on the broker"


def test_nothing_buffered_is_idle() -> None:
    t = task(A0, B0, max_task_idle_ms=0, watermark_heartbeat_ms=0)
    caught_up(t, A0)
    caught_up(t, B0)

    assert t.poll(0) == Idle(None)


def test_status_shows_since_when_each_partition_is_quiet_and_when_it_passes() -> None:
    t = task(A0, B0, C0, max_task_idle_ms=IDLE)
    feed(t, A0, [1, 2], now=1_000)
    caught_up(t, B0, now=400)
    t.observe_fetch(C0, high_watermark=3, position=0, now_ms=1_000)

    rows = {(r["topic"], r["partition"]): r for r in t.snapshot(1_050)["partitions"]}

    assert (rows["a", 0]["quiet_since"], rows["a", 0]["passes_at"]) == (1_000, 1_100)
    assert (rows["b", 0]["quiet_since"], rows["b", 0]["passes_at"]) == (400, 500)
    assert (rows["c", 0]["quiet_since"], rows["c", 0]["passes_at"]) == (None, None), "behind"
    assert t.snapshot(1_050)["blocked_by"] == [
        {"topic": "c", "partition": 0, "reason": "lag 3 on the broker, not fetched yet"}
    ]


# -- pauses -----------------------------------------------------------------------------------------


def test_a_paused_partition_blocks_and_its_quiet_clock_stays_frozen() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(IDLE)

    pause(t._part(B0), now_ms=30)  # quiet for 30 ms: 70 left
    assert isinstance(t.poll(500), NeedFetch), "a paused partition's lag is stale: it blocks"
    assert t.snapshot(500)["blocked_by"][0]["reason"].startswith("paused")
    resume(t._part(B0), now_ms=1_000, task_holds_records=True)
    assert t.poll(1_000) == WaitUntil(1_070)


def test_pause_hint_pauses_full_partitions_and_resumes_them_below_half() -> None:
    t = task(A0, B0, max_task_idle_ms=-1, buffered_records_per_partition=4)
    feed(t, A0, range(10, 15))
    feed(t, B0, [1])

    hint = t.pause_hint(0)
    assert hint.pause == (A0,)
    assert hint.resume == ()
    assert not t.pause_hint(0), "already paused: no repeated hint"

    drain(t, now=0, max_records=4)  # B0's one record, then A0 down to 2 buffered
    _batches, _ = drain(t, now=0, max_records=1)  # A0 down to 1 buffered (< half of 4)
    assert t.pause_hint(1).resume == (A0,)


# -- the topologies that break such rules ---------------------------------------------------------


def test_a_backlog_drains_in_one_idle_not_one_per_partition() -> None:
    """Kafka Streams counts each idle from the moment a partition's buffer runs dry: a backlog's
    partitions run dry one after another, so N partitions wait (N - 1) idles. Here the clock has
    run since the backlog's fetch: one wait, and the rest passes at once."""
    parts = [TopicPartition("t", i) for i in range(8)]
    t = MergeTask(parts, TaskConfig(max_task_idle_ms=IDLE, watermark_heartbeat_ms=0))
    for i, tp in enumerate(parts):  # record j of partition i has time 8j + i: they interleave
        feed(t, tp, [8 * j + i for j in range(50)], now=0)

    first, out = drain(t, now=0)
    assert [ts for _, _, ts in emitted(first)] == list(range(393)), "up to the first to run dry"
    assert out == WaitUntil(IDLE)

    rest, out = drain(t, now=IDLE)
    assert [ts for _, _, ts in emitted(rest)] == list(range(393, 400)), "the 7 others pass at once"
    assert isinstance(out, Idle)


def test_an_empty_partition_costs_one_idle_from_its_first_fetch_then_never_again() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    caught_up(t, B0, now=0)  # never written to
    feed(t, A0, [1], now=0)
    assert t.poll(0) == WaitUntil(IDLE)
    assert enforced_flags(drain(t, now=IDLE)[0]) == [True]

    for now in (IDLE + 1, 10_000, 3_600_000):
        feed(t, A0, [now], now=now)
        assert enforced_flags(drain(t, now=now)[0]) == [True], "not waited for again"


def test_inputs_quiet_before_the_task_held_anything_are_waited_for_once_it_does() -> None:
    """A sidecar that has just started, or a quiet night: nothing was held back, so nothing was
    waited for. When the first record comes, the quiet partitions are waited for their idle from
    then — their producers may be a moment behind (the demo's lagging partition)."""
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    caught_up(t, A0, now=0)
    caught_up(t, B0, now=0)
    for now in range(0, 3_600_000, 60_000):
        assert isinstance(t.poll(now), Idle)

    feed(t, A0, [1], now=3_600_000)

    assert t.poll(3_600_000) == WaitUntil(3_600_000 + IDLE)
    assert t.snapshot(3_600_000)["blocked_by"][0]["reason"] == (
        f"idling until {3_600_000 + IDLE} (quiet since 0; max.task.idle.ms={IDLE})"
    )


def test_the_quiet_clock_stops_when_the_task_holds_nothing_and_runs_again_when_it_does() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    feed(t, A0, [1], now=0)
    feed(t, B0, [2], now=150)
    drain(t, now=160)  # A0 passed (quiet 160); B0's record went last: the task holds nothing
    assert t.snapshot(160)["partitions"][1]["passes_at"] is None, "nothing waits: no passing time"

    feed(t, A0, [3], now=3_600_000)  # B0 had been quiet 10 ms while the task held records

    assert t.poll(3_600_000) == WaitUntil(3_600_000 + IDLE - 10)


def test_a_partition_quiet_for_its_idle_while_the_task_was_busy_is_not_waited_for_after_a_pause() -> None:
    """The trade the rule makes: B0's buffer took the idle to drain after its last arrival, so
    it has been quiet for the idle; after the quiet hour it is not waited for, and had its
    producer woken at the same moment as A0's, its record would come out late. (Counted from
    when its buffer ran dry, at the end of the drain, it would have been waited for.)"""
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    feed(t, A0, [1], now=0)
    feed(t, B0, [2], now=0)
    drain(t, now=IDLE)
    for now in range(1_000, 3_600_000, 60_000):  # an hour of empty fetches and polls
        caught_up(t, A0, now=now)
        caught_up(t, B0, now=now)
        assert isinstance(t.poll(now), Idle)

    feed(t, A0, [3_600_000], now=3_600_000)
    batches, _ = drain(t, now=3_600_000)

    assert enforced_flags(batches) == [True]
    feed(t, B0, [3_599_990], now=3_600_010)
    late, _ = drain(t, now=3_600_010 + IDLE)  # A0 is quiet since its arrival: waited for
    assert late[0].late == [0]


def test_a_replay_of_history_is_never_enforced_however_slow_its_fetches() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    feed(t, A0, range(0, 2_000, 10), now=0)
    out = []
    for k in range(9):  # B0's history comes 10 records a fetch, 500 ms apart, lag > 0 till the end
        now = 500 * k
        feed(t, B0, range(100 * k + 5, 100 * k + 105, 10), now=now, lag_after=100 - 10 * (k + 1))
        batches, wait = drain(t, now=now + 499)
        out += batches
        assert wait == NeedFetch((B0,), wake_at_ms=None)

    assert t.enforced_total == 0
    stamps = [ts for _, _, ts in emitted(out)]
    assert stamps == sorted(stamps)
    assert len(stamps) == 2 * 90


def test_a_rebalance_mid_batch_waits_one_idle_from_the_new_tasks_fetches() -> None:
    """A task taken away while a batch was in flight: the new task starts from the committed
    offsets with every lag unknown; its clocks start from its own fetches, so the re-fetched
    backlog drains after one idle, however many partitions."""
    old = task(A0, A1, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    for tp in (A0, A1, B0):
        feed(old, tp, range(tp.partition, 30, 3), now=0)
    assert isinstance(old.poll(0, max_records=5), Emit)  # in flight, never acknowledged: lost
    assert old.committable() == {}

    new = task(A0, A1, B0, max_task_idle_ms=IDLE, watermark_heartbeat_ms=0)
    assert isinstance(new.poll(5_000), Idle)
    for tp in (A0, A1, B0):
        feed(new, tp, range(tp.partition, 30, 3), now=5_000)
    _, out = drain(new, now=5_000)
    assert out == WaitUntil(5_000 + IDLE)
    drain(new, now=5_000 + IDLE)
    assert new.records_out == 30
