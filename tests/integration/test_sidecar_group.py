"""``task.grouping=partition``: two replicas share the tasks; stopping one moves its tasks; nothing lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event, with_offsets

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TASKS = 4


async def tasks_of(process: SidecarProcess) -> set[str]:
    return set((await process.status())["tasks"])


async def until(check: Callable[[], object], timeout_s: float = 45.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():  # type: ignore[misc]
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"condition not met within {timeout_s} s")


def batch(a: str, b: str, start: int, count: int) -> list[Event]:
    return [
        Event(t, p, 7_000_000 + 10 * i + ti, b"k", b"v", 0)
        for i in range(start, start + count)
        for ti, t in enumerate((a, b))
        for p in range(TASKS)
    ]


async def test_two_replicas_share_whole_tasks_and_take_over_on_stop_without_loss(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, TASKS), TopicSpec(b, TASKS)])
    settings = {
        "task_grouping": "partition",
        "max_task_idle_ms": 0,
        "watermark_heartbeat_ms": 0,
        "group_id": f"{out}-group",
    }
    first = await sidecar([a, b], out, **settings)
    second = await sidecar([a, b], out, **settings)

    async def shared() -> bool:
        one, two = await tasks_of(first), await tasks_of(second)
        return bool(one) and bool(two) and not (one & two) and one | two == {str(i) for i in range(TASKS)}

    await until(shared)
    for process in (first, second):
        for task in (await process.status())["tasks"].values():
            indices = {p["partition"] for p in task["partitions"]}
            topics = {p["topic"] for p in task["partitions"]}
            assert len(indices) == 1, "a task is one partition index..."
            assert topics == {a, b}, "...of every input topic"

    early = batch(a, b, 0, 500)
    await kafka_io.produce(bootstrap, early)
    await kafka_io.read_topics(bootstrap, [out], expected=len(early), timeout_s=60)
    assert await second.stop() == 0

    async def took_over() -> bool:
        return await tasks_of(first) == {str(i) for i in range(TASKS)}

    await until(took_over)
    late = batch(a, b, 500, 500)
    await kafka_io.produce(bootstrap, late)
    got = ordered.data(
        await kafka_io.read_topics(bootstrap, [out], expected=len(early) + len(late), timeout_s=60)
    )

    sources = {o.source for o in got}
    expected = {(e.topic, e.partition, i) for e, i in with_offsets(early + late)}
    assert sources == expected, "nothing lost across the hand-over"
    assert len(got) == len(sources), "a clean hand-over repeats nothing"
    for o in got:
        assert o.partition == o.source_partition, "task i writes output partition i"
    for p in range(TASKS):
        mine = [o for o in got if o.partition == p]
        on_time = [o.timestamp for o in mine if not o.late]
        assert on_time == sorted(on_time), f"output partition {p} is in event-time order"
        first_late = next((i for i, o in enumerate(mine) if o.late), None)
        if first_late is not None:  # only a partition declared idle (enforced processing) lets one in late
            assert any(o.enforced for o in mine[:first_late])
