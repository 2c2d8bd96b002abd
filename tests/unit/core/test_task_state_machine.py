"""``MergeTask`` as a state machine: hypothesis draws a topology and a history, and checks the
task's promises after every step.

Topologies: one to three input topics of one or two partitions, some never written; CreateTime
and LogAppendTime topics side by side; every ``max.task.idle.ms`` class (-1, 0, short, long,
max, auto); heartbeats on or off; each watermark policy; invalid timestamps under skip,
partition-time or the dead letter queue; an output topic that refuses far-off times or not.
Histories: records produced (in order, out of order, invalid), fetches that bring part of a log
or nothing (lag unknown until a partition's first fetch), backpressure pauses, operator
holds, acks arriving late, quiet spells, and rebalances (a new task from the committed offsets,
every lag unknown again).

Every call goes to two tasks, the C merge kernel's and the Python core's that specifies it
(``twins.py``), and every answer of the two must be the same, batch for batch and stamp for stamp.

Promises checked after every step:

* each partition's quiet clock is the rule's (``readiness.py``), kept here as a model: quiet
  since its last arrival, or since the first caught-up fetch after its lag was unknown or > 0;
  not quiet while behind; counting only while the task holds records and the partition is not
  paused; ``passes_at`` is when the count reaches the idle;
* nothing goes out while an empty partition is behind (lag unknown or > 0) or paused, and a wait
  for an idle ends exactly when some empty partition has been quiet for it;
* the watermark and stream time never decrease;
* with heartbeats on, nothing held or buffered and every partition caught up, the watermark is
  known and a heartbeat is due within ``watermark.heartbeat.ms``;
* a wake-up asked for is in the future and is a real deadline — never a heartbeat the task
  cannot write (unknown watermark) and never "now" again (a busy loop);
* the output of each input partition keeps offset order;
* nothing is lost or doubled: every record pushed is buffered, emitted, routed as late,
  dead-lettered or counted as dropped, exactly once per task; a rebalance re-delivers only what
  was not committed.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sidecar.core import (
    LOG_APPEND_TIME,
    BrokerTimestampLimits,
    Emit,
    Heartbeat,
    Idle,
    NeedFetch,
    Record,
    TaskConfig,
    TopicPartition,
    WaitUntil,
)
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER
from tests.unit.core.twins import TwinTasks

START = 1_000_000_000
IDLES = (-1, 0, 40, 400, IDLE_FOREVER, IDLE_AUTO)


class MergeTaskMachine(RuleBasedStateMachine):
    @initialize(
        shape=st.lists(st.integers(1, 2), min_size=1, max_size=3),
        lat=st.sets(st.integers(0, 2), max_size=2),
        idle=st.sampled_from(IDLES),
        heartbeat=st.sampled_from([0, 100]),
        policy=st.sampled_from(["auto", "bounded-delay", "min-window"]),
        invalid=st.sampled_from(["skip", "partition-time", "fail"]),
        late=st.sampled_from(["forward", "drop", "topic"]),
        limits=st.sampled_from([None, BrokerTimestampLimits(after_max_ms=5_000, before_max_ms=50_000)]),
        buffered=st.sampled_from([3, 1000]),
    )
    def topology(
        self,
        shape: list[int],
        lat: set[int],
        idle: int,
        heartbeat: int,
        policy: str,
        invalid: str,
        late: str,
        limits: BrokerTimestampLimits | None,
        buffered: int,
    ) -> None:
        self.topics = [f"t{i}" for i in range(len(shape))]
        self.tps = [TopicPartition(t, p) for t, n in zip(self.topics, shape, strict=True) for p in range(n)]
        self.lat = {self.topics[i] for i in lat if i < len(self.topics)}
        self.config = TaskConfig(
            max_task_idle_ms=idle,
            buffered_records_per_partition=buffered,
            timestamp_invalid=invalid,  # type: ignore[arg-type]
            errors_tolerance="all",
            dlq_max_ratio=1.0,
            late_records=late,  # type: ignore[arg-type]
            watermark_policy=policy,  # type: ignore[arg-type]
            watermark_max_delay_ms=300,
            watermark_window_ms=1_000,
            watermark_idle_epsilon_ms=100,
            watermark_heartbeat_ms=heartbeat,
            output_limits=limits,
        )
        self.now = START
        self.logs: dict[TopicPartition, list[Record]] = {tp: [] for tp in self.tps}
        self.committed: dict[TopicPartition, int] = dict.fromkeys(self.tps, 0)
        self.delivered: Counter[tuple[str, int, int]] = Counter()  # over every incarnation
        self.dropped_earlier = 0  # counted as dropped by the tasks before the last rebalance
        self._new_task()

    def _new_task(self) -> None:
        """A task from the committed offsets, as after a start or a rebalance: lags unknown."""
        self.task = TwinTasks(self.tps, self.config, topic_order=self.topics, log_append_time_topics=self.lat)
        self.position = dict(self.committed)
        self.started_at = dict(self.committed)
        self.paused: set[TopicPartition] = set()
        self.unacked: list[int] = []
        self.pushed = 0
        self.accounted: Counter[tuple[str, int, int]] = Counter()
        self.last_offset: dict[TopicPartition, int] = {}
        self.watermark = self.task.watermark
        self.stream_time = self.task.stream_time
        self.last_wake: int | None = None
        #: The quiet clock, as the rule says it runs, kept apart from the task: per partition when
        #: its spell began, the quiet counted up to ``mark`` and whether it counts now.
        self.since: dict[TopicPartition, int | None] = dict.fromkeys(self.tps)
        self.counted = dict.fromkeys(self.tps, 0)
        self.mark = dict.fromkeys(self.tps, 0)
        self.running: set[TopicPartition] = set()
        self.holding = False  # the task holds records: unpaused clocks run

    # -- the rule's quiet clock, as a model -------------------------------------------------------

    def _begin(self, tp: TopicPartition) -> None:
        self.since[tp], self.counted[tp], self.mark[tp] = self.now, 0, self.now

    def _stop(self, tp: TopicPartition) -> None:
        if tp in self.running:
            self.counted[tp] += self.now - self.mark[tp]
            self.running.discard(tp)

    def _run(self, tp: TopicPartition) -> None:
        if tp not in self.running:
            self.mark[tp] = self.now
            self.running.add(tp)

    def _fetched(self, tp: TopicPartition, lag: int, brought: bool, held_before: bool) -> None:
        if lag > 0:
            self.since[tp] = None
        elif self.since[tp] is None:
            self._begin(tp)
        if not held_before and self.task.snapshot(self.now)["buffered"]:
            self.holding = True
            for each in self.tps:
                if each not in self.paused:
                    self._run(each)
        if brought and lag == 0:
            self._begin(tp)

    def _polled(self) -> None:
        if self.holding and not self.task.snapshot(self.now)["buffered"]:
            self.holding = False
            for tp in self.tps:
                self._stop(tp)

    def _paused(self, tps: tuple[TopicPartition, ...]) -> None:
        for tp in tps:
            self.paused.add(tp)
            self._stop(tp)

    def _resumed(self, tps: tuple[TopicPartition, ...]) -> None:
        for tp in tps:
            self.paused.discard(tp)
            if self.holding:
                self._run(tp)

    # -- the world ---------------------------------------------------------------------------

    @rule(
        which=st.integers(0, 5),
        offsets=st.lists(st.integers(-2_000, 2_000), min_size=1, max_size=6),
        invalid=st.booleans(),
    )
    def produce(self, which: int, offsets: list[int], invalid: bool) -> None:
        tp = self.tps[which % len(self.tps)]
        log = self.logs[tp]
        for i, delta in enumerate(offsets):
            if tp.topic in self.lat:
                record = Record(tp.topic, tp.partition, len(log), self.now, timestamp_type=LOG_APPEND_TIME)
            else:
                ts = -1 if invalid and i == 0 else max(0, self.now + delta * 10)
                record = Record(tp.topic, tp.partition, len(log), ts)
            log.append(record)

    @rule(which=st.integers(0, 5), most=st.integers(0, 5))
    def fetch(self, which: int, most: int) -> None:
        tp = self.tps[which % len(self.tps)]
        if tp in self.paused:
            return
        log, position = self.logs[tp], self.position[tp]
        new = log[position : position + most]
        held_before = self.task.snapshot(self.now)["buffered"] > 0
        self.task.observe_fetch(tp, len(log), position + len(new), self.now)
        self.task.push(tp, new)
        self._fetched(tp, len(log) - position - len(new), bool(new), held_before)
        self.pushed += len(new)
        self.position[tp] = position + len(new)

    @rule(ms=st.sampled_from([1, 10, 60, 150, 500, 5_000]))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule()
    def poll(self) -> None:
        for _ in range(100):
            rows = self.task.snapshot(self.now)["partitions"]
            behind = [r for r in rows if r["buffered"] == 0 and (r["lag"] != 0 or r["paused"])]
            out = self.task.poll(self.now)
            self._polled()
            if isinstance(out, Emit):
                if behind and self.config.max_task_idle_ms != -1:
                    assert not out.records, f"records out while {behind[0]} is behind or paused"
                self._check_emit(out)
                continue
            if isinstance(out, Heartbeat):
                assert out.watermark >= 0, "a heartbeat carries a known watermark"
                continue
            self._check_wake(out)
            break
        else:
            raise AssertionError("poll kept emitting at one instant: no progress")
        hint = self.task.pause_hint(self.now)
        self._paused(hint.pause)
        self._resumed(hint.resume)

    @rule(all_of_them=st.booleans())
    def ack(self, all_of_them: bool) -> None:
        if not self.unacked:
            return
        done = self.unacked if all_of_them else self.unacked[:1]
        self.unacked = self.unacked[len(done) :]
        self.committed.update(self.task.acked(done))

    @rule()
    def operator_pauses_or_resumes(self) -> None:
        if not self.task.held:
            self._paused(self.task.hold(self.now))
            return
        self._resumed(self.task.release(self.now))
        hint = self.task.pause_hint(self.now)
        self._paused(hint.pause)
        self._resumed(hint.resume)

    @rule()
    def rebalance(self) -> None:
        self.committed.update(self.task.committable())
        self.dropped_earlier += sum(self.task.dropped.values())
        self._new_task()

    # -- what each step must hold ----------------------------------------------------------------

    def _check_emit(self, batch: Emit) -> None:
        self.unacked.append(batch.batch_id)
        for record in batch.records:
            tp = TopicPartition(record.topic, record.partition)
            assert record.offset > self.last_offset.get(tp, -1), f"{tp} out of offset order"
            self.last_offset[tp] = record.offset
        for record in [*batch.records, *(late.record for late in batch.late_routed)]:
            self._account(record)
        for dead in batch.dead_letters:
            self._account(dead.record)

    def _account(self, record: Record) -> None:
        ident = (record.topic, record.partition, record.offset)
        assert self.accounted[ident] == 0, f"{ident} came out twice from one task"
        self.accounted[ident] += 1
        tp = TopicPartition(ident[0], ident[1])
        assert ident[2] >= self.started_at[tp], "re-delivered a record committed before the rebalance"
        self.delivered[ident] += 1

    def _check_wake(self, out: Idle | NeedFetch | WaitUntil) -> None:
        wake = out.deadline_ms if isinstance(out, WaitUntil) else out.wake_at_ms
        if wake is None:
            return
        assert wake > self.now, f"asked to be woken at {wake}, not after now ({self.now}): a busy loop"
        rows = self.task.snapshot(self.now)["partitions"]
        passing = {
            r["passes_at"]
            for r in rows
            if r["buffered"] == 0 and r["passes_at"] is not None and r["passes_at"] > self.now
        }
        if self.task.watermark < 0:
            assert wake in passing, "woken for a heartbeat while the watermark is unknown"
        if isinstance(out, WaitUntil) and self.config.watermark_heartbeat_ms == 0:
            assert wake == min(passing), "a wait ends when the first empty partition has been quiet its idle"

    @invariant()
    def the_quiet_clock_runs_as_the_rule_says(self) -> None:
        if not hasattr(self, "task"):
            return
        idle = self.config.max_task_idle_ms
        for row in self.task.snapshot(self.now)["partitions"]:
            tp = TopicPartition(row["topic"], row["partition"])
            since = self.since[tp]
            assert row["quiet_since"] == since, f"{tp} quiet since {row['quiet_since']}, not {since}"
            assert row["paused"] == (tp in self.paused)
            if idle in (0, 40, 400):
                runs = since is not None and tp in self.running
                expected = self.mark[tp] - self.counted[tp] + idle if runs else None
                assert row["passes_at"] == expected, f"{tp}: passes at {row['passes_at']}, not {expected}"
            elif idle in (-1, IDLE_FOREVER):
                assert row["passes_at"] is None

    @invariant()
    def time_never_goes_back(self) -> None:
        if not hasattr(self, "task"):
            return
        assert self.task.watermark >= self.watermark
        assert self.task.stream_time >= self.stream_time
        self.watermark = self.task.watermark
        self.stream_time = self.task.stream_time

    @invariant()
    def nothing_lost_or_doubled(self) -> None:
        if not hasattr(self, "task"):
            return
        snap = self.task.snapshot(self.now)
        dropped = sum(snap["dropped"].values())
        pending_dead = len(self.task._dead)  # dead letters go out with the next batch
        assert sum(self.accounted.values()) + dropped + snap["buffered"] + pending_dead == self.pushed

    @invariant()
    def a_committed_offset_never_passes_a_record_not_yet_out(self) -> None:
        if not hasattr(self, "task"):
            return
        missing = [
            r
            for tp in self.tps
            for r in self.logs[tp][: self.committed[tp]]
            if (r.topic, r.partition, r.offset) not in self.delivered
        ]
        dropped = self.dropped_earlier + sum(self.task.dropped.values())
        assert len(missing) <= dropped, f"committed past records never emitted: {missing[:3]}"

    @invariant()
    def caught_up_means_a_heartbeat_is_coming(self) -> None:
        if not hasattr(self, "task") or self.config.watermark_heartbeat_ms == 0 or self.task.held:
            return
        parts = self.task._parts
        caught_up = all(p.lag == 0 and p.buffered == 0 and p.caught_up_at is not None for p in parts)
        limits = self.config.output_limits
        if not caught_up or not all(self.position[tp] == len(self.logs[tp]) for tp in self.tps):
            return
        out = self.task.poll(self.now)
        if isinstance(out, Emit):  # dead letters of the last fetch go out first
            self._check_emit(out)
            out = self.task.poll(self.now)
        assert self.task.watermark >= 0, "caught up everywhere, yet no watermark"
        if limits is not None and limits.refusal(self.task.watermark, self.now) is not None:
            return  # a heartbeat the broker would refuse is not written
        if isinstance(out, Heartbeat):
            return
        assert isinstance(out, Idle), out
        assert out.wake_at_ms is not None
        assert out.wake_at_ms <= self.now + self.config.watermark_heartbeat_ms


MergeTaskMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_merge_task_keeps_its_promises_in_every_topology = MergeTaskMachine.TestCase
