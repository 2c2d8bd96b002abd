"""Acting on the failure table: an error judged by :func:`~sidecar.service.failures.decide`
becomes a failed or restarted run, degraded health, or a log line."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sidecar.service.failures import Action, Grouping, Guarantee, Phase, decide

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig
    from sidecar.service.run_state import RunControl

log = logging.getLogger("timesync")


class ErrorHandler:
    """Applies the table: judges an error and acts on the run state (fail, restart) or logs it.

    The caller keeps only what is local to it (forgetting a lost task's transaction, putting
    offsets back for a later commit), guided by the :class:`Action` returned.
    """

    def __init__(self, control: RunControl, config: SidecarConfig) -> None:
        self.control = control
        self.guarantee: Guarantee = config.processing_guarantee
        self.grouping: Grouping = config.task_grouping
        timeout = config.delivery_timeout_ms
        self.context = {
            "group": config.effective_group_id,
            "topic": config.output_topic,
            "bound": "max" if timeout >= 2**63 - 1 else str(timeout),
        }

    def handle(self, error: BaseException, phase: Phase, **context: str) -> Action:
        """Judge ``error`` and act: fail or restart the run, or log; a fault being retried (a
        restart, a failed commit) also shows as degraded health until the cluster answers."""
        decision = decide(error, phase, self.guarantee, self.grouping, **{**self.context, **context})
        action = decision.action
        health = self.control.health
        if action is Action.FATAL:
            self.control.fail(decision.message)
        elif action is Action.RESTART:
            self.control.restart(decision.message)
            if health is not None:
                health.degraded(f"restarting from the committed offsets: {decision.message}")
        elif action is Action.TASK_LOST:
            log.info("%s", decision.message)
        elif decision.message:
            log.warning("%s", decision.message)
            if health is not None and phase is not Phase.CLOSE:
                health.degraded(decision.message)
        return action
