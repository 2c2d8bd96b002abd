"""``suppress`` and ``join`` with many keys remembered: do their rates hold when the state store
holds 1,000,000 keys and only those of the active records are touched?

Why it is measured: ``suppress`` keeps one state row per key until the key's TTL (in event time)
evicts it, and ``join`` one per key until the watermark passes its records by ``--within``, so a
long TTL or bound over many keys makes a large RocksDB store. A job whose every batch touched
every remembered key would slow down as the store grows (Spark's own stream-stream join scanned
its whole state for eviction in every batch); the operators should write only the rows of the
keys a batch holds.

**Workload**, on one backlog ordered by a sidecar (``max.task.idle.ms=0``) as in
:mod:`bench.spark_rates`:

1. *remember*: ``Plan.spark_state_keys`` records, one per distinct key (``r-0000000``…), the
   same ~220 B JSON order shape, ``REMEMBER_PER_S`` records per second of event time;
2. *active*: then the workload of :mod:`bench.spark_rates` (orders and payments over
   ``Plan.spark_rate_keys`` customers, ``Plan.spark_rate_records`` records), later in event time.

``suppress`` runs over it as the CLI runs it, in batches of ``Plan.spark_rate_batch`` records,
with a TTL (``TTL``) longer than the whole backlog's event time, so no remembered key is evicted;
then ``join`` over the same topic, keyed by order ``id`` (every remembered record is its own key,
on the left side), with a bound (``JOIN_WITHIN``) as long, so no remembered record is evicted.

**Rate in the active phase** = the records of the active phase's batches after its first /
those batches' ``durationMs.triggerExecution``. A batch is in the active phase when it starts at
or beyond offset ``remember`` records of the ordered topic (one partition; a heartbeat the sidecar
writes between would shift the boundary by that many records, and the first active batch is left
out anyway). **State rows written per batch** = the sum of ``numRowsUpdated`` over the batch's
``stateOperators``, for each active batch after the first; each job's figure sits beside its
rate and rows over the active keys alone (:mod:`bench.spark_rates`).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bench import collect, spark_rates
from bench.progress import console, track
from bench.systems import SystemSpec, running
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.workloads import Event

if TYPE_CHECKING:
    from bench.plan import Plan

REMEMBER_PER_S = 20_000  # remembered keys' records per second of event time (1M keys: 50 s)
TTL = "3600s"  # longer than the whole backlog's event time: no remembered key is evicted
JOIN_WITHIN = TTL  # the same for join's held records
JOBS = ("suppress", "join")
CHUNK = 100_000  # records produced at a time (the remember phase is never all in memory)


def remember_events(topic: str, keys: int, start: int, stop: int, base_ms: int, seed: int) -> list[Event]:
    """Records ``start``..``stop`` of the remember phase: record ``i`` is key ``r-<i>``'s only one,
    at ``base_ms + i / REMEMBER_PER_S`` s, on partition ``i % PARTITIONS`` (each partition in
    event-time order). ``keys`` is the phase's size (it sets the key's width)."""
    rng = random.Random(seed * 1_000_003 + start)
    width = len(str(keys - 1))
    events = []
    for i in range(start, min(stop, keys)):
        ts = base_ms + i * 1000 // REMEMBER_PER_S
        key = f"r-{i:0{width}d}"
        value = orjson.dumps(
            {
                "ts": ts,
                "id": f"m-{i:09d}",
                "customer": key,
                "amount": rng.randrange(100, 50_000) / 100,
                "currency": "EUR",
                "channel": "web",
                "note": "placed by web checkout, standard shipping, no gift wrap",
                "trace": f"{rng.getrandbits(128):032x}",
            }
        )
        events.append(Event(topic, i % spark_rates.PARTITIONS, ts, key.encode(), value, 0))
    return events


def _start_offset(batch: dict[str, Any]) -> int:
    """The ordered topic's offset (summed over partitions) a batch started at; 0 for the first."""
    sources = batch.get("sources") or []
    start = spark_rates._offsets(sources[0].get("startOffset")) if sources else {}
    return sum(int(o) for parts in start.values() for o in parts.values())


def active_phase(progress: list[dict[str, Any]], boundary: int) -> dict[str, Any]:
    """The active phase's rate and state rows written, from a query's progress reports (see the
    module docstring): batches starting at or beyond offset ``boundary``, the first one left out."""
    batches = sorted(progress, key=lambda b: int(b["batchId"]))
    active = [b for b in batches if _start_offset(b) >= boundary and int(b["batchId"]) > 0]
    data = [b for b in active if spark_rates._topic_records(b)]
    later = [b for b in active if data and int(b["batchId"]) > int(data[0]["batchId"])]
    rows = sum(spark_rates._topic_records(b) for b in later)
    ms = sum(int(b["durationMs"].get("triggerExecution", 0)) for b in later)
    updated = [spark_rates.rows_updated(b) for b in later if spark_rates._topic_records(b)]
    return {
        "records_per_s": round(rows * 1000 / ms) if rows and ms else None,
        "micro_batches": len(data),
        "records_after_first_batch": rows,
        "seconds_after_first_batch": round(ms / 1000, 2),
        "state_rows_updated_per_batch": updated,
        "state_rows_updated_median": statistics.median_low(updated) if updated else None,
    }


