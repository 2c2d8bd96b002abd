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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from rich.table import Table

from bench import demo_avro, demo_drain
from bench.progress import console, track
from sidecar.core.stamping import SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, workloads
from testkit.local_broker import kafka
from testkit.sidecar_process import SidecarProcess

IMPRESSIONS, CLICKS, ORDERED = "demo.impressions", "demo.clicks", "demo.ordered"
#: The raw inputs as one topic, in the order the plain consumer received them.
RAW_ARRIVALS = "demo.raw-arrivals"
DURATION_S = 30.0
IDLE_MS = 2_500
LAG_MS = 8_000
SPARK_DELAY_MS = 1_000
#: Arrivals per replayed micro-batch, in seconds: well under the lagging partition's 8 s.
REPLAY_BATCH_S = 2.0
OUT = Path("demo-output")
SPARK_OUTPUTS = ("counts-live", "counts-ordered", "counts-raw", "clicks-joined", "final-per-ad")


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


#: Where Spark's "Current batch is falling behind" warning comes from (4.2, and before it moved).
TRIGGER_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
)


class SparkPart:
    """The Spark side of the demo, run in worker threads (pyspark calls block).

    A windowed count per ad runs live on the ordered topic while data flows. What Spark drops as
    late depends on when records arrive, and on a loaded 2-core machine a live query's
    micro-batches stretch to several seconds, so the raw-versus-ordered comparison replays both
    sides afterwards in micro-batches of the same size — two seconds of arrivals — at the same
    watermark delay (``available-now``): the raw inputs in the order a plain consumer received
    them, and the ordered topic. The join and the per-key suppression then run on the ordered
    topic as it stands: it is ordered, and its heartbeats close the last windows, so their
    results are final.
    """

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir
        #: Avro values' decoding plan (``DEMO_FORMAT=avro``); ``None``: JSON values.
        self.values: Any = None
        self.live: dict[str, Any] = {}
        self.spark: Any = None
        self.per_batch = 1  # records per replayed micro-batch, set once the workload is known

    def start_session(self) -> None:
        from spark_consumer.metrics import track_drops
        from spark_consumer.session import SessionOptions, get_session

        self.spark = get_session(SessionOptions(master="local[2]", app_name="timesync-demo"))
        track_drops(self.spark)
        self._quiet_trigger_warnings()

    def _quiet_trigger_warnings(self) -> None:
        """The demo's live query runs a 1 s trigger on 2 shared cores, so Spark's "falling behind"
        warning would interleave with the demo's own lines; it is held to errors here, for the
        demo only (users keep it: for them it is worth reading)."""
        jvm = self.spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.ERROR
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        for name in TRIGGER_LOGGERS:
            configurator.setLevel(name, level)

    def _jobs(self) -> dict[str, Any]:
        from spark_consumer.jobs import aggregate, join, suppress
        from spark_consumer.options import AggSpec, WindowSpec
        from spark_consumer.schema import load_schema
        from spark_consumer.source import SourceOptions
        from spark_consumer.value_decoding import value_struct

        if self.values is None:
            schema = load_schema("imp STRING, ad STRING, ts BIGINT")
        else:
            schema = value_struct(self.spark, self.values)
        window = WindowSpec("tumbling", size_ms=5_000)

        def source(topic: str, per_batch: int | None = None) -> SourceOptions:
            return SourceOptions(
                self.bootstrap,
                topic,
                watermark_delay_ms=SPARK_DELAY_MS,
                max_offsets_per_trigger=per_batch,
                values=self.values,
            )

        per_ad = aggregate.AggregateOptions(window, key_field="ad", value_schema=schema)
        pairs = join.JoinOptions(
            IMPRESSIONS, CLICKS, within_ms=10_000, key_field="imp", left_schema=schema, right_schema=schema
        )
        finals = suppress.SuppressOptions(
            window,
            grace_ms=1_000,
            ttl_ms=60_000,
            aggs=(AggSpec("count"),),
            key_field="ad",
            value_schema=schema,
        )
        return {
            "counts-live": lambda: aggregate.build(self.spark, source(ORDERED), per_ad),
            "counts-ordered": lambda: aggregate.build(self.spark, source(ORDERED, self.per_batch), per_ad),
            "counts-raw": lambda: aggregate.build(self.spark, source(RAW_ARRIVALS, self.per_batch), per_ad),
            "clicks-joined": lambda: join.build(self.spark, source(ORDERED), pairs),
            "final-per-ad": lambda: suppress.build(self.spark, source(ORDERED), finals),
        }

    def _start(self, name: str, trigger: str | int) -> Any:
        from spark_consumer.sinks import SinkOptions, start

        sink = SinkOptions(
            "kafka",
            str(self.workdir / name),
            self.bootstrap,
            f"demo.{name}",
            trigger=trigger,
            query_name=name,
        )
        return start(self._jobs()[name](), sink)

    def start_live(self) -> None:
        self.live["counts-live"] = self._start("counts-live", 1_000)

    def stop_live(self) -> dict[str, int]:
        """Stop the live queries (each after its running micro-batch); rows each dropped as late."""
        from spark_consumer.sinks import stop_between_batches

        # Stopping streaming queries makes Spark log cancelled tasks; failures are checked below.
        self.spark.sparkContext.setLogLevel("OFF")
        dropped = {}
        for name, query in self.live.items():
            stop_between_batches(query)
            dropped[name] = self._dropped(name, query)
        return dropped

    def run_to_end(self, *names: str) -> dict[str, int]:
        """Run queries side by side over what their topics hold now; the rows each dropped as late.

        Their micro-batches are cut by offsets, not by time, so running them together changes
        nothing they compute.
        """
        queries = {name: self._start(name, "available-now") for name in names}
        for query in queries.values():
            query.awaitTermination()
        return {name: self._dropped(name, query) for name, query in queries.items()}

    @staticmethod
    def _dropped(name: str, query: Any) -> int:
        from spark_consumer.metrics import drops

        error = query.exception()
        if error is not None:
            raise RuntimeError(f"Spark query {name} failed: {str(error).splitlines()[0]}")
        return drops(query).total

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()


