"""``/status`` answers "why is my join stalled?"; ``/metrics`` carries DESIGN's names."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.workloads import Event

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]

#: More than one fetch brings (1 MiB per partition), so a paused partition still has lag.
N = 30_000


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of one Prometheus sample, or None if absent."""
    for line in metrics.splitlines():
        if not line.startswith(name):
            continue
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


async def test_status_and_metrics_show_lag_buffering_pauses_blockers_watermark_and_counts(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    busy, quiet, out = topic_name("busy"), topic_name("quiet"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(busy), TopicSpec(quiet)])
    stamps = [1_000_000 + i for i in range(N)]
    stamps[N // 2] = 10  # one record far behind its neighbours: it will come out late
    await kafka_io.produce(bootstrap, [Event(busy, 0, ts, b"k", b"v" * 100, 0) for ts in stamps])

    process = await sidecar(
        [busy, quiet],
        out,
        max_task_idle_ms=4_000,
        buffered_records_per_partition=100,
        watermark_policy="bounded-delay",
        watermark_max_delay_ms=1_000,
    )
    await asyncio.sleep(2.0)  # the quiet partition is idling; the busy one fills its buffer and pauses

    task = (await process.status())["tasks"]["0"]
    parts = {p["topic"]: p for p in task["partitions"]}
    assert task["ready"] is False
    (blocker,) = task["blocked_by"]
    assert blocker["topic"] == quiet
    assert blocker["reason"].startswith("idling until")
    assert parts[busy]["paused"] is True
    assert parts[busy]["buffered"] >= 100
    assert parts[busy]["lag"] > 0, "paused with records still on the broker"
    assert parts[quiet]["lag"] == 0
    metrics = await process.metrics()
    assert sample(metrics, "timesync_buffered_records", topic=busy, partition="0") >= 100  # type: ignore[operator]
    assert sample(metrics, "timesync_consumer_lag", topic=busy, partition="0") > 0  # type: ignore[operator]
    assert sample(metrics, "timesync_partition_paused", topic=busy, partition="0") == 1

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (await process.status())["tasks"]["0"]["records_out"] < N:
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.5)  # gauges refresh once a second
    task = (await process.status())["tasks"]["0"]
    metrics = await process.metrics()

    assert task["records_out"] == N
    assert task["enforced"] == N, "everything went out after the quiet partition's deadline"
    assert task["late"] == 1
    assert task["watermark"] > 0
    for name in ("timesync_records_in_total", "timesync_records_out_total"):
        assert sample(metrics, name) == N
    assert sample(metrics, "timesync_enforced_processing_total") == N
    assert sample(metrics, "timesync_late_records_total") == 1
    assert sample(metrics, "timesync_record_lateness_seconds_count") == N
    assert sample(metrics, "timesync_record_lateness_seconds_bucket", le="0.0") == N - 1
    assert sample(metrics, "timesync_watermark_seconds", task="0") == pytest.approx(
        task["watermark"] / 1000, abs=2
    )
    last_event_time_s = (1_000_000 + N - 1) / 1000
    assert sample(metrics, "timesync_stream_time_seconds", task="0") == pytest.approx(last_event_time_s)
    assert sample(metrics, "timesync_partition_paused", topic=busy, partition="0") == 0
    assert sample(metrics, "timesync_dropped_records_total", reason="late") in (None, 0.0)
