"""``python -m bench live``: chosen timesync settings on chosen live workloads, several rounds.

The full run's live phase (:mod:`bench.live`) runs every system once per workload; one run's p99
moves by tens of ms and its count of records out of order by several times. To settle a close
call (is ``auto`` beaten on this workload?), this runs only the settings asked for, at the full
run's sizes, in rounds that alternate their order, and reports each setting's medians beside
every round's figures.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import plan as bench_plan
from bench.environment import RunClock
from bench.live import live_run
from bench.progress import console, track
from bench.systems import SystemSpec


def schedule(
    workloads: Sequence[str], idles: Sequence[str], rounds: int
) -> list[tuple[int, str, SystemSpec]]:
    """Every setting on every workload, ``rounds`` times; even rounds run the settings backwards."""
    specs = [SystemSpec("timesync", idle) for idle in idles]
    return [
        (r, name, spec)
        for r in range(1, rounds + 1)
        for name in workloads
        for spec in (specs if r % 2 else specs[::-1])
    ]


def medians(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload and setting: the median p99 and records out of order over its rounds."""
    keys = list(dict.fromkeys((row["workload"], row["idle"]) for row in rows))
    out = []
    for workload, idle in keys:
        mine = [row for row in rows if (row["workload"], row["idle"]) == (workload, idle)]
        out.append(
            {
                "workload": workload,
                "idle": idle,
                "rounds": len(mine),
                "p99_ms": statistics.median(row["p99_ms"] for row in mine),
                "late_records": statistics.median(row["late_records"] for row in mine),
                "p99_ms_runs": [row["p99_ms"] for row in mine],
                "late_records_runs": [row["late_records"] for row in mine],
            }
        )
    return out


def _joined(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Live workloads, {results['rounds']} round(s): timesync at max.task.idle.ms "
        + ", ".join(results["idles"]),
        "",
        f"Full sizes, seed 42; load average {results['load_average_at_start'][0]:.2f} at the start, "
        f"{results['load_average_at_end'][0]:.2f} at the end. Medians over the rounds; every round's "
        "figure beside them.",
        "",
        "| workload | idle | p99 ms | records out of order | p99 per round | out of order per round |",
        "|---|---|---:|---:|---|---|",
    ]
    for m in results["medians"]:
        lines.append(
            f"| {m['workload']} | {m['idle']} | {m['p99_ms']:g} | {m['late_records']:g} | "
            f"{_joined(m['p99_ms_runs'])} | {_joined(m['late_records_runs'])} |"
        )
    return "\n".join(lines) + "\n"


async def run(
    bootstrap: str, workloads: Sequence[str], idles: Sequence[str], rounds: int, out: Path
) -> dict[str, Any]:

    p = bench_plan.plan(bench_plan.RunFlags())
    tag = uuid.uuid4().hex[:6]
    log_dir = out / "live-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    clock = RunClock()
    rows = []
    plan = schedule(workloads, idles, rounds)
    with track("live rounds", total=len(plan)) as bar:
        for i, (round_no, name, spec) in enumerate(plan):
            result, _, _ = await live_run(bootstrap, tag, p, name, spec, log_dir, round_no)
            row = {
                "round": round_no,
                "workload": name,
                "idle": spec.idle,
                "p99_ms": result["latency"]["p99_ms"],
                "late_records": result["disorder"]["late_records"],
                "enforced": result["enforced"],
            }
            console.print(
                f"  {name:<10} idle {spec.idle:<5} p99 {row['p99_ms']} ms  "
                f"out of order {row['late_records']:,}  enforced {row['enforced']:,}  (round {round_no})"
            )
            rows.append(row)
            bar.update(i + 1)
    return {
        "rounds": rounds,
        "workloads": list(workloads),
        "idles": list(idles),
        **clock.stamp(),
        "runs": rows,
        "medians": medians(rows),
    }
