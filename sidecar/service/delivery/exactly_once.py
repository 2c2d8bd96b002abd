"""``processing.guarantee=exactly_once_v2``: a transactional producer per task
(:mod:`sidecar.kafka.transactions`); a task's outputs, heartbeats, side records and input offsets
commit in its own transactions, about every ``COMMIT_INTERVAL_S``. A task handed back commits its
open transaction and closes its producer first; a task taken on starts its producer first, which
fences the previous owner's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaTimeoutError

from sidecar.core import Emit, Heartbeat
from sidecar.kafka.clients import connect
from sidecar.kafka.transactions import TaskTransaction, transactional_id
from sidecar.output.writer import OutputWriter
from sidecar.service.claim import ClaimState
from sidecar.service.delivery.base import (
    COMMIT_INTERVAL_S,
    DRAIN_TIMEOUT_S,
    HAND_BACK_ABORT_S,
    Delivery,
    TaskOutput,
)
from sidecar.service.failures import Action, Phase

if TYPE_CHECKING:
    from sidecar.service.tasks import TaskRun


class ExactlyOnce(Delivery):
    """A transactional producer per task; outputs and offsets commit in the task's transactions."""

    async def start(self, consumer: AIOKafkaConsumer) -> None:
        pass

    def attach(self, name: str) -> TaskOutput:
        cfg = self.config
        txn_id = transactional_id(cfg.effective_group_id, cfg.task_grouping, name)
        producer = self.ctx.clients.producer(txn_id)
        # Not patient: under exactly_once_v2 a producer that gave up is replaced by a restart.
        writer = OutputWriter(producer, stopping=self.ctx.control.changed, activity=self.activity)
        txn = TaskTransaction(producer, writer, txn_id, cfg.effective_group_id, self.ctx.clock)
        txn.last_offsets.update(self._committed_at_start)  # single: its one task has them all
        return TaskOutput(writer, self._encoder(True), txn)

    async def open(self, runs: Sequence[TaskRun], phase: Phase) -> None:
        """Start new tasks' producers, bounded in time: each fences the previous owner of its
        ``transactional.id`` and completes its last transaction, so the offsets read next are final."""
        started = await asyncio.gather(*(self._start_producer(run) for run in runs), return_exceptions=True)
        for run, result in zip(runs, started, strict=True):
            if isinstance(result, BaseException):
                self._failed(run, result, phase)

    async def _start_producer(self, run: TaskRun) -> None:
        txn = run.output.txn
        assert txn is not None
        what = f"the transactional producer of task {run.name}"
        try:
            await asyncio.wait_for(connect(txn.start(), what, self.config.bootstrap_servers), DRAIN_TIMEOUT_S)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no producer id for {txn.transactional_id} within {DRAIN_TIMEOUT_S:g} s"
            ) from None

    def _failed(self, run: TaskRun, error: BaseException, phase: Phase) -> Action:
        txn = run.output.txn
        assert txn is not None
        return self.ctx.errors.handle(txn.cause(error), phase, task=run.name, txn_id=txn.transactional_id)

    async def send(self, run: TaskRun, emit: Emit) -> None:
        txn = run.output.txn
        assert txn is not None
        await txn.begin()
        txn.add(emit.batch_id, await self._write(run, emit))

    async def heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        txn = run.output.txn
        assert txn is not None
        await txn.begin()  # a heartbeat is part of the task's transaction
        txn.add(None, await self._write_heartbeat(run, beat))

    async def tick(self) -> None:
        """Commit each task's transaction once it has been open ``COMMIT_INTERVAL_S``."""
        if not self.ctx.control.running:
            return
        now = time.monotonic()
        due = [r for r in self.tasks if r.output.txn is not None and r.output.txn.due(now, COMMIT_INTERVAL_S)]
        if self.claims:  # a quiet single task still renews its claim, in an offsets-only transaction
            due += [
                r
                for r in self.tasks
                if r.output.txn is not None
                and not r.output.txn.open
                and r.output.txn.last_offsets
                and self._claim_due(r.output.txn.last_commit)
            ]
        for run, error in await self._commit(due):
            self._failed(run, error, Phase.COMMIT)

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
        txn = run.output.txn
        assert txn is not None
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
        txn = run.output.txn
        assert txn is not None
        try:
            if txn.open and self.ctx.control.healthy:
                await asyncio.wait_for(self._commit_one(run), timeout=DRAIN_TIMEOUT_S)
            elif txn.open:
                await txn.abort(HAND_BACK_ABORT_S)
        except Exception as raised:  # a rebalance callback must not raise: aiokafka only logs it
            txn.forget()
            self._failed(run, raised, Phase.REVOKE)
        finally:
            await txn.close(DRAIN_TIMEOUT_S, self._close_failed)

    async def drain(self, runs: Sequence[TaskRun]) -> None:
        """Commit what is open; a single task also leaves its claim as stopped."""
        closing = [
            r
            for r in runs
            if r.output.txn is not None and (r.output.txn.open or (self.claims and r.output.txn.last_offsets))
        ]
        for run, error in await self._commit(closing, "stopped" if self.claims else "running"):
            if self._failed(run, error, Phase.STOP) is Action.TASK_LOST:
                assert run.output.txn is not None
                run.output.txn.forget()

    async def abort(self, runs: Sequence[TaskRun]) -> None:
        """After a fatal error: abort now, rather than leave ``read_committed`` readers of the
        output blocked until the transactions time out."""
        await asyncio.gather(*(self._abort(run) for run in runs))

    async def _abort(self, run: TaskRun) -> None:
        txn = run.output.txn
        if txn is None or not txn.open:
            return
        try:
            await txn.abort(DRAIN_TIMEOUT_S)
        except Exception as raised:
            self._failed(run, raised, Phase.ABORT)

    async def close(self, runs: Iterable[TaskRun]) -> None:
        closing = [r.output.txn.close(DRAIN_TIMEOUT_S, self._close_failed) for r in runs if r.output.txn]
        await asyncio.gather(*closing)

    def transactions(self, now_ms: int) -> dict[str, dict[str, Any]] | None:
        return {r.name: r.output.txn.snapshot(now_ms) for r in self.tasks.sorted() if r.output.txn}
