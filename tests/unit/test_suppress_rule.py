"""The per-key suppression rule, without Spark: the examples of DESIGN and of the Spark tests,
then properties over drawn histories (out of order, replays, evictions)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_consumer.options import AggSpec, WindowSpec
from spark_consumer.suppress_rule import BatchResult, Final, KeyState, Record, SuppressRule

T0 = 1_000
PER_KEY = SuppressRule(WindowSpec("tumbling", size_ms=2), grace_ms=1, ttl_ms=10, retention_ms=10)
EVICTING = SuppressRule(WindowSpec("tumbling", size_ms=10), grace_ms=0, ttl_ms=20, retention_ms=20)


class Run:
    """Feeds a rule micro-batch by micro-batch, as Spark does: each batch sees the watermark of
    the batches before it (max timestamp so far − ``delay``), and a batch that moved the
    watermark is followed by an empty one at the new watermark."""

    def __init__(self, rule: SuppressRule, delay: int = 0) -> None:
        self.rule, self.delay = rule, delay
        self.states: dict[str, KeyState] = {}
        self.max_ts: int | None = None
        self.watermark = 0
        self.offset = 0
        self.late = self.forgotten = 0
        self.finals: list[Final] = []

    def record(
        self, key: str, ts: int, value: float | None = None, offset: int | None = None
    ) -> tuple[str, Record]:
        if offset is None:
            offset, self.offset = self.offset, self.offset + 1
        return key, Record(("in", 0, offset), ts, (value,))

    def feed(self, *batch: tuple[str, Record], heartbeat: int | None = None) -> list[Final]:
        out = list(self._batch(list(batch)).finals)
        stamps = [r.ts for _, r in batch] + ([heartbeat] if heartbeat is not None else [])
        if stamps:
            self.max_ts = max([*stamps, *([self.max_ts] if self.max_ts is not None else [])])
        new = max(self.watermark, (self.max_ts or 0) - self.delay)
        if new > self.watermark:
            self.watermark = new
            out += self._batch([]).finals
        return out

    def _batch(self, batch: list[tuple[str, Record]]) -> BatchResult:
        result = self.rule.run_batch(self.states, batch, self.watermark)
        self.finals += result.finals
        self.late += result.late
        self.forgotten += result.forgotten
        return result


def short(finals: Sequence[Final]) -> list[tuple[str, int, object, int, str]]:
    return [(f.key, f.window_start, f.aggregates[0], f.ts, f.closed_by) for f in finals]


# --- DESIGN's example: each key closes its windows on its own stream time --------------------


def test_the_skewed_key_keeps_its_records_because_its_stream_time_is_its_own() -> None:
    run = Run(PER_KEY, delay=1)
    a = run.feed(*(run.record("A", T0 + i) for i in range(4)))
    assert short(a) == [("A", 1000, 2, 1001, "stream-time")]
    b = run.feed(*(run.record("B", T0 + i) for i in range(4)))
    assert short(b) == [("B", 1000, 2, 1001, "stream-time")]
    assert run.late == 0


def test_a_window_closes_at_end_plus_grace_and_a_record_for_it_is_late_from_then() -> None:
    run = Run(PER_KEY, delay=1)
    assert [
        (f.window_start, f.aggregates[0]) for f in run.feed(run.record("E", T0), run.record("E", T0 + 3))
    ] == [(1000, 1)]
    run.feed(run.record("E", T0 + 1), run.record("E", T0 + 2))
    assert run.late == 1, "E@1001: [1000, 1002) has end + grace 1003 = E's stream time"
    assert [(f.window_start, f.aggregates[0]) for f in run.feed(run.record("E", T0 + 5))] == [(1002, 2)]


def test_replayed_records_are_taken_once() -> None:
    run = Run(PER_KEY, delay=1)
    run.feed(run.record("D", T0), run.record("D", T0 + 1))
    out = run.feed(run.record("D", T0 + 1, offset=1), run.record("D", T0, offset=0), run.record("D", T0 + 3))
    assert short(out) == [("D", 1000, 2, 1001, "stream-time")]
    assert run.late == 0


def test_an_idle_key_is_flushed_by_the_ttl_when_the_watermark_reaches_it() -> None:
    run = Run(PER_KEY, delay=1)
    assert run.feed(run.record("C", T0), run.record("C", T0 + 1)) == []
    assert short(run.feed(heartbeat=T0 + 50)) == [("C", 1000, 2, 1001, "ttl")]


def test_a_timer_exactly_at_the_watermark_fires() -> None:
    run = Run(EVICTING)
    run.feed(run.record("A", T0 + 5))  # TTL at 1025
    assert run.feed(heartbeat=T0 + 24) == []
    assert short(run.feed(heartbeat=T0 + 25)) == [("A", 1000, 1, 1005, "ttl")]


def test_a_straggler_after_eviction_is_late_and_does_not_reopen_the_window() -> None:
    run = Run(EVICTING)
    run.feed(run.record("A", T0 + 5))
    assert short(run.feed(heartbeat=T0 + 30)) == [("A", 1000, 1, 1005, "ttl")]
    assert run.feed(run.record("A", T0 + 7), run.record("A", T0 + 40)) == []
    assert run.late == 1


def test_an_evicted_key_is_forgotten_after_the_retention_and_then_starts_afresh() -> None:
    run = Run(SuppressRule(WindowSpec("tumbling", size_ms=10), grace_ms=0, ttl_ms=20, retention_ms=10))
    run.feed(run.record("A", T0 + 5))
    run.feed(heartbeat=T0 + 30)  # evicted, closed horizon 1010
    run.feed(heartbeat=T0 + 100)  # past 1010 + 20 + 10
    assert run.forgotten == 1
    assert "A" not in run.states
    run.feed(run.record("A", T0 + 7))
    assert short(run.feed(heartbeat=T0 + 200)) == [("A", 1000, 1, 1007, "ttl")]


def test_eviction_follows_the_latest_stream_time_not_the_one_the_timer_was_armed_for() -> None:
    run = Run(EVICTING)
    run.feed(run.record("A", T0 + 5))  # timer at 1025
    assert short(run.feed(run.record("A", T0 + 15))) == [("A", 1000, 1, 1005, "stream-time")]
    assert run.feed(heartbeat=T0 + 30) == [], "the timer fires early and moves on to 1035"
    assert short(run.feed(heartbeat=T0 + 40)) == [("A", 1010, 1, 1015, "ttl")]


def test_a_key_far_behind_the_watermark_expires_at_the_next_advance_not_in_its_own_batch() -> None:
    rule, states = EVICTING, dict[str, KeyState]()
    rule.run_batch(states, [("A", Record(("in", 0, 0), T0 + 5))], watermark=0)
    held = rule.run_batch(states, [("A", Record(("in", 0, 2), T0 + 6))], watermark=T0 + 100)
    assert held.finals == ()
    assert states["A"].timer == T0 + 101, "armed just above the watermark"
    flushed = rule.run_batch(states, [], watermark=T0 + 110)
    assert short(flushed.finals) == [("A", 1000, 2, 1006, "ttl")]


def test_aggregations_skip_absent_and_nan_values_and_count_without_a_field_counts_records() -> None:
    rule = SuppressRule(
        WindowSpec("tumbling", size_ms=10),
        grace_ms=0,
        ttl_ms=20,
        retention_ms=20,
        aggs=(
            AggSpec("count"),
            AggSpec("count", "v"),
            AggSpec("sum", "v"),
            AggSpec("min", "v"),
            AggSpec("max", "v"),
        ),
    )
    states: dict[str, KeyState] = {}
    values = [
        (None,) * 5,
        (None, 2.0, 2.0, 2.0, 2.0),
        (None, float("nan"), float("nan"), float("nan"), float("nan")),
    ]
    batch = [("K", Record(("in", 0, i), T0 + i, v)) for i, v in enumerate(values)]
    batch.append(("K", Record(("in", 0, 9), T0 + 10, (None, 5.0, 5.0, 5.0, 5.0))))
    (final,) = rule.run_batch(states, batch, watermark=0).finals
    assert final.aggregates == (3, 1, 2.0, 2.0, 2.0)


def test_hopping_windows_close_one_by_one() -> None:
    rule = SuppressRule(WindowSpec("hopping", size_ms=10, slide_ms=5), grace_ms=0, ttl_ms=30, retention_ms=30)
    states: dict[str, KeyState] = {}
    out = rule.run_batch(states, [("H", Record(("in", 0, 0), 1003)), ("H", Record(("in", 0, 1), 1012))], 0)
    assert [(f.window_start, f.aggregates[0]) for f in out.finals] == [(995, 1), (1000, 1)]


def test_the_rule_imports_no_spark() -> None:
    probe = (
        "import sys, spark_consumer.suppress_rule; print(any(m.startswith('pyspark') for m in sys.modules))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )


# --- properties ------------------------------------------------------------------------------

RULES = st.builds(
    SuppressRule,
    window=st.sampled_from(
        [WindowSpec("tumbling", size_ms=10), WindowSpec("hopping", size_ms=10, slide_ms=5)]
    ),
    grace_ms=st.integers(0, 5),
    ttl_ms=st.integers(16, 40),
    retention_ms=st.integers(0, 30),
)
# A history: micro-batches of (key, ts offset), each optionally followed by a heartbeat jump.
HISTORIES = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 80)), max_size=6),
        st.one_of(st.none(), st.integers(0, 60)),
    ),
    min_size=1,
    max_size=8,
)


def play(
    rule: SuppressRule, history: list[tuple[list[tuple[str, int]], int | None]], replay: bool = False
) -> Run:
    run = Run(rule)
    fed: list[tuple[str, Record]] = []
    for records, jump in history:
        batch = [run.record(key, T0 + ts) for key, ts in records]
        if replay:
            batch = fed[-3:] + batch  # an at-least-once replay repeats the last records sent
        fed += batch
        heartbeat = None if jump is None else max([T0, *(r.ts for _, r in fed)]) + jump
        run.feed(*batch, heartbeat=heartbeat)
    return run


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES)
def test_a_window_is_final_at_most_once_per_key_until_the_key_is_forgotten(
    rule: SuppressRule, history: list[tuple[list[tuple[str, int]], int | None]]
) -> None:
    run = play(rule, history)
    counts = Counter((f.key, f.window_start) for f in run.finals)
    if run.forgotten == 0:
        assert all(n == 1 for n in counts.values())


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES)
def test_replays_change_no_final_of_a_key_still_remembered(
    rule: SuppressRule, history: list[tuple[list[tuple[str, int]], int | None]]
) -> None:
    # (A forgotten key starts afresh, replayed records included: that is the retention's price.)
    remembering = replace(rule, retention_ms=10_000)
    assert Counter(play(remembering, history, replay=True).finals) == Counter(
        play(remembering, history).finals
    )


@settings(max_examples=200, deadline=None)
@given(RULES.filter(lambda r: r.window.kind == "tumbling"), HISTORIES)
def test_every_record_is_counted_in_a_final_dropped_as_late_or_still_open(
    rule: SuppressRule, history: list[tuple[list[tuple[str, int]], int | None]]
) -> None:
    run = play(rule, history)
    in_finals = sum(int(f.aggregates[0] or 0) for f in run.finals)
    still_open = sum(int(w.accs[0] or 0) for s in run.states.values() for w in s.windows.values())
    assert in_finals + run.late + still_open == sum(len(records) for records, _ in history)


@settings(max_examples=200, deadline=None)
@given(RULES)
def test_in_order_records_give_the_plain_windowed_count_of_every_closed_window(rule: SuppressRule) -> None:
    run = Run(rule)
    finals = run.feed(*(run.record("K", T0 + ts) for ts in range(0, 60, 3)))
    expected = {
        start: sum(1 for ts in range(T0, T0 + 60, 3) if start <= ts < start + rule.window.size_ms)
        for ts in range(T0, T0 + 60, 3)
        for start in rule.window.starts(ts)
        if start + rule.window.size_ms + rule.grace_ms <= T0 + 57
    }
    assert {f.window_start: f.aggregates[0] for f in finals if f.closed_by == "stream-time"} == expected
    assert run.late == 0
