"""``exactly_once_v2`` with ``task.grouping=partition``: replicas share the tasks, tasks move, and a
``read_committed`` reader sees every input exactly once.

Each task writes through its own transactional producer (``transactional.id``
``<group.id>-txn-<task>``), so replicas never fence each other for the tasks they own; a task that
moves is fenced on its old owner only. The input is written live through four moves: a clean
stop (the leaving replica commits and hands its tasks over), a new replica joining (the owner
commits, closes and hands half its tasks over mid-stream), a replica frozen mid-stream (SIGSTOP:
once the group gives its tasks to the other replica, that one's producers fence the frozen
replica's and the broker aborts their open transactions), and the frozen replica waking up (a
zombie: fenced for tasks it no longer owns, it must not die but join the group again).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import steady
from tests.faults.delivery import check, end_offsets, per_partition, wait_committed

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(180)]

TASKS = 4
ALL_TASKS = {str(i) for i in range(TASKS)}
RECORDS = 12_000
#: The input is written over this long, while the tasks move.
WRITE_S = 12.0


async def tasks_of(process: SidecarProcess) -> set[str]:
    return set((await process.status())["tasks"])


async def until(check_: Callable[[], object], what: str, timeout_s: float = 45.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check_():  # type: ignore[misc]
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s} s")


async def share(one: SidecarProcess, two: SidecarProcess) -> bool:
    """Both own tasks, no task is owned twice, and every task is owned."""
    a, b = await tasks_of(one), await tasks_of(two)
    return bool(a) and bool(b) and not (a & b) and a | b == ALL_TASKS


async def test_two_replicas_with_exactly_once_v2_move_tasks_and_read_committed_sees_each_input_once(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, TASKS), TopicSpec(b, TASKS)])
    group = f"{out}-group"
    settings = {
        "task_grouping": "partition",
        "processing_guarantee": "exactly_once_v2",
        "max_task_idle_ms": 0,
        "watermark_heartbeat_ms": 500,
        "group_id": group,
    }
    first = await sidecar([a, b], out, **settings)
    second = await sidecar([a, b], out, **settings)
    await until(lambda: share(first, second), "two replicas share the tasks")
    for process in (first, second):
        status = await process.status()
        for name, task in status["tasks"].items():
            assert {p["partition"] for p in task["partitions"]} == {int(name)}, "a task is one index..."
            assert {p["topic"] for p in task["partitions"]} == {a, b}, "...of every input topic"
        txns = status["output"]["transactions"]
        assert set(txns) == set(status["tasks"]), "one transactional producer per owned task"
        assert {t["transactional_id"] for t in txns.values()} == {f"{group}-txn-{n}" for n in txns}

    events = steady([a, b], TASKS, RECORDS, 1_700_000_000_000, seed=11, rate_per_s=RECORDS / WRITE_S)
    writing = asyncio.create_task(kafka_io.produce(bootstrap, events, paced=True))
    try:
        # 1. A clean stop: the leaving replica commits its transactions and hands its tasks over.
        await asyncio.sleep(2.5)
        second_out = sum(t["records_out"] for t in (await second.status())["tasks"].values())
        assert await second.stop() == 0, second.log_tail()
        await until(lambda: _owns_all(first), "the first takes every task")

        # 2. A replica joins mid-stream: the first commits, closes and hands half its tasks over.
        third = await sidecar([a, b], out, **settings)
        await until(lambda: share(first, third), "the first and the third share the tasks")
        await asyncio.sleep(1.5)
        third_tasks = await tasks_of(third)

        # 3. Frozen: its transactions stay open until the first's producers fence them (once the
        # group's session timeout gives the first its tasks), which aborts them.
        os.kill(third.pid, signal.SIGSTOP)
        try:
            await until(lambda: _owns_all(first), "the first takes the frozen replica's tasks", 60)
        finally:
            os.kill(third.pid, signal.SIGCONT)
        # 4. Awake, the zombie finds its producers fenced: it starts over and joins again.
        await until(lambda: share(first, third), "the woken replica shares the tasks again", 60)
        await writing
    finally:
        writing.cancel()

    expected = per_partition((e.topic, e.partition) for e in events)
    assert await end_offsets(bootstrap, expected) == expected, "the inputs hold what was written"
    await wait_committed(bootstrap, group, expected, timeout_s=60)
    first_log, third_log = first.log_tail(400), third.log_tail(400)
    assert await first.stop() == 0, first.log_tail()
    assert await third.stop() == 0, third.log_tail()

    committed = await kafka_io.read_topics(
        bootstrap, [out], idle_s=1.0, timeout_s=60, isolation_level="read_committed"
    )
    everything = await kafka_io.read_topics(bootstrap, [out], idle_s=1.0, timeout_s=60)
    got = ordered.data(committed)
    delivery = check(expected, got)
    print(
        f"\nsecond wrote {second_out} before its stop; third owned {sorted(third_tasks)} when frozen; "
        f"{delivery.line()}; aborted records (read_uncommitted only): "
        f"{len(ordered.data(everything)) - len(got)}"
    )
    assert second_out > 0, "both replicas wrote output"
    assert third_tasks, "the third replica owned tasks when it was frozen"
    assert delivery.problems == []
    assert delivery.lost == 0
    assert delivery.duplicates == 0, "read_committed sees each input once"
    for o in got:
        assert o.partition == o.source_partition, "task i writes output partition i"
    beats = {o.partition for o in map(ordered.decode, committed) if o.control}
    # Tasks that went quiet once the input was written sent heartbeats in their transactions. (A
    # task with no data since it was created has no watermark, hence no heartbeat.)
    assert beats, "heartbeats are committed in the tasks' transactions"
    for process in (first, second):
        assert "fenced" not in process.log_tail(400), process.log_tail()
    assert "restarting" not in first_log, "the first replica never had to start over"
    print("the woken replica:", [line for line in third_log.splitlines() if "task" in line][-6:])


async def _owns_all(process: SidecarProcess) -> bool:
    return await tasks_of(process) == ALL_TASKS
