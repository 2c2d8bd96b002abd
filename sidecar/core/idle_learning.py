"""``max.task.idle.ms=auto``: how long to wait for each partition, learnt from its producer's gaps.

Theory of operation
-------------------
A fixed ``max.task.idle.ms`` is a guess about every producer at once. Here each input partition
gets its own idle, learnt from what the task saw of it. The idle is counted, as every idle is,
from the start of the partition's *quiet spell* — its last arrival, or the first fetch that
showed it caught up (``readiness.py`` keeps that clock). So what the learner is told is one fact,
a **gap**: records reached the empty partition ``gap`` ms (on the wall clock) after its spell
began, and the first of them would, or would not, have come out **late** had the task not waited
for them (its timestamp below the task's stream time, or below the latest record the task held
back meanwhile, which it would have emitted without waiting). The rule counts the idle on its
quiet clock, which stands still while the task holds nothing: never faster than the wall clock,
so the wait is never shorter than what was learnt.

What is *not* a gap, and so teaches nothing (``LearntIdle`` in ``idle_strategy.py`` decides):

* records that reach a partition still holding records — it was not waited for;
* records after a fetch showed lag > 0: the time until they are pushed measures the fetch, not
  the producer (a lag > 0 ends the quiet spell; a replay of history, lag > 0 throughout, teaches
  nothing at all), and the spell that the caught-up fetch bringing them starts is no spell;
* the first records after an operator held the empty partition: the spell spans the hold.

The statistic
-------------
Each gap becomes the wait it *needed*: the gap itself if its record would have been late, 0 if
not (no wait was needed to keep it in order). The partition's idle is the nearest-rank
:data:`COVERED_PERCENT` (95th) percentile of the needed waits over its last :data:`WINDOW` gaps,
raised to the longest of them that is *cheap* — no longer than :data:`CHEAP_PERCENT` (10 %) of
the budget. So the contract is one sentence: had the task waited that long, at most 5 % of the
window's arrivals would have come out late, and none that a cheap wait would have kept in order.
Why this statistic:

* it counts *arrivals*, and an arrival is one push after a quiet spell, so a burst fetched at
  once is one sample, and a producer's usual spacing is what dominates — the few long pauses
  between bursts (or a restart) fall in the uncovered share instead of stretching every wait;
* the gaps of records that would have been on time cost nothing to skip, so a producer whose
  records are never overtaken is never waited for (no latency for nothing);
* the share left uncovered is for the *long* rare gaps; a rare *short* one costs little to cover.
  On steady traffic 1–3 % of a partition's arrivals come a fetch later than usual, tens of ms:
  under 5 %, the percentile alone is 0 and about one record in a thousand comes out late, which
  a fixed 100 ms keeps in order at no measurable latency (the bench's ``steady`` and ``lagging``
  workloads, 2026-11-27). Waits up to a tenth of the budget — what the user accepted for order —
  are always paid; a producer's pauses between bursts are longer, and stay uncovered;
* a window of the last :data:`WINDOW` gaps forgets a changed producer after that many gaps, keeps
  memory O(window) and the update O(window) (one sorted insert, once per gap, never per record),
  and is exactly reproducible: the same arrivals and clock give the same idle.

The idle is never above ``max.task.idle.budget.ms``. When the percentile is above it, waiting the
whole budget would keep no more records in order than waiting for the longest gap within it: the
idle is then the largest needed wait within the budget (0 if none), so a producer whose gaps all
exceed the budget (one record an hour) is not waited for at all.

The wait is counted from the start of the quiet spell, the origin of the gaps it was learnt from,
as the fixed setting's is. That is also the rule for a producer that stopped: a partition quiet
for longer than its learnt idle — longer than all but the longest 5 % of its needed waits — is
not waited for any more, at once, however late other data comes in; nor is it waited for again
until it delivers.

With fewer than :data:`WARM_UP` gaps, the idle is the budget: a sidecar that has just started
keeps order first, and waits at most what the user accepted. Which topology pays for that: a
partition that is always empty costs one budget wait, once (its spell starts once a fetch shows
it caught up, and it is not waited for again until it delivers); a replay of history costs
nothing (lag > 0 blocks per KIP-695, and teaches nothing); a quiet hour changes nothing (the
window is counted in gaps, not in time); a producer whose gaps all exceed the budget pays the
budget on each of its first :data:`WARM_UP` gaps, for nothing — hence a short warm-up: below 20
gaps the 95th percentile is the largest needed wait anyway, so 4 gaps already give the cautious
answer. Choosing 0 instead would send the first records of every new partition out of order
until it had learnt — the very thing a user of ``auto`` asked not to see.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from typing import Any

#: How many recent gaps a partition's idle is learnt from.
WINDOW = 64
#: The share of the window's arrivals the learnt idle keeps in order, in percent.
COVERED_PERCENT = 95
#: Gaps needed before the learnt idle replaces the budget.
WARM_UP = 4
#: Needed waits up to this share of the budget, in percent, are always covered, however rare.
CHEAP_PERCENT = 10


class PartitionGaps:
    """What one partition taught: its recent gaps and the idle they give."""

    __slots__ = ("gaps", "idle_ms", "late_seen", "needed", "seen")

    def __init__(self, budget_ms: int) -> None:
        #: The last :data:`WINDOW` gaps (ms) and whether each one's record would have been late.
        self.gaps: deque[tuple[int, bool]] = deque()
        #: The same window's needed waits (the gap if late, else 0), sorted.
        self.needed: list[int] = []
        #: The wait the window gives, never above the budget.
        self.idle_ms = budget_ms
        #: Gaps learnt in total, and how many of them had a record that would have been late.
        self.seen = 0
        self.late_seen = 0


class IdleLearner:
    """The learnt idle of every input partition of one task, by partition index.

    Pure and deterministic: the same gaps, in the same order, give the same idles.
    """

    def __init__(self, partitions: int, budget_ms: int) -> None:
        if budget_ms < 1:
            raise ValueError(f"max.task.idle.budget.ms must be a positive number of ms, got {budget_ms}")
        self.budget_ms = budget_ms
        self._parts = [PartitionGaps(budget_ms) for _ in range(partitions)]

    def learn(self, i: int, gap_ms: int, would_be_late: bool) -> None:
        """Records reached the empty partition ``i`` after it had been quiet for ``gap_ms``;
        ``would_be_late``: the first of them would have come out late had the task not waited."""
        g = self._parts[i]
        if len(g.gaps) == WINDOW:
            g.needed.pop(bisect_left(g.needed, _needed(g.gaps.popleft())))
        g.gaps.append((gap_ms, would_be_late))
        insort(g.needed, gap_ms if would_be_late else 0)
        g.seen += 1
        g.late_seen += would_be_late
        g.idle_ms = self._idle_of(g.needed)

    def _idle_of(self, needed: list[int]) -> int:
        """The nearest-rank :data:`COVERED_PERCENT` percentile of the sorted ``needed`` waits, at
        least the longest cheap one, kept within the budget (see the module docstring)."""
        if len(needed) < WARM_UP:
            return self.budget_ms
        rank = -(-len(needed) * COVERED_PERCENT // 100)  # ceil(n × share), in integers
        cheap = bisect_right(needed, self.budget_ms * CHEAP_PERCENT // 100)
        idle = max(needed[rank - 1], needed[cheap - 1] if cheap else 0)
        if idle <= self.budget_ms:
            return idle
        within = bisect_right(needed, self.budget_ms)
        return needed[within - 1] if within else 0

    # -- answers ----------------------------------------------------------------------------------

    def idle_ms(self, i: int) -> int:
        """Partition ``i``'s learnt idle: how long after its quiet spell starts it is waited for."""
        return self._parts[i].idle_ms

    def basis(self, i: int) -> str:
        """Where partition ``i``'s idle comes from, in a few words for ``/status``."""
        g = self._parts[i]
        if len(g.gaps) < WARM_UP:
            return f"no gaps learnt yet, so the budget, {self.budget_ms} ms"
        return f"{g.idle_ms} ms, learnt from {len(g.gaps)} gaps"

    def snapshot(self, i: int) -> dict[str, Any]:
        """What partition ``i`` taught, for ``/status``: its idle now and the gaps behind it."""
        g = self._parts[i]
        recent = [gap for gap, _ in g.gaps]
        return {
            "idle_ms": g.idle_ms,
            "learnt": len(g.gaps) >= WARM_UP,
            "gaps_seen": g.seen,
            "late_gaps_seen": g.late_seen,
            "recent_gaps_ms": recent[-8:],
            "window_gaps": len(recent),
            "window_max_gap_ms": max(recent, default=None),
        }


def _needed(gap: tuple[int, bool]) -> int:
    return gap[0] if gap[1] else 0
