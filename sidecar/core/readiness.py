"""When a task may emit: Kafka's KIP-353 and KIP-695 idle rule for ``max.task.idle.ms``.

Theory of operation
-------------------
A task merges several partitions by timestamp. It may only emit the smallest buffered head if
no *empty* partition could still deliver something earlier. What the task knows about an empty
partition is its lag, learnt from the last fetch response (high watermark − position):

* lag unknown — nothing has been fetched yet: wait (**block**);
* lag > 0 — the data is on the broker, just not fetched yet: wait for the fetch (**block**);
* lag == 0 — the partition is truly caught up. Start an idle deadline ``now + idle`` (once; it
  is kept until data arrives) and block until it passes. After it, the partition no longer
  holds the task back, and whatever is emitted meanwhile is *enforced processing*: it may be
  out of order if the quiet partition later delivers an earlier record.

The rule is judged before each emit, so only while the task holds something to emit: a task
with every buffer empty starts no idle clock (nothing is being held back), and a quiet pair of
partitions that wakes up together is waited for like any other. Once started, a deadline is
kept until the partition delivers data, as in Kafka Streams: a partition that stayed quiet past
its deadline does not add ``idle`` ms of latency to every later record.

``max.task.idle.ms`` = ``-1`` turns the rule off (always ready while any partition has data,
nothing is ever enforced); ``0`` waits for lag knowledge but not a millisecond longer; ``max``
(any value ≥ 2^63-1) waits forever; ``auto`` waits, per partition, what ``idle_learning.py``
learnt (the task passes it in). A paused partition (backpressure) is not fetched, so its lag goes
stale: it blocks, and its idle clock is frozen — the time left is restored on resume.

This module holds the rule for one partition (:func:`judge`) and the one place a task applies
it (:class:`Gate`): before a take, as a partition runs dry during one, and for ``/status``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sidecar.core.idle_learning import IdleLearner
from sidecar.core.merge import PartitionState
from sidecar.core.records import TopicPartition

#: ``max.task.idle.ms=-1``: never wait.
IDLE_DISABLED = -1
#: ``max.task.idle.ms=max``: Long.MAX_VALUE; any value at least this large waits forever.
IDLE_FOREVER = 2**63 - 1
#: ``max.task.idle.ms=auto``: each partition's idle is learnt (``idle_learning.py``); the task
#: passes the learnt wait to this module, which never sees this value.
IDLE_AUTO = -2


class Verdict(enum.IntEnum):
    """What an empty partition means for the task right now."""

    #: The partition's idle deadline passed: it no longer blocks; emitting is enforced.
    PASSED = 0
    #: Blocks: no fetch has told us the partition's lag yet.
    LAG_UNKNOWN = 1
    #: Blocks: a fetch showed records on the broker that are not buffered yet.
    LAG_ON_BROKER = 2
    #: Blocks: caught up, waiting until the idle deadline.
    IDLING = 3
    #: Blocks: paused for backpressure; its lag is stale and its idle clock frozen.
    PAUSED = 4


def judge(p: PartitionState, now_ms: int, idle_ms: int) -> Verdict:
    """The verdict on an *empty* partition at ``now_ms``, without changing anything (for
    ``/status``); :func:`empty_partition_verdict` is the same rule, applied."""
    if p.paused:
        return Verdict.PAUSED
    if p.lag is None:
        return Verdict.LAG_UNKNOWN
    if p.lag > 0:
        return Verdict.LAG_ON_BROKER
    if idle_ms >= IDLE_FOREVER:
        return Verdict.IDLING
    deadline = p.deadline if p.deadline is not None else now_ms + idle_ms
    return Verdict.IDLING if now_ms < deadline else Verdict.PASSED


def empty_partition_verdict(p: PartitionState, now_ms: int, idle_ms: int) -> Verdict:
    """Judge an *empty* partition at ``now_ms``; starts or clears its idle deadline as Kafka does."""
    verdict = judge(p, now_ms, idle_ms)
    if verdict in (Verdict.LAG_UNKNOWN, Verdict.LAG_ON_BROKER):
        p.deadline = None
    elif p.deadline is None and verdict is not Verdict.PAUSED and idle_ms < IDLE_FOREVER:
        p.deadline = now_ms + idle_ms
    return verdict


def explain(verdict: Verdict, p: PartitionState, now_ms: int, idle_ms: int) -> str | None:
    """Why an empty partition holds its task back (``None`` when it does not), for ``/status``."""
    if verdict is Verdict.PASSED:
        return None
    if verdict is Verdict.PAUSED:
        return "paused; its lag is stale until resumed"
    if verdict is Verdict.LAG_UNKNOWN:
        return "lag unknown: no fetch response yet"
    if verdict is Verdict.LAG_ON_BROKER:
        return f"lag {p.lag} on the broker, not fetched yet"
    if idle_ms >= IDLE_FOREVER:
        return "idling: caught up, and max.task.idle.ms=max waits for data forever"
    until = p.deadline if p.deadline is not None else now_ms + idle_ms
    return f"idling until {until} (caught up; max.task.idle.ms={idle_ms})"


def pause(p: PartitionState, now_ms: int) -> None:
    """Mark ``p`` paused and freeze its idle clock."""
    if p.paused:
        return
    p.paused = True
    if p.deadline is not None:
        p.frozen_remaining = p.deadline - now_ms
        p.deadline = None


def resume(p: PartitionState, now_ms: int) -> None:
    """Mark ``p`` resumed; its idle deadline continues with the time it had left."""
    if not p.paused:
        return
    p.paused = False
    if p.frozen_remaining is not None:
        p.deadline = now_ms + p.frozen_remaining
        p.frozen_remaining = None


@dataclass(frozen=True, slots=True)
class Blockers:
    """What the empty partitions of a task say before a take.

    ``blocking``: partitions only a fetch can unblock; ``deadline``: the earliest idle deadline
    still to pass; ``enforced``: some empty partition's deadline passed already, so whatever is
    taken is enforced processing.
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

    It is judged only while the task holds something to take (an empty task starts no idle
    clock), and only for empty partitions: a partition with data never holds the task back.
    """

    __slots__ = ("enabled", "idle_ms", "learner")

    def __init__(self, idle_ms: int, learner: IdleLearner | None = None) -> None:
        self.idle_ms = idle_ms
        #: ``False`` under ``max.task.idle.ms=-1``: nothing ever holds the task back or is enforced.
        self.enabled = idle_ms != IDLE_DISABLED
        #: Under ``max.task.idle.ms=auto``: each partition's idle, as learnt (else ``None``).
        self.learner = learner

    def _idle(self, p: PartitionState, now_ms: int) -> int:
        """The idle ``p`` is judged by: the setting, or what is left of the idle ``auto`` learnt."""
        return self.idle_ms if self.learner is None else self.learner.wait_for(p, now_ms)

    def assess(self, parts: Iterable[PartitionState], now_ms: int) -> Blockers:
        """Before a take: judge every empty partition (starting idle deadlines as Kafka does)."""
        if not self.enabled:
            return NOTHING_BLOCKS
        enforced = False
        blocking: list[TopicPartition] = []
        deadline: int | None = None
        for p in parts:
            if p.head != len(p.timestamps):
                continue
            verdict = empty_partition_verdict(p, now_ms, self._idle(p, now_ms))
            if verdict is Verdict.PASSED:
                enforced = True
            elif verdict is Verdict.IDLING and p.deadline is not None:
                if deadline is None or p.deadline < deadline:
                    deadline = p.deadline
            else:  # no deadline to wait for: only a fetch bringing data can unblock
                blocking.append(p.tp)
        return Blockers(enforced, tuple(blocking), deadline)

    def passes(self, p: PartitionState, now_ms: int) -> bool:
        """During a take under an :attr:`enabled` gate, ``p`` ran dry while others still hold
        records: may the take go on? (If it does, what follows is enforced.)"""
        return empty_partition_verdict(p, now_ms, self._idle(p, now_ms)) is Verdict.PASSED

    def reasons(self, parts: Iterable[PartitionState], now_ms: int) -> list[tuple[PartitionState, str]]:
        """For ``/status``: each empty partition holding the task back, and why; changes nothing."""
        if not self.enabled:
            return []
        out = []
        for p in parts:
            if p.head == len(p.timestamps):
                reason = self._reason(p, now_ms)
                if reason is not None:
                    out.append((p, reason))
        return out

    def _reason(self, p: PartitionState, now_ms: int) -> str | None:
        learner = self.learner
        idle = self.idle_ms if learner is None else learner.wait_ms(p.index, now_ms)
        verdict = judge(p, now_ms, idle)
        if learner is None or verdict is not Verdict.IDLING:
            return explain(verdict, p, now_ms, idle)
        return learner.why_idling(p, p.deadline if p.deadline is not None else now_ms + idle)
