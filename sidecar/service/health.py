"""What ``/healthz`` answers: starting (503), healthy (200), degraded (200) or unhealthy (500).

* **starting** — the first start has not taken its tasks yet.
* **healthy** — the sidecar hears from the cluster: a fetch response, a produce acknowledgement
  or (a replica with no tasks) a metadata answer, within ``silence_s``.
* **degraded** — it is riding out a fault it retries by itself: no answer from Kafka for longer
  than ``silence_s`` (a broker away, a leader election, the network cut), or a restart in the
  process after a failed client, or a commit that failed and will be repeated. The reason says
  which. It is still a 200: a liveness probe must not restart a sidecar that is waiting for its
  cluster — the restart would only rebalance the group and start the wait over. The sidecar gives
  up by itself once the user's bound (``delivery.timeout.ms``) is passed.
* **unhealthy** — it has failed and is leaving (exit 1); the reason is the one line it prints.
  Or a service outside Kafka it waits for (the schema registry) has been unusable for longer than
  the bound the user gave (``schema.registry.unhealthy.after.ms``): the sidecar still retries,
  but a liveness probe should now restart it and an operator should look (the Prometheus alert
  ``TimesyncSchemaRegistryUnavailable`` says so from ``timesync_schema_registry_unavailable_seconds``).

aiokafka retries a lost broker forever and quietly, so silence is the signal that something is
wrong; any answer from the cluster clears a degradation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["starting", "healthy", "degraded", "unhealthy"]


class Health:
    def __init__(self, silence_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.silence_s = silence_s
        self.clock = clock
        self._started = False
        self._failed: str | None = None
        self._last_contact = clock()
        self._degraded: str | None = None
        self._degraded_since = 0.0
        #: A service outside Kafka the sidecar waits for (the schema registry), and since when.
        self._waiting: str | None = None
        self._waiting_since = 0.0
        self._waiting_bound: float | None = None

    def started(self) -> None:
        self._started = True
        self._last_contact = self.clock()

    def contact(self) -> None:
        """The cluster answered (a fetch response, a produce ack): any degradation is over."""
        self._last_contact = self.clock()
        self._degraded = None

    def degraded(self, reason: str) -> None:
        """A fault the sidecar retries by itself; cleared by the next answer from the cluster."""
        if self._degraded is None:
            self._degraded_since = self.clock()
        self._degraded = reason

    def waiting_for(self, reason: str | None, unhealthy_after_s: float | None = None) -> None:
        """Degraded while waiting for a service outside Kafka (``None``: it answers again), and
        unhealthy once the wait is longer than ``unhealthy_after_s`` (``None``: never). Unlike
        :meth:`degraded`, answers from the cluster do not clear it: Kafka answering says nothing
        about the schema registry."""
        if reason is not None and self._waiting is None:
            self._waiting_since = self.clock()
        self._waiting = reason
        self._waiting_bound = unhealthy_after_s

    def waiting_seconds(self) -> float:
        """How long the current wait for a service outside Kafka has lasted (0 when none)."""
        return self.clock() - self._waiting_since if self._waiting is not None else 0.0

    def failed(self, reason: str) -> None:
        self._failed = reason

    def status(self) -> tuple[State, str]:
        if self._failed is not None:
            return "unhealthy", self._failed
        if not self._started:
            return "starting", self._degraded or "connecting to Kafka"
        now = self.clock()
        if self._waiting is not None:
            waited = now - self._waiting_since
            if self._waiting_bound is not None and waited > self._waiting_bound:
                return (
                    "unhealthy",
                    f"{self._waiting} (for {waited:.0f} s, longer than the {self._waiting_bound:.0f} s "
                    "allowed; still retrying)",
                )
            return "degraded", f"{self._waiting} (for {waited:.0f} s; retrying)"
        if self._degraded is not None:
            return "degraded", f"{self._degraded} (for {now - self._degraded_since:.0f} s; retrying)"
        quiet = now - self._last_contact
        if quiet > self.silence_s:
            return (
                "degraded",
                f"no answer from Kafka for {quiet:.0f} s (fetches and produce acks stalled); retrying",
            )
        return "healthy", "consuming and producing"
