"""KIP-695 end to end: wait for data already on the broker, idle N only for quiet partitions,
counted from their last arrival (a backlog waits one idle, not one per partition)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.workloads import Event

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_idle_zero_waits_for_a_backlog_on_the_broker_without_enforcing(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    live, backlog, out = topic_name("live"), topic_name("backlog"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(live), TopicSpec(backlog)])
    # 30,000 old records sit on the broker: fetched 1 MiB (~6,000 records) at a time, the backlog
    # partition runs dry between fetches again and again while its lag is still positive.
    value = b"x" * 150
    old = [Event(backlog, 0, 1_000_000 + i, b"b", value, 0) for i in range(30_000)]
    new = [Event(live, 0, 1_000_000 + 10 * i + 5, b"l", value, 0) for i in range(3_000)]
    await kafka_io.produce(bootstrap, old + new)

    await sidecar([live, backlog], out, max_task_idle_ms=0, watermark_heartbeat_ms=0)
    got = ordered.data(
        await kafka_io.read_topics(bootstrap, [out], expected=len(old) + len(new), timeout_s=90)
    )

    assert len(got) == len(old) + len(new)
    stamps = [o.timestamp for o in got]
    assert stamps == sorted(stamps), "a partition with lag > 0 holds the merge: order is perfect"
    # The backlog ran dry after every fetch with its lag still positive: never enforced. Only once
    # the live partition has nothing more (lag 0, idle 0) may the backlog's last records count as
    # enforced.
    last_live = max(i for i, o in enumerate(got) if o.source_topic == live)
    assert not any(o.enforced for o in got[: last_live + 1])


@pytest.mark.parametrize(("idle", "waits"), [(3_000, True), (-1, False)])
async def test_a_truly_quiet_partition_is_waited_for_idle_ms_then_output_flows_enforced(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar, idle: int, waits: bool
) -> None:
    busy, quiet, out = topic_name("busy"), topic_name("quiet"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(busy), TopicSpec(quiet)])
    await kafka_io.produce(bootstrap, [Event(busy, 0, 5_000_000 + i, b"k", b"v", 0) for i in range(100)])

    process = await sidecar([busy, quiet], out, max_task_idle_ms=idle, watermark_heartbeat_ms=0)
    started = time.monotonic()
    if waits:
        await asyncio.sleep(1.0)
        status = await process.status()
        (blocker,) = status["tasks"]["0"]["blocked_by"]
        assert blocker["topic"] == quiet
        assert blocker["reason"].startswith("idling until")
        assert status["tasks"]["0"]["records_out"] == 0
        (waited_for,) = [p for p in status["tasks"]["0"]["partitions"] if p["topic"] == quiet]
        assert waited_for["passes_at"] == waited_for["quiet_since"] + idle
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=100, timeout_s=30))
    waited = time.monotonic() - started

    assert len(got) == 100
    if waits:
        assert waited >= 2.0, f"output came after {waited:.1f} s, expected about {idle / 1000} s"
        assert all(o.enforced for o in got), "emitted while the quiet partition was empty: enforced"
    else:
        assert not any(o.enforced for o in got), "idle -1 never marks enforced"
        assert waited < 2.0, f"idle -1 must not wait for the quiet partition, yet took {waited:.1f} s"
        status = await process.status()
        assert status["tasks"]["0"]["records_out"] == 100


async def test_auto_waits_the_budget_for_a_partition_it_knows_nothing_of_and_says_so(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    busy, quiet, out = topic_name("busy"), topic_name("quiet"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(busy), TopicSpec(quiet)])
    await kafka_io.produce(bootstrap, [Event(busy, 0, 5_000_000 + i, b"k", b"v", 0) for i in range(100)])

    process = await sidecar(
        [busy, quiet], out, max_task_idle_ms="auto", max_task_idle_budget_ms=3_000, watermark_heartbeat_ms=0
    )
    started = time.monotonic()
    await asyncio.sleep(1.0)
    status = await process.status()
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=100, timeout_s=30))
    waited = time.monotonic() - started

    assert status["max_task_idle_ms"] == "auto"
    (blocker,) = status["tasks"]["0"]["blocked_by"]
    assert blocker["topic"] == quiet
    assert "max.task.idle.ms=auto: no gaps learnt yet, so the budget, 3000 ms" in blocker["reason"]
    (learnt,) = [p["idle"] for p in status["tasks"]["0"]["partitions"] if p["topic"] == quiet]
    assert (learnt["idle_ms"], learnt["learnt"], learnt["gaps_seen"]) == (3_000, False, 0)
    assert len(got) == 100
    assert waited >= 2.0, f"output came after {waited:.1f} s, expected about 3 s (the budget)"
    assert all(o.enforced for o in got)


async def test_a_backlog_on_12_partitions_drains_within_about_two_idles_of_the_time_at_minus_one(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    """Counted from the moment each partition's buffer runs dry (Kafka Streams' rule), the 12
    partitions would run dry one after another and wait 11 idles (8.8 s); counted from their last
    arrival (the fetch that brought the backlog), one."""
    backlog = topic_name("backlog")
    await kafka_io.create_topics(bootstrap, [TopicSpec(backlog, 12)])
    # Record j of partition q has time 12j + q: the partitions interleave, and run dry in turn.
    events = [Event(backlog, q, 1_000_000 + 12 * j + q, b"k", b"v", 0) for j in range(200) for q in range(12)]
    await kafka_io.produce(bootstrap, events)

    async def drain_s(idle: int) -> float:
        out = topic_name(f"out-{idle}")
        process = await sidecar([backlog], out, max_task_idle_ms=idle, watermark_heartbeat_ms=0)
        started = time.monotonic()
        got = await kafka_io.read_topics(bootstrap, [out], expected=len(events), timeout_s=60)
        took = time.monotonic() - started
        await process.stop()
        stamps = [o.timestamp for o in ordered.data(got)]
        assert stamps == sorted(e.ts for e in events), f"idle {idle}: incomplete or out of order"
        return took

    at_minus_one = await drain_s(-1)
    at_800 = await drain_s(800)

    assert at_800 <= at_minus_one + 2 * 0.8, f"{at_800:.2f} s at 800 against {at_minus_one:.2f} s at -1"
