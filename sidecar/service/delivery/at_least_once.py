"""``processing.guarantee=at_least_once``: one shared idempotent producer; an input offset is
committed once every output taken from it and from the partition's earlier offsets is
acknowledged (a background committer, every ``COMMIT_INTERVAL_S``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition

from sidecar.core import Emit, Heartbeat, TopicPartition
from sidecar.kafka.clients import close_quietly, connect
from sidecar.output.writer import OutputWriter
from sidecar.service.claim import ClaimState
from sidecar.service.delivery.base import COMMIT_INTERVAL_S, DRAIN_TIMEOUT_S, Delivery
from sidecar.service.failures import CLIENT_ERRORS, Action, Phase
from sidecar.service.tasks import TaskOutput

if TYPE_CHECKING:
    from sidecar.service.context import StartContext
    from sidecar.service.tasks import TaskRegistry, TaskRun


@dataclass(eq=False)
class AckedOutput(TaskOutput):
    """A task's output under at least once: the shared writer, and its batches not yet acknowledged."""

    #: Emitted batch id → producer batches not acknowledged yet.
    pending: dict[int, int] = field(default_factory=dict)


def pending(run: TaskRun) -> dict[int, int]:
    """The task's emitted batches awaiting acknowledgement (a task this delivery attached)."""
    output = run.output
    assert isinstance(output, AckedOutput), f"task {run.name} was not attached at least once"
    return output.pending


class AtLeastOnce(Delivery):
    """One shared idempotent producer; offsets committed once their outputs are acknowledged."""

    #: Every record, as it is written: nothing upstream is waited for.
    isolation_level = "read_uncommitted"

    def __init__(self, ctx: StartContext, tasks: TaskRegistry) -> None:
        super().__init__(ctx, tasks)
        self._producer: AIOKafkaProducer | None = None
        self._writer: OutputWriter | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._encoder_shared = self._encoder(False)
        self._to_commit: dict[TopicPartition, int] = {}
        #: Offsets committed so far and when (monotonic): the claim renews them (single).
        self._committed: dict[TopicPartition, int] = {}
        self._last_commit = time.monotonic()
        self._committer: asyncio.Task[None] | None = None
        #: Held while a commit is on its way: commits reach the coordinator one at a time, in
        #: the order they were made (a commit request, once sent, lands even if nobody waits).
        self._commit_lock = asyncio.Lock()

    async def start(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._producer = producer = self.ctx.clients.producer(None)
        # Patient: at least once waits out a silent broker (see OutputWriter).
        self._writer = OutputWriter(
            producer, patient=True, stopping=self.ctx.control.changed, activity=self.activity
        )
        await connect(producer.start(), "the producer", self.config.bootstrap_servers)
        self._committer = asyncio.create_task(self._commit_loop())

    def attach(self, name: str) -> TaskOutput:
        assert self._writer is not None
        return AckedOutput(self._writer, self._encoder_shared)

    async def open(self, runs: Sequence[TaskRun], phase: Phase) -> None:
        """Nothing to fence: the committed offsets a new task reads are final once committed."""

    async def tick(self) -> None:
        """Nothing: a background committer commits acknowledged offsets every ``COMMIT_INTERVAL_S``."""

    def failed(self, run: TaskRun, error: BaseException, phase: Phase) -> Action:
        """The shared producer holds nothing of one task's: the error is judged as it is."""
        return self.ctx.errors.handle(error, phase, task=run.name, topic=self.config.output_topic)

    async def send(self, run: TaskRun, emit: Emit) -> None:
        futures = await self._write(run, emit)
        if not futures:
            self._to_commit.update(run.task.acked((emit.batch_id,)))
            return
        pending(run)[emit.batch_id] = len(futures)
        for future in futures:
            future.add_done_callback(functools.partial(self._on_ack, run, emit.batch_id))

    async def heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        for future in await self._write_heartbeat(run, beat):
            future.add_done_callback(self._on_heartbeat_ack)

    def _on_heartbeat_ack(self, future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.ctx.health.contact()

    def _on_ack(self, run: TaskRun, batch_id: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self.failed(run, error, Phase.WRITE)
            return
        self.ctx.health.contact()
        waiting = pending(run)
        left = waiting[batch_id] - 1
        if left:
            waiting[batch_id] = left
            return
        del waiting[batch_id]
        if not self.ctx.control.failed:
            self._to_commit.update(run.task.acked((batch_id,)))

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(COMMIT_INTERVAL_S)
            await self.commit_acked(again=self._claim_due(self._last_commit))

    async def commit_acked(self, state: ClaimState = "running", again: bool = False) -> None:
        """Commit the offsets acknowledged outputs released; with ``again``, also the ones
        committed before (to renew the single-task claim in their metadata)."""
        async with self._commit_lock:
            await self._commit_acked(state, again)

    async def _commit_acked(self, state: ClaimState, again: bool) -> None:
        consumer = self._consumer
        new, self._to_commit = self._to_commit, {}
        offsets = {**self._committed_at_start, **self._committed, **new} if again else new
        if not offsets or consumer is None:
            self._to_commit = new
            return
        metadata = self._claim(state)
        try:
            await consumer.commit(
                {KafkaTopicPartition(*tp): (o, metadata) if metadata else o for tp, o in offsets.items()}
            )
        except CLIENT_ERRORS as e:
            self.ctx.errors.handle(e, Phase.COMMIT)
            for tp, offset in new.items():
                self._to_commit.setdefault(tp, offset)
        else:
            self.committed_any = self.committed_any or bool(new)
            self._committed.update(offsets)
            self._last_commit = time.monotonic()

    async def _await_acks(self, runs: Iterable[TaskRun]) -> None:
        """Until every batch written for these tasks is acknowledged (or failed), bounded in time."""
        runs = list(runs)
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._producer.flush(), timeout=DRAIN_TIMEOUT_S)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        # Ack callbacks run on the loop after the futures resolve; let them all land.
        while (
            any(pending(run) for run in runs) and not self.ctx.control.failed and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.005)

    async def _commit_safe(self, runs: Iterable[TaskRun]) -> None:
        runs = list(runs)
        await self._await_acks(runs)
        for run in runs:
            self._to_commit.update(run.task.committable())
        await self.commit_acked()

    async def hand_back(self, runs: Sequence[TaskRun]) -> None:
        await self._commit_safe(runs)

    async def drain(self, runs: Sequence[TaskRun]) -> None:
        # The periodic commit stops first, after its commit in flight has landed: a "running"
        # claim reaching the coordinator after the "stopped" one below would leave the group
        # looking owned until the claim goes stale (a clean stop another host must wait out).
        await self._stop_committer()
        await self._commit_safe(runs)
        if self.claims:
            await self.commit_acked("stopped", again=True)

    async def _stop_committer(self) -> None:
        committer, self._committer = self._committer, None
        if committer is not None:
            async with self._commit_lock:  # never cancelled mid-commit: let the one in flight land
                committer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await committer

    async def abort(self, runs: Sequence[TaskRun]) -> None:
        """After a failure nothing is open; what was acknowledged before it is still committed."""
        await self.drain(runs)

    async def close(self, runs: Iterable[TaskRun]) -> None:
        await self._stop_committer()
        if self._producer is not None:
            await close_quietly(self._producer.stop(), self._close_failed)

    def transactions(self, now_ms: int) -> dict[str, dict[str, Any]] | None:
        """None: output is not written in transactions."""
        return None
