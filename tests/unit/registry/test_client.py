"""The registry client against a small in-process HTTP server speaking Confluent's API."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import sidecar
from sidecar.core import parse_extractor
from sidecar.core.records import Record
from sidecar.formats.extractor import INVALID, SchemaTimestamp
from sidecar.formats.framing import frame
from sidecar.registry.answers import MAX_ANSWER_BYTES, MAX_RETRY_AFTER_S, retry_after
from sidecar.registry.client import (
    MAX_CONCURRENT_REQUESTS,
    RegistryClient,
    RegistryRefusedError,
    RegistrySettings,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SchemaUnreadableError,
)
from sidecar.registry.resolver import FIRST_BACKOFF_S, SchemaResolver

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


# -- issue 32, item 4: one kept-alive session, bounded in every way ------------------------------


class Counting:
    """A registry that knows no id (404) and counts connections and requests in flight."""

    def __init__(self, delay_s: float = 0.005) -> None:
        self.delay_s = delay_s
        self.peers: set[object] = set()
        self.in_flight = 0
        self.most_in_flight = 0
        self.requests = 0

    async def handler(self, request: web.Request) -> web.Response:
        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        self.requests += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        return web.json_response({"error_code": 40403, "message": "Schema not found"}, status=404)


async def test_a_batch_of_unknown_ids_is_asked_at_once_over_a_few_kept_alive_connections(
    serve: Server,
) -> None:
    """2,000 unknown ids were 2,000 requests one after another, each on a new connection."""
    registry = Counting()
    client = RegistryClient(RegistrySettings(await serve(registry.handler)))
    resolver = SchemaResolver(client, lambda _: None, _never_stopped, max_new=10_000)
    extractor = parse_extractor("avro:ts")
    assert isinstance(extractor, SchemaTimestamp)
    values = [frame(sid, b"") for sid in range(1, 301)]
    try:
        assert await resolver.resolve(extractor, values)
    finally:
        await client.close()
    assert registry.requests == 300
    assert 1 < registry.most_in_flight <= MAX_CONCURRENT_REQUESTS
    assert len(registry.peers) <= MAX_CONCURRENT_REQUESTS, "connections are kept alive and reused"
    assert extractor.extract_all([Record("t", 0, 0, 1, value=values[0])]) == [INVALID]


async def test_a_404_is_kept_as_a_reason_for_its_ttl_then_asked_again(serve: Server) -> None:
    """An id read before it was registered must not stay unknown until a restart."""
    registered = False

    async def handler(request: web.Request) -> web.Response:
        if registered:
            return web.json_response({"schema": '"long"'})
        return web.json_response({"error_code": 40403}, status=404)

    now = [1000.0]
    client = RegistryClient(RegistrySettings(await serve(handler)), missing_ttl_s=10, clock=lambda: now[0])
    try:
        with pytest.raises(SchemaNotFoundError):
            await client.schema(5)
        registered = True
        now[0] += 9.9
        with pytest.raises(SchemaNotFoundError, match=r"does not know schema id 5 \(404\)"):
            await client.schema(5)  # still believed
        assert client.requests == 1
        now[0] += 0.2
        assert (await client.schema(5)).text == '"long"'
    finally:
        await client.close()


async def test_cached_404s_hold_a_reason_not_an_exception_and_its_traceback(serve: Server) -> None:
    """Each cached 404 kept its exception and traceback: about 11 KB per id, without bound."""
    registry = Counting(delay_s=0)
    client = RegistryClient(RegistrySettings(await serve(registry.handler)))
    resolver = SchemaResolver(client, lambda _: None, _never_stopped, max_new=10_000)
    extractor = parse_extractor("avro:ts")
    assert isinstance(extractor, SchemaTimestamp)
    try:
        # Warm up: the session, its connections and buffers, the dicts' first sizes.
        assert await resolver.resolve(extractor, [frame(sid, b"") for sid in range(1, 301)])
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        assert await resolver.resolve(extractor, [frame(sid, b"") for sid in range(301, 601)])
        await asyncio.sleep(0.05)  # the finished lookups' tasks leave the loop
        gc.collect()
        # What the sidecar's code holds: the HTTP libraries' own bounded caches (yarl's URLs) aside.
        ours = [tracemalloc.Filter(True, str(Path(sidecar.__file__).parent / "*"))]
        after = tracemalloc.take_snapshot().filter_traces(ours)
        grown = sum(s.size_diff for s in after.compare_to(before.filter_traces(ours), "filename"))
    finally:
        tracemalloc.stop()
        await client.close()
    assert len(extractor.schemas) == 600
    assert grown / 300 < 1000, f"{grown / 300:.0f} bytes per cached 404"


@pytest.mark.parametrize(
    ("header", "waited"),
    [("3", 3.0), ("86400", MAX_RETRY_AFTER_S), ("soon", FIRST_BACKOFF_S), (None, FIRST_BACKOFF_S)],
)
async def test_a_429_is_waited_out_as_long_as_its_retry_after_says_within_a_bound(
    serve: Server, header: str | None, waited: float
) -> None:
    answers = [
        web.json_response({"error_code": 429}, status=429, headers={"Retry-After": header} if header else {})
    ]

    async def handler(request: web.Request) -> web.Response:
        return answers.pop(0) if answers else web.json_response({"schema": '"long"'})

    client = RegistryClient(RegistrySettings(await serve(handler)))
    slept: list[float] = []
    reasons: list[str | None] = []

    async def stopped(seconds: float) -> bool:
        slept.append(seconds)
        return False

    extractor = parse_extractor("avro:ts")
    assert isinstance(extractor, SchemaTimestamp)
    try:
        assert await SchemaResolver(client, reasons.append, stopped).resolve(extractor, [frame(1, b"\x02")])
    finally:
        await client.close()
    assert slept == [waited]
    assert "is rate-limiting requests (429)" in str(reasons[0])
    assert reasons[-1] is None


async def test_a_retry_after_date_is_read_relative_to_now() -> None:
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after(date, now=1_000_000) == pytest.approx(30)
    assert retry_after(email.utils.formatdate(999_000, usegmt=True), now=1_000_000) == 0


async def test_a_redirect_is_not_followed_and_the_credentials_never_leave_the_configured_origin(
    serve: Server,
) -> None:
    elsewhere: list[str | None] = []

    async def other(request: web.Request) -> web.Response:
        elsewhere.append(request.headers.get("Authorization"))
        return web.json_response({"schema": '"long"'})

    target = await serve(other)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{target.replace('http://', 'http://u:p@')}schemas/ids/1?k=v")

    client = RegistryClient(RegistrySettings(await serve(redirect), bearer_auth_token="tok-123456"))
    try:
        with pytest.raises(RegistryUnavailableError) as caught:
            await client.schema(1)
    finally:
        await client.close()
    assert elsewhere == []
    message = str(caught.value)
    assert "redirects are not followed" in message
    assert "(302)" in message
    assert "***@127.0.0.1" in message
    assert "u:p" not in message
    assert "k=v" not in message


@pytest.mark.parametrize("chunked", [False, True])
async def test_an_answer_is_read_up_to_its_bound_and_a_larger_schema_is_unreadable(
    serve: Server, chunked: bool
) -> None:
    big = b'{"schema": "' + b"x" * (MAX_ANSWER_BYTES + 10) + b'"}'

    async def handler(request: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=big, content_type="application/json")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(big), 1 << 20):
            await response.write(big[start : start + (1 << 20)])
        await response.write_eof()
        return response

    client = RegistryClient(RegistrySettings(await serve(handler)))
    try:
        with pytest.raises(SchemaUnreadableError, match="larger than"):
            await client.schema(1)
    finally:
        await client.close()


async def test_closing_ends_the_session_never_raises_and_later_asks_are_unavailable(serve: Server) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"schema": '"long"'})

    client = RegistryClient(RegistrySettings(await serve(handler)))
    await client.schema(1)
    session = client._session
    assert session is not None
    assert not session.closed
    await client.close()
    assert session.closed
    await client.close()  # twice: nothing to do, nothing raised
    with pytest.raises(RegistryUnavailableError, match="closed"):
        await client.schema(2)


async def _never_stopped(seconds: float) -> bool:
    return False


@pytest.mark.parametrize(
    "body",
    [
        b"<html>a proxy's page</html>",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"schema": 5}',
        b'{"schema": "x", "schemaType": ["AVRO"]}',
        b'{"schema": "x", "references": [{"name": 1}]}',
        b'["schema"]',
        b"\xff\xfe\x00",
    ],
)
async def test_a_garbled_answer_through_the_client_is_unavailable_never_another_exception(
    serve: Server, body: bytes
) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    client = RegistryClient(RegistrySettings(await serve(handler)))
    try:
        with pytest.raises(RegistryUnavailableError):
            await client.schema(1)
    finally:
        await client.close()


async def test_a_body_cut_short_is_unavailable(serve: Server) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "1000", "Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"schema": "')
        assert request.transport is not None
        request.transport.close()
        return response

    client = RegistryClient(RegistrySettings(await serve(handler)))
    try:
        with pytest.raises(RegistryUnavailableError, match=r"ClientPayloadError|ServerDisconnected"):
            await client.schema(1)
    finally:
        await client.close()


async def test_references_are_followed_through_a_cycle_once_and_bounded_in_number(serve: Server) -> None:
    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/schemas/ids/1"):
            return web.json_response(
                {"schema": "m", "references": [{"name": "a", "subject": "a", "version": 1}]}
            )
        if request.path.endswith("/subjects/a/versions/1"):  # a → b → a
            return web.json_response(
                {"schema": "A", "references": [{"name": "b", "subject": "b", "version": 1}]}
            )
        if request.path.endswith("/subjects/b/versions/1"):
            return web.json_response(
                {"schema": "B", "references": [{"name": "a", "subject": "a", "version": 1}]}
            )
        if request.path.endswith("/schemas/ids/2"):  # a chain longer than the bound
            return web.json_response(
                {"schema": "m", "references": [{"name": "c0", "subject": "c0", "version": 1}]}
            )
        n = int(request.path.split("/subjects/c")[1].split("/")[0])
        return web.json_response(
            {"schema": "C", "references": [{"name": f"c{n + 1}", "subject": f"c{n + 1}", "version": 1}]}
        )

    client = RegistryClient(RegistrySettings(await serve(handler)))
    try:
        assert (await client.schema(1)).references == {"a": "A", "b": "B"}
        with pytest.raises(SchemaUnreadableError, match="more than 256 references"):
            await client.schema(2)
    finally:
        await client.close()
