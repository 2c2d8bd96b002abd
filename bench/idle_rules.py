"""The idle rule timesync replaced in issue 34 — Kafka Streams' — kept for the benchmark only.

Kafka Streams (``PartitionGroup.readyToProcess``) starts a partition's idle wait when it first
finds the partition empty and caught up while the task holds records — when its buffer *runs
dry* — and keeps it until the partition delivers. timesync now counts from the partition's last
arrival (``sidecar/core/readiness.py``). ``python -m bench idle-backlog`` measures what that
saves, so it must run the old rule beside the new one, in the same run, on the same broker.

Why a bench-only strategy object rather than a switch in the sidecar: the old rule is not a
product feature. A config key would be one more setting to document, validate and support, and
would invite users to pick a rule the project considers wrong; an internal switch would still be
dead code in the core that a C merge kernel must either copy or ignore. Here the rule is one
:class:`~sidecar.core.readiness.IdleStrategy` — the interface every setting already goes
through — and a launcher that runs the unchanged sidecar with it::

    python -m bench.idle_rules --set max.task.idle.ms=500 --set ...   # as python -m sidecar

The launcher replaces ``sidecar.core.task.make_idle``, the one place a task chooses its idle
strategy, in its own process only; ``max.task.idle.ms`` ``-1``, ``max`` and ``auto`` keep their
strategies (the old rule differs only for ``0`` and ``N``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sidecar.core.idle_strategy import make_idle
from sidecar.core.merge import PartitionState
from sidecar.core.readiness import IDLE_FOREVER, IdleStrategy


class RunDryIdle(IdleStrategy):
    """Kafka Streams' rule: wait ``ms`` from the moment the partition is first judged empty, caught
    up and not paused while the task holds records — a poll finding it so, or a take running it
    dry — and forget that moment once it holds records again or falls behind.

    Expressed through the rule's own clock (``readiness.passes_at`` is ``counted_from + idle``):
    the idle answered is ``dry_since + ms − counted_from``, so the wait ends ``ms`` after the
    run-dry moment, on the wall clock, as the old deadline did. Unlike timesync's strategies it
    changes state when asked (Kafka Streams' ``idlePartitionDeadlines.putIfAbsent``): a take runs
    within one poll, at that poll's time, so the time of the last poll is the run-dry moment.
    Not modelled: the old rule froze a deadline while its partition was paused; a backlog's drain
    pauses only full partitions, never one being waited for.
    """

    __slots__ = ("_dry_since", "_now", "ms")

    def __init__(self, ms: int) -> None:
        self.ms = ms
        self._dry_since: dict[int, int] = {}
        self._now = 0

    def idle_ms(self, p: PartitionState) -> int:
        if p.counted_from is None or p.stopped_at is not None or p.lag != 0:
            return self.ms  # behind, paused or the task holding nothing: not waited for now
        # Asked while it still holds records only as the take is about to run it dry.
        since = self._dry_since.setdefault(p.index, self._now)
        return since + self.ms - p.counted_from

    def basis(self, p: PartitionState) -> str:
        return f"max.task.idle.ms={self.ms}, Kafka Streams' rule (from when its buffer ran dry)"

    def observe(self, parts: Sequence[PartitionState], now_ms: int) -> None:
        self._now = now_ms
        holding = any(not p.empty for p in parts)
        for p in parts:
            if not p.empty or p.lag != 0:
                self._dry_since.pop(p.index, None)
            elif holding and not p.paused:
                self._dry_since.setdefault(p.index, now_ms)


def old_rule(max_task_idle_ms: int, budget_ms: int, partitions: int) -> IdleStrategy:
    """``make_idle`` with Kafka Streams' rule for ``0`` and ``N``."""
    if 0 <= max_task_idle_ms < IDLE_FOREVER:
        return RunDryIdle(max_task_idle_ms)
    return make_idle(max_task_idle_ms, budget_ms, partitions)


def main(argv: list[str] | None = None) -> int:
    """Run the sidecar, as ``python -m sidecar`` does, with :func:`old_rule` for its tasks."""
    import sidecar.core.task
    from sidecar.cli import main as sidecar_main

    sidecar.core.task.make_idle = old_rule  # type: ignore[attr-defined]
    return sidecar_main(argv)


if __name__ == "__main__":
    sys.exit(main())
