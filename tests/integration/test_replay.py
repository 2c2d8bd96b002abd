"""Replay from a point in time is reproducible: the same records, in the same order, with the same
source headers as the first time (docs/sidecar.md, Operating: Replay from a point in time)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.offsets_command import committed, reset, until_released
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event

from .conftest import StartSidecar
from .test_sidecar_control import until

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PER_PARTITION = 400
BASE = 1_700_000_000_000


def out_of_order(topics: list[tuple[str, int]], seed: int = 18) -> list[Event]:
    """Per partition, event times 10 ms apart on average, each up to ±300 ms off (out of order
    inside the partition), on a 50 ms grid so that partitions often tie."""
    rng = random.Random(seed)
    return [
        Event(
            t,
            p,
            BASE + (i * 10 + rng.randint(-300, 300)) // 50 * 50 + 300,
            b"%s-%d-%d" % (t.encode(), p, i),
            b"v",
            0,
        )
        for t, p in topics
        for i in range(PER_PARTITION)
    ]


async def records_out(process: SidecarProcess) -> int:
    return int((await process.status())["tasks"]["0"]["records_out"])


async def run_through(start: StartSidecar, bootstrap: str, inputs: list[str], out: str, n: int) -> None:
    """A sidecar from the group's committed offsets until it wrote ``n`` records, then a clean stop."""
    process = await start(inputs, out, max_task_idle_ms=0)
    await until(lambda: _at_least(records_out(process), n))
    assert await process.stop() == 0
    await until_released(bootstrap, f"timesync-{out}")


async def _at_least(count: object, n: int) -> bool:
    return await count >= n  # type: ignore[misc, no-any-return]


def source_headers(record: ordered.Ordered) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, v) for k, v in record.headers if k.startswith("timesync.source."))


async def test_a_replay_from_a_time_repeats_the_order_from_that_time_on(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    events = out_of_order([(a, 0), (a, 1), (b, 0)])
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 2), TopicSpec(b)])
    await kafka_io.produce(bootstrap, events)

    await run_through(sidecar, bootstrap, [a, b], out, len(events))
    first = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0))
    assert len(first) == len(events)

    t = BASE + PER_PARTITION * 10 // 2
    result = await reset(
        bootstrap, [a, b], out, "--to-datetime", datetime.fromtimestamp(t / 1000, UTC).isoformat()
    )
    assert result.returncode == 0, result.stderr
    positions = await committed(bootstrap, f"timesync-{out}")
    replayed = [r for r in first if r.source_offset >= positions[(r.source_topic, r.source_partition)]]  # type: ignore[index, operator]
    assert {r.source for r in first if r.timestamp >= t} <= {r.source for r in replayed}, (
        "nothing from T on is missed"
    )
    assert any(r.timestamp < t for r in replayed), "late records written after T are replayed too"

    await run_through(sidecar, bootstrap, [a, b], out, len(replayed))
    second = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0))[len(first) :]

    assert [r.source for r in second] == [r.source for r in replayed], "the same records in the same order"
    assert [source_headers(r) for r in second] == [source_headers(r) for r in replayed]
    assert [(r.key, r.value, r.timestamp) for r in second] == [
        (r.key, r.value, r.timestamp) for r in replayed
    ]
    # The first run's output from the first replayed record on is exactly the replay: a contiguous
    # tail, not the same records interleaved differently with older ones.
    start = first.index(replayed[0])
    assert first[start:] == replayed
