"""``/healthz``, ``/metrics`` and ``/status`` on a small aiohttp server.

``/status`` answers "why is my join stalled?": per task its readiness, watermark, stream time,
counts, and ``blocked_by`` — each partition holding the task back and why (lag unknown, lag N on
the broker, idling until T, paused).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sidecar.service.supervisor import Supervisor

_CODES = {"healthy": 200, "degraded": 200, "starting": 503, "unhealthy": 500}


def make_app(sidecar: Supervisor) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        state, message = sidecar.health.status()
        return web.json_response({"status": state, "message": message}, status=_CODES[state])

    async def metrics(_: web.Request) -> web.Response:
        body = sidecar.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.json_response(sidecar.status())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    return app


async def start_http(sidecar: Supervisor, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(make_app(sidecar), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
