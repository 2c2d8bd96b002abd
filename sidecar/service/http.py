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

The acting endpoints change what the sidecar does, so they answer only to a caller on loopback
(a shell in the pod, ``kubectl exec``/``port-forward``) unless ``http.auth.token`` is set; then
every call needs ``Authorization: Bearer <token>``, compared in constant time. A refusal is a
401 (no or malformed credentials) or 403 (wrong token, or not on loopback) with a JSON reason in
Kafka Connect's error shape (``{"error_code": ..., "message": ...}``). The token is never logged
or shown (the server keeps no access log, ``/status`` masks it).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sidecar.service.supervisor import Supervisor

_CODES = {"healthy": 200, "degraded": 200, "starting": 503, "unhealthy": 500}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


def _on_loopback(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def guarded(token: str, handler: Handler) -> Handler:
    """``handler`` behind the acting endpoints' rule (see the module docstring)."""
    expected = f"Bearer {token}".encode()

    async def check(request: web.Request) -> web.StreamResponse:
        if not token:
            if not _on_loopback(request):
                return _error(403, "this endpoint answers only on loopback unless http.auth.token is set")
            return await handler(request)
        given = request.headers.get("Authorization", "")
        if not given.startswith("Bearer "):
            return _error(401, "send the token as 'Authorization: Bearer <token>' (http.auth.token is set)")
        if not hmac.compare_digest(given.encode(), expected):
            return _error(403, "the bearer token does not match http.auth.token")
        return await handler(request)

    return check


def make_app(sidecar: Supervisor) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        state, message = sidecar.health.status()
        return web.json_response({"status": state, "message": message}, status=_CODES[state])

    async def metrics(_: web.Request) -> web.Response:
        body = sidecar.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.json_response(sidecar.status())

    async def offsets(_: web.Request) -> web.Response:
        body = await sidecar.offsets()
        if body is None:
            return _error(503, "the sidecar is not connected to Kafka yet: try again shortly")
        return web.json_response(body)

    async def pause(_: web.Request) -> web.Response:
        sidecar.pause()
        return web.json_response({"state": sidecar.state_name()}, status=202)

    async def resume(_: web.Request) -> web.Response:
        sidecar.resume()
        return web.json_response({"state": sidecar.state_name()}, status=202)

    async def restart(_: web.Request) -> web.Response:
        if not sidecar.request_restart():
            return _error(409, f"cannot restart now: the sidecar is {sidecar.state_name()}")
        return web.Response(status=204)

    token = sidecar.config.http_auth_token.get_secret_value()
    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    app.router.add_get("/offsets", offsets)
    app.router.add_put("/pause", guarded(token, pause))
    app.router.add_put("/resume", guarded(token, resume))
    app.router.add_post("/restart", guarded(token, restart))
    return app


async def start_http(sidecar: Supervisor, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(make_app(sidecar), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
