"""The pipeline: fetch → core → produce → commit, as one asyncio loop around the merge tasks.

The runner holds no merge logic; it translates. Each loop iteration:

1. fetches a batch of records (``getmany``), waiting no longer than the earliest time a task
   asked to be woken (an idle deadline, a heartbeat);
2. tells each task what the fetch responses said (high watermark and position → lag, and the
   response time) and pushes the records;
3. polls each task until it stops emitting, stamps each batch and hands it to the producer;
4. applies the tasks' pause hints (backpressure).

Producer acks arrive as future callbacks; they tell the task which batches are durable, and the
offsets that became safe are committed by a background committer every ``COMMIT_INTERVAL_S``.
Under ``exactly_once_v2`` the same loop writes inside a transaction and commits the offsets in
it instead. A clean stop emits what may go out, waits for the acks, commits, and leaves.

A transactional producer that fails cannot go on: aiokafka's sender stops for good (it does, for
one, when the transaction coordinator is unreachable while a broker restarts). As Kafka Streams
does, the pipeline then starts over from the committed offsets, in the same process: the new
producer, with the same ``transactional.id``, fences the old one and the broker aborts the open
transaction, so ``read_committed`` readers see nothing twice. Errors that another start would
meet again (a newer producer took over the ``transactional.id``, an authorization failure) stay
fatal, as do restarts that keep failing before any transaction commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    IncompatibleBrokerVersion,
    KafkaError,
    ProducerFenced,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedVersionError,
)

from sidecar.config import SidecarConfig
from sidecar.core import Emit, Heartbeat, MergeTask, TopicPartition
from sidecar.core.deadletters import DeadLetterRatioExceeded
from sidecar.core.stamping import Stamper, dead_letter, heartbeat
from sidecar.core.task import Idle, NeedFetch, WaitUntil
from sidecar.core.timestamps import InvalidTimestampError
from sidecar.kafka.admin import TopicSpec, ensure_topics, partition_counts, wait_for_partitions
from sidecar.kafka.assignor import TaskAssignor
from sidecar.kafka.clients import client_options, start_client
from sidecar.kafka.writer import BATCH_BYTES, MAX_MESSAGE_BYTES, OutputWriter
from sidecar.service.health import Health
from sidecar.service.metrics import Metrics

log = logging.getLogger("timesync")

COMMIT_INTERVAL_S = 0.1
GAUGE_INTERVAL_S = 1.0
#: Longest single wait for a fetch, so a stop request is noticed quickly.
MAX_FETCH_WAIT_MS = 100
#: Records handed over per getmany / taken per poll: enough to amortise, small enough to interleave.
MAX_FETCH_RECORDS = 20_000
MAX_EMIT_RECORDS = 20_000
DRAIN_TIMEOUT_S = 30.0
#: exactly_once_v2: restarts in a row, with no transaction committed in between, before giving up.
MAX_EOS_RESTARTS = 5
#: Pause before an exactly_once_v2 restart, and between attempts to reach the cluster again.
RESTART_BACKOFF_S = 1.0
#: Errors that a restart would meet again: fatal even under exactly_once_v2.
_NOT_RESTARTABLE = (
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
    IncompatibleBrokerVersion,
)


class FatalError(Exception):
    """The sidecar cannot go on; the message is the one line the user sees (exit 1)."""


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(eq=False)
class TaskRun:
    """A merge task and what the runner tracks for it."""

    name: str
    task: MergeTask
    out_partition: int
    pending: dict[int, int] = field(default_factory=dict)  # batch id → producer batches not yet acked
    wake_at: int | None = None


class Pipeline:
    def __init__(
        self,
        config: SidecarConfig,
        metrics: Metrics | None = None,
        health: Health | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.health = health or Health()
        self.clock = clock
        self.stop_requested = asyncio.Event()
        self._fatal: FatalError | None = None
        self._lock = asyncio.Lock()
        self._eos = config.processing_guarantee == "exactly_once_v2"
        self._reset()

    def _reset(self) -> None:
        """The state of one start: tasks, offsets, transaction, clients (a restart begins afresh)."""
        self.tasks: dict[str, TaskRun] = {}
        self._task_of: dict[TopicPartition, TaskRun] = {}
        self._fetch_seen: dict[TopicPartition, int] = {}
        self._to_commit: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._stamper = Stamper()
        self._txn_open = False
        self._txn_started = 0.0
        self._txn_batches: list[tuple[TaskRun, int]] = []
        self._txn_futures: list[asyncio.Future[Any]] = []
        self._txn_committed = False
        self._restart: str | None = None
        self._lat_topics: set[str] = set()
        self._side_partitions: dict[str, int] = {}
        self._input_counts: dict[str, int] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._writer: OutputWriter | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def request_stop(self) -> None:
        self.stop_requested.set()

    async def run(self) -> None:
        """Run until a stop is requested (returns) or a fatal error (raises ``FatalError``)."""
        failures = 0
        while True:
            await self._run_once(restarting=failures > 0)
            if self._fatal is not None:
                raise self._fatal
            reason = self._restart
            if reason is None or self.stop_requested.is_set():
                return
            failures = 1 if self._txn_committed else failures + 1
            if failures > MAX_EOS_RESTARTS:
                raise FatalError(
                    f"{reason}; gave up after {MAX_EOS_RESTARTS} restarts in a row without a "
                    "committed transaction"
                )
            log.warning("%s; restarting from the committed offsets (the open transaction is aborted)", reason)
            self._reset()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_requested.wait(), RESTART_BACKOFF_S)

    async def _run_once(self, restarting: bool) -> None:
        """One start: connect, merge until a stop, a fatal error or a restart is due; close."""
        cfg = self.config
        options = client_options(cfg)
        if restarting:
            if not await self._reachable(options):
                return
            try:
                await self._prepare_topics(options)
            except FatalError as e:
                self._restart = str(e)  # counted: a restart that keeps failing ends the sidecar
                return
        else:
            await self._prepare_topics(options)
        self._producer = AIOKafkaProducer(
            **options,
            acks="all",
            enable_idempotence=True,
            compression_type=None if cfg.compression_type == "none" else cfg.compression_type,
            linger_ms=cfg.linger_ms,
            max_batch_size=BATCH_BYTES,
            max_request_size=MAX_MESSAGE_BYTES,
            transactional_id=f"{cfg.effective_group_id}-txn" if self._eos else None,
        )
        self._consumer = AIOKafkaConsumer(
            **options,
            group_id=cfg.effective_group_id,
            enable_auto_commit=False,
            auto_offset_reset=cfg.auto_offset_reset,
            isolation_level="read_committed" if self._eos else "read_uncommitted",
            fetch_max_wait_ms=MAX_FETCH_WAIT_MS,
            partition_assignment_strategy=(TaskAssignor,),
        )
        # At least once waits out a silent broker (see OutputWriter); under exactly_once_v2 a
        # producer that gave up is replaced by a restart, which is safe there.
        self._writer = OutputWriter(self._producer, patient=not self._eos, stopping=self.stop_requested)
        try:
            try:
                await self._connect(self._producer.start(), "the producer")
                await self._connect(self._consumer.start(), "the consumer")
            except FatalError as e:
                if not restarting:
                    raise
                self._restart = str(e)  # the cluster went away again
                return
            await self._assign()
            self.health.started()
            committer = asyncio.create_task(self._commit_loop())
            gauges = asyncio.create_task(self._gauge_loop())
            try:
                await self._loop()
            finally:
                committer.cancel()
                gauges.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await committer
                with contextlib.suppress(asyncio.CancelledError):
                    await gauges
            await self._drain()
        finally:
            await self._close()

    async def _reachable(self, options: dict[str, Any]) -> bool:
        """Before a restart: wait until the cluster answers again (False if a stop came first)."""
        while not self.stop_requested.is_set():
            admin = AIOKafkaAdminClient(**options)
            try:
                await admin.start()
                return True
            except KafkaError:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop_requested.wait(), RESTART_BACKOFF_S)
            finally:
                with contextlib.suppress(Exception):
                    await admin.close()
        return False

    async def _connect(self, starting: Any, what: str) -> None:
        try:
            await start_client(starting)
        except KafkaError as e:
            raise FatalError(
                f"cannot connect {what} to {self.config.bootstrap_servers}: {_describe(e)}"
            ) from None

    async def _prepare_topics(self, options: dict[str, Any]) -> None:
        """Check the inputs exist, create the outputs if missing, learn which inputs are LogAppendTime."""
        cfg = self.config
        admin = AIOKafkaAdminClient(**options)
        try:
            await self._connect(admin.start(), "the admin client")
            counts = await partition_counts(admin, cfg.topics)
            missing = [t for t in cfg.topics if t not in counts]
            if missing:
                raise FatalError(
                    f"input topic(s) {', '.join(missing)} do not exist on {cfg.bootstrap_servers}"
                )
            self._input_counts = counts
            needed = 1 if cfg.task_grouping == "single" else max(counts.values())
            big = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}
            specs = [TopicSpec(cfg.output_topic, needed, configs=big)]
            side = [t for t in (cfg.errors_deadletterqueue_topic_name, cfg.late_topic) if t]
            specs += [TopicSpec(t, needed, configs=big) for t in side]
            created = await ensure_topics(admin, specs)
            if created:
                log.info("created topics %s", ", ".join(created))
            existing = await wait_for_partitions(admin, [cfg.output_topic, *side])
            have = existing[cfg.output_topic]
            if have < needed:
                raise FatalError(
                    f"output topic {cfg.output_topic} has {have} partition(s) but task.grouping="
                    f"{cfg.task_grouping} needs {needed} (one per task); use a new topic or add partitions"
                )
            self._side_partitions = {t: existing.get(t, 1) for t in side}
            described = await admin.describe_configs(
                [
                    ConfigResource(ConfigResourceType.TOPIC, t, {"message.timestamp.type": None})
                    for t in cfg.topics
                ]
            )
            for response in described:
                for resource in response.resources:
                    for entry in resource[4]:
                        if entry[0] == "message.timestamp.type" and entry[1] == "LogAppendTime":
                            self._lat_topics.add(resource[3])
        finally:
            await admin.close()

    async def _assign(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        cfg = self.config
        if cfg.task_grouping == "single":
            parts = [TopicPartition(t, p) for t in cfg.topics for p in range(self._input_counts[t])]
            consumer.assign([KafkaTopicPartition(*tp) for tp in parts])
            self._add_task("0", parts, out_partition=0)
        else:
            consumer.subscribe(cfg.topics, listener=_Rebalance(self))

    def _add_task(self, name: str, partitions: list[TopicPartition], out_partition: int) -> None:
        task = MergeTask(
            partitions,
            self.config.task_config(),
            topic_order=self.config.topics,
            log_append_time_topics=self._lat_topics,
        )
        run = TaskRun(name, task, out_partition)
        self.tasks[name] = run
        for tp in partitions:
            self._task_of[tp] = run

    async def _close(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), timeout=DRAIN_TIMEOUT_S)

    # -- the loop -------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self.stop_requested.is_set() and self._restart is None:
            fetched = await consumer.getmany(timeout_ms=self._fetch_wait_ms(), max_records=MAX_FETCH_RECORDS)
            async with self._lock:
                now = self.clock()
                try:
                    await self._observe(fetched, now)
                    for run in list(self.tasks.values()):
                        await self._drive(run, now)
                    self._apply_pause_hints(now)
                    if (
                        self._eos
                        and self._txn_open
                        and time.monotonic() - self._txn_started >= COMMIT_INTERVAL_S
                    ):
                        await self._commit_transaction()
                except InvalidTimestampError as e:
                    self._fail(f"{e}; stopping (timestamp.invalid=fail, errors.tolerance=none)")
                except DeadLetterRatioExceeded as e:
                    self._fail(str(e))
                except KafkaError as e:
                    if self._eos and not isinstance(e, _NOT_RESTARTABLE):
                        self._restart = f"the transactional producer failed: {_describe(e)}"
                    else:
                        self._fail(f"Kafka error: {_describe(e)}")

    def _fetch_wait_ms(self) -> int:
        wake = min((r.wake_at for r in self.tasks.values() if r.wake_at is not None), default=None)
        if wake is None:
            return MAX_FETCH_WAIT_MS
        return max(0, min(MAX_FETCH_WAIT_MS, wake - self.clock()))

    async def _observe(self, fetched: dict[KafkaTopicPartition, list[Any]], now: int) -> None:
        """Fetch facts first (lag as of the responses), then the records — the core's contract."""
        consumer = self._consumer
        assert consumer is not None
        stable = self._eos
        for tp in consumer.assignment():
            run = self._task_of.get(tp)
            if run is None:
                continue
            fetched_at = consumer.last_poll_timestamp(tp)
            if fetched_at is None or (fetched_at == self._fetch_seen.get(tp) and tp not in fetched):
                continue
            self._fetch_seen[tp] = fetched_at
            high = consumer.last_stable_offset(tp) if stable else consumer.highwater(tp)
            if high is None:
                continue
            run.task.observe_fetch(tp, high, await consumer.position(tp), fetched_at)
            self.health.contact()
        records_in = 0
        for tp, records in fetched.items():
            run = self._task_of.get(tp)
            if run is not None and records:
                records_in += len(records)
                run.task.push(tp, records)
        if records_in:
            self.metrics.records_in.inc(records_in)

    async def _drive(self, run: TaskRun, now: int) -> None:
        while True:
            out = run.task.poll(now, MAX_EMIT_RECORDS)
            if isinstance(out, Emit):
                await self._send(run, out)
                continue
            if isinstance(out, Heartbeat):
                await self._send_heartbeat(run, out)
                continue
            if isinstance(out, WaitUntil):
                run.wake_at = out.deadline_ms
            elif isinstance(out, NeedFetch | Idle):
                run.wake_at = out.wake_at_ms
            return

    async def _send(self, run: TaskRun, emit: Emit) -> None:
        writer = self._writer
        assert writer is not None
        cfg = self.config
        if self._eos:
            await self._begin_transaction()
        futures = []
        if emit.records:
            assert self._producer is not None
            batches = self._stamper.stamp_into(emit, self._producer.create_batch)
            futures += await writer.send(cfg.output_topic, run.out_partition, batches)
        if emit.late_routed and cfg.late_topic:
            late = [self._stamper.late_record(x, emit.watermark) for x in emit.late_routed]
            futures += await writer.write(cfg.late_topic, self._side_partition(cfg.late_topic, run), late)
        if emit.dead_letters:
            dlq = cfg.errors_deadletterqueue_topic_name
            futures += await writer.write(
                dlq, self._side_partition(dlq, run), [dead_letter(d) for d in emit.dead_letters]
            )
            self.metrics.dropped.labels("dead-letter").inc(len(emit.dead_letters))
        self._count(emit, len(emit.records))
        if self._eos:
            self._txn_batches.append((run, emit.batch_id))
            self._txn_futures += futures
            return
        if not futures:
            self._to_commit.update(run.task.acked((emit.batch_id,)))
            return
        run.pending[emit.batch_id] = len(futures)
        for future in futures:
            future.add_done_callback(functools.partial(self._on_ack, run, emit.batch_id))

    def _side_partition(self, topic: str, run: TaskRun) -> int:
        return run.out_partition % self._side_partitions.get(topic, 1)

    def _count(self, emit: Emit, written: int) -> None:
        m = self.metrics
        if written:
            m.records_out.inc(written)
        if emit.enforced_count:
            m.enforced.inc(emit.enforced_count)
        late = len(emit.late) + len(emit.late_routed) + emit.dropped_late
        if late:
            m.late.inc(late)
        if emit.dropped_late:
            m.dropped.labels("late").inc(emit.dropped_late)
        m.lateness.observe_batch(
            written - len(emit.late), [*emit.lateness, *(x.lateness for x in emit.late_routed)]
        )

    async def _send_heartbeat(self, run: TaskRun, beat: Heartbeat) -> None:
        writer = self._writer
        assert writer is not None
        if self._eos:
            await self._begin_transaction()
        futures = await writer.write(self.config.output_topic, run.out_partition, [heartbeat(beat.watermark)])
        self.metrics.heartbeats.inc()
        if self._eos:
            self._txn_futures += futures
        else:
            for future in futures:
                future.add_done_callback(self._on_heartbeat_ack)

    def _on_heartbeat_ack(self, future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.health.contact()

    def _on_ack(self, run: TaskRun, batch_id: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self._fail(f"writing to {self.config.output_topic} failed: {_describe(error)}")
            return
        self.health.contact()
        left = run.pending[batch_id] - 1
        if left:
            run.pending[batch_id] = left
            return
        del run.pending[batch_id]
        if self._fatal is None:
            self._to_commit.update(run.task.acked((batch_id,)))

    def _apply_pause_hints(self, now: int) -> None:
        consumer = self._consumer
        assert consumer is not None
        for run in self.tasks.values():
            hint = run.task.pause_hint(now)
            if hint.pause:
                consumer.pause(*(KafkaTopicPartition(*tp) for tp in hint.pause))
                self._paused.update(hint.pause)
            if hint.resume:
                consumer.resume(*(KafkaTopicPartition(*tp) for tp in hint.resume))
                self._paused.difference_update(hint.resume)

    def _fail(self, message: str) -> None:
        if self._fatal is None:
            log.error("%s", message)
            self._fatal = FatalError(message)
            self.health.failed(message)
        self.stop_requested.set()

    # -- commits ------------------------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(COMMIT_INTERVAL_S)
            if not self._eos:
                await self._commit_acked()

    async def _commit_acked(self) -> None:
        if not self._to_commit or self._consumer is None:
            return
        offsets, self._to_commit = self._to_commit, {}
        try:
            await self._consumer.commit({KafkaTopicPartition(*tp): o for tp, o in offsets.items()})
        except KafkaError as e:
            # A commit lost in a rebalance is repeated by whoever owns the partition next: the
            # records are reprocessed (at least once), never skipped.
            log.warning("commit failed, will be retried with later offsets: %s", _describe(e))
            for tp, offset in offsets.items():
                self._to_commit.setdefault(tp, offset)

    async def _begin_transaction(self) -> None:
        if not self._txn_open:
            assert self._producer is not None
            await self._producer.begin_transaction()
            self._txn_open = True
            self._txn_started = time.monotonic()

    async def _commit_transaction(self) -> None:
        """Wait for every write of the transaction, then commit it together with the offsets."""
        producer = self._producer
        assert producer is not None
        await asyncio.gather(*self._txn_futures)
        offsets: dict[TopicPartition, int] = {}
        for run, batch_id in self._txn_batches:
            offsets.update(run.task.acked((batch_id,)))
        if offsets:
            await producer.send_offsets_to_transaction(
                {KafkaTopicPartition(*tp): o for tp, o in offsets.items()}, self.config.effective_group_id
            )
        await producer.commit_transaction()
        self.health.contact()
        self._txn_committed = True
        self._txn_open = False
        self._txn_batches.clear()
        self._txn_futures.clear()

    async def _drain(self) -> None:
        """Emit what may go out now, wait for the acks, commit. Nothing is committed after a failure
        beyond what was acked before it; under exactly_once_v2 the open transaction is aborted."""
        if self._restart is not None:
            return  # the producer is dead: the next start fences it, which aborts its transaction
        if self._fatal is None:
            try:
                async with self._lock:
                    now = self.clock()
                    for run in list(self.tasks.values()):
                        await self._drive(run, now)
                    if self._eos and self._txn_open:
                        await self._commit_transaction()
            except (InvalidTimestampError, DeadLetterRatioExceeded, KafkaError) as e:
                self._fail(str(e))
        if self._eos and self._fatal is not None and self._txn_open:
            await self._abort_transaction()
        if not self._eos:
            await self._await_acks(self.tasks.values())
            for run in self.tasks.values():
                self._to_commit.update(run.task.committable())
            await self._commit_acked()

    async def _abort_transaction(self) -> None:
        """After a fatal error: abort now, rather than leave ``read_committed`` readers of the output
        blocked until the transaction times out."""
        assert self._producer is not None
        try:
            await asyncio.wait_for(self._producer.abort_transaction(), timeout=DRAIN_TIMEOUT_S)
        except ProducerFenced:
            pass  # the newer producer that fenced this one has aborted the transaction already
        except (KafkaError, TimeoutError) as e:
            log.warning("could not abort the open transaction (the broker times it out): %s", _describe(e))
        self._txn_open = False

    async def _await_acks(self, runs: Iterable[TaskRun]) -> None:
        """Until every batch written for these tasks is acked (or failed), bounded in time."""
        runs = list(runs)
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._producer.flush(), timeout=DRAIN_TIMEOUT_S)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        # Ack callbacks run on the loop after the futures resolve; let them all land.
        while any(run.pending for run in runs) and self._fatal is None and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def _revoke(self, revoked: set[KafkaTopicPartition]) -> None:
        """Hand tasks back: wait for their outputs, commit what was acked, forget them."""
        async with self._lock:
            gone = {self._task_of[tp] for tp in revoked if tp in self._task_of}
            if not gone:
                return
            if self._eos and self._txn_open:
                await self._commit_transaction()
            else:
                await self._await_acks(gone)
                for run in gone:
                    self._to_commit.update(run.task.committable())
                await self._commit_acked()
            for run in gone:
                del self.tasks[run.name]
                for tp in run.task.partitions:
                    self._task_of.pop(tp, None)
                    self._fetch_seen.pop(tp, None)
                    self._paused.discard(tp)
            log.info("tasks revoked: %s", ", ".join(sorted(r.name for r in gone)))

    async def _assigned(self, assigned: set[KafkaTopicPartition]) -> None:
        async with self._lock:
            by_index: dict[int, list[TopicPartition]] = {}
            for tp in assigned:
                by_index.setdefault(tp.partition, []).append(TopicPartition(tp.topic, tp.partition))
            for index, parts in sorted(by_index.items()):
                name = str(index)
                if name not in self.tasks:
                    self._add_task(name, parts, out_partition=index)
            if by_index:
                log.info("tasks assigned: %s", ", ".join(str(i) for i in sorted(by_index)))

    # -- observation -----------------------------------------------------------------------------------

    async def _gauge_loop(self) -> None:
        while True:
            now = self.clock()
            for name, run in list(self.tasks.items()):
                self.metrics.observe_task(name, run.task.snapshot(now))
            await asyncio.sleep(GAUGE_INTERVAL_S)

    def status(self) -> dict[str, Any]:
        now = self.clock()
        state, message = self.health.status()
        return {
            "health": state,
            "message": message,
            "output_topic": self.config.output_topic,
            "task_grouping": self.config.task_grouping,
            "max_task_idle_ms": self.config.max_task_idle_ms,
            "processing_guarantee": self.config.processing_guarantee,
            "tasks": {name: run.task.snapshot(now) for name, run in sorted(self.tasks.items())},
            "config": self.config.redacted(),
        }


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    async def on_partitions_revoked(self, revoked: set[KafkaTopicPartition]) -> None:
        await self.pipeline._revoke(revoked)

    async def on_partitions_assigned(self, assigned: set[KafkaTopicPartition]) -> None:
        await self.pipeline._assigned(assigned)


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if type(error).__name__ in text else f"{type(error).__name__}: {text}"
