"""The C merge kernel and the Python core make the same decisions, call for call.

Hypothesis draws a task's settings — every ``max.task.idle.ms`` class (-1, 0, N, max, auto),
``late.records`` forward, drop and a topic, ``timestamp.invalid`` fail, skip and
partition-time under ``errors.tolerance`` none and all (the dead letter queue), an output topic
whose broker refuses times far ahead or behind, or none — and a history over two tasks given
the same calls (``twins.py``): records produced with crowded event times (ties across
partitions, late records, unreadable and refused times), fetches of part of a log, offsets that
cannot be read, polls with and without a record budget, acknowledgements, backpressure, an
operator's hold, and rebalances mid-batch (new tasks from the committed offsets, unacknowledged
batches forgotten). Every answer must be the same: outcomes, batches record for record, times,
late and enforced marks, routed and dead letters, errors, commits, pause hints, ``/status`` —
and the producer batches the native output encoder writes from each, byte for byte.

The state machine of ``test_task_state_machine.py`` runs its histories on the same twins.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sidecar.core import (
    LOG_APPEND_TIME,
    BrokerTimestampLimits,
    Emit,
    InvalidTimestampError,
    Record,
    TaskConfig,
    TopicPartition,
    Unreadable,
)
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER
from sidecar.output.batches import compressor
from sidecar.output.encoder import NativeEncoder
from tests.unit.core.twins import TwinTasks, emit_view

START = 1_000_000
IDLES = (-1, 0, 5, 40, IDLE_FOREVER, IDLE_AUTO)
HEADERS = ((), (("trace", b"t"),), (("timesync.watermark", b"9"), ("h", None)))


def encoded(emit: Emit) -> list[bytes]:
    """The producer batches the native encoder writes for ``emit`` (small, uncompressed)."""
    encoder = NativeEncoder(compressor("none"), False, batch_bytes=300)
    return [bytes(b._build()) for b in encoder.encode(emit)]


class KernelAgainstCore(RuleBasedStateMachine):
    @initialize(
        shape=st.lists(st.integers(1, 2), min_size=1, max_size=3),
        lat=st.booleans(),
        idle=st.sampled_from(IDLES),
        late=st.sampled_from(["forward", "drop", "topic"]),
        invalid=st.sampled_from(["fail", "skip", "partition-time"]),
        tolerance=st.sampled_from(["none", "all"]),
        limits=st.sampled_from([None, BrokerTimestampLimits(after_max_ms=50, before_max_ms=400)]),
        policy=st.sampled_from(["auto", "bounded-delay", "min-window", "log-append-time"]),
        heartbeat=st.sampled_from([0, 30]),
        buffered=st.sampled_from([2, 1000]),
    )
    def topology(self, shape: list[int], lat: bool, **knobs: Any) -> None:
        self.topics = [f"t{i}" for i in range(len(shape))]
        self.tps = [TopicPartition(t, p) for t, n in zip(self.topics, shape, strict=True) for p in range(n)]
        self.lat = {self.topics[-1]} if lat and len(shape) > 1 else set()
        self.config = TaskConfig(
            max_task_idle_ms=knobs["idle"],
            buffered_records_per_partition=knobs["buffered"],
            timestamp_invalid=knobs["invalid"],
            errors_tolerance=knobs["tolerance"],
            dlq_max_ratio=1.0,
            late_records=knobs["late"],
            watermark_policy=knobs["policy"],
            watermark_max_delay_ms=20,
            watermark_window_ms=100,
            watermark_idle_epsilon_ms=10,
            watermark_heartbeat_ms=knobs["heartbeat"],
            output_limits=knobs["limits"],
        )
        self.now = START
        self.logs: dict[TopicPartition, list[Record | None]] = {tp: [] for tp in self.tps}  # None: unreadable
        self.committed = dict.fromkeys(self.tps, 0)
        self._new_tasks()

    def _new_tasks(self) -> None:
        """Tasks from the committed offsets, as after a start or a rebalance."""
        self.task = TwinTasks(self.tps, self.config, topic_order=self.topics, log_append_time_topics=self.lat)
        self.position = dict(self.committed)
        self.unacked: list[int] = []

    @rule(
        which=st.integers(0, 5),
        times=st.lists(st.integers(-6, 6).map(lambda d: d * 10), min_size=1, max_size=8),
        odd=st.sampled_from([None, None, None, None, "unreadable", "refused"]),
        at=st.integers(0, 7),
        key=st.booleans(),
        headers=st.sampled_from(HEADERS),
        deliver=st.sampled_from([None, 2, 8]),
    )
    def produce(
        self,
        which: int,
        times: list[int],
        odd: str | None,
        at: int,
        key: bool,
        headers: Any,
        deliver: int | None,
    ) -> None:
        """Records whose event times crowd around now on a 10 ms grid (ties across partitions and
        within one, late ones); now and then one of them
        unreadable (-1) or refused (999 ms ahead: past the broker's 50). One odd record at most,
        and in a third of the batches, so that most histories keep flowing: an odd record stops a
        partition under ``errors.tolerance=none``, and the merge then waits for it for good.
        ``deliver``: then a fetch round of up to that many records per partition, and a poll
        (hypothesis turns rules off at random, so the common path of a record — produced,
        fetched, polled — is one rule too)."""
        tp = self.tps[which % len(self.tps)]
        log = self.logs[tp]
        for i, delta in enumerate(times):
            offset = len(log)
            if tp.topic in self.lat:
                ts, kind = self.now, LOG_APPEND_TIME
            elif odd is not None and i == at % len(times):
                ts, kind = (-1 if odd == "unreadable" else self.now + 999), 0
            else:
                ts, kind = max(0, self.now + delta), 0
            value = b"v%d" % offset
            log.append(
                Record(tp.topic, tp.partition, offset, ts, b"k" if key else None, value, headers, kind)
            )
        if deliver is not None:
            self.fetch([deliver] * len(self.tps), then_poll=True)

    @rule(which=st.integers(0, 5), count=st.integers(1, 4))
    def corrupt(self, which: int, count: int) -> None:
        """Offsets that will not read (a corrupt batch)."""
        self.logs[self.tps[which % len(self.tps)]] += [None] * count

    @rule(
        mosts=st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=6, max_size=6),
        then_poll=st.booleans(),
    )
    def fetch(self, mosts: list[int | None], then_poll: bool) -> None:
        """A fetch round, as one ``getmany``: from each partition up to ``mosts[i]`` records
        (``None``: that partition is not in this answer; its lag stays as it was, unknown at
        first); offsets that do not read come as their own verdict (under
        ``errors.tolerance=none`` the sidecar stops there: the fetch stalls). ``then_poll``: the
        sidecar's loop polls right after, as it does when nothing else is due."""
        for tp, most in zip(self.tps, mosts, strict=False):
            if most is not None:
                self._fetch(tp, most)
        if then_poll:
            self.poll(None)

    def _fetch(self, tp: TopicPartition, most: int) -> None:
        if self.task.fast._part(tp).paused:
            return
        log, position = self.logs[tp], self.position[tp]
        new = log[position : position + most]
        run = next((i for i, r in enumerate(new) if (r is None) != (new[0] is None)), len(new))
        if new and new[0] is None:
            self.task.observe_fetch(tp, len(log), position + run, self.now)
            if self.config.errors_tolerance == "all":
                bad = Unreadable(position, position + run, f"{tp} at {position}: Invalid CRC", b"x")
                self.task.push(tp, bad)
                self.position[tp] = position + run
            return
        readable = [r for r in new[:run] if r is not None]
        self.task.observe_fetch(tp, len(log), position + len(readable), self.now)
        try:
            self.task.push(tp, readable)
        except InvalidTimestampError as e:  # errors.tolerance=none: the sidecar stops there
            self.position[tp] = e.offset
            return
        self.position[tp] = position + len(readable)

    @rule(ms=st.sampled_from([1, 5, 40, 300, 5_000]))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(cap=st.sampled_from([None, None, 1, 3]))
    def poll(self, cap: int | None) -> None:
        for _ in range(60):
            try:
                out = self.task.poll(self.now, cap)
            except InvalidTimestampError:  # a refused time at the head under none: it stays
                return
            if not isinstance(out, Emit):
                return
            self.unacked.append(out.batch_id)
            fast, spec = self.task.answers
            assert encoded(fast) == encoded(spec), emit_view(fast)

    @rule(all_of_them=st.booleans())
    def ack(self, all_of_them: bool) -> None:
        if self.unacked:
            done = self.unacked if all_of_them else self.unacked[:1]
            self.unacked = self.unacked[len(done) :]
            self.committed.update(self.task.acked(done))

    @rule()
    def backpressure(self) -> None:
        self.task.pause_hint(self.now)

    @rule(now=st.integers(0, 3))
    def operator(self, now: int) -> None:
        """An operator's hold, released at the next turn; held a quarter of the time it could
        be, so that most histories keep taking."""
        if self.task.held:
            self.task.release(self.now)
        elif now == 0:
            self.task.hold(self.now)

    @rule(now=st.integers(0, 2))
    def rebalance(self, now: int) -> None:
        """Now and then, new tasks from the committed offsets (what was buffered is fetched
        again, unacknowledged batches are forgotten)."""
        if now == 0:
            self.committed.update(self.task.committable())
            self._new_tasks()

    @invariant()
    def status_is_the_same(self) -> None:
        if hasattr(self, "task"):
            self.task.snapshot(self.now)


KernelAgainstCore.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=35,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_the_c_kernel_decides_as_the_python_core = KernelAgainstCore.TestCase
