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
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sidecar.core.commits import CommitTracker
from sidecar.core.deadletters import DeadLetterBudget
from sidecar.core.idle_learning import IdleLearner
from sidecar.core.merge import (
    PartitionState,
    count_upto,
    cut_index,
    late_positions,
    merge_sorted,
    run_end,
)
from sidecar.core.readiness import (
    IDLE_AUTO,
    IDLE_DISABLED,
    Verdict,
    empty_partition_verdict,
    explain,
    judge,
    pause,
    resume,
)
from sidecar.core.records import (
    UNKNOWN,
    DeadLetter,
    Emit,
    InputRecord,
    Late,
    TopicPartition,
)
from sidecar.core.timestamps import (
    BrokerTimestampLimits,
    ErrorTolerance,
    InvalidPolicy,
    InvalidTimestampError,
    RecordTimestamp,
    RefusedTimestampError,
    TimestampExtractor,
)
from sidecar.core.watermarks import PartitionWatermark, TaskWatermark, WatermarkPolicyName, make_policy

LatePolicy = Literal["forward", "drop", "topic"]

_NO_BOUND = 2**63


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """The merge settings of one task (the core's view of the sidecar's config keys)."""

    #: -1, 0, N, ``IDLE_FOREVER``, or ``IDLE_AUTO`` (learnt per partition, within the budget).
    max_task_idle_ms: int = 0
    #: Under ``IDLE_AUTO``: the most a partition is waited for.
    max_task_idle_budget_ms: int = 1000
    buffered_records_per_partition: int = 1000
    extractor: TimestampExtractor = field(default_factory=RecordTimestamp)
    timestamp_invalid: InvalidPolicy = "fail"
    errors_tolerance: ErrorTolerance = "none"
    dlq_max_ratio: float = 0.5
    late_records: LatePolicy = "forward"
    watermark_policy: WatermarkPolicyName = "auto"
    watermark_max_delay_ms: int = 5000
    watermark_window_ms: int = 60000
    watermark_idle_epsilon_ms: int = 2000
    watermark_heartbeat_ms: int = 1000
    #: What the output topic's broker accepts (``None``: anything — a LogAppendTime output).
    output_limits: BrokerTimestampLimits | None = None

    def __post_init__(self) -> None:
        if self.max_task_idle_ms < IDLE_DISABLED and self.max_task_idle_ms != IDLE_AUTO:
            raise ValueError(f"max.task.idle.ms must be -1, 0, positive or auto, got {self.max_task_idle_ms}")
        if self.max_task_idle_budget_ms < 1:
            raise ValueError(f"max.task.idle.budget.ms must be positive, got {self.max_task_idle_budget_ms}")
        if self.buffered_records_per_partition < 1:
            got = self.buffered_records_per_partition
            raise ValueError(f"buffered.records.per.partition must be at least 1, got {got}")


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Nothing may go out before ``deadline_ms`` unless new facts arrive."""

    deadline_ms: int


@dataclass(frozen=True, slots=True)
class NeedFetch:
    """Blocked on these partitions until a fetch brings news: their lag is unknown, positive or
    stale (paused), or they idle forever (``max.task.idle.ms=max``) until data arrives."""

    partitions: tuple[TopicPartition, ...]
    wake_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing is buffered. Poll again at ``wake_at_ms`` (a heartbeat may be due) or on new data."""

    wake_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Write a control record carrying the task watermark; nothing else flowed for a while."""

    watermark: int


@dataclass(frozen=True, slots=True)
class PauseHint:
    pause: tuple[TopicPartition, ...] = ()
    resume: tuple[TopicPartition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pause or self.resume)


Outcome = Emit | Heartbeat | NeedFetch | WaitUntil | Idle

_BLOCKING_FOR_FETCH = (Verdict.LAG_UNKNOWN, Verdict.LAG_ON_BROKER, Verdict.PAUSED)


class MergeTask:
    def __init__(
        self,
        partitions: Sequence[TopicPartition],
        config: TaskConfig | None = None,
        topic_order: Sequence[str] | None = None,
        log_append_time_topics: Collection[str] = (),
    ) -> None:
        """``topic_order`` is ``input.topics`` (the tie-break order); by default, first appearance.

        ``log_append_time_topics`` are the inputs the broker stamps (``message.timestamp.type=
        LogAppendTime``, which the adapter reads at start): under ``watermark.policy=auto`` their
        partitions get the log-append-time watermark, every other partition bounded-delay. The
        policy is decided here, for every partition, so that a partition that never receives a
        record still has a watermark once a fetch shows it caught up (a quiet input must not
        freeze the task watermark).
        """
        if not partitions:
            raise ValueError("a task needs at least one input partition")
        if len(set(partitions)) != len(partitions):
            raise ValueError(f"duplicate input partitions: {sorted(partitions)}")
        self.config = cfg = config or TaskConfig()
        order = (
            list(topic_order)
            if topic_order is not None
            else list(dict.fromkeys(tp.topic for tp in partitions))
        )
        unknown = {tp.topic for tp in partitions} - set(order)
        if unknown:
            raise ValueError(f"topics {sorted(unknown)} are not in the topic order {order}")
        ranked = sorted(partitions, key=lambda tp: (order.index(tp.topic), tp.partition))
        rank_of = {tp: r for r, tp in enumerate(ranked)}
        self._parts = [
            PartitionState(TopicPartition(*tp), i, rank_of[tp], self._policy_for(tp, log_append_time_topics))
            for i, tp in enumerate(partitions)
        ]
        self._by_tp = {p.tp: p for p in self._parts}
        #: Under ``max.task.idle.ms=auto``: what each partition's gaps taught (else ``None``).
        self._learner = (
            IdleLearner(len(self._parts), cfg.max_task_idle_budget_ms)
            if cfg.max_task_idle_ms == IDLE_AUTO
            else None
        )
        self._ranked = sorted(self._parts, key=lambda p: p.rank)
        self._heap: list[tuple[int, int, int]] = []
        self._watermark = TaskWatermark()
        self._stream_time = UNKNOWN
        self._commits = CommitTracker(len(self._parts))
        self._budget = DeadLetterBudget(cfg.dlq_max_ratio)
        self._dead: list[tuple[int, DeadLetter]] = []
        self._next_batch = 0
        self._last_output_ms: int | None = None
        #: The latest clock reading given (observe_fetch, poll): judges times at push.
        self._clock: int | None = None
        #: While an operator holds the task (paused): the partitions it paused.
        self._held: list[PartitionState] | None = None
        # Counters (Kafka Streams' meanings), read by snapshot() and the metrics.
        self.records_in = 0
        self.records_out = 0
        self.enforced_total = 0
        self.late_total = 0
        self.heartbeats = 0
        self.dropped: Counter[str] = Counter()
        #: Records written with a time other than their own, by reason (``partition-time``).
        self.restamped: Counter[str] = Counter()

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

    def push(self, tp: TopicPartition, records: Sequence[InputRecord]) -> None:
        """Queue records fetched for ``tp``, in offset order.

        Raises :class:`~sidecar.core.timestamps.InvalidTimestampError` at the first record whose
        event time cannot be read under ``timestamp.invalid=fail`` and ``errors.tolerance=none``;
        the records before it are queued, it and those after it are not.
        """
        if not records:
            return
        p = self._part(tp)
        if p.start_offset is None:
            p.start_offset = records[0].offset
        was_empty = p.head == len(p.timestamps)
        timestamps = self.config.extractor.extract_all(records)
        ahead = self._ahead_limit()
        try:
            if min(timestamps) >= 0 and (ahead is None or max(timestamps) <= ahead):
                p.append(records, timestamps)
                self._budget.observe(len(records))
            else:
                self._push_with_invalid(p, records, timestamps, ahead)
            p.next_offset = records[-1].offset + 1
            self.records_in += len(records)
        finally:  # also when a bad record stops the push: what came before it is queued
            if was_empty and p.head < len(p.timestamps):
                p.deadline = None  # data arrived: the idle clock starts afresh when next empty
                p.frozen_remaining = None
                if self._learner is not None:
                    self._learner.arrival(p, self._clock or 0, self._stream_time)
                heapq.heappush(self._heap, (p.timestamps[p.head], p.rank, p.index))

    def _ahead_limit(self) -> int | None:
        """The latest time the output topic's broker accepts, by the last clock reading the task
        was given (``None``: no limit, or no reading yet). A time beyond it is refused at push:
        left in the buffer, its far-future timestamp would hold its whole partition back in the
        merge until every other partition passed it."""
        limits = self.config.output_limits
        if limits is None or self._clock is None:
            return None
        return limits.window(self._clock)[1]

    def _push_with_invalid(
        self, p: PartitionState, records: Sequence[InputRecord], timestamps: list[int], ahead: int | None
    ) -> None:
        cfg = self.config
        keep: list[InputRecord] = []
        keep_ts: list[int] = []
        failed_at: list[int] = []
        # Kafka Streams' partition time for a record: the largest timestamp before it in its
        # partition — taken already, still buffered, or earlier in this push.
        known_time = max(p.timestamps[p.head :], default=p.partition_time)
        if p.partition_time is not None and (known_time is None or p.partition_time > known_time):
            known_time = p.partition_time
        for i, (record, ts) in enumerate(zip(records, timestamps, strict=True)):
            error: type[InvalidTimestampError]
            if ahead is not None and ts > ahead:  # readable, but the output topic would refuse it
                limits, clock = cfg.output_limits, self._clock
                assert limits is not None
                assert clock is not None
                if cfg.timestamp_invalid == "skip":
                    self.dropped["refused-timestamp"] += 1
                    continue
                reason = limits.refusal(ts, clock) or "refused"
                error, error_name = RefusedTimestampError, "InvalidTimestampException"
            elif ts >= 0:
                keep.append(record)
                keep_ts.append(ts)
                if known_time is None or ts > known_time:
                    known_time = ts
                continue
            else:
                if cfg.timestamp_invalid == "skip":
                    self.dropped["invalid-timestamp"] += 1
                    continue
                reason = cfg.extractor.explain(record)
                if cfg.timestamp_invalid == "partition-time":
                    if known_time is not None:
                        keep.append(record)
                        keep_ts.append(known_time)
                        self.restamped["partition-time"] += 1
                        continue
                    reason += "; no partition time to fall back on yet"
                error, error_name = InvalidTimestampError, "InvalidTimestampError"
            if cfg.errors_tolerance == "none":
                p.append(keep, keep_ts)
                p.next_offset = record.offset
                self.records_in += i
                raise error(p.tp, record.offset, reason)
            failed_at.append(i)
            self._dead.append((p.index, DeadLetter(record, reason, error_name)))
        p.append(keep, keep_ts)
        self._budget.observe(len(records), failed_at)

    def observe_fetch(self, tp: TopicPartition, high_watermark: int, position: int, now_ms: int) -> None:
        """A fetch response at ``now_ms`` showed ``high_watermark`` while we were at ``position``."""
        p = self._part(tp)
        if self._clock is None or now_ms > self._clock:
            self._clock = now_ms
        lag = high_watermark - position
        p.lag = lag if lag > 0 else 0
        if p.lag == 0:
            if p.caught_up_at is None or now_ms > p.caught_up_at:
                p.caught_up_at = now_ms
        else:
            p.caught_up_at = None
            if self._learner is not None:
                self._learner.lagging(p.index)

    def _part(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._by_tp[tp]  # aiokafka's TopicPartition (a NamedTuple too) hashes alike
        except KeyError:
            raise KeyError(f"{tp} is not an input partition of this task ({self.partitions})") from None

    # -- decisions ----------------------------------------------------------------------------

    def poll(self, now_ms: int, max_records: int | None = None) -> Outcome:
        """What to do now: emit a batch, write a heartbeat, fetch, wait, or nothing."""
        cfg = self.config
        if self._clock is None or now_ms > self._clock:
            self._clock = now_ms
        if self._held is not None:
            return Idle()
        if self._last_output_ms is None:
            self._last_output_ms = now_ms
        watermark = self._advance_watermarks(now_ms)
        idle = cfg.max_task_idle_ms
        if self._learner is not None:
            self._learner.observe(self._parts, now_ms)
        enforced = False
        blocking: list[TopicPartition] = []
        deadline: int | None = None
        if idle != IDLE_DISABLED and self._heap:  # readiness is judged only when something could go out
            for p in self._parts:
                if p.head == len(p.timestamps):
                    verdict = empty_partition_verdict(p, now_ms, self._idle_for(p, now_ms))
                    if verdict is Verdict.PASSED:
                        enforced = True
                    elif verdict is Verdict.IDLING and p.deadline is not None:
                        if deadline is None or p.deadline < deadline:
                            deadline = p.deadline
                    else:  # no deadline to wait for: only a fetch bringing data can unblock
                        blocking.append(p.tp)
        if self._heap and not blocking and deadline is None:
            return self._take(now_ms, watermark, enforced, max_records or _NO_BOUND)
        if self._dead:
            return self._batch(now_ms, watermark, self._stream_time, [], [], 0, [], [], [], 0, {})
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
        if not self._heap:
            return Idle(heartbeat_at)
        wake = (
            deadline
            if heartbeat_at is None or (deadline is not None and deadline < heartbeat_at)
            else heartbeat_at
        )
        if blocking:
            return NeedFetch(tuple(blocking), wake)
        assert deadline is not None
        return WaitUntil(deadline if heartbeat_at is None else min(deadline, heartbeat_at))

    def _idle_for(self, p: PartitionState, now_ms: int) -> int:
        """The idle the readiness rule applies to the empty partition ``p``: the setting, or what
        ``auto`` learnt for it (see ``idle_learning.py``)."""
        return self.config.max_task_idle_ms if self._learner is None else self._learner.wait_for(p, now_ms)

    def _explain(self, p: PartitionState, now_ms: int) -> str | None:
        """Why the empty partition ``p`` holds the task back (``None``: it does not), for /status."""
        learner = self._learner
        idle = self.config.max_task_idle_ms if learner is None else learner.wait_ms(p.index, now_ms)
        verdict = judge(p, now_ms, idle)
        if learner is None or verdict is not Verdict.IDLING:
            return explain(verdict, p, now_ms, idle)
        return learner.why_idling(p, p.deadline if p.deadline is not None else now_ms + idle)

    def _advance_watermarks(self, now_ms: int) -> int:
        values: list[int | None] = []
        for p in self._parts:
            policy = p.watermark_policy
            caught_up = p.caught_up_at if p.lag == 0 and p.head == len(p.timestamps) else None
            value = policy.compute(now_ms, caught_up)
            if value is not None:
                value = max(value, 0)  # Kafka timestamps, hence watermarks, are never negative
                if p.watermark is None or value > p.watermark:
                    p.watermark = value
            values.append(p.watermark)
        return self._watermark.advance(values)

    def _take(self, now_ms: int, watermark: int, enforced: bool, budget: int) -> Emit:
        """Take records in output order until a partition that runs dry blocks, or out of budget."""
        if all(p.monotonic for p in self._parts if p.head < len(p.timestamps)):
            return self._take_sorted(now_ms, watermark, enforced, budget)
        return self._take_runs(now_ms, watermark, enforced, budget)

    def _take_sorted(self, now_ms: int, watermark: int, enforced: bool, budget: int) -> Emit:
        """Every buffer is sorted: cut each at the point the merge would stop, then sort once.

        The merge stops right after the last record of the first partition to run dry whose
        verdict blocks. Partitions run dry in the order of their last keys (timestamp, rank), so
        that cut is found with binary searches, and the records up to it are merged by one
        stable sort. Same output as the record-by-record merge, at C speed.
        """
        idle = self.config.max_task_idle_ms
        active = [p for p in self._ranked if p.head < len(p.timestamps)]
        cut: tuple[int, int] | None = None  # key of the last record out; None: everything
        enforced_key: tuple[int, int] | None = None
        over_budget = False
        if idle != IDLE_DISABLED or sum(len(p.timestamps) - p.head for p in active) > budget:
            order = sorted(active, key=lambda p: (p.timestamps[-1], p.rank))
            for q in order:
                key = (q.timestamps[-1], q.rank)
                if count_upto(active, *key) > budget:
                    over_budget = True
                    cut = key
                    break
                if idle == IDLE_DISABLED or q is order[-1]:
                    continue  # nothing follows the last record: no readiness to judge
                if empty_partition_verdict(q, now_ms, self._idle_for(q, now_ms)) is Verdict.PASSED:
                    if enforced_key is None:
                        enforced_key = key
                    continue
                cut = key
                break
        ends = {p.index: cut_index(p, *cut) if cut else len(p.timestamps) for p in active}
        chunks = [(p.records[p.head : ends[p.index]], p.timestamps[p.head : ends[p.index]]) for p in active]
        records, stamps = merge_sorted([c for c in chunks if c[1]])
        if over_budget and len(records) > budget:
            records, stamps = records[:budget], stamps[:budget]
            self._recut(active, ends, records, stamps)
        limits = self.config.output_limits
        if limits is not None and stamps and self._stops_at_refusal():
            low, high = limits.window(now_ms)
            first_refused = 0 if stamps[0] < low else bisect_right(stamps, high)
            if first_refused < len(records):  # what comes before it goes out; then the stop
                if first_refused == 0:
                    raise self._refusal(now_ms, records[0], stamps[0])
                records, stamps = records[:first_refused], stamps[:first_refused]
                self._recut(active, ends, records, stamps)
        if enforced:
            enforced_from = 0
        elif enforced_key is not None:
            enforced_from = min(len(records), count_upto(active, *enforced_key))
        else:
            enforced_from = len(records)
        firsts = {}
        for p in active:
            h, end = p.head, ends[p.index]
            if end == h:
                continue
            firsts[p.index] = p.records[h].offset
            low, high = p.timestamps[h], p.timestamps[end - 1]
            if p.partition_time is None or high > p.partition_time:
                p.partition_time = high
            p.watermark_policy.on_take(low, high, now_ms)
            p.head = end
        self._heap = [(p.timestamps[p.head], p.rank, p.index) for p in active if p.head < len(p.timestamps)]
        heapq.heapify(self._heap)
        refused: list[DeadLetter] = []
        limits = self.config.output_limits
        if limits is not None and stamps:
            low, high = limits.window(now_ms)
            if stamps[0] < low or stamps[-1] > high:  # sorted: refused times are a prefix and a suffix
                lo, hi = bisect_left(stamps, low), bisect_right(stamps, high)
                out = list(zip(records[:lo], stamps[:lo], strict=True))
                out += zip(records[hi:], stamps[hi:], strict=True)
                refused = self._refused(now_ms, out)
                enforced_from = max(0, min(enforced_from, hi) - lo)
                records, stamps = records[lo:hi], stamps[lo:hi]
        before = self._stream_time
        late_idx: list[int] = []
        lateness: list[int] = []
        routed: list[Late] = []
        dropped = 0
        if stamps and stamps[0] < before:  # sorted output: only a prefix can be late
            n_late = bisect_left(stamps, before)
            if self.config.late_records == "forward":
                late_idx = list(range(n_late))
                lateness = [before - t for t in stamps[:n_late]]
            else:
                if self.config.late_records == "topic":
                    routed = [
                        Late(r, t, before - t) for r, t in zip(records[:n_late], stamps[:n_late], strict=True)
                    ]
                else:
                    dropped = n_late
                records, stamps = records[n_late:], stamps[n_late:]
                enforced_from = max(0, enforced_from - n_late)
        if stamps and stamps[-1] > before:
            self._stream_time = stamps[-1]
        return self._batch(
            now_ms,
            watermark,
            before,
            records,
            stamps,
            enforced_from,
            late_idx,
            lateness,
            routed,
            dropped,
            firsts,
            refused,
        )

    def _recut(
        self,
        active: list[PartitionState],
        ends: dict[int, int],
        records: list[InputRecord],
        stamps: list[int],
    ) -> None:
        """Set ``ends`` so that exactly the (merged, shortened) ``records`` are taken."""
        last = self._part(TopicPartition(records[-1].topic, records[-1].partition))
        others = 0
        for p in active:
            if p is not last:
                ends[p.index] = cut_index(p, stamps[-1], last.rank)
                others += ends[p.index] - p.head
        ends[last.index] = last.head + len(records) - others

    def _take_runs(self, now_ms: int, watermark: int, enforced: bool, budget: int) -> Emit:
        """The general merge loop, for buffers that are not sorted: runs of records in order."""
        heap, parts = self._heap, self._parts
        idle = self.config.max_task_idle_ms
        late_policy = self.config.late_records
        out_records: list[InputRecord] = []
        out_ts: list[int] = []
        late_idx: list[int] = []
        lateness: list[int] = []
        routed: list[Late] = []
        dropped = 0
        firsts: dict[int, int] = {}
        enforced_from = 0 if enforced else -1
        stream_time = before = self._stream_time
        limits = self.config.output_limits
        low, high = limits.window(now_ms) if limits is not None else (0, _NO_BOUND)
        refused: list[tuple[InputRecord, int]] = []
        while heap and budget > 0:
            _, rank, i = heap[0]
            p = parts[i]
            if len(heap) == 1:
                end = run_end(p, _NO_BOUND, True, budget)
            else:
                second = heap[1] if len(heap) == 2 or heap[1] < heap[2] else heap[2]
                end = run_end(p, second[0], rank < second[1], budget)
            h, ts, recs = p.head, p.timestamps, p.records
            if i not in firsts:
                firsts[i] = recs[h].offset
            if p.monotonic:
                run_min, run_max = ts[h], ts[end - 1]
            else:
                run_min, run_max = min(ts[h:end]), max(ts[h:end])
            late = (
                late_positions(ts, h, end, stream_time, p.monotonic)
                if run_min < stream_time or not p.monotonic
                else None
            )
            halt = False
            if run_min < low or run_max > high:  # rare: record by record, the refused left out
                for j in range(h, end):
                    t_j = ts[j]
                    if t_j < low or t_j > high:
                        if self._stops_at_refusal():
                            # It stays at the head, unconsumed: what came before it goes out in
                            # this batch, and the next poll stops on it (nothing after it is taken).
                            if not (out_records or routed or dropped or refused):
                                raise self._refusal(now_ms, recs[j], t_j)
                            halt = True
                            if j == h and firsts.get(i) == recs[h].offset:
                                del firsts[i]
                            end = j
                            break
                        refused.append((recs[j], t_j))
                    elif t_j >= stream_time:
                        out_records.append(recs[j])
                        out_ts.append(t_j)
                        stream_time = t_j
                    elif late_policy == "forward":
                        late_idx.append(len(out_records))
                        lateness.append(stream_time - t_j)
                        out_records.append(recs[j])
                        out_ts.append(t_j)
                    elif late_policy == "topic":
                        routed.append(Late(recs[j], t_j, stream_time - t_j))
                    else:
                        dropped += 1
            else:
                if late and late_policy != "forward":
                    late_at = dict(late)
                    for j in range(h, end):
                        lost = late_at.get(j)
                        if lost is None:
                            out_records.append(recs[j])
                            out_ts.append(ts[j])
                        elif late_policy == "topic":
                            routed.append(Late(recs[j], ts[j], lost))
                        else:
                            dropped += 1
                else:
                    base = len(out_records) - h
                    out_records += recs[h:end]
                    out_ts += ts[h:end]
                    if late:
                        for j, lost in late:
                            late_idx.append(base + j)
                            lateness.append(lost)
                if run_max > stream_time:
                    stream_time = run_max
            if halt:
                if end > h:
                    run_min, run_max = min(ts[h:end]), max(ts[h:end])
                    p.partition_time = max(run_max, p.partition_time or run_max)
                    p.watermark_policy.on_take(run_min, run_max, now_ms)
                p.head = end
                heapq.heapreplace(heap, (ts[end], p.rank, i))
                break
            if p.partition_time is None or run_max > p.partition_time:
                p.partition_time = run_max
            p.watermark_policy.on_take(run_min, run_max, now_ms)
            budget -= end - h
            p.head = end
            if end < len(ts):
                heapq.heapreplace(heap, (ts[end], p.rank, i))
                continue
            heapq.heappop(heap)
            if idle != IDLE_DISABLED and heap:  # with nothing left to emit there is nothing to judge
                verdict = empty_partition_verdict(p, now_ms, self._idle_for(p, now_ms))
                if verdict is not Verdict.PASSED:
                    break
                if enforced_from < 0:
                    enforced_from = len(out_records)
        if enforced_from < 0:
            enforced_from = len(out_records)
        self._stream_time = stream_time
        dead = self._refused(now_ms, refused) if refused else []
        return self._batch(
            now_ms,
            watermark,
            before,
            out_records,
            out_ts,
            enforced_from,
            late_idx,
            lateness,
            routed,
            dropped,
            firsts,
            dead,
        )

    def _writable(self, timestamp: int, now_ms: int) -> bool:
        limits = self.config.output_limits
        return limits is None or limits.refusal(timestamp, now_ms) is None

    def _stops_at_refusal(self) -> bool:
        """A refused time stops the sidecar (rather than being dropped or dead-lettered)."""
        cfg = self.config
        return cfg.timestamp_invalid != "skip" and cfg.errors_tolerance == "none"

    def _refusal(self, now_ms: int, record: InputRecord, timestamp: int) -> RefusedTimestampError:
        limits = self.config.output_limits
        assert limits is not None
        reason = limits.refusal(timestamp, now_ms) or "refused"
        return RefusedTimestampError(TopicPartition(record.topic, record.partition), record.offset, reason)

    def _refused(self, now_ms: int, refused: list[tuple[InputRecord, int]]) -> list[DeadLetter]:
        """Records the output topic's broker would refuse (it would fail the whole produce batch),
        taken out of the output: ``timestamp.invalid=skip`` drops them (counted), otherwise
        ``errors.tolerance=all`` makes them dead letters. Under ``none`` the merge never takes
        one: it emits what comes before it, then raises :class:`RefusedTimestampError` with the
        record still unconsumed (its offset is never committed). A refused time is readable, so
        ``partition-time`` does not restamp it. They are not emitted, so they move neither
        stream time nor anyone's lateness."""
        limits = self.config.output_limits
        assert limits is not None
        cfg = self.config
        dead = []
        for record, ts in refused:
            reason = limits.refusal(ts, now_ms) or "refused"
            if cfg.timestamp_invalid == "skip":
                self.dropped["refused-timestamp"] += 1
            else:  # errors.tolerance=all (under none the merge stops before taking one)
                dead.append(DeadLetter(record, reason, "InvalidTimestampException"))
        return dead

    def _batch(
        self,
        now_ms: int,
        watermark: int,
        stream_time_before: int,
        records: list[InputRecord],
        timestamps: list[int],
        enforced_from: int,
        late_idx: list[int],
        lateness: list[int],
        routed: list[Late],
        dropped: int,
        firsts: dict[int, int],
        refused: Sequence[DeadLetter] = (),
    ) -> Emit:
        batch_id = self._next_batch
        self._next_batch += 1
        taken = self._commits.taken
        for i, first in firsts.items():
            taken(i, batch_id, first)
        dead = [dl for _, dl in self._dead]
        dead += refused
        for i, dl in self._dead:
            taken(i, batch_id, dl.record.offset)
        self._dead.clear()
        self.records_out += len(records)
        self.enforced_total += len(records) - enforced_from
        self.late_total += len(late_idx) + len(routed) + dropped
        if dropped:
            self.dropped["late"] += dropped
        self._last_output_ms = now_ms
        return Emit(
            batch_id=batch_id,
            records=records,
            timestamps=timestamps,
            watermark=watermark,
            stream_time_before=stream_time_before,
            enforced_from=enforced_from,
            late=late_idx,
            lateness=lateness,
            late_routed=routed,
            dead_letters=dead,
            dropped_late=dropped,
        )

    # -- backpressure and commits ---------------------------------------------------------------

    def pause_hint(self, now_ms: int) -> PauseHint:
        """Pause partitions holding ``buffered.records.per.partition`` or more; resume below half.
        Nothing changes while the task is held (see :meth:`hold`)."""
        if self._held is not None:
            return PauseHint()
        limit = self.config.buffered_records_per_partition
        to_pause, to_resume = [], []
        for p in self._parts:
            buffered = len(p.timestamps) - p.head
            if not p.paused and buffered >= limit:
                pause(p, now_ms)
                to_pause.append(p.tp)
            elif p.paused and buffered * 2 < limit:
                resume(p, now_ms)
                to_resume.append(p.tp)
        return PauseHint(tuple(to_pause), tuple(to_resume))

    def hold(self, now_ms: int) -> tuple[TopicPartition, ...]:
        """An operator paused the sidecar: until :meth:`release`, ``poll`` emits nothing and writes
        no heartbeat (the watermark must not pass records held back), and every partition is
        treated as paused — its idle clock frozen, its lag stale. Returns the partitions to pause
        on the consumer (those not paused already for backpressure)."""
        if self._held is not None:
            return ()
        self._held = [p for p in self._parts if not p.paused]
        for p in self._held:
            pause(p, now_ms)
            if self._learner is not None and p.head == len(p.timestamps):
                self._learner.interrupt(p.index)
        return tuple(p.tp for p in self._held)

    def release(self, now_ms: int) -> tuple[TopicPartition, ...]:
        """The end of a :meth:`hold`: idle clocks go on with the time they had left. Returns the
        partitions to resume on the consumer (backpressure may pause some again)."""
        held, self._held = self._held or [], None
        for p in held:
            resume(p, now_ms)
        return tuple(p.tp for p in held)

    @property
    def held(self) -> bool:
        return self._held is not None

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
        idle = self.config.max_task_idle_ms
        blocked_by = []
        partitions = []
        for p in self._parts:
            buffered = p.buffered
            reason = None
            if buffered == 0 and idle != IDLE_DISABLED and self._heap:
                reason = self._explain(p, now_ms)
                if reason is not None:
                    blocked_by.append({"topic": p.tp.topic, "partition": p.tp.partition, "reason": reason})
            partitions.append(
                {
                    "topic": p.tp.topic,
                    "partition": p.tp.partition,
                    "buffered": buffered,
                    "lag": p.lag,
                    "partition_time": p.partition_time,
                    "watermark": p.watermark,
                    "paused": p.paused,
                    "idle_deadline": p.deadline,
                }
            )
            if self._learner is not None:
                partitions[-1]["idle"] = self._learner.snapshot(p.index, now_ms)
        has_data = bool(self._heap)
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
