"""SIGTERM mid-stream and a restart: the rest arrives, nothing lost, nothing repeated."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.workloads import Event, with_offsets

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_sigterm_drains_commits_and_a_restart_continues_without_loss_or_repeats(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 2), TopicSpec(b, 2)])
    events = [
        Event(t, p, 3_000_000 + 4 * i + 2 * ti + p, b"k%d" % i, b"v", send_at_ms=i)
        for i in range(8_000)
        for ti, t in enumerate((a, b))
        for p in range(2)
    ]
    # The input is paced over ~8 s from when the first sidecar is up (a start on a loaded machine
    # may take longer than that), so that SIGTERM finds it mid-stream.
    first = await sidecar([a, b], out, max_task_idle_ms=0, watermark_heartbeat_ms=0)
    producing = asyncio.create_task(kafka_io.produce(bootstrap, events, paced=True))
    await asyncio.sleep(1.0)
    assert (await first.status())["tasks"]["0"]["records_out"] > 0, "stopped mid-stream, not before it"
    assert await first.stop(signal.SIGTERM) == 0
    midway = len(ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=0.5, timeout_s=30)))

    await sidecar([a, b], out, max_task_idle_ms=-1, watermark_heartbeat_ms=0)
    await producing
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(events), timeout_s=60))

    print(f"{midway} records out before SIGTERM, {len(got)} in total")
    assert 0 < midway < len(events)
    sources = [o.source for o in got]
    assert len(sources) == len(events)
    assert set(sources) == {(e.topic, e.partition, i) for e, i in with_offsets(events)}, "nothing lost"
    assert len(set(sources)) == len(sources), "a clean stop commits all it acked: nothing repeats"
    for tp in {(o.source_topic, o.source_partition) for o in got}:
        offsets = [o.source_offset for o in got if (o.source_topic, o.source_partition) == tp]
        assert offsets == sorted(offsets), "per-partition order holds across the restart"  # type: ignore[type-var]
