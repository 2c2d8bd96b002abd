"""``make demo``: the whole pipeline, end to end, on a local Kafka broker.

1. A local broker (real Apache Kafka, KRaft) and a SparkSession start side by side.
2. Ad impressions and clicks (4 + 4 partitions, about 100k records over 30 s) are produced
   live; one impressions partition lags: every second it writes the records of 8–9 s ago.
3. The timesync sidecar merges them into one ordered topic (``max.task.idle.ms=2500``: longer
   than the gap between the lagging partition's bursts, so it is waited for, not skipped). When
   the producers stop, the last records wait one idle at most; the demo prints that drain.
4. While data flows, Spark counts impressions and clicks per ad over 5 s windows, live, on the
   ordered topic. Afterwards the same count runs twice more in micro-batches of two seconds of
   arrivals at the same watermark delay: over the raw inputs in the order a plain consumer
   received them, and over the ordered topic. Then Spark joins impressions with their clicks
   and emits per-key final results on the ordered topic.
5. A summary compares what a plain consumer of the inputs sees with the ordered topic, and what
   Spark dropped as late either way; ``demo-output/event-time-vs-arrival.png`` shows it.

``DEMO_FORMAT=avro`` runs all of it on Avro values through a Schema Registry
(:mod:`bench.demo_avro`); the default is JSON.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from bench import demo_avro, demo_drain
from bench.demo_arrivals import Arrivals, plot, watch, write_arrival_log
from bench.demo_settings import (
    CLICKS,
    DURATION_S,
    IDLE_MS,
    IMPRESSIONS,
    LAG_MS,
    ORDERED,
    OUT,
    RAW_ARRIVALS,
    REPLAY_BATCH_S,
    SPARK_DELAY_MS,
    SPARK_OUTPUTS,
)
from bench.demo_spark import SparkPart
from bench.progress import console, track
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, workloads
from testkit.local_broker import kafka
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event


@dataclass
class Outcome:
    """What the demo saw, for its summary: both readers' arrivals, the sidecar's task status, the
    rows each Spark query dropped as late, and what the join and the suppression wrote."""

    raw: Arrivals
    merged: Arrivals
    status: dict[str, Any]
    dropped: dict[str, int]
    per_batch: int
    #: Seconds from the producers' stop to the last record on the ordered topic (None: none came).
    drain_s: float | None = None
    joined: int = 0
    finals: int = 0


async def count(bootstrap: str, topic: str) -> int:
    return len(await kafka_io.read_topics(bootstrap, [topic], idle_s=1.0, timeout_s=30))


async def start_sidecar(
    bootstrap: str, spark: SparkPart, registry_url: str | None
) -> tuple[SidecarProcess, int | None]:
    """Create the topics, register the Avro schema (``DEMO_FORMAT=avro``), start the sidecar."""
    outputs = [TopicSpec(f"demo.{name}") for name in SPARK_OUTPUTS]
    await kafka_io.create_topics(
        bootstrap, [TopicSpec(IMPRESSIONS, 4), TopicSpec(CLICKS, 4), TopicSpec(RAW_ARRIVALS), *outputs]
    )
    schema_id = None
    if registry_url is not None:  # the Spark jobs decode with the subject's schema
        schema_id, spark.values = demo_avro.register(registry_url)
    sidecar = SidecarProcess(
        bootstrap,
        [IMPRESSIONS, CLICKS],
        ORDERED,
        {"max.task.idle.ms": IDLE_MS, "watermark.heartbeat.ms": 500, "watermark.max.delay.ms": 2_000},
        log_dir=OUT,
    )
    await sidecar.start()
    console.print(f"sidecar healthy (max.task.idle.ms={IDLE_MS}); HTTP on 127.0.0.1:{sidecar.http_port}")
    return sidecar, schema_id


def ad_traffic(schema_id: int | None, registry_url: str | None) -> list[Event]:
    """The workload; event times follow the wall clock from now on, as in a live system."""
    events = workloads.ad_traffic(
        IMPRESSIONS, CLICKS, int(time.time() * 1000), duration_s=DURATION_S, lag_ms=LAG_MS
    )
    if schema_id is not None:
        events = demo_avro.as_avro(events, schema_id)
        console.print(f"values: Avro, schema id {schema_id} of subject {demo_avro.SUBJECT} at {registry_url}")
    console.print(
        f"[bold]workload[/]: {len(events):,} records over {DURATION_S:.0f} s — impressions and clicks, "
        f"4 partitions each; impressions[3] lags: every second it writes records {LAG_MS // 1000}–"
        f"{LAG_MS // 1000 + 1} s old"
    )
    return events


async def drain(sidecar: SidecarProcess, total: int) -> None:
    """Wait (at most 60 s) until the sidecar has written all ``total`` records."""
    with track(
        "drain: the last records wait one idle at most, from each partition's last arrival", total=total
    ) as task:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = (await sidecar.status())["tasks"]["0"]["records_out"]
            task.update(out)
            if out >= total:
                break
            await asyncio.sleep(0.5)


async def live(bootstrap: str, sidecar: SidecarProcess, spark: SparkPart, events: list[Event]) -> Outcome:
    """Produce the workload live while both readers watch; drain; let Spark's last windows close;
    stop the live queries and the sidecar."""
    t0 = time.monotonic()
    stop = asyncio.Event()
    raw, merged = Arrivals(keep=True), Arrivals()
    spark.per_batch = max(1, round(REPLAY_BATCH_S * len(events) / DURATION_S))
    watchers = [
        asyncio.create_task(watch(bootstrap, [IMPRESSIONS, CLICKS], raw, t0, stop)),
        asyncio.create_task(watch(bootstrap, [ORDERED], merged, t0, stop)),
    ]
    with track("produce (live)", total=len(events), every_s=5) as task:
        await kafka_io.produce(bootstrap, events, paced=True, progress=task.update)
    producers_stopped_ms = (time.monotonic() - t0) * 1000
    await drain(sidecar, len(events))
    with track("let the last windows close (heartbeats move Spark's watermark)", total=10, every_s=5) as task:
        for s in range(10):
            await asyncio.sleep(1)
            task.update(s + 1)
    stop.set()
    await asyncio.gather(*watchers)
    status = (await sidecar.status())["tasks"]["0"]
    dropped = await asyncio.to_thread(spark.stop_live)
    drained = demo_drain.drain_s(producers_stopped_ms, [at for at, _, _ in merged.rows])
    return Outcome(raw, merged, status, dropped, spark.per_batch, drained)


async def spark_afterwards(bootstrap: str, spark: SparkPart, outcome: Outcome) -> None:
    """Replay both arrival orders through the count; the join and the final results per ad."""
    await write_arrival_log(bootstrap, outcome.raw)
    dropped = outcome.dropped
    with track(
        f"Spark: counts per ad, raw arrivals vs ordered, in micro-batches of {spark.per_batch:,} records",
        total=None,
    ):
        dropped.update(await asyncio.to_thread(spark.run_to_end, "counts-raw", "counts-ordered"))
    with track("Spark: impression–click join and final results per ad, on the ordered topic", total=None):
        dropped.update(await asyncio.to_thread(spark.run_to_end, "clicks-joined", "final-per-ad"))
    await asyncio.to_thread(spark.stop)
    outcome.finals = await count(bootstrap, "demo.final-per-ad")
    outcome.joined = await count(bootstrap, "demo.clicks-joined")


def summary(o: Outcome) -> Table:
    """What each reader saw, side by side."""
    raw, merged, status, dropped = o.raw, o.merged, o.status, o.dropped
    raw_late, raw_worst = workloads.out_of_order(raw.timestamps)
    merged_late, merged_worst = workloads.out_of_order(merged.timestamps)
    table = Table(title="timesync demo — what each reader sees")
    table.add_column("")
    table.add_column("raw inputs (plain consumer)", justify="right")
    table.add_column("ordered topic", justify="right")
    table.add_row(
        "records", f"{len(raw.rows):,}", f"{len(merged.rows):,} (sidecar wrote {status['records_out']:,})"
    )
    table.add_row(
        "out of timestamp order",
        f"{raw_late / max(1, len(raw.rows)):.1%} ({raw_late:,})",
        f"{merged_late / max(1, len(merged.rows)):.1%} ({merged_late:,})",
    )
    table.add_row("worst lateness", f"{raw_worst:,} ms", f"{merged_worst:,} ms")
    table.add_row("enforced / late (sidecar)", "—", f"{status['enforced']:,} / {status['late']:,}")
    table.add_row(
        f"Spark rows dropped as late, counts per ad (delay {SPARK_DELAY_MS} ms, micro-batches of "
        f"{o.per_batch:,} records in arrival order)",
        f"{dropped['counts-raw']:,}",
        f"{dropped['counts-ordered']:,}",
    )
    table.add_row("Spark live counts per ad: rows dropped as late", "—", f"{dropped['counts-live']:,}")
    table.add_row(
        "Spark join: impression–click pairs", "—", f"{o.joined:,} (dropped {dropped['clicks-joined']:,})"
    )
    table.add_row(
        "Spark suppress: final results per ad and window",
        "—",
        f"{o.finals:,} (dropped {dropped['final-per-ad']:,})",
    )
    return table


async def run(
    bootstrap: str, spark: SparkPart, session_ready: asyncio.Future[None], registry_url: str | None = None
) -> int:
    sidecar, schema_id = await start_sidecar(bootstrap, spark, registry_url)
    with track("Spark session", total=None) as _:
        await session_ready
    await asyncio.to_thread(spark.start_live)
    console.print("Spark: counts per ad over 5 s windows running live on the ordered topic")
    events = ad_traffic(schema_id, registry_url)
    outcome = await live(bootstrap, sidecar, spark, events)
    stopped = await sidecar.stop()
    await spark_afterwards(bootstrap, spark, outcome)
    console.print(summary(outcome))
    console.print(demo_drain.line(outcome.drain_s, IDLE_MS))
    plot(outcome.raw, outcome.merged, OUT / "event-time-vs-arrival.png")
    console.print(f"plot: {OUT / 'event-time-vs-arrival.png'}   sidecar log: {sidecar.log_path}")
    merged_late, _ = workloads.out_of_order(outcome.merged.timestamps)
    ok = len(outcome.merged.rows) == len(events) and merged_late == 0 and stopped == 0
    if not ok:
        console.print(
            "[red]the ordered topic is incomplete or out of order, or the sidecar did not stop "
            "cleanly — see the sidecar log[/]"
        )
    return 0 if ok else 1


async def main_async() -> int:
    value_format = demo_avro.demo_format()
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="timesync-demo-"))
    spark = SparkPart("", workdir)
    loop = asyncio.get_running_loop()
    session_ready: asyncio.Future[None] = loop.create_future()

    async def start_spark() -> None:
        try:
            await asyncio.to_thread(spark.start_session)
            session_ready.set_result(None)
        except BaseException as e:  # surfaced where the demo waits for it
            session_ready.set_exception(e)

    spark_start = asyncio.create_task(start_spark())
    await asyncio.sleep(0)  # hand the session start to its thread before the broker start blocks
    try:
        t0 = time.monotonic()
        with kafka() as bootstrap, ExitStack() as stack:
            console.print(f"Kafka broker up at {bootstrap} in {time.monotonic() - t0:.1f} s")
            registry_url = None
            if value_format == "avro":
                registry_url = stack.enter_context(demo_avro.registry())
                console.print(f"Schema Registry at {registry_url}")
            spark.bootstrap = bootstrap
            code = await run(bootstrap, spark, session_ready, registry_url)
        console.print("broker stopped; demo done")
        return code
    finally:
        await spark_start
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    # aiokafka logs transient retries (a coordinator electing itself) as errors; the demo reports
    # what matters itself.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    console.print("[bold]timesync demo[/] — starting a local Kafka broker and a SparkSession…")
    return asyncio.run(main_async())


if __name__ == "__main__":
    sys.exit(main())
