"""What :meth:`MergeTask.poll` and :meth:`MergeTask.pause_hint` return besides an ``Emit``.

Values, not actions: the adapter decides how to wait, fetch or pause; the core only says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.core.records import Emit, TopicPartition


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Nothing may go out before ``deadline_ms`` unless new facts arrive."""

    deadline_ms: int


@dataclass(frozen=True, slots=True)
class NeedFetch:
    """Blocked on these partitions until a fetch brings news: their lag is unknown, positive or
    stale (paused), or they idle forever (``max.task.idle.ms=max``) until data arrives."""

    partitions: tuple[TopicPartition, ...]
    wake_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing is buffered. Poll again at ``wake_at_ms`` (a heartbeat may be due) or on new data."""

    wake_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Write a control record carrying the task watermark; nothing else flowed for a while."""

    watermark: int


@dataclass(frozen=True, slots=True)
class PauseHint:
    """Partitions to pause and to resume on the consumer; falsy when there is nothing to do."""

    pause: tuple[TopicPartition, ...] = ()
    resume: tuple[TopicPartition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pause or self.resume)


Outcome = Emit | Heartbeat | NeedFetch | WaitUntil | Idle
