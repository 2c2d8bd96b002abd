"""What ``/healthz`` answers: starting (503), healthy (200) or unhealthy (500), with a reason.

The sidecar is healthy while it hears from the cluster: a fetch response or a produce ack within
``silence_s``. aiokafka retries a lost broker forever and quietly, so silence is the signal that
something is wrong (the broker is down, the network is cut, credentials were revoked).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["starting", "healthy", "unhealthy"]


class Health:
    def __init__(self, silence_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.silence_s = silence_s
        self.clock = clock
        self._started = False
        self._failed: str | None = None
        self._last_contact = clock()
        self._detail = "connecting to Kafka"

    def started(self) -> None:
        self._started = True
        self._last_contact = self.clock()

    def contact(self) -> None:
        """The cluster answered (a fetch response, a produce ack)."""
        self._last_contact = self.clock()

    def failed(self, reason: str) -> None:
        self._failed = reason

    def set_detail(self, detail: str) -> None:
        self._detail = detail

    def status(self) -> tuple[State, str]:
        if self._failed is not None:
            return "unhealthy", self._failed
        if not self._started:
            return "starting", self._detail
        quiet = self.clock() - self._last_contact
        if quiet > self.silence_s:
            return "unhealthy", f"no answer from Kafka for {quiet:.0f} s (fetches and produce acks stalled)"
        return "healthy", "consuming and producing"
