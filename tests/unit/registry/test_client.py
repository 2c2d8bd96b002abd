"""The registry client against a small in-process HTTP server speaking Confluent's API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from sidecar.registry.client import (
    RegistryClient,
    RegistryRefusedError,
    RegistrySettings,
    RegistryUnavailableError,
    SchemaNotFoundError,
)

Server = Callable[..., Any]


@pytest.fixture
async def serve() -> AsyncIterator[Server]:
    """``await serve(handler)`` → base URL of a server answering every GET with ``handler``."""
    runners: list[web.AppRunner] = []

    async def start(handler: Callable[[web.Request], Any]) -> str:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/apis/ccompat/v7/"

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_a_schema_with_references_is_fetched_once_with_the_credentials(serve: Server) -> None:
    seen: list[tuple[str, str | None]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization")))
        if request.path.endswith("/schemas/ids/7"):
            refs = [{"name": "common/money.proto", "subject": "money/v", "version": 2}]
            return web.json_response({"schema": "main", "schemaType": "PROTOBUF", "references": refs})
        if request.path.endswith("/subjects/money%2Fv/versions/2") or request.path.endswith(
            "/subjects/money/v/versions/2"
        ):
            return web.json_response({"schema": "money", "references": []})
        return web.json_response({"error_code": 40403}, status=404)

    client = RegistryClient(RegistrySettings(await serve(handler), basic_auth_user_info="u:p w"))
    for _ in range(2):
        schema = await client.schema(7)
        assert (schema.text, schema.schema_type, schema.references) == (
            "main",
            "PROTOBUF",
            {"common/money.proto": "money"},
        )
    assert len(seen) == 2  # the schema and its reference, once
    assert {auth for _, auth in seen} == {"Basic dTpwIHc="}


async def test_an_unknown_id_is_not_found_and_remembered(serve: Server) -> None:
    calls = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({"message": "Schema 9 not found.", "error_code": 40403}, status=404)

    client = RegistryClient(RegistrySettings(await serve(handler), bearer_auth_token="tok"))
    for _ in range(2):
        with pytest.raises(SchemaNotFoundError, match=r"does not know schema id 9 \(404\)"):
            await client.schema(9)
    assert calls == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_are_refused_not_retriable(serve: Server, status: int) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, text="no")

    client = RegistryClient(RegistrySettings(await serve(handler), bearer_auth_token="secret-token"))
    with pytest.raises(RegistryRefusedError, match=f"refused the credentials \\({status}\\)") as caught:
        await client.schema(1)
    assert "secret-token" not in str(caught.value)


async def test_a_5xx_and_a_connection_refused_are_unavailable_and_asked_again(serve: Server) -> None:
    answers = [web.Response(status=503, text="starting"), web.json_response({"schema": "{}"})]

    async def handler(request: web.Request) -> web.Response:
        return answers.pop(0)

    client = RegistryClient(RegistrySettings(await serve(handler)))
    with pytest.raises(RegistryUnavailableError, match="answered 503"):
        await client.schema(1)
    assert (await client.schema(1)).text == "{}"

    closed = RegistryClient(RegistrySettings("http://127.0.0.1:9/apis/ccompat/v7"))
    with pytest.raises(RegistryUnavailableError, match="ClientConnectorError"):
        await closed.schema(1)
