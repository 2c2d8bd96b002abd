"""``python -m bench spark-knobs``: what a user can set for ``join`` and ``aggregate``, measured.

The bench's Spark-jobs phase (:mod:`bench.spark_rates`) says how fast each job runs as the CLI
runs it, and where its micro-batches spend their time (``time_split_ms``). This command runs the
same jobs over the same ordered backlog with the two settings a user reaches for first, one at
a time against the bench's own (50,000 records per micro-batch, 2 shuffle partitions):

* the micro-batch size, ``--max-offsets-per-trigger`` (10,000 / 50,000 / 200,000): every batch
  pays fixed costs whatever its size (finding offsets, planning, the offset and commit logs, the
  state store's commit), so larger batches spread them over more records — at the price of
  latency and of memory per batch;
* ``--shuffle-partitions`` (2 / 8): the state's partitions, each one task and one state-store
  commit per batch.

Each row is one job at one setting: records/s after the first batch, CPU µs per record, and the
per-batch time split, as in the bench. ``local[2]``, RocksDB with changelog checkpointing, the
Kafka sink, ``available-now``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.environment import RunClock
from bench.progress import console, track
from bench.spark_rates import BATCH_OVERHEAD, job_args, ordered_backlog, run_job

JOBS = ("aggregate", "join")


@dataclass(frozen=True)
class Setting:
    label: str
    per_batch: int
    shuffle_partitions: int


BENCH = Setting("bench's: 50,000 per batch, 2 shuffle partitions", 50_000, 2)
SETTINGS = (
    Setting("10,000 per batch", 10_000, 2),
    BENCH,
    Setting("200,000 per batch", 200_000, 2),
    Setting("8 shuffle partitions", 50_000, 8),
)


def per_batch_ms(split: dict[str, int] | None) -> dict[str, int] | None:
    """The time split per batch (ms, rounded): execution, fixed costs, state commit."""
    if not split or not split.get("batches"):
        return None
    n = split["batches"]
    fixed = sum(split.get(k, 0) for k in BATCH_OVERHEAD)
    return {
        "batch": round(split["trigger_execution"] / n),
        "execution": round(split["addBatch"] / n),
        "fixed": round(fixed / n),
        "state_commit": round(split.get("state_commit", 0) / n),
    }


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Spark jobs: micro-batch size and shuffle partitions ({results['records']:,} records, "
        f"{results['keys']:,} keys)",
        "",
        f"local[2], load average {results['load_average_at_start'][0]:.2f} at the start and "
        f"{results['load_average_at_end'][0]:.2f} at the end. Per batch: its mean time, of it the "
        "plan's execution (addBatch) and the fixed costs (offsets, planning, offset and commit "
        "logs), and the state store's commit (task time, inside the execution).",
        "",
        "| job | setting | records/s after the first batch | CPU µs/record | batch ms | execution ms "
        "| fixed ms | state commit ms | batches |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["runs"]:
        r, split = row["result"], per_batch_ms(row["result"].get("time_split_ms")) or {}
        cells = [r["records_per_s"], r.get("cpu_us_per_record"), split.get("batch"), split.get("execution"),
                 split.get("fixed"), split.get("state_commit"), r["micro_batches"]]  # fmt: skip
        lines.append(f"| {row['job']} | {row['setting']} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


async def run(bootstrap: str, spark: Any, records: int, keys: int, out: Path) -> dict[str, Any]:
    """Every job at every setting over one ordered backlog (see the module docstring)."""
    tag = uuid.uuid4().hex[:6]
    prefix = f"bench-{tag}-knobs"
    log_dir = out / "spark-knobs-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    clock = RunClock()
    plan = [(job, s) for s in SETTINGS for job in JOBS]
    outputs = [f"{prefix}-{job}-{i}" for i, (job, _) in enumerate(plan)]
    orders, payments, ordered, n_records = await ordered_backlog(
        bootstrap, prefix, records, keys, 42, log_dir, outputs
    )
    checkpoints = Path(tempfile.mkdtemp(prefix="timesync-bench-knobs-"))
    runs = []
    try:
        with track("spark knobs: job × setting", total=len(plan)) as bar:
            for i, (job, setting) in enumerate(plan):
                args = job_args(job, bootstrap, ordered, outputs[i], orders, payments)
                conf = {"spark.sql.shuffle.partitions": str(setting.shuffle_partitions)}
                result = await asyncio.to_thread(
                    run_job, spark, args, checkpoints / str(i), setting.per_batch, None, conf
                )
                console.print(
                    f"  {job:<9} {setting.label:<48} {result['records_per_s'] or 0:>9,} records/s "
                    f"({result['micro_batches']} batches)"
                )
                runs.append({"job": job, "setting": setting.label, "per_batch": setting.per_batch,
                             "shuffle_partitions": setting.shuffle_partitions, "result": result})  # fmt: skip
                bar.update(i + 1)
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)
    return {
        "records": n_records,
        "keys": keys,
        **clock.stamp(),
        "runs": runs,
    }
