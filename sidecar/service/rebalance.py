"""Assignment: which tasks this replica runs, at start and through consumer-group rebalances.

The task grouping (:mod:`sidecar.service.grouping`) says how: with ``task.grouping=single`` the
replica assigns itself every input partition (one task; no group membership, only the group's
committed offsets). With ``partition`` it subscribes to the inputs with the task assignor
(:mod:`sidecar.kafka.assignor`), which deals whole tasks to the group's members, and
:class:`Rebalancer` takes tasks on and hands them back:

* **revoked** — hand the tasks back: finish their writes and commit what is safe
  (:meth:`Delivery.hand_back <sidecar.service.delivery.Delivery.hand_back>`; under exactly-once,
  commit each task's transaction and close its producer), then forget them;
* **assigned** — take new tasks on: under exactly-once start their producers *first* (each fences
  the previous owner and completes its last transaction), then start every new task's partitions
  from the committed offsets.

Why seek on assignment: aiokafka reads the committed offsets as soon as the assignment is known,
concurrently with the callback, and may even return records before the tasks exist. Under
exactly-once those reads can be stale — a transaction the previous owner committed becomes
visible in the group's offsets a moment after its commit returns, and aiokafka cannot ask the
broker to wait for it (OffsetFetch ``require_stable``, KIP-447). So each new partition is seeked
again, to the offset read after the producers started, and the records fetched before that seek
are dropped (:meth:`InputFeed.seeked <sidecar.service.fetch.InputFeed.seeked>`).

Both callbacks run under the pipeline's lock, so they never interleave with a loop iteration.
The rebalancer sees only what it changes — the task registry, the delivery, the input feed (and
through it the consumer) — not the pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import IllegalStateError

from sidecar.core import TopicPartition
from sidecar.service.failures import CLIENT_ERRORS, Phase

if TYPE_CHECKING:
    from sidecar.service.context import StartContext
    from sidecar.service.delivery import Delivery
    from sidecar.service.fetch import InputFeed
    from sidecar.service.tasks import TaskRegistry, TaskRun

log = logging.getLogger("timesync")


class Rebalancer(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no types
    """Takes tasks on and hands them back for one start of the pipeline.

    ``lock`` is the pipeline's: held by every callback, so a callback and a loop iteration never
    interleave.
    """

    def __init__(
        self, ctx: StartContext, lock: asyncio.Lock, tasks: TaskRegistry, delivery: Delivery, feed: InputFeed
    ) -> None:
        self.ctx, self.lock, self.tasks, self.delivery, self.feed = ctx, lock, tasks, delivery, feed

    def _add(self, name: str, partitions: list[TopicPartition], out_partition: int) -> TaskRun:
        return self.tasks.add(name, partitions, out_partition, self.delivery.attach(name))

    async def assign(self, restarting: bool) -> None:
        """The start's assignment, as the task grouping takes it: every partition at once, or a
        group subscription (:meth:`TaskGrouping.assign <sidecar.service.grouping.TaskGrouping.assign>`)."""
        await self.ctx.grouping.assign(self, restarting)

    async def assign_every_partition(self, restarting: bool) -> None:
        """Take the tasks of every input partition, with no consumer group."""
        parts = self.tasks.layout.all_input_partitions()
        runs = [self._add(name, tps, out) for name, (tps, out) in self.ctx.grouping.tasks(parts).items()]
        # Before the consumer reads the committed offsets: fence a previous run, complete its
        # last transaction.
        await self.delivery.open(runs, Phase.RESTART if restarting else Phase.START)
        self.feed.consumer.assign([KafkaTopicPartition(*tp) for tp in parts])

    def subscribe(self) -> None:
        """Join the consumer group: tasks come and go with its rebalances (the callbacks below)."""
        self.feed.consumer.subscribe(self.ctx.config.topics, listener=self)

    async def on_partitions_revoked(self, revoked: set[KafkaTopicPartition]) -> None:
        async with self.lock:
            gone = self.tasks.owners(revoked)
            if not gone:
                return
            runs = sorted(gone, key=lambda r: r.name)
            await self.delivery.hand_back(runs)
            self.tasks.remove(runs)
            partitions = [tp for run in runs for tp in run.task.partitions]
            self.feed.forget(partitions)
            for run in runs:
                self.ctx.metrics.forget_task(run.name, run.task.partitions)
            log.info("tasks revoked: %s", ", ".join(run.name for run in runs))

    async def on_partitions_assigned(self, assigned: set[KafkaTopicPartition]) -> None:
        control = self.ctx.control
        async with self.lock:
            if not control.running:
                return  # leaving: starting producers now would only fence the tasks' next owners
            formed = self.ctx.grouping.tasks(TopicPartition(tp.topic, tp.partition) for tp in assigned)
            new = [self._add(name, tps, out) for name, (tps, out) in formed.items() if name not in self.tasks]
            if new:
                await self.delivery.open(new, Phase.ASSIGN)
            if new and control.running:
                await self._seek_committed(
                    self.feed.consumer, [tp for run in new for tp in run.task.partitions]
                )
            if formed:
                log.info("tasks assigned: %s", ", ".join(formed))

    async def _seek_committed(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        tps = [KafkaTopicPartition(*tp) for tp in partitions]
        try:
            committed = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
            fresh = [tp for tp, offset in zip(tps, committed, strict=True) if offset is None]
            reset: dict[KafkaTopicPartition, int] = {}
            if fresh:
                if self.ctx.config.auto_offset_reset == "earliest":
                    reset = await consumer.beginning_offsets(fresh)
                else:
                    reset = await consumer.end_offsets(fresh)
        except CLIENT_ERRORS as e:
            self.ctx.errors.handle(e, Phase.ASSIGN, task=",".join(sorted({str(tp.partition) for tp in tps})))
            return
        # One synchronous block: the seeks and the feed's seek count move together.
        seeked = []
        for tp, offset in zip(tps, committed, strict=True):
            with contextlib.suppress(IllegalStateError):  # already revoked again
                consumer.seek(tp, offset if offset is not None else reset[tp])
                seeked.append(tp)
        self.feed.seeked(seeked)
