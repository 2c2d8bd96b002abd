"""The output side as ``/status`` sees it: the write the pipeline waits in, and batches in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sidecar.output.writer import OutputActivity, OutputWriter


class Batch:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def append(self, **record: Any) -> int | None:
        self.records.append(record)
        return len(self.records)

    def record_count(self) -> int:
        return len(self.records)


class SlowProducer:
    """Takes a batch only when the test opens the gate: a throttled output."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.futures: list[asyncio.Future[object]] = []

    async def send_batch(self, batch: Batch, topic: str, *, partition: int) -> asyncio.Future[object]:
        await self.gate.wait()
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


class Clock:
    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def filled(n: int) -> list[Batch]:
    batches = [Batch() for _ in range(n)]
    for b in batches:
        b.append(key=None, value=b"v", timestamp=1, headers=[])
    return batches


async def test_a_write_waiting_for_the_producer_shows_where_and_since_when() -> None:
    clock = Clock()
    activity = OutputActivity(clock)
    producer = SlowProducer()
    writer = OutputWriter(producer, activity=activity)  # type: ignore[arg-type]

    writing = asyncio.create_task(writer.send("out", 3, filled(2)))
    await asyncio.sleep(0)
    clock.now = 6_500
    assert activity.snapshot(clock.now)["writing"] == {
        "topic": "out",
        "partition": 3,
        "since": 1_000,
        "waiting_ms": 5_500,
    }

    producer.gate.set()
    assert len(await writing) == 2
    assert activity.snapshot(clock.now) == {"batches_in_flight": 2, "last_ack": None, "writing": None}


async def test_acknowledged_batches_leave_the_flight_and_date_the_last_ack() -> None:
    clock = Clock()
    activity = OutputActivity(clock)
    producer = SlowProducer()
    producer.gate.set()
    writer = OutputWriter(producer, activity=activity)  # type: ignore[arg-type]
    [first] = await writer.send("out", 0, filled(1))
    [second] = await writer.send("out", 0, filled(1))

    clock.now = 2_000
    first.set_result(None)
    second.set_exception(RuntimeError("broker said no"))
    await asyncio.sleep(0)  # done callbacks run on the loop
    snapshot = activity.snapshot(clock.now)
    assert snapshot["batches_in_flight"] == 0
    assert snapshot["last_ack"] == 2_000, "a failed batch is not an acknowledgement"
    with pytest.raises(RuntimeError):
        second.result()
