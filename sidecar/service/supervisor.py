"""The supervisor: runs one start of the pipeline after another, until a stop or a failure.

One start of the pipeline (:class:`~sidecar.service.pipeline.Pipeline`) connects the clients,
merges until something ends it, and closes; what ended it is the run state
(:mod:`sidecar.service.run_state`). The :class:`Supervisor` owns the state across starts and runs
them: after a ``Restarting`` start it waits ``RESTART_BACKOFF_S`` and starts again. A restart that
keeps failing must not loop forever, and a cluster away for a while must not end the sidecar: it
gives up (``Failed``) once restarts have followed each other with nothing committed for longer than
the user's bound, ``delivery.timeout.ms`` (``max``: never), and at least ``MAX_RESTARTS`` times.
Any commit in between starts the count again. An operator's restart (``Stopping(then_restart)``)
drains like a stop, then starts again at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sidecar.service.health import Health
from sidecar.service.metrics import Metrics
from sidecar.service.pipeline import Pipeline
from sidecar.service.run_state import (
    MAX_RESTARTS,
    RESTART_BACKOFF_S,
    Failed,
    FatalError,
    Pause,
    Restarting,
    RunControl,
    RunState,
    Stopping,
)

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig

log = logging.getLogger("timesync")


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
