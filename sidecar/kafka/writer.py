"""Writes stamped records to a topic-partition in whole producer batches.

aiokafka's ``send()`` costs several microseconds and a future per record; its batch API
(``create_batch`` → ``append`` → ``send_batch``) costs one future per batch of up to
``BATCH_BYTES``. ``send_batch`` also waits while the previous batch for the same partition is
still queued, which is the backpressure the runner relies on: a slow output slows fetching.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from sidecar.core.stamping import OutputRecord

#: Producer batch size: large batches amortise per-request costs. A record larger than this
#: still goes out, alone in its batch, up to ``MAX_MESSAGE_BYTES``.
BATCH_BYTES = 512 * 1024
#: Topics the sidecar creates accept batches up to this size: an input record near the broker's
#: 1 MiB default limit must still fit once our headers are added.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class OutputWriter:
    __slots__ = ("producer",)

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer

    async def write(
        self, topic: str, partition: int, records: Sequence[OutputRecord]
    ) -> list[asyncio.Future[object]]:
        """Queue ``records`` in order; return one future per producer batch (done when acked)."""
        futures: list[asyncio.Future[object]] = []
        producer = self.producer
        batch = producer.create_batch()
        for key, value, timestamp, headers in records:
            if batch.append(key=key, value=value, timestamp=timestamp, headers=headers) is None:
                # Full. A batch always takes its first record, however large, so this fits.
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=timestamp, headers=headers)
        if batch.record_count():
            futures.append(await producer.send_batch(batch, topic, partition=partition))
        return futures

    async def send(self, topic: str, partition: int, batches: Sequence[Any]) -> list[asyncio.Future[object]]:
        """Send batches already filled (by ``Stamper.stamp_into``), in order."""
        send_batch = self.producer.send_batch
        return [await send_batch(b, topic, partition=partition) for b in batches if b.record_count()]
