"""Invariants of the merge under random pushes, fetch facts, clock ticks, polls, acks and pauses.

Each scenario is a list of operations against a simulated broker whose facts are truthful: a
fetch pushes records that were appended and reports the high watermark as it is then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.core import Emit, MergeTask, Record, TaskConfig, TopicPartition
from sidecar.core.readiness import IDLE_FOREVER

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Op = tuple  # ("append", i, k) | ("fetch", i, k) | ("tick", dt) | ("poll", cap) | ("ack", pick) | ("pause",)


@dataclass
class Scenario:
    partitions: list[TopicPartition]
    logs: list[list[int]]  # event times per partition, in offset order
    idle: int
    late_records: str
    ops: list[Op]
    pauses: bool


@st.composite
def scenarios(draw: st.DrawFn, sorted_input: bool | None = None, pauses: bool | None = None) -> Scenario:
    n = draw(st.integers(1, 4))
    partitions = [TopicPartition("ab"[i % 2], i // 2) for i in range(n)]
    sort = draw(st.booleans()) if sorted_input is None else sorted_input
    logs = []
    for _ in partitions:
        times = draw(st.lists(st.integers(0, 60), max_size=25))
        logs.append(sorted(times) if sort else times)
    idle = draw(st.sampled_from([-1, 0, 3, 20, IDLE_FOREVER]))
    late = draw(st.sampled_from(["forward", "forward", "drop", "topic"]))
    # Rounds of: producers append, the consumer fetches (some or all partitions), time passes,
    # the task is polled, some batch is acked, maybe a pause hint is applied. Amounts may be 0,
    # and the order inside a round varies, so every interleaving is reachable.
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, 25))):
        round_ops: list[Op] = []
        for i in range(n):
            k = draw(st.integers(0, 4))
            if k:
                round_ops.append(("append", i, k))
        target = draw(st.one_of(st.none(), st.integers(0, n - 1)))
        round_ops.append(("fetch", target, draw(st.integers(0, 5))))
        round_ops.append(("tick", draw(st.integers(0, 12))))
        round_ops.append(("poll", draw(st.sampled_from([None, None, None, 1, 3]))))
        if draw(st.booleans()):
            round_ops.append(("ack", draw(st.integers(0, 10))))
        if draw(st.integers(0, 3)) == 0:
            round_ops.append(("pause",))
        ops += draw(st.permutations(round_ops)) if draw(st.integers(0, 4)) == 0 else round_ops
    use_pauses = draw(st.booleans()) if pauses is None else pauses
    if not use_pauses:
        ops = [o for o in ops if o[0] != "pause"]
    return Scenario(partitions, logs, idle, late, ops, use_pauses)


@dataclass
class Trace:
    batches: list[Emit] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    stream_times: list[int] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)
    partition_watermarks: list[list[int | None]] = field(default_factory=list)
    pushed: dict[TopicPartition, list[Record]] = field(default_factory=dict)
    commit_violations: list[str] = field(default_factory=list)
    task: MergeTask | None = None


def run(s: Scenario, finish: bool = True, heartbeat_ms: int = 7) -> Trace:
    task = MergeTask(
        s.partitions,
        TaskConfig(
            max_task_idle_ms=s.idle,
            late_records=s.late_records,  # type: ignore[arg-type]
            buffered_records_per_partition=4,
            watermark_heartbeat_ms=heartbeat_ms,
            watermark_policy="bounded-delay",
            watermark_max_delay_ms=5,
        ),
    )
    trace = Trace(task=task, pushed={tp: [] for tp in s.partitions})
    visible = [0] * len(s.partitions)
    position = [0] * len(s.partitions)
    paused = [False] * len(s.partitions)
    now = 0

    def fetch(i: int, k: int) -> None:
        if paused[i]:
            return
        tp = s.partitions[i]
        end = min(visible[i], position[i] + k)
        recs = [Record(tp.topic, tp.partition, o, s.logs[i][o]) for o in range(position[i], end)]
        position[i] = end
        task.observe_fetch(tp, visible[i], end, now)
        task.push(tp, recs)
        trace.pushed[tp] += recs

    def poll(cap: int | None) -> None:
        while True:
            out = task.poll(now, cap)
            observe()
            if not isinstance(out, Emit):
                return
            trace.batches.append(out)

    def observe() -> None:
        trace.stream_times.append(task.stream_time)
        trace.watermarks.append(task.watermark)
        trace.partition_watermarks.append([p.watermark for p in task._parts])

    def ack(ids: list[int]) -> None:
        trace.acked.update(ids)
        committed = task.acked(ids)
        trace.commits.append(committed)
        check_commits(trace, committed)

    for op in s.ops:
        kind = op[0]
        if kind == "append":
            visible[op[1]] = min(len(s.logs[op[1]]), visible[op[1]] + op[2])
        elif kind == "fetch":
            for i in range(len(s.partitions)) if op[1] is None else [op[1]]:
                fetch(i, op[2])
        elif kind == "tick":
            now += op[1]
        elif kind == "poll":
            poll(op[1])
        elif kind == "ack":
            unacked = [b.batch_id for b in trace.batches if b.batch_id not in trace.acked]
            if unacked:
                ack([unacked[op[1] % len(unacked)]])
        elif kind == "pause":
            hint = task.pause_hint(now)
            for tp in hint.pause:
                paused[s.partitions.index(tp)] = True
            for tp in hint.resume:
                paused[s.partitions.index(tp)] = False
    if finish:
        for i in range(len(s.partitions)):
            visible[i] = len(s.logs[i])
        for _ in range(30):  # resume, fetch everything, let every idle deadline pass
            hint = task.pause_hint(now)
            for tp in hint.resume:
                paused[s.partitions.index(tp)] = False
            for i in range(len(s.partitions)):
                fetch(i, 100)
            now += 1_000
            poll(None)
        ack([b.batch_id for b in trace.batches if b.batch_id not in trace.acked])
    return trace


def check_commits(trace: Trace, committed: dict[TopicPartition, int]) -> None:
    """No output of an unacknowledged batch, and no buffered record, lies below a committed offset."""
    held: dict[TopicPartition, list[int]] = {}
    for b in trace.batches:
        if b.batch_id in trace.acked:
            continue
        records = [*b.records, *(x.record for x in b.late_routed), *(d.record for d in b.dead_letters)]
        for r in records:
            held.setdefault(TopicPartition(r.topic, r.partition), []).append(r.offset)
    if trace.task is not None:
        for p in trace.task._parts:
            held.setdefault(p.tp, []).extend(p.queue.buffered_offsets())
    for tp, offset in committed.items():
        below = [o for o in held.get(tp, []) if o < offset]
        if below:
            trace.commit_violations.append(f"{tp} committed {offset} while {below} are not acked")


def outputs(trace: Trace) -> list[tuple[str, int, int, int, bool, bool]]:
    rows = []
    for b in trace.batches:
        late = set(b.late)
        for i, (r, ts) in enumerate(zip(b.records, b.timestamps, strict=True)):
            rows.append((r.topic, r.partition, r.offset, ts, i >= b.enforced_from, i in late))
    return rows


def taken_offsets(trace: Trace) -> list[tuple[str, int, int]]:
    rows = [(r.topic, r.partition, r.offset) for b in trace.batches for r in b.records]
    rows += [
        (x.record.topic, x.record.partition, x.record.offset) for b in trace.batches for x in b.late_routed
    ]
    return rows


@SETTINGS
@given(scenarios())
def test_per_partition_order_is_kept(s: Scenario) -> None:
    trace = run(s)
    for tp in s.partitions:
        offsets = [o for (t, p, o, *_) in outputs(trace) if (t, p) == tp]
        assert offsets == sorted(offsets)


@SETTINGS
@given(scenarios(sorted_input=True))
def test_output_is_sorted_by_timestamp_when_nothing_was_enforced(s: Scenario) -> None:
    if s.idle == -1:
        return  # idling off: order is not promised, and nothing is ever marked enforced
    rows = outputs(run(s))
    if any(enforced for *_, enforced, _ in rows):
        return
    stamps = [ts for (_, _, _, ts, _, _) in rows]
    assert stamps == sorted(stamps)


@SETTINGS
@given(scenarios())
def test_nothing_is_lost_and_nothing_duplicated(s: Scenario) -> None:
    trace = run(s)
    taken = taken_offsets(trace)
    assert len(taken) == len(set(taken)), "duplicates"
    dropped = trace.task.dropped["late"] if trace.task else 0
    buffered = trace.task.snapshot(0)["buffered"] if trace.task else 0
    pushed = sum(len(v) for v in trace.pushed.values())
    assert len(taken) + dropped + buffered == pushed
    if s.idle != IDLE_FOREVER:
        assert buffered == 0, "once everything is fetched and deadlines pass, everything goes out"
        assert pushed == sum(len(log) for log in s.logs)


@SETTINGS
@given(scenarios())
def test_replaying_the_same_pushes_and_facts_gives_the_same_output(s: Scenario) -> None:
    assert outputs(run(s)) == outputs(run(s))


@SETTINGS
@given(scenarios())
def test_stream_time_and_watermarks_never_decrease(s: Scenario) -> None:
    trace = run(s)
    assert trace.stream_times == sorted(trace.stream_times)
    assert trace.watermarks == sorted(trace.watermarks)
    for i in range(len(s.partitions)):
        known = [w[i] for w in trace.partition_watermarks if w[i] is not None]
        assert known == sorted(known)
        assert all(w >= 0 for w in known)


@SETTINGS
@given(scenarios())
def test_the_committed_offset_never_passes_an_unacked_output(s: Scenario) -> None:
    trace = run(s)
    assert trace.commit_violations == []
    for tp in s.partitions:
        seen = [c[tp] for c in trace.commits if tp in c]
        assert seen == sorted(seen), "commits only move forward"
    if s.idle != IDLE_FOREVER:
        final: dict[TopicPartition, int] = {}
        for c in trace.commits:
            final.update(c)
        for tp, log in zip(s.partitions, s.logs, strict=True):
            if log:
                assert final.get(tp) == len(log), "after the last ack everything is committed"


# -- the run-based merge equals a naive record-by-record merge ------------------------------------------


def reference(s: Scenario) -> list[tuple[str, int, int, int, bool, bool]]:
    """The DESIGN rules applied one record at a time, with no runs, no bisect, no heap reuse.

    Readiness: an empty partition blocks while its lag is unknown or > 0; caught up, it passes
    once it has been quiet for the idle, counted from its last arrival (or, when nothing arrived
    since it was behind, from the first fetch that showed it caught up) over the time the task
    held records.
    """
    n = len(s.partitions)
    queues: list[list[Record]] = [[] for _ in range(n)]
    quiet: list[int | None] = [None] * n  # ms counted since the last arrival; None: not caught up
    visible, position = [0] * n, [0] * n
    rank = sorted(range(n), key=lambda i: ("ab".index(s.partitions[i].topic), s.partitions[i].partition))
    rank_of = {i: r for r, i in enumerate(rank)}
    out = []
    stream_time = -1

    def blocked_or_enforced() -> tuple[bool, bool]:
        blocked = enforced = False
        for i in range(n):
            if queues[i]:
                continue
            counted = quiet[i]
            if counted is None or s.idle >= IDLE_FOREVER or counted < s.idle:
                blocked = True  # lag unknown or > 0, waiting forever, or not quiet long enough
            else:
                enforced = True
        return blocked, enforced

    def poll() -> None:
        nonlocal stream_time
        while any(queues):  # readiness is judged before each emit, so only while data is held
            enforced = False
            if s.idle != -1:
                blocked, enforced = blocked_or_enforced()
                if blocked:
                    return
            i = min((i for i in range(n) if queues[i]), key=lambda i: (queues[i][0].timestamp, rank_of[i]))
            r = queues[i].pop(0)
            late = r.timestamp < stream_time
            stream_time = max(stream_time, r.timestamp)
            if not late or s.late_records == "forward":
                out.append((r.topic, r.partition, r.offset, r.timestamp, enforced, late))

    for op in s.ops:
        if op[0] == "append":
            visible[op[1]] = min(len(s.logs[op[1]]), visible[op[1]] + op[2])
        elif op[0] == "fetch":
            k = op[2]
            for i in range(n) if op[1] is None else [op[1]]:
                tp = s.partitions[i]
                end = min(visible[i], position[i] + k)
                queues[i] += [
                    Record(tp.topic, tp.partition, o, s.logs[i][o]) for o in range(position[i], end)
                ]
                if visible[i] > end:  # lag > 0
                    quiet[i] = None  # behind: not quiet
                elif end > position[i] or quiet[i] is None:
                    quiet[i] = 0  # an arrival, or caught up at last
                position[i] = end
        elif op[0] == "tick":
            if any(queues):  # time counts as quiet only while the task holds records
                quiet = [None if q is None else q + op[1] for q in quiet]
        elif op[0] == "poll":
            poll()
    return out


@SETTINGS
@given(scenarios(pauses=False))
def test_the_batched_merge_equals_the_record_by_record_rules(s: Scenario) -> None:
    ops = [o for o in s.ops if o[0] != "poll" or o[1] is None]  # the reference has no batch cap
    s = Scenario(s.partitions, s.logs, s.idle, s.late_records, ops, False)
    assert outputs(run(s, finish=False, heartbeat_ms=0)) == reference(s)


def test_reference_sanity_two_partitions() -> None:
    s = Scenario(
        [TopicPartition("a", 0), TopicPartition("b", 0)],
        [[1, 5, 9], [2, 3, 10]],
        -1,
        "forward",
        [("append", 0, 3), ("append", 1, 3), ("fetch", 0, 3), ("fetch", 1, 3), ("poll", None)],
        False,
    )
    expected = [
        ("a", 0, 0, 1),
        ("b", 0, 0, 2),
        ("b", 0, 1, 3),
        ("a", 0, 1, 5),
        ("a", 0, 2, 9),
        ("b", 0, 2, 10),
    ]
    assert [row[:4] for row in reference(s)] == expected
    assert [row[:4] for row in outputs(run(s, finish=False))] == expected


@SETTINGS
@given(scenarios())
def test_capping_batch_size_does_not_change_the_output(s: Scenario) -> None:
    uncapped = Scenario(
        s.partitions,
        s.logs,
        s.idle,
        s.late_records,
        [("poll", None) if o[0] == "poll" else o for o in s.ops],
        s.pauses,
    )
    capped = Scenario(
        s.partitions,
        s.logs,
        s.idle,
        s.late_records,
        [("poll", 2) if o[0] == "poll" else o for o in s.ops],
        s.pauses,
    )
    assert outputs(run(capped)) == outputs(run(uncapped))


@SETTINGS
@given(
    logs=st.lists(st.lists(st.integers(0, 60), max_size=25), min_size=1, max_size=6),
    idle=st.sampled_from([0, 3, 20, 500]),
)
def test_a_backlog_fetched_whole_is_out_one_idle_after_its_fetch(logs: list[list[int]], idle: int) -> None:
    """Whatever the backlog (empty partitions, any times), fetched whole at 0: counted from the
    last arrival, every partition has been quiet for the idle at ``idle`` — one wait, not one per
    partition running dry."""
    tps = [TopicPartition("t", i) for i in range(len(logs))]
    task = MergeTask(tps, TaskConfig(max_task_idle_ms=idle, watermark_heartbeat_ms=0))
    for tp, log in zip(tps, logs, strict=True):
        task.observe_fetch(tp, len(log), len(log), 0)
        task.push(tp, [Record(tp.topic, tp.partition, o, ts) for o, ts in enumerate(log)])
    for now in (0, idle):
        while isinstance(out := task.poll(now), Emit):
            task.acked([out.batch_id])

    assert task.snapshot(idle)["buffered"] == 0
    assert task.records_out == sum(len(log) for log in logs)
