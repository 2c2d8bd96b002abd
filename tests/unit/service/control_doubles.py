"""Test doubles for the HTTP control plane: a recorder standing in for the supervisor behind the
endpoints, a call through a real aiohttp test server, and a transport that names the caller's
address for requests built without a socket. Shared by test_control and test_http_guard."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from sidecar.service.http import make_app

from .harness import config


class _Health:
    def status(self) -> tuple[str, str]:
        return "healthy", "running"


class Recorder:
    """Stands in for the supervisor behind the endpoints."""

    health = _Health()

    def __init__(self, token: str = "", host: str = "127.0.0.1") -> None:
        self.calls: list[str] = []
        keys: dict[str, object] = {"http_host": host, "http_port": 0}
        if token:
            keys["http_auth_token"] = token
        self.config = config(**keys)
        self.offsets_asked = 0

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")

    def request_restart(self) -> bool:
        self.calls.append("restart")
        return True

    def state_name(self) -> str:
        return "RUNNING"

    async def offsets(self) -> dict[str, Any]:
        self.offsets_asked += 1
        await asyncio.sleep(0)
        return {"group": "g", "offsets": []}


async def call(recorder: Recorder, method: str, path: str, **headers: str) -> tuple[int, Any]:
    async with TestClient(TestServer(make_app(recorder), host="127.0.0.1")) as client:  # type: ignore[arg-type]
        response = await client.request(method, path, headers=headers)
        body = await response.json() if response.content_type == "application/json" else None
        return response.status, body


class Transport:
    def __init__(self, host: str) -> None:
        self.host = host

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.host, 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False
