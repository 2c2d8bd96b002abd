"""The Spark part of the benchmark: what Spark drops, and how late its final results come, when it
reads the raw inputs versus timesync's ordered topic, at the same watermark delay.

**Workload.** ``orders`` arrive on time; each order's payment (same ``id``, 50–500 ms later in
event time) sits on a ``payments`` partition whose producer delivers in bursts every 5 s — the
KIP-353 shape, with a join key. Event time = the wall clock at the start + the planned send
offset, so "how long after its event time did a result appear" is a real latency.

**Live part.** The workload is written at its arrival times while one sidecar
(``max.task.idle.ms`` = ``Plan.spark_idle``) merges both topics into the ordered topic; a reader
in the harness notes when each ordered record appeared.

**Spark part: a replay of the two arrival orders.** A Spark query reading the raw inputs live
receives the records in the order they arrive, across both topics. A replay of the raw topics
cannot reproduce that (Spark's Kafka source advances every partition in proportion to its
backlog, which interleaves orders and payments far better than they arrived), and on this
2-core machine four stateful queries cannot keep up live with a useful trigger. So the harness
writes the **raw arrival log** — the input records in the order they were produced, each with
its own topic in ``timesync.source.topic`` (exactly the columns Spark derives for a raw record:
its topic, no watermark, no late/enforced marks) — and Spark reads both it and the ordered topic
in micro-batches of the same number of records (``maxOffsetsPerTrigger``, what ``trigger_ms``
of arrivals holds at the workload's rate), ``available-now``, one query at a time.

* ``aggregate`` — tumbling 2 s windows, count per store (the Kafka key) over both topics;
* ``join`` — orders ⋈ payments on ``id`` within 2 s (inner).

Spark drops a row in a stateful operator when its event time is at or below the previous
micro-batch's watermark (max event time − delay); drops are Spark's own
``numRowsDroppedByWatermark`` (``spark_consumer.metrics``).

**Latency of a final result** = when the micro-batch that emitted it could have started (the
arrival of its last record) − the event time it closes (window end; ``max(order ts, payment ts)``
for the join). Spark's own processing time is left out: it is the same for both sides and is
this machine's, not the ordering's. Results in the last 3 s of event time (closed only by the
end markers) are left out of the latency figures.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench import analysis, collect
from bench.progress import console, track
from bench.systems import SystemSpec, running
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.workloads import Event

if TYPE_CHECKING:
    from bench.plan import Plan

WATERMARK_DELAY_MS = 1000
WINDOW_MS = 2000
JOIN_WITHIN_MS = 2000
BURST_EVERY_MS = 5000
STORES = 10
TAIL_EXCLUDED_MS = 3000
MARKER_AHEAD_MS = 10_000
SOURCE_TOPIC = "timesync.source.topic"
JOBS = ("aggregate", "join")
SIDES = ("raw", "ordered")


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


def start_replay(
    spark: Any, bootstrap: str, topic: str, job: str, orders: str, payments: str, per_batch: int, ck: Path
) -> tuple[list[tuple[int, list[dict[str, Any]]]], Any]:
    """Start ``job`` over ``topic`` in micro-batches of ``per_batch`` records, ``available-now``.

    Returns the list the rows of each batch are appended to (batch id, rows) and the query. The
    batches are cut by offsets, not by time, so queries may run side by side without changing
    what any of them computes.
    """
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from spark_consumer.jobs import aggregate, join
    from spark_consumer.options import AggSpec, WindowSpec
    from spark_consumer.session import ROCKSDB_PROVIDER
    from spark_consumer.source import SourceOptions

    source = SourceOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        watermark_delay_ms=WATERMARK_DELAY_MS,
        max_offsets_per_trigger=per_batch,
    )
    if job == "aggregate":
        window = aggregate.AggregateOptions(WindowSpec("tumbling", size_ms=WINDOW_MS), [AggSpec("count")])
        output = aggregate.build(spark, source, window)
    else:
        schema = StructType([StructField("ts", LongType()), StructField("id", StringType())])
        options = join.JoinOptions(
            orders, payments, JOIN_WITHIN_MS, "inner", key_field="id", left_schema=schema
        )
        output = join.build(spark, source, options)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    lock = threading.Lock()
    columns = ("key", "ts", "window_end", "count") if job == "aggregate" else ("key", "ts")

    def keep(frame: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in frame.select(*columns).collect()]
        with lock:
            batches.append((batch_id, rows))

    # The join's operator (transformWithState) runs only on the RocksDB state store; a query keeps
    # the session's settings of the moment it starts.
    provider = "spark.sql.streaming.stateStore.providerClass"
    session_provider = spark.conf.get(provider)
    if job == "join":
        spark.conf.set(provider, ROCKSDB_PROVIDER)
    try:
        query = (
            output.frame.writeStream.outputMode(output.output_mode)
            .foreachBatch(keep)
            .option("checkpointLocation", str(ck))
            .queryName(f"bench-{job}-{topic}")
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set(provider, session_provider)
    return batches, query


def batch_ends(query: Any, topic: str) -> dict[int, int]:
    """Each data batch's end offset (exclusive), from the query's progress reports."""
    ends: dict[int, int] = {}
    for progress in query.recentProgress:
        if progress.get("numInputRows"):
            end = orjson.loads(progress["sources"][0]["endOffset"])
            ends[int(progress["batchId"])] = int(end[topic]["0"])
    return ends


def summarise(
    job: str,
    batches: list[tuple[int, list[dict[str, Any]]]],
    ends: dict[int, int],
    arrived: list[int],
    dropped: int,
    last_ts: int,
    expected: int,
) -> dict[str, Any]:
    """Drops, results and final-result latency of one replay."""
    data_batches = sorted(ends)
    latencies = []
    results = 0
    counted = 0
    for batch_id, rows in batches:
        # The batch started once its input had arrived: that of the last data batch up to it (a
        # no-data batch runs right after the data batch before it).
        upto = [b for b in data_batches if b <= batch_id]
        ready = arrived[min(len(arrived), ends[upto[-1]]) - 1] if upto else arrived[0]
        for row in rows:
            if row["key"] in (None, "bench-end"):
                continue
            results += 1
            closes = int(row["window_end"]) if job == "aggregate" else int(row["ts"])
            counted += int(row["count"]) if job == "aggregate" else 1
            if closes <= last_ts - TAIL_EXCLUDED_MS:
                latencies.append(ready - closes)
    return {
        "rows_dropped": dropped,
        "results": results,
        # aggregate: input rows counted in some window; join: matched pairs (one per order)
        "rows_in_results": counted,
        "rows_expected": expected,
        "micro_batches_with_data": len(data_batches),
        "final_result_latency": analysis.latency(np.asarray(latencies, dtype=np.int64)),
    }


class EarlySession:
    """A SparkSession being started in a thread (``--quick`` starts it before the live runs: a
    JVM costs 10-40 s here, and the quick run's figures are not for comparison anyway)."""

    def __init__(self) -> None:
        self.timing: dict[str, float] = {}
        self.task = asyncio.create_task(asyncio.to_thread(_session, self.timing))

    def __await__(self) -> Any:
        return self.task.__await__()


async def spark_phase(
    bootstrap: str, tag: str, p: Plan, out_dir: Path, session: EarlySession | None = None
) -> tuple[dict[str, Any], Any]:
    """Write the workload live through a sidecar, then replay both arrival orders through Spark.

    ``session``: a SparkSession already being started (else it is started after the live part,
    so that its JVM start does not share the CPU with the sidecar). Returns the results and the
    session, for the phases after this one (:mod:`bench.spark_rates`).
    """
    session_timing: dict[str, float] = {}
    from spark_consumer import metrics

    prefix = f"bench-{tag}-spark"
    orders, payments = f"{prefix}-orders", f"{prefix}-payments"
    ordered, raw_log = f"{prefix}-ordered", f"{prefix}-raw-arrival"
    await kafka_io.create_topics(bootstrap, [TopicSpec(t) for t in (orders, payments, ordered, raw_log)])

    if session is not None:
        session_timing = session.timing

    # -- live: the workload through the sidecar --------------------------------------------------
    spec = SystemSpec("timesync", p.spark_idle)
    reader = ArrivalReader(bootstrap, ordered)
    async with running(spec, bootstrap, [orders, payments], ordered, f"{tag}-spark", out_dir / "logs"):
        # Event time follows the clock from the moment the first record goes out.
        events = orders_and_payments(
            orders, payments, collect.now_ms(), p.spark_duration_s, p.spark_rate_per_s, p.seed
        )
        sent = np.zeros(len(events), dtype=np.int64)
        last_ts = max(e.ts for e in events)
        markers = [Event(t, 0, last_ts + MARKER_AHEAD_MS, b"bench-end", b"{}", 0) for t in (orders, payments)]
        reading = asyncio.create_task(reader.run(len(events), timeout_s=p.spark_duration_s + 120))
        with track("spark: orders and payments, live through timesync", total=len(events), every_s=5) as bar:
            await collect.produce_tagged(bootstrap, events, 0, sent, paced=True, progress=bar.update)
        await collect.produce_markers(bootstrap, markers)
        reader.finish()
        await reading
    ordered_arrived = [reader.arrived[o] for o in sorted(reader.arrived)]
    raw_arrived = await write_arrival_log(bootstrap, raw_log, events, sent, markers)

    # -- Spark: one query at a time over each arrival order --------------------------------------
    per_batch = max(1, round(p.spark_rate_per_s * 2 * p.spark_trigger_ms / 1000))
    running_queries: list[Any] = []
    checkpoints = Path(tempfile.mkdtemp(prefix="timesync-bench-spark-"))
    with track("spark: start the session", total=None):
        if session is None:
            spark = _session(session_timing)
        else:
            spark = await session
        tracker = metrics.track_drops(spark)
    results: dict[str, dict[str, Any]] = {job: {} for job in JOBS}
    try:
        with track("spark: replays (job x side, side by side)", total=len(JOBS) * len(SIDES)) as bar:
            running_queries = []
            for job in JOBS:
                for side, topic, arrived in (
                    ("raw", raw_log, raw_arrived),
                    ("ordered", ordered, ordered_arrived),
                ):
                    batches, query = start_replay(
                        spark,
                        bootstrap,
                        topic,
                        job,
                        orders,
                        payments,
                        per_batch,
                        checkpoints / f"{job}-{side}",
                    )
                    running_queries.append((job, side, topic, arrived, batches, query))
            for n, (job, side, topic, arrived, batches, query) in enumerate(running_queries, 1):
                await asyncio.to_thread(query.awaitTermination)
                last = query.lastProgress
                if last is not None:
                    tracker.wait_for_batch(query, int(last["batchId"]), timeout_s=5)
                expected = len(events) if job == "aggregate" else len(events) // 2
                results[job][side] = summarise(
                    job,
                    batches,
                    batch_ends(query, topic),
                    arrived,
                    metrics.drops(query).watermark,
                    last_ts,
                    expected,
                )
                bar.update(n)
    finally:
        for *_, query in running_queries:
            if query.isActive:
                query.stop()
        metrics.untrack_drops(spark)
        shutil.rmtree(checkpoints, ignore_errors=True)
    for job in JOBS:
        r, o = results[job]["raw"], results[job]["ordered"]
        console.print(
            f"  spark {job:<9} rows dropped: raw {r['rows_dropped']:>6,}  ordered {o['rows_dropped']:>6,}"
            f"   final-result p99: raw {r['final_result_latency']['p99_ms']} ms, "
            f"ordered {o['final_result_latency']['p99_ms']} ms"
        )
    return {
        "workload": "orders on time; payments 50-500 ms later, delivered in bursts every 5 s",
        "records": len(events),
        "duration_s": p.spark_duration_s,
        "sidecar_max_task_idle_ms": p.spark_idle,
        "watermark_delay_ms": WATERMARK_DELAY_MS,
        "records_per_micro_batch": per_batch,
        "window_ms": WINDOW_MS,
        "join_within_ms": JOIN_WITHIN_MS,
        "session_start_s": round(session_timing["s"], 1),
        "session_started_early": session is not None,
        "jobs": results,
    }, spark


def _session(timing: dict[str, float]) -> Any:
    """The benchmark's SparkSession (local[2], progress kept for every micro-batch)."""
    from spark_consumer.session import SessionOptions, get_session

    started = time.monotonic()
    spark = get_session(
        SessionOptions(
            master="local[2]",
            app_name="timesync-bench",
            shuffle_partitions=1,
            conf={
                "spark.sql.streaming.numRecentProgressUpdates": "10000",
                # The replay's figures do not depend on Spark's speed (batches are cut by offsets);
                # these only make it finish sooner: one state partition, the in-memory store
                # (but for the join, whose operator needs RocksDB: start_replay).
                "spark.sql.streaming.stateStore.providerClass": (
                    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
                ),
            },
        )
    )
    timing["s"] = time.monotonic() - started
    return spark
