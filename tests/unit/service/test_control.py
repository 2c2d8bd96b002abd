"""The control plane without a broker: pause, resume, restart and offsets on the in-memory cluster,
and who may call the acting endpoints."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from sidecar.service.http import guarded, make_app
from sidecar.service.supervisor import Supervisor
from tests.fakes.kafka import FakeCluster

from .control_doubles import Recorder, Transport, call
from .harness import OUT, config, sidecar, sources


async def until(condition: Any, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


def heartbeats(cluster: FakeCluster) -> int:
    return sum(1 for r in cluster.read(OUT) if r.source() is None)


@pytest.fixture
def cluster() -> FakeCluster:
    c = FakeCluster()
    c.create_topic("a", 2)
    c.create_topic("b", 1)
    for p in range(2):
        c.produce("a", p, range(1_000, 1_020))
    c.produce("b", 0, range(1_000, 1_020))
    return c


async def test_pause_stops_fetching_writing_and_heartbeats_and_resume_goes_on(cluster: FakeCluster) -> None:
    s = sidecar(cluster, config(watermark_heartbeat_ms=30, watermark_policy="bounded-delay"))
    running = asyncio.create_task(s.run())
    try:
        await until(lambda: len(sources(cluster.read(OUT))) == 60)
        s.pause()
        await asyncio.sleep(0.05)
        assert s.state_name() == "PAUSED"
        consumer = s.pipeline.consumer
        assert consumer._paused == consumer.assignment(), "nothing is fetched"
        before, beats = len(cluster.read(OUT)), heartbeats(cluster)
        cluster.produce("a", 0, range(2_000, 2_010))
        await asyncio.sleep(0.2)
        assert len(cluster.read(OUT)) == before, "no record and no heartbeat while paused"
        assert heartbeats(cluster) == beats
        status = s.status()
        assert status["state"] == "PAUSED"
        assert status["role"].startswith("paused by an operator")
        assert status["paused_since"] is not None
        assert s.metrics.registry.get_sample_value("timesync_operator_paused") == 1, "on the metrics too"

        s.resume()
        await until(lambda: len(sources(cluster.read(OUT))) == 70)
        assert s.state_name() == "RUNNING"
        assert s.metrics.registry.get_sample_value("timesync_operator_paused") == 0
        assert consumer._paused == set()
    finally:
        s.request_stop()
        await running


async def test_a_pause_holds_through_a_restart(cluster: FakeCluster) -> None:
    s = sidecar(cluster, config())
    running = asyncio.create_task(s.run())
    try:
        await until(lambda: len(sources(cluster.read(OUT))) == 60)
        s.pause()
        assert s.request_restart()
        await until(lambda: s.restarts == 1 and s.pipeline.started)
        cluster.produce("b", 0, [5_000])
        await asyncio.sleep(0.15)
        assert len(sources(cluster.read(OUT))) == 60
        s.resume()
        await until(lambda: len(sources(cluster.read(OUT))) == 61)
    finally:
        s.request_stop()
        await running


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_an_operators_restart_drains_commits_and_starts_again_repeating_nothing(
    cluster: FakeCluster, guarantee: str, caplog: pytest.LogCaptureFixture
) -> None:
    committed = guarantee == "exactly_once_v2"
    s = sidecar(cluster, config(processing_guarantee=guarantee))
    running = asyncio.create_task(s.run())
    try:
        await until(lambda: len(sources(cluster.read(OUT, committed))) == 60)
        with caplog.at_level(logging.INFO, "timesync"):
            assert s.request_restart()
            await until(lambda: s.restarts == 1 and s.pipeline.started)
        assert "restarting from the committed offsets, as an operator asked" in caplog.text
        cluster.produce("a", 1, [9_000])
        await until(lambda: len(sources(cluster.read(OUT, committed))) == 61)
        assert len(set(sources(cluster.read(OUT, committed)))) == 61, "nothing written twice"
    finally:
        s.request_stop()
        await running


async def test_offsets_name_each_input_partition_with_its_committed_offset_end_and_lag(
    cluster: FakeCluster,
) -> None:
    s = sidecar(cluster, config())
    running = asyncio.create_task(s.run())
    try:
        assert await s.offsets() is None or s.pipeline.started
        await until(lambda: cluster.committed("timesync-out") == {("a", 0): 20, ("a", 1): 20, ("b", 0): 20})
        cluster.produce("a", 0, [])  # nothing new: lag 0 everywhere
        body = await s.offsets()
        assert body is not None
        assert body["group"] == "timesync-out"
        assert body["offsets"][0] == {
            "partition": {"kafka_topic": "a", "kafka_partition": 0},
            "offset": {"kafka_offset": 20},
            "end_offset": 20,
            "lag": 0,
            "task": "0",
        }
        assert [
            (r["partition"]["kafka_topic"], r["partition"]["kafka_partition"]) for r in body["offsets"]
        ] == [
            ("a", 0),
            ("a", 1),
            ("b", 0),
        ]
        assert body["output"] == {"topic": OUT, "partitions": [{"partition": 0, "end_offset": 60}]}
    finally:
        s.request_stop()
        await running


async def test_without_a_token_the_acting_endpoints_answer_on_loopback() -> None:
    r = Recorder()
    assert (await call(r, "PUT", "/pause"))[0] == 202
    assert (await call(r, "PUT", "/resume"))[0] == 202
    assert (await call(r, "POST", "/restart"))[0] == 204
    assert r.calls == ["pause", "resume", "restart"]


async def test_without_a_token_a_caller_off_loopback_is_refused_with_403() -> None:
    called = []

    async def handler(_: web.Request) -> web.Response:
        called.append(True)
        return web.Response(status=202)

    remote = make_mocked_request("PUT", "/pause", transport=Transport("10.1.2.3"))
    response = await guarded("", handler)(remote)
    assert response.status == 403
    assert called == []
    assert b"only on loopback unless http.auth.token is set" in response.body  # type: ignore[attr-defined]
    local = make_mocked_request("PUT", "/pause", headers={"Host": "[::1]:8080"}, transport=Transport("::1"))
    assert (await guarded("", handler)(local)).status == 202


async def test_with_a_token_every_call_needs_it_and_a_wrong_one_is_403() -> None:
    r = Recorder(token="s3cret-token")
    status, body = await call(r, "PUT", "/pause")
    assert status == 401
    assert body == {"error_code": 401, "message": body["message"]}
    assert "Authorization: Bearer" in body["message"]
    status, body = await call(r, "PUT", "/pause", Authorization="Bearer wrong")
    assert (status, body["error_code"]) == (403, 403)
    assert "s3cret" not in body["message"]
    assert (await call(r, "PUT", "/pause", Authorization="Bearer s3cret-token"))[0] == 202
    assert r.calls == ["pause"]


async def test_reading_endpoints_need_no_token(cluster: FakeCluster) -> None:
    s: Supervisor = sidecar(cluster, config(http_auth_token="t0ken"))
    app = make_app(s)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for path in ("/healthz", "/metrics", "/status"):
            response = await client.get(path)
            assert response.status in (200, 503), path
            assert "t0ken" not in await response.text()
