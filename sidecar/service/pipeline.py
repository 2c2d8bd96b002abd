"""The pipeline: fetch → merge → write → commit, as one asyncio loop around the merge tasks.

One :class:`Pipeline` is one start of the sidecar: it connects the clients, prepares the topics
(:mod:`~sidecar.service.topics`), takes its tasks (:mod:`~sidecar.service.rebalance`), loops, and
closes. It holds no merge logic and decides nothing about errors; it translates and wires:

* :mod:`~sidecar.service.fetch` turns fetches into facts and records for the tasks;
* each :class:`~sidecar.core.MergeTask` says what to do (emit, heartbeat, wait, fetch);
* :mod:`~sidecar.service.delivery` writes what the tasks emit and commits what became safe,
  under the configured guarantee;
* :mod:`~sidecar.service.failures` judges every error, and the run state
  (:class:`~sidecar.service.run_state.RunControl`) records the outcome.

Each loop iteration fetches a batch (``getmany``, waiting no longer than the earliest time a task
asked to be woken), feeds it to the tasks, polls each task until it stops emitting, applies the
tasks' pause hints (backpressure) and lets the delivery commit what is due. The loop runs while
the run state is ``Running``. Then a clean stop (``Stopping``) emits what may still go out and
drains (acknowledgements, last commits); a failure (``Failed``) aborts what is open; a restart
(``Restarting``) only closes — its clients are unusable, the next start fences them.

A record's route, in the order this module reads: ``InputFeed.fetch`` (``getmany``) →
``InputFeed.feed`` (``MergeTask.push``) → ``_drive`` (``MergeTask.poll`` → ``Emit``) →
``Delivery.send`` (encode, write) → the broker's acknowledgement → ``MergeTask.acked`` → the input
offsets it released, committed by the delivery (at least once: its committer; exactly once: in
the task's transaction, on ``Delivery.tick``).

The pipeline never raises for a Kafka error: how it ended is in ``control.state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from aiokafka import TopicPartition as KafkaTopicPartition

from sidecar.config import SidecarConfig
from sidecar.core import Emit, Heartbeat
from sidecar.core.deadletters import DeadLetterRatioExceeded
from sidecar.core.task import Idle, NeedFetch, WaitUntil
from sidecar.core.timestamps import InvalidTimestampError
from sidecar.kafka import fetch_hook
from sidecar.kafka.clients import MAX_FETCH_WAIT_MS, ClientFactory, KafkaClients, close_quietly, connect
from sidecar.output.encoder import native_available
from sidecar.registry.client import RegistryRefusedError
from sidecar.service.context import StartContext
from sidecar.service.delivery import make_delivery
from sidecar.service.error_handler import ErrorHandler
from sidecar.service.failures import CLIENT_ERRORS, SETUP_ERRORS, Phase
from sidecar.service.fetch import InputFeed
from sidecar.service.grouping import grouping_of
from sidecar.service.health import Health
from sidecar.service.metrics import Metrics
from sidecar.service.rebalance import Rebalancer
from sidecar.service.run_state import RESTART_BACKOFF_S, RunControl, Stopping
from sidecar.service.status import pipeline_status
from sidecar.service.tasks import TaskRegistry, TaskRun
from sidecar.service.topics import TopicLayout, prepare_topics

log = logging.getLogger("timesync")

#: Records taken per poll of a task: enough to amortise, small enough to interleave.
MAX_EMIT_RECORDS = 20_000
GAUGE_INTERVAL_S = 1.0
#: Errors of the merge itself (bad data under the user's policy).
MERGE_ERRORS: tuple[type[BaseException], ...] = (
    InvalidTimestampError,
    DeadLetterRatioExceeded,
    RegistryRefusedError,
)
#: What a loop iteration may raise: the merge's errors and the clients'.
LOOP_ERRORS: tuple[type[BaseException], ...] = (*MERGE_ERRORS, *CLIENT_ERRORS)
#: What a start may raise: the clients' errors and setup refusals.
START_ERRORS: tuple[type[BaseException], ...] = (*CLIENT_ERRORS, *SETUP_ERRORS)


def wall_ms() -> int:
    return int(time.time() * 1000)


class Pipeline:
    def __init__(
        self,
        config: SidecarConfig,
        *,
        metrics: Metrics,
        health: Health,
        control: RunControl,
        restarting: bool = False,
        clients: ClientFactory | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        errors = ErrorHandler(control, config)
        self.ctx = ctx = StartContext(
            config,
            control,
            errors,
            metrics,
            health,
            clock,
            clients or KafkaClients(config),
            grouping_of(config),
        )
        self.config, self.control, self.errors = config, control, errors
        self.metrics, self.health, self.clock = metrics, health, clock
        self.restarting = restarting
        #: Rebalance callbacks and loop iterations never interleave.
        self.lock = asyncio.Lock()
        self.layout = TopicLayout({})
        self.tasks = TaskRegistry(config, self.layout)
        self.delivery = make_delivery(ctx, self.tasks)
        self.encoder_name = "native" if native_available() else "python"
        #: Which records the consumer returns: read in C, or aiokafka's (see ``fetch_hook``).
        self.reader_name: fetch_hook.ReaderName = "aiokafka"
        #: True once this start has connected and taken its tasks.
        self.started = False
        self._consumer: Any = None
        self._feed: InputFeed | None = None

    @property
    def consumer(self) -> Any:
        assert self._consumer is not None, "the pipeline has not started"
        return self._consumer

    @property
    def feed(self) -> InputFeed:
        assert self._feed is not None, "the pipeline has not started"
        return self._feed

    @property
    def committed_any(self) -> bool:
        return self.delivery.committed_any

    def status(self) -> dict[str, Any]:
        return pipeline_status(self)

    # -- one start ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, merge until the run state leaves ``Running``, finish as it says, close."""
        try:
            if await self._start():
                self.started = True
                self.health.started()
                gauges = asyncio.create_task(self._gauge_loop())
                try:
                    await self._loop()
                finally:
                    gauges.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await gauges
            await self._finish()
        finally:
            await self._close()

    async def _start(self) -> bool:
        """Connect and take the tasks; ``False`` if the start did not get that far."""
        cfg = self.config
        phase = Phase.RESTART if self.restarting else Phase.START
        if self.restarting and not await self._reachable():
            return False
        try:
            layout = await self._prepare_topics()
            self.layout = self.tasks.layout = layout
            reads = self.delivery.isolation_level
            self._consumer = consumer = self.ctx.clients.consumer(reads)
            self._feed = feed = InputFeed(self.ctx, consumer, self.tasks, reads)
            await self.delivery.start(consumer)
            await connect(consumer.start(), "the consumer", cfg.bootstrap_servers)
            self.reader_name = fetch_hook.install(consumer)
            await Rebalancer(self.ctx, self.lock, self.tasks, self.delivery, feed).assign(self.restarting)
        except START_ERRORS as e:
            self.errors.handle(e, phase)
            return False
        return self.control.running

    async def _prepare_topics(self) -> TopicLayout:
        admin = self.ctx.clients.admin()
        try:
            cfg = self.config
            await connect(admin.start(), "the admin client", cfg.bootstrap_servers)
            layout = await prepare_topics(admin, cfg)
            committed = await self.ctx.grouping.committed_at_start(admin, cfg, self.clock())
            self.delivery.remember_committed(committed)
            return layout
        finally:
            await close_quietly(admin.close(), self._close_failed)

    async def _reachable(self) -> bool:
        """Before a restart: wait until the cluster answers again (``False`` if a stop came first)."""
        while self.control.running:
            admin = self.ctx.clients.admin()
            try:
                await admin.start()
                return True
            except CLIENT_ERRORS:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.control.changed.wait(), RESTART_BACKOFF_S)
            finally:
                await close_quietly(admin.close(), lambda _: None)
        return False

    # -- the loop -------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        control = self.control
        while control.running:
            fetched, at_seek = await self.feed.fetch(self._fetch_wait_ms())
            async with self.lock:
                if not control.healthy:
                    break
                now = self.clock()
                self._apply_operator_pause(now)
                try:
                    await self.feed.feed(fetched, at_seek)
                    for run in self.tasks:
                        if not await self._drive_or_judge(run, now, Phase.WRITE):
                            break
                    self.feed.apply_pause_hints(now)
                    await self.delivery.tick()
                except LOOP_ERRORS as e:
                    self.errors.handle(e, Phase.MERGE)

    async def _drive_or_judge(self, run: TaskRun, now: int, phase: Phase) -> bool:
        """Drive one task; a client error is the delivery's to judge, as it knows the task's
        output (``False``: stop driving the others)."""
        try:
            await self._drive(run, now)
        except CLIENT_ERRORS as e:
            self.delivery.failed(run, e, phase)
            return False
        return True

    async def _drive(self, run: TaskRun, now: int) -> None:
        """Poll the task until it stops emitting; write what it emits; remember when to wake it."""
        delivery = self.delivery
        while True:
            out = run.task.poll(now, MAX_EMIT_RECORDS)
            if isinstance(out, Emit):
                await delivery.send(run, out)
                continue
            if isinstance(out, Heartbeat):
                await delivery.heartbeat(run, out)
                continue
            if isinstance(out, WaitUntil):
                run.wake_at = out.deadline_ms
            elif isinstance(out, NeedFetch | Idle):
                run.wake_at = out.wake_at_ms
            return

    def _apply_operator_pause(self, now: int) -> None:
        """``PUT /pause``: hold every task (nothing goes out, no heartbeat: the watermark must not
        pass records the sidecar is not reading; idle clocks frozen) and stop fetching, while the
        loop goes on calling ``getmany`` so the consumer stays in its group. ``PUT /resume``:
        release them. Tasks taken on in a rebalance while paused are held at once."""
        paused = self.control.pause.paused
        consumer = self.consumer
        for run in self.tasks:
            if paused and not run.task.held:
                consumer.pause(*(KafkaTopicPartition(*tp) for tp in run.task.hold(now)))
            elif not paused and run.task.held:
                consumer.resume(*(KafkaTopicPartition(*tp) for tp in run.task.release(now)))

    def _fetch_wait_ms(self) -> int:
        wake = self.tasks.wake_at()
        if wake is None:
            return MAX_FETCH_WAIT_MS
        return max(0, min(MAX_FETCH_WAIT_MS, wake - self.clock()))

    # -- the end of a start ---------------------------------------------------------------------------

    async def _finish(self) -> None:
        """``Stopping``: emit what may go out, drain; ``Failed``: abort; ``Restarting``: nothing —
        the producers are dead, the next start fences them (which aborts their transactions)."""
        runs = list(self.tasks)
        if isinstance(self.control.state, Stopping) and self._consumer is not None:
            async with self.lock:
                now = self.clock()
                try:
                    for run in runs:
                        await self._drive_or_judge(run, now, Phase.STOP)
                except MERGE_ERRORS as e:
                    self.errors.handle(e, Phase.STOP)
                if isinstance(self.control.state, Stopping):
                    await self.delivery.drain(runs)
        if self.control.failed:
            await self.delivery.abort(runs)

    async def _close(self) -> None:
        if self._consumer is not None:
            await close_quietly(self._consumer.stop(), self._close_failed)
        if self._feed is not None and self._feed.schemas is not None:  # the registry's session
            await close_quietly(self._feed.schemas.close(), self._close_failed)
        await self.delivery.close(list(self.tasks))

    def _close_failed(self, error: BaseException) -> None:
        self.errors.handle(error, Phase.CLOSE)

    # -- observation ----------------------------------------------------------------------------------

    async def offsets(self) -> dict[str, Any] | None:
        """``GET /offsets``: per input partition the group's committed offset, the end offset (as
        the consumer reads: the last stable offset if it reads only committed records), the lag
        between them and the task holding it here; the output's end per partition. ``None`` before
        the start has connected."""
        if not self.started:
            return None
        consumer = self.consumer
        inputs = [KafkaTopicPartition(*tp) for tp in self.layout.all_input_partitions()]
        output = [
            KafkaTopicPartition(self.config.output_topic, p) for p in range(self.layout.output_partitions)
        ]
        committed = await asyncio.gather(*(consumer.committed(tp) for tp in inputs))
        ends = await consumer.end_offsets([*inputs, *output])
        rows = []
        for tp, offset in zip(inputs, committed, strict=True):
            end = ends.get(tp)
            run = self.tasks.owner(tp)
            rows.append(
                {
                    # Kafka Connect's shape for a sink connector's offsets, plus the end and lag.
                    "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                    "offset": {"kafka_offset": offset},
                    "end_offset": end,
                    "lag": None if offset is None or end is None else max(0, end - offset),
                    "task": run.name if run is not None else None,
                }
            )
        return {
            "group": self.config.effective_group_id,
            "offsets": rows,
            "output": {
                "topic": self.config.output_topic,
                "partitions": [{"partition": tp.partition, "end_offset": ends.get(tp)} for tp in output],
            },
        }

    async def _gauge_loop(self) -> None:
        while True:
            now = self.clock()
            for run in self.tasks:
                self.metrics.observe_task(run.name, run.task.snapshot(now), id(run.task))
            if self.spare:
                await self._probe_cluster()
            await asyncio.sleep(GAUGE_INTERVAL_S)

    @property
    def spare(self) -> bool:
        """A replica of a group that has no task for it (more replicas than tasks)."""
        return self.ctx.grouping.spare(len(self.tasks)) and self.control.running

    async def _probe_cluster(self) -> None:
        """A spare gets no fetch responses and writes nothing: a metadata round trip tells its
        health that the cluster still answers (an idle member of a healthy group is healthy)."""
        try:
            await self.consumer.topics()
        except CLIENT_ERRORS:
            return
        self.health.contact()
