"""``make demo``: the whole pipeline, end to end, on a local broker.

Today it shows the problem timesync solves: a fast partition beside a slow, bursty one, read by
a plain consumer, arrives far out of event-time order.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time

from aiokafka import AIOKafkaConsumer
from rich.table import Table

from bench import kafka_io, workloads
from bench.local_broker import kafka
from bench.progress import console, track
from sidecar.kafka.admin import TopicSpec

FAST, SLOW = "demo.fast", "demo.slow"


async def plain_consumer(bootstrap: str, expected: int, timeout_s: float) -> list[int]:
    """Timestamps in the order a plain subscriber of both topics receives them, live."""
    consumer = AIOKafkaConsumer(
        FAST,
        SLOW,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=f"demo-plain-{time.time_ns()}",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen: list[int] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(seen) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                seen.extend(r.timestamp for r in records)
    finally:
        await consumer.stop()
    return seen


async def run(bootstrap: str) -> int:
    base = int(time.time() * 1000) // 1000 * 1000
    events = workloads.skewed(FAST, SLOW, base, duration_s=8.0, fast_rate=2_000.0, slow_rate=2.0, seed=7)
    await kafka_io.create_topics(bootstrap, [TopicSpec(FAST), TopicSpec(SLOW)])
    console.print(
        f"[bold]workload[/]: {len(events)} records over 8 s — {FAST} at 2,000/s, "
        f"{SLOW} sparse and written in bursts every 2.5 s"
    )
    reader = asyncio.create_task(plain_consumer(bootstrap, len(events), timeout_s=60))
    with track("produce (live, paced)", total=len(events), every_s=2) as task:
        await kafka_io.produce(bootstrap, events, paced=True, progress=task.update)
    seen = await reader
    late, worst = workloads.out_of_order(seen)

    table = Table(title="What a plain consumer of both topics sees")
    table.add_column("records")
    table.add_column("out of timestamp order", justify="right")
    table.add_column("share", justify="right")
    table.add_column("worst lateness", justify="right")
    table.add_row(str(len(seen)), str(late), f"{late / max(1, len(seen)):.1%}", f"{worst} ms")
    console.print(table)
    if len(seen) != len(events):
        console.print(f"[red]expected {len(events)} records, read {len(seen)}[/]")
        return 1
    return 0


def main() -> int:
    # aiokafka logs transient retries (a coordinator still electing itself) as errors; the demo
    # reports what matters itself.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    console.print("[bold]timesync demo[/] — starting a local Kafka broker (KRaft)…")
    t0 = time.monotonic()
    with kafka() as bootstrap:
        console.print(f"broker up at {bootstrap} in {time.monotonic() - t0:.1f} s")
        code = asyncio.run(run(bootstrap))
    console.print("broker stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
