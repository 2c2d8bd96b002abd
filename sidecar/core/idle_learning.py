"""``max.task.idle.ms=auto``: how long to wait for each partition, learnt from its producer's gaps.

Theory of operation
-------------------
A fixed ``max.task.idle.ms`` is a guess about every producer at once. Here each input partition
gets its own idle, learnt from what the task saw of it. The task tells it what happens in the
task's own terms (``observe`` at each poll, ``wait_for`` when judging an empty partition,
``arrival`` at a push into one); underneath, the learner hears four facts:

* **quiet** (``quiet``) — the partition is empty and a fetch showed it caught up (lag 0): a
  *quiet spell* starts, unless one already runs. Only the task's decision points report it (a
  poll, a readiness judgement), so the spell starts where the task would start an idle clock.
* **lag** (``lagging``) — a fetch showed records on the broker that are not fetched yet. KIP-695
  blocks on those anyway; the time until they are pushed measures the fetch, not the producer,
  so the spell ends and teaches nothing. A replay of history (lag > 0 throughout) teaches
  nothing at all.
* **held** (``interrupt``) — an operator holds the task: the spell's end would measure the hold,
  so it teaches nothing either.
* **arrival** (``arrived``) — records were pushed into the empty partition. If a quiet spell ran,
  its length is a *gap*, and the task says whether the first record would have been **late** had
  the task not waited: its timestamp below the task's stream time at arrival, or below the
  smallest record the task held back meanwhile (which it would have emitted without waiting).

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
not from the moment the task first held something to emit. That is also the rule for a producer
that stopped: a partition quiet for longer than its learnt idle — longer than all but the longest
5 % of its needed waits — is not waited for any more, at once, however late other data
comes in; nor is it waited for again until it delivers.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidecar.core.records import UNKNOWN

if TYPE_CHECKING:
    from sidecar.core.merge import PartitionState

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

    __slots__ = ("gaps", "idle_ms", "late_seen", "needed", "quiet_since", "seen", "untrusted")

    def __init__(self, budget_ms: int) -> None:
        #: The last :data:`WINDOW` gaps (ms) and whether each one's record would have been late.
        self.gaps: deque[tuple[int, bool]] = deque()
        #: The same window's needed waits (the gap if late, else 0), sorted.
        self.needed: list[int] = []
        #: Start of the running quiet spell; ``None`` while none runs.
        self.quiet_since: int | None = None
        #: The running spell (or the next arrival) must not be learnt from: it spans a hold.
        self.untrusted = False
        #: The wait the window gives, never above the budget.
        self.idle_ms = budget_ms
        #: Gaps learnt in total, and how many of them had a record that would have been late.
        self.seen = 0
        self.late_seen = 0


class IdleLearner:
    """The learnt idle of every input partition of one task, by partition index.

    Pure and deterministic: every method takes the time it happens at; nothing reads a clock.
    """

    def __init__(self, partitions: int, budget_ms: int) -> None:
        if budget_ms < 1:
            raise ValueError(f"max.task.idle.budget.ms must be a positive number of ms, got {budget_ms}")
        self.budget_ms = budget_ms
        self._parts = [PartitionGaps(budget_ms) for _ in range(partitions)]
        #: The latest record the task held back at its last decision point.
        self._held_max = UNKNOWN

    # -- what the task tells, in its own terms ------------------------------------------------------

    def observe(self, parts: Sequence[PartitionState], now_ms: int) -> None:
        """At each decision point (a poll): the quiet spells of partitions empty and caught up
        start here, even while the task has nothing else to emit; and the latest record held back
        is noted — what the task would have emitted by now had it not waited."""
        held = UNKNOWN
        for p in parts:
            ts = p.timestamps
            if p.head < len(ts):
                held = max(held, ts[-1])  # its largest when sorted; a record it holds anyway
            elif p.lag == 0 and not p.paused:
                self.quiet(p.index, now_ms)
        self._held_max = held

    def wait_for(self, p: PartitionState, now_ms: int) -> int:
        """The idle the readiness rule applies, at ``now_ms``, to the empty partition ``p``: what is
        left of its learnt idle. Judging a caught-up partition starts its quiet spell."""
        if p.lag == 0 and not p.paused:
            self.quiet(p.index, now_ms)
        return self.wait_ms(p.index, now_ms)

    def arrival(self, p: PartitionState, now_ms: int, stream_time: int) -> None:
        """Records reached the empty partition ``p``: its first would have been late had the task
        not waited for it if below the stream time, or below what the task held back at its last
        decision point (records pushed since, in the same fetch, would not have gone out first)."""
        self.arrived(p.index, now_ms, p.timestamps[p.head] < max(stream_time, self._held_max))

    def held(self, parts: Sequence[PartitionState]) -> None:
        """An operator holds these partitions: the spells of the empty ones span the hold."""
        for p in parts:
            if p.head == len(p.timestamps):
                self.interrupt(p.index)

    def why_idling(self, p: PartitionState, until_ms: int) -> str:
        """``blocked_by``'s reason while ``p`` is waited for, for ``/status``."""
        return f"idling until {until_ms} (caught up; max.task.idle.ms=auto: {self.basis(p.index)})"

    # -- facts ------------------------------------------------------------------------------------

    def quiet(self, i: int, now_ms: int) -> None:
        """Partition ``i`` is empty and caught up at ``now_ms``: its quiet spell runs from here,
        unless one already does."""
        g = self._parts[i]
        if g.quiet_since is None:
            g.quiet_since = now_ms

    def lagging(self, i: int) -> None:
        """A fetch showed records of ``i`` on the broker: the running spell ends unlearnt (the
        time until they arrive measures the fetch, not the producer)."""
        self._parts[i].quiet_since = None

    def interrupt(self, i: int) -> None:
        """Partition ``i`` is held while empty: its spell, and the next arrival, teach nothing."""
        g = self._parts[i]
        g.quiet_since = None
        g.untrusted = True

    def arrived(self, i: int, now_ms: int, would_be_late: bool) -> None:
        """Records reached the empty partition ``i`` at ``now_ms``; ``would_be_late``: the first of
        them would have come out late had the task not waited. A quiet spell that ran is a gap."""
        g = self._parts[i]
        since, g.quiet_since = g.quiet_since, None
        untrusted, g.untrusted = g.untrusted, False
        if since is None or untrusted:
            return
        gap = max(0, now_ms - since)
        if len(g.gaps) == WINDOW:
            g.needed.pop(bisect_left(g.needed, _needed(g.gaps.popleft())))
        g.gaps.append((gap, would_be_late))
        insort(g.needed, gap if would_be_late else 0)
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
        """Partition ``i``'s learnt idle: how long after going quiet it is waited for."""
        return self._parts[i].idle_ms

    def wait_ms(self, i: int, now_ms: int) -> int:
        """How much longer, from ``now_ms``, partition ``i`` is waited for: its idle counted from
        the start of its quiet spell (from ``now_ms`` if none runs yet), never below 0."""
        g = self._parts[i]
        since = now_ms if g.quiet_since is None else g.quiet_since
        return max(0, since + g.idle_ms - now_ms)

    def basis(self, i: int) -> str:
        """Where partition ``i``'s idle comes from, in a few words for ``/status``."""
        g = self._parts[i]
        if len(g.gaps) < WARM_UP:
            return f"no gaps learnt yet, so the budget, {self.budget_ms} ms"
        return f"{g.idle_ms} ms, learnt from {len(g.gaps)} gaps"

    def snapshot(self, i: int, now_ms: int) -> dict[str, Any]:
        """What partition ``i`` taught, for ``/status``: its idle now and the gaps behind it."""
        g = self._parts[i]
        recent = [gap for gap, _ in g.gaps]
        return {
            "idle_ms": g.idle_ms,
            "learnt": len(g.gaps) >= WARM_UP,
            "quiet_for_ms": None if g.quiet_since is None else now_ms - g.quiet_since,
            "gaps_seen": g.seen,
            "late_gaps_seen": g.late_seen,
            "recent_gaps_ms": recent[-8:],
            "window_gaps": len(recent),
            "window_max_gap_ms": max(recent, default=None),
        }


def _needed(gap: tuple[int, bool]) -> int:
    return gap[0] if gap[1] else 0
