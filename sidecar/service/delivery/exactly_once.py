"""``processing.guarantee=exactly_once_v2``: a transactional producer per task
(:mod:`sidecar.kafka.transactions`); a task's outputs, heartbeats, side records and input offsets
commit in its own transactions, about every ``COMMIT_INTERVAL_S``. A task handed back commits its
open transaction and closes its producer first; a task taken on starts its producer first, which
fences the previous owner's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaTimeoutError

from sidecar.core import Emit, Heartbeat
from sidecar.kafka.clients import connect
from sidecar.kafka.transactions import TaskTransaction
from sidecar.output.writer import OutputWriter
from sidecar.service.claim import ClaimState
from sidecar.service.delivery.base import COMMIT_INTERVAL_S, DRAIN_TIMEOUT_S, Delivery
from sidecar.service.failures import Action, Phase
from sidecar.service.tasks import TaskOutput

if TYPE_CHECKING:
    from sidecar.service.tasks import TaskRun

#: How long a revoked task's producer may take to abort after a failure.
HAND_BACK_ABORT_S = 5.0


@dataclass(eq=False)
class TransactionalOutput(TaskOutput):
    """A task's output under exactly once: its own writer, producer and transaction."""

    txn: TaskTransaction


def txn_of(run: TaskRun) -> TaskTransaction:
    """The task's transaction (a task this delivery attached)."""
    output = run.output
    assert isinstance(output, TransactionalOutput), f"task {run.name} was not attached exactly once"
    return output.txn


