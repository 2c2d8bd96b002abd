"""The task registry: the merge tasks this replica runs, and which task owns each input partition.

A task is one :class:`~sidecar.core.MergeTask` (the merge itself), the output partition it writes
and its output (:class:`TaskOutput`, which the delivery attaches). With ``task.grouping=single``
there is one task, ``"0"``, holding every input partition and writing output partition 0; with
``partition`` task *i* holds partition *i* of every input topic and writes output partition *i*,
and tasks come and go with rebalances.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidecar.config import SidecarConfig
from sidecar.core import MergeTask, TopicPartition
from sidecar.output.encoder import OutputEncoder
from sidecar.output.writer import OutputWriter

if TYPE_CHECKING:
    from sidecar.service.topics import TopicLayout


@dataclass(eq=False)
class TaskOutput:
    """Where one task writes: its writer and its encoder.

    The delivery in force attaches one to each task it takes on
    (:meth:`Delivery.attach <sidecar.service.delivery.Delivery.attach>`) and subclasses it to keep
    what its guarantee tracks per task (a transaction; batches awaiting acknowledgement): only the
    delivery reads those, so nothing here depends on the guarantee.
    """

    writer: OutputWriter
    encoder: OutputEncoder


@dataclass(eq=False)
class TaskRun:
    """A merge task and what the pipeline tracks for it."""

    name: str
    task: MergeTask
    out_partition: int
    output: TaskOutput
    #: When the task asked to be polled again (an idle deadline, a heartbeat); ``None``: on news.
    wake_at: int | None = None


class TaskRegistry:
    """Tasks by name, and the task of each input partition."""

    def __init__(self, config: SidecarConfig, layout: TopicLayout) -> None:
        self.config = config
        self.layout = layout
        self.tasks: dict[str, TaskRun] = {}
        self._of: dict[TopicPartition, TaskRun] = {}

    def __iter__(self) -> Iterator[TaskRun]:
        return iter(list(self.tasks.values()))

    def __len__(self) -> int:
        return len(self.tasks)

    def __contains__(self, name: object) -> bool:
        return name in self.tasks

    def sorted(self) -> list[TaskRun]:
        return [self.tasks[name] for name in sorted(self.tasks)]

    def add(
        self, name: str, partitions: list[TopicPartition], out_partition: int, output: TaskOutput
    ) -> TaskRun:
        """A new task over ``partitions`` (input partitions), writing ``out_partition``."""
        cfg = self.config
        task = MergeTask(
            partitions,
            dataclasses.replace(cfg.task_config(), output_limits=self.layout.output_limits),
            topic_order=cfg.topics,
            log_append_time_topics=self.layout.log_append_time_inputs,
        )
        run = TaskRun(name, task, out_partition, output)
        self.tasks[name] = run
        for tp in partitions:
            self._of[tp] = run
        return run

    def remove(self, runs: Iterable[TaskRun]) -> None:
        for run in runs:
            self.tasks.pop(run.name, None)
            for tp in run.task.partitions:
                self._of.pop(tp, None)

    def owner(self, tp: TopicPartition) -> TaskRun | None:
        """The task of an input partition (aiokafka's TopicPartition hashes like ours)."""
        return self._of.get(tp)

    def owners(self, partitions: Iterable[TopicPartition]) -> set[TaskRun]:
        return {run for tp in partitions if (run := self._of.get(tp)) is not None}

    def wake_at(self) -> int | None:
        """The earliest time a task asked to be polled again."""
        return min((r.wake_at for r in self.tasks.values() if r.wake_at is not None), default=None)
