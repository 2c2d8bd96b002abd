"""The delivery contract, and what every guarantee shares (see the package docstring).

:class:`Delivery` is what the pipeline calls, an abstract contract: a guarantee answers each of
its questions (:meth:`~Delivery.attach` … :meth:`~Delivery.close`) or it cannot be built, and
everything that depends on the guarantee — what a task writes through, which records the consumer
reads, what a task taken away leaves behind — is answered here and nowhere else. The shared part
writes an emit (its output, late records and dead letters, each to its topic and partition) and a
heartbeat, renews the single-task claim, and keeps the output's activity for ``/status``.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from aiokafka import AIOKafkaConsumer

from sidecar.core import Emit, Heartbeat, TopicPartition
from sidecar.kafka.clients import IsolationLevel
from sidecar.output.encoder import OutputEncoder, choose_encoder
from sidecar.output.writer import OutputActivity
from sidecar.service import claim
from sidecar.service.claim import ClaimState
from sidecar.service.failures import Action, Phase

if TYPE_CHECKING:
    from sidecar.service.context import StartContext
    from sidecar.service.tasks import TaskOutput, TaskRegistry, TaskRun

#: How often acknowledged offsets are committed (at least once) or transactions commit (exactly once).
COMMIT_INTERVAL_S = 0.1
#: Longest wait for the last acknowledgements and commits of a stop or a hand-back.
DRAIN_TIMEOUT_S = 30.0


class Delivery(abc.ABC):
    """How output becomes durable and input offsets get committed, under one guarantee.

    Subclasses answer every abstract method; the concrete ones here are shared by all guarantees.
    """

    #: What the consumer reads: ``read_committed`` keeps an open or aborted transaction's records
    #: out of the merge, and the lag is then measured to the last stable offset.
    isolation_level: ClassVar[IsolationLevel]

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
        """Whether every commit carries the replica's claim (the task grouping says)."""
        return self.ctx.grouping.claims

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

    def _close_failed(self, error: BaseException) -> None:
        self.ctx.errors.handle(error, Phase.CLOSE)

    # -- the contract (see the package docstring) -------------------------------------------------

    @abc.abstractmethod
    async def start(self, consumer: AIOKafkaConsumer) -> None:
        """Connect what the delivery shares across tasks, before the consumer starts."""

    @abc.abstractmethod
    def attach(self, name: str) -> TaskOutput:
        """The output a new task ``name`` writes through (not connected yet: see :meth:`open`)."""

    @abc.abstractmethod
    async def open(self, runs: Sequence[TaskRun], phase: Phase) -> None:
        """New tasks, before they read their committed offsets: make those offsets final
        (exactly once: fence the previous owners)."""

    @abc.abstractmethod
    async def send(self, run: TaskRun, emit: Emit) -> None:
        """Write what a task emitted; its offsets become committable once it is durable."""

    @abc.abstractmethod
    async def heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        """Write a task's watermark heartbeat."""

    @abc.abstractmethod
    async def tick(self) -> None:
        """Called every loop iteration: make due progress durable."""

    @abc.abstractmethod
    def failed(self, run: TaskRun, error: BaseException, phase: Phase) -> Action:
        """A client error met while driving ``run``: have it judged (:mod:`sidecar.service.failures`)
        with what the guarantee knows of the task, and clean up what the judgement leaves to the
        delivery (a task taken away leaves its open work to its new owner)."""

    @abc.abstractmethod
    async def hand_back(self, runs: Sequence[TaskRun]) -> None:
        """Tasks revoked in a rebalance: make their output durable and commit, before their
        partitions go to the next owner."""

    @abc.abstractmethod
    async def drain(self, runs: Sequence[TaskRun]) -> None:
        """A clean stop: commit every input offset whose output was acknowledged."""

    @abc.abstractmethod
    async def abort(self, runs: Sequence[TaskRun]) -> None:
        """After a failure: end what is open so readers are not held up."""

    @abc.abstractmethod
    async def close(self, runs: Iterable[TaskRun]) -> None:
        """Close the delivery's clients; never raises (errors are judged in phase ``CLOSE``)."""

    @abc.abstractmethod
    def transactions(self, now_ms: int) -> dict[str, dict[str, Any]] | None:
        """Each task's transaction for ``/status`` (``None`` when the guarantee has none)."""
