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

The workload and the two arrival orders are :mod:`bench.spark_arrivals`'s; one replay and its
figures, :mod:`bench.spark_replay`'s. This module runs the phase.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench import collect
from bench.progress import console, track
from bench.spark_arrivals import ArrivalReader, orders_and_payments, write_arrival_log
from bench.spark_replay import (
    JOIN_WITHIN_MS,
    WATERMARK_DELAY_MS,
    WINDOW_MS,
    batch_ends,
    start_replay,
    summarise,
)
from bench.systems import SystemSpec, running
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.workloads import Event

if TYPE_CHECKING:
    from bench.plan import Plan

MARKER_AHEAD_MS = 10_000
JOBS = ("aggregate", "join")
SIDES = ("raw", "ordered")


@dataclass(frozen=True, slots=True)
class Topics:
    """The phase's four topics: the two inputs, the ordered topic and the raw arrival log."""

    orders: str
    payments: str
    ordered: str
    raw_log: str

    @classmethod
    def of(cls, tag: str) -> Topics:
        prefix = f"bench-{tag}-spark"
        return cls(f"{prefix}-orders", f"{prefix}-payments", f"{prefix}-ordered", f"{prefix}-raw-arrival")


@dataclass(frozen=True, slots=True)
class Arrived:
    """The live part's outcome: the events, their last event time, and when each record of both
    arrival orders arrived (per offset)."""

    events: list[Event]
    last_ts: int
    raw: list[int]
    ordered: list[int]


class EarlySession:
    """A SparkSession being started in a thread (``--quick`` starts it before the live runs: a
    JVM costs 10-40 s here, and the quick run's figures are not for comparison anyway)."""

    def __init__(self) -> None:
        self.timing: dict[str, float] = {}
        self.task = asyncio.create_task(asyncio.to_thread(_session, self.timing))

    def __await__(self) -> Any:
        return self.task.__await__()


async def live_part(bootstrap: str, tag: str, p: Plan, out_dir: Path, topics: Topics) -> Arrived:
    """The workload written live through one sidecar; then the raw arrival log."""
    orders, payments, ordered = topics.orders, topics.payments, topics.ordered
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
    raw_arrived = await write_arrival_log(bootstrap, topics.raw_log, events, sent, markers)
    return Arrived(events, last_ts, raw_arrived, ordered_arrived)


async def replays(
    spark: Any, bootstrap: str, topics: Topics, arrived: Arrived, per_batch: int, tracker: Any
) -> dict[str, dict[str, Any]]:
    """Every job over each arrival order, side by side; each replay's figures (:func:`summarise`)."""
    from spark_consumer import metrics

    results: dict[str, dict[str, Any]] = {job: {} for job in JOBS}
    running_queries: list[Any] = []
    checkpoints = Path(tempfile.mkdtemp(prefix="timesync-bench-spark-"))
    events = arrived.events
    try:
        with track("spark: replays (job x side, side by side)", total=len(JOBS) * len(SIDES)) as bar:
            running_queries = []
            for job in JOBS:
                for side, topic, at in (
                    ("raw", topics.raw_log, arrived.raw),
                    ("ordered", topics.ordered, arrived.ordered),
                ):
                    batches, query = start_replay(
                        spark,
                        bootstrap,
                        topic,
                        job,
                        topics.orders,
                        topics.payments,
                        per_batch,
                        checkpoints / f"{job}-{side}",
                    )
                    running_queries.append((job, side, topic, at, batches, query))
            for n, (job, side, topic, at, batches, query) in enumerate(running_queries, 1):
                await asyncio.to_thread(query.awaitTermination)
                last = query.lastProgress
                if last is not None:
                    tracker.wait_for_batch(query, int(last["batchId"]), timeout_s=5)
                expected = len(events) if job == "aggregate" else len(events) // 2
                results[job][side] = summarise(
                    job,
                    batches,
                    batch_ends(query, topic),
                    at,
                    metrics.drops(query).watermark,
                    arrived.last_ts,
                    expected,
                )
                bar.update(n)
    finally:
        for *_, query in running_queries:
            if query.isActive:
                query.stop()
        metrics.untrack_drops(spark)
        shutil.rmtree(checkpoints, ignore_errors=True)
    return results


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

    topics = Topics.of(tag)
    await kafka_io.create_topics(
        bootstrap, [TopicSpec(t) for t in (topics.orders, topics.payments, topics.ordered, topics.raw_log)]
    )

    if session is not None:
        session_timing = session.timing

    arrived = await live_part(bootstrap, tag, p, out_dir, topics)

    # -- Spark: one query at a time over each arrival order --------------------------------------
    per_batch = max(1, round(p.spark_rate_per_s * 2 * p.spark_trigger_ms / 1000))
    with track("spark: start the session", total=None):
        if session is None:
            spark = _session(session_timing)
        else:
            spark = await session
        tracker = metrics.track_drops(spark)
    results = await replays(spark, bootstrap, topics, arrived, per_batch, tracker)
    for job in JOBS:
        r, o = results[job]["raw"], results[job]["ordered"]
        console.print(
            f"  spark {job:<9} rows dropped: raw {r['rows_dropped']:>6,}  ordered {o['rows_dropped']:>6,}"
            f"   final-result p99: raw {r['final_result_latency']['p99_ms']} ms, "
            f"ordered {o['final_result_latency']['p99_ms']} ms"
        )
    return {
        "workload": "orders on time; payments 50-500 ms later, delivered in bursts every 5 s",
        "records": len(arrived.events),
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
                # (but for the join, whose operator needs RocksDB: spark_replay.start_replay).
                "spark.sql.streaming.stateStore.providerClass": (
                    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
                ),
            },
        )
    )
    timing["s"] = time.monotonic() - started
    return spark
