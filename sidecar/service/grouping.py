"""Task grouping: how the input partitions become tasks, and what follows from it — one contract,
two groupings, chosen once from ``task.grouping``.

The pipeline, the delivery, the topic preparation and ``offsets reset`` ask the
:class:`TaskGrouping` of the run and never compare the setting's name; this module is the only
place (besides the config model, the failure table's ``grouping`` column and the ``/status``
field that reports it) that knows which groupings exist (:data:`GROUPINGS`). A grouping says:

* which tasks a set of input partitions forms, and the output partition each writes
  (:meth:`~TaskGrouping.tasks`), hence how many output partitions the run needs
  (:meth:`~TaskGrouping.output_partitions`);
* how the replica takes its tasks (:meth:`~TaskGrouping.assign`): it assigns itself every
  partition, or it joins the consumer group and lets rebalances deal the tasks;
* whether its commits carry the one-replica claim (:attr:`~TaskGrouping.claims`,
  :mod:`sidecar.service.claim`), checked at start (:meth:`~TaskGrouping.committed_at_start`);
* each task's ``transactional.id`` under exactly-once (:meth:`~TaskGrouping.transactional_id`);
* whether a replica with no task is a *spare* that probes the cluster for its health
  (:meth:`~TaskGrouping.spare`).

:class:`SingleTask` (``single``, the default): one task, ``"0"``, holds every input partition
and writes output partition 0 — one globally ordered topic. Only one replica may run it: its
commits carry the claim, and a start is refused while another host's claim is fresh.

:class:`TaskPerPartition` (``partition``): task *i* holds partition *i* of every input and writes
output partition *i*; replicas share the tasks through the consumer group (the assignor keeps a
task's partitions together), and a replica the group gives no task is a spare.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sidecar.core import TopicPartition
from sidecar.service import claim
from sidecar.service.failures import Grouping

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig

#: A task's input partitions and the output partition it writes, by task name.
Tasks = dict[str, tuple[list[TopicPartition], int]]


class Assignment(Protocol):
    """What a grouping needs to take its tasks (the pipeline's rebalancer)."""

    async def assign_every_partition(self, restarting: bool) -> None:
        """Take the tasks of every input partition at once, with no consumer group."""

    def subscribe(self) -> None:
        """Join the consumer group; tasks come and go with its rebalances."""


class TaskGrouping(abc.ABC):
    """How input partitions form tasks, and what depends on it (see the module docstring)."""

    #: The ``task.grouping`` value (the failure table's ``grouping`` column, ``/status``).
    name: ClassVar[Grouping]
    #: Whether every commit carries this replica's claim (:mod:`sidecar.service.claim`), and a
    #: start is refused while another replica's running claim is fresh.
    claims: ClassVar[bool]

    @abc.abstractmethod
    def tasks(self, partitions: Iterable[TopicPartition]) -> Tasks:
        """The tasks ``partitions`` form, by name, in the order of their output partitions."""

    @abc.abstractmethod
    def output_partitions(self, input_partitions: Mapping[str, int]) -> int:
        """Output partitions the tasks of inputs with these partition counts need."""

    @abc.abstractmethod
    def transactional_id(self, group_id: str, task: str) -> str:
        """Task ``task``'s ``transactional.id`` under ``exactly_once_v2``: what fences its
        previous owner, so it names the task (and stays what earlier versions used)."""

    @abc.abstractmethod
    async def assign(self, assignment: Assignment, restarting: bool) -> None:
        """Take this replica's tasks at start."""

    @abc.abstractmethod
    def spare(self, tasks: int) -> bool:
        """Whether a replica running ``tasks`` tasks is a spare: it gets no fetch responses, so a
        metadata round trip tells its health that the cluster still answers."""

    @abc.abstractmethod
    async def committed_at_start(
        self, admin: Any, config: SidecarConfig, now_ms: int
    ) -> dict[TopicPartition, int]:
        """Before the consumer starts: the group's committed offsets that the claim renews before
        this start commits anything (empty when the grouping writes no claim); refuses the start
        (:class:`~sidecar.service.claim.ClaimError`) while another replica runs the group."""


class SingleTask(TaskGrouping):
    """One task holds every input partition and writes output partition 0."""

    name = "single"
    claims = True

    def tasks(self, partitions: Iterable[TopicPartition]) -> Tasks:
        return {"0": (list(partitions), 0)}

    def output_partitions(self, input_partitions: Mapping[str, int]) -> int:
        return 1

    def transactional_id(self, group_id: str, task: str) -> str:
        """``<group.id>-txn``: the id earlier versions used, so a restart after an upgrade still
        fences a crashed run."""
        return f"{group_id}-txn"

    async def assign(self, assignment: Assignment, restarting: bool) -> None:
        await assignment.assign_every_partition(restarting)

    def spare(self, tasks: int) -> bool:
        return False

    async def committed_at_start(
        self, admin: Any, config: SidecarConfig, now_ms: int
    ) -> dict[TopicPartition, int]:
        guard = config.task_grouping_single_guard
        return await claim.check(admin, config.effective_group_id, now_ms, guard)


class TaskPerPartition(TaskGrouping):
    """Task *i* holds partition *i* of every input and writes output partition *i*."""

    name = "partition"
    claims = False

    def tasks(self, partitions: Iterable[TopicPartition]) -> Tasks:
        by_index: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_index.setdefault(tp.partition, []).append(tp)
        return {str(index): (sorted(parts), index) for index, parts in sorted(by_index.items())}

    def output_partitions(self, input_partitions: Mapping[str, int]) -> int:
        """One per task: the most partitions any input has."""
        return max(input_partitions.values())

    def transactional_id(self, group_id: str, task: str) -> str:
        """``<group.id>-txn-<task>``: one id per task, so replicas sharing the tasks never share one."""
        return f"{group_id}-txn-{task}"

    async def assign(self, assignment: Assignment, restarting: bool) -> None:
        assignment.subscribe()

    def spare(self, tasks: int) -> bool:
        return tasks == 0

    async def committed_at_start(
        self, admin: Any, config: SidecarConfig, now_ms: int
    ) -> dict[TopicPartition, int]:
        """Nothing: each task reads its own committed offsets once the group assigns it."""
        return {}


#: The grouping of each ``task.grouping`` value (the values ``sidecar.config`` accepts).
GROUPINGS: dict[str, TaskGrouping] = {g.name: g for g in (SingleTask(), TaskPerPartition())}


def grouping_of(config: SidecarConfig) -> TaskGrouping:
    """The grouping ``task.grouping`` chose."""
    return GROUPINGS[config.task_grouping]
