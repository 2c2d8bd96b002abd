"""``max.task.idle.ms=auto`` in a task: live producers simulated, one test per promise.

In each workload partition ``a`` is the producer under study and ``b`` a busy one (a record
every 10 ms, stamped when appended). ``a``'s records are stamped 150 ms before they are
appended (a producer that batches, or devices that report late): without waiting, ``b``'s
newer records would go out first and ``a``'s would come out late.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sidecar.core import IDLE_AUTO, Emit, MergeTask, Record, TaskConfig, TopicPartition, WaitUntil
from sidecar.core.readiness import IDLE_FOREVER

from .helpers import A0, B0, Output, SimulatedConsumer, appended, caught_up, drain, enforced_flags, feed, task

BUDGET = 1000
STAMPED_BEFORE = 150
#: Event time at simulated time 0 (a's first records are stamped before it).
EPOCH = 1000


def auto_task(budget: int = BUDGET) -> MergeTask:
    config = TaskConfig(max_task_idle_ms=IDLE_AUTO, max_task_idle_budget_ms=budget, watermark_heartbeat_ms=0)
    return MergeTask([A0, B0], config)


def run(
    a_times: list[int], until: int, budget: int = BUDGET, stamped_before: int = STAMPED_BEFORE
) -> tuple[MergeTask, list[Output]]:
    """``a`` appends at ``a_times``, ``b`` every 10 ms; fetched every 10 ms until ``until``."""
    t = auto_task(budget)
    logs = {
        A0: appended(A0, a_times, [EPOCH + at - stamped_before for at in a_times]),
        B0: appended(B0, b_times := list(range(0, until + 1, 10)), [EPOCH + at for at in b_times]),
    }
    return t, SimulatedConsumer(t, logs).run(until=until, fetch_every=10, step=10)


def idle_of(t: MergeTask, partition: int) -> dict[str, object]:
    snap: dict[str, object] = t.snapshot(t._intake.clock or 0)["partitions"][partition]["idle"]
    return snap


def late_of_a(out: list[Output], after: int = 0) -> list[int]:
    """Offsets of ``a``'s records emitted late, among those appended after ``after``."""
    return [o.record.offset for o in out if o.record.topic == "a" and o.late and o.at > after]


def latency(out: list[Output], topic: str, appended_from: int) -> int:
    """The longest time a ``topic`` record appended at ``appended_from`` or later waited."""
    return max(
        o.at - (o.timestamp - EPOCH)
        for o in out
        if o.record.topic == topic and o.timestamp - EPOCH >= appended_from
    )


def test_a_steady_200ms_producer_is_waited_for_about_its_gap_and_stays_in_order() -> None:
    t, out = run(list(range(0, 20_000, 200)), until=20_000)

    learnt = idle_of(t, 0)
    assert 190 <= learnt["idle_ms"] <= 210  # type: ignore[operator]
    assert learnt["gaps_seen"] == 99
    assert late_of_a(out) == []
    # b waits for a's next record, which comes 200 ms later and 150 ms behind: the price of order
    assert latency(out, "b", appended_from=2000) <= 200 + STAMPED_BEFORE + 10


def test_a_producer_whose_records_are_never_overtaken_is_not_waited_for() -> None:
    t = auto_task()
    a_times, b_times = list(range(0, 20_000, 200)), list(range(0, 20_001, 10))
    logs = {
        A0: appended(A0, a_times, [EPOCH + at for at in a_times]),
        B0: appended(B0, b_times, [EPOCH + at for at in b_times]),
    }
    out = SimulatedConsumer(t, logs).run(until=20_000, fetch_every=10, step=10)

    assert idle_of(t, 0)["idle_ms"] == 0
    assert latency(out, "b", appended_from=2000) <= 10


def test_a_bursty_producer_keeps_its_bursts_together_and_is_not_waited_for_between_them() -> None:
    # 30 records 20 ms apart, each stamped 15 ms before it is appended (b's record appended
    # between two of them is newer), then a 620 ms pause: a burst every 1.2 s.
    bursts = [start + 20 * i for start in range(0, 24_000, 1200) for i in range(30)]
    t, out = run(bursts, until=24_000, stamped_before=15)

    idle = idle_of(t, 0)["idle_ms"]
    assert 20 <= idle < 600  # type: ignore[operator]  # its 20 ms gaps, not its pauses
    firsts = {n * 30 for n in range(20)}
    assert set(late_of_a(out, after=2000)) <= firsts  # only a burst's first record may come late


def test_a_producer_that_stops_is_released_at_once_and_never_waited_for_again() -> None:
    t, out = run(list(range(0, 5000, 200)), until=8000)  # its last record at 4800

    assert idle_of(t, 0)["idle_ms"] <= 210  # type: ignore[operator]
    assert latency(out, "b", appended_from=4800 + 210 + 10) <= 10
    assert latency(out, "b", appended_from=4800) <= BUDGET


