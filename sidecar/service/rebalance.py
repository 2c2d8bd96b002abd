"""Assignment: which tasks this replica runs, at start and through consumer-group rebalances.

With ``task.grouping=single`` the replica assigns itself every input partition (one task; no
group membership, only the group's committed offsets). With ``partition`` it subscribes to the
inputs with the task assignor (:mod:`sidecar.kafka.assignor`), which deals whole tasks to the
group's members, and :class:`Rebalancer` takes tasks on and hands them back:

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
    from sidecar.service.pipeline import Pipeline

log = logging.getLogger("timesync")


class Rebalancer(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no types
    """Takes tasks on and hands them back for one start of the pipeline."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    async def assign(self, restarting: bool) -> None:
        """The start's assignment: every partition (``single``) or a group subscription."""
        p = self.pipeline
        consumer = p.consumer
        cfg = p.config
        if cfg.task_grouping == "single":
            parts = p.layout.all_input_partitions()
            run = p.add_task("0", parts, out_partition=0)
            # Before the consumer reads the committed offsets: fence a previous run, complete its
            # last transaction.
            await p.delivery.open([run], Phase.RESTART if restarting else Phase.START)
            consumer.assign([KafkaTopicPartition(*tp) for tp in parts])
        else:
            consumer.subscribe(cfg.topics, listener=self)

    async def on_partitions_revoked(self, revoked: set[KafkaTopicPartition]) -> None:
        p = self.pipeline
        async with p.lock:
            gone = p.tasks.owners(revoked)
            if not gone:
                return
            runs = sorted(gone, key=lambda r: r.name)
            await p.delivery.hand_back(runs)
            p.tasks.remove(runs)
            partitions = [tp for run in runs for tp in run.task.partitions]
            p.feed.forget(partitions)
            for run in runs:
                p.metrics.forget_task(run.name, run.task.partitions)
            log.info("tasks revoked: %s", ", ".join(run.name for run in runs))

    async def on_partitions_assigned(self, assigned: set[KafkaTopicPartition]) -> None:
        p = self.pipeline
        async with p.lock:
            if not p.control.running:
                return  # leaving: starting producers now would only fence the tasks' next owners
            by_index: dict[int, list[TopicPartition]] = {}
            for tp in assigned:
                by_index.setdefault(tp.partition, []).append(TopicPartition(tp.topic, tp.partition))
            new = [
                p.add_task(str(index), sorted(parts), out_partition=index)
                for index, parts in sorted(by_index.items())
                if str(index) not in p.tasks
            ]
            if new:
                await p.delivery.open(new, Phase.ASSIGN)
            if new and p.control.running:
                await self._seek_committed(p.consumer, [tp for run in new for tp in run.task.partitions])
            if by_index:
                log.info("tasks assigned: %s", ", ".join(str(i) for i in sorted(by_index)))

    async def _seek_committed(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        p = self.pipeline
        tps = [KafkaTopicPartition(*tp) for tp in partitions]
        try:
            committed = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
            fresh = [tp for tp, offset in zip(tps, committed, strict=True) if offset is None]
            reset: dict[KafkaTopicPartition, int] = {}
            if fresh:
                if p.config.auto_offset_reset == "earliest":
                    reset = await consumer.beginning_offsets(fresh)
                else:
                    reset = await consumer.end_offsets(fresh)
        except CLIENT_ERRORS as e:
            p.errors.handle(e, Phase.ASSIGN, task=",".join(sorted({str(tp.partition) for tp in tps})))
            return
        # One synchronous block: the seeks and the feed's seek count move together.
        seeked = []
        for tp, offset in zip(tps, committed, strict=True):
            with contextlib.suppress(IllegalStateError):  # already revoked again
                consumer.seek(tp, offset if offset is not None else reset[tp])
                seeked.append(tp)
        p.feed.seeked(seeked)