async def count(bootstrap: str, topic: str) -> int:
    return len(await kafka_io.read_topics(bootstrap, [topic], idle_s=1.0, timeout_s=30))


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


async def run(
    bootstrap: str, spark: SparkPart, session_ready: asyncio.Future[None], registry_url: str | None = None
) -> int:
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
    with track("Spark session", total=None) as _:
        await session_ready
    await asyncio.to_thread(spark.start_live)
    console.print("Spark: counts per ad over 5 s windows running live on the ordered topic")

    # Event times follow the wall clock from now on, as in a live system.
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
    with track(
        "drain: the last records wait one idle at most, from each partition's last arrival",
        total=len(events),
    ) as task:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = (await sidecar.status())["tasks"]["0"]["records_out"]
            task.update(out)
            if out >= len(events):
                break
            await asyncio.sleep(0.5)
    with track("let the last windows close (heartbeats move Spark's watermark)", total=10, every_s=5) as task:
        for s in range(10):
            await asyncio.sleep(1)
            task.update(s + 1)
    stop.set()
    await asyncio.gather(*watchers)
    drain = demo_drain.drain_s(producers_stopped_ms, [at for at, _, _ in merged.rows])
    status = (await sidecar.status())["tasks"]["0"]
    dropped = await asyncio.to_thread(spark.stop_live)
    stopped = await sidecar.stop()
    await write_arrival_log(bootstrap, raw)
    with track(
        f"Spark: counts per ad, raw arrivals vs ordered, in micro-batches of {spark.per_batch:,} records",
        total=None,
    ):
        dropped.update(await asyncio.to_thread(spark.run_to_end, "counts-raw", "counts-ordered"))
    with track("Spark: impression–click join and final results per ad, on the ordered topic", total=None):
        dropped.update(await asyncio.to_thread(spark.run_to_end, "clicks-joined", "final-per-ad"))
    await asyncio.to_thread(spark.stop)
    finals = await count(bootstrap, "demo.final-per-ad")
    joined = await count(bootstrap, "demo.clicks-joined")

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
        f"{spark.per_batch:,} records in arrival order)",
        f"{dropped['counts-raw']:,}",
        f"{dropped['counts-ordered']:,}",
    )
    table.add_row("Spark live counts per ad: rows dropped as late", "—", f"{dropped['counts-live']:,}")
    table.add_row(
        "Spark join: impression–click pairs", "—", f"{joined:,} (dropped {dropped['clicks-joined']:,})"
    )
    table.add_row(
        "Spark suppress: final results per ad and window",
        "—",
        f"{finals:,} (dropped {dropped['final-per-ad']:,})",
    )
    console.print(table)
    console.print(demo_drain.line(drain, IDLE_MS))
    plot(raw, merged, OUT / "event-time-vs-arrival.png")
    console.print(f"plot: {OUT / 'event-time-vs-arrival.png'}   sidecar log: {sidecar.log_path}")
    ok = len(merged.rows) == len(events) and merged_late == 0 and stopped == 0
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
