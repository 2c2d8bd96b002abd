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

What cannot be read is judged here, like any bad record. The hooked consumer
(:mod:`sidecar.kafka.fetch_hook`) ends a partition's list with a verdict,
:class:`~sidecar.kafka.unreadable.UnreadableRecords`, when a batch does not read, its position
already past the offsets it names. Under ``errors.tolerance=none`` the verdict is raised — after
the other partitions' records are pushed — and the failure table stops the sidecar with its one
line (nothing past it is committed: the task never heard of it). Under ``all`` the task takes it
(``MergeTask.push``): a trace in the dead letter queue, or dropped under
``timestamp.invalid=skip``, and commits pass it once that trace is acknowledged. Anything else
``getmany`` raises is kept for :meth:`InputFeed.feed` to raise, inside the loop's judgement, so
that the failure table sees every error of the fetch too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError

from sidecar.core import TopicPartition, Unreadable
from sidecar.kafka.clients import IsolationLevel
from sidecar.kafka.unreadable import ReaderFailed, UnreadableRecords
from sidecar.registry.batches import batch_schemas
from sidecar.service.context import StartContext
from sidecar.service.tasks import TaskRegistry

#: Records handed over per getmany: enough to amortise, small enough to interleave.
MAX_FETCH_RECORDS = 20_000

Fetched = dict[KafkaTopicPartition, list[Any]]

log = logging.getLogger("timesync")


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
        self.tolerate = ctx.config.errors_tolerance == "all"
        #: What the last ``getmany`` raised, for :meth:`feed` to raise.
        self._failed: BaseException | None = None

    async def fetch(self, timeout_ms: int) -> tuple[Fetched, int]:
        """Records fetched within ``timeout_ms``, and the seek count when they came back; what
        ``getmany`` raises is raised by the next :meth:`feed` (see the module's docstring)."""
        try:
            fetched = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=MAX_FETCH_RECORDS)
        except KafkaError as e:
            self._failed, fetched = e, {}
        except Exception as e:  # an unhooked reader's own failure: no offsets to name
            self._failed, fetched = ReaderFailed(e), {}
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
        """Tell each task what the fetch responses said, then push the records, then judge what
        could not be read (see the module docstring); records of partitions seeked since the
        fetch returned are dropped."""
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
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
        verdicts = _verdicts(fetched)
        if verdicts:
            fetched = {tp: records[:-1] if tp in verdicts else records for tp, records in fetched.items()}
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
        for tp, verdict in verdicts.items():
            self._unreadable(tp, verdict)

    def _unreadable(self, tp: KafkaTopicPartition, verdict: UnreadableRecords) -> None:
        """Offsets that could not be read: stop (``none``), or the task's to trace or drop."""
        run = self.tasks.owner(tp)
        if run is None:
            return  # revoked meanwhile: its next owner fetches them again
        if not self.tolerate:
            raise verdict
        gone = Unreadable(verdict.first_offset, verdict.next_offset, str(verdict), verdict.data)
        run.task.push(TopicPartition(tp.topic, tp.partition), gone)
        self.metrics.records_in.inc()
        log.warning("%s; passed on as errors.tolerance=all says", verdict)

    def apply_pause_hints(self, now_ms: int) -> None:
        """Pause partitions the tasks hold too much of; resume them once drained (backpressure)."""
        consumer = self.consumer
        for run in self.tasks:
            hint = run.task.pause_hint(now_ms)
            if hint.pause:
                consumer.pause(*(KafkaTopicPartition(*tp) for tp in hint.pause))
            if hint.resume:
                consumer.resume(*(KafkaTopicPartition(*tp) for tp in hint.resume))


def _verdicts(fetched: Fetched) -> dict[KafkaTopicPartition, UnreadableRecords]:
    """The partitions whose list ends with the reader's verdict (one per partition at most)."""
    return {
        tp: records[-1]
        for tp, records in fetched.items()
        if records and type(records[-1]) is UnreadableRecords
    }
