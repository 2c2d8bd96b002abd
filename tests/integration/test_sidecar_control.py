"""The control plane on a real broker: pause, resume, restart and offsets, and who may act."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event

from .conftest import StartSidecar, stop_and_show

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def events(topic: str, partition: int, start: int, n: int) -> list[Event]:
    return [Event(topic, partition, start + i, None, b"v", 0) for i in range(n)]


async def until(check: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():  # type: ignore[misc]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s")


async def records_out(process: SidecarProcess) -> int:
    return int((await process.status())["tasks"]["0"]["records_out"])


async def heartbeats(process: SidecarProcess) -> float:
    for line in (await process.metrics()).splitlines():
        if line.startswith("timesync_heartbeats_total "):
            return float(line.split()[1])
    return 0.0


async def test_pause_resume_restart_and_offsets(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 2), TopicSpec(b)])
    await kafka_io.produce(
        bootstrap, [*events(a, 0, 1_000, 500), *events(a, 1, 1_000, 500), *events(b, 0, 1_000, 500)]
    )
    process = await sidecar([a, b], out, watermark_heartbeat_ms=200, watermark_policy="bounded-delay")
    await until(lambda: _equals(records_out(process), 1_500))

    async def lags() -> list[int | None]:
        _, body = await process.get("/offsets")
        return [row["lag"] for row in body["offsets"]]

    await until(lambda: _equals(lags(), [0, 0, 0]))
    _, body = await process.get("/offsets")
    assert [row["partition"] for row in body["offsets"]] == [
        {"kafka_topic": a, "kafka_partition": 0},
        {"kafka_topic": a, "kafka_partition": 1},
        {"kafka_topic": b, "kafka_partition": 0},
    ]
    assert [row["offset"]["kafka_offset"] for row in body["offsets"]] == [500, 500, 500]
    assert body["output"]["topic"] == out
    assert body["output"]["partitions"][0]["end_offset"] >= 1_500  # data and heartbeats

    status, body = await process.request("PUT", "/pause")
    assert (status, body) == (202, {"state": "PAUSED"})
    await asyncio.sleep(0.5)
    beats = await heartbeats(process)
    await kafka_io.produce(bootstrap, events(a, 0, 2_000, 300))
    await asyncio.sleep(2.0)
    assert await records_out(process) == 1_500, "nothing written while paused"
    assert await heartbeats(process) == beats, "no heartbeat moves the watermark while paused"
    state = await process.status()
    assert state["state"] == "PAUSED"
    assert (await process.get("/healthz"))[0] == 200
    assert await lags() == [300, 0, 0], "the group's offsets show what waits"

    assert (await process.request("PUT", "/resume"))[0] == 202
    await until(lambda: _equals(records_out(process), 1_800))

    assert (await process.request("POST", "/restart"))[0] == 204
    await until(lambda: _contains(process, "restarting from the committed offsets, as an operator asked"))
    await until(lambda: _equals(_state(process), "RUNNING"))
    await kafka_io.produce(bootstrap, events(b, 0, 3_000, 100))
    await until(lambda: _equals(lags(), [0, 0, 0]))
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=1_900, timeout_s=30))
    sources = [(r.source_topic, r.source_partition, r.source_offset) for r in got]
    assert len(sources) == len(set(sources)) == 1_900, "the restart drained and committed: nothing twice"


async def _equals(value: object, expected: object) -> bool:
    return await value == expected  # type: ignore[misc]


async def _state(process: SidecarProcess) -> str:
    return str((await process.status())["state"])


async def _contains(process: SidecarProcess, text: str) -> bool:
    return text in process.log_tail(200)


async def test_with_a_token_the_acting_endpoints_need_it_and_it_is_never_shown(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path
) -> None:
    a, out = topic_name("a"), topic_name("out")
    token = "tok-" + topic_name("x")[-8:]
    await kafka_io.create_topics(bootstrap, [TopicSpec(a)])
    process = SidecarProcess(bootstrap, [a], out, log_dir=tmp_path, env={"TIMESYNC_HTTP_AUTH_TOKEN": token})
    try:
        await process.start()
        status, body = await process.request("PUT", "/pause")
        assert status == 401
        assert body["error_code"] == 401
        status, body = await process.request("PUT", "/pause", {"Authorization": "Bearer nope"})
        assert status == 403
        assert body["error_code"] == 403
        assert (await process.request("PUT", "/pause", {"Authorization": f"Bearer {token}"}))[0] == 202
        assert (await process.status())["state"] == "PAUSED"
        assert (await process.request("PUT", "/resume", {"Authorization": f"Bearer {token}"}))[0] == 202
        shown = [str(await process.status()), str(body), await process.metrics()]
        assert await process.stop() == 0
        assert all(token not in text for text in [*shown, process.log_path.read_text()])
        assert "********" in shown[0], "/status shows the key as set, masked"
    finally:
        await stop_and_show([process])
