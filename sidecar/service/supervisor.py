"""The run state of the sidecar, and the supervisor that starts the pipeline again when it must.

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

The :class:`Supervisor` owns the state and runs the starts: after a ``Restarting`` start it waits
``RESTART_BACKOFF_S`` and starts again. A restart that keeps failing must not loop forever, and a
cluster away for a while must not end the sidecar: it gives up (``Failed``) once restarts have
followed each other with nothing committed for longer than the user's bound,
``delivery.timeout.ms`` (``max``: never), and at least ``MAX_RESTARTS`` times. Any commit in
between starts the count again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sidecar.service.health import Health
from sidecar.service.metrics import Metrics

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig
    from sidecar.service.pipeline import Pipeline

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


class RunControl:
    """The run state of one start, and the one way to change it.

    ``changed`` is set whenever the state leaves ``Running``, so that waits (a fetch, a backoff)
    can end early. ``stop_requested`` and ``pause`` survive restarts: they belong to the process.
    """

    def __init__(
        self, stop_requested: asyncio.Event, health: Health | None = None, pause: Pause | None = None
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


class Supervisor:
    """Runs the pipeline until a stop (returns) or a failure (raises :class:`FatalError`),
    starting it again in the process after a ``Restarting`` end."""

    def __init__(
        self,
        config: SidecarConfig,
        metrics: Metrics | None = None,
        health: Health | None = None,
        pipeline_factory: Callable[..., Pipeline] | None = None,
        backoff_s: float = RESTART_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from sidecar.service.pipeline import Pipeline

        self.config = config
        self.metrics = metrics or Metrics()
        self.health = health or Health()
        self.stop_requested = asyncio.Event()
        self.pause_state = Pause()
        self.backoff_s = backoff_s
        self.clock = clock
        self._factory: Callable[..., Pipeline] = pipeline_factory or Pipeline
        self.restarts = 0
        self.pipeline: Pipeline = self._new_pipeline(restarting=False)

    def _new_pipeline(self, restarting: bool) -> Pipeline:
        return self._factory(
            self.config,
            metrics=self.metrics,
            health=self.health,
            control=RunControl(self.stop_requested, self.health, self.pause_state),
            restarting=restarting,
        )

    @property
    def state(self) -> RunState:
        return self.pipeline.control.state

    def request_stop(self) -> None:
        self.pipeline.control.stop()

    def request_restart(self) -> bool:
        """``POST /restart``: see :meth:`RunControl.restart_cleanly`."""
        return self.pipeline.control.restart_cleanly()

    async def run(self) -> None:
        failures = 0
        since = self.clock()
        bound_s = self.config.delivery_timeout_ms / 1000
        while True:
            pipeline = self.pipeline
            await pipeline.run()
            state = pipeline.control.state
            if isinstance(state, Failed):
                raise state.error
            if state == Stopping(then_restart=True) and not self.stop_requested.is_set():
                log.info("restarting from the committed offsets, as an operator asked")
                self.restarts += 1
                self.pipeline = self._new_pipeline(restarting=True)
                continue
            if not isinstance(state, Restarting) or self.stop_requested.is_set():
                return
            if pipeline.committed_any or failures == 0:
                failures, since = 0, self.clock()
            failures += 1
            waited = self.clock() - since
            if failures > MAX_RESTARTS and waited >= bound_s:
                message = (
                    f"{state.reason}; gave up after {failures - 1} restarts in {waited:.0f} s with nothing "
                    f"committed (delivery.timeout.ms={self.config.delivery_timeout_ms})"
                )
                log.error("%s", message)
                self.health.failed(message)
                raise FatalError(message)
            log.warning(
                "%s; restarting from the committed offsets (open transactions are aborted)", state.reason
            )
            self.restarts += 1
            self.pipeline = self._new_pipeline(restarting=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_requested.wait(), self.backoff_s)

    def pause(self) -> None:
        """``PUT /pause``: stop fetching and emitting, keep the group membership (see the pipeline)."""
        if not self.pause_state.paused:
            self.pause_state.paused = True
            self.pause_state.since = int(time.time() * 1000)
            self.metrics.operator_paused.set(1)
            log.info("paused by an operator: nothing is fetched or written until resumed")

    def resume(self) -> None:
        """``PUT /resume``."""
        if self.pause_state.paused:
            self.pause_state.paused = False
            self.pause_state.since = None
            self.metrics.operator_paused.set(0)
            log.info("resumed by an operator")

    def state_name(self) -> str:
        """The run state in Kafka Connect's words: RUNNING, PAUSED, RESTARTING, STOPPING, FAILED,
        or UNASSIGNED for a replica with no task."""
        state = self.state
        if isinstance(state, Failed):
            return "FAILED"
        if isinstance(state, Restarting) or state == Stopping(then_restart=True) or self.restarting:
            return "RESTARTING"
        if isinstance(state, Stopping):
            return "STOPPING"
        if self.pause_state.paused:
            return "PAUSED"
        if self.pipeline.spare:
            return "UNASSIGNED"
        return "RUNNING"

    @property
    def restarting(self) -> bool:
        """Between a restart's decision and the new start taking its tasks."""
        return self.pipeline.restarting and not self.pipeline.started

    async def offsets(self) -> dict[str, Any] | None:
        return await self.pipeline.offsets()

    def status(self) -> dict[str, Any]:
        return {"state": self.state_name(), **self.pipeline.status()}
