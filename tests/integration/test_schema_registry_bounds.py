"""The registry client's bounds through the real pipeline, the real broker and a real registry
(Apicurio; issue 32, item 4), at small sizes.

- An id a record names before it is registered is unknown for ``schema.registry.missing.id.ttl.ms``
  only: once registered, its later records are read (a producer cannot poison the next id until
  a restart).
- One fetch naming more new ids than ``schema.registry.max.new.ids.per.fetch`` dead-letters the
  records of the ids past it, each with a reason that says so; the ordinary records around them
  are merged as ever.

The registry away for longer than ``schema.registry.unhealthy.after.ms`` is in
``test_schema_registry.py`` (its proxy).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from timesync_wire.framing import frame

from .conftest import StartSidecar
from .test_schema_registry import DAY, avro_body, avro_schema, order, produce, register

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]


def unique_schema() -> str:
    """An Avro schema no other test registers (Apicurio gives equal texts the same id)."""
    schema = avro_schema(1)
    schema["doc"] = uuid.uuid4().hex
    return json.dumps(schema)


async def test_an_id_read_before_it_is_registered_is_read_once_registered_after_the_ttl(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    # The registry is shared with the suite's other workers, and its ids are global: the id this
    # test predicts can go to another worker's schema first. Such a try proves nothing either
    # way, so it is made again on new topics (a race lost three times running would be news).
    for attempt in range(3):
        if await _read_once_registered(bootstrap, schema_registry, topic_name, sidecar, attempt):
            return
    pytest.fail("three tries running, another client registered the predicted schema id first")


async def _read_once_registered(
    bootstrap: str,
    schema_registry: str,
    topic_name: Callable[[str], str],
    sidecar: StartSidecar,
    attempt: int,
) -> bool:
    """One try; False when another client took the predicted id before this test registered it."""
    src, out, dlq = (topic_name(f"{name}{attempt}") for name in ("orders", "out", "dlq"))
    latest = await register(schema_registry, f"{src}-probe", unique_schema())
    upcoming = latest + 1  # the id the registry gives the next new schema
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    early = frame(upcoming, avro_body(avro_schema(1), order(1, now - DAY)))
    await produce(bootstrap, src, [(0, early)], create_time=now)
    process = await sidecar(
        [src],
        out,
        timestamp_extractor="avro:meta.ts",
        schema_registry_url=schema_registry,
        schema_registry_missing_id_ttl_ms=1000,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=-1,
        watermark_heartbeat_ms=0,
    )
    first = await kafka_io.read_topics(bootstrap, [dlq, out], expected=1, timeout_s=60)
    assert len(first) == 1, "the record was neither merged nor dead-lettered"
    unknown = f"schema id {upcoming}, field meta.ts: the registry does not know schema id {upcoming} (404)"
    reason = dict(first[0].headers).get("__connect.errors.exception.message", b"").decode()
    if first[0].topic != dlq or reason != unknown:
        await process.stop()  # another client's schema had the id already when the sidecar asked
        return False

    registered = await register(schema_registry, f"{src}-value", unique_schema())
    if registered != upcoming:
        await process.stop()  # another client registered a schema meanwhile: ids moved on
        return False
    await asyncio.sleep(1.2)  # the 404 is believed for 1 s
    later = [(0, frame(upcoming, avro_body(avro_schema(1), order(1, now - DAY + i)))) for i in range(1, 21)]
    await produce(bootstrap, src, later, create_time=now)
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=20, timeout_s=60))
    assert [o.value for o in written] == [v for _, v in later]
    assert len(await kafka_io.read_topics(bootstrap, [dlq], timeout_s=3)) == 1
    return True


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
