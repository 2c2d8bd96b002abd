"""Watermark policies per partition, and the task watermark (the minimum, never decreasing).

A watermark ``W`` is a promise about what comes next: no later output of this partition (or
task) should have a timestamp below ``W``; those that do are late. The policies follow Beam's
KafkaIO:

* ``log-append-time`` — the broker stamps records in append order, so within a partition they
  never go backwards. The watermark is the last record taken. Once the partition is empty and a
  fetch showed lag 0, every future record will be stamped after that fetch, so the watermark may
  jump to ``fetch time − epsilon`` (epsilon covers clock skew between broker and sidecar). This
  is Beam's "near-perfect" watermark.
* ``bounded-delay`` — for CreateTime, where producers may be late by up to a bound:
  ``min(now, max taken timestamp) − max delay``; when caught up and idle, ``check time − max
  delay`` so that quiet partitions do not stall the task.
* ``min-window`` — the smallest timestamp taken during the last ``window`` ms of processing
  time: the watermark follows the slowest recent record instead of a fixed bound. When caught up
  with nothing in the window, ``check time − window``.

"Taken" means emitted from the partition's buffer: records still buffered will come out later,
so a watermark based on them could be passed by our own output. "Check time" is the time of the
fetch that showed lag 0. A known watermark is never negative (Kafka rejects negative record
timestamps, and heartbeats are written with the watermark as timestamp).
"""

from __future__ import annotations

from collections import deque
from typing import Literal, Protocol

from sidecar.core.records import UNKNOWN

WatermarkPolicyName = Literal["auto", "log-append-time", "bounded-delay", "min-window"]


class PartitionWatermark(Protocol):
    def on_take(self, min_ts: int, max_ts: int, now_ms: int) -> None:
        """Records with timestamps in [min_ts, max_ts] were just taken from the partition."""
        ...

    def compute(self, now_ms: int, caught_up_at: int | None) -> int | None:
        """The policy's current value (``None``: not known yet); ``caught_up_at`` is the time of
        the fetch that showed lag 0, given only while the partition is empty and caught up."""
        ...


class LogAppendTime:
    def __init__(self, epsilon_ms: int) -> None:
        self.epsilon_ms = epsilon_ms
        self.last: int | None = None

    def on_take(self, min_ts: int, max_ts: int, now_ms: int) -> None:
        if self.last is None or max_ts > self.last:
            self.last = max_ts

    def compute(self, now_ms: int, caught_up_at: int | None) -> int | None:
        if caught_up_at is None:
            return self.last
        idle = caught_up_at - self.epsilon_ms
        return idle if self.last is None else max(self.last, idle)


class BoundedDelay:
    def __init__(self, max_delay_ms: int) -> None:
        self.max_delay_ms = max_delay_ms
        self.max_ts: int | None = None

    def on_take(self, min_ts: int, max_ts: int, now_ms: int) -> None:
        if self.max_ts is None or max_ts > self.max_ts:
            self.max_ts = max_ts

    def compute(self, now_ms: int, caught_up_at: int | None) -> int | None:
        idle = caught_up_at - self.max_delay_ms if caught_up_at is not None else None
        if self.max_ts is None:
            return idle
        bounded = min(now_ms, self.max_ts) - self.max_delay_ms
        return bounded if idle is None else max(bounded, idle)


class MinWindow:
    """Sliding minimum over (take time, min timestamp) pairs, kept as a monotonic deque."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._mins: deque[tuple[int, int]] = deque()  # increasing in both fields

    def on_take(self, min_ts: int, max_ts: int, now_ms: int) -> None:
        mins = self._mins
        while mins and mins[-1][1] >= min_ts:
            mins.pop()
        mins.append((now_ms, min_ts))

    def compute(self, now_ms: int, caught_up_at: int | None) -> int | None:
        mins = self._mins
        horizon = now_ms - self.window_ms
        while mins and mins[0][0] < horizon:
            mins.popleft()
        if mins:
            return mins[0][1]
        return caught_up_at - self.window_ms if caught_up_at is not None else None


def make_policy(
    name: WatermarkPolicyName,
    log_append_time: bool,
    max_delay_ms: int,
    window_ms: int,
    epsilon_ms: int,
) -> PartitionWatermark:
    """The policy for one partition; ``auto`` picks log-append-time for LogAppendTime topics."""
    if name == "auto":
        name = "log-append-time" if log_append_time else "bounded-delay"
    if name == "log-append-time":
        return LogAppendTime(epsilon_ms)
    if name == "bounded-delay":
        return BoundedDelay(max_delay_ms)
    return MinWindow(window_ms)


class TaskWatermark:
    """Minimum over the partitions' watermarks: unknown until every partition's is known, never
    negative once known (Kafka rejects negative timestamps), and never decreasing."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = UNKNOWN

    def advance(self, partition_values: list[int | None]) -> int:
        low: int | None = None
        for value in partition_values:
            if value is None:
                return self.value
            if low is None or value < low:
                low = value
        if low is not None and max(low, 0) > self.value:
            self.value = max(low, 0)
        return self.value
