"""What pauses a task's partitions: backpressure, and an operator's hold.

Both end in :func:`~sidecar.core.readiness.pause` and ``resume`` (a paused partition is not
fetched, so its lag goes stale and its idle clock stops; on resume it runs again if the task
holds records). They never conflict: while an
operator holds the task, backpressure changes nothing, and a hold pauses only the partitions
backpressure had not paused already, so each resumes only what it paused.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.merge import PartitionState
from sidecar.core.outcomes import PauseHint
from sidecar.core.readiness import pause, resume


class Holds:
    """Backpressure on ``buffered.records.per.partition``, and the operator's hold."""

    __slots__ = ("_held", "_limit", "_parts")

    def __init__(self, parts: Sequence[PartitionState], buffered_per_partition: int) -> None:
        self._parts = parts
        self._limit = buffered_per_partition
        #: While an operator holds the task: the partitions the hold paused.
        self._held: list[PartitionState] | None = None

    @property
    def held(self) -> bool:
        return self._held is not None

    def pause_hint(self, now_ms: int) -> PauseHint:
        """Pause partitions holding the limit or more; resume them below half of it. Nothing
        changes while the task is held."""
        if self._held is not None:
            return PauseHint()
        limit = self._limit
        to_pause, to_resume = [], []
        holding = self._holding()
        for p in self._parts:
            buffered = p.buffered
            if not p.paused and buffered >= limit:
                pause(p, now_ms)
                to_pause.append(p.tp)
            elif p.paused and buffered * 2 < limit:
                resume(p, now_ms, holding)
                to_resume.append(p.tp)
        return PauseHint(tuple(to_pause), tuple(to_resume))

    def hold(self, now_ms: int) -> tuple[PartitionState, ...]:
        """Pause every partition not paused already; returns those (none if already held)."""
        if self._held is not None:
            return ()
        self._held = [p for p in self._parts if not p.paused]
        for p in self._held:
            pause(p, now_ms)
        return tuple(self._held)

    def release(self, now_ms: int) -> tuple[PartitionState, ...]:
        """Resume what :meth:`hold` paused, idle clocks going on with the time they had left."""
        held, self._held = self._held or [], None
        holding = self._holding()
        for p in held:
            resume(p, now_ms, holding)
        return tuple(held)

    def _holding(self) -> bool:
        """The task holds records: resumed clocks run again at once."""
        return any(not p.empty for p in self._parts)
