"""Avro and Protobuf event time through a real Schema Registry (Apicurio) and the real broker.

- An Avro topic of two partitions, written with two versions of one subject interleaved, the
  event time a nested ``timestamp-millis`` field: the output is the k-way merge by that field
  (not by the Kafka timestamps, which are all the same). A value with a wrong magic byte and one
  with a schema id the registry does not know go to the DLQ, each with its reason naming the
  schema id (or the framing) and the field.
- A Protobuf topic whose message (the second of its file, so the framing carries message
  indexes) holds a ``google.protobuf.Timestamp`` and imports a referenced file: the same merge.
- The registry away mid-run (a proxy in front of it closes): records with a schema id not seen
  yet wait, health turns degraded and ``/status`` says why — unhealthy (500) once away for
  longer than ``schema.registry.unhealthy.after.ms`` —, nothing is dead-lettered; once the
  registry answers again the sidecar catches up and is healthy again.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import io
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import fastavro
import pytest
from aiokafka import AIOKafkaProducer

from sidecar.formats.framing import frame
from sidecar.kafka.admin import TopicSpec
from sidecar.registry.protoc import compile_proto
from testkit import kafka_io, ordered

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]

DAY = 86_400_000


def avro_schema(version: int) -> dict[str, Any]:
    meta: list[dict[str, Any]] = [
        {"name": "source", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]
    fields: list[dict[str, Any]] = [{"name": "id", "type": "string"}]
    if version == 2:  # a backward-compatible evolution: fields added before and inside meta
        fields.append({"name": "note", "type": ["null", "string"], "default": None})
        meta.insert(0, {"name": "region", "type": "string", "default": "eu"})
    fields.append({"name": "meta", "type": {"type": "record", "name": "Meta", "fields": meta}})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
PAYMENT = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";
message Ping { int32 n = 1; }
message Payment {
  string id = 1;
  common.Money amount = 2;
  Meta meta = 3;
  message Meta { string source = 1; google.protobuf.Timestamp at = 2; }
}
"""


async def register(
    url: str, subject: str, schema: str, kind: str = "AVRO", refs: list[Any] | None = None
) -> int:
    body: dict[str, Any] = {"schema": schema, "schemaType": kind}
    if refs:
        body["references"] = refs
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{url}/subjects/{subject}/versions",
            json=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        ) as response,
    ):
        assert response.status == 200, await response.text()
        return int((await response.json())["id"])


def avro_body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def order(version: int, ts: int) -> dict[str, Any]:
    record: dict[str, Any] = {"id": f"o{ts}", "meta": {"source": "web", "ts": ts}}
    if version == 2:
        record["note"] = "v2"
        record["meta"]["region"] = "us"
    return record


