"""The HTTP server: health, metrics and status to look at; pause, resume, restart and offsets to act.

Reading (open to anyone who can reach the port, as ``/metrics`` must be for Prometheus):

* ``GET /healthz`` — 200 healthy or degraded, 503 starting, 500 unhealthy, with a message.
* ``GET /metrics`` — Prometheus.
* ``GET /status`` — "why is my join stalled?": per task readiness, watermark, stream time,
  ``blocked_by``; the output side; the run state in Kafka Connect's words.
* ``GET /offsets`` — committed offset, end offset and lag per input partition; the output's end.

Acting, with Kafka Connect's verbs and status codes:

* ``PUT /pause`` (202), ``PUT /resume`` (202), ``POST /restart`` (204; 409 when the sidecar is
  not running).

The acting endpoints change what the sidecar does: who may call them is
:mod:`sidecar.service.http_guard` (a bearer token when ``http.auth.token`` is set; otherwise a
loopback caller naming a loopback ``Host``, on a server bound to loopback; never a web page).
Each call that acts is logged with the caller's address (never the token). The token is never
logged or shown (the server keeps no access log, ``/status`` masks it).

What a caller can take is bounded by :mod:`sidecar.service.http_limits`: slow or idle
connections are closed, connections are capped, and ``/offsets`` asks the broker at most once a
second whoever calls.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sidecar.config import is_loopback_host
from sidecar.service.http_guard import error as _error
from sidecar.service.http_guard import guarded
from sidecar.service.http_limits import (
    IDLE_TIMEOUT_S,
    MAX_CONNECTIONS,
    Coalesced,
    LimitedSite,
    runner_options,
)
from sidecar.service.supervisor import Supervisor

__all__ = ["guarded", "make_app", "start_http"]

log = logging.getLogger("timesync.http")

_CODES = {"healthy": 200, "degraded": 200, "starting": 503, "unhealthy": 500}


def _acted(request: web.Request, what: str) -> None:
    log.info("%s (%s %s from %s)", what, request.method, request.path, request.remote or "an unknown address")


def make_app(sidecar: Supervisor, host: str | None = None) -> web.Application:
    """The routes. ``host``: where the server is bound (``None``: the config's ``http.host``);
    without a token, only a server bound to loopback lets loopback callers act."""

    async def healthz(_: web.Request) -> web.Response:
        state, message = sidecar.health.status()
        return web.json_response({"status": state, "message": message}, status=_CODES[state])

    async def metrics(_: web.Request) -> web.Response:
        body = sidecar.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.json_response(sidecar.status())

    async def read_offsets() -> dict[str, Any] | None:
        return await sidecar.offsets()

    offsets_once = Coalesced(read_offsets)

    async def offsets(_: web.Request) -> web.Response:
        body = await offsets_once.get()
        if body is None:
            return _error(503, "the sidecar is not connected to Kafka yet: try again shortly")
        return web.json_response(body)

    async def pause(request: web.Request) -> web.Response:
        _acted(request, "pause requested")
        sidecar.pause()
        return web.json_response({"state": sidecar.state_name()}, status=202)

    async def resume(request: web.Request) -> web.Response:
        _acted(request, "resume requested")
        sidecar.resume()
        return web.json_response({"state": sidecar.state_name()}, status=202)

    async def restart(request: web.Request) -> web.Response:
        _acted(request, "restart requested")
        if not sidecar.request_restart():
            return _error(409, f"cannot restart now: the sidecar is {sidecar.state_name()}")
        return web.Response(status=204)

    token = sidecar.config.http_auth_token.get_secret_value()
    local = is_loopback_host(sidecar.config.http_host if host is None else host)
    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    app.router.add_get("/offsets", offsets)
    app.router.add_put("/pause", guarded(token, pause, local))
    app.router.add_put("/resume", guarded(token, resume, local))
    app.router.add_post("/restart", guarded(token, restart, local))
    return app


async def start_http(
    sidecar: Supervisor,
    host: str,
    port: int,
    *,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
) -> web.AppRunner:
    """Serve ``make_app(sidecar)`` on ``host:port`` within :mod:`http_limits`' bounds (``port``
    0: any free port, see ``runner.addresses``)."""
    runner = web.AppRunner(make_app(sidecar, host), access_log=None, **runner_options(idle_timeout_s))
    await runner.setup()
    await LimitedSite(runner, host, port, max_connections).start()
    return runner
