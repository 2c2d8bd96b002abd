"""How long a task waits for a quiet partition: ``max.task.idle.ms`` as a strategy object.

The idle rule (``readiness.py``) is one rule for every setting: an empty partition that is caught
up passes once it has been quiet for *its idle*, counted from the start of its quiet spell. Only
the idle differs, and an :class:`~sidecar.core.readiness.IdleStrategy` (the interface, beside the
rule it serves) answers it: the same number for every partition
(:class:`FixedIdle`: ``0``, ``N``, ``max``), a number learnt per partition (:class:`LearntIdle`,
``auto``), or no waiting at all (:class:`NoIdle`, ``-1``). The task chooses one, once, from its
config (:func:`make_idle`), and tells it what happens — each poll, records reaching an empty
partition, an operator's hold — without asking which one it holds.

Why an object rather than a branch per setting: the task, the gate and ``/status`` then read the
same whatever the setting, and a new way of choosing the idle is one class here, not a condition
in each of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.core.idle_learning import IdleLearner
from sidecar.core.merge import PartitionState
from sidecar.core.readiness import IDLE_AUTO, IDLE_DISABLED, IDLE_FOREVER, IdleStrategy
from sidecar.core.records import UNKNOWN


class NoIdle(IdleStrategy):
    """``max.task.idle.ms=-1``: the rule is off; the task emits whenever any partition has data."""

    __slots__ = ()
    enabled = False

    def idle_ms(self, p: PartitionState) -> int:
        return 0

    def basis(self, p: PartitionState) -> str:
        return f"max.task.idle.ms={IDLE_DISABLED}"


class FixedIdle(IdleStrategy):
    """``max.task.idle.ms`` = ``0``, ``N`` or ``max``: every partition is waited for as long."""

    __slots__ = ("ms",)

    def __init__(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a fixed max.task.idle.ms is 0 or more, got {ms}")
        self.ms = ms

    def idle_ms(self, p: PartitionState) -> int:
        return self.ms

    def basis(self, p: PartitionState) -> str:
        return f"max.task.idle.ms={'max' if self.ms >= IDLE_FOREVER else self.ms}"


class LearntIdle(IdleStrategy):
    """``max.task.idle.ms=auto``: each partition's idle as :class:`IdleLearner` learnt it.

    Turns what the task tells into gaps: records reaching an empty partition that was quiet (and
    trusted: no operator's hold in the spell) are a gap, late if their first record is below the
    stream time or below the latest record the task held back at its last poll. Gaps are the
    producer's silences on the wall clock; the rule counts the learnt idle on the quiet clock,
    which stands still while the task holds nothing — so the wait is never shorter than learnt.
    """

    __slots__ = ("_held_max", "_untrusted", "learner")

    def __init__(self, partitions: int, budget_ms: int) -> None:
        self.learner = IdleLearner(partitions, budget_ms)
        #: The latest record the task held back at its last poll.
        self._held_max = UNKNOWN
        #: Partitions whose running spell spans a hold: their next arrival teaches nothing.
        self._untrusted = [False] * partitions

    def idle_ms(self, p: PartitionState) -> int:
        return self.learner.idle_ms(p.index)

    def basis(self, p: PartitionState) -> str:
        return f"max.task.idle.ms=auto: {self.learner.basis(p.index)}"

    def observe(self, parts: Sequence[PartitionState], now_ms: int) -> None:
        """Notes the latest record held back: what the task would have emitted by now had it not
        waited."""
        held = UNKNOWN
        for p in parts:
            if not p.empty:
                held = max(held, p.queue.last_timestamp())  # its largest when sorted; held anyway
        self._held_max = held

    def arrival(self, p: PartitionState, silent_ms: int | None, stream_time: int) -> None:
        """A gap — the producer's silence, on the wall clock — unless the spell spans a hold, or
        began with the very fetch that ends it (the partition was behind, not quiet)."""
        untrusted, self._untrusted[p.index] = self._untrusted[p.index], False
        if silent_ms is None or silent_ms <= 0 or untrusted:
            return
        late = p.queue.head_timestamp() < max(stream_time, self._held_max)
        self.learner.learn(p.index, silent_ms, late)

    def held(self, parts: Sequence[PartitionState]) -> None:
        for p in parts:
            if p.empty:
                self._untrusted[p.index] = True

    def snapshot(self, p: PartitionState, quiet_ms: int | None) -> dict[str, Any]:
        return {**self.learner.snapshot(p.index), "quiet_for_ms": quiet_ms}


def make_idle(max_task_idle_ms: int, budget_ms: int, partitions: int) -> IdleStrategy:
    """The strategy for a task's ``max.task.idle.ms`` (and, under ``auto``, its budget)."""
    if max_task_idle_ms == IDLE_AUTO:
        return LearntIdle(partitions, budget_ms)
    if max_task_idle_ms == IDLE_DISABLED:
        return NoIdle()
    return FixedIdle(max_task_idle_ms)
