"""The interval join rule, without Spark: the examples of the Spark tests and of the docs, then
properties over drawn histories (out of order, late, replayed, NULL keys, any micro-batches)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_consumer.join_rule import LEFT, RIGHT, How, Joined, JoinRule, KeyState, Record, Side

T0 = 1_000


@dataclass
class Run:
    """Feeds a rule micro-batch by micro-batch, as Spark does: a batch's watermark is the largest
    timestamp of the batches before it − ``delay`` (never decreasing), its late watermark the
    previous batch's, and a batch that moved the watermark is followed by an empty one, unless
    more data is waiting (``settle=False``: the next batch has records). A record's value is
    (side, offset) unless given."""

    rule: JoinRule
    delay: int = 1
    states: dict[str | None, KeyState] = field(default_factory=dict)
    max_ts: int = 0
    watermark: int = 0  # the next batch's
    previous: int = 0  # the last batch's: the next batch's late watermark
    late: int = 0
    offsets: dict[Side, int] = field(default_factory=dict)
    #: Every batch run: (its watermark, its output)
    batches: list[tuple[int, tuple[Joined, ...]]] = field(default_factory=list)
    #: Records that were on time, with the index of their batch
    on_time: list[tuple[int, str | None, Record]] = field(default_factory=list)

    def record(
        self, key: str | None, side: Side, ts: int, value: object = None, offset: int | None = None
    ) -> tuple[str | None, Record]:
        if offset is None:
            offset = self.offsets.get(side, 0)
            self.offsets[side] = offset + 1
        return key, Record(side, (0, offset), ts, (side, offset) if value is None else value)

    def feed(
        self, *batch: tuple[str | None, Record], heartbeat: int | None = None, settle: bool = True
    ) -> list[Joined]:
        out = self._batch(list(batch))
        stamps = [r.ts for _, r in batch] + ([heartbeat] if heartbeat is not None else [])
        self.max_ts = max([self.max_ts, *stamps])
        new = max(self.watermark, self.max_ts - self.delay)
        if new > self.watermark:
            self.watermark = new
            if settle:
                out += self._batch([])
        return out

    def flush(self) -> list[Joined]:
        """A heartbeat far ahead: every held record is evicted."""
        return self.feed(heartbeat=self.max_ts + self.rule.within_ms + self.delay + 1)

    @property
    def joined(self) -> list[Joined]:
        return [j for _, out in self.batches for j in out]

    def _batch(self, batch: list[tuple[str | None, Record]]) -> list[Joined]:
        index = len(self.batches)
        self.on_time += [(index, key, r) for key, r in batch if r.ts > self.previous]
        result = self.rule.run_batch(self.states, batch, self.previous, self.watermark)
        self.previous = self.watermark
        self.late += result.late
        self.batches.append((self.watermark, result.joined))
        return list(result.joined)


def short(joined: Sequence[Joined]) -> list[tuple[str | None, int | None, int | None, int]]:
    return sorted(((j.key, j.left_ts, j.right_ts, j.ts) for j in joined), key=repr)


# --- the examples -----------------------------------------------------------------------------


def test_a_pair_comes_out_with_the_later_of_its_two_times_whichever_side_came_first() -> None:
    run = Run(JoinRule(5))
    out = run.feed(
        run.record("a", LEFT, 10),
        run.record("a", RIGHT, 13),  # right after left
        run.record("b", RIGHT, 20),
        run.record("b", LEFT, 22),  # left after right
        run.record("b", RIGHT, 40),  # too far from b@22: no pair
    )
    assert short(out) == [("a", 10, 13, 13), ("b", 22, 20, 22)]


def test_the_bound_is_inclusive() -> None:
    run = Run(JoinRule(5))
    out = run.feed(run.record("k", LEFT, T0), run.record("k", RIGHT, T0 + 5), run.record("k", RIGHT, T0 + 6))
    assert short(out) == [("k", T0, T0 + 5, T0 + 5)]


def test_a_record_pairs_with_every_partner_within_the_bound_across_batches() -> None:
    run = Run(JoinRule(10))
    run.feed(run.record("k", RIGHT, T0), run.record("k", RIGHT, T0 + 4))
    out = run.feed(run.record("k", LEFT, T0 + 8))
    assert short(out) == [("k", T0 + 8, T0, T0 + 8), ("k", T0 + 8, T0 + 4, T0 + 8)]


@pytest.mark.parametrize("how", ["left", "outer"])
def test_an_unmatched_row_comes_out_once_the_watermark_passes_its_time_plus_the_bound(how: How) -> None:
    run = Run(JoinRule(5, how))
    matched = run.feed(
        run.record("a", LEFT, 10),
        run.record("a", RIGHT, 12),
        run.record("lonely-order", LEFT, 30),
        run.record("lonely-payment", RIGHT, 31),
    )
    assert short(matched) == [("a", 10, 12, 12)]
    # Watermark 35 = 30 + 5: not passed yet. 36 passes the order, 37 the payment.
    assert run.feed(heartbeat=36) == []
    assert short(run.feed(heartbeat=37)) == [("lonely-order", 30, None, 30)]
    later = short(run.feed(heartbeat=38))
    assert later == ([("lonely-payment", None, 31, 31)] if how == "outer" else [])
    assert run.states == {}, "everything the watermark passed is evicted"


def test_an_inner_join_emits_nothing_unmatched_and_forgets_what_the_watermark_passed() -> None:
    run = Run(JoinRule(5))
    run.feed(run.record("x", LEFT, T0), run.record("y", RIGHT, T0 + 1))
    assert run.flush() == []
    assert run.states == {}


def test_a_replayed_record_pairs_once() -> None:
    run = Run(JoinRule(5, "outer"))
    run.feed(run.record("k", LEFT, T0, offset=0), run.record("k", RIGHT, T0 + 1, offset=0))
    again = run.feed(run.record("k", LEFT, T0 + 1, offset=1), run.record("k", RIGHT, T0 + 1, offset=0))
    assert short(again) == [("k", T0 + 1, T0 + 1, T0 + 1)], "only the new left record pairs"
    assert run.flush() == [], "and the replay did not come out unmatched"
    assert run.late == 0


def test_a_late_record_is_dropped_counted_and_never_pairs() -> None:
    run = Run(JoinRule(50, "outer"))
    run.feed(run.record("k", LEFT, T0 + 20))  # the next batches' watermark: 1019
    run.feed(run.record("k", RIGHT, T0 + 19), run.record("k", RIGHT, T0 + 30))
    assert run.late == 1
    assert short(run.joined) == [("k", T0 + 20, T0 + 30, T0 + 30)]


def test_a_record_behind_the_watermark_but_not_late_still_pairs_then_leaves_at_once() -> None:
    """Spark's late watermark is the previous batch's: a record between it and the current one is
    on time, pairs with what is held, and is evicted in its own batch."""
    run = Run(JoinRule(2, "left"))
    # The next batch's late watermark stays 0, its watermark is 1004.
    run.feed(run.record("k", RIGHT, T0), heartbeat=T0 + 5, settle=False)
    out = run.feed(run.record("k", LEFT, T0 + 1), run.record("j", LEFT, T0))
    assert short(out) == [("j", T0, None, T0), ("k", T0 + 1, T0, T0 + 1)]
    assert run.states == {}


def test_a_null_key_pairs_with_nothing_and_comes_out_unmatched_on_an_outer_side() -> None:
    run = Run(JoinRule(5, "left"))
    run.feed(run.record(None, LEFT, T0), run.record(None, RIGHT, T0))
    assert run.states[None].right == (), "a NULL key's record on an inner side is not even held"
    assert short(run.flush()) == [(None, T0, None, T0)]


def test_the_rule_imports_no_spark() -> None:
    probe = "import sys, spark_consumer.join_rule; print(any(m.startswith('pyspark') for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_negative_bound_or_an_unknown_join_type_is_refused() -> None:
    with pytest.raises(ValueError, match="within -1 ms must be >= 0"):
        JoinRule(-1)
    with pytest.raises(ValueError, match="how one of"):
        JoinRule(1, "right")  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------

RULES = st.builds(JoinRule, within_ms=st.integers(0, 12), how=st.sampled_from(["inner", "left", "outer"]))
KEYS = ("A", "B", None)
SIDES = st.sampled_from([LEFT, RIGHT])
# A history: micro-batches of (key, side, ts offset), each optionally followed by a heartbeat jump,
# and how many of the records already sent the batch repeats first (an at-least-once replay).
HISTORIES = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from(KEYS), SIDES, st.integers(0, 60)), max_size=6),
        st.one_of(st.none(), st.integers(0, 30)),
        st.integers(0, 3),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)
History = list[tuple[list[tuple[str | None, Side, int]], int | None, int, bool]]


def play(rule: JoinRule, history: History, delay: int, replays: bool) -> Run:
    run = Run(rule, delay)
    sent: list[tuple[str | None, Record]] = []
    for records, jump, repeat, settle in history:
        batch = [run.record(key, side, T0 + ts) for key, side, ts in records]
        if replays and repeat:
            batch = sent[-repeat:] + batch
        sent += batch
        run.feed(*batch, heartbeat=None if jump is None else max(T0, run.max_ts) + jump, settle=settle)
    run.flush()
    return run


def interval_join(rule: JoinRule, records: Sequence[tuple[str | None, Record]]) -> Counter[Joined]:
    """The join defined without batches: each record once (its first copy), every pair within the
    bound of equal non-NULL keys, and on an outer side every record without a pair."""
    first: dict[tuple[Side, tuple[int, int]], tuple[str | None, Record]] = {}
    for key, r in records:
        first.setdefault((r.side, r.ident), (key, r))
    unique = list(first.values())
    out: Counter[Joined] = Counter()
    paired: set[tuple[Side, tuple[int, int]]] = set()
    for lk, lr in unique:
        for rk, rr in unique:
            pair = lr.side == LEFT and rr.side == RIGHT and lk is not None and lk == rk
            if pair and abs(lr.ts - rr.ts) <= rule.within_ms:
                out[Joined(lk, max(lr.ts, rr.ts), lr.ts, rr.ts, lr.value, rr.value)] += 1
                paired |= {(LEFT, lr.ident), (RIGHT, rr.ident)}
    for key, r in unique:
        if rule.outer(r.side) and (r.side, r.ident) not in paired:
            left, right = (r, None) if r.side == LEFT else (None, r)
            out[
                Joined(
                    key,
                    r.ts,
                    left.ts if left else None,
                    right.ts if right else None,
                    left.value if left else None,
                    right.value if right else None,
                )
            ] += 1
    return out


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES, st.integers(1, 20), st.booleans())
def test_once_the_watermark_has_passed_everything_the_output_is_the_interval_join_of_the_on_time_records(
    rule: JoinRule, history: History, delay: int, replays: bool
) -> None:
    run = play(rule, history, delay, replays)
    assert Counter(run.joined) == interval_join(rule, [(k, r) for _, k, r in run.on_time])
    assert run.states == {}


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES, st.integers(1, 20))
def test_replays_change_nothing_that_comes_out(rule: JoinRule, history: History, delay: int) -> None:
    assert Counter(play(rule, history, delay, replays=True).joined) == Counter(
        play(rule, history, delay, replays=False).joined
    )


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES, st.integers(1, 20))
def test_an_unmatched_row_comes_out_at_the_first_batch_since_its_own_whose_watermark_passes_it_by_the_bound(
    rule: JoinRule, history: History, delay: int
) -> None:
    run = play(rule, history, delay, replays=False)
    arrived = {r.value: (i, r) for i, _, r in run.on_time}
    watermarks = [w for w, _ in run.batches]
    for index, (_, out) in enumerate(run.batches):
        for j in out:
            if j.left_ts is None or j.right_ts is None:
                start, r = arrived[j.left if j.right_ts is None else j.right]
                due = next(b for b in range(start, len(watermarks)) if watermarks[b] > r.ts + rule.within_ms)
                assert index == due, (j, watermarks)


@settings(max_examples=200, deadline=None)
@given(RULES, HISTORIES, st.integers(1, 20))
def test_after_each_batch_a_key_holds_only_what_the_watermark_has_not_passed_in_event_time_order(
    rule: JoinRule, history: History, delay: int
) -> None:
    run = Run(rule, delay)
    for records, jump, _, settle in history:
        batch = [run.record(k, s, T0 + ts) for k, s, ts in records]
        run.feed(*batch, heartbeat=None if jump is None else T0 + jump, settle=settle)
        for state in run.states.values():
            assert not state.empty
            for held in (state.left, state.right):
                assert all(h.record.ts + rule.within_ms >= run.previous for h in held)
                assert [h.record.ts for h in held] == sorted(h.record.ts for h in held)
