"""Fetching: what the consumer returns, turned into facts and records for the merge tasks.

Each loop iteration fetches a batch of records (``getmany``) and :meth:`InputFeed.feed` hands it
to the tasks in the order the core's contract asks: first what the fetch *responses* said about
each partition (its high watermark — or last stable offset when the consumer reads only committed
records — against the position, so its lag; and when the response came), then the records. A
partition's facts are passed on once per new response: aiokafka keeps the last response's values
until the next one.

Two details of aiokafka shape this module:

* a rebalance may seek a partition (to the committed offset read under the group's new
  generation) while a ``getmany`` holding records fetched from the old position is returning;
  those records are dropped (:meth:`InputFeed.seeked` marks the seek), and the consumer fetches
  them again from the new position;
* a paused partition is not fetched, so its facts go stale: the core freezes its idle clock, and
  :meth:`InputFeed.apply_pause_hints` applies what the tasks ask to pause or resume.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition

from sidecar.core import TopicPartition
from sidecar.kafka.clients import IsolationLevel
from sidecar.registry.batches import batch_schemas
from sidecar.service.context import StartContext
from sidecar.service.tasks import TaskRegistry

#: Records handed over per getmany: enough to amortise, small enough to interleave.
MAX_FETCH_RECORDS = 20_000

Fetched = dict[KafkaTopicPartition, list[Any]]


class InputFeed:
    """Feeds one consumer's fetches into the registry's tasks."""

    def __init__(
        self,
        ctx: StartContext,
        consumer: AIOKafkaConsumer,
        tasks: TaskRegistry,
        isolation_level: IsolationLevel,
    ) -> None:
        self.consumer = consumer
        self.tasks = tasks
        #: Measure lag to the last stable offset (read_committed) rather than the high watermark.
        self.stable = isolation_level == "read_committed"
        self.health = ctx.health
        self.metrics = ctx.metrics
        #: Response time of the last fetch facts passed on, per partition.
        self._seen: dict[TopicPartition, int] = {}
        #: Seeks so far, and the seek count at each partition's last seek.
        self._seeks = 0
        self._seeked: dict[TopicPartition, int] = {}
        #: Resolves schema ids before a push (``avro:``/``protobuf:`` extractors only).
        self.schemas = batch_schemas(ctx)

    async def fetch(self, timeout_ms: int) -> tuple[Fetched, int]:
        """Records fetched within ``timeout_ms``, and the seek count when they came back."""
        fetched = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=MAX_FETCH_RECORDS)
        return fetched, self._seeks  # no await since getmany returned

    def seeked(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions were just seeked: records fetched before are stale."""
        self._seeks += 1
        for tp in partitions:
            self._seeked[TopicPartition(tp.topic, tp.partition)] = self._seeks

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions left this replica (revoked)."""
        for tp in partitions:
            self._seen.pop(tp, None)

    async def feed(self, fetched: Fetched, fetched_at_seek: int) -> None:
        """Tell each task what the fetch responses said, then push the records (see the module
        docstring); records of partitions seeked since the fetch returned are dropped."""
        if self._seeks != fetched_at_seek:
            seeked = self._seeked
            fetched = {tp: recs for tp, recs in fetched.items() if seeked.get(tp, 0) <= fetched_at_seek}
        consumer = self.consumer
        tasks = self.tasks
        for tp in consumer.assignment():
            run = tasks.owner(tp)
            if run is None:
                continue
            responded = consumer.last_poll_timestamp(tp)
            if responded is None or (responded == self._seen.get(tp) and tp not in fetched):
                continue
            self._seen[tp] = responded
            high = consumer.last_stable_offset(tp) if self.stable else consumer.highwater(tp)
            if high is None:
                continue
            run.task.observe_fetch(tp, high, await consumer.position(tp), responded)
            self.health.contact()
        if self.schemas is not None and not await self.schemas.ready(fetched, tasks):
            return  # stopping while the registry was away: the batch is not pushed
        records_in = 0
        for tp, records in fetched.items():
            run = tasks.owner(tp)
            if run is not None and records:
                records_in += len(records)
                run.task.push(tp, records)
        if records_in:
            self.metrics.records_in.inc(records_in)

    def apply_pause_hints(self, now_ms: int) -> None:
        """Pause partitions the tasks hold too much of; resume them once drained (backpressure)."""
        consumer = self.consumer
        for run in self.tasks:
            hint = run.task.pause_hint(now_ms)
            if hint.pause:
                consumer.pause(*(KafkaTopicPartition(*tp) for tp in hint.pause))
            if hint.resume:
                consumer.resume(*(KafkaTopicPartition(*tp) for tp in hint.resume))
