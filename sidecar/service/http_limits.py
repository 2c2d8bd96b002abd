"""Bounds on what HTTP callers can take from the sidecar: connections, time, and broker requests.

The HTTP server shares the process's descriptors and its event loop with the Kafka clients, so
a caller must not be able to hold either:

- **Time.** A connection that has not sent a complete request's headers within
  :data:`IDLE_TIMEOUT_S`, or sits idle that long between keep-alive requests, is closed (aiohttp's
  keep-alive timer runs from the moment a connection is accepted, and partial header bytes do not
  reset it). Header lines and fields are capped in size and number.
- **Connections.** At most :data:`MAX_CONNECTIONS` at once; a new one beyond that closes the
  oldest (the one most likely to be a slow client holding its place), so probes and Prometheus
  still get through while someone holds hundreds of half-open connections.
- **Broker requests.** ``GET /offsets`` asks the broker for every partition's committed and end
  offsets; :class:`Coalesced` serves every caller within :data:`OFFSETS_MIN_INTERVAL_S` the same
  answer, and callers that arrive while it is being fetched share that one fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from aiohttp import web

#: Longest wait for a request's headers, and longest idle keep-alive, in seconds.
IDLE_TIMEOUT_S = 5.0
#: Most connections served at once (each is a descriptor the Kafka clients may need).
MAX_CONNECTIONS = 64
#: aiohttp's request-line / header-field size and header count caps (its defaults are 8190 / 128).
SERVER_LIMITS: dict[str, Any] = {"max_line_size": 4096, "max_field_size": 4096, "max_headers": 32}
#: ``GET /offsets`` asks the broker at most once per this many seconds.
OFFSETS_MIN_INTERVAL_S = 1.0

T = TypeVar("T")


def runner_options(idle_timeout_s: float = IDLE_TIMEOUT_S) -> dict[str, Any]:
    """Keyword arguments for :class:`aiohttp.web.AppRunner` that apply the time and size bounds."""
    return {"keepalive_timeout": idle_timeout_s, **SERVER_LIMITS}


class LimitedSite(web.TCPSite):
    """A :class:`aiohttp.web.TCPSite` that serves at most ``max_connections`` at once, closing
    the oldest connection to make room for a new one."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int = MAX_CONNECTIONS):
        super().__init__(runner, host, port)
        self.max_connections = max_connections

    async def start(self) -> None:
        # As TCPSite.start, with the protocol factory wrapped (aiohttp offers no connection cap).
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        limit = self.max_connections

        def factory() -> asyncio.Protocol:
            live = [c for c in server.connections if c.transport is not None and not c.transport.is_closing()]
            for oldest in live[: max(0, len(live) - limit + 1)]:
                oldest.force_close()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            factory,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port


class Coalesced(Generic[T]):
    """``fetch()``'s result, fetched at most once per ``min_interval_s`` however many call.

    Callers that arrive while a fetch runs await that same fetch; within ``min_interval_s`` of its
    end they get its result. A failed fetch is not kept: the next caller tries again."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[T]],
        min_interval_s: float = OFFSETS_MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._running: asyncio.Future[T] | None = None
        self._result: tuple[float, T] | None = None

    async def get(self) -> T:
        if self._result is not None and self._clock() - self._result[0] < self._min_interval_s:
            return self._result[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._refresh())
        return await asyncio.shield(self._running)

    async def _refresh(self) -> T:
        try:
            value = await self._fetch()
            self._result = (self._clock(), value)
            return value
        finally:
            self._running = None
