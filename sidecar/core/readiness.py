"""When a task may emit: the idle rule for ``max.task.idle.ms`` (KIP-353, KIP-695), counted from
each partition's last arrival.

Theory of operation
-------------------
A task merges several partitions by timestamp. It may only emit the smallest buffered head if no
*empty* partition could still deliver something earlier. What it knows of an empty partition is
its lag, learnt from the last fetch response (high watermark − position), and how long it has
been *quiet*. The verdict on an empty partition, with its idle ``I`` (the task's
:class:`IdleStrategy` answers it):

=============================================  =================================================
the partition                                  verdict
=============================================  =================================================
paused (backpressure, an operator's hold)      blocks: its lag is stale (``PAUSED``)
lag unknown: no fetch response yet             blocks until a fetch (``LAG_UNKNOWN``)
lag > 0: records on the broker, not fetched    blocks until a fetch (``LAG_ON_BROKER``)
lag 0, ``I`` ≥ 2^63−1 (``max``)                blocks until it delivers (``IDLING``, no deadline)
lag 0, quiet for less than ``I``               blocks until ``counted_from + I`` (``IDLING``)
lag 0, quiet for ``I`` or longer               passes (``PASSED``): what goes out is *enforced*
=============================================  =================================================

``max.task.idle.ms=-1`` turns the rule off: nothing blocks, nothing is enforced.

The quiet clock
---------------
A partition's quiet spell begins at its **last arrival** — the last fetch that brought it
records — or, when none came since its lag was unknown or positive (or ever), at the first fetch
that showed it caught up. Its quiet time is counted from there, but only while the clock runs:
the clock **stands still** while the partition is paused (not fetched, so nothing could have
been seen arriving) and while the task holds no record at all (nothing is held back, so nothing
is being waited for). Each partition keeps ``quiet_since`` (when the spell began, for
``/status``), ``counted_from`` (the clock's origin: quiet time = clock − ``counted_from``) and
``stopped_at`` (``None`` while the clock runs); its *clock* reads ``now`` while running, else
``stopped_at``.

==========================================  ======================================================
event at ``now``                            effect
==========================================  ======================================================
a fetch shows lag > 0                       not quiet: ``quiet_since = counted_from = None``
a fetch shows lag 0, not quiet yet          the spell begins: ``quiet_since = now``,
                                            ``counted_from = clock``; an empty fetch of a quiet
                                            partition changes nothing
records arrive (a push), lag 0              the spell begins again, as above (even if the intake
                                            then skips or dead-letters them all)
pause; the task holds nothing any more      the clock stops: ``stopped_at = now`` (if running)
resume while the task holds records; the    the clock runs again: ``counted_from += now −
task holds records again (not paused)       stopped_at``; ``stopped_at = None``
==========================================  ======================================================

A task starts holding nothing: every clock starts stopped.

Why from the last arrival
-------------------------
Kafka Streams (``PartitionGroup.readyToProcess``) starts a partition's idle deadline when it
first finds the partition empty and caught up — when its *buffer runs dry*. A backlog's partitions
run dry one after another, as the merge reaches the end of each, so each of them adds one idle:
``(N − 1) × idle`` after every restart, rebalance or burst end (17.8 s of tail in the demo's 8
partitions at 2500 ms). Counted from the last arrival, the rule acts on the same information —
the producer was silent for the whole idle while the task waited — and a backlog pays one idle
at most: by the time the merge reaches the end of a partition, its quiet spell has been counted
since its records were fetched. What it gives up: the time a partition's own buffer took to
drain counts as quiet, so a partition that went silent while the task was busy with its records
is not waited for again when the task next holds records.

Why the clock stops while the task holds nothing: a partition quiet before any record reached
the task — the inputs of a sidecar that just started, a quiet night — would otherwise have been
quiet "for the idle" when the first record comes, and be passed at once, though its producer
may be a moment behind the other (the demo's lagging partition: 6,619 records out of order at
its start). Kafka Streams' deadlines, which run whenever the task is polled, pass it at once
there. Here, as before, a quiet pair that wakes up together is waited for like any other.

Every other rule is Kafka's: lag unknown or > 0 never passes, however long it lasts (a replay of
history is never enforced); an empty fetch does not restart the spell; a paused partition blocks.
The verdict is pure: judging a partition changes nothing, so ``/status`` and the take ask the
same question and get the same answer.

This module holds the clock's events (:func:`fetched`, :func:`arrived`, :func:`pause`,
:func:`resume`, :func:`task_holds`, :func:`task_empty`), the verdict (:func:`judge`), the
interface through which each setting gives its idle (:class:`IdleStrategy`; the settings'
strategies are in ``idle_strategy.py``) and the one place a task applies the rule
(:class:`Gate`): before a take, as a partition runs dry during one, and for ``/status``.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sidecar.core.merge import PartitionState
from sidecar.core.records import TopicPartition

#: ``max.task.idle.ms=-1``: never wait.
IDLE_DISABLED = -1
#: ``max.task.idle.ms=max``: Long.MAX_VALUE; any value at least this large waits forever.
IDLE_FOREVER = 2**63 - 1
#: ``max.task.idle.ms=auto``: each partition's idle is learnt (``idle_learning.py``).
IDLE_AUTO = -2


class IdleStrategy(ABC):
    """How long an empty, caught-up partition is waited for, counted from its quiet spell's start.

    The hooks are called by the task at the moments named; the default is to ignore them.
    """

    __slots__ = ()

    #: ``False`` only under ``max.task.idle.ms=-1``: nothing holds a task back, nothing is enforced.
    enabled: ClassVar[bool] = True

    @abstractmethod
    def idle_ms(self, p: PartitionState) -> int:
        """``p``'s idle now: it passes once quiet this long; :data:`IDLE_FOREVER` or more: never."""

    @abstractmethod
    def basis(self, p: PartitionState) -> str:
        """The setting behind ``p``'s idle, in a few words for ``/status``'s reasons."""

    def observe(self, parts: Sequence[PartitionState], now_ms: int) -> None:
        """A poll at ``now_ms``, before the gate judges ``parts``."""
        return None

    def arrival(self, p: PartitionState, silent_ms: int | None, stream_time: int) -> None:
        """Records reached the empty partition ``p`` after its producer was silent ``silent_ms``
        on the wall clock (``None``: it was not caught up), before its quiet spell begins again."""
        return None

    def held(self, parts: Sequence[PartitionState]) -> None:
        """An operator holds the task: ``parts`` are paused by the hold."""
        return None

    def snapshot(self, p: PartitionState, quiet_ms: int | None) -> dict[str, Any] | None:
        """What ``/status`` shows of this strategy for ``p``, whose counted quiet time is
        ``quiet_ms`` (``None``: nothing beyond the config)."""
        return None


