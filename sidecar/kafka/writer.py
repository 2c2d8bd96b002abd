"""Writes stamped records to a topic-partition in whole producer batches.

aiokafka's ``send()`` costs several microseconds and a future per record; its batch API
(``create_batch`` → ``append`` → ``send_batch``) costs one future per batch of up to
``BATCH_BYTES``. ``send_batch`` also waits while the previous batch for the same partition is
still queued, which is the backpressure the runner relies on: a slow output slows fetching.

aiokafka stops that wait after the producer's ``request_timeout_ms`` (40 s) with
``KafkaTimeoutError``, so a broker that does not answer for longer (a long restart, a network
partition, a frozen broker) would end the sidecar. A patient writer waits on instead: the batch
was not queued, so offering it again cannot duplicate it, and ``/healthz`` already reports the
silence. It gives up only once ``stopping`` is set, so that a stop is not held up forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError

from sidecar.core.stamping import OutputRecord

#: Producer batch size: large batches amortise per-request costs. A record larger than this
#: still goes out, alone in its batch, up to ``MAX_MESSAGE_BYTES``.
BATCH_BYTES = 512 * 1024
#: Topics the sidecar creates accept batches up to this size: an input record near the broker's
#: 1 MiB default limit must still fit once our headers are added.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024

log = logging.getLogger("timesync")


class OutputWriter:
    __slots__ = ("patient", "producer", "stopping")

    def __init__(
        self, producer: AIOKafkaProducer, patient: bool = False, stopping: asyncio.Event | None = None
    ) -> None:
        self.producer = producer
        self.patient = patient
        self.stopping = stopping

    async def _send_batch(self, batch: Any, topic: str, partition: int) -> asyncio.Future[object]:
        while True:
            try:
                future: asyncio.Future[object] = await self.producer.send_batch(
                    batch, topic, partition=partition
                )
                return future
            except KafkaTimeoutError:
                if not self.patient or (self.stopping is not None and self.stopping.is_set()):
                    raise
                log.warning(
                    "%s[%d] is taking no more batches (Kafka does not answer); waiting", topic, partition
                )

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
                futures.append(await self._send_batch(batch, topic, partition))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=timestamp, headers=headers)
        if batch.record_count():
            futures.append(await self._send_batch(batch, topic, partition))
        return futures

    async def send(self, topic: str, partition: int, batches: Sequence[Any]) -> list[asyncio.Future[object]]:
        """Send batches already filled (by ``Stamper.stamp_into``), in order."""
        return [await self._send_batch(b, topic, partition) for b in batches if b.record_count()]