class ExactlyOnce(Delivery):
    """A transactional producer per task; outputs and offsets commit in the task's transactions."""

    #: Only committed transactions' records: what an upstream transaction aborts is never merged,
    #: and an open one's records are not there yet (lag is measured to the last stable offset).
    isolation_level = "read_committed"

    async def start(self, consumer: AIOKafkaConsumer) -> None:
        """Nothing shared: each task's producer starts when the task is opened."""

    def attach(self, name: str) -> TaskOutput:
        cfg = self.config
        txn_id = self.ctx.grouping.transactional_id(cfg.effective_group_id, name)
        producer = self.ctx.clients.producer(txn_id)
        # Not patient: under exactly_once_v2 a producer that gave up is replaced by a restart.
        writer = OutputWriter(producer, stopping=self.ctx.control.changed, activity=self.activity)
        txn = TaskTransaction(producer, writer, txn_id, cfg.effective_group_id, self.ctx.clock)
        txn.last_offsets.update(self._committed_at_start)  # single: its one task has them all
        return TransactionalOutput(writer, self._encoder(True), txn)

    async def open(self, runs: Sequence[TaskRun], phase: Phase) -> None:
        """Start new tasks' producers, bounded in time: each fences the previous owner of its
        ``transactional.id`` and completes its last transaction, so the offsets read next are final."""
        started = await asyncio.gather(*(self._start_producer(run) for run in runs), return_exceptions=True)
        for run, result in zip(runs, started, strict=True):
            if isinstance(result, BaseException):
                self.failed(run, result, phase)

    async def _start_producer(self, run: TaskRun) -> None:
        txn = txn_of(run)
        what = f"the transactional producer of task {run.name}"
        try:
            await asyncio.wait_for(connect(txn.start(), what, self.config.bootstrap_servers), DRAIN_TIMEOUT_S)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no producer id for {txn.transactional_id} within {DRAIN_TIMEOUT_S:g} s"
            ) from None

    def failed(self, run: TaskRun, error: BaseException, phase: Phase) -> Action:
        """Judged by the error that stopped the task's producer, if it stopped (aiokafka's follow-up
        errors hide it); a task taken over (``TASK_LOST``) leaves its open transaction to its new
        owner, whose producer aborts it: forget it here."""
        txn = txn_of(run)
        context = {"task": run.name, "topic": self.config.output_topic, "txn_id": txn.transactional_id}
        action = self.ctx.errors.handle(txn.cause(error), phase, **context)
        if action is Action.TASK_LOST:
            txn.forget()
        return action

    async def send(self, run: TaskRun, emit: Emit) -> None:
        txn = txn_of(run)
        await txn.begin()
        txn.add(emit.batch_id, await self._write(run, emit))

    async def heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        txn = txn_of(run)
        await txn.begin()  # a heartbeat is part of the task's transaction
        txn.add(None, await self._write_heartbeat(run, beat))

    async def tick(self) -> None:
        """Commit each task's transaction once it has been open ``COMMIT_INTERVAL_S``."""
        if not self.ctx.control.running:
            return
        now = time.monotonic()
        due = [r for r in self.tasks if txn_of(r).due(now, COMMIT_INTERVAL_S)]
        if self.claims:  # a quiet single task still renews its claim, in an offsets-only transaction
            due += [
                r
                for r in self.tasks
                if not (txn := txn_of(r)).open and txn.last_offsets and self._claim_due(txn.last_commit)
            ]
        for run, error in await self._commit(due):
            self.failed(run, error, Phase.COMMIT)

    async def _commit(
        self, runs: Sequence[TaskRun], state: ClaimState = "running"
    ) -> list[tuple[TaskRun, BaseException]]:
        """Commit these tasks' transactions concurrently; the ones that failed, with their errors."""
        results = await asyncio.gather(
            *(self._commit_one(run, state) for run in runs), return_exceptions=True
        )
        failed = []
        for run, result in zip(runs, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                failed.append((run, result))
        return failed

    async def _commit_one(self, run: TaskRun, state: ClaimState = "running") -> None:
        """Commit the task's transaction (opening one to renew the single-task claim if none is
        open); the claim's offsets are committed again when it is due or the task stops."""
        txn = txn_of(run)
        again = txn.last_offsets if state == "stopped" or self._claim_due(txn.last_commit) else None
        await txn.begin()
        if await txn.commit(run.task.acked, self._claim(state), again):
            self.committed_any = True
        self.ctx.health.contact()

    async def hand_back(self, runs: Sequence[TaskRun]) -> None:
        await asyncio.gather(*(self._hand_back(run) for run in runs))

    async def _hand_back(self, run: TaskRun) -> None:
        """Commit the task's open transaction (abort it after a failure), then close its producer,
        before the task's partitions go to their next owner."""
        txn = txn_of(run)
        try:
            if txn.open and self.ctx.control.healthy:
                await asyncio.wait_for(self._commit_one(run), timeout=DRAIN_TIMEOUT_S)
            elif txn.open:
                await txn.abort(HAND_BACK_ABORT_S)
        except Exception as raised:  # a rebalance callback must not raise: aiokafka only logs it
            txn.forget()
            self.failed(run, raised, Phase.REVOKE)
        finally:
            await txn.close(DRAIN_TIMEOUT_S, self._close_failed)

    async def drain(self, runs: Sequence[TaskRun]) -> None:
        """Commit what is open; a single task also leaves its claim as stopped."""
        closing = [r for r in runs if (txn := txn_of(r)).open or (self.claims and txn.last_offsets)]
        for run, error in await self._commit(closing, "stopped" if self.claims else "running"):
            self.failed(run, error, Phase.STOP)

    async def abort(self, runs: Sequence[TaskRun]) -> None:
        """After a fatal error: abort now, rather than leave ``read_committed`` readers of the
        output blocked until the transactions time out."""
        await asyncio.gather(*(self._abort(run) for run in runs))

    async def _abort(self, run: TaskRun) -> None:
        txn = txn_of(run)
        if not txn.open:
            return
        try:
            await txn.abort(DRAIN_TIMEOUT_S)
        except Exception as raised:
            self.failed(run, raised, Phase.ABORT)

    async def close(self, runs: Iterable[TaskRun]) -> None:
        await asyncio.gather(*(txn_of(r).close(DRAIN_TIMEOUT_S, self._close_failed) for r in runs))

    def transactions(self, now_ms: int) -> dict[str, dict[str, Any]] | None:
        return {r.name: txn_of(r).snapshot(now_ms) for r in self.tasks.sorted()}
