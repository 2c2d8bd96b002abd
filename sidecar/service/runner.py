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
All tasks share one idempotent producer. A clean stop emits what may go out, waits for the acks,
commits, and leaves.

Under ``exactly_once_v2`` every task writes through a transactional producer of its own
(``sidecar.kafka.transactions``, ``transactional.id`` ``<group.id>-txn-<task>``): its outputs,
heartbeats, late and dead-letter records and its input offsets commit in the task's own
transaction, about every ``COMMIT_INTERVAL_S``. A revoked task commits its open transaction and
closes its producer before its partitions are handed over; an assigned task starts its producer
first — which fences the previous owner's and completes its last transaction — and then reads its
committed offsets. A producer fenced for a task this replica has handed over is that task lost
legitimately, not the end of the process.

A transactional producer that fails cannot go on: aiokafka's sender stops for good (it does, for
one, when the transaction coordinator is unreachable while a broker restarts). As Kafka Streams
does, the pipeline then starts over from the committed offsets, in the same process: the new
producers, with the same ids, fence the old ones and the broker aborts their open transactions,
so ``read_committed`` readers see nothing twice. So does a task's producer fenced while this
replica still believes it owns the task (it missed a rebalance, and another replica took the task
over): everything is dropped and the group joined again, as Kafka Streams does on
``TaskMigratedException``. Errors that another start would meet again (an authorization failure;
with ``task.grouping=single``, another process using the same ``transactional.id``) stay fatal,
as do restarts that keep failing before any transaction commits.
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
    IllegalOperation,
    IllegalStateError,
    IncompatibleBrokerVersion,
    KafkaError,
    KafkaTimeoutError,
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
from sidecar.kafka.stamped_batches import (
    NativeStamper,
    batch_factory,
    compressor,
    native_stamping_available,
)
from sidecar.kafka.transactions import TaskTransaction, transactional_id
from sidecar.kafka.writer import BATCH_BYTES, MAX_MESSAGE_BYTES, OutputActivity, OutputWriter
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
#: /status calls the output blocked once a write or a commit has waited this long.
BLOCKED_AFTER_MS = 1000
#: exactly_once_v2: how long a revoked task's producer may take to abort after a failure.
HAND_BACK_ABORT_S = 5.0
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
    writer: OutputWriter
    #: Makes the batches ``Stamper.stamp_into`` fills: native ``StampedBatch`` es, or the
    #: producer's own ``create_batch`` without the extension (see ``Pipeline._batches``).
    new_batch: Callable[[], Any]
    #: exactly_once_v2: the task's own producer and open transaction.
    txn: TaskTransaction | None = None
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
        self._grouped = config.task_grouping == "partition"
        #: Stamp and encode output batches in C when the extension is built (same bytes).
        self._native = native_stamping_available()
        self._reset()

    def _reset(self) -> None:
        """The state of one start: tasks, offsets, transaction, clients (a restart begins afresh)."""
        self.tasks: dict[str, TaskRun] = {}
        self._task_of: dict[TopicPartition, TaskRun] = {}
        self._fetch_seen: dict[TopicPartition, int] = {}
        self._to_commit: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._stamper = NativeStamper(BATCH_BYTES) if self._native else Stamper()
        self._activity = OutputActivity(self.clock)
        self._txn_committed = False
        self._restart: str | None = None
        #: Assignments so far, and the one at which each partition was last seeked (see _assigned).
        self._assignments = 0
        self._seeked: dict[TopicPartition, int] = {}
        self._lat_topics: set[str] = set()
        self._side_partitions: dict[str, int] = {}
        self._input_counts: dict[str, int] = {}
        self._options: dict[str, Any] = {}
        self._consumer: AIOKafkaConsumer | None = None
        #: at_least_once: the producer and writer every task shares (exactly_once_v2: one per task).
        self._producer: AIOKafkaProducer | None = None
        self._writer: OutputWriter | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def request_stop(self) -> None:
        self.stop_requested.set()

    async def run(self) -> None:
        """Run until a stop is requested (returns) or a fatal error (raises ``FatalError``)."""
        if not self._native:
            log.warning(
                "the native output encoder is not built (no C compiler at install?): stamping in "
                "Python through aiokafka's batch builder — the same records, at about half the "
                "throughput, compressed at aiokafka's levels rather than compression.*.level"
            )
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
            log.warning("%s; restarting from the committed offsets (open transactions are aborted)", reason)
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
        self._options = options
        if not self._eos:
            self._producer = self._new_producer(None)
            # At least once waits out a silent broker (see OutputWriter).
            self._writer = OutputWriter(
                self._producer, patient=True, stopping=self.stop_requested, activity=self._activity
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
        try:
            try:
                if self._producer is not None:
                    await self._connect(self._producer.start(), "the producer")
                await self._connect(self._consumer.start(), "the consumer")
                await self._assign()
            except FatalError as e:
                if not restarting:
                    raise
                self._restart = str(e)  # the cluster went away again
                return
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

    def _new_producer(self, txn_id: str | None) -> AIOKafkaProducer:
        cfg = self.config
        return AIOKafkaProducer(
            **self._options,
            acks="all",
            enable_idempotence=True,
            compression_type=None if cfg.compression_type == "none" else cfg.compression_type,
            linger_ms=cfg.linger_ms,
            max_batch_size=BATCH_BYTES,
            max_request_size=MAX_MESSAGE_BYTES,
            transactional_id=txn_id,
        )

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
            run = self._add_task("0", parts, out_partition=0)
            if run.txn is not None:
                # Before the consumer reads the committed offsets: fence a previous run, complete
                # its last transaction.
                await self._connect(run.txn.producer.start(), "the transactional producer")
            consumer.assign([KafkaTopicPartition(*tp) for tp in parts])
        else:
            consumer.subscribe(cfg.topics, listener=_Rebalance(self))

    def _add_task(self, name: str, partitions: list[TopicPartition], out_partition: int) -> TaskRun:
        cfg = self.config
        task = MergeTask(
            partitions,
            cfg.task_config(),
            topic_order=cfg.topics,
            log_append_time_topics=self._lat_topics,
        )
        if self._eos:
            txn_id = transactional_id(cfg.effective_group_id, cfg.task_grouping, name)
            producer = self._new_producer(txn_id)
            # Not patient: under exactly_once_v2 a producer that gave up is replaced by a restart.
            writer = OutputWriter(producer, stopping=self.stop_requested, activity=self._activity)
            txn = TaskTransaction(producer, writer, txn_id, cfg.effective_group_id, self.clock)
            run = TaskRun(name, task, out_partition, writer, self._batches(producer, True), txn)
        else:
            assert self._producer is not None
            assert self._writer is not None
            run = TaskRun(name, task, out_partition, self._writer, self._batches(self._producer, False))
        self.tasks[name] = run
        for tp in partitions:
            self._task_of[tp] = run
        return run

    def _batches(self, producer: AIOKafkaProducer, transactional: bool) -> Callable[[], Any]:
        """What ``self._stamper.stamp_into`` fills: native batches, or the producer's own."""
        if self._native:
            cfg = self.config
            return batch_factory(compressor(cfg.compression_type, cfg.compression_level), transactional)
        return producer.create_batch

    async def _close(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), timeout=DRAIN_TIMEOUT_S)
        await asyncio.gather(*(r.txn.close(DRAIN_TIMEOUT_S) for r in self.tasks.values() if r.txn))

    # -- the loop -------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self.stop_requested.is_set() and self._restart is None:
            fetched = await consumer.getmany(timeout_ms=self._fetch_wait_ms(), max_records=MAX_FETCH_RECORDS)
            returned_at = self._assignments  # no await since getmany returned
            async with self._lock:
                if self._assignments != returned_at:
                    fetched = self._fetched_since_seek(fetched, returned_at)
                now = self.clock()
                try:
                    await self._observe(fetched, now)
                    for run in list(self.tasks.values()):
                        try:
                            await self._drive(run, now)
                        except (KafkaError, IllegalOperation) as e:
                            self._producer_failed(run, e)
                            break
                    self._apply_pause_hints(now)
                    if self._eos and self._fatal is None and self._restart is None:
                        await self._commit_due()
                except InvalidTimestampError as e:
                    self._fail(f"{e}; stopping (timestamp.invalid=fail, errors.tolerance=none)")
                except DeadLetterRatioExceeded as e:
                    self._fail(str(e))
                except KafkaError as e:
                    if self._eos and not isinstance(e, _NOT_RESTARTABLE):
                        self._restart = f"a Kafka client failed: {_describe(e)}"
                    else:
                        self._fail(f"Kafka error: {_describe(e)}")

    def _fetched_since_seek(
        self, fetched: dict[KafkaTopicPartition, list[Any]], returned_at: int
    ) -> dict[KafkaTopicPartition, list[Any]]:
        """Drop the records of partitions seeked after this fetch returned: they were read from
        the position before the seek (see ``_assigned``), and the consumer reads them again from
        the committed offset."""
        seeked = self._seeked
        return {tp: records for tp, records in fetched.items() if seeked.get(tp, 0) <= returned_at}

    def _producer_failed(self, run: TaskRun, error: BaseException) -> None:
        """What a failed write, commit or start of a task's producer means: a restart, or the end."""
        if run.txn is None:
            self._fail(f"Kafka error: {_describe(error)}")
            return
        error = run.txn.cause(error)
        txn_id = run.txn.transactional_id
        if isinstance(error, ProducerFenced):
            if self._grouped:
                # The task moved to another replica while this one still believed it owned it.
                self._restart = (
                    f"the producer of task {run.name} ({txn_id}) was fenced: another replica took "
                    "the task over"
                )
            else:
                self._fail(
                    f"the producer of task {run.name} was fenced: another process started with "
                    f"transactional.id {txn_id} (a second sidecar with group.id "
                    f"{self.config.effective_group_id}?)"
                )
        elif isinstance(error, KafkaError) and not isinstance(error, _NOT_RESTARTABLE):
            self._restart = f"the transactional producer of task {run.name} failed: {_describe(error)}"
        else:
            self._fail(f"the transactional producer of task {run.name} failed: {_describe(error)}")

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
        writer = run.writer
        cfg = self.config
        txn = run.txn
        if txn is not None:
            await txn.begin()
        futures = []
        if emit.records:
            batches = self._stamper.stamp_into(emit, run.new_batch)
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
        if txn is not None:
            txn.add(emit.batch_id, futures)
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
        txn = run.txn
        if txn is not None:
            await txn.begin()  # under exactly_once_v2 a heartbeat is part of the task's transaction
        futures = await run.writer.write(
            self.config.output_topic, run.out_partition, [heartbeat(beat.watermark)]
        )
        self.metrics.heartbeats.inc()
        if txn is not None:
            txn.add(None, futures)
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

    async def _commit_due(self) -> None:
        """exactly_once_v2: commit each task's transaction once it has been open ``COMMIT_INTERVAL_S``."""
        now = time.monotonic()
        due = [r for r in self.tasks.values() if r.txn is not None and r.txn.due(now, COMMIT_INTERVAL_S)]
        if due:
            for run, error in await self._commit(due):
                self._producer_failed(run, error)

    async def _commit(self, runs: list[TaskRun]) -> list[tuple[TaskRun, BaseException]]:
        """Commit these tasks' open transactions, each with its own input offsets, concurrently;
        return the ones that failed, with their errors."""
        results = await asyncio.gather(*(self._commit_one(run) for run in runs), return_exceptions=True)
        failed = []
        for run, result in zip(runs, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                failed.append((run, result))
        return failed

    async def _commit_one(self, run: TaskRun) -> None:
        assert run.txn is not None
        await run.txn.commit(run.task.acked)
        self._txn_committed = True
        self.health.contact()

    async def _drain(self) -> None:
        """Emit what may go out now, wait for the acks, commit. Nothing is committed after a failure
        beyond what was acked before it; under exactly_once_v2 the open transactions are aborted."""
        if self._restart is not None:
            return  # the producers are dead: the next start fences them, which aborts their transactions
        if self._fatal is None:
            try:
                async with self._lock:
                    now = self.clock()
                    for run in list(self.tasks.values()):
                        try:
                            await self._drive(run, now)
                        except (KafkaError, IllegalOperation) as e:
                            self._failed_at_stop(run, e)
                    if self._eos:
                        open_runs = [r for r in self.tasks.values() if r.txn is not None and r.txn.open]
                        for run, error in await self._commit(open_runs):
                            self._failed_at_stop(run, error)
            except (InvalidTimestampError, DeadLetterRatioExceeded) as e:
                self._fail(str(e))
        if self._eos and self._fatal is not None:
            await asyncio.gather(*(self._abort(run) for run in self.tasks.values()))
        if not self._eos:
            await self._await_acks(self.tasks.values())
            for run in self.tasks.values():
                self._to_commit.update(run.task.committable())
            await self._commit_acked()

    def _failed_at_stop(self, run: TaskRun, error: BaseException) -> None:
        if run.txn is not None:
            error = run.txn.cause(error)
        if self._grouped and isinstance(error, ProducerFenced) and run.txn is not None:
            # The task moved while this replica was stopping: its new owner redoes the transaction.
            log.info("task %s was taken over while stopping; its open transaction is aborted", run.name)
            run.txn.forget()
        else:
            self._fail(f"Kafka error while stopping: {_describe(error)}")

    async def _abort(self, run: TaskRun) -> None:
        """After a fatal error: abort now, rather than leave ``read_committed`` readers of the output
        blocked until the transaction times out."""
        if run.txn is None or not run.txn.open:
            return
        try:
            await run.txn.abort(DRAIN_TIMEOUT_S)
        except Exception as raised:
            error = run.txn.cause(raised)
            if not isinstance(error, ProducerFenced):  # else the fencing producer aborted it already
                log.warning(
                    "could not abort the open transaction of task %s (the broker times it out): %s",
                    run.name,
                    _describe(error),
                )

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

    # -- rebalancing (task.grouping=partition) ------------------------------------------------------

    async def _revoke(self, revoked: set[KafkaTopicPartition]) -> None:
        """Hand tasks back: finish their writes and commit (exactly_once_v2: commit each task's
        transaction and close its producer), then forget them."""
        async with self._lock:
            gone = {self._task_of[tp] for tp in revoked if tp in self._task_of}
            if not gone:
                return
            if self._eos:
                await asyncio.gather(*(self._hand_back(run) for run in gone))
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

    async def _hand_back(self, run: TaskRun) -> None:
        """exactly_once_v2: commit the task's open transaction (abort it after a failure), then
        close its producer, before the task's partitions go to their next owner."""
        txn = run.txn
        assert txn is not None
        try:
            if txn.open and self._fatal is None and self._restart is None:
                await asyncio.wait_for(self._commit_one(run), timeout=DRAIN_TIMEOUT_S)
            elif txn.open:
                await txn.abort(HAND_BACK_ABORT_S)
        except Exception as raised:  # a rebalance callback must not raise: aiokafka only logs it
            error = txn.cause(raised)
            txn.forget()
            if isinstance(error, ProducerFenced):
                # This replica had lost the task already (it missed a rebalance): the new owner
                # fenced the producer, the broker aborted the transaction, the new owner redoes it.
                log.info("task %s had already been taken over; its open transaction is aborted", run.name)
            elif isinstance(error, _NOT_RESTARTABLE):
                self._fail(f"the transactional producer of task {run.name} failed: {_describe(error)}")
            else:
                log.warning(
                    "task %s: could not commit its transaction before handing it over (%s); its "
                    "next owner's producer aborts it",
                    run.name,
                    _describe(error),
                )
        finally:
            await txn.close(DRAIN_TIMEOUT_S)

    async def _assigned(self, assigned: set[KafkaTopicPartition]) -> None:
        """Take tasks on: under exactly_once_v2 start each task's producer first (it fences the
        previous owner and completes its last transaction), then start every new task's partitions
        from the committed offsets.

        aiokafka reads the committed offsets as soon as the assignment is known, concurrently with
        this callback, and may even return records before the tasks exist. Those reads can be
        stale under exactly_once_v2: a transaction that the previous owner committed becomes
        visible in the group's offsets a moment after its commit returns, and aiokafka cannot ask
        the broker to wait for it (OffsetFetch ``require_stable``, KIP-447). So each partition is
        seeked again, to the offset read now, and the loop drops records it fetched before that
        seek (``_fetched_since_seek``).
        """
        async with self._lock:
            if self._fatal is not None or self._restart is not None or self.stop_requested.is_set():
                return  # leaving: starting producers now would only fence the tasks' next owners
            by_index: dict[int, list[TopicPartition]] = {}
            for tp in assigned:
                by_index.setdefault(tp.partition, []).append(TopicPartition(tp.topic, tp.partition))
            new = [
                self._add_task(str(index), parts, out_partition=index)
                for index, parts in sorted(by_index.items())
                if str(index) not in self.tasks
            ]
            if self._eos and new:
                started = await asyncio.gather(
                    *(self._start_producer(run) for run in new), return_exceptions=True
                )
                for run, result in zip(new, started, strict=True):
                    if isinstance(result, BaseException):
                        self._producer_failed(run, result)
            if new and self._fatal is None and self._restart is None:
                await self._seek_committed([tp for run in new for tp in run.task.partitions])
            if by_index:
                log.info("tasks assigned: %s", ", ".join(str(i) for i in sorted(by_index)))

    async def _start_producer(self, run: TaskRun) -> None:
        """Start a new task's producer, bounded in time: a rebalance must not wait forever."""
        assert run.txn is not None
        try:
            await asyncio.wait_for(run.txn.start(), timeout=DRAIN_TIMEOUT_S)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no producer id for {run.txn.transactional_id} within {DRAIN_TIMEOUT_S:g} s"
            ) from None

    async def _seek_committed(self, partitions: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        tps = [KafkaTopicPartition(*tp) for tp in partitions]
        try:
            committed = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
            fresh = [tp for tp, offset in zip(tps, committed, strict=True) if offset is None]
            reset: dict[KafkaTopicPartition, int] = {}
            if fresh:
                if self.config.auto_offset_reset == "earliest":
                    reset = await consumer.beginning_offsets(fresh)
                else:
                    reset = await consumer.end_offsets(fresh)
        except KafkaError as e:
            if self._eos:
                self._restart = f"cannot read the committed offsets of new tasks: {_describe(e)}"
            else:  # at least once: the consumer's own start position is safe
                log.warning("cannot read the committed offsets of new tasks: %s", _describe(e))
            return
        # One synchronous block: seeks and the counter the loop compares with move together.
        self._assignments += 1
        for tp, offset in zip(tps, committed, strict=True):
            with contextlib.suppress(IllegalStateError):  # already revoked again
                consumer.seek(tp, offset if offset is not None else reset[tp])
                self._seeked[TopicPartition(tp.topic, tp.partition)] = self._assignments

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
            "output_encoder": "native" if self._native else "python",
            "output": self._output_status(now),
            "tasks": {name: run.task.snapshot(now) for name, run in sorted(self.tasks.items())},
            "config": self.config.redacted(),
        }

    def _output_status(self, now: int) -> dict[str, Any]:
        """The output side for /status: batches in flight, the write or commit the pipeline waits
        in, and (exactly_once_v2) each task's transaction — why nothing moves while the merge
        buffers look healthy."""
        activity = self._activity.snapshot(now)
        out: dict[str, Any] = {"topic": self.config.output_topic, **activity}
        txns = {n: r.txn.snapshot(now) for n, r in sorted(self.tasks.items()) if r.txn is not None}
        if self._eos:
            out["transactions"] = txns
        out["blocked"] = _blocked(activity, txns, now)
        return out


def _blocked(activity: dict[str, Any], txns: dict[str, dict[str, Any]], now: int) -> str | None:
    """One line saying what the output holds the pipeline in, once it has waited
    ``BLOCKED_AFTER_MS``; ``None`` when nothing waits that long."""
    writing = activity["writing"]
    if writing is not None and writing["waiting_ms"] >= BLOCKED_AFTER_MS:
        ack = activity["last_ack"]
        last = "none acknowledged yet" if ack is None else f"last acknowledged {(now - ack) / 1000:.1f} s ago"
        waited = writing["waiting_ms"] / 1000
        return (
            f"writing to {writing['topic']}[{writing['partition']}] for {waited:.1f} s: "
            f"the producer takes a batch only when the previous one for that partition has gone out "
            f"({activity['batches_in_flight']} in flight, {last}); nothing is fetched meanwhile"
        )
    for name, txn in txns.items():
        if txn["committing_ms"] is not None and txn["committing_ms"] >= BLOCKED_AFTER_MS:
            return (
                f"committing the transaction of task {name} for {txn['committing_ms'] / 1000:.1f} s "
                f"(waiting for its writes to be acknowledged and for the commit)"
            )
    return None


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
