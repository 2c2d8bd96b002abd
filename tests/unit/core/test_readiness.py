"""KIP-353 / KIP-695: when a task may emit, one test per rule."""

from __future__ import annotations

from sidecar.core import Emit, NeedFetch, WaitUntil
from sidecar.core.readiness import IDLE_FOREVER
from sidecar.core.task import Idle

from .helpers import A0, B0, C0, caught_up, drain, emitted, enforced_flags, feed, task


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


def test_empty_partition_with_unknown_lag_blocks() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 2])

    out = t.poll(now_ms=1_000_000)

    assert isinstance(out, NeedFetch)
    assert out.partitions == (B0,)


def test_empty_partition_with_lag_on_the_broker_blocks_even_past_any_idle_time() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    t.observe_fetch(B0, high_watermark=5, position=0, now_ms=0)  # 5 records on the broker
    feed(t, A0, [1, 2])

    out = t.poll(now_ms=60_000)

    assert isinstance(out, NeedFetch)
    assert out.partitions == (B0,)
    assert t.enforced_total == 0


def test_idle_zero_proceeds_once_fetch_shows_lag_zero() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 2])
    assert isinstance(t.poll(0), NeedFetch)

    caught_up(t, B0, now=5)
    batches, _ = drain(t, now=5)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2]
    assert enforced_flags(batches) == [True, True], "emitted while B0 was empty: enforced processing"


def test_idle_n_waits_n_ms_after_lag_zero_then_proceeds_enforced() -> None:
    t = task(A0, B0, max_task_idle_ms=100)
    feed(t, A0, [1, 2])
    caught_up(t, B0, now=1_000)

    assert t.poll(1_000) == WaitUntil(1_100)
    assert t.poll(1_099) == WaitUntil(1_100)
    batches, _ = drain(t, now=1_100)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2]
    assert enforced_flags(batches) == [True, True]
    assert t.enforced_total == 2


def test_idle_deadline_is_kept_until_data_arrives() -> None:
    t = task(A0, B0, max_task_idle_ms=100)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(100)

    caught_up(t, B0, now=50)  # another empty fetch does not restart the clock
    assert t.poll(50) == WaitUntil(100)
    batches, _ = drain(t, now=100)

    assert [ts for _, _, ts in emitted(batches)] == [1]


def test_data_arriving_on_the_idle_partition_clears_its_deadline() -> None:
    t = task(A0, B0, max_task_idle_ms=100)
    feed(t, A0, [1, 5])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(100)

    feed(t, B0, [3], now=40)  # B0 delivers before the deadline: nothing is enforced
    batches, out = drain(t, now=40)
    assert [ts for _, _, ts in emitted(batches)] == [1, 3]
    assert enforced_flags(batches) == [False, False]
    assert out == WaitUntil(140), "B0 is empty again: a fresh deadline from now"


def test_lag_on_the_broker_clears_the_idle_deadline() -> None:
    t = task(A0, B0, max_task_idle_ms=100)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(100)

    t.observe_fetch(B0, high_watermark=3, position=0, now_ms=50)
    assert isinstance(t.poll(150), NeedFetch), "data is on the broker: fetch it, do not enforce"
    caught_up_again = t._part(B0)
    assert caught_up_again.deadline is None


def test_idle_max_waits_forever() -> None:
    t = task(A0, B0, max_task_idle_ms=IDLE_FOREVER)
    feed(t, A0, [1])
    caught_up(t, B0)

    out = t.poll(now_ms=10**12)

    assert not isinstance(out, Emit)
    assert t.snapshot(10**12)["blocked_by"][0]["reason"].startswith("idling: caught up")


def test_idle_values_at_or_above_long_max_wait_forever() -> None:
    t = task(A0, B0, max_task_idle_ms=2**64)
    feed(t, A0, [1])
    caught_up(t, B0)

    assert not isinstance(t.poll(now_ms=2**62), Emit)


def test_nothing_is_enforced_while_every_partition_has_data() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 4], lag_after=10)
    feed(t, B0, [2, 3], lag_after=10)

    batches, out = drain(t, now=0)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2, 3]
    assert enforced_flags(batches) == [False, False, False]
    assert out == NeedFetch((B0,), wake_at_ms=1000), "B0 ran dry with data on the broker"


def test_a_partition_running_dry_mid_batch_switches_enforcement_on_for_the_rest() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [1, 4, 5])
    feed(t, B0, [2])  # lag 0 after this fetch

    batches, _ = drain(t, now=0)

    assert [ts for _, _, ts in emitted(batches)] == [1, 2, 4, 5]
    assert enforced_flags(batches) == [False, False, True, True]


def test_paused_partition_blocks_and_its_idle_clock_is_frozen() -> None:
    t = task(A0, B0, max_task_idle_ms=100, buffered_records_per_partition=2, watermark_heartbeat_ms=0)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(100)

    p = t._part(B0)
    from sidecar.core.readiness import pause, resume

    pause(p, now_ms=30)  # 70 ms left on the clock
    assert isinstance(t.poll(500), NeedFetch), "a paused partition's lag is stale: it blocks"
    resume(p, now_ms=1_000)
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


def test_wait_until_reports_the_earliest_deadline() -> None:
    t = task(A0, B0, C0, max_task_idle_ms=100)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert isinstance(t.poll(0), NeedFetch), "C0's lag is still unknown"
    caught_up(t, C0, now=30)

    assert t.poll(30) == WaitUntil(100), "B0's deadline (100) comes before C0's (130)"


def test_need_fetch_names_every_blocking_partition() -> None:
    t = task(A0, B0, C0, max_task_idle_ms=0)
    feed(t, A0, [1])
    t.observe_fetch(C0, 9, 2, 0)

    out = t.poll(0)

    assert isinstance(out, NeedFetch)
    assert set(out.partitions) == {B0, C0}


def test_nothing_buffered_is_idle() -> None:
    t = task(A0, B0, max_task_idle_ms=0, watermark_heartbeat_ms=0)
    caught_up(t, A0)
    caught_up(t, B0)

    assert t.poll(0) == Idle(None)


def test_no_idle_clock_starts_while_the_task_holds_nothing_to_emit() -> None:
    t = task(A0, B0, max_task_idle_ms=100, watermark_heartbeat_ms=0)
    caught_up(t, A0, now=0)
    caught_up(t, B0, now=0)
    t.poll(0)
    t.poll(5_000)  # a long quiet spell with nothing buffered anywhere

    feed(t, A0, [1], now=5_000)

    assert t.poll(5_000) == WaitUntil(5_100), "B0 is waited for from the moment A0 has data"


def test_a_deadline_passed_while_holding_data_is_kept_until_the_partition_delivers() -> None:
    t = task(A0, B0, max_task_idle_ms=100, watermark_heartbeat_ms=0)
    feed(t, A0, [1])
    caught_up(t, B0, now=0)
    assert t.poll(0) == WaitUntil(100)
    first, _ = drain(t, now=100)  # B0 declared idle after 100 ms
    assert [ts for _, _, ts in emitted(first)] == [1]

    feed(t, A0, [2], now=5_000)
    batches, _ = drain(t, now=5_000)

    assert [ts for _, _, ts in emitted(batches)] == [2], "no new wait: B0 is still known quiet"
    assert enforced_flags(batches) == [True]