def test_the_learnt_idle_never_exceeds_the_budget() -> None:
    t, out = run(list(range(0, 20_000, 400)), until=20_000, budget=250)  # gaps longer than the budget

    assert idle_of(t, 0)["idle_ms"] == 0  # waiting 250 ms would have kept none of them in order
    assert latency(out, "b", appended_from=0) <= 250 + 10


def test_a_replay_of_history_teaches_nothing_while_lag_blocks() -> None:
    t = auto_task()
    a_stamps, b_stamps = list(range(EPOCH, EPOCH + 3000, 200)), list(range(EPOCH, EPOCH + 3000, 10))
    logs = {  # everything is on the broker already, with the gaps of the producers that wrote it
        A0: appended(A0, [0] * len(a_stamps), a_stamps),
        B0: appended(B0, [0] * len(b_stamps), b_stamps),
    }
    consumer = SimulatedConsumer(t, logs, max_fetch=3)

    consumer.run(until=100, fetch_every=2)

    assert t.snapshot(100)["partitions"][1]["lag"] > 0  # still replaying
    assert idle_of(t, 0)["gaps_seen"] == 0
    assert idle_of(t, 0)["idle_ms"] == BUDGET


def test_a_partition_with_no_history_is_waited_for_the_budget_once_the_task_holds_records() -> None:
    t = auto_task()
    caught_up(t, A0, now=0)
    drain(t, now=0)  # a is empty and caught up: quiet from here, but nothing is held back yet
    feed(t, B0, [5], now=300)

    assert drain(t, now=300)[1] == WaitUntil(300 + BUDGET)
    assert t.snapshot(300)["blocked_by"][0]["reason"] == (
        f"idling until {300 + BUDGET} (quiet since 0; max.task.idle.ms=auto: no gaps learnt yet, so "
        f"the budget, {BUDGET} ms)"
    )
    batches, _ = drain(t, now=300 + BUDGET)
    assert enforced_flags(batches) == [True]
    feed(t, B0, [6], now=BUDGET + 800)
    assert enforced_flags(drain(t, now=BUDGET + 800)[0]) == [True]  # not waited for again


def test_a_backlog_waits_one_budget_from_its_fetch_not_one_per_partition() -> None:
    """``auto`` counts from the last arrival too: partitions that run dry one after another, a
    budget after the backlog was fetched, are not waited for again each."""
    parts = [TopicPartition("t", i) for i in range(6)]
    config = TaskConfig(max_task_idle_ms=IDLE_AUTO, max_task_idle_budget_ms=BUDGET, watermark_heartbeat_ms=0)
    t = MergeTask(parts, config)
    for i, tp in enumerate(parts):
        feed(t, tp, [6 * j + i for j in range(20)], now=0)

    assert drain(t, now=0)[1] == WaitUntil(BUDGET)
    _, out = drain(t, now=BUDGET)

    assert t.records_out == 6 * 20, "the 5 partitions left all passed at once"
    assert not isinstance(out, WaitUntil)


def test_records_after_a_fetch_that_showed_lag_teach_nothing() -> None:
    t = auto_task()
    feed(t, A0, [1], now=0)
    feed(t, B0, [2], now=0)
    drain(t, now=BUDGET)
    t.observe_fetch(A0, high_watermark=5, position=1, now_ms=3_000)  # behind: the fetch, not the producer
    feed(t, A0, [3, 4, 5, 6], now=3_500)

    assert idle_of(t, 0)["gaps_seen"] == 0


def test_status_says_what_was_learnt_while_it_waits() -> None:
    t, _ = run(list(range(0, 3000, 200)), until=2900)  # a quiet since its record at 2800

    assert t.snapshot(2900)["blocked_by"][0]["reason"] == (
        "idling until 3000 (quiet since 2800; max.task.idle.ms=auto: 200 ms, learnt from 14 gaps)"
    )


def test_status_shows_each_partitions_idle_and_gaps_only_under_auto() -> None:
    t, _ = run(list(range(0, 3000, 200)), until=3000)
    fixed = task(A0, B0, max_task_idle_ms=IDLE_FOREVER)

    assert set(idle_of(t, 0)) == {
        "idle_ms",
        "learnt",
        "quiet_for_ms",
        "gaps_seen",
        "late_gaps_seen",
        "recent_gaps_ms",
        "window_gaps",
        "window_max_gap_ms",
    }
    assert idle_of(t, 0)["recent_gaps_ms"] == [200] * 8
    assert "idle" not in fixed.snapshot(0)["partitions"][0]


def test_the_same_arrivals_and_clock_give_the_same_decisions() -> None:
    times = [0, 150, 170, 700, 720, 740, 2000, 2190, 2400, 4000]

    t1, out1 = run(times, until=5000)
    t2, out2 = run(times, until=5000)

    assert out1 == out2
    assert t1.snapshot(5000) == t2.snapshot(5000)


# -- the state machine ---------------------------------------------------------------------------

#: One call to the task, as the machine made it: replayed on a fresh task, it must decide alike.
Call = tuple[str, tuple[object, ...]]


