"""``max.task.idle.ms=auto``: the learner alone, one test per rule of ``idle_learning.py``; then
``LearntIdle``, which tells it which arrivals are gaps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.core.idle_learning import CHEAP_PERCENT, WARM_UP, WINDOW, IdleLearner
from sidecar.core.idle_strategy import LearntIdle

from .helpers import A0, B0, records, task

BUDGET = 1000


def learn(learner: IdleLearner, gaps: list[int], late: bool = True, i: int = 0) -> None:
    """Quiet spells of the given lengths, each ended by an arrival."""
    for gap in gaps:
        learner.learn(i, gap, would_be_late=late)


def feed(learner: IdleLearner, gaps: list[tuple[int, bool]]) -> None:
    """Quiet spells of the given lengths, each ended by an arrival late or not."""
    for gap, late in gaps:
        learner.learn(0, gap, late)


def test_a_partition_with_no_history_is_waited_for_the_budget() -> None:
    learner = IdleLearner(1, BUDGET)

    assert learner.idle_ms(0) == BUDGET
    learn(learner, [200] * (WARM_UP - 1))
    assert learner.idle_ms(0) == BUDGET  # still warming up


def test_a_steady_200ms_gap_gives_an_idle_near_that_gap() -> None:
    learner = IdleLearner(1, BUDGET)

    learn(learner, [195, 200, 205] * 10)

    assert 195 <= learner.idle_ms(0) <= 205


def test_the_idle_covers_all_but_the_longest_five_percent() -> None:
    learner = IdleLearner(1, BUDGET)

    learn(learner, [100] * 61 + [900] * 3)  # 3 of 64 outliers: within 5 %
    assert learner.idle_ms(0) == 100

    learn(learner, [900])  # a fourth (the oldest 100 leaves the window): more than 5 %
    assert learner.idle_ms(0) == 900

    learn(learner, [100] * WINDOW)  # the outliers left the window
    assert learner.idle_ms(0) == 100


def test_a_rare_short_gap_is_covered_a_rare_long_one_is_not() -> None:
    """Rare gaps that needed a wait: one of 40 ms costs little to cover (within a tenth of the
    budget), so it is covered however rare; two of 600 ms (3 % of the window) stay uncovered."""
    learner = IdleLearner(1, BUDGET)

    learn(learner, [10] * 61, late=False)
    learn(learner, [40])
    learn(learner, [600, 600])

    assert learner.idle_ms(0) == 40


def test_gaps_whose_records_would_have_been_on_time_need_no_wait() -> None:
    learner = IdleLearner(1, BUDGET)

    learn(learner, [200] * 40, late=False)

    assert learner.idle_ms(0) == 0


def test_a_bursty_producer_is_waited_for_within_a_burst_not_between_bursts() -> None:
    learner = IdleLearner(1, BUDGET)

    burst = [20] * 29 + [600]  # 30 records 20 ms apart, then a pause: 3 % of the gaps
    learn(learner, burst * 4)

    assert 20 <= learner.idle_ms(0) < 600


def test_the_idle_never_exceeds_the_budget_and_skips_gaps_beyond_it() -> None:
    learner = IdleLearner(1, BUDGET)

    learn(learner, [300] * 50 + [5000] * 14)  # the 95th percentile is 5000 > budget
    assert learner.idle_ms(0) == 300  # waiting the whole budget would cover no more arrivals

    learn(learner, [3_600_000] * WINDOW)  # one record an hour
    assert learner.idle_ms(0) == 0


def test_partitions_learn_apart() -> None:
    learner = IdleLearner(2, BUDGET)

    learn(learner, [50] * 20, i=0)
    learn(learner, [400] * 20, i=1)

    assert (learner.idle_ms(0), learner.idle_ms(1)) == (50, 400)


def test_snapshot_shows_the_idle_and_the_gaps_behind_it() -> None:
    learner = IdleLearner(1, BUDGET)
    learn(learner, [100, 200] * 5)

    snap = learner.snapshot(0)

    assert snap == {
        "idle_ms": 200,
        "learnt": True,
        "gaps_seen": 10,
        "late_gaps_seen": 10,
        "recent_gaps_ms": [100, 200, 100, 200, 100, 200, 100, 200],  # the last 8, oldest first
        "window_gaps": 10,
        "window_max_gap_ms": 200,
    }


def test_a_budget_below_one_ms_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max\.task\.idle\.budget\.ms .* got 0"):
        IdleLearner(1, 0)


gap_lists = st.lists(st.tuples(st.integers(0, 10_000), st.booleans()), max_size=3 * WINDOW)


@given(gaps=gap_lists, budget=st.integers(1, 5000))
def test_the_learnt_idle_is_never_above_the_budget_and_is_a_wait_some_gap_needed(
    gaps: list[tuple[int, bool]], budget: int
) -> None:
    learner = IdleLearner(1, budget)
    for n, (gap, late) in enumerate(gaps, start=1):
        learner.learn(0, gap, late)
        window = [g if lt else 0 for g, lt in gaps[:n]][-WINDOW:]
        idle = learner.idle_ms(0)
        assert 0 <= idle <= budget
        assert idle == budget or idle in window or idle == 0


@given(gaps=gap_lists)
def test_at_most_five_percent_of_the_window_needed_more_than_the_idle(gaps: list[tuple[int, bool]]) -> None:
    learner = IdleLearner(1, 10_000)  # a budget no gap exceeds: the percentile alone
    feed(learner, gaps)
    window = [g if lt else 0 for g, lt in gaps][-WINDOW:]
    if len(window) >= WARM_UP:
        uncovered = sum(1 for needed in window if needed > learner.idle_ms(0))
        assert uncovered * 100 <= 5 * len(window)


@given(gaps=gap_lists, budget=st.integers(1, 5000))
def test_every_needed_wait_within_a_tenth_of_the_budget_is_covered(
    gaps: list[tuple[int, bool]], budget: int
) -> None:
    learner = IdleLearner(1, budget)
    feed(learner, gaps)
    window = [g if lt else 0 for g, lt in gaps][-WINDOW:]
    if len(window) >= WARM_UP:
        cheap = [needed for needed in window if needed <= budget * CHEAP_PERCENT // 100]
        assert all(needed <= learner.idle_ms(0) for needed in cheap)


# -- LearntIdle: which arrivals are gaps ------------------------------------------------------------


def arrive(strategy: LearntIdle, quiet_ms: int | None, ts: int = 5, stream_time: int = 10) -> None:
    """Records (the first stamped ``ts``) reached the empty partition ``a``-0 after ``quiet_ms``."""
    t = task(A0, B0, max_task_idle_ms=-1)
    p = t._part(A0)
    p.queue.append(records(A0, [ts]), [ts])
    strategy.arrival(p, quiet_ms, stream_time)


def gaps_seen(strategy: LearntIdle) -> int:
    seen: int = strategy.learner.snapshot(0)["gaps_seen"]
    return seen


def test_an_arrival_after_a_quiet_spell_is_a_gap_late_if_below_the_stream_time() -> None:
    strategy = LearntIdle(2, BUDGET)

    arrive(strategy, 200, ts=5, stream_time=10)
    arrive(strategy, 300, ts=50, stream_time=10)

    assert strategy.learner.snapshot(0)["recent_gaps_ms"] == [200, 300]
    assert strategy.learner.snapshot(0)["late_gaps_seen"] == 1


def test_an_arrival_with_no_quiet_spell_or_one_begun_by_its_own_fetch_is_no_gap() -> None:
    strategy = LearntIdle(2, BUDGET)

    arrive(strategy, None)  # behind (lag > 0) until these records came: the fetch, not the producer
    arrive(strategy, 0)  # caught up by the very fetch that brought them

    assert gaps_seen(strategy) == 0


def test_a_hold_while_empty_makes_the_next_arrival_teach_nothing() -> None:
    strategy = LearntIdle(2, BUDGET)
    t = task(A0, B0, max_task_idle_ms=-1)

    strategy.held(t._parts)  # both empty: their spells span the hold
    arrive(strategy, 60_000)  # the backlog of the hold
    assert gaps_seen(strategy) == 0

    arrive(strategy, 200)
    assert gaps_seen(strategy) == 1, "the arrival after that one counts again"
