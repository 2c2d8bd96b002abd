"""Fabricate the ordered topic the sidecar writes, for the Spark tests.

The one place the tests build ordered-topic records: key and JSON value as the input had them,
Kafka timestamp = event time, ``timesync.*`` headers as DESIGN.md's table says (ASCII decimal),
and heartbeats (null key, empty value, timestamp = watermark, ``timesync.control=watermark``).
Once the sidecar's stamping module exists, :class:`Stamper` can delegate to it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer

from bench.kafka_io import create_topics
from sidecar.kafka.admin import TopicSpec


@dataclass(frozen=True, slots=True)
class OrderedRecord:
    key: bytes | None
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]


def _dec(n: int) -> bytes:
    return b"%d" % n


@dataclass
class Stamper:
    """Stamps records the way one sidecar task does: source position, watermark, stream time.

    ``watermark_delay_ms`` plays the sidecar's bounded-delay watermark (max ts − delay); the
    watermark never decreases. ``offsets`` counts source offsets per (topic, partition).
    """

    watermark_delay_ms: int = 0
    stream_time: int = -1
    watermark: int = -1
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)

    def record(
        self,
        ts: int,
        value: dict[str, Any] | bytes,
        key: str | bytes | None = None,
        *,
        topic: str = "in",
        partition: int = 0,
        offset: int | None = None,
        enforced: bool = False,
    ) -> OrderedRecord:
        """A data record from ``topic``/``partition``; ``offset`` given repeats a source record."""
        if offset is None:
            offset = self.offsets.get((topic, partition), 0)
            self.offsets[(topic, partition)] = offset + 1
        late = ts < self.stream_time
        self.stream_time = max(self.stream_time, ts)
        self.watermark = max(self.watermark, self.stream_time - self.watermark_delay_ms)
        headers = [
            ("timesync.source.topic", topic.encode()),
            ("timesync.source.partition", _dec(partition)),
            ("timesync.source.offset", _dec(offset)),
            ("timesync.watermark", _dec(self.watermark)),
            ("timesync.stream.time", _dec(self.stream_time)),
        ]
        if late:
            headers.append(("timesync.late", b"1"))
        if enforced:
            headers.append(("timesync.enforced", b"1"))
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        k = key.encode() if isinstance(key, str) else key
        return OrderedRecord(k, raw, ts, tuple(headers))

    def heartbeat(self, watermark: int | None = None) -> OrderedRecord:
        """A control record at ``watermark`` (default: the current one, which it raises to)."""
        if watermark is not None:
            self.watermark = max(self.watermark, watermark)
        wm = self.watermark
        return OrderedRecord(
            None, b"", wm, (("timesync.control", b"watermark"), ("timesync.watermark", _dec(wm)))
        )


async def create_ordered_topic(bootstrap: str, topic: str) -> None:
    # Test timestamps are tiny epoch ms: without retention.ms=-1 a broker with time-based
    # retention deletes them at once.
    await create_topics(bootstrap, [TopicSpec(topic, configs={"retention.ms": "-1"})])


async def _produce(bootstrap: str, topic: str, records: Sequence[OrderedRecord]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic, r.value, key=r.key, partition=0, timestamp_ms=r.timestamp, headers=list(r.headers)
            )
            for r in records
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def produce(bootstrap: str, topic: str, records: Iterable[OrderedRecord]) -> None:
    """Write ``records`` to partition 0 of ``topic``, in order, and wait for the acks."""
    asyncio.run(_produce(bootstrap, topic, list(records)))


def create(bootstrap: str, topic: str) -> str:
    asyncio.run(create_ordered_topic(bootstrap, topic))
    return topic
