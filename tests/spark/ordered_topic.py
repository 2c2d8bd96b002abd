"""Fabricate the ordered topic the sidecar writes, for the Spark tests.

The one place the tests build ordered-topic records: key and JSON value as the input had them,
Kafka timestamp = event time, ``timesync.*`` headers as DESIGN.md's table says (ASCII decimal),
and heartbeats (null key, empty value, timestamp = watermark, ``timesync.control=watermark``).
The headers themselves come from the sidecar's own stamping module; only the watermark and
stream time are played here, so that a test can set them exactly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer

from sidecar.core import Emit, Record, stamping
from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics


@dataclass(frozen=True, slots=True)
class OrderedRecord:
    key: bytes | None
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]


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
        before = self.stream_time
        self.stream_time = max(self.stream_time, ts)
        self.watermark = max(self.watermark, self.stream_time - self.watermark_delay_ms)
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        k = key.encode() if isinstance(key, str) else key
        record = Record(topic, partition, offset, ts, key=k, value=raw)
        emit = Emit(0, [record], [ts], self.watermark, before, 0 if enforced else 1, late=[0] if late else [])
        ((_, _, _, headers),) = stamping.Stamper().stamp(emit)
        return OrderedRecord(k, raw, ts, tuple(headers))

    def heartbeat(self, watermark: int | None = None) -> OrderedRecord:
        """A control record at ``watermark`` (default: the current one, which it raises to)."""
        if watermark is not None:
            self.watermark = max(self.watermark, watermark)
        key, value, ts, headers = stamping.heartbeat(self.watermark)
        assert value is not None
        assert ts is not None
        return OrderedRecord(key, value, ts, tuple(headers))


async def create_ordered_topic(bootstrap: str, topic: str) -> None:
    # Test timestamps are tiny epoch ms: without retention.ms=-1 a broker with time-based
    # retention deletes them at once.
    await create_topics(bootstrap, [TopicSpec(topic, configs={"retention.ms": "-1"})])


async def produce_async(bootstrap: str, topic: str, records: Sequence[OrderedRecord]) -> None:
    """Write ``records`` to partition 0 of ``topic``, in order, and wait for the acks."""
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
    asyncio.run(produce_async(bootstrap, topic, list(records)))


def create(bootstrap: str, topic: str) -> str:
    asyncio.run(create_ordered_topic(bootstrap, topic))
    return topic
