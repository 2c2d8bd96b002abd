"""What HTTP callers can take: slow and idle connections are closed, connections are capped (a new
one closes the oldest), and ``/offsets`` asks the broker at most once a second."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from sidecar.service.http import start_http
from sidecar.service.http_limits import Coalesced
from tests.fakes.kafka import FakeCluster

from .harness import OUT, config, sidecar, sources
from .test_http_guard import Recorder

HELD = 300


async def healthz(port: int) -> tuple[int, float]:
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=2)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as r,
    ):
        return r.status, time.monotonic() - started


async def test_hundreds_of_half_open_connections_neither_hold_descriptors_nor_stop_the_server() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.produce("a", 0, range(1_000, 1_020))
    s = sidecar(cluster, config(["a"]))
    running = asyncio.create_task(s.run())
    runner = await start_http(s, "127.0.0.1", 0, idle_timeout_s=0.5, max_connections=32)
    port = runner.addresses[0][1]
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(HELD):  # a slowloris: the request line and one header, never the end
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append((reader, writer))
        await asyncio.sleep(0)  # let the server accept what is queued
        server = runner.server
        assert server is not None
        assert len(server.connections) <= 33, "the cap closes the oldest connections"

        status, took = await healthz(port)
        assert status == 200
        assert took < 1.0, "the event loop stays responsive"
        cluster.produce("a", 0, range(2_000, 2_010))
        async with asyncio.timeout(5):
            while len(sources(cluster.read(OUT))) < 30:
                await asyncio.sleep(0.01)  # Kafka keeps flowing meanwhile

        # The newest held connections are still open; the time bound closes them too.
        reader, _ = held[-1]
        async with asyncio.timeout(3):
            assert await reader.read() == b"", "closed by the server: headers not sent in time"
        assert len([c for c in server.connections if c.transport is not None]) == 0
    finally:
        for _, writer in held:
            writer.close()
        await runner.cleanup()
        s.request_stop()
        await running


async def test_offsets_asks_the_broker_once_however_many_call() -> None:
    r = Recorder()
    runner = await start_http(r, "127.0.0.1", 0)  # type: ignore[arg-type]
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:

            async def get() -> int:
                async with session.get(f"http://127.0.0.1:{port}/offsets") as response:
                    await response.read()
                    return response.status

            assert await asyncio.gather(*(get() for _ in range(50))) == [200] * 50
            assert await get() == 200
        assert r.offsets_asked == 1
    finally:
        await runner.cleanup()


async def test_coalesced_fetches_again_after_the_interval_and_after_a_failure() -> None:
    now = [0.0]
    results: list[object] = [RuntimeError("broker away"), 1, 2]

    async def fetch() -> int:
        result = results.pop(0)
        if isinstance(result, Exception):
            raise result
        return int(result)  # type: ignore[call-overload]

    once = Coalesced(fetch, min_interval_s=1.0, clock=lambda: now[0])
    with pytest.raises(RuntimeError):
        await once.get()
    assert await once.get() == 1, "a failure is not kept"
    now[0] = 0.9
    assert await once.get() == 1
    now[0] = 1.0
    assert await once.get() == 2