async def produce(bootstrap: str, topic: str, rows: list[tuple[int, bytes]], create_time: int) -> None:
    """``rows`` of (partition, value), all stamped with the same CreateTime: only the value orders."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sends = [
            await producer.send(topic, v, key=b"k%d" % p, partition=p, timestamp_ms=create_time)
            for p, v in rows
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def k_way(per_partition: dict[int, list[tuple[int, bytes]]]) -> list[tuple[int, int, bytes]]:
    """(event time, partition, value) in the order the merge must write them."""
    streams = [[(ts, p, v) for ts, v in rows] for p, rows in sorted(per_partition.items())]
    return list(heapq.merge(*streams, key=lambda row: (row[0], row[1])))


def events(seed: int, partition: int, n: int, base: int) -> list[int]:
    """Increasing, distinct event times per partition, interleaving across partitions."""
    return [base + 10 * j * 2 + partition * 7 + (seed * j) % 5 for j in range(n)]


async def test_avro_with_two_schema_versions_merges_by_a_nested_timestamp_millis_and_dead_letters_bad_framing(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("orders"), topic_name("out"), topic_name("dlq")
    v1 = await register(schema_registry, f"{src}-value", json.dumps(avro_schema(1)))
    v2 = await register(schema_registry, f"{src}-value", json.dumps(avro_schema(2)))
    assert v1 != v2
    await kafka_io.create_topics(bootstrap, [TopicSpec(src, 2)])
    now = int(time.time() * 1000)
    per_partition: dict[int, list[tuple[int, bytes]]] = {}
    rows: list[tuple[int, bytes]] = []
    for p in (0, 1):
        for j, ts in enumerate(events(3, p, 150, now - DAY)):
            version, sid = (1, v1) if (j + p) % 2 else (2, v2)
            value = frame(sid, avro_body(avro_schema(version), order(version, ts)))
            per_partition.setdefault(p, []).append((ts, value))
            rows.append((p, value))
    unknown = 2_000_000_000
    wrong_magic = b"\x02" + frame(v1, avro_body(avro_schema(1), order(1, now)))[1:]
    never_registered = frame(unknown, avro_body(avro_schema(1), order(1, now)))
    rows[100:100] = [(0, wrong_magic)]
    rows[200:200] = [(1, never_registered)]
    await produce(bootstrap, src, rows, create_time=now)

    await sidecar(
        [src],
        out,
        timestamp_extractor="avro:meta.ts",
        schema_registry_url=schema_registry,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        watermark_heartbeat_ms=0,
    )
    expected = k_way(per_partition)
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(expected), timeout_s=90))
    assert [(o.timestamp, o.source_partition, o.value) for o in written] == expected
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=2, timeout_s=30)
    reasons = {d.value: dict(d.headers)["__connect.errors.exception.message"].decode() for d in dead}
    assert reasons == {
        wrong_magic: "avro framing: magic byte is 2, not 0 (Confluent's wire format); field meta.ts not read",
        never_registered: (
            f"schema id {unknown}, field meta.ts: the registry does not know schema id {unknown} (404)"
        ),
    }


async def test_protobuf_with_a_timestamp_and_a_reference_merges_by_it(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out = topic_name("payments"), topic_name("out")
    money_subject = f"{src}-money"
    await register(schema_registry, money_subject, MONEY, "PROTOBUF")
    refs = [{"name": "common/money.proto", "subject": money_subject, "version": 1}]
    sid = await register(schema_registry, f"{src}-value", PAYMENT, "PROTOBUF", refs)
    # The producer's side: the same schema compiled here, to write Payment bodies.
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(
        compile_proto(PAYMENT, {"common/money.proto": MONEY})
    ).file:
        pool.Add(proto)
    payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))

    await kafka_io.create_topics(bootstrap, [TopicSpec(src, 2)])
    now = int(time.time() * 1000)
    per_partition: dict[int, list[tuple[int, bytes]]] = {}
    rows = []
    for p in (0, 1):
        for ts in events(5, p, 100, now - DAY):
            msg = payment(id=f"p{ts}")
            msg.amount.cents = ts % 1000
            msg.meta.source = "pos"
            msg.meta.at.seconds, millis = divmod(ts, 1000)
            msg.meta.at.nanos = millis * 1_000_000
            value = frame(sid, msg.SerializeToString(), (1,))  # Payment: the second message of the file
            per_partition.setdefault(p, []).append((ts, value))
            rows.append((p, value))
    await produce(bootstrap, src, rows, create_time=now)

    await sidecar([src], out, timestamp_extractor="protobuf:meta.at", schema_registry_url=schema_registry)
    expected = k_way(per_partition)
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(expected), timeout_s=90))
    assert [(o.timestamp, o.source_partition, o.value) for o in written] == expected


class Proxy:
    """A TCP proxy in front of the registry that can be closed and opened again on its port:
    the registry seen from the sidecar goes away (connection refused) and comes back, without
    restarting the session's registry (one start per session)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path
        self.server: asyncio.Server | None = None
        self.listen_port = 0
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listen_port}{self.path}"

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
        self.listen_port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self.tasks.discard(task)
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.close()


@pytest.fixture
async def proxy(schema_registry: str) -> AsyncIterator[Proxy]:
    p = Proxy(schema_registry)
    await p.open()
    yield p
    with contextlib.suppress(Exception):
        await p.close()


