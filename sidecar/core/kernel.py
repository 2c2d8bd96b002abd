"""The merge kernel: the take in C, or the Python core that specifies it — chosen once per process.

Theory of operation
-------------------
What a take does is written once, in Python: ``record_queue.py`` (a partition's buffered
records), ``group.py`` (the heads, the sorted and run-by-run merges, the gate asked as
partitions run dry) and ``batch.py`` (late, refused and dead letters, the stream time). The C
kernel — ``_kernel_queue.pyx``, ``_kernel_take.pyx``, ``_kernel_taken.pyx``, built from Cython
at install — does the same over C arrays, with no Python object per record, and hands the
output encoder what it took as a :class:`~sidecar.core._kernel_taken.Taken`. Everything else
(intake, readiness, watermarks, idle strategies, commits, ``/status``) is the same Python for
both: only the queues and the take differ, and a differential test holds the two to the same
outcomes, call for call (``tests/unit/core/test_kernel_differential.py``).

A task asks :func:`make_queue` and :func:`make_group` for its parts, with ``native`` chosen
once per process by :func:`merge_name`: :data:`DEFAULT`, ``native`` — the C kernel when the
extension is built, else ``python``, the same records at a fraction of the speed. A task may
also be asked for either path (``MergeTask(native=...)``: the differential test, ``python -m
bench core --merge native,python``). Tests may set :data:`FORCED` to run one
path in a process that has both (``pytest --merge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from sidecar.core.batch import BatchDraft
from sidecar.core.config import TaskConfig
from sidecar.core.group import PartitionGroup
from sidecar.core.merge import PartitionState
from sidecar.core.readiness import Blockers, Gate
from sidecar.core.record_queue import BufferedRecords, RecordQueue
from sidecar.core.records import DeadLetter, InputRecord, Late

try:
    from sidecar.core._kernel_queue import KernelQueue
    from sidecar.core._kernel_take import KernelGroup
except ImportError:  # built at install when a C compiler is present
    KernelQueue = KernelGroup = None  # type: ignore[assignment,misc]

MergeName = Literal["native", "python"]

#: Set by tests (and only tests) to run one path in a process that has both.
FORCED: MergeName | None = None

#: The path a task takes unless asked: ``native`` means the C kernel when it is built. (Set to
#: ``python`` to run the specification everywhere: the suite passes on both, ``pytest --merge``.)
DEFAULT: MergeName = "native"


class Draft(Protocol):
    """What a take hands the task: :class:`BatchDraft`'s results, whichever take made them."""

    @property
    def records(self) -> Sequence[InputRecord]: ...
    @property
    def timestamps(self) -> Sequence[int]: ...
    @property
    def late(self) -> list[int]: ...
    @property
    def lateness(self) -> list[int]: ...
    @property
    def routed(self) -> list[Late]: ...
    @property
    def dead_letters(self) -> list[DeadLetter]: ...
    @property
    def firsts(self) -> dict[int, int]: ...
    @property
    def refused_skipped(self) -> int: ...
    @property
    def dropped_late(self) -> int: ...
    @property
    def enforced_from(self) -> int: ...
    @property
    def stream_time(self) -> int: ...
    @property
    def stream_time_before(self) -> int: ...


class TakePath(Protocol):
    """A task's partitions as a take sees them (:class:`PartitionGroup` is the reference)."""

    @property
    def has_data(self) -> bool: ...

    def arrived(self, p: PartitionState, now_ms: int) -> None: ...

    def blockers(self, now_ms: int) -> Blockers: ...

    def take(self, now_ms: int, budget: int, stream_time: int, enforced: bool) -> Draft: ...


def native_merge_available() -> bool:
    """Whether the C kernel is built."""
    return KernelGroup is not None


def merge_name() -> MergeName:
    """The merge this process runs: :data:`DEFAULT`, or what a test forced; ``python`` where the
    C kernel is not built."""
    if FORCED is not None:
        return FORCED
    return "native" if DEFAULT == "native" and native_merge_available() else "python"


def use_native(native: bool | None) -> bool:
    """``native`` as asked, or this process's choice (``None``); asking for C without it built
    is an error, never a silent fallback."""
    if native is None:
        native = merge_name() == "native"
    if native and not native_merge_available():
        raise RuntimeError("the C merge kernel is not built (no C compiler at install?)")
    return native


def make_queue(native: bool) -> BufferedRecords:
    """An empty queue for one partition's buffered records."""
    return KernelQueue() if native else RecordQueue()


def make_group(parts: Sequence[PartitionState], gate: Gate, config: TaskConfig, native: bool) -> TakePath:
    """The take over ``parts`` (whose queues :func:`make_queue` made with the same ``native``)."""
    if native:
        group: TakePath = KernelGroup(parts, gate, config)
        return group
    return PartitionGroup(parts, gate, config)


def empty_draft(config: TaskConfig, now_ms: int, stream_time: int) -> Draft:
    """A draft with nothing taken (a batch of dead letters alone)."""
    return BatchDraft(config, now_ms, stream_time)
