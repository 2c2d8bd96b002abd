"""``python -m bench run``: every system on every workload, one at a time, on one broker.

The phases, in this order, all on the same broker:

0. **extractors** (:mod:`bench.extractors`) — in-process, no broker: what each
   ``timestamp.extractor`` costs per record;
1. **throughput** (:mod:`bench.throughput`) — per record shape, a backlog written up front that
   every system drains from the beginning, beside Kafka's own tools (the ceiling);
2. **extractors_e2e** (:mod:`bench.extractors_e2e`) — the sidecar draining the same records with
   each ``timestamp.extractor``: records/s and CPU per record end to end (a registry started for
   ``avro:`` and ``protobuf:``);
3. **curves** (:mod:`bench.curves`) — the same drain over more partitions and larger records;
4. **live** (:mod:`bench.live`) — every workload written at its arrival times, per system;
5. **spark** (:mod:`bench.spark_bench`, :mod:`bench.spark_rates`) — the raw inputs against the
   ordered topic, and each Spark job's own rate.

:func:`run` runs them and assembles ``results.json`` (its schema: bench/README.md and
``bench/results.schema.json``), with the machine and versions (:mod:`bench.environment`) and
the goals (:mod:`bench.goals`). Runs are strictly sequential (this is a 2-core machine): a
system runs alone with the producer.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import ceiling as bench_ceiling
from bench import curves, extractors, extractors_e2e
from bench.environment import environment
from bench.live import live_phase
from bench.plan import Plan
from bench.progress import console, track
from bench.throughput import throughput_phase

SCHEMA_VERSION = 2


class PhaseClock:
    """Each phase's wall time in seconds (results.json's ``phase_s``), in the order they ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        mark = time.monotonic()
        yield
        self.seconds[name] = round(time.monotonic() - mark, 1)


async def run(bootstrap: str, p: Plan, out_dir: Path) -> dict[str, Any]:
    """Run the plan against ``bootstrap``; return results (see bench/README.md for the schema)."""
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started = time.time()
    tag = uuid.uuid4().hex[:6]
    machine, versions = environment()
    log_dir = out_dir / "logs"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    console.print(f"[bold]timesync bench[/] run {tag} ({'quick' if p.quick else 'full'}), broker {bootstrap}")
    clock = PhaseClock()
    build_tools(clock)
    with clock.phase("extractors"), track("timestamp extractors (in-process)", total=None):
        extractor_costs = extractors.run(p.extractor_records, p.extractor_repeats, p.seed)
    with clock.phase("throughput"):
        throughput = await throughput_phase(bootstrap, tag, p, log_dir)
    with clock.phase("extractors_e2e"), track("timestamp extractors (end to end)", total=None):
        extractors_end_to_end = await extractors_e2e.e2e_phase(bootstrap, p, log_dir)
    cost_curves = None
    if p.curves:
        with clock.phase("curves"):
            cost_curves = await curves.curves_phase(bootstrap, tag, p, log_dir)
    early = None
    if p.spark and p.quick:
        from bench import spark_bench

        early = spark_bench.EarlySession()
    live: list[dict[str, Any]] = []
    if p.live:
        with clock.phase("live"):
            live = await live_phase(bootstrap, tag, p, log_dir)
    spark = spark_jobs = None
    if p.spark:
        spark, spark_jobs = await spark_phases(bootstrap, tag, p, out_dir, early, clock)
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": tag,
        "quick": p.quick,
        "seed": p.seed,
        "started_at": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "machine": machine,
        "versions": versions,
        "kafka_streams_build_s": clock.seconds["kafka_streams_build"],
        "phase_s": clock.seconds,
        "load_average_at_end": list(os.getloadavg()),
        "sizes": p.sizes.as_json(),
        "throughput": throughput,
        "curves": cost_curves,
        "workloads": live,
        "spark": spark,
        "spark_jobs": spark_jobs,
        "extractors": extractor_costs,
        "extractors_e2e": extractors_end_to_end,
    }
    from bench.goals import goals

    results["goals"] = goals(results)
    return results


def build_tools(clock: PhaseClock) -> None:
    """The Kafka Streams peer's jar and Kafka's perf tools (built or fetched once, then cached)."""
    from bench.peers.kafka_streams import build

    with track("kafka streams peer: build (cached)", total=None), clock.phase("kafka_streams_build"):
        build()
        bench_ceiling.fetch_tools()


async def spark_phases(
    bootstrap: str, tag: str, p: Plan, out_dir: Path, early: Any, clock: PhaseClock
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Spark part (raw inputs against the ordered topic), then each job's own rate on the
    same session, and (full runs) suppress and join with many keys remembered."""
    from bench import spark_bench, spark_rates

    log_dir = out_dir / "logs"
    with clock.phase("spark"):
        spark, session = await spark_bench.spark_phase(bootstrap, tag, p, out_dir, early)
    with clock.phase("spark_jobs"):
        spark_jobs = await spark_rates.spark_rates_phase(bootstrap, tag, p, session, log_dir)
    if p.spark_state:
        from bench import spark_state

        with clock.phase("spark_state"):
            # suppress_keys_remembered, join_keys_remembered: beside each job's figures above
            spark_jobs.update(
                await spark_state.spark_state_phase(bootstrap, tag, p, session, log_dir, spark_jobs["jobs"])
            )
    return spark, spark_jobs