async def test_a_registry_away_mid_run_degrades_health_dead_letters_nothing_and_is_caught_up_on(
    bootstrap: str,
    schema_registry: str,
    proxy: Proxy,
    topic_name: Callable[[str], str],
    sidecar: StartSidecar,
) -> None:
    src, out, dlq = topic_name("orders"), topic_name("out"), topic_name("dlq")
    v1 = await register(schema_registry, f"{src}-value", json.dumps(avro_schema(1)))
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    first = [(0, frame(v1, avro_body(avro_schema(1), order(1, now - DAY + i)))) for i in range(50)]
    await produce(bootstrap, src, first, create_time=now)
    process = await sidecar(
        [src],
        out,
        timestamp_extractor="avro:meta.ts",
        schema_registry_url=proxy.url,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=-1,
        watermark_heartbeat_ms=0,
        schema_registry_unhealthy_after_ms=4000,
    )
    assert len(ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=50, timeout_s=60))) == 50

    await proxy.close()  # the registry is away; a new schema version comes meanwhile
    v2 = await register(schema_registry, f"{src}-value", json.dumps(avro_schema(2)))
    second = [(0, frame(v2, avro_body(avro_schema(2), order(2, now - DAY + 50 + i)))) for i in range(50)]
    await produce(bootstrap, src, second, create_time=now)
    deadline = time.monotonic() + 30
    while (status := await process.status())["health"] == "healthy":
        assert time.monotonic() < deadline, status["message"]
        await asyncio.sleep(0.3)
    assert status["message"].startswith("schema registry unavailable ("), status["message"]
    code, health = await process.get("/healthz")
    assert (code, health["status"]) in ((200, "degraded"), (500, "unhealthy"))
    # Away for longer than schema.registry.unhealthy.after.ms: unhealthy (500), and the metric
    # the alert reads says for how long.
    while (code_health := await process.get("/healthz"))[0] != 500:
        assert time.monotonic() < deadline, code_health
        await asyncio.sleep(0.3)
    assert code_health[1]["status"] == "unhealthy"
    assert "longer than the 4 s allowed; still retrying" in code_health[1]["message"]
    unavailable = [
        float(line.split()[-1])
        for line in (await process.metrics()).splitlines()
        if line.startswith("timesync_schema_registry_unavailable_seconds ")
    ]
    assert unavailable[0] > 4
    assert len(await kafka_io.read_topics(bootstrap, [out], timeout_s=5)) == 50, "the new records wait"
    assert await kafka_io.read_topics(bootstrap, [dlq], timeout_s=3) == [], "nothing is dead-lettered"

    await proxy.open()  # back, on the same address
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=100, timeout_s=60))
    assert [o.value for o in written] == [v for _, v in first + second]
    deadline = time.monotonic() + 30
    while (status := await process.status())["health"] != "healthy":
        assert time.monotonic() < deadline, status["message"]
        await asyncio.sleep(0.3)
    assert await kafka_io.read_topics(bootstrap, [dlq], timeout_s=3) == []
    assert await process.stop() == 0


async def test_refused_registry_credentials_stop_the_sidecar_with_one_line(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    from aiohttp import web

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=401, text='{"message": "Unauthorized"}')

    app = web.Application()
    app.router.add_get("/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/apis/ccompat/v7"
    try:
        src, out = topic_name("in"), topic_name("out")
        await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
        await produce(
            bootstrap, src, [(0, frame(1, avro_body(avro_schema(1), order(1, 1000))))], create_time=1000
        )
        process = await sidecar(  # it may be gone before it ever answers /healthz: do not wait for that
            [src],
            out,
            wait=None,
            timestamp_extractor="avro:meta.ts",
            schema_registry_url=url,
            schema_registry_basic_auth_user_info="svc:wrong-password",
        )
        assert await process.wait(60) == 1
    finally:
        await runner.cleanup()
    log = process.log_path.read_text()
    expected = f"the schema registry at {url} refused the credentials (401)"
    assert [line for line in log.splitlines() if expected in line] != []
    assert "Traceback" not in log
    assert "wrong-password" not in log
