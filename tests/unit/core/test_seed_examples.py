"""The examples the design is built on, replayed through a simulated broker and consumer.

* KIP-353: a fast partition (10K records/s) beside a slow one (1 record/s).
* KIP-695: UC1 (never wait), UC2 (wait for data already on the broker, not for producers),
  UC3 (also wait a bounded time for producers).
* Beam's KafkaIO: the near-perfect watermark for log-append time.
"""

from __future__ import annotations

import itertools

from sidecar.core import LOG_APPEND_TIME, MergeTask, Record, TaskConfig
from sidecar.core.readiness import IDLE_FOREVER

from .helpers import A0, B0, Output, SimulatedConsumer, appended, drain

FETCH_EVERY = 10  # ms between fetches
DURATION = 3_000
SLOW_PRODUCER_DELAY = 300  # the slow partition's records reach the broker 300 ms after their event time


def kip353_logs() -> dict:  # type: ignore[type-arg]
    fast_times = [i // 10 for i in range(DURATION * 10)]  # 10 records per ms
    slow_stamps = [500, 1_500, 2_500]
    return {
        A0: appended(A0, fast_times),
        B0: appended(B0, [t + SLOW_PRODUCER_DELAY for t in slow_stamps], slow_stamps),
    }


def run(idle: int, logs: dict, max_fetch: int = 100_000, until: int = DURATION) -> list[Output]:  # type: ignore[type-arg]
    task = MergeTask([A0, B0], TaskConfig(max_task_idle_ms=idle, watermark_heartbeat_ms=0))
    return SimulatedConsumer(task, logs, max_fetch=max_fetch).run(until=until, fetch_every=FETCH_EVERY)


def fast(out: list[Output]) -> list[Output]:
    return [o for o in out if o.record.topic == "a"]


def slow(out: list[Output]) -> list[Output]:
    return [o for o in out if o.record.topic == "b"]


def is_sorted(out: list[Output]) -> bool:
    return all(x.timestamp <= y.timestamp for x, y in itertools.pairwise(out))


def test_kip353_idle_disabled_lets_the_fast_partition_run_ahead_and_the_slow_one_comes_late() -> None:
    out = run(-1, kip353_logs())

    assert max(o.at - o.timestamp for o in fast(out)) <= FETCH_EVERY, "fast records never wait"
    assert [o.late for o in slow(out)] == [True, True, True]
    assert not any(o.enforced for o in out), "idling is off, so nothing counts as enforced"


def test_kip353_idle_zero_does_not_wait_for_producers_and_says_so_with_enforced_marks() -> None:
    out = run(0, kip353_logs())

    assert max(o.at - o.timestamp for o in fast(out)) <= FETCH_EVERY
    assert all(o.late for o in slow(out))
    assert sum(o.enforced for o in fast(out)) > 0.9 * len(fast(out))


def test_kip353_idle_max_holds_the_fast_partition_until_the_slow_one_speaks_and_output_is_sorted() -> None:
    out = run(IDLE_FOREVER, kip353_logs(), until=DURATION + 1_000)

    assert is_sorted(out)
    assert not any(o.late or o.enforced for o in out)
    waited = max(o.at - o.timestamp for o in fast(out))
    assert 900 <= waited <= 1_000 + SLOW_PRODUCER_DELAY + FETCH_EVERY, "up to the slow partition's interval"
    assert len(slow(out)) == 3
    assert {o.record.offset for o in fast(out)} >= set(range(2_000 * 10)), "released as B0 delivers"


# -- KIP-695 ------------------------------------------------------------------------------------------
# B0 holds a backlog of 3,000 older records on the broker (event times 0..2,999) that the consumer
# can only fetch 100 at a time, while A0 is live with event times from 10,000 on: data exists but
# is not buffered yet.


def backlog_logs() -> dict:  # type: ignore[type-arg]
    live = list(range(0, 2_000, 2))
    return {
        A0: appended(A0, live, [10_000 + t for t in live]),
        B0: appended(B0, [0] * 3_000, list(range(3_000))),
    }


def test_kip695_uc1_never_waits_for_empty_inputs_when_another_has_data() -> None:
    out = run(-1, backlog_logs(), max_fetch=100, until=2_000)

    assert max(o.at - (o.timestamp - 10_000) for o in fast(out)) <= FETCH_EVERY
    assert any(o.late for o in slow(out)), "the backlog comes out behind the live partition"
    assert not any(o.enforced for o in out)


def test_kip695_uc2_waits_for_data_already_on_the_broker_but_not_for_producers() -> None:
    out = run(0, backlog_logs(), max_fetch=100, until=2_000)

    caught_up_at = next(o.at for o in slow(out) if o.record.offset == 2_999)
    before = [o for o in out if o.at < caught_up_at]
    assert before, "the backlog is fetched in 30 steps"
    assert not any(o.enforced for o in before), "lag > 0 on B0: wait for the fetch, never enforce"
    assert is_sorted(out[: len(before)])
    assert not any(o.late for o in out)


def test_kip695_uc3_waits_a_bounded_time_for_a_quiet_producer_then_flows_enforced() -> None:
    logs = {A0: appended(A0, list(range(0, 2_000, 10))), B0: appended(B0, [0], [0])}  # B0 falls silent
    out = run(250, logs, until=2_000)

    first_enforced = next(o for o in out if o.enforced)
    assert 240 <= first_enforced.at - first_enforced.timestamp <= 260 + FETCH_EVERY
    assert not any(o.late for o in out)


# -- Beam: near-perfect watermark for log-append time --------------------------------------------------


def test_beam_near_perfect_watermark_follows_fetch_time_once_caught_up() -> None:
    task = MergeTask(
        [A0], TaskConfig(max_task_idle_ms=0, watermark_idle_epsilon_ms=2_000), log_append_time_topics={"a"}
    )
    broker_time = [1_000_000 + 5 * i for i in range(100)]
    records = [Record("a", 0, i, ts, timestamp_type=LOG_APPEND_TIME) for i, ts in enumerate(broker_time)]

    task.observe_fetch(A0, high_watermark=100, position=50, now_ms=1_000_600)
    task.push(A0, records[:50])
    drain(task, now=1_000_600)
    lagging = task.watermark
    task.observe_fetch(A0, high_watermark=100, position=100, now_ms=1_000_700)
    task.push(A0, records[50:])
    drain(task, now=1_000_700)
    task.observe_fetch(A0, high_watermark=100, position=100, now_ms=1_009_000)
    drain(task, now=1_009_000)

    assert lagging == broker_time[49], "behind: the last record read"
    assert task.watermark == 1_009_000 - 2_000, "caught up: fetch time − epsilon, however quiet"
