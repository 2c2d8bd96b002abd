"""The registry client's bounds through the real pipeline, the real broker and a real registry
(Apicurio; issue 32, item 4), at small sizes.

- An id a record names before it is registered is unknown for ``schema.registry.missing.id.ttl.ms``
  only: once registered, its later records are read (a producer cannot poison the next id until
  a restart). "Not registered yet" is a registered id that a proxy hides (:class:`HidingProxy`).
- One fetch naming more new ids than ``schema.registry.max.new.ids.per.fetch`` dead-letters the
  records of the ids past it, each with a reason that says so; the ordinary records around them
  are merged as ever.

The registry away for longer than ``schema.registry.unhealthy.after.ms`` is in
``test_schema_registry.py`` (its proxy).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from timesync_wire.framing import frame
from timesync_wire.registry.protocol import schema_by_id

from .conftest import StartSidecar
from .test_schema_registry import DAY, avro_body, avro_schema, order, produce, register

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]


def unique_schema() -> str:
    """An Avro schema no other test registers (Apicurio gives equal texts the same id)."""
    schema = avro_schema(1)
    schema["doc"] = uuid.uuid4().hex
    return json.dumps(schema)


class HidingProxy:
    """An HTTP proxy in front of the registry that answers for the ids in :attr:`hidden` what the
    registry answers for an id it does not hold (its own 404), and passes everything else.

    The registry's ids are global and the suite's workers share it, so "the id the next schema
    will get" cannot be predicted here (another worker may register first); a registered id the
    proxy hides until told otherwise is, to the sidecar, an id registered after it first asked.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream.rstrip("/"))
        self.hidden: set[int] = set()
        self.asked: list[int] = []
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.url = ""

    async def __aenter__(self) -> HidingProxy:
        self._client = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}{self.upstream.path}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        assert self._client is not None
        await self._runner.cleanup()
        await self._client.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._client is not None
        path = request.path_qs
        found = re.search(r"/schemas/ids/(\d+)", path)
        if found:
            schema_id = int(found[1])
            self.asked.append(schema_id)
            if schema_id in self.hidden:  # an id no registry holds, for the registry's own 404
                path = path.replace(found[0], schema_by_id(2_000_000_000 + schema_id))
        async with self._client.request(
            request.method,
            f"{self.upstream.scheme}://{self.upstream.netloc}{path}",
            data=await request.read(),
            headers={k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length"}},
        ) as answer:
            return web.Response(
                status=answer.status, body=await answer.read(), content_type=answer.content_type
            )


async def test_an_id_read_before_it_is_registered_is_read_once_registered_after_the_ttl(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("orders"), topic_name("out"), topic_name("dlq")
    async with HidingProxy(schema_registry) as registry:
        sid = await register(schema_registry, f"{src}-value", unique_schema())
        registry.hidden.add(sid)  # not registered yet, as far as the sidecar can tell
        await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
        now = int(time.time() * 1000)
        early = frame(sid, avro_body(avro_schema(1), order(1, now - DAY)))
        await produce(bootstrap, src, [(0, early)], create_time=now)
        await sidecar(
            [src],
            out,
            timestamp_extractor="avro:meta.ts",
            schema_registry_url=registry.url,
            schema_registry_missing_id_ttl_ms=1000,
            errors_tolerance="all",
            errors_deadletterqueue_topic_name=dlq,
            max_task_idle_ms=-1,
            watermark_heartbeat_ms=0,
        )
        dead = await kafka_io.read_topics(bootstrap, [dlq], expected=1, timeout_s=60)
        assert dict(dead[0].headers)["__connect.errors.exception.message"].decode() == (
            f"schema id {sid}, field meta.ts: the registry does not know schema id {sid} (404)"
        )

        registry.hidden.clear()  # registered now
        await asyncio.sleep(1.2)  # the 404 is believed for 1 s
        later = [(0, frame(sid, avro_body(avro_schema(1), order(1, now - DAY + i)))) for i in range(1, 21)]
        await produce(bootstrap, src, later, create_time=now)
        written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=20, timeout_s=60))
        assert [o.value for o in written] == [v for _, v in later]
        assert len(await kafka_io.read_topics(bootstrap, [dlq], timeout_s=3)) == 1
        assert registry.asked.count(sid) >= 2, "asked before the ttl ran out and again after"


async def test_new_ids_past_the_per_fetch_budget_are_dead_lettered_saying_so(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("orders"), topic_name("out"), topic_name("dlq")
    sid = await register(schema_registry, f"{src}-value", json.dumps(avro_schema(1)))
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    rows: list[tuple[int, bytes]] = []
    hostile: list[bytes] = []
    for i in range(40):
        rows.append((0, frame(sid, avro_body(avro_schema(1), order(1, now - DAY + i)))))
        hostile.append(frame(2_000_000_000 + i, b"\x00"))  # 40 distinct ids nobody registered
        rows.append((0, hostile[-1]))
    await produce(bootstrap, src, rows, create_time=now)  # all there before the first fetch
    process = await sidecar(
        [src],
        out,
        timestamp_extractor="avro:meta.ts",
        schema_registry_url=schema_registry,
        schema_registry_max_new_ids_per_fetch=5,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        errors_deadletterqueue_max_ratio=1.0,
        max_task_idle_ms=-1,
        watermark_heartbeat_ms=0,
    )
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=40, timeout_s=60))
    assert [o.value for o in written] == [v for _, v in rows if v not in hostile]
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=40, timeout_s=30)
    assert sorted(d.value for d in dead) == sorted(hostile)
    reasons = [dict(d.headers)["__connect.errors.exception.message"].decode() for d in dead]
    over = [r for r in reasons if "not looked up" in r]
    assert len(over) >= 30, reasons  # at most 5 new ids per fetch were asked
    assert all("more than schema.registry.max.new.ids.per.fetch=5" in r for r in over)
    assert all(r in over or r.endswith("(404)") for r in reasons)
    assert (await process.status())["health"] == "healthy"
