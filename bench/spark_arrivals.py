"""The Spark part's workload and its two arrival orders (see :mod:`bench.spark_bench`).

Orders on time and their payments in bursts (:func:`orders_and_payments`); the ordered topic as
it arrives (:class:`ArrivalReader`); and the raw inputs in the order they were produced, written
back as one topic Spark can replay (:func:`write_arrival_log`).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import numpy as np
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench import collect
from testkit.workloads import Event

BURST_EVERY_MS = 5000
STORES = 10
SOURCE_TOPIC = "timesync.source.topic"


def orders_and_payments(
    orders: str, payments: str, base_ms: int, duration_s: float, rate_per_s: float, seed: int
) -> list[Event]:
    """Orders on time; each order's payment 50–500 ms later, delivered in bursts every 5 s."""
    rng = random.Random(seed)
    events = []
    end_ms = int(duration_s * 1000)
    for i in range(int(duration_s * rate_per_s)):
        at = int(i * 1000 / rate_per_s)
        store = b"s%d" % rng.randrange(STORES)
        ts = base_ms + at
        events.append(Event(orders, 0, ts, store, orjson.dumps({"ts": ts, "id": f"o{i}"}), at))
        pay_at = at + rng.randrange(50, 500)
        # Held back until the next burst; the producer flushes what it holds at the end.
        arrive = min(end_ms, (pay_at // BURST_EVERY_MS + 1) * BURST_EVERY_MS)
        pay_ts = base_ms + pay_at
        events.append(Event(payments, 0, pay_ts, store, orjson.dumps({"ts": pay_ts, "id": f"o{i}"}), arrive))
    # In arrival order; within a burst the payments producer writes in event-time order.
    events.sort(key=lambda e: (e.send_at_ms, e.topic != orders, e.ts))
    return events


class ArrivalReader:
    """Reads one topic as it is written and notes, per offset, the wall-clock ms it arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.arrived: dict[int, int] = {}
        self.ids = 0
        self._stop = asyncio.Event()

    async def run(self, expected_ids: int, timeout_s: float) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, fetch_max_wait_ms=20)
        await consumer.start()
        try:
            tp = TopicPartition(self.topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + timeout_s
            done = False
            while time.monotonic() < deadline and not (done and self._stop.is_set()):
                batch = await consumer.getmany(tp, timeout_ms=50)
                now = collect.now_ms()
                for r in batch.get(tp, []):
                    self.arrived[r.offset] = now
                    keys = [k for k, _ in r.headers]
                    self.ids += collect.ID in keys
                    # Every id, then an end marker (idle max lets only the first one through).
                    done = done or (collect.END in keys and self.ids >= expected_ids)
        finally:
            await consumer.stop()

    def finish(self) -> None:
        """Stop once every id has arrived (``run`` keeps going until then, or its timeout)."""
        self._stop.set()


async def write_arrival_log(
    bootstrap: str, topic: str, events: list[Event], sent_ms: np.ndarray[Any, Any], markers: list[Event]
) -> list[int]:
    """The raw inputs in the order they were produced, each naming its own topic; returns the
    arrival (send) time per offset of the log."""
    order = np.argsort(sent_ms, kind="stable")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    await producer.start()
    arrived: list[int] = []
    try:
        futures = []
        for i in order.tolist():
            e = events[i]
            headers = [(SOURCE_TOPIC, e.topic.encode()), (collect.ID, b"%d" % i)]
            futures.append(
                await producer.send(
                    topic, e.value, key=e.key, partition=0, timestamp_ms=e.ts, headers=headers
                )
            )
            arrived.append(int(sent_ms[i]))
        for m in markers:
            headers = [(SOURCE_TOPIC, m.topic.encode()), (collect.END, b"1")]
            futures.append(
                await producer.send(
                    topic, m.value, key=m.key, partition=0, timestamp_ms=m.ts, headers=headers
                )
            )
            arrived.append(int(sent_ms.max()))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return arrived
