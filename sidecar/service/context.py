"""What every part of one start of the pipeline shares, as one value.

The pipeline, its delivery, its input feed and its rebalancer all need the config, the run state
(to change it or to read it), the error policy, the metrics, the health, the clock, the client
factory and the task grouping. One frozen value carries them, so each part takes one argument for
them instead of eight, and a test builds one with its doubles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig
    from sidecar.kafka.clients import ClientFactory
    from sidecar.service.error_handler import ErrorHandler
    from sidecar.service.grouping import TaskGrouping
    from sidecar.service.health import Health
    from sidecar.service.metrics import Metrics
    from sidecar.service.run_state import RunControl


@dataclass(frozen=True, slots=True)
class StartContext:
    config: SidecarConfig
    control: RunControl
    errors: ErrorHandler
    metrics: Metrics
    health: Health
    #: Wall-clock milliseconds (the core's ``now_ms``).
    clock: Callable[[], int]
    clients: ClientFactory
    #: ``task.grouping``'s strategy, chosen once from the config (:mod:`sidecar.service.grouping`).
    grouping: TaskGrouping
