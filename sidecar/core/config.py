"""``TaskConfig``: the merge settings of one task, the core's view of the sidecar's config keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sidecar.core.readiness import IDLE_AUTO, IDLE_DISABLED
from sidecar.core.timestamps import (
    BrokerTimestampLimits,
    ErrorTolerance,
    InvalidPolicy,
    RecordTimestamp,
    TimestampExtractor,
)
from sidecar.core.watermarks import WatermarkPolicyName

LatePolicy = Literal["forward", "drop", "topic"]


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """The merge settings of one task (the core's view of the sidecar's config keys)."""

    #: -1, 0, N, ``IDLE_FOREVER``, or ``IDLE_AUTO`` (learnt per partition, within the budget);
    #: the task turns it into its idle strategy once (``idle_strategy.make_idle``).
    max_task_idle_ms: int = 0
    #: Under ``IDLE_AUTO``: the most a partition is waited for.
    max_task_idle_budget_ms: int = 1000
    buffered_records_per_partition: int = 1000
    extractor: TimestampExtractor = field(default_factory=RecordTimestamp)
    timestamp_invalid: InvalidPolicy = "fail"
    errors_tolerance: ErrorTolerance = "none"
    dlq_max_ratio: float = 0.5
    late_records: LatePolicy = "forward"
    watermark_policy: WatermarkPolicyName = "auto"
    watermark_max_delay_ms: int = 5000
    watermark_window_ms: int = 60000
    watermark_idle_epsilon_ms: int = 2000
    watermark_heartbeat_ms: int = 1000
    #: What the output topic's broker accepts (``None``: anything — a LogAppendTime output).
    output_limits: BrokerTimestampLimits | None = None

    def __post_init__(self) -> None:
        if self.max_task_idle_ms < IDLE_DISABLED and self.max_task_idle_ms != IDLE_AUTO:
            raise ValueError(f"max.task.idle.ms must be -1, 0, positive or auto, got {self.max_task_idle_ms}")
        if self.max_task_idle_budget_ms < 1:
            raise ValueError(f"max.task.idle.budget.ms must be positive, got {self.max_task_idle_budget_ms}")
        if self.buffered_records_per_partition < 1:
            got = self.buffered_records_per_partition
            raise ValueError(f"buffered.records.per.partition must be at least 1, got {got}")

    @property
    def refusal_stops(self) -> bool:
        """A time the output topic would refuse stops the sidecar, rather than being dropped
        (``timestamp.invalid=skip``) or dead-lettered (``errors.tolerance=all``)."""
        return self.timestamp_invalid != "skip" and self.errors_tolerance == "none"
