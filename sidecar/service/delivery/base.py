"""The delivery interface and what both guarantees share (see the package docstring).

:class:`Delivery` is what the pipeline calls; :class:`TaskOutput` is what a task writes through.
The shared part writes an emit (its output, late records and dead letters, each to its topic and
partition) and a heartbeat, and keeps the output's activity for ``/status``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer

from sidecar.core import Emit, Heartbeat, TopicPartition
from sidecar.kafka.transactions import TaskTransaction
from sidecar.output.encoder import OutputEncoder, choose_encoder
from sidecar.output.writer import OutputActivity, OutputWriter
from sidecar.service import claim
from sidecar.service.claim import ClaimState
from sidecar.service.failures import Phase

if TYPE_CHECKING:
    from sidecar.service.context import StartContext
    from sidecar.service.tasks import TaskRegistry, TaskRun

#: How often acknowledged offsets are committed (at least once) or transactions commit (exactly once).
COMMIT_INTERVAL_S = 0.1
#: Longest wait for the last acknowledgements and commits of a stop or a hand-back.
DRAIN_TIMEOUT_S = 30.0
#: exactly_once_v2: how long a revoked task's producer may take to abort after a failure.
HAND_BACK_ABORT_S = 5.0


@dataclass(eq=False)
class TaskOutput:
    """Where one task writes: its writer and encoder, and (exactly once) its transaction."""

    writer: OutputWriter
    encoder: OutputEncoder
    txn: TaskTransaction | None = None
    #: at least once: emitted batch id → producer batches not acknowledged yet.
    pending: dict[int, int] = field(default_factory=dict)

    def cause(self, error: BaseException) -> BaseException:
        """The error that stopped the task's transactional producer, if it stopped; else ``error``."""
        return self.txn.cause(error) if self.txn is not None else error


class Delivery:
    """What both guarantees share: writing an emit and a heartbeat, and the output's status."""

    def __init__(self, ctx: StartContext, tasks: TaskRegistry) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.tasks = tasks
        self.activity = OutputActivity(ctx.clock)
        self._owner = claim.owner()
        self._committed_at_start: dict[TopicPartition, int] = {}
        #: True once a commit succeeded in this start (a restart that keeps failing gives up).
        self.committed_any = False

    def _encoder(self, transactional: bool) -> OutputEncoder:
        cfg = self.config
        return choose_encoder(cfg.compression_type, cfg.compression_level, transactional)

    async def _write(self, run: TaskRun, emit: Emit) -> list[asyncio.Future[object]]:
        """Queue an emit's output, late records and dead letters; the futures of their batches."""
        cfg, out = self.config, run.output
        writer, encoder = out.writer, out.encoder
        futures = []
        if emit.records:
            futures += await writer.send(cfg.output_topic, run.out_partition, encoder.encode(emit))
        late_topic = cfg.late_topic
        if emit.late_routed and late_topic:
            partition = self.tasks.layout.side_partition(late_topic, run.out_partition)
            encoded = encoder.encode_late(emit.late_routed, emit.watermark)
            futures += await writer.send(late_topic, partition, encoded)
        if emit.dead_letters:
            dlq = cfg.errors_deadletterqueue_topic_name
            partition = self.tasks.layout.side_partition(dlq, run.out_partition)
            futures += await writer.send(dlq, partition, encoder.encode_dead_letters(emit.dead_letters))
        self.ctx.metrics.observe_emit(emit)
        return futures

    async def _write_heartbeat(self, run: TaskRun, beat: Heartbeat) -> list[asyncio.Future[object]]:
        encoded = run.output.encoder.encode_heartbeat(beat.watermark)
        futures = await run.output.writer.send(self.config.output_topic, run.out_partition, encoded)
        self.ctx.metrics.heartbeats.inc()
        return futures

    # -- the single-task claim (see sidecar.service.claim) ----------------------------------------

    @property
    def claims(self) -> bool:
        """With ``task.grouping=single`` every commit carries the replica's claim."""
        return self.config.task_grouping == "single"

    def _claim(self, state: ClaimState = "running") -> str | None:
        if not self.claims:
            return None
        return claim.encode(claim.Claim(self._owner, self.ctx.clock(), state))

    def remember_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The group's committed offsets at start: the single-task claim renews them even before
        this start commits anything."""
        self._committed_at_start = dict(offsets)

    def _claim_due(self, last_commit: float) -> bool:
        return self.claims and time.monotonic() - last_commit >= claim.REFRESH_S

    def transactions(self, now_ms: int) -> dict[str, dict[str, Any]] | None:
        """Each task's transaction for ``/status`` (``None`` when there are none)."""
        return None

    def _close_failed(self, error: BaseException) -> None:
        self.ctx.errors.handle(error, Phase.CLOSE)

    # -- the interface (see the module docstring) ------------------------------------------------

    async def start(self, consumer: AIOKafkaConsumer) -> None:
        raise NotImplementedError

    def attach(self, name: str) -> TaskOutput:
        raise NotImplementedError

    async def open(self, runs: Sequence[TaskRun], phase: Phase) -> None:
        """Before new tasks read their committed offsets (exactly once: fence previous owners)."""

    async def send(self, run: TaskRun, emit: Emit) -> None:
        raise NotImplementedError

    async def heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        raise NotImplementedError

    async def tick(self) -> None:
        """Called every loop iteration: make due progress durable."""

    async def hand_back(self, runs: Sequence[TaskRun]) -> None:
        raise NotImplementedError

    async def drain(self, runs: Sequence[TaskRun]) -> None:
        raise NotImplementedError

    async def abort(self, runs: Sequence[TaskRun]) -> None:
        """After a failure: end what is open so readers are not held up (nothing by default)."""

    async def close(self, runs: Iterable[TaskRun]) -> None:
        raise NotImplementedError
