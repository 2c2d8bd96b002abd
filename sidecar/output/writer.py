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

While the pipeline waits in a write, nothing else moves: no fetch, no merge, no commit, and the
merge buffers look healthy. :class:`OutputActivity` keeps what ``/status`` needs to say so — the
batches the producer holds and since when the current write has been waiting — at a cost per
batch, never per record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError

#: Producer batch size: large batches amortise per-request costs. A record larger than this
#: still goes out, alone in its batch, up to ``MAX_MESSAGE_BYTES``.
BATCH_BYTES = 512 * 1024
#: Topics the sidecar creates accept batches up to this size: an input record near the broker's
#: 1 MiB default limit must still fit once our headers are added.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024

log = logging.getLogger("timesync")


def wall_ms() -> int:
    return int(time.time() * 1000)


class OutputActivity:
    """What the output side is doing now, shared by every writer of a process (for ``/status``).

    ``in_flight`` counts batches handed to a producer and not yet acknowledged (or failed);
    ``writing_since`` is the wall-clock time the write in progress started, ``None`` between
    writes; ``writing_to`` its topic and partition; ``last_ack`` the time of the latest
    acknowledgement. The pipeline writes one batch group at a time, so one "current write" is
    enough.
    """

    __slots__ = ("clock", "in_flight", "last_ack", "writing_since", "writing_to")

    def __init__(self, clock: Callable[[], int] = wall_ms) -> None:
        self.clock = clock
        self.in_flight = 0
        self.last_ack: int | None = None
        self.writing_since: int | None = None
        self.writing_to: tuple[str, int] = ("", -1)

    def landed(self, future: asyncio.Future[Any]) -> None:
        """Done callback of every batch future: acknowledged, failed or cancelled."""
        self.in_flight -= 1
        if not future.cancelled() and future.exception() is None:
            self.last_ack = self.clock()

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        writing = None
        if self.writing_since is not None:
            topic, partition = self.writing_to
            writing = {
                "topic": topic,
                "partition": partition,
                "since": self.writing_since,
                "waiting_ms": max(0, now_ms - self.writing_since),
            }
        return {"batches_in_flight": self.in_flight, "last_ack": self.last_ack, "writing": writing}


class OutputWriter:
    __slots__ = ("activity", "patient", "producer", "stopping")

    def __init__(
        self,
        producer: AIOKafkaProducer,
        patient: bool = False,
        stopping: asyncio.Event | None = None,
        activity: OutputActivity | None = None,
    ) -> None:
        self.producer = producer
        self.patient = patient
        self.stopping = stopping
        self.activity = activity if activity is not None else OutputActivity()

    async def _send_batch(self, batch: Any, topic: str, partition: int) -> asyncio.Future[object]:
        while True:
            try:
                future: asyncio.Future[object] = await self.producer.send_batch(
                    batch, topic, partition=partition
                )
                break
            except KafkaTimeoutError:
                if not self.patient or (self.stopping is not None and self.stopping.is_set()):
                    raise
                log.warning(
                    "%s[%d] is taking no more batches (Kafka does not answer); waiting", topic, partition
                )
        activity = self.activity
        activity.in_flight += 1
        future.add_done_callback(activity.landed)
        return future

    async def send(self, topic: str, partition: int, batches: Sequence[Any]) -> list[asyncio.Future[object]]:
        """Queue batches already filled (by an output encoder) for one partition, in order;
        return one future per batch (done when acknowledged)."""
        activity = self.activity
        activity.writing_since, activity.writing_to = activity.clock(), (topic, partition)
        try:
            return [await self._send_batch(b, topic, partition) for b in batches if b.record_count()]
        finally:
            activity.writing_since = None