def apply(t: MergeTask, call: Call) -> object:
    name, args = call
    if name == "fetch":
        tp, high, position, recs, now = args
        t.observe_fetch(tp, high, position, now)  # type: ignore[arg-type]
        t.push(tp, recs)  # type: ignore[arg-type]
        return None
    if name == "hold":
        return t.hold(*args)  # type: ignore[arg-type]
    if name == "release":
        return t.release(*args)  # type: ignore[arg-type]
    if name == "ack":
        return t.acked(*args)  # type: ignore[arg-type]
    return t.poll(*args)  # type: ignore[arg-type]


class AutoIdleMachine(RuleBasedStateMachine):
    """Producers with any gaps and any event times, fetches of any size, quiet spells, operator
    holds; after every step the learnt idle stays within the budget, no wait asked for goes past
    it, and a partition quiet for the whole budget holds nothing back. At the end, replaying the
    same calls on a fresh task gives the same decisions."""

    @initialize(partitions=st.integers(2, 3), budget=st.sampled_from([50, 300, 1000]))
    def topology(self, partitions: int, budget: int) -> None:
        self.tps = [TopicPartition("t", p) for p in range(partitions)]
        self.config = TaskConfig(max_task_idle_ms=IDLE_AUTO, max_task_idle_budget_ms=budget)
        self.task = MergeTask(self.tps, self.config)
        self.logs: dict[TopicPartition, list[Record]] = {tp: [] for tp in self.tps}
        self.position = dict.fromkeys(self.tps, 0)
        self.now = 1_000_000
        self.calls: list[Call] = []
        self.outcomes: list[object] = []

    def _call(self, name: str, *args: object) -> object:
        self.calls.append((name, args))
        out = apply(self.task, (name, args))
        self.outcomes.append(out)
        return out

    @rule(which=st.integers(0, 2), behind=st.lists(st.integers(0, 500), min_size=1, max_size=4))
    def produce(self, which: int, behind: list[int]) -> None:
        tp = self.tps[which % len(self.tps)]
        log = self.logs[tp]
        log.extend(Record(tp.topic, tp.partition, len(log), self.now - b) for b in behind)

    @rule(which=st.integers(0, 2), most=st.integers(0, 6))
    def fetch(self, which: int, most: int) -> None:
        tp = self.tps[which % len(self.tps)]
        if self.task.held or self.task._part(tp).paused:
            return
        log, position = self.logs[tp], self.position[tp]
        new = log[position : position + most]
        self.position[tp] = position + len(new)
        self._call("fetch", tp, len(log), position + len(new), new, self.now)

    @rule(ms=st.sampled_from([1, 10, 40, 200, 700, 5_000]))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(
        which=st.integers(0, 2),
        gaps=st.lists(st.tuples(st.integers(1, 1500), st.integers(0, 300)), min_size=1, max_size=12),
    )
    def a_producer_with_these_gaps(self, which: int, gaps: list[tuple[int, int]]) -> None:
        """Quiet spells of a partition, each ended by one record stamped ``behind`` ms back,
        fetched at once: gaps to learn from, many per step."""
        for ms, behind in gaps:
            self.fetch(which, 6)
            self.poll()
            self.now += ms
            self.produce(which, [behind])
            self.fetch(which, 6)
            self.poll()

    @rule()
    def poll(self) -> None:
        for _ in range(100):
            out = self._call("poll", self.now)
            if isinstance(out, Emit):
                self._call("ack", [out.batch_id])
                continue
            if isinstance(out, WaitUntil):
                assert out.deadline_ms <= self.now + self.config.max_task_idle_budget_ms
            return
        raise AssertionError("poll kept emitting at one instant")

    @rule()
    def operator_holds_or_releases(self) -> None:
        self._call("release" if self.task.held else "hold", self.now)

    @invariant()
    def the_learnt_idle_stays_within_the_budget(self) -> None:
        budget = self.config.max_task_idle_budget_ms
        for p in self.task.snapshot(self.now)["partitions"]:
            assert 0 <= p["idle"]["idle_ms"] <= budget

    @invariant()
    def a_partition_quiet_for_the_whole_budget_holds_nothing_back(self) -> None:
        if self.task.held:
            return
        snap = self.task.snapshot(self.now)
        budget = self.config.max_task_idle_budget_ms
        quiet = {
            p["partition"]
            for p in snap["partitions"]
            if p["idle"]["quiet_for_ms"] is not None and p["idle"]["quiet_for_ms"] >= budget
        }
        idling = {b["partition"] for b in snap["blocked_by"] if b["reason"].startswith("idling")}
        assert not quiet & idling

    def teardown(self) -> None:
        if not hasattr(self, "task"):
            return
        again = MergeTask(self.tps, self.config)
        assert [apply(again, call) for call in self.calls] == self.outcomes


AutoIdleMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_auto_idle_keeps_its_promises_in_any_history = AutoIdleMachine.TestCase
