"""A cap on the dead letter queue, so that a bad deploy cannot route everything there.

With ``errors.tolerance=all`` a record that cannot be processed goes to the DLQ and the sidecar
carries on. That is right for the odd malformed record and wrong when a producer starts writing
a new format: then *every* record would quietly leave the ordered stream. So the share of
failing records among the last ``window`` is watched, and above ``max_ratio`` the task stops.
The share is judged once at least ``min_records`` have been seen, so one bad record at start
does not count as 100 %.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class DeadLetterRatioExceeded(Exception):
    def __init__(self, failed: int, window: int, max_ratio: float) -> None:
        super().__init__(
            f"{failed} of the last {window} records failed ({failed / window:.0%}), above "
            f"errors.deadletterqueue.max.ratio={max_ratio}: stopping rather than routing the stream "
            f"to the dead letter queue"
        )
        self.failed = failed
        self.window = window


class DeadLetterBudget:
    __slots__ = ("_failures", "max_ratio", "min_records", "seen", "window")

    def __init__(self, max_ratio: float, window: int = 1000, min_records: int = 100) -> None:
        self.max_ratio = max_ratio
        self.window = window
        self.min_records = min_records
        self.seen = 0
        self._failures: deque[int] = deque()  # positions (in arrival order) of failed records

    def observe(self, count: int, failed_at: Iterable[int] = ()) -> None:
        """``count`` records arrived; ``failed_at`` are the indices among them that failed."""
        base = self.seen
        self._failures.extend(base + i for i in failed_at)
        self.seen = base + count
        horizon = self.seen - self.window
        failures = self._failures
        while failures and failures[0] < horizon:
            failures.popleft()
        span = min(self.seen, self.window)
        if failures and span >= self.min_records and len(failures) > self.max_ratio * span:
            raise DeadLetterRatioExceeded(len(failures), span, self.max_ratio)