class Verdict(enum.IntEnum):
    """What an empty partition means for the task right now."""

    #: Quiet for its whole idle: it no longer blocks; emitting is enforced.
    PASSED = 0
    #: Blocks: no fetch has told us the partition's lag yet.
    LAG_UNKNOWN = 1
    #: Blocks: a fetch showed records on the broker that are not buffered yet.
    LAG_ON_BROKER = 2
    #: Blocks: caught up, quiet for less than its idle (or waited for forever).
    IDLING = 3
    #: Blocks: paused for backpressure; its lag is stale and its idle clock frozen.
    PAUSED = 4


# -- the quiet clock --------------------------------------------------------------------------------


def clock(p: PartitionState, now_ms: int) -> int:
    """``p``'s clock: ``now_ms`` while it runs, else the moment it stopped."""
    return now_ms if p.stopped_at is None else p.stopped_at


def _begin(p: PartitionState, now_ms: int) -> None:
    p.quiet_since = now_ms
    p.counted_from = clock(p, now_ms)


def fetched(p: PartitionState, lag: int, now_ms: int) -> None:
    """A fetch response at ``now_ms`` showed ``p``'s lag (≥ 0)."""
    p.lag = lag
    if lag > 0:
        p.quiet_since = p.counted_from = None
    elif p.quiet_since is None:
        _begin(p, now_ms)


def arrived(p: PartitionState, now_ms: int) -> None:
    """Records of ``p`` were pushed at ``now_ms``: its quiet spell begins again (if caught up)."""
    if p.lag == 0:
        _begin(p, now_ms)


def _stop(p: PartitionState, now_ms: int) -> None:
    if p.stopped_at is None:
        p.stopped_at = now_ms


def _run(p: PartitionState, now_ms: int) -> None:
    if p.stopped_at is None:
        return
    if p.counted_from is not None:
        p.counted_from += now_ms - p.stopped_at
    p.stopped_at = None


def pause(p: PartitionState, now_ms: int) -> None:
    """``p`` is paused: it is not fetched, so its lag goes stale, and its clock stops."""
    p.paused = True
    _stop(p, now_ms)


def resume(p: PartitionState, now_ms: int, task_holds_records: bool) -> None:
    """``p`` is fetched again; its clock runs again if the task holds records."""
    p.paused = False
    if task_holds_records:
        _run(p, now_ms)


def task_holds(parts: Iterable[PartitionState], now_ms: int) -> None:
    """The task holds records again, after holding none: the clocks of its unpaused partitions
    run again."""
    for p in parts:
        if not p.paused:
            _run(p, now_ms)


def task_empty(parts: Iterable[PartitionState], now_ms: int) -> None:
    """The task holds no record any more: nothing is waited for, every clock stops."""
    for p in parts:
        _stop(p, now_ms)


def quiet_for(p: PartitionState, now_ms: int) -> int | None:
    """The quiet time counted for ``p`` at ``now_ms``, what the rule judges (``None``: it is not
    caught up)."""
    return None if p.counted_from is None else clock(p, now_ms) - p.counted_from


def silent_for(p: PartitionState, now_ms: int) -> int | None:
    """How long, on the wall clock, since ``p``'s quiet spell began at ``now_ms`` — its producer's
    silence as far as the task knows, clock stopped or not (``None``: it is not caught up)."""
    return None if p.quiet_since is None else now_ms - p.quiet_since


