"""The run state of one start of the sidecar, and the one way to change it.

Theory of operation
-------------------
One start of the pipeline (:class:`~sidecar.service.pipeline.Pipeline`) connects the clients,
merges until something ends it, and closes. What ended it is the run state, one value:

* :class:`Running` — merging.
* :class:`Stopping` — a stop was requested (SIGTERM, SIGINT): drain what is safe, commit, leave;
  or an operator asked for a restart (``POST /restart``): drain the same way, then start again.
* :class:`Restarting` — the clients cannot go on but a fresh start can (see
  :mod:`sidecar.service.failures`): close without draining and start again from the committed
  offsets. A stop requested meanwhile is remembered, and the process then leaves instead.
* :class:`Failed` — the sidecar cannot go on: close (aborting open transactions) and exit 1.

Transitions, first come first served, except that a failure always wins::

    Running  --stop-->     Stopping
    Running  --restart by an operator-->  Stopping(then_restart)
    Stopping(then_restart) --stop-->     Stopping
    Running  --restart-->  Restarting
    Stopping --restart-->  Restarting     (the clients died while draining: nothing more to drain)
    any      --fail-->     Failed         (unless already Failed: the first failure is the one told)

The :class:`~sidecar.service.supervisor.Supervisor` owns the state across starts and decides
what follows a ``Restarting`` end (``MAX_RESTARTS``, ``RESTART_BACKOFF_S``).

This module is the bottom of the service layer: every other part reads or changes the run state,
so it imports none of them (health is told through the :class:`HealthReport` it is given).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("timesync")

#: Restarts in a row, with nothing committed in between, before giving up is considered.
MAX_RESTARTS = 5
#: Pause before a restart, and between attempts to reach the cluster again.
RESTART_BACKOFF_S = 1.0


class FatalError(Exception):
    """The sidecar cannot go on; the message is the one line the user sees (exit 1)."""


@dataclass(frozen=True, slots=True)
class Running:
    pass


@dataclass(frozen=True, slots=True)
class Stopping:
    #: An operator's restart (``POST /restart``): drain as for a stop, then start again.
    then_restart: bool = False


@dataclass(frozen=True, slots=True)
class Restarting:
    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: FatalError


RunState = Running | Stopping | Restarting | Failed


@dataclass
class Pause:
    """An operator's pause (``PUT /pause``): the process's, so it survives restarts."""

    paused: bool = False
    #: Wall-clock ms of the pause, for ``/status``.
    since: int | None = None


class HealthReport(Protocol):
    """What the run state tells ``/healthz`` (:class:`~sidecar.service.health.Health`)."""

    def failed(self, message: str) -> None: ...

    def degraded(self, reason: str) -> None: ...


class RunControl:
    """The run state of one start, and the one way to change it.

    ``changed`` is set whenever the state leaves ``Running``, so that waits (a fetch, a backoff)
    can end early. ``stop_requested`` and ``pause`` survive restarts: they belong to the process.
    """

    def __init__(
        self, stop_requested: asyncio.Event, health: HealthReport | None = None, pause: Pause | None = None
    ) -> None:
        self.state: RunState = Running()
        self.stop_requested = stop_requested
        self.health = health
        self.pause = pause if pause is not None else Pause()
        self.changed = asyncio.Event()
        if stop_requested.is_set():
            self.stop()

    @property
    def running(self) -> bool:
        return isinstance(self.state, Running)

    @property
    def failed(self) -> bool:
        return isinstance(self.state, Failed)

    @property
    def healthy(self) -> bool:
        """Neither failed nor restarting: the clients may still be used (to drain, to commit)."""
        return isinstance(self.state, Running | Stopping)

    def stop(self) -> None:
        self.stop_requested.set()
        if isinstance(self.state, Running) or self.state == Stopping(then_restart=True):
            self._enter(Stopping())

    def restart_cleanly(self) -> bool:
        """An operator's restart: drain, commit, start again from the committed offsets. ``False``
        when the run is not running (stopping, restarting or failed already)."""
        if not isinstance(self.state, Running):
            return False
        self._enter(Stopping(then_restart=True))
        return True

    def restart(self, reason: str) -> None:
        if isinstance(self.state, Running | Stopping):
            self._enter(Restarting(reason))

    def fail(self, message: str) -> FatalError:
        if not isinstance(self.state, Failed):
            log.error("%s", message)
            if self.health is not None:
                self.health.failed(message)
            self._enter(Failed(FatalError(message)))
        assert isinstance(self.state, Failed)
        return self.state.error

    def _enter(self, state: RunState) -> None:
        self.state = state
        self.changed.set()
