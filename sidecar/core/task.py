"""``MergeTask``: one task's merge, as a sans-I/O state machine.

The adapter feeds it facts and asks it what to do; it never waits, sleeps or reads a clock.

* ``push(tp, records)`` — records fetched for one input partition, in offset order.
* ``observe_fetch(tp, high_watermark, position, now_ms)`` — what a fetch response said about a
  partition (its lag is ``high_watermark − position``). Call it for every fetch response,
  before pushing that response's records; calling it again with the same facts is harmless.
* ``poll(now_ms)`` — one of :class:`~sidecar.core.records.Emit` (a batch of output, in order),
  :class:`Heartbeat` (nothing flowed for ``watermark.heartbeat.ms``: write a control record),
  :class:`NeedFetch` (blocked on partitions whose lag is unknown or positive),
  :class:`WaitUntil` (blocked on an idle deadline) or :class:`Idle` (nothing buffered).
  After an ``Emit``, poll again: there may be more.
* ``pause_hint(now_ms)`` — partitions to pause or resume for backpressure; the adapter must apply
  every hint it receives (the task records them as applied, to freeze idle clocks).
* ``acked(batch_ids)`` — output batches the broker acknowledged; returns the input offsets that
  became safe to commit.
* ``snapshot(now_ms)`` — a plain dict for ``/status`` and metrics, with why the task is blocked.

Everything the task decides follows from the calls it received, so replaying the same calls
gives the same output record for record.

A record's route, one module per step (Kafka Streams splits the same work between
``RecordQueue``, ``PartitionGroup`` and ``StreamTask``):

1. ``push`` → ``intake.py``: its event time read once, the invalid and refused-timestamp
   policies applied, the record queued in its partition (``merge.py``'s ``PartitionState``);
2. ``poll`` → ``readiness.py``: the :class:`Gate` judges the empty partitions, the one place
   readiness is decided, each by its quiet clock (fetches and pushes move it) and the idle the
   task's ``idle_strategy.py`` strategy gives it — fixed, or under ``max.task.idle.ms=auto``
   learnt per partition from what the task tells it of polls, arrivals and holds;
3. → ``group.py``: the :class:`PartitionGroup` takes records in output order (sorted buffers at
   once, or run by run) into a ``batch.py`` :class:`BatchDraft`, which applies the late and
   refused policies;
4. → back here, the draft leaves as one :class:`~sidecar.core.records.Emit`, its offsets
   tracked for commits (``commits.py``); ``holds.py`` pauses partitions for backpressure and
   operator holds; ``watermarks.py`` moves the watermarks each poll.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sidecar.core.batch import NO_BOUND
from sidecar.core.commits import CommitTracker
from sidecar.core.config import LatePolicy, TaskConfig
from sidecar.core.holds import Holds
from sidecar.core.idle_strategy import make_idle
from sidecar.core.intake import Intake
from sidecar.core.kernel import Draft, empty_draft, make_group, make_queue, use_native
from sidecar.core.merge import PartitionState, ranks
from sidecar.core.outcomes import Heartbeat, Idle, NeedFetch, Outcome, PauseHint, WaitUntil
from sidecar.core.readiness import Blockers, Gate, arrived, fetched, quiet_for, silent_for
from sidecar.core.records import UNKNOWN, Emit, InputRecord, TopicPartition, Unreadable
from sidecar.core.watermarks import PartitionWatermark, TaskWatermark, make_policy

__all__ = [
    "Heartbeat",
    "Idle",
    "LatePolicy",
    "MergeTask",
    "NeedFetch",
    "Outcome",
    "PauseHint",
    "TaskConfig",
    "WaitUntil",
]


class MergeTask:
    """The coordinator: facts go to the intake and the partitions, ``poll`` asks the gate and
    the group, and what they took leaves as one batch (see the module's docstring)."""

    def __init__(
        self,
        partitions: Sequence[TopicPartition],
        config: TaskConfig | None = None,
        topic_order: Sequence[str] | None = None,
        log_append_time_topics: Collection[str] = (),
        native: bool | None = None,
    ) -> None:
        """``topic_order`` is ``input.topics`` (the tie-break order); by default, first appearance.

        ``log_append_time_topics`` are the inputs the broker stamps (``message.timestamp.type=
        LogAppendTime``, which the adapter reads at start): under ``watermark.policy=auto`` their
        partitions get the log-append-time watermark, every other partition bounded-delay. The
        policy is decided here, for every partition, so that a partition that never receives a
        record still has a watermark once a fetch shows it caught up (a quiet input must not
        freeze the task watermark).

        ``native``: take in C (``kernel.py``) or in Python; by default as this process chose.
        """
        if not partitions:
            raise ValueError("a task needs at least one input partition")
        if len(set(partitions)) != len(partitions):
            raise ValueError(f"duplicate input partitions: {sorted(partitions)}")
        self.config = cfg = config or TaskConfig()
        #: Whether the take runs in C (the kernel) rather than in Python (its specification).
        self.native = native = use_native(native)
        rank_of = ranks(partitions, topic_order)
        self._parts = [
            PartitionState(
                TopicPartition(*tp),
                i,
                rank_of[tp],
                self._policy_for(tp, log_append_time_topics),
                make_queue(native),
            )
            for i, tp in enumerate(partitions)
        ]
        self._by_tp = {p.tp: p for p in self._parts}
        #: How long a quiet partition is waited for (fixed, learnt, or not at all), chosen once.
        self._idle = make_idle(cfg.max_task_idle_ms, cfg.max_task_idle_budget_ms, len(self._parts))
        self._gate = Gate(self._idle)
        self._group = make_group(self._parts, self._gate, cfg, native)
        self._holds = Holds(self._parts, cfg.buffered_records_per_partition)
        self._watermark = TaskWatermark()
        self._stream_time = UNKNOWN
        self._commits = CommitTracker(len(self._parts))
        self._next_batch = 0
        self._last_output_ms: int | None = None
        # Counters (Kafka Streams' meanings), read by snapshot() and the metrics.
        self.records_out = 0
        self.enforced_total = 0
        self.late_total = 0
        self.heartbeats = 0
        self.dropped: Counter[str] = Counter()
        #: Records written with a time other than their own, by reason (``partition-time``).
        self.restamped: Counter[str] = Counter()
        self._intake = Intake(cfg, self.dropped, self.restamped)
        #: Dead letters found at push, with their partition index: they go out with the next batch.
        self._dead = self._intake.dead

    def _policy_for(self, tp: TopicPartition, log_append_time_topics: Collection[str]) -> PartitionWatermark:
        cfg = self.config
        return make_policy(
            cfg.watermark_policy,
            cfg.extractor.uses_record_time and tp.topic in log_append_time_topics,
            cfg.watermark_max_delay_ms,
            cfg.watermark_window_ms,
            cfg.watermark_idle_epsilon_ms,
        )

    # -- facts --------------------------------------------------------------------------------

    @property
    def partitions(self) -> list[TopicPartition]:
        return [p.tp for p in self._parts]

    @property
    def records_in(self) -> int:
        return self._intake.records_in

    def push(self, tp: TopicPartition, records: Sequence[InputRecord] | Unreadable) -> None:
        """Queue records fetched for ``tp``, in offset order (or offsets that could not be read:
        :class:`~sidecar.core.records.Unreadable`, see ``intake.py``).

        Raises :class:`~sidecar.core.timestamps.InvalidTimestampError` at the first record whose
        event time cannot be read under ``timestamp.invalid=fail`` and ``errors.tolerance=none``;
        the records before it are queued, it and those after it are not (see ``intake.py``).
        """
        if not records:
            return
        p = self._part(tp)
        was_empty = p.empty
        now = self._intake.clock or 0  # the fetch that brought them ticked it
        try:
            self._intake.push(p, records)
        finally:  # also when a bad record stops the push: what came before it is queued
            if was_empty and not p.empty:
                self._idle.arrival(p, silent_for(p, now), self._stream_time)
                self._group.arrived(p, now)
            arrived(p, now)  # even if none was queued (skipped, dead letters): the producer spoke

    def observe_fetch(self, tp: TopicPartition, high_watermark: int, position: int, now_ms: int) -> None:
        """A fetch response at ``now_ms`` showed ``high_watermark`` while we were at ``position``."""
        p = self._part(tp)
        self._intake.tick(now_ms)
        lag = max(0, high_watermark - position)
        if lag == 0:
            if p.caught_up_at is None or now_ms > p.caught_up_at:
                p.caught_up_at = now_ms
        else:
            p.caught_up_at = None
        fetched(p, lag, now_ms)

    def _part(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._by_tp[tp]  # aiokafka's TopicPartition (a NamedTuple too) hashes alike
        except KeyError:
            raise KeyError(f"{tp} is not an input partition of this task ({self.partitions})") from None

    # -- decisions ----------------------------------------------------------------------------

    def poll(self, now_ms: int, max_records: int | None = None) -> Outcome:
        """What to do now: emit a batch, write a heartbeat, fetch, wait, or nothing.

        The route of a record: the gate judges the empty partitions (``readiness.py``); if none
        blocks, the group takes records in output order (``group.py``) into a draft that applies
        the late and refused policies (``batch.py``); the draft leaves as one ``Emit``.
        """
        self._intake.tick(now_ms)
        if self._holds.held:
            return Idle()
        if self._last_output_ms is None:
            self._last_output_ms = now_ms
        watermark = self._advance_watermarks(now_ms)
        self._idle.observe(self._parts, now_ms)
        blockers = self._group.blockers(now_ms)
        if self._group.has_data and blockers.ready:
            draft = self._group.take(now_ms, max_records or NO_BOUND, self._stream_time, blockers.enforced)
            return self._emit(now_ms, watermark, draft)
        if self._dead:
            return self._emit(now_ms, watermark, empty_draft(self.config, now_ms, self._stream_time))
        return self._wait(now_ms, watermark, blockers)

    def _advance_watermarks(self, now_ms: int) -> int:
        values: list[int | None] = []
        for p in self._parts:
            policy = p.watermark_policy
            caught_up = p.caught_up_at if p.lag == 0 and p.empty else None
            value = policy.compute(now_ms, caught_up)
            if value is not None:
                value = max(value, 0)  # Kafka timestamps, hence watermarks, are never negative
                if p.watermark is None or value > p.watermark:
                    p.watermark = value
            values.append(p.watermark)
        return self._watermark.advance(values)

    def _wait(self, now_ms: int, watermark: int, blockers: Blockers) -> Outcome:
        """Nothing to emit: a heartbeat if one is due, else what to wait for."""
        cfg = self.config
        assert self._last_output_ms is not None  # set by poll
        # A heartbeat is a real deadline only with a watermark to carry that the output topic
        # accepts: while the watermark is unknown only new facts (a fetch, data) can change it,
        # so there is nothing to wake up for.
        heartbeat_at = None
        if cfg.watermark_heartbeat_ms > 0 and watermark >= 0 and self._writable(watermark, now_ms):
            heartbeat_at = self._last_output_ms + cfg.watermark_heartbeat_ms
            if now_ms >= heartbeat_at:
                self._last_output_ms = now_ms
                self.heartbeats += 1
                return Heartbeat(watermark)
        if not self._group.has_data:
            return Idle(heartbeat_at)
        deadline = blockers.deadline
        wake = (
            deadline
            if heartbeat_at is None or (deadline is not None and deadline < heartbeat_at)
            else heartbeat_at
        )
        if blockers.blocking:
            return NeedFetch(blockers.blocking, wake)
        assert deadline is not None
        return WaitUntil(deadline if heartbeat_at is None else min(deadline, heartbeat_at))

    def _writable(self, timestamp: int, now_ms: int) -> bool:
        limits = self.config.output_limits
        return limits is None or limits.refusal(timestamp, now_ms) is None

    def _emit(self, now_ms: int, watermark: int, draft: Draft) -> Emit:
        """The draft as one batch, with the dead letters found at push; its offsets tracked for
        commits, its counts added to the task's."""
        batch_id = self._next_batch
        self._next_batch += 1
        taken = self._commits.taken
        for i, first in draft.firsts.items():
            taken(i, batch_id, first)
        dead = [dl for _, dl in self._dead]
        dead += draft.dead_letters
        for i, dl in self._dead:
            taken(i, batch_id, dl.record.offset)
        self._dead.clear()
        records = draft.records
        enforced_from = draft.enforced_from if draft.enforced_from >= 0 else len(records)
        self._stream_time = draft.stream_time
        self.records_out += len(records)
        self.enforced_total += len(records) - enforced_from
        self.late_total += len(draft.late) + len(draft.routed) + draft.dropped_late
        if draft.dropped_late:
            self.dropped["late"] += draft.dropped_late
        if draft.refused_skipped:
            self.dropped["refused-timestamp"] += draft.refused_skipped
        self._last_output_ms = now_ms
        return Emit(
            batch_id=batch_id,
            records=records,
            timestamps=draft.timestamps,
            watermark=watermark,
            stream_time_before=draft.stream_time_before,
            enforced_from=enforced_from,
            late=draft.late,
            lateness=draft.lateness,
            late_routed=draft.routed,
            dead_letters=dead,
            dropped_late=draft.dropped_late,
        )

    # -- backpressure and commits ---------------------------------------------------------------

    def pause_hint(self, now_ms: int) -> PauseHint:
        """Pause partitions holding ``buffered.records.per.partition`` or more; resume below half.
        Nothing changes while the task is held (see :meth:`hold`)."""
        return self._holds.pause_hint(now_ms)

    def hold(self, now_ms: int) -> tuple[TopicPartition, ...]:
        """An operator paused the sidecar: until :meth:`release`, ``poll`` emits nothing and writes
        no heartbeat (the watermark must not pass records held back), and every partition is
        treated as paused — its idle clock frozen, its lag stale. Returns the partitions to pause
        on the consumer (those not paused already for backpressure)."""
        held = self._holds.hold(now_ms)
        self._idle.held(held)
        return tuple(p.tp for p in held)

    def release(self, now_ms: int) -> tuple[TopicPartition, ...]:
        """The end of a :meth:`hold`: idle clocks go on with the time they had left. Returns the
        partitions to resume on the consumer (backpressure may pause some again)."""
        return tuple(p.tp for p in self._holds.release(now_ms))

    @property
    def held(self) -> bool:
        return self._holds.held

    def acked(self, batch_ids: Iterable[int]) -> dict[TopicPartition, int]:
        """Record acknowledged batches; return the input offsets that became safe to commit."""
        self._commits.acked(batch_ids)
        return self.committable()

    def committable(self) -> dict[TopicPartition, int]:
        """Offsets safe to commit that moved forward since last asked (after a skip, too)."""
        parts = self._parts
        waiting: dict[int, int] = {}
        for i, dead in self._dead:  # in push order: the first per partition is its smallest
            waiting.setdefault(i, dead.record.offset)
        return {parts[i].tp: offset for i, offset in self._commits.advanced(parts, waiting).items()}

    # -- observation ----------------------------------------------------------------------------

    @property
    def stream_time(self) -> int:
        return self._stream_time

    @property
    def watermark(self) -> int:
        return self._watermark.value

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        """A plain dict for ``/status``: readiness, times, counts, and what holds the task back."""
        has_data = self._group.has_data
        blocked_by = [
            {"topic": p.tp.topic, "partition": p.tp.partition, "reason": reason}
            for p, reason in (self._gate.reasons(self._parts, now_ms) if has_data else ())
        ]
        partitions = [self._partition_row(p, now_ms) for p in self._parts]
        return {
            "ready": has_data and not blocked_by,
            "buffered": sum(p["buffered"] for p in partitions),
            "stream_time": self._stream_time,
            "watermark": self._watermark.value,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "enforced": self.enforced_total,
            "late": self.late_total,
            "heartbeats": self.heartbeats,
            "dropped": dict(self.dropped),
            "restamped": dict(self.restamped),
            "blocked_by": blocked_by,
            "partitions": partitions,
        }

    def _partition_row(self, p: PartitionState, now_ms: int) -> dict[str, Any]:
        """A partition for ``/status``: facts, quiet since, passes at, what its idle shows."""
        row: dict[str, Any] = {
            "topic": p.tp.topic,
            "partition": p.tp.partition,
            "buffered": p.buffered,
            "lag": p.lag,
            "partition_time": p.partition_time,
            "watermark": p.watermark,
            "paused": p.paused,
            "quiet_since": p.quiet_since,
            "passes_at": self._gate.passes_at(p),
        }
        shown = self._idle.snapshot(p, quiet_for(p, now_ms))
        if shown is not None:
            row["idle"] = shown
        return row
