"""The registry session lives for one start of the pipeline: every stop and restart closes it.

The sidecar runs over the in-memory cluster (``tests/fakes/kafka.py``) against a small HTTP
registry; its records name schema ids the registry does not know, so each start asks it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web
from aiokafka import TopicPartition

from sidecar.formats.framing import frame
from sidecar.registry import batches
from sidecar.registry.client import RegistryClient
from tests.fakes.kafka import FakeCluster, Stored
from tests.unit.service.harness import config, sidecar


def append(cluster: FakeCluster, ids: range) -> None:
    log = cluster.logs[TopicPartition("a", 0)]
    for sid in ids:
        log.records.append(Stored(len(log.records), 1_000 + sid, None, frame(sid, b"\x02"), []))
    cluster.data.set()


async def until(done: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.005)


async def test_every_start_closes_its_registry_session_on_restart_and_on_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    async def unknown(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.json_response({"error_code": 40403}, status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", unknown)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    clients: list[RegistryClient] = []

    class Recorded(RegistryClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            clients.append(self)

    monkeypatch.setattr(batches, "RegistryClient", Recorded)
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    append(cluster, range(1, 11))
    cfg = config(
        ("a",),
        timestamp_extractor="avro:ts",
        schema_registry_url=f"http://127.0.0.1:{runner.addresses[0][1]}/apis/ccompat/v7",
        timestamp_invalid="skip",
        max_task_idle_ms=-1,
    )
    supervisor = sidecar(cluster, cfg)
    running = asyncio.create_task(supervisor.run())
    try:
        await until(lambda: len(asked) >= 10)
        assert supervisor.request_restart()
        await until(lambda: supervisor.restarts >= 1 and len(clients) >= 2)
        append(cluster, range(11, 21))
        await until(lambda: len(asked) >= 20)
    finally:
        supervisor.request_stop()
        await asyncio.wait_for(running, 10)
    await until(lambda: not runner.server.connections if runner.server else True, 5)
    await runner.cleanup()
    assert len(clients) == 2
    assert all(c._closed and c._session is None for c in clients), "each start's session was closed"