async def spark_state_phase(
    bootstrap: str, tag: str, p: Plan, spark: Any, log_dir: Path, active_only: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Write both phases, order them with the sidecar, run ``suppress`` then ``join`` over the
    ordered topic; ``{job}_keys_remembered``: each job's active-phase figures beside
    ``active_only[job]`` (its figures over the active keys alone, :mod:`bench.spark_rates`)."""
    prefix = f"bench-{tag}-state"
    orders, payments, ordered = f"{prefix}-orders", f"{prefix}-payments", f"{prefix}-ordered"
    await kafka_io.create_topics(
        bootstrap,
        [
            TopicSpec(orders, spark_rates.PARTITIONS),
            TopicSpec(payments, spark_rates.PARTITIONS),
            TopicSpec(ordered),
            *(TopicSpec(f"{prefix}-{job}-out") for job in JOBS),
        ],
    )
    total = await _write_backlog(bootstrap, p, orders, payments)
    spec = SystemSpec("timesync", "0")
    async with running(spec, bootstrap, [orders, payments], ordered, f"{tag}-state", log_dir):
        with track("spark state: order it with timesync", total=None):
            ok = await collect.wait_for_count(bootstrap, ordered, 1, total, timeout_s=900, poll_s=0.5)
    if ok is None:
        raise RuntimeError(f"spark state: the sidecar did not write {total:,} records in 900 s")
    out: dict[str, dict[str, Any]] = {}
    for job in JOBS:
        args = spark_rates.job_args(
            job, bootstrap, ordered, f"{prefix}-{job}-out", orders, payments, ttl=TTL, within=JOIN_WITHIN
        )
        r = await _run(job, spark, args, p)
        out[f"{job}_keys_remembered"] = _summary(job, r, p, total, active_only.get(job) or {})
    return out


def _summary(job: str, r: dict[str, Any], p: Plan, total: int, alone: dict[str, Any]) -> dict[str, Any]:
    """One job's remembered-keys figures, printed and as ``results.json`` keeps them."""
    a = r["active"]
    keys = p.spark_state_keys
    ratio = _ratio(a["records_per_s"], alone.get("records_per_s"))
    rows_ratio = _ratio(a["state_rows_updated_median"], alone.get("state_rows_updated_median"))
    console.print(
        f"  spark {job}, {keys:,} keys remembered: {a['records_per_s'] or 0:,} records/s in the active "
        f"phase ({ratio}× its active-keys-only figure), median {a['state_rows_updated_median']} "
        f"state rows written per batch ({rows_ratio}× its active-keys-only figure)"
    )
    bound = f"TTL {TTL}" if job == "suppress" else f"--within {JOIN_WITHIN}, keyed by order id"
    return {
        "workload": (
            f"{keys:,} records of distinct keys, then the spark-jobs workload over "
            f"{p.spark_rate_keys:,} customers; {job} with {bound}"
        ),
        "keys_remembered": keys,
        "keys_active": p.spark_rate_keys,
        "records": total,
        "ttl": TTL,
        "within": JOIN_WITHIN,
        "records_per_micro_batch": p.spark_rate_batch,
        **a,
        "whole_query": {k: v for k, v in r.items() if k != "active"},
        "vs_active_keys_only": ratio,
        "state_rows_vs_active_keys_only": rows_ratio,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


async def _write_backlog(bootstrap: str, p: Plan, orders: str, payments: str) -> int:
    """One order per remembered key, then the active phase (orders and payments over
    ``p.spark_rate_keys`` customers); the records written."""
    keys = p.spark_state_keys
    n_orders = p.spark_rate_records // 2
    remember_ms = keys * 1000 // REMEMBER_PER_S
    base = collect.now_ms() - remember_ms - n_orders - 60_000
    active = spark_rates.orders_and_payments(
        orders, payments, n_orders, p.spark_rate_keys, base + remember_ms + 1000, p.seed
    )
    total = keys + len(active)
    with track("spark state: write the backlog", total=total) as bar:

        def after(done: int) -> Callable[[int], None]:
            return lambda n: bar.update(done + n)

        for start in range(0, keys, CHUNK):
            chunk = remember_events(orders, keys, start, start + CHUNK, base, p.seed)
            await kafka_io.produce(bootstrap, chunk, progress=after(start))
        await kafka_io.produce(bootstrap, active, progress=after(keys))
    return total


async def _run(job: str, spark: Any, args: list[str], p: Plan) -> dict[str, Any]:
    """``job`` over the ordered topic; the whole query's figures and the active phase's."""
    checkpoint = Path(tempfile.mkdtemp(prefix="timesync-bench-state-"))
    try:
        with track(f"spark state: {job} over the remembered keys", total=None):
            result: dict[str, Any] = await asyncio.to_thread(
                spark_rates.run_job,
                spark,
                args,
                checkpoint / job,
                p.spark_rate_batch,
                lambda progress: {"active": active_phase(progress, p.spark_state_keys)},
            )
            return result
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
