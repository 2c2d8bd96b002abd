"""What the demo's two readers saw: the raw inputs as a plain consumer receives them, and the
ordered topic; the raw arrival order written back as one topic for Spark to replay; and the
picture of both (event time against arrival).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.axes import plain_ticks
from bench.demo_settings import RAW_ARRIVALS
from sidecar.core.stamping import SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC


@dataclass
class Arrivals:
    """What a consumer saw: (arrival ms since start, event time, partition label) in order."""

    rows: list[tuple[float, int, str]] = field(default_factory=list)
    #: With ``keep``: (topic, partition, offset, key, value, timestamp) of each record, in order.
    keep: bool = False
    records: list[tuple[str, int, int, bytes | None, bytes, int]] = field(default_factory=list)

    @property
    def timestamps(self) -> list[int]:
        return [ts for _, ts, _ in self.rows]


async def watch(bootstrap: str, topics: list[str], into: Arrivals, t0: float, stop: asyncio.Event) -> None:
    """A plain consumer: records in the order they arrive, with the time they arrived."""
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=f"demo-watch-{time.time_ns()}",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        while not stop.is_set():
            for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                now = (time.monotonic() - t0) * 1000
                label = f"{tp.topic.split('.')[-1]}[{tp.partition}]"
                for r in records:
                    if r.value:  # heartbeats (empty value) are not data
                        into.rows.append((now, r.timestamp, label))
                        if into.keep:
                            into.records.append(
                                (tp.topic, tp.partition, r.offset, r.key, r.value, r.timestamp)
                            )
    finally:
        await consumer.stop()


async def write_arrival_log(bootstrap: str, arrivals: Arrivals) -> int:
    """The raw inputs as one single-partition topic, in the order the plain consumer received
    them, each record naming its source as the sidecar would (so Spark treats it as the inputs).

    A Spark query replaying the input topics themselves cannot show what a live reader of them
    suffers: its Kafka source advances every partition in step with its backlog, which puts the
    lagging partition back in line. Replaying this log can.
    """
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_batch_size=1 << 20)
    await producer.start()
    try:
        sent = []
        batch = producer.create_batch()
        for topic, partition, offset, key, value, ts in arrivals.records:
            headers = [
                (SOURCE_TOPIC, topic.encode()),
                (SOURCE_PARTITION, b"%d" % partition),
                (SOURCE_OFFSET, b"%d" % offset),
            ]
            if batch.append(key=key, value=value, timestamp=ts, headers=headers) is None:
                sent.append(await producer.send_batch(batch, RAW_ARRIVALS, partition=0))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=ts, headers=headers)
        sent.append(await producer.send_batch(batch, RAW_ARRIVALS, partition=0))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return len(arrivals.records)


def plot(raw: Arrivals, merged: Arrivals, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    base = min(ts for _, ts, _ in raw.rows + merged.rows)
    for ax, arrivals, title in (
        (axes[0], raw, "raw inputs, as a plain consumer sees them"),
        (axes[1], merged, "timesync's ordered topic"),
    ):
        labels = sorted({label for *_, label in arrivals.rows})
        for label in labels:
            xs = [at / 1000 for at, _, lab in arrivals.rows if lab == label]
            ys = [(ts - base) / 1000 for _, ts, lab in arrivals.rows if lab == label]
            lagging = label == "impressions[3]"
            ax.scatter(
                xs,
                ys,
                s=2 if not lagging else 5,
                label=label,
                alpha=0.6,
                color="crimson" if lagging else None,
            )
        plain_ticks(ax)
        ax.set_title(title)
        ax.set_xlabel("arrival at the consumer (s since start)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("event time (s)")
    axes[0].legend(markerscale=4, fontsize=7, loc="upper left")
    fig.suptitle(
        "Event time vs arrival: the lagging partition (red) arrives in bursts; timesync waits for it"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
