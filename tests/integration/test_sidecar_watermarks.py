"""Watermarks on a LogAppendTime input, and heartbeats while nothing flows."""

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

EPSILON = 2_000


async def test_log_append_time_watermark_reaches_fetch_time_minus_epsilon_and_heartbeats_carry_it(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    lat, out = topic_name("lat"), topic_name("out")
    await kafka_io.create_topics(
        bootstrap, [TopicSpec(lat, 2, configs={"message.timestamp.type": "LogAppendTime"})]
    )
    await kafka_io.produce(bootstrap, [Event(lat, i % 2, 1, b"k", b"v%d" % i, 0) for i in range(200)])
    produced_by = int(time.time() * 1000)

    await sidecar(
        [lat], out, max_task_idle_ms=0, watermark_idle_epsilon_ms=EPSILON, watermark_heartbeat_ms=300
    )
    await asyncio.sleep(3)  # caught up and quiet: only heartbeats now
    read_from = int(time.time() * 1000)
    # Heartbeats keep coming, so the read ends at its timeout.
    raw = await kafka_io.read_topics(bootstrap, [out], idle_s=0.5, timeout_s=2)
    read_to = int(time.time() * 1000)
    records = [ordered.decode(r) for r in raw]

    data = [o for o in records if not o.control]
    beats = [o for o in records if o.control]
    assert len(data) == 200
    assert all(o.timestamp <= produced_by for o in data), "event time is the broker's append time"
    assert len(beats) >= 3, "heartbeats appear while nothing flows"
    last = beats[-1]
    assert last.key is None
    assert last.value == b""
    assert last.timestamp == last.watermark, "a heartbeat's timestamp is the task watermark"
    assert read_from - EPSILON - 1_500 <= last.watermark <= read_to - EPSILON, "≈ fetch time − epsilon"
    assert last.watermark > max(o.timestamp for o in data), "the watermark moved past the data: caught up"
    watermarks = [o.watermark for o in records if o.watermark is not None and o.watermark >= 0]
    assert watermarks == sorted(watermarks), "never decreasing"


async def test_an_input_topic_nobody_writes_does_not_freeze_the_watermark(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    """Default watermark.policy=auto, CreateTime inputs, one of them empty (a join side that has
    not started): heartbeats flow once caught up, carrying a watermark that follows the data
    within watermark.max.delay.ms."""
    busy, empty, out = topic_name("busy"), topic_name("empty"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(busy, 1), TopicSpec(empty, 1)])
    now = int(time.time() * 1000)
    await kafka_io.produce(
        bootstrap, [Event(busy, 0, now - 100 + i, b"k", b"v%d" % i, 0) for i in range(100)]
    )
    data_max = now - 1

    await sidecar(
        [busy, empty], out, max_task_idle_ms=100, watermark_heartbeat_ms=200, watermark_max_delay_ms=1_000
    )
    await asyncio.sleep(3)
    raw = await kafka_io.read_topics(bootstrap, [out], idle_s=0.5, timeout_s=2)
    records = [ordered.decode(r) for r in raw]

    data = [o for o in records if not o.control]
    beats = [o for o in records if o.control]
    assert len(data) == 100
    assert len(beats) >= 3, "heartbeats while nothing flows, though one input never had a record"
    assert beats[-1].watermark >= data_max - 1_000, "within watermark.max.delay.ms of the data's max time"
