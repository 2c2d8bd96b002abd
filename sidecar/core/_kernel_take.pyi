from collections.abc import Sequence

from sidecar.core._kernel_taken import Taken, TakenTimes
from sidecar.core.config import TaskConfig
from sidecar.core.merge import PartitionState
from sidecar.core.readiness import Blockers, Gate
from sidecar.core.records import DeadLetter, Late

class KernelDraft:
    records: Taken
    timestamps: TakenTimes
    late: list[int]
    lateness: list[int]
    routed: list[Late]
    dead_letters: list[DeadLetter]
    firsts: dict[int, int]
    refused_skipped: int
    dropped_late: int
    enforced_from: int
    stream_time: int
    stream_time_before: int

class KernelGroup:
    def __init__(self, parts: Sequence[PartitionState], gate: Gate, config: TaskConfig) -> None: ...
    @property
    def has_data(self) -> bool: ...
    def arrived(self, p: PartitionState, now_ms: int) -> None: ...
    def blockers(self, now_ms: int) -> Blockers: ...
    def take(self, now_ms: int, budget: int, stream_time: int, enforced: bool) -> KernelDraft: ...
