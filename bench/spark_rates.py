"""The Spark jobs' own speed: records/s of ``aggregate``, ``join`` and ``suppress`` in ``local[2]``
over a backlog of the ordered topic with many keys, start-up apart.

Why it is measured: the sidecar moves a backlog at a few hundred thousand records/s per core;
what bounds a pipeline behind it is usually the Spark job. A user sizing one wants that job's
rate, not the sidecar's.

**Workload.** ``orders`` and ``payments`` (3 partitions each, written before the run): each
order a ~220 B JSON value keyed by one of ``Plan.spark_rate_keys`` customers, its payment (same
``id``) 50–500 ms later in event time; ``ORDERS_PER_S`` orders per second of event time. A
sidecar (``max.task.idle.ms=0``) merges both into the ordered topic first; Spark then reads
only that topic.

**Each job as the CLI runs it** (``timesync-spark JOB``: the RocksDB state store with changelog
checkpointing, 2 shuffle partitions, the Kafka sink), one at a time, ``available-now``, in
micro-batches of ``Plan.spark_rate_batch`` records:

* ``aggregate`` — tumbling 10 s windows, count per customer (the Kafka key);
* ``join`` — orders ⋈ payments on ``id`` within 2 s (inner);
* ``suppress`` — tumbling 10 s windows per customer, final results only, TTL 60 s.

**Rate, start-up apart** = the input records of every data batch after the first / the
batches' own execution time (``durationMs.triggerExecution`` of every batch after the first,
no-data batches included: they fire timers and move the watermark). The first batch — plan
analysis, code generation, the state store's creation, the Python workers' start — is reported
apart as ``first_batch_s``, and ``wall_s`` is the query from start to end.

**State rows written per batch** (``state_rows_updated_median``) = the median, over the data
batches after the first, of ``numRowsUpdated`` summed over the batch's stateful operators: what
the state store wrote, which should follow the keys a batch holds (:mod:`bench.spark_state`).

**CPU per record** (``cpu_us_per_record``) = the CPU time of the Spark JVM (``local[2]``: the
driver runs every task) and its Python workers (:mod:`bench.proc_cpu`), read when the first data
batch has reported (polled every ``POLL_S``) and when the query has ended, / the records of the
batches after the first. It includes what the JVM does between batches (its GC, the query's
shutdown), so it is an upper bound of the batches' own CPU.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bench import collect, proc_cpu
from bench.progress import console, track
from bench.systems import SystemSpec, running
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.workloads import Event

if TYPE_CHECKING:
    from bench.plan import Plan

JOBS = ("aggregate", "join", "suppress")
PARTITIONS = 3
ORDERS_PER_S = 2_000
WINDOW = "10s"
JOIN_WITHIN = "2s"
SUPPRESS_TTL = "60s"
POLL_S = 0.05  # how often run_job looks for the first batch's report (its CPU reading's lag)
VALUE_SCHEMA = "ts BIGINT, id STRING, customer STRING, amount DOUBLE, currency STRING, note STRING"
# What the CLI sets for a job (spark_consumer.session defaults); the bench session differs.
JOB_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def orders_and_payments(
    orders: str, payments: str, n_orders: int, keys: int, base_ms: int, seed: int
) -> list[Event]:
    """``n_orders`` orders and as many payments, ~220 B JSON each, keyed by customer; each topic's
    partitions get its records round robin in event-time order (a backlog: ``send_at_ms`` 0)."""
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(n_orders):
        ts = base_ms + i * 1000 // ORDERS_PER_S
        customer = b"c-%05d" % rng.randrange(keys)
        amount = rng.randrange(100, 50_000) / 100
        for topic, at, note in (
            (orders, ts, "placed by web checkout, standard shipping, no gift wrap"),
            (
                payments,
                ts + rng.randrange(50, 500),
                "card payment captured after 3-D Secure, settles next day",
            ),
        ):
            value = orjson.dumps(
                {
                    "ts": at,
                    "id": f"o-{i:09d}",
                    "customer": customer.decode(),
                    "amount": amount,
                    "currency": "EUR",
                    "channel": "web",
                    "note": note,
                    "trace": f"{rng.getrandbits(128):032x}",
                }
            )
            events.append(Event(topic, i % PARTITIONS, at, customer, value, 0))
    # A topic partition's records in event-time order, as their producers wrote them.
    events.sort(key=lambda e: (e.topic, e.partition, e.ts))
    return events


def job_args(
    job: str,
    bootstrap: str,
    topic: str,
    out: str,
    orders: str,
    payments: str,
    ttl: str = SUPPRESS_TTL,
    within: str = JOIN_WITHIN,
) -> list[str]:
    """The ``timesync-spark`` command line of one measured job (``ttl``: suppress's, ``within``:
    join's)."""
    common = [
        "--bootstrap-servers", bootstrap, "--topic", topic, "--output-topic", out,
        "--value-schema", VALUE_SCHEMA, "--trigger", "available-now",
    ]  # fmt: skip
    if job == "aggregate":
        return ["aggregate", *common, "--size", WINDOW]
    if job == "join":
        return ["join", *common, "--left", orders, "--right", payments, "--within", within,
                "--key-field", "id"]  # fmt: skip
    return ["suppress", *common, "--size", WINDOW, "--ttl", ttl]


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """A source offset of a progress report: JSON text or already parsed, ``{topic: {partition:
    offset}}``; ``None`` (or JSON ``null``: before the first batch) is no offsets."""
    parsed = orjson.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(parsed, dict):
        return {}
    return {topic: dict(parts) for topic, parts in parsed.items() if isinstance(parts, dict)}


def _topic_records(batch: dict[str, Any]) -> int:
    """Records of the ordered topic a batch read: its end offsets minus its start offsets (none
    before the first batch: the topic starts at 0). Not ``numInputRows``: a join reads the topic
    once per side, and Spark counts the rows of every scan of a source."""
    sources = batch.get("sources") or []
    if not sources or sources[0].get("endOffset") is None:
        return int(batch.get("numInputRows") or 0)
    end, start = _offsets(sources[0]["endOffset"]), _offsets(sources[0].get("startOffset"))
    return sum(
        int(offset) - int(start.get(topic, {}).get(part, 0))
        for topic, parts in end.items()
        for part, offset in parts.items()
    )


def rows_updated(batch: dict[str, Any]) -> int:
    """State rows a batch wrote: ``numRowsUpdated`` summed over its stateful operators."""
    return sum(int(op.get("numRowsUpdated") or 0) for op in batch.get("stateOperators") or [])


def rows_updated_median(batches: list[dict[str, Any]]) -> int | None:
    """The median state rows written per batch over those of ``batches`` that read records."""
    updated = [rows_updated(b) for b in batches if _topic_records(b)]
    return statistics.median_low(updated) if updated else None


def rate(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Rate with start-up apart, from a query's progress reports (see the module docstring)."""
    batches = sorted(progress, key=lambda b: int(b["batchId"]))
    data = [b for b in batches if _topic_records(b)]
    if not data:
        return {"records_per_s": None, "first_batch_s": None, "micro_batches": 0, "records": 0}
    first = data[0]
    later = [b for b in batches if int(b["batchId"]) > int(first["batchId"])]
    rows = sum(_topic_records(b) for b in later)
    ms = sum(int(b["durationMs"].get("triggerExecution", 0)) for b in later)
    return {
        "records_per_s": round(rows * 1000 / ms) if rows and ms else None,
        "first_batch_s": round(int(first["durationMs"].get("triggerExecution", 0)) / 1000, 2),
        "micro_batches": len(data),
        "records": sum(_topic_records(b) for b in data),
        "records_after_first_batch": rows,
        "seconds_after_first_batch": round(ms / 1000, 2),
        "state_rows_updated_median": rows_updated_median(later),
        "time_split_ms": time_split(later),
    }


#: ``durationMs`` parts of a micro-batch outside the plan's execution (``addBatch``): fixed costs
#: per batch, whatever its size — finding the offsets, planning, the offset and commit logs.
BATCH_OVERHEAD = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "commitOffsets")


def time_split(batches: list[dict[str, Any]]) -> dict[str, int]:
    """Where ``batches`` spent their ``triggerExecution``, summed over them (ms): ``addBatch`` (the
    plan's execution: read, shuffle, state, sink), each :data:`BATCH_OVERHEAD` part, ``other`` (the
    rest); and, apart, the state operators' own time summed over their tasks (``state_updates``,
    ``state_removals``, ``state_commit``: task time, inside ``addBatch``, and with two tasks at
    once it can exceed it) and ``batches``, how many were summed."""
    total = sum(int(b["durationMs"].get("triggerExecution", 0)) for b in batches)
    parts = ("addBatch", *BATCH_OVERHEAD)
    split = {part: sum(int(b["durationMs"].get(part, 0)) for b in batches) for part in parts}
    split["other"] = max(0, total - sum(split.values()))
    operators = [op for b in batches for op in b.get("stateOperators") or []]
    for name, key in (("state_updates", "allUpdatesTimeMs"), ("state_removals", "allRemovalsTimeMs"),
                      ("state_commit", "commitTimeMs")):  # fmt: skip
        split[name] = sum(int(op.get(key) or 0) for op in operators)
    split["batches"] = len(batches)
    split["trigger_execution"] = total
    return split


def first_data_batch_done(progress: list[dict[str, Any]]) -> bool:
    """Whether a data batch has reported (the first one: start-up, left out of the CPU figure)."""
    return any(_topic_records(b) for b in progress)


def cpu_per_record(before: float | None, after: float | None, records: int | None) -> dict[str, Any]:
    """CPU of the Spark JVM and its Python workers over the batches after the first, per record
    of those batches; ``None`` when either reading or the records are missing."""
    if before is None or after is None or not records:
        return {"cpu_s_after_first_batch": None, "cpu_us_per_record": None}
    return {
        "cpu_s_after_first_batch": round(after - before, 2),
        "cpu_us_per_record": round((after - before) * 1e6 / records, 2),
    }


def jvm_pid(spark: Any) -> int | None:
    """The pid of the JVM behind ``spark``: the process py4j started, else this process's child
    running ``SparkSubmit``; ``None`` when neither is found (an attached JVM: no CPU figure)."""
    process = getattr(getattr(spark.sparkContext, "_gateway", None), "java_process", None)
    pid = getattr(process, "pid", None)
    return int(pid) if pid else proc_cpu.spark_jvm_child()


def run_job(
    spark: Any,
    args: list[str],
    checkpoint: Path,
    per_batch: int,
    more: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
    conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one job to the end of its input (blocking); its rate figures and wall time, and what
    ``more`` reads off the query's progress reports. ``conf`` overrides :data:`JOB_CONF`."""
    from spark_consumer import cli, sinks

    plan = cli.Plan(cli.build_parser().parse_args([*args, "--checkpoint", str(checkpoint),
                                                   "--max-offsets-per-trigger", str(per_batch)]))  # fmt: skip
    job_conf = {**JOB_CONF, **(conf or {})}
    previous = {key: spark.conf.get(key, None) for key in job_conf}
    for key, value in job_conf.items():
        spark.conf.set(key, value)
    try:
        started = time.monotonic()
        query = sinks.start(cli.job_output(plan, spark), plan.sink)
        pid = jvm_pid(spark)
        cpu_at_first: float | None = None
        # Poll rather than block: the JVM's CPU is read once the first data batch has reported.
        while query.isActive:
            if cpu_at_first is None and pid is not None and first_data_batch_done(list(query.recentProgress)):
                cpu_at_first = proc_cpu.tree_cpu_s(pid)
            time.sleep(POLL_S)
        query.awaitTermination()  # ended: raises what the query failed with, as before
        cpu_at_end = proc_cpu.tree_cpu_s(pid) if pid is not None else None
        wall = time.monotonic() - started
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"spark {plan.job}: {error}")
        progress: list[dict[str, Any]] = list(query.recentProgress)
        r = {**rate(progress), **(more(progress) if more else {})}
        return {**r, **cpu_per_record(cpu_at_first, cpu_at_end, r.get("records_after_first_batch")),
                "wall_s": round(wall, 1)}  # fmt: skip
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


async def ordered_backlog(
    bootstrap: str, prefix: str, records: int, keys: int, seed: int, log_dir: Path, outputs: Sequence[str]
) -> tuple[str, str, str, int]:
    """Write ``records`` orders and payments, order them with a sidecar (idle 0) into
    ``<prefix>-ordered``; create the ``outputs`` topics too. (orders, payments, ordered, records)."""
    orders, payments, ordered = f"{prefix}-orders", f"{prefix}-payments", f"{prefix}-ordered"
    await kafka_io.create_topics(
        bootstrap,
        [TopicSpec(orders, PARTITIONS), TopicSpec(payments, PARTITIONS), TopicSpec(ordered)]
        + [TopicSpec(out) for out in outputs],
    )
    n_orders = records // 2
    events = orders_and_payments(orders, payments, n_orders, keys, collect.now_ms() - n_orders, seed)
    with track("spark rates: write the backlog", total=len(events)) as bar:
        await kafka_io.produce(bootstrap, events, progress=bar.update)
    spec = SystemSpec("timesync", "0")
    async with running(spec, bootstrap, [orders, payments], ordered, f"{prefix}-order", log_dir):
        with track("spark rates: order it with timesync", total=None):
            done = await collect.wait_for_count(bootstrap, ordered, 1, len(events), timeout_s=600, poll_s=0.5)
    if done is None:
        raise RuntimeError(f"spark rates: the sidecar did not write {len(events):,} records in 600 s")
    return orders, payments, ordered, len(events)


async def spark_rates_phase(bootstrap: str, tag: str, p: Plan, spark: Any, log_dir: Path) -> dict[str, Any]:
    """Write the backlog, order it with the sidecar, then run every job over the ordered topic."""
    prefix = f"bench-{tag}-rates"
    orders, payments, ordered, n_records = await ordered_backlog(
        bootstrap, prefix, p.spark_rate_records, p.spark_rate_keys, p.seed, log_dir,
        [f"{prefix}-{job}-out" for job in JOBS],
    )  # fmt: skip
    checkpoints = Path(tempfile.mkdtemp(prefix="timesync-bench-rates-"))
    jobs: dict[str, dict[str, Any]] = {}
    try:
        with track("spark rates: one job at a time", total=len(JOBS)) as bar:
            for n, job in enumerate(JOBS, 1):
                args = job_args(job, bootstrap, ordered, f"{prefix}-{job}-out", orders, payments)
                jobs[job] = await asyncio.to_thread(
                    run_job, spark, args, checkpoints / job, p.spark_rate_batch
                )
                bar.update(n)
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)
    for job, r in jobs.items():
        console.print(
            f"  spark {job:<9} {r['records_per_s'] or 0:>9,} records/s after the first batch "
            f"(first batch {r['first_batch_s']} s, wall {r['wall_s']} s, {r['micro_batches']} batches)"
        )
    return {
        "workload": (
            f"orders and payments (~220 B JSON, {p.spark_rate_keys:,} customers), ordered by timesync "
            "idle 0, read by each job as the CLI runs it (RocksDB state store, 2 shuffle partitions, "
            "Kafka sink), local[2], available-now"
        ),
        "records": n_records,
        "keys": p.spark_rate_keys,
        "records_per_micro_batch": p.spark_rate_batch,
        "window": WINDOW,
        "join_within": JOIN_WITHIN,
        "suppress_ttl": SUPPRESS_TTL,
        "jobs": jobs,
    }