# -- the verdict ------------------------------------------------------------------------------------


def passes_at(p: PartitionState, idle_ms: int) -> int | None:
    """When ``p``, empty, stops blocking if its clock keeps running: ``counted_from + idle``;
    ``None`` when waiting alone will not change its verdict (lag unknown or > 0, idle ``max``) or
    its clock stands still (paused; the task holding nothing). ``max`` is never added to a time
    (Kafka Streams' ``now + idle`` overflows there)."""
    if p.stopped_at is not None or p.lag != 0 or p.counted_from is None or idle_ms >= IDLE_FOREVER:
        return None
    return p.counted_from + idle_ms


def judge(p: PartitionState, now_ms: int, idle_ms: int) -> Verdict:
    """The verdict on an *empty* partition at ``now_ms`` with idle ``idle_ms`` (the table above).
    Pure: it changes nothing."""
    if p.paused:
        return Verdict.PAUSED
    if p.lag is None:
        return Verdict.LAG_UNKNOWN
    if p.lag > 0:
        return Verdict.LAG_ON_BROKER
    at = passes_at(p, idle_ms)
    return Verdict.IDLING if at is None or now_ms < at else Verdict.PASSED


def explain(verdict: Verdict, p: PartitionState, idle: IdleStrategy) -> str | None:
    """Why an empty partition holds its task back (``None`` when it does not), for ``/status``."""
    if verdict is Verdict.PASSED:
        return None
    if verdict is Verdict.PAUSED:
        return "paused; its lag is stale and its idle clock stopped until resumed"
    if verdict is Verdict.LAG_UNKNOWN:
        return "lag unknown: no fetch response yet"
    if verdict is Verdict.LAG_ON_BROKER:
        return f"lag {p.lag} on the broker, not fetched yet"
    at = passes_at(p, idle.idle_ms(p))
    if at is None:
        return f"idling: caught up, and {idle.basis(p)} waits for data forever"
    return f"idling until {at} (quiet since {p.quiet_since}; {idle.basis(p)})"


# -- across a task ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Blockers:
    """What the empty partitions of a task say before a take.

    ``blocking``: partitions only a fetch (or data, or a resume) can unblock; ``deadline``: the
    earliest time an idling partition passes; ``enforced``: some empty partition passed already,
    so whatever is taken is enforced processing.
    """

    enforced: bool = False
    blocking: tuple[TopicPartition, ...] = ()
    deadline: int | None = None

    @property
    def ready(self) -> bool:
        return not self.blocking and self.deadline is None


#: A task with ``max.task.idle.ms=-1``, or one with nothing to take, is never held back.
NOTHING_BLOCKS = Blockers()


class Gate:
    """The idle rule applied across one task's partitions: every readiness decision goes here.

    Only empty partitions are judged: a partition with data never holds the task back. The task
    asks only while it holds something to take; the partitions' quiet clocks run regardless.
    """

    __slots__ = ("enabled", "idle")

    def __init__(self, idle: IdleStrategy) -> None:
        self.idle = idle
        #: ``False`` under ``max.task.idle.ms=-1``: nothing ever holds the task back or is enforced.
        self.enabled = idle.enabled

    def assess(self, parts: Iterable[PartitionState], now_ms: int) -> Blockers:
        """Before a take: judge every empty partition."""
        if not self.enabled:
            return NOTHING_BLOCKS
        enforced = False
        blocking: list[TopicPartition] = []
        deadline: int | None = None
        for p in parts:
            if not p.empty:
                continue
            idle = self.idle.idle_ms(p)
            verdict = judge(p, now_ms, idle)
            if verdict is Verdict.PASSED:
                enforced = True
                continue
            at = passes_at(p, idle) if verdict is Verdict.IDLING else None
            if at is None:  # no time to wait for: only a fetch, data or a resume can unblock
                blocking.append(p.tp)
            elif deadline is None or at < deadline:
                deadline = at
        return Blockers(enforced, tuple(blocking), deadline)

    def passes(self, p: PartitionState, now_ms: int) -> bool:
        """During a take under an :attr:`enabled` gate, ``p`` ran dry while others still hold
        records: may the take go on? (If it does, what follows is enforced.)"""
        return judge(p, now_ms, self.idle.idle_ms(p)) is Verdict.PASSED

    def passes_at(self, p: PartitionState) -> int | None:
        """When ``p`` would stop holding the task back, were it empty (``None``: not by waiting,
        or never held back under ``-1``), for ``/status``."""
        return passes_at(p, self.idle.idle_ms(p)) if self.enabled else None

    def reasons(self, parts: Iterable[PartitionState], now_ms: int) -> list[tuple[PartitionState, str]]:
        """For ``/status``: each empty partition holding the task back, and why."""
        if not self.enabled:
            return []
        out = []
        for p in parts:
            if p.empty:
                reason = explain(judge(p, now_ms, self.idle.idle_ms(p)), p, self.idle)
                if reason is not None:
                    out.append((p, reason))
        return out
