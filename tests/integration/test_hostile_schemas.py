"""Hostile schemas and bodies through the real registry and broker cost one dead letter each.

Issue 32, items 2 and 3, end to end, with ``errors.tolerance=all``:

- an Avro topic written with a *recursive* writer schema (a linked list — legal Avro): ordinary
  lists are read and merged; a body nested ~1,500 deep (it crashed the sidecar, in fastavro) and a
  12-byte body claiming 2^62 nulls (it hung the event loop) are dead-lettered, their reasons
  naming the schema id, and the sidecar goes on;
- a Protobuf schema with a reference named ``"."`` (it raised ``IsADirectoryError`` out of the
  resolver and stopped the sidecar): its records are dead-lettered with the reason, and records
  of a good schema on the same topic are merged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from sidecar.formats.framing import frame
from sidecar.kafka.admin import TopicSpec
from sidecar.registry.protoc import compile_proto
from testkit import kafka_io, ordered

from .conftest import StartSidecar
from .test_schema_registry import avro_body, produce, register

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]

NODE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "n", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}
EVENT = {
    "type": "record",
    "name": "Event",
    "namespace": "hostile",
    "fields": [
        {"name": "list", "type": ["null", NODE]},
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
        {"name": "ts", "type": "long"},
    ],
}


def linked(length: int) -> Any:
    head = None
    for i in range(length):
        head = {"n": i, "next": head}
    return head


def zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


async def test_a_recursive_avro_schema_is_read_and_its_hostile_bodies_are_dead_lettered(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("lists"), topic_name("out"), topic_name("dlq")
    sid = await register(schema_registry, f"{src}-value", json.dumps(EVENT))
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    good = [
        frame(sid, avro_body(EVENT, {"list": linked(i % 5), "nulls": [None] * i, "ts": now - 1000 + i}))
        for i in range(30)
    ]
    # A list 1,500 nodes deep (n = 1, next = a node, …), then no nulls and the time.
    deep = frame(sid, b"\x02" + b"\x02\x02" * 1500 + b"\x00\x00" + b"\x00" + zigzag(now))
    # No list, then a block of 2^62 nulls: 12 bytes before the time.
    nulls = frame(sid, b"\x00" + zigzag(2**62) + b"\x00" + zigzag(now))
    rows = [(0, v) for v in good[:10]] + [(0, deep)] + [(0, v) for v in good[10:20]] + [(0, nulls)]
    rows += [(0, v) for v in good[20:]]
    await produce(bootstrap, src, rows, create_time=now)

    process = await sidecar(
        [src],
        out,
        timestamp_extractor="avro:ts",
        schema_registry_url=schema_registry,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=-1,
        watermark_heartbeat_ms=0,
    )
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(good), timeout_s=90))
    assert [o.value for o in written] == good
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=2, timeout_s=30)
    reasons = {d.value: dict(d.headers)["__connect.errors.exception.message"].decode() for d in dead}
    assert reasons == {
        deep: f"schema id {sid}, field ts: values nested deeper than 1000",
        nulls: f"schema id {sid}, field ts: more items and calls than the body's bytes plus 1000000",
    }
    assert (await process.status())["health"] == "healthy"
    assert await process.stop() == 0


MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
TICK = 'syntax = "proto3";\npackage shop;\nmessage Tick { int64 at_ms = 1; }\n'


async def test_a_protobuf_reference_named_dot_dead_letters_its_records_and_the_sidecar_goes_on(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("ticks"), topic_name("out"), topic_name("dlq")
    money = f"{src}-money"
    await register(schema_registry, money, MONEY, "PROTOBUF")
    dot = await register(
        schema_registry, f"{src}-odd", TICK, "PROTOBUF", [{"name": ".", "subject": money, "version": 1}]
    )
    sid = await register(schema_registry, f"{src}-value", TICK, "PROTOBUF")
    assert dot != sid
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(compile_proto(TICK, {})).file:
        pool.Add(proto)
    tick = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Tick"))
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    good = [frame(sid, tick(at_ms=now - 100 + i).SerializeToString(), (0,)) for i in range(20)]
    odd = frame(dot, tick(at_ms=now).SerializeToString(), (0,))
    await produce(bootstrap, src, [(0, v) for v in good[:10]] + [(0, odd)] + [(0, v) for v in good[10:]], now)

    process = await sidecar(
        [src],
        out,
        timestamp_extractor="protobuf:at_ms",
        schema_registry_url=schema_registry,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=-1,
        watermark_heartbeat_ms=0,
    )
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(good), timeout_s=90))
    assert [o.value for o in written] == good
    (dead,) = await kafka_io.read_topics(bootstrap, [dlq], expected=1, timeout_s=30)
    assert dead.value == odd
    reason = dict(dead.headers)["__connect.errors.exception.message"].decode()
    assert reason == f"schema id {dot}, field at_ms: reference name '.' is not a relative path of plain parts"
    assert (await process.status())["health"] == "healthy"
    assert await process.stop() == 0
