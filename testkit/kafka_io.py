"""Kafka I/O for the demo, the benchmark and the tests: write workloads, read topics back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import ConsumerRecord

from sidecar.kafka.admin import AdminError, TopicSpec, ensure_topics, wait_for_partitions
from testkit.workloads import Event

Progress = Callable[[int], None]


async def create_topics(bootstrap: str, specs: Iterable[TopicSpec], **client: Any) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client)
    await admin.start()
    try:
        await ensure_topics(admin, specs)
    finally:
        await admin.close()


async def topic_partition_counts(
    bootstrap: str, topics: Sequence[str], timeout_s: float = 10.0, **client: Any
) -> dict[str, int]:
    """Partition count per topic, waiting briefly for topics that were just created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **_admin_options(client))
    await admin.start()
    try:
        return await wait_for_partitions(admin, topics, timeout_s)
    except AdminError as e:
        raise AdminError(f"{e} (on {bootstrap})") from None
    finally:
        await admin.close()


def _admin_options(client: dict[str, Any]) -> dict[str, Any]:
    """The connection settings of a consumer/producer config that the admin client accepts."""
    keys = {
        "security_protocol",
        "ssl_context",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "client_id",
        "request_timeout_ms",
    }
    return {k: v for k, v in client.items() if k in keys}


async def produce(
    bootstrap: str,
    events: Sequence[Event],
    *,
    paced: bool = False,
    speed: float = 1.0,
    progress: Progress | None = None,
    headers: Callable[[Event], list[tuple[str, bytes]]] | None = None,
    **producer: Any,
) -> None:
    """Write events in order; with ``paced`` at their ``send_at_ms`` (divided by ``speed``)."""
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all", **producer)
    await prod.start()
    try:
        start = time.monotonic()
        pending = []
        for i, e in enumerate(events):
            if paced:
                delay = e.send_at_ms / 1000.0 / speed - (time.monotonic() - start)
                if delay > 0.002:
                    await asyncio.sleep(delay)
            pending.append(
                await prod.send(
                    e.topic,
                    e.value,
                    key=e.key,
                    partition=e.partition,
                    timestamp_ms=e.ts,
                    headers=[*e.headers, *headers(e)] if headers else (list(e.headers) or None),
                )
            )
            if len(pending) >= 5000:
                await asyncio.gather(*pending)
                pending.clear()
                if progress:
                    progress(i + 1)
        await asyncio.gather(*pending)
        if progress:
            progress(len(events))
    finally:
        await prod.stop()


async def read_topics(
    bootstrap: str,
    topics: Sequence[str],
    *,
    expected: int | None = None,
    idle_s: float = 2.0,
    timeout_s: float = 60.0,
    isolation_level: str = "read_uncommitted",
    progress: Progress | None = None,
    raw_header_keys: bool = False,
    **consumer: Any,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read the topics from the beginning, in the order a plain consumer receives them.

    With ``expected``, stops once that many records arrived (or after ``timeout_s``): a writer
    that is still waiting — a sidecar idling on a quiet partition — must not look finished.
    Without it, stops when every partition is at its high watermark and nothing new came for
    ``idle_s``, or after ``timeout_s``. With ``raw_header_keys`` the records are read by the
    sidecar's reader, which takes header keys that are not UTF-8 (aiokafka's refuses them):
    ``sidecar.core.stamping.header_key_bytes`` gives a key's bytes back.
    """
    cons = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
        **consumer,
    )
    await cons.start()
    if raw_header_keys:
        from sidecar.kafka import fetch_hook

        if fetch_hook.install(cons) != "native":
            raise RuntimeError("raw_header_keys needs the sidecar's C reader (built at install)")
    out: list[ConsumerRecord[bytes, bytes]] = []
    try:
        counts = await topic_partition_counts(bootstrap, topics, **consumer)
        tps = [TopicPartition(t, p) for t in topics for p in range(counts[t])]
        cons.assign(tps)
        await cons.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            batch = await cons.getmany(timeout_ms=200, max_records=10_000)
            for recs in batch.values():
                out.extend(recs)
            if batch:
                last_new = time.monotonic()
                if progress:
                    progress(len(out))
            if expected is not None and len(out) >= expected:
                break
            if expected is None and time.monotonic() - last_new >= idle_s and await _at_end(cons, tps):
                break
    finally:
        await cons.stop()
    return out


async def _at_end(cons: AIOKafkaConsumer, tps: list[TopicPartition]) -> bool:
    for tp in tps:
        hw = cons.highwater(tp)
        if hw is None or await cons.position(tp) < hw:
            return False
    return True
